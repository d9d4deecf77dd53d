package engine

import (
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/classify"
	"lifeline/services/definition"
	"lifeline/services/notify"
)

// Notifier records a notification event and its deliveries in the caller's transaction (the
// one that records what happened), without any network I/O; its errors are the database's.
type Notifier interface {
	Emit(tx *gorm.DB, ev notify.Event) error
}

var _ Notifier = (*notify.Service)(nil)

// SetNotifier sets who is told of failures. Events: a step's first failure (when it will be
// retried), a step's retries exhausted (its failure handed to a handler), an execution in
// the DLQ, a breaker that opened, and the message of a notification compensation. Each is
// emitted in the transaction that records it, with a dedup key, so a commit that is tried
// again never notifies twice.
func (e *Engine) SetNotifier(n Notifier) { e.notifier = n }

// emit hands ev to the notifier, if there is one.
func (e *Engine) emit(tx *gorm.DB, ev notify.Event) error {
	if e.notifier == nil {
		return nil
	}
	return e.notifier.Emit(tx, ev)
}

// stepEvent is the event of a failure of attempt a (kind, once per attempt).
func stepEvent(kind notify.Kind, ex *models.Execution, def *definition.Definition, a *models.StepAttempt, c classify.Result, now time.Time) notify.Event {
	ev := notify.Event{Kind: kind, OrganizationID: ex.OrganizationID, WorkflowID: ex.WorkflowID, WorkflowName: def.Name,
		ExecutionID: ex.ID, Subject: deref(ex.Subject), StepID: a.StepID, ErrorType: string(c.Type), ErrorCode: c.Code,
		Reason: c.Message, Settings: def.Settings.ErrorNotifications, At: now, DedupKey: string(kind) + ":" + a.ID}
	if a.StepIndex >= 0 && a.StepIndex < len(def.Steps) {
		ev.StepName = def.Steps[a.StepIndex].Title()
	}
	return ev
}
