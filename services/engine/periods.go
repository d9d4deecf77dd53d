package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/classify"
	"lifeline/services/definition"
	"lifeline/services/periods"
)

// Closed periods (issue 23): a step marked postsToPeriod does not run while the office has the
// execution's period closed for its client or for every client (models.ClosedPeriodFor). A
// manual replay that would run such a step is refused (apperr.EPERIODCLOSED, nothing
// changed); an attempt due for one fails unsent as validation / period_closed, which is
// never retried (neverRetried), so the execution goes to the DLQ.

// periodGate returns the failure of an attempt of step for ex when ex's period is closed: a
// classified validation / period_closed error, or a storeError when the database failed
// (the attempt is handed back unsent). Nil for a step not marked postsToPeriod, or an
// execution without a period (no query then: other steps' path does not change).
func (e *attempts) periodGate(ctx context.Context, ex *models.Execution, step definition.Step) error {
	if !step.PostsToPeriod || ex.Period == nil {
		return nil
	}
	cp, err := models.ClosedPeriodFor(e.db.Conn(ctx), ex.OrganizationID, deref(ex.Client), *ex.Period)
	if err != nil {
		return &storeError{err}
	}
	if cp == nil {
		return nil
	}
	return classify.New(classify.Validation, classify.CodePeriodClosed, periodClosedMessage(cp, step))
}

// periodClosedMessage says what closes the period and that step was not run, in English
// (views/i18n/locales/formats translates it).
func periodClosedMessage(cp *models.ClosedPeriod, step definition.Step) string {
	return fmt.Sprintf("The period %s is closed for %s (closed by %s on %s); the step %q posts to it and was not run.",
		cp.Period, periods.ClientText(cp.Client), periods.ClosedByText(cp.ClosedByName), cp.ClosedAt.UTC().Format("2006-01-02 15:04 UTC"), step.Title())
}

// replayAbout is what ex is about once a replay of def with input runs: re-rendered from the
// input when it was edited or the execution starts anew (a full retry), else ex's. Field
// messages (under modifiedInput.) when the edited input's values are not of their kind.
func (e *recovery) replayAbout(ctx context.Context, ex *models.Execution, def *definition.Definition, input []byte, rerender bool) (models.About, map[string]string, error) {
	if !rerender {
		return ex.About, nil, nil
	}
	rules, err := deadlineSettings(e.db.Conn(ctx), def, ex.OrganizationID)
	if err != nil {
		return models.About{}, nil, err
	}
	var in any
	if json.Unmarshal(input, &in) != nil {
		in = nil
	}
	facts, errs := def.Settings.About.Render(in, rules)
	if errs != nil {
		fields := map[string]string{}
		for k, v := range errs {
			fields["modifiedInput."+strings.TrimPrefix(k, "input.")] = v
		}
		return models.About{}, fields, nil
	}
	return aboutOf(facts), nil, nil
}

// aboutOf is the stored form of rendered facts.
func aboutOf(f definition.Facts) models.About {
	a := models.About{Client: f.Client, Period: f.Period, Obligation: f.Obligation, AmountMinor: f.AmountMinor, Currency: f.Currency}
	if f.Due != nil {
		d := f.Due.Format("2006-01-02")
		a.DueOn = &d
	}
	return a
}

// refuseClosedPeriod returns apperr.EPERIODCLOSED when a replay of def from step from (-1:
// nothing runs) would run a step marked postsToPeriod while about's period is closed, with tx.
func refuseClosedPeriod(tx *gorm.DB, orgID string, def *definition.Definition, from int, about models.About) error {
	if about.Period == nil || from < 0 {
		return nil
	}
	j := def.PostsToPeriod(from)
	if j < 0 {
		return nil
	}
	cp, err := models.ClosedPeriodFor(tx, orgID, deref(about.Client), *about.Period)
	if err != nil || cp == nil {
		return err
	}
	return &apperr.Error{Code: apperr.EPERIODCLOSED, Message: fmt.Sprintf(
		"The period %s is closed for %s (closed by %s on %s): the replay would run the step %q, which posts to it. Edit the input to an open period, ask an admin to reopen the period, or close the item with a note.",
		cp.Period, periods.ClientText(cp.Client), periods.ClosedByText(cp.ClosedByName), cp.ClosedAt.UTC().Format("2006-01-02 15:04 UTC"), def.Steps[j].Title())}
}

// RecordAbout stores what the dead letter's execution is about after an edited input moved
// it (another period, client or amount). Not a state: written in the transaction whose
// ClaimDeadLetter won.
func (s deadLetterTx) RecordAbout(dl *models.DeadLetter, about models.About) error {
	return s.tx.Model(&models.DeadLetter{}).Where("id = ?", dl.ID).Updates(about.Columns()).Error
}
