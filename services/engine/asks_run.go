package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/classify"
	"lifeline/services/deadline"
	"lifeline/services/notify"
	"lifeline/services/steps"
)

// The attempt path of an ask step (issue 25). The engine never runs an ask: a claimed ask
// attempt looks up its request (one per attempt). None yet: the request is made and the
// attempt parked WAITING, with its execution, in one guarded commit (OutcomeAsked): no job
// is left, nothing holds a worker. Answered or timed out: the answer (or what the timeout
// decided) is the step's output, through the ordinary success path; a rejection, an abort
// or a timeout without a default fails the step (rejected / aborted / no_answer, never
// retried: the handler, the DLQ and notifications follow as for any failure).

// OutcomeAsked: an ask step made its request; the attempt and its execution wait for a
// person (no job is left).
const OutcomeAsked Outcome = "asked"

// Codes of an ask step's failures (never retried: neverRetried).
const (
	CodeRejected  = "rejected"  // an approval was rejected (onReject: fail)
	CodeAborted   = "aborted"   // an error resolution was answered abort
	CodeNoAnswer  = "no_answer" // the request timed out with nothing to decide it
	CodeCancelled = "cancelled" // the waiting execution was cancelled
	CodeNoDueDate = "no_due_date"
)

// askPark is what an ask attempt's run returns when it must wait: the request to make (c),
// or nil c when its request is open already.
type askPark struct {
	c   steps.AskConfig
	env map[string]any
	old bool
}

func (*askPark) Error() string { return "the step waits for a person's answer" }

// ask is an ask step's run: its output when its request was answered (or decided by its
// timeout, or by onlyAbove), a classified failure, or *askPark when it must wait.
func (e *attempts) ask(ctx context.Context, r *attemptRun, cfg map[string]any, env map[string]any) (any, error) {
	c, err := steps.ParseAsk(cfg)
	if err != nil {
		return nil, classify.New(classify.Validation, "ASK_CONFIG", "The ask step's configuration cannot be read: "+err.Error())
	}
	var iv models.Intervention
	if err := e.db.Conn(ctx).Where("attempt_id = ? AND organization_id = ?", r.a.ID, r.ex.OrganizationID).Limit(1).Find(&iv).Error; err != nil {
		return nil, &storeError{err}
	}
	if iv.ID == "" {
		if out, ok, err := e.onlyAbove(ctx, c); err != nil || ok {
			return out, err
		}
		return nil, &askPark{c: c, env: env}
	}
	return askResult(c, &iv)
}

// onlyAbove passes an approval at once when its amount is at or below its limit.
func (e *attempts) onlyAbove(ctx context.Context, c steps.AskConfig) (any, bool, error) {
	if c.Kind != steps.AskApproval || c.OnlyAbove == nil {
		return nil, false, nil
	}
	amount, ok := steps.DecimalOf(c.OnlyAbove.Amount)
	if !ok {
		return nil, false, classify.New(classify.Validation, "ONLY_ABOVE", fmt.Sprintf("onlyAbove: %v is not an amount", c.OnlyAbove.Amount))
	}
	limit, ok := steps.ParseDecimal(c.OnlyAbove.Limit)
	if !ok {
		return nil, false, classify.New(classify.Validation, "ONLY_ABOVE", fmt.Sprintf("onlyAbove: the limit %q is not an amount", c.OnlyAbove.Limit))
	}
	if amount.Cmp(limit) > 0 {
		return nil, false, nil
	}
	now, err := e.now(ctx)
	if err != nil {
		return nil, false, &storeError{err}
	}
	return map[string]any{"answer": "approved", "by": "rule", "at": now.Format(time.RFC3339),
		"note": fmt.Sprintf("%s ≤ %s: approved without asking", amount.FloatString(2), limit.FloatString(2))}, true, nil
}

// askResult is the step's result of its request iv, no longer open.
func askResult(c steps.AskConfig, iv *models.Intervention) (any, error) {
	var ans map[string]any
	if len(iv.Answer) > 0 {
		_ = json.Unmarshal(iv.Answer, &ans)
	}
	timedOut, _ := ans["timedOut"].(bool)
	by := deref(iv.AnsweredByName)
	note, _ := ans["note"].(string)
	switch iv.Status {
	case models.InterventionOpen:
		return nil, &askPark{c: c, old: true}
	case models.InterventionCancelled:
		return nil, classify.New(classify.Permanent, CodeCancelled, "The request was cancelled.")
	}
	noAnswer := func(what string) error {
		return classify.New(classify.Timeout, CodeNoAnswer, fmt.Sprintf("Nobody answered before %s: %s.", iv.ExpiresAt.UTC().Format(time.RFC3339), what))
	}
	switch iv.Kind {
	case models.AskApproval:
		if ans["answer"] == "rejected" && c.OnReject != "continue" {
			if timedOut {
				return nil, noAnswer("rejected by timeout")
			}
			return nil, classify.New(classify.Permanent, CodeRejected, strings.TrimSuffix(fmt.Sprintf("Rejected by %s: %s", by, note), ": "))
		}
	case models.AskDecision:
		if timedOut && ans["option"] == nil {
			return nil, noAnswer("the decision has no default option")
		}
	case models.AskInput:
		if timedOut {
			return nil, noAnswer("the form was not filled in")
		}
	case models.AskErrorResolution:
		if timedOut {
			return nil, noAnswer("the failure was not resolved")
		}
		if ans["option"] == "abort" {
			return nil, classify.New(classify.Permanent, CodeAborted, strings.TrimSuffix(fmt.Sprintf("Aborted by %s: %s", by, note), ": "))
		}
	}
	return ans, nil
}

// park makes the request p asks for and parks the attempt on it (or, for a request open
// already, parks it again), in one guarded commit: OutcomeAsked, or OutcomeLost when the
// attempt was no longer held.
func (e *attempts) park(ctx context.Context, r *attemptRun, p *askPark) (Outcome, error) {
	ex, a, generation := r.ex, r.a, r.generation
	if p.old {
		err := e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			return nil, askTx{tx: tx, now: now}.Repark(ex, a, generation)
		})
		if errors.Is(err, errLost) {
			return OutcomeLost, nil
		}
		return OutcomeAsked, err
	}
	barred, err := e.barredFor(ctx, ex, p.c)
	if err != nil { // the database failed before the request was made: hand the attempt back
		r.log.WarnContext(ctx, "the database failed before the request was made; the attempt is handed back", "err", err)
		return e.release(ctx, r, storeRetryDelay)
	}
	input, err := e.sealFound(cleanJSON(r.input), tableAttempts, a.ID, "input", r.mask)
	if err != nil {
		return "", err
	}
	var iv *models.Intervention
	landed, err := e.persist(ctx, r, func(ctx context.Context) error {
		return e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			var err error
			if iv, err = e.request(r, p, barred, now); err != nil {
				return nil, err
			}
			if err := (askTx{tx: tx, now: now}).ParkAsk(ex, a, generation, input, iv); err != nil {
				return nil, err
			}
			if err := audit.Record(tx, audit.Entry{OrganizationID: ex.OrganizationID, Actor: audit.System, Action: "intervention.requested",
				EntityType: "intervention", EntityID: iv.ID, At: now, Details: map[string]any{"executionId": ex.ID, "stepId": a.StepID,
					"kind": iv.Kind, "title": iv.Title, "assignees": iv.Assignees, "expiresAt": iv.ExpiresAt.Format(time.RFC3339)}}); err != nil {
				return nil, err
			}
			return nil, e.tellHolders(tx, iv, noticeAbout{workflow: r.def.Name, subject: deref(ex.Subject), stage: notify.StageRequested}, now)
		})
	})
	if errors.Is(err, errLost) || landed {
		if landed {
			return OutcomeAsked, nil
		}
		return OutcomeLost, nil
	}
	var c classify.Classified
	if errors.As(err, &c) { // the request cannot be made (no due date): the step fails
		return e.fail(ctx, r, err)
	}
	if err != nil {
		return "", err
	}
	r.log.InfoContext(ctx, "step waits for a person's answer", "intervention_id", iv.ID, "expires_at", iv.ExpiresAt)
	return OutcomeAsked, nil
}

// request builds the request an ask attempt makes at now.
func (e *attempts) request(r *attemptRun, p *askPark, barred []string, now time.Time) (*models.Intervention, error) {
	ex, a, c := r.ex, r.a, p.c
	expires, err := expiresAt(ex, c, now)
	if err != nil {
		return nil, err
	}
	step := r.def.Steps[a.StepIndex]
	iv := &models.Intervention{ID: models.NewID(), OrganizationID: ex.OrganizationID, ExecutionID: ex.ID, AttemptID: a.ID,
		StepID: a.StepID, StepName: step.Title(), Kind: c.Kind, Title: e.maskText(c.Title, r.mask), Message: e.maskText(c.Message, r.mask),
		Assignees: lowered(c.Assignees), Holders: lowered(c.Assignees), FourEyes: c.FourEyes, Barred: models.StringList(barred),
		Status: models.InterventionOpen, ExpiresAt: expires}
	if iv.Barred == nil {
		iv.Barred = models.StringList{}
	}
	if c.Kind == steps.AskErrorResolution && iv.Message == "" {
		if er, ok := p.env["error"].(map[string]any); ok {
			iv.Message, _ = er["message"].(string)
			iv.Message = e.maskText(iv.Message, r.mask)
		}
	}
	if c.Schema != nil {
		iv.Schema = models.MustJSON(c.Schema)
	}
	if len(c.Options) > 0 {
		iv.Options = models.MustJSON(c.Options)
	}
	if c.DefaultOption != "" {
		iv.DefaultOption = &c.DefaultOption
	}
	if c.Escalation != nil && len(c.Escalation.Levels) > 0 {
		iv.Escalation = models.MustJSON(c.Escalation)
		next := now.Add(time.Duration(c.Escalation.Levels[0].AfterMs) * time.Millisecond)
		iv.NextEscalationAt = &next
	}
	if c.RemindBeforeMs > 0 {
		if at := expires.Add(-time.Duration(c.RemindBeforeMs) * time.Millisecond); at.After(now) {
			iv.RemindAt = &at
		}
	}
	return iv, nil
}

// expiresAt is when a request made at now times out: at the start (midnight in Poland) of
// the working day timeoutBeforeDue working days before the execution's due date (Polish
// holidays and weekends are not working days), when it has one and that is still ahead;
// else timeoutMs after now, but never past the end of a due date still ahead (an answer after
// it comes too late to file on time); a classified failure (validation, no_due_date) when
// neither applies. A time before due that has already passed, with no timeoutMs, times the
// request out at the sweep: waiting would eat into the days the office kept for filing.
func expiresAt(ex *models.Execution, c steps.AskConfig, now time.Time) (time.Time, error) {
	var dueEnd time.Time // the end of the due date, when it is still ahead
	if c.TimeoutBeforeDue != nil && ex.DueOn != nil {
		if due, err := time.Parse(time.DateOnly, *ex.DueOn); err == nil {
			at := deadline.StartOf(deadline.SubWorkingDays(due, c.TimeoutBeforeDue.WorkingDays)).UTC()
			if at.After(now) || c.TimeoutMs <= 0 {
				return at, nil
			}
			if end := deadline.StartOf(due.AddDate(0, 0, 1)).UTC(); end.After(now) {
				dueEnd = end
			}
		}
	}
	if c.TimeoutMs > 0 {
		at := now.Add(time.Duration(c.TimeoutMs) * time.Millisecond)
		if !dueEnd.IsZero() && dueEnd.Before(at) {
			return dueEnd, nil
		}
		return at, nil
	}
	return time.Time{}, classify.New(classify.Validation, CodeNoDueDate,
		"The request times out before the execution's due date, and this execution has none (and the step sets no timeoutMs).")
}

// barredFor lists who may not answer an approval with fourEyes: the user who started the
// execution, and the users who edited its input (a replay with an edited input, or a
// change they asked for).
func (e *attempts) barredFor(ctx context.Context, ex *models.Execution, c steps.AskConfig) ([]string, error) {
	if !c.FourEyes || c.Kind != steps.AskApproval {
		return []string{}, nil
	}
	out := []string{}
	if ex.CreatedBy != nil && *ex.CreatedBy != "" {
		out = append(out, *ex.CreatedBy)
	}
	editors, err := inputEditors(e.db.Conn(ctx), ex)
	if err != nil {
		return nil, err
	}
	for _, id := range editors {
		if !contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// inputEditors are the users who edited ex's input: the actors of its dead letters' replays
// with an edited input, and of the input changes asked for them.
func inputEditors(q *gorm.DB, ex *models.Execution) ([]string, error) {
	var dls []string
	if err := q.Model(&models.DeadLetter{}).Where("organization_id = ? AND execution_id = ?", ex.OrganizationID, ex.ID).Pluck("id", &dls).Error; err != nil {
		return nil, err
	}
	if len(dls) == 0 {
		return nil, nil
	}
	var rows []models.AuditEntry
	err := q.Session(&gorm.Session{NewDB: true}).Where("organization_id = ? AND actor_type = ? AND entity_type = ? AND action IN ? AND entity_id IN ?",
		ex.OrganizationID, audit.ActorUser, "dead_letter_queue", []string{"dlq.retry", "dlq.change_requested"}, dls).Find(&rows).Error
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rows {
		if r.ActorID == nil {
			continue
		}
		if r.Action == "dlq.retry" && !strings.Contains(string(r.Details), "inputAfter") {
			continue
		}
		if !contains(out, *r.ActorID) {
			out = append(out, *r.ActorID)
		}
	}
	return out, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// lowered is who, lower-cased (emails are compared so; roles and ids are lower-case).
func lowered(who []string) models.StringList {
	out := make(models.StringList, 0, len(who))
	for _, w := range who {
		out = append(out, strings.ToLower(strings.TrimSpace(w)))
	}
	return out
}
