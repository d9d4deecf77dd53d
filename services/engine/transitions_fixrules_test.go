package engine

import (
	"errors"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
)

// closedDeadLetter makes a dead letter closed as status, its error record resolved as
// resolution ("manual", "skipped" by hand; "manual_retry" by a successful replay), expiring
// at expires.
func (f *fixture) closedDeadLetter(status, resolution string, expires time.Time) *models.DeadLetter {
	ex := f.execution(models.ExecFailed, nil)
	dl := f.deadLetter(ex, status)
	if err := f.db.Conn(f.ctx).Model(&models.DeadLetter{}).Where("id = ?", dl.ID).Update("expires_at", expires).Error; err != nil {
		f.t.Fatal(err)
	}
	if err := f.db.Conn(f.ctx).Model(&models.ExecutionError{}).Where("id = ?", dl.ErrorID).
		Updates(map[string]any{"status": models.ErrResolved, "resolution_type": resolution}).Error; err != nil {
		f.t.Fatal(err)
	}
	return dl
}

func (f *fixture) inputChange(dl *models.DeadLetter, status string) *models.InputChangeRequest {
	req := &models.InputChangeRequest{ID: models.NewID(), OrganizationID: f.org, DeadLetterID: dl.ID, ExecutionID: dl.ExecutionID,
		Mode: ReplayFromFailed, Input: models.JSON(`{}`), InputBefore: models.JSON(`{}`), InputAfter: models.JSON(`{}`), Status: status,
		CreatedAt: f.at, UpdatedAt: f.at}
	f.create(req)
	return req
}

func (f *fixture) inputChangeState(id string) string {
	var r models.InputChangeRequest
	if err := f.db.Conn(f.ctx).First(&r, "id = ?", id).Error; err != nil {
		f.t.Fatal(err)
	}
	return r.Status
}

// conflict returns the message of an ECONFLICT ("" for another error or none).
func conflict(err error) string {
	var ae *apperr.Error
	if errors.As(err, &ae) && ae.Code == apperr.ECONFLICT {
		return ae.Message
	}
	return ""
}

// TestFixRuleTransitions is the conformance test of issue 21's transitions (input-change
// requests, reopening an item closed by hand): each wins from the state it expects and
// loses, writing nothing and saying why, from another; on SQLite and PostgreSQL.
func TestFixRuleTransitions(t *testing.T) {
	t.Parallel()
	later := time.Now().UTC().Add(24 * time.Hour)
	cases := []transitionCase{
		{"DecideInputChange (approve)", models.ChangeApproved, models.ChangeApproved, func(f *fixture, lost bool) (bool, string, error) {
			// lost: a second approval (another admin's, at the same moment or after)
			req := f.inputChange(f.deadLetter(f.execution(models.ExecDLQPending, nil), models.DLQPending), pick(lost, models.ChangePending, models.ChangeApproved))
			w, err := f.in(func(st stateTx) (bool, error) {
				err := st.deadLetters().DecideInputChange(req, models.ChangeApproved, map[string]any{"decided_name": "admin@x"})
				if lost && conflict(err) != "inputchange.conflict.approved" {
					t.Errorf("second approval: %v", err)
				}
				return won(err)
			})
			return w, f.inputChangeState(req.ID), err
		}},
		{"DecideInputChange (approve after reject)", models.ChangeApproved, models.ChangeRejected, func(f *fixture, lost bool) (bool, string, error) {
			req := f.inputChange(f.deadLetter(f.execution(models.ExecDLQPending, nil), models.DLQPending), pick(lost, models.ChangePending, models.ChangeRejected))
			w, err := f.in(func(st stateTx) (bool, error) {
				return won(st.deadLetters().DecideInputChange(req, models.ChangeApproved, nil))
			})
			return w, f.inputChangeState(req.ID), err
		}},
		{"DecideInputChange (reject)", models.ChangeRejected, models.ChangeCancelled, func(f *fixture, lost bool) (bool, string, error) {
			req := f.inputChange(f.deadLetter(f.execution(models.ExecDLQPending, nil), models.DLQPending), pick(lost, models.ChangePending, models.ChangeCancelled))
			w, err := f.in(func(st stateTx) (bool, error) {
				return won(st.deadLetters().DecideInputChange(req, models.ChangeRejected, nil))
			})
			return w, f.inputChangeState(req.ID), err
		}},
		{"CancelInputChanges", models.ChangeCancelled, models.ChangeApproved, func(f *fixture, lost bool) (bool, string, error) {
			dl := f.deadLetter(f.execution(models.ExecDLQPending, nil), models.DLQPending)
			req := f.inputChange(dl, pick(lost, models.ChangePending, models.ChangeApproved))
			w, err := f.in(func(st stateTx) (bool, error) {
				n, err := st.deadLetters().CancelInputChanges(dl.ID)
				return n == 1, err
			})
			return w, f.inputChangeState(req.ID), err
		}},
		{"ReopenDeadLetter", models.DLQPending, models.DLQPending, func(f *fixture, lost bool) (bool, string, error) {
			dl := f.closedDeadLetter(models.DLQResolved, "manual", later)
			if lost { // reopened already
				f.db.Conn(f.ctx).Model(&models.DeadLetter{}).Where("id = ?", dl.ID).Update("status", models.DLQPending)
			}
			w, err := f.in(func(st stateTx) (bool, error) {
				err := st.deadLetters().ReopenDeadLetter(dl)
				if lost && conflict(err) != "dlq.reopen.open" {
					t.Errorf("reopened twice: %v", err)
				}
				return won(err)
			})
			return w, f.deadLetterState(dl.ID), err
		}},
		{"ReopenDeadLetter (expired)", models.DLQPending, models.DLQSkipped, func(f *fixture, lost bool) (bool, string, error) {
			dl := f.closedDeadLetter(models.DLQSkipped, "skipped", pick(lost, later, f.at)) // lost: past its retention
			w, err := f.in(func(st stateTx) (bool, error) {
				err := st.deadLetters().ReopenDeadLetter(dl)
				if lost && conflict(err) != "dlq.reopen.expired" {
					t.Errorf("expired: %v", err)
				}
				return won(err)
			})
			return w, f.deadLetterState(dl.ID), err
		}},
		{"ReopenDeadLetter (closed by a replay)", models.DLQPending, models.DLQResolved, func(f *fixture, lost bool) (bool, string, error) {
			dl := f.closedDeadLetter(models.DLQResolved, pick(lost, "manual", "manual_retry"), later)
			w, err := f.in(func(st stateTx) (bool, error) {
				err := st.deadLetters().ReopenDeadLetter(dl)
				if lost && conflict(err) != "dlq.reopen.replayed" {
					t.Errorf("closed by a replay: %v", err)
				}
				return won(err)
			})
			return w, f.deadLetterState(dl.ID), err
		}},
		{"ReopenError", models.ErrDeadLetter, models.ErrDeadLetter, func(f *fixture, lost bool) (bool, string, error) {
			dl := f.closedDeadLetter(models.DLQResolved, "manual", later)
			if lost {
				f.db.Conn(f.ctx).Model(&models.ExecutionError{}).Where("id = ?", dl.ErrorID).Update("status", models.ErrDeadLetter)
			}
			w, err := f.in(func(st stateTx) (bool, error) { return st.errors().ReopenError(dl.ErrorID) })
			var rec models.ExecutionError
			f.db.Conn(f.ctx).First(&rec, "id = ?", dl.ErrorID)
			return w, rec.Status, err
		}},
		{"ReturnDeadLettered", models.ExecDLQPending, models.ExecPending, func(f *fixture, lost bool) (bool, string, error) {
			ex := f.execution(pick(lost, models.ExecFailed, models.ExecPending), nil) // lost: a replay runs it
			w, err := f.in(func(st stateTx) (bool, error) { return st.deadLetters().ReturnDeadLettered(ex.ID) })
			return w, f.executionState(ex.ID), err
		}},
	}
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newFixture(t, db)
		for _, c := range cases {
			for _, lost := range []bool{false, true} {
				won, state, err := c.run(f, lost)
				if err != nil {
					t.Fatalf("%s (lost case %v): %v", c.name, lost, err)
				}
				if want := pick(lost, c.win, c.lost); won == lost || state != want {
					t.Errorf("%s (lost case %v): won %v, state %q; want won %v, state %q", c.name, lost, won, state, !lost, want)
				}
			}
		}
	})
}
