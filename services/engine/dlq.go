package engine

import (
	"encoding/json"
	"strings"
	"time"

	"lifeline/models"
	"lifeline/services/audit"
)

// StepState is one step's state in a dead letter's snapshot.
type StepState struct {
	StepID   string          `json:"stepId"`
	Name     string          `json:"name"`
	Type     string          `json:"type"`
	Status   string          `json:"status"`
	Attempts int             `json:"attempts"`
	Input    json.RawMessage `json:"input,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
	Error    *StepError      `json:"error,omitempty"`
	// Breaker is the failed step's circuit breaker when it failed.
	Breaker    *BreakerState `json:"breaker,omitempty"`
	StartedAt  *time.Time    `json:"startedAt,omitempty"`
	FinishedAt *time.Time    `json:"finishedAt,omitempty"`
}

// BreakerState is a circuit breaker's state when a step failed.
type BreakerState struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Failures int    `json:"failures"` // counted in the window
}

// StepError is the last error of a step.
type StepError struct {
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// deadLetter moves the execution to the DLQ: error record dead_letter, execution
// DLQ_PENDING, and a dead_letter_queue row with the redacted input and every step's state;
// join receives what joining its failure group did (for the notification).
func (e *failures) deadLetter(st stateTx, r *attemptRun, f failure, join *GroupJoin) error {
	tx, now, ex, def, failed := st.tx, st.now, r.ex, r.def, r.a
	rec, c, decision, retriesDone := f.rec, f.c, f.decision, f.retriesDone
	if err := st.errors().DeadLetterError(rec.ID); err != nil {
		return err
	}
	if err := st.DeadLetterExecution(ex, failed.StepID); err != nil {
		return err
	}
	var attempts []models.StepAttempt
	if err := tx.Where("execution_id = ?", ex.ID).Order("step_index, attempt").Find(&attempts).Error; err != nil {
		return err
	}
	states := make([]StepState, 0, len(def.Steps))
	for i, s := range def.Steps {
		if i > failed.StepIndex {
			break
		}
		st := StepState{StepID: s.ID, Name: s.Title(), Type: s.Type, Status: models.StepPending}
		for _, at := range attempts {
			if at.StepID != s.ID {
				continue
			}
			st.Attempts++
			st.Status = at.Status
			st.Input = json.RawMessage(e.redactor.JSON(at.Input))
			st.Output = json.RawMessage(e.redactor.JSON(at.Output))
			if at.StartedAt != nil && st.StartedAt == nil {
				st.StartedAt = at.StartedAt
			}
			st.FinishedAt = at.FinishedAt
			st.Error = nil
			if at.ErrorType != nil {
				st.Error = &StepError{Type: *at.ErrorType, Message: deref(at.ErrorMessage), Code: deref(at.ErrorCode)}
			}
		}
		if st.Attempts == 0 && (s.Handler || def.Steps[failed.StepIndex].Handler) {
			continue // a handler that never ran; or, when a handler failed, the steps after the one it handled
		}
		if s.ID == failed.StepID {
			st.Status = models.StepDLQ
			st.Error = &StepError{Type: string(c.Type), Code: c.Code, Message: c.Message}
			st.Breaker = f.gate.state(tx)
		}
		states = append(states, st)
	}
	dl := models.DeadLetter{
		ID: models.NewID(), OrganizationID: ex.OrganizationID, ErrorID: rec.ID, WorkflowID: ex.WorkflowID, ExecutionID: ex.ID,
		OriginalInput: models.JSON(e.redactor.JSON(ex.Input)), StepStates: models.MustJSON(states), FailedStepID: failed.StepID,
		Status: models.DLQPending, ExpiresAt: now.Add(e.cfg.DLQRetention), CreatedAt: now, UpdatedAt: now,
		Subject: ex.Subject, ErrorType: string(c.Type), Reason: c.Message, RetryCount: retriesDone,
		SearchText: models.JoinSearchText(ex.SearchText, models.SearchText(c.Message)), About: ex.About,
	}
	if !e.cfg.ungrouped {
		p := f.print
		if p == nil {
			pp := printOf(&dl, c.Code)
			p = &pp
		}
		j, err := st.groups().join(&dl, c.Code, *p)
		if err != nil {
			return err
		}
		*join = j
	}
	returned := false
	if ex.DeadLetterID != nil {
		// A manual replay failed: the item it served is pending again with the new error
		// (and follows a full retry to its new execution); no second item.
		var err error
		if returned, err = st.groups().ReturnToGroup(*ex.DeadLetterID, &dl); err != nil {
			return err
		}
		if returned {
			dl.ID = *ex.DeadLetterID
		}
	}
	if !returned {
		if err := tx.Create(&dl).Error; err != nil {
			return err
		}
	}
	if err := retriesExhausted(st, r, f); err != nil {
		return err
	}
	return audit.Record(tx, audit.Entry{OrganizationID: ex.OrganizationID, Actor: audit.System, Action: "dlq.created",
		EntityType: "dead_letter_queue", EntityID: dl.ID, At: now,
		Details: map[string]any{"executionId": ex.ID, "workflowId": ex.WorkflowID, "stepId": failed.StepID, "errorType": c.Type,
			"message": c.Message, "reason": decision.Reason, "expiresAt": dl.ExpiresAt.Format(time.RFC3339), "replayFailed": returned}})
}

// retriesExhausted records error.retry_exhausted when the step's retries ran out (rather
// than its error being one that is never retried).
func retriesExhausted(st stateTx, r *attemptRun, f failure) error {
	ex, def, failed, rec, c, policy, decision, retriesDone := r.ex, r.def, r.a, f.rec, f.c, f.policy, f.decision, f.retriesDone
	tx, now := st.tx, st.now
	if !policy.Decide(c.Type, 0, def.UnknownRetry(), 0).Retry {
		return nil
	}
	return audit.Record(tx, audit.Entry{OrganizationID: ex.OrganizationID, Actor: audit.System, Action: "error.retry_exhausted",
		EntityType: "workflow_execution_error", EntityID: rec.ID, At: now,
		Details: map[string]any{"executionId": ex.ID, "stepId": failed.StepID, "retries": retriesDone, "maxRetries": policy.MaxRetries,
			"errorType": c.Type, "reason": decision.Reason}})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return strings.TrimSpace(*s)
}
