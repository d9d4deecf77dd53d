package models

import (
	"context"
	"fmt"
)

// Sealer keeps secret values of JSON columns encrypted at rest: Seal replaces the values
// under secret-looking keys by envelopes bound to aad (the row's identity); Open reverses
// it and fails for an envelope of another row or an unknown key.
type Sealer interface {
	Seal(raw []byte, aad string) ([]byte, error)
	Open(raw []byte, aad string) ([]byte, error)
}

// Resealer is a Sealer that can seal what is sealed again under its active key without
// opening anything into clear (secrets sealed by their value, inside plain strings, stay
// sealed). ResealColumns uses it when the Sealer is one.
type Resealer interface {
	Reseal(raw []byte, aad string) ([]byte, error)
}

// FoundSealer is a Sealer that also seals fragments of strings that a finder reports
// (secrets found by their value, under any key).
type FoundSealer interface {
	SealFound(raw []byte, aad string, find func(string) [][]int) ([]byte, error)
}

// reseal seals raw again under s's active key: by Reseal when s is a Resealer, else by
// opening and sealing.
func reseal(s Sealer, raw []byte, aad string) ([]byte, error) {
	if rs, ok := s.(Resealer); ok {
		return rs.Reseal(raw, aad)
	}
	plain, err := s.Open(raw, aad)
	if err != nil {
		return nil, err
	}
	return s.Seal(plain, aad)
}

// WorkflowAAD identifies the definition column of a workflow row.
func WorkflowAAD(workflowID string) string { return "workflows:" + workflowID + ":definition" }

// VersionAAD identifies the definition column of a workflow version row.
func VersionAAD(workflowID string, version int) string {
	return fmt.Sprintf("workflow_versions:%s:%d:definition", workflowID, version)
}

// Seal encrypts the secret values of raw for the row aad names (raw itself without a Sealer).
func (db *DB) Seal(raw JSON, aad string) (JSON, error) {
	if db.Sealer == nil || len(raw) == 0 {
		return raw, nil
	}
	out, err := db.Sealer.Seal(raw, aad)
	if err != nil {
		return nil, fmt.Errorf("encrypt %s: %w", aad, err)
	}
	return JSON(out), nil
}

// Open decrypts what Seal encrypted.
func (db *DB) Open(raw JSON, aad string) (JSON, error) {
	if db.Sealer == nil || len(raw) == 0 {
		return raw, nil
	}
	out, err := db.Sealer.Open(raw, aad)
	if err != nil {
		return nil, fmt.Errorf("decrypt %s: %w", aad, err)
	}
	return JSON(out), nil
}

// openWorkflows decrypts the definitions of workflows read from the database, in place.
func (db *DB) openWorkflows(wfs ...*Workflow) error {
	for _, wf := range wfs {
		def, err := db.Open(wf.Definition, WorkflowAAD(wf.ID))
		if err != nil {
			return err
		}
		wf.Definition = def
	}
	return nil
}

// SealedColumn names a JSON column whose secret values are sealed, and the aad of a row.
type SealedColumn struct {
	Table, Column string
	AAD           func(id string) string
	// Key is the column that identifies a row (default "id"); AAD gets its value.
	Key string
	// SealClear also seals the rows with no envelope yet (a column stored in clear before
	// it was sealed), not only those sealed under an older key.
	SealClear bool
}

// ResealColumns opens and seals again (under the sealer's active key) every value of the
// columns that holds an envelope, in batches; a row changed meanwhile is left for the next
// run. It returns how many values it rewrote.
func (db *DB) ResealColumns(ctx context.Context, s Sealer, cols []SealedColumn) (int, error) {
	n := 0
	for _, c := range cols {
		key := c.Key
		if key == "" {
			key = "id"
		}
		last := ""
		for {
			var rows []struct {
				ID  string
				Val string
			}
			filter := `CAST(%[1]s AS TEXT) LIKE '%%enc:%%'`
			if c.SealClear {
				filter = `%[1]s IS NOT NULL`
			}
			q := fmt.Sprintf(`SELECT CAST(%[3]s AS TEXT) AS id, CAST(%[1]s AS TEXT) AS val FROM %[2]s
				WHERE CAST(%[3]s AS TEXT) > ? AND `+filter+` ORDER BY CAST(%[3]s AS TEXT) LIMIT 500`, c.Column, c.Table, key)
			if err := db.Conn(ctx).Raw(q, last).Scan(&rows).Error; err != nil {
				return n, fmt.Errorf("reseal %s.%s: %w", c.Table, c.Column, err)
			}
			if len(rows) == 0 {
				break
			}
			for _, r := range rows {
				last = r.ID
				sealed, err := reseal(s, []byte(r.Val), c.AAD(r.ID))
				if err == nil && c.SealClear {
					sealed, err = s.Seal(sealed, c.AAD(r.ID))
				}
				if err != nil {
					return n, fmt.Errorf("reseal %s.%s of %s: %w", c.Table, c.Column, r.ID, err)
				}
				if string(sealed) == r.Val {
					continue
				}
				res := db.Conn(ctx).Exec(fmt.Sprintf(`UPDATE %[2]s SET %[1]s = ? WHERE %[3]s = ? AND CAST(%[1]s AS TEXT) = ?`, c.Column, c.Table, key),
					JSON(sealed), r.ID, r.Val)
				if res.Error != nil {
					return n, res.Error
				}
				n += int(res.RowsAffected)
			}
		}
	}
	return n, nil
}

// ResealDefinitions re-seals workflow definitions and their versions with db.Sealer.
func (db *DB) ResealDefinitions(ctx context.Context) (int, error) {
	if db.Sealer == nil {
		return 0, nil
	}
	n, err := db.ResealColumns(ctx, db.Sealer, []SealedColumn{{Table: "workflows", Column: "definition", AAD: WorkflowAAD}})
	if err != nil {
		return n, err
	}
	// A version's aad names its workflow and number, not its id.
	last := ""
	for {
		var vs []WorkflowVersion
		if err := db.Conn(ctx).Where("CAST(id AS TEXT) > ? AND CAST(definition AS TEXT) LIKE ?", last, "%enc:%").Order("CAST(id AS TEXT)").Limit(500).Find(&vs).Error; err != nil {
			return n, err
		}
		if len(vs) == 0 {
			return n, nil
		}
		for _, v := range vs {
			last = v.ID
			aad := VersionAAD(v.WorkflowID, v.Version)
			sealed, err := reseal(db.Sealer, v.Definition, aad)
			if err != nil {
				return n, fmt.Errorf("reseal workflow %s version %d: %w", v.WorkflowID, v.Version, err)
			}
			if err := db.Conn(ctx).Model(&WorkflowVersion{}).Where("id = ?", v.ID).Update("definition", JSON(sealed)).Error; err != nil {
				return n, err
			}
			n++
		}
	}
}
