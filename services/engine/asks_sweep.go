package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/notify"
	"lifeline/services/steps"
)

// sweepBatch bounds the requests one sweep takes of each kind (the next sweep takes more).
const sweepBatch = 200

// sweep is Sweep: the open requests due (by the database clock) for their timeout, their
// next escalation level, or their reminder, oldest first, each in its own guarded commit.
// A request escalates at most one level per sweep: each level once per round, in order.
func (a Asks) sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	now, err := a.e.now(ctx)
	if err != nil {
		return res, err
	}
	due := func(col string) ([]models.Intervention, error) {
		var ivs []models.Intervention
		err := a.e.db.Conn(ctx).Where("status = ? AND "+col+" <= ?", models.InterventionOpen, now).Order(col).Limit(sweepBatch).Find(&ivs).Error
		return ivs, err
	}
	ivs, err := due("expires_at")
	if err != nil {
		return res, err
	}
	for i := range ivs {
		won, err := a.timeOut(ctx, &ivs[i])
		if err != nil {
			return res, err
		}
		if won {
			res.TimedOut++
		}
	}
	if ivs, err = due("next_escalation_at"); err != nil {
		return res, err
	}
	for i := range ivs {
		won, err := a.escalate(ctx, &ivs[i])
		if err != nil {
			return res, err
		}
		if won {
			res.Escalated++
		}
	}
	if ivs, err = due("remind_at"); err != nil {
		return res, err
	}
	for i := range ivs {
		won, err := a.remind(ctx, &ivs[i])
		if err != nil {
			return res, err
		}
		if won {
			res.Reminded++
		}
	}
	return res, nil
}

// timedOutAnswer is what a request's timeout decides, as the step's output: an approval is
// rejected by the timeout (never a person's answer), a decision takes its default option;
// otherwise nothing is decided (the step fails no_answer).
func timedOutAnswer(iv *models.Intervention, now time.Time) map[string]any {
	out := map[string]any{"timedOut": true, "by": nil, "at": now.Format(time.RFC3339)}
	switch iv.Kind {
	case models.AskApproval:
		out["answer"] = "rejected"
	case models.AskDecision:
		if iv.DefaultOption != nil {
			out["option"] = *iv.DefaultOption
		}
	}
	return out
}

// timeOut times out iv and moves its attempt on, audited (intervention.timed_out).
func (a Asks) timeOut(ctx context.Context, iv *models.Intervention) (bool, error) {
	won := false
	err := a.e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		st := askTx{tx: tx, now: now}
		out := timedOutAnswer(iv, now)
		ok, err := st.TimeOutAsk(iv, models.MustJSON(out))
		if err != nil || !ok {
			return nil, err
		}
		job, err := st.ResumeAsk(iv)
		if err != nil {
			return nil, err
		}
		won = true
		details := map[string]any{"executionId": iv.ExecutionID, "stepId": iv.StepID, "kind": iv.Kind, "expiresAt": iv.ExpiresAt.UTC().Format(time.RFC3339)}
		if o, ok := out["option"]; ok {
			details["option"] = o
		}
		if o, ok := out["answer"]; ok {
			details["answer"] = o
		}
		if err := audit.Record(tx, audit.Entry{OrganizationID: iv.OrganizationID, Actor: audit.System, Action: "intervention.timed_out",
			EntityType: "intervention", EntityID: iv.ID, At: now, Details: details}); err != nil {
			return nil, err
		}
		return []Job{job}, nil
	})
	if errors.Is(err, errLost) {
		return false, nil
	}
	return won, err
}

// nextEscalation is the escalation of iv from the level it reached to the next at now:
// the next level of its round, or the first of the next round; ok false when it has gone
// through every level of every round.
func nextEscalation(iv *models.Intervention, now time.Time) (escalationStep, bool) {
	var esc steps.AskEscalation
	if len(iv.Escalation) == 0 || json.Unmarshal(iv.Escalation, &esc) != nil || len(esc.Levels) == 0 {
		return escalationStep{}, false
	}
	es := escalationStep{fromLevel: iv.EscalationLevel, fromRound: iv.EscalationRound}
	switch {
	case iv.EscalationRound == 0:
		es.toLevel, es.toRound = 1, 1
	case iv.EscalationLevel < len(esc.Levels):
		es.toLevel, es.toRound = iv.EscalationLevel+1, iv.EscalationRound
	case iv.EscalationRound < esc.Rounds():
		es.toLevel, es.toRound = 1, iv.EscalationRound+1
	default:
		return escalationStep{}, false
	}
	es.holders = lowered(esc.Levels[es.toLevel-1].To)
	var after int64
	switch {
	case es.toLevel < len(esc.Levels):
		after = esc.Levels[es.toLevel].AfterMs
	case es.toRound < esc.Rounds():
		after = esc.Levels[0].AfterMs
	}
	if after > 0 {
		next := now.Add(time.Duration(after) * time.Millisecond)
		es.next = &next
	}
	return es, true
}

// escalate raises iv to its next level: its holders are that level's, who are told (with
// links), audited (intervention.escalated).
func (a Asks) escalate(ctx context.Context, iv *models.Intervention) (bool, error) {
	about, err := a.aboutOf(ctx, iv, notify.StageEscalated)
	if err != nil {
		return false, err
	}
	won := false
	err = a.e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		es, ok := nextEscalation(iv, now)
		if !ok { // nothing left: the request stops escalating
			return nil, tx.Model(&models.Intervention{}).Where("id = ? AND status = ? AND escalation_level = ? AND escalation_round = ?",
				iv.ID, models.InterventionOpen, iv.EscalationLevel, iv.EscalationRound).Update("next_escalation_at", nil).Error
		}
		if won, err = (askTx{tx: tx, now: now}).EscalateAsk(iv, es); err != nil || !won {
			return nil, err
		}
		from := iv.Holders
		iv.EscalationLevel, iv.EscalationRound, iv.Holders, iv.NextEscalationAt = es.toLevel, es.toRound, models.StringList(es.holders), es.next
		if err := audit.Record(tx, audit.Entry{OrganizationID: iv.OrganizationID, Actor: audit.System, Action: "intervention.escalated",
			EntityType: "intervention", EntityID: iv.ID, At: now, Details: map[string]any{"executionId": iv.ExecutionID, "level": es.toLevel,
				"round": es.toRound, "from": from, "to": es.holders}}); err != nil {
			return nil, err
		}
		about.level, about.round = es.toLevel, es.toRound
		return nil, a.e.tellHolders(tx, iv, about, now)
	})
	return won, err
}

// remind tells iv's holders once, before it times out; the request stays open.
func (a Asks) remind(ctx context.Context, iv *models.Intervention) (bool, error) {
	about, err := a.aboutOf(ctx, iv, notify.StageReminded)
	if err != nil {
		return false, err
	}
	won := false
	err = a.e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		if won, err = (askTx{tx: tx, now: now}).RemindAsk(iv); err != nil || !won {
			return nil, err
		}
		return nil, a.e.tellHolders(tx, iv, about, now)
	})
	return won, err
}

// aboutOf reads what iv's notification says of its execution: the workflow's name and the
// execution's subject.
func (a Asks) aboutOf(ctx context.Context, iv *models.Intervention, stage string) (noticeAbout, error) {
	var row struct {
		Name    string
		Subject *string
	}
	err := a.e.db.Conn(ctx).Table("workflow_executions e").Select("w.name AS name, e.subject AS subject").
		Joins("JOIN workflows w ON w.id = e.workflow_id AND w.organization_id = e.organization_id").
		Where("e.id = ? AND e.organization_id = ?", iv.ExecutionID, iv.OrganizationID).Scan(&row).Error
	return noticeAbout{workflow: row.Name, subject: deref(row.Subject), stage: stage}, err
}
