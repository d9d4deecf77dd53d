package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/steps"
)

// errAnswered: an answer's compare-and-set lost (the request was no longer open).
var errAnswered = errors.New("the request is no longer open")

// maxNote bounds an answer's note.
const maxNote = 2000

// answer is Answer: checks outside the transaction (who may answer, the answer's fit), then
// one commit that records it (AnswerAsk), consumes the link token (UseLink) and moves the
// waiting attempt on (ResumeAsk), audited; the attempt's job is queued after the commit
// (the reconciler re-queues it if the process dies first).
func (a Asks) answer(ctx context.Context, r AnswerRequest) (*models.Intervention, error) {
	iv, err := a.Get(ctx, r.OrganizationID, r.ID)
	if err != nil {
		return nil, err
	}
	if iv.Status != models.InterventionOpen {
		return a.answeredAlready(iv, r)
	}
	email, starter, err := a.who(ctx, iv, r.Actor.ID)
	if err != nil {
		return nil, err
	}
	if email == "" {
		email = r.ActorName
	}
	if ok, why := mayAnswer(iv, r.Actor.ID, email, r.Role, starter); !ok {
		return nil, apperr.Errorf(apperr.EFORBIDDEN, "%s", why)
	}
	out, fields := answerOutput(iv, r)
	if len(fields) > 0 {
		return nil, apperr.Invalid("The answer is not valid.", fields)
	}
	by := cmpOr(r.ActorName, email)
	a.e.beforeTx(TransitionAnswer, iv.ExecutionID)
	err = a.e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		if iv.Kind != models.AskInput { // an input's output is the form's values alone
			out["by"], out["at"] = by, now.Format(time.RFC3339)
		}
		st := askTx{tx: tx, now: now}
		won, err := st.AnswerAsk(iv, models.MustJSON(out), r.Actor.ID, by, r.IdempotencyKey)
		if err != nil {
			return nil, err
		}
		if !won {
			return nil, errAnswered
		}
		if r.LinkToken != "" {
			if err := st.UseLink(iv.OrganizationID, iv.ID, r.Actor.ID, hashToken(r.LinkToken)); err != nil {
				return nil, err
			}
		}
		job, err := st.ResumeAsk(iv)
		if err != nil {
			return nil, err
		}
		details := map[string]any{"executionId": iv.ExecutionID, "stepId": iv.StepID, "kind": iv.Kind, "by": by}
		for _, k := range []string{"answer", "option", "note"} {
			if v, ok := out[k]; ok {
				details[k] = v
			}
		}
		if r.LinkToken != "" {
			details["via"] = "link"
		}
		if err := audit.Record(tx, audit.Entry{OrganizationID: iv.OrganizationID, Actor: r.Actor, Action: "intervention.answered",
			EntityType: "intervention", EntityID: iv.ID, At: now, Details: details}); err != nil {
			return nil, err
		}
		return []Job{job}, nil
	})
	if errors.Is(err, errAnswered) {
		if iv, err = a.Get(ctx, r.OrganizationID, r.ID); err != nil {
			return nil, err
		}
		return a.answeredAlready(iv, r)
	}
	if err != nil {
		return nil, err
	}
	return a.Get(ctx, r.OrganizationID, r.ID)
}

// answeredAlready is the answer to an answer that came after the request closed: the
// recorded answer when it is the same user's with the same idempotency key, else ECONFLICT
// naming who answered and when (or when it timed out, or that it was cancelled).
func (a Asks) answeredAlready(iv *models.Intervention, r AnswerRequest) (*models.Intervention, error) {
	if r.IdempotencyKey != "" && iv.IdempotencyKey != nil && *iv.IdempotencyKey == r.IdempotencyKey &&
		iv.AnsweredBy != nil && *iv.AnsweredBy == r.Actor.ID {
		return iv, nil
	}
	at := ""
	if iv.AnsweredAt != nil {
		at = iv.AnsweredAt.UTC().Format(time.RFC3339)
	}
	switch iv.Status {
	case models.InterventionAnswered:
		return nil, apperr.Errorf(apperr.ECONFLICT, "Already answered by %s at %s.", deref(iv.AnsweredByName), at)
	case models.InterventionTimedOut:
		return nil, apperr.Errorf(apperr.ECONFLICT, "The request timed out at %s.", at)
	}
	return nil, apperr.Errorf(apperr.ECONFLICT, "The request was cancelled.")
}

// answerOutput checks r against iv's kind (and schema, options) and returns the step's
// output (without by and at), or field messages.
func answerOutput(iv *models.Intervention, r AnswerRequest) (map[string]any, map[string]string) {
	fields := map[string]string{}
	out := map[string]any{}
	note := strings.TrimSpace(r.Note)
	if len(note) > maxNote {
		fields["note"] = fmt.Sprintf("must be at most %d characters", maxNote)
	}
	switch iv.Kind {
	case models.AskApproval:
		if r.Answer != "approved" && r.Answer != "rejected" {
			fields["answer"] = `must be "approved" or "rejected"`
		}
		out["answer"], out["note"] = r.Answer, note
	case models.AskInput:
		var schema steps.AskSchema
		_ = json.Unmarshal(iv.Schema, &schema)
		values, errs := schema.Check(r.Values)
		for k, v := range errs {
			fields[k] = v
		}
		maps := values
		for k, v := range maps {
			out[k] = v
		}
	case models.AskDecision, models.AskErrorResolution:
		var opts []steps.AskOption
		_ = json.Unmarshal(iv.Options, &opts)
		if !slices.ContainsFunc(opts, func(o steps.AskOption) bool { return o.ID == r.Option }) {
			ids := make([]string, len(opts))
			for i, o := range opts {
				ids[i] = o.ID
			}
			fields["option"] = "must be one of " + strings.Join(ids, ", ")
		}
		out["option"] = r.Option
		if note != "" {
			out["note"] = note
		}
		if iv.Kind == models.AskErrorResolution && len(r.Values) > 0 {
			out["values"] = r.Values
		}
	}
	if len(fields) > 0 {
		return nil, fields
	}
	return out, nil
}

// cancel is Cancel.
func (a Asks) cancel(ctx context.Context, r CancelRequest) error {
	var ex models.Execution
	if err := a.e.db.Conn(ctx).Where("organization_id = ? AND id = ?", r.OrganizationID, r.ExecutionID).Limit(1).Find(&ex).Error; err != nil {
		return err
	}
	if ex.ID == "" {
		return apperr.NotFound("execution")
	}
	if ex.Status != models.ExecWaiting {
		return apperr.Errorf(apperr.ECONFLICT, "Only a waiting execution can be cancelled: this one is %s.", ex.Status)
	}
	note := strings.TrimSpace(r.Note)
	if len(note) > maxNote {
		return apperr.Invalid("The note is too long.", map[string]string{"note": fmt.Sprintf("must be at most %d characters", maxNote)})
	}
	msg := strings.TrimSuffix("Cancelled by "+cmpOr(r.ActorName, "an operator")+": "+note, ": ")
	a.e.beforeTx(TransitionCancel, ex.ID)
	return a.e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		if err := (askTx{tx: tx, now: now}).CancelAsk(&ex, msg); err != nil {
			return nil, err
		}
		return nil, audit.Record(tx, audit.Entry{OrganizationID: ex.OrganizationID, Actor: r.Actor, Action: "execution.cancelled",
			EntityType: "workflow_execution", EntityID: ex.ID, At: now, Details: map[string]any{"note": note, "by": r.ActorName}})
	})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
