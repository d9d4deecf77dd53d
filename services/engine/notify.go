package engine

import (
	"time"

	"gorm.io/gorm"

	"lifeline/services/classify"
	"lifeline/services/notify"
)

// Notifier records a notification event and its deliveries in the caller's transaction (the
// one that records what happened), without any network I/O; its errors are the database's.
type Notifier interface {
	Emit(tx *gorm.DB, ev notify.Event) error
	// EmitEscalation records the notification of failure groups that reached a level of
	// their organization's escalation policy (Escalate), in the transaction that raised them.
	EmitEscalation(tx *gorm.DB, esc notify.Escalation) error
}

var _ Notifier = (*notify.Service)(nil)

// emit hands ev to the notifier, if there is one, inside a savepoint of tx: a notification
// that cannot be recorded (a recipient the database refuses, a webhook URL that cannot be
// sealed or opened) is rolled back alone and logged, and the failure is recorded without it.
// Only an error that also breaks tx (the savepoint cannot be rolled back to) is returned.
func (e *core) emit(tx *gorm.DB, ev notify.Event) error {
	if e.notifier == nil {
		return nil
	}
	if err := tx.SavePoint("notify").Error; err != nil {
		return err
	}
	err := e.notifier.Emit(tx, ev)
	if err == nil {
		return nil
	}
	if rerr := tx.RollbackTo("notify").Error; rerr != nil {
		return rerr
	}
	e.log.Warn("a notification could not be recorded; the failure is recorded without it",
		"kind", ev.Kind, "execution_id", ev.ExecutionID, "step_id", ev.StepID, "err", err)
	return nil
}

// stepEvent is the event of a failure of attempt a (kind, once per attempt).
func stepEvent(kind notify.Kind, r *attemptRun, c classify.Result, now time.Time) notify.Event {
	ex, def, a := r.ex, r.def, r.a
	ev := notify.Event{Kind: kind, OrganizationID: ex.OrganizationID, WorkflowID: ex.WorkflowID, WorkflowName: def.Name,
		ExecutionID: ex.ID, Subject: deref(ex.Subject), StepID: a.StepID, ErrorType: string(c.Type), ErrorCode: c.Code,
		Reason: c.Message, Settings: def.Settings.ErrorNotifications, At: now, DedupKey: string(kind) + ":" + a.ID}
	if a.StepIndex >= 0 && a.StepIndex < len(def.Steps) {
		ev.StepName = def.Steps[a.StepIndex].Title()
	}
	return ev
}

// groupEvent names, on a dead letter's event ev, the failure group the item joined (join):
// the notifier tells people once per group rather than once per failure when the settings
// say so.
func groupEvent(ev *notify.Event, join GroupJoin) {
	if join.GroupID == "" {
		return
	}
	ev.Group = &notify.GroupInfo{ID: join.GroupID, Title: join.Title, Count: join.Arrivals, New: join.New,
		Reopened: join.Reopened, Muted: join.Muted}
}
