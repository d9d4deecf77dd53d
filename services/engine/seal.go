package engine

import (
	"encoding/json"
	"fmt"

	"lifeline/models"
)

// Sealer keeps secret values encrypted at rest (models.Sealer: Seal and Open of raw JSON
// bound to the row's identity).
type Sealer = models.Sealer

// aad names a JSON column of one row: what an envelope is bound to.
func aad(table, id, column string) string { return table + ":" + id + ":" + column }

// seal encrypts the secret values of raw for the column of a row (no-op without a Sealer).
func (e *secrets) seal(raw []byte, table, id, column string) ([]byte, error) {
	if e.sealer == nil || len(raw) == 0 {
		return raw, nil
	}
	out, err := e.sealer.Seal(raw, aad(table, id, column))
	if err != nil {
		return nil, fmt.Errorf("encrypt %s.%s: %w", table, column, err)
	}
	return out, nil
}

// openRaw decrypts what seal encrypted.
func (e *secrets) openRaw(raw []byte, table, id, column string) ([]byte, error) {
	if e.sealer == nil || len(raw) == 0 {
		return raw, nil
	}
	out, err := e.sealer.Open(raw, aad(table, id, column))
	if err != nil {
		return nil, fmt.Errorf("decrypt %s.%s of %s: %w", table, column, id, err)
	}
	return out, nil
}

// open decrypts what seal encrypted and decodes it.
func (e *secrets) open(raw []byte, table, id, column string) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if e.sealer != nil {
		var err error
		if raw, err = e.sealer.Open(raw, aad(table, id, column)); err != nil {
			return nil, fmt.Errorf("decrypt %s.%s of %s: %w", table, column, id, err)
		}
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("decode %s.%s of %s: %w", table, column, id, err)
	}
	return v, nil
}

// Table names of the sealed columns.
const (
	tableExecutions = "workflow_executions"
	tableAttempts   = "step_executions"
	// tableCompensations' compensation_config is sealed (its secrets and those found by value).
	tableCompensations = "compensation_actions"
)
