package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/redact"
	"lifeline/services/retry"
)

// nextAttemptNumber is the number of a step's next attempt: 1, or one more than the last
// when the step ran before (a replay).
func nextAttemptNumber(tx *gorm.DB, ex *models.Execution, stepID string) (int, error) {
	if ex.ReplayedAt == nil {
		return 1, nil
	}
	var n int
	err := tx.Model(&models.StepAttempt{}).Select("COALESCE(MAX(attempt), 0)").
		Where("execution_id = ? AND step_id = ?", ex.ID, stepID).Scan(&n).Error
	return n + 1, err
}

// firstOfRun is the first attempt of a's step in the current run: retries are counted from
// it, so a manual replay starts with the full retry budget.
func firstOfRun(ex *models.Execution, attempts []models.StepAttempt, a *models.StepAttempt) *models.StepAttempt {
	first := a
	for i := range attempts {
		at := &attempts[i]
		if at.StepID != a.StepID || at.Attempt >= first.Attempt {
			continue
		}
		if ex.ReplayedAt != nil && at.CreatedAt.Before(*ex.ReplayedAt) {
			continue
		}
		first = at
	}
	return first
}

// replayInput returns the input a replay runs with: the execution's own (opened), or the edited
// one with masked values restored from the stored input; and whether it differs.
func (e *recovery) replayInput(ex *models.Execution, edited json.RawMessage) ([]byte, bool, error) {
	stored, err := e.open(ex.Input, tableExecutions, ex.ID, "input")
	if err != nil {
		return nil, false, err
	}
	storedRaw, _ := json.Marshal(stored)
	if len(bytes.TrimSpace(edited)) == 0 {
		return storedRaw, false, nil
	}
	norm, err := normalizeInput(edited)
	if err != nil {
		if me, ok := err.(*apperr.Error); ok && len(me.Fields) > 0 {
			return nil, false, fmt.Errorf("%s", me.Fields["input"])
		}
		return nil, false, err
	}
	var v, shown any
	_ = json.Unmarshal(norm, &v)
	_ = json.Unmarshal(e.redactor.JSON(ex.Input), &shown) // as the editor was filled
	restored, _ := json.Marshal(redact.RestoreAsShown(v, stored, shown))
	var cmp any
	_ = json.Unmarshal(storedRaw, &cmp)
	canon, _ := json.Marshal(cmp)
	return restored, !bytes.Equal(restored, canon), nil
}

// normalizeValue checks an operator's JSON value (empty: {}) and returns it compacted.
func normalizeValue(raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}"), nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, fmt.Errorf("is not valid JSON")
	}
	if p := unstorable(v, "output"); p != "" {
		return nil, fmt.Errorf("%s", p)
	}
	if len(raw) > 1<<20 {
		return nil, fmt.Errorf("must be at most 1 MiB")
	}
	return json.Marshal(v)
}

// idempotent answers a repeated request: when key was used for this dead letter with the
// same request, res becomes the first result (Replayed) and done is true; with a different
// request it is EINVALID.
func (e *recovery) idempotent(st stateTx, dl *models.DeadLetter, key, reqHash string, res *ReplayResult) (bool, error) {
	tx, now := st.tx, st.now
	if key == "" {
		return false, nil
	}
	var k models.IdempotencyKey
	err := tx.Where("organization_id = ? AND workflow_id = ? AND idem_key = ?", dl.OrganizationID, dl.WorkflowID, dlqKey(dl.ID, key)).First(&k).Error
	switch {
	case err == nil && k.ExpiresAt.After(now):
		if k.RequestHash != reqHash {
			return false, apperr.Invalid("This Idempotency-Key was already used with a different request body.",
				map[string]string{"Idempotency-Key": "was already used with a different request body; use a new key"})
		}
		res.ExecutionID, res.Replayed = k.ExecutionID, true
		return true, nil
	case err == nil:
		return false, tx.Delete(&k).Error
	case models.IsNotFound(err):
		return false, nil
	}
	return false, err
}

func (e *recovery) rememberKey(st stateTx, dl *models.DeadLetter, key, reqHash, executionID string) error {
	tx, now := st.tx, st.now
	if key == "" {
		return nil
	}
	return tx.Create(&models.IdempotencyKey{OrganizationID: dl.OrganizationID, WorkflowID: dl.WorkflowID, IdemKey: dlqKey(dl.ID, key),
		RequestHash: reqHash, ExecutionID: executionID, CreatedAt: now, ExpiresAt: now.Add(e.cfg.IdempotencyTTL)}).Error
}

// dlqKey keeps a dead letter's action keys apart from start keys of the same workflow.
func dlqKey(dlqID, key string) string { return "dlq:" + hashOf(dlqID, key)[:48] }

func hashOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func specJSON(s *retry.Spec) string {
	if s == nil {
		return ""
	}
	b, _ := json.Marshal(s)
	return string(b)
}
