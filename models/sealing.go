package models

import "fmt"

// Sealer keeps secret values of JSON columns encrypted at rest: Seal replaces the values
// under secret-looking keys by envelopes bound to aad (the row's identity); Open reverses
// it and fails for an envelope of another row or an unknown key.
type Sealer interface {
	Seal(raw []byte, aad string) ([]byte, error)
	Open(raw []byte, aad string) ([]byte, error)
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
