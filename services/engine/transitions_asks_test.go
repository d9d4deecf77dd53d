package engine

import (
	"fmt"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
)

// request makes an open request of attempt a (of ex), expiring at expires.
func (f *fixture) request(ex *models.Execution, a *models.StepAttempt, expires time.Time) *models.Intervention {
	iv := &models.Intervention{ID: models.NewID(), OrganizationID: f.org, ExecutionID: ex.ID, AttemptID: a.ID, StepID: a.StepID,
		Kind: models.AskApproval, Title: "T", Assignees: models.StringList{"role:admin"}, Holders: models.StringList{"role:admin"},
		Barred: models.StringList{}, Status: models.InterventionOpen, ExpiresAt: expires, CreatedAt: f.at, UpdatedAt: f.at}
	f.create(iv)
	return iv
}

func (f *fixture) requestState(id string) string {
	var iv models.Intervention
	if err := f.db.Conn(f.ctx).First(&iv, "id = ?", id).Error; err != nil {
		f.t.Fatal(err)
	}
	s := iv.Status
	if iv.EscalationLevel > 0 {
		s += fmt.Sprintf(" level %d/%d", iv.EscalationLevel, iv.EscalationRound)
	}
	if iv.RemindAt != nil {
		s += " remind"
	}
	return s
}

// waiting is an execution WAITING at its attempt WAITING with an open request.
func (f *fixture) waiting(expires time.Time) (*models.Execution, *models.StepAttempt, *models.Intervention) {
	ex := f.execution(models.ExecWaiting, nil)
	a := f.attempt(ex, models.StepWaiting, 1)
	return ex, a, f.request(ex, a, expires)
}

func askTransitions() []transitionCase {
	past, future := time.Now().UTC().Add(-time.Hour), time.Now().UTC().Add(time.Hour)
	return []transitionCase{
		{"ParkAsk", "WAITING/1 WAITING at a open", "RUNNING/2 RUNNING", func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(models.ExecRunning, nil)
			a := f.attempt(ex, models.StepRunning, pick(lost, 1, 2)) // lost: reclaimed and taken by another worker
			iv := &models.Intervention{ID: models.NewID(), OrganizationID: f.org, ExecutionID: ex.ID, AttemptID: a.ID, StepID: "a",
				Kind: models.AskApproval, Title: "T", Assignees: models.StringList{}, Holders: models.StringList{}, Barred: models.StringList{},
				Status: models.InterventionOpen, ExpiresAt: future}
			w, err := f.in(func(st stateTx) (bool, error) { return won(askTx(st).ParkAsk(ex, a, 1, []byte(`{}`), iv)) })
			state := f.attemptState(a.ID) + " " + f.executionState(ex.ID)
			if w {
				state += " " + f.requestState(iv.ID)
			}
			return w, state, err
		}},
		{"AnswerAsk+ResumeAsk", "answered PENDING/2 RUNNING", "timed_out WAITING/1 WAITING", func(f *fixture, lost bool) (bool, string, error) {
			ex, a, iv := f.waiting(future)
			if lost { // the sweep timed it out first
				f.db.Conn(f.ctx).Model(iv).Update("status", models.InterventionTimedOut)
			}
			w, err := f.in(func(st stateTx) (bool, error) {
				ok, err := askTx(st).AnswerAsk(iv, models.JSON(`{"answer":"approved"}`), models.NewID(), "a@b.pl", "")
				if err != nil || !ok {
					return false, err
				}
				_, err = askTx(st).ResumeAsk(iv)
				return won(err)
			})
			return w, f.requestState(iv.ID) + " " + f.attemptState(a.ID) + " " + f.executionState(ex.ID), err
		}},
		{"ResumeAsk (attempt not waiting)", "answered PENDING/2", "open FAILED/1", func(f *fixture, lost bool) (bool, string, error) {
			_, a, iv := f.waiting(future)
			if lost { // cancelled: the attempt FAILED
				f.db.Conn(f.ctx).Model(a).Update("status", models.StepFailed)
			}
			w, err := f.in(func(st stateTx) (bool, error) {
				if _, err := askTx(st).AnswerAsk(iv, models.JSON(`{}`), models.NewID(), "a@b.pl", ""); err != nil {
					return false, err
				}
				_, err := askTx(st).ResumeAsk(iv)
				return won(err)
			})
			return w, f.requestState(iv.ID) + " " + f.attemptState(a.ID), err
		}},
		{"TimeOutAsk", "timed_out", "open", func(f *fixture, lost bool) (bool, string, error) {
			_, _, iv := f.waiting(pick(lost, past, future)) // lost: not expired by the database clock
			w, err := f.in(func(st stateTx) (bool, error) { return askTx(st).TimeOutAsk(iv, models.JSON(`{"timedOut":true}`)) })
			return w, f.requestState(iv.ID), err
		}},
		{"EscalateAsk", "open level 1/1", "open level 1/1", func(f *fixture, lost bool) (bool, string, error) {
			_, _, iv := f.waiting(future)
			f.db.Conn(f.ctx).Model(iv).Update("next_escalation_at", past)
			if lost { // another sweep raised it first
				f.db.Conn(f.ctx).Model(iv).Updates(map[string]any{"escalation_level": 1, "escalation_round": 1})
			}
			w, err := f.in(func(st stateTx) (bool, error) {
				return askTx(st).EscalateAsk(iv, escalationStep{fromLevel: 0, fromRound: 0, toLevel: 1, toRound: 1, holders: []string{"role:owner"}})
			})
			return w, f.requestState(iv.ID), err
		}},
		{"RemindAsk", "open", "open remind", func(f *fixture, lost bool) (bool, string, error) {
			_, _, iv := f.waiting(future)
			f.db.Conn(f.ctx).Model(iv).Update("remind_at", pick(lost, past, future)) // lost: not due
			w, err := f.in(func(st stateTx) (bool, error) { return askTx(st).RemindAsk(iv) })
			return w, f.requestState(iv.ID), err
		}},
		{"UseLink", "used", "unused", func(f *fixture, lost bool) (bool, string, error) {
			_, _, iv := f.waiting(future)
			user := models.NewID()
			l := &models.InterventionLink{ID: models.NewID(), OrganizationID: f.org, InterventionID: iv.ID, UserID: user,
				TokenHash: hashToken(models.NewID()), ExpiresAt: pick(lost, future, past), CreatedAt: f.at} // lost: expired
			f.create(l)
			w, err := f.in(func(st stateTx) (bool, error) {
				err := askTx(st).UseLink(f.org, iv.ID, user, l.TokenHash)
				if apperr.ErrorCode(err) == apperr.EFORBIDDEN { // its lost case
					return false, nil
				}
				return err == nil, err
			})
			var got models.InterventionLink
			f.db.Conn(f.ctx).First(&got, "id = ?", l.ID)
			return w, pick(got.UsedAt != nil, "unused", "used"), err
		}},
		{"CancelAsk", "FAILED cancelled FAILED/1", "RUNNING open WAITING/1", func(f *fixture, lost bool) (bool, string, error) {
			ex, a, iv := f.waiting(future)
			if lost { // answered and running on
				f.db.Conn(f.ctx).Model(ex).Update("status", models.ExecRunning)
			}
			w, err := f.in(func(st stateTx) (bool, error) { return won(askTx(st).CancelAsk(ex, "Cancelled")) })
			return w, f.executionState(ex.ID) + " " + f.requestState(iv.ID) + " " + f.attemptState(a.ID), err
		}},
	}
}

// TestAskTransitions runs each ask transition, winning and losing, on both databases.
func TestAskTransitions(t *testing.T) {
	t.Parallel()
	cases := askTransitions()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newFixture(t, db)
		for _, c := range cases {
			for _, lost := range []bool{false, true} {
				w, state, err := c.run(f, lost)
				if err != nil {
					t.Fatalf("%s (lost case %v): %v", c.name, lost, err)
				}
				if want := pick(lost, c.win, c.lost); w == lost || state != want {
					t.Errorf("%s (lost case %v): won %v, state %q; want won %v, state %q", c.name, lost, w, state, !lost, want)
				}
			}
		}
	})
}
