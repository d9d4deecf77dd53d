package engine

import (
	"fmt"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// escalationState is a group's escalation level and state, and the status of an error record.
func (f *fixture) escalationState(groupID, errorID string) string {
	f.t.Helper()
	g := f.group(groupID)
	var status string
	if err := f.db.Conn(f.ctx).Model(&models.ExecutionError{}).Where("id = ?", errorID).Pluck("status", &status).Error; err != nil {
		f.t.Fatal(err)
	}
	return fmt.Sprintf("level %d %s, record %s", g.EscalationLevel, g.State, status)
}

// escalationFailure makes a dead letter in a group of its own (one per case and lost).
func (f *fixture) escalationFailure(name string, lost bool) *models.DeadLetter {
	f.t.Helper()
	return f.failure(name+pick(lost, "-win", "-lost"), "validation", "NIP „526104082” ma 9 cyfr")
}

// escalationTransitions are the transitions of escalation (issue 22), each from the state it
// expects and, lost, from another.
func escalationTransitions() []transitionCase {
	return []transitionCase{
		// Lost: the group was raised by another pass already (it is not at level 0 any more).
		{"EscalateGroup", "level 1 open, record dead_letter", "level 2 open, record dead_letter", func(f *fixture, lost bool) (bool, string, error) {
			dl := f.escalationFailure("escalate-group", lost)
			if lost {
				f.db.Conn(f.ctx).Model(&models.Group{}).Where("id = ?", *dl.GroupID).Update("escalation_level", 2)
			}
			w, err := f.in(func(st stateTx) (bool, error) {
				return st.groups().EscalateGroup(f.org, *dl.GroupID, 0, 1, `["role:admin"]`)
			})
			return w, f.escalationState(*dl.GroupID, dl.ErrorID), err
		}},
		// Lost: the group was resolved meanwhile.
		{"EscalateGroup (resolved)", "level 1 open, record dead_letter", "level 0 resolved, record resolved", func(f *fixture, lost bool) (bool, string, error) {
			dl := f.escalationFailure("escalate-resolved", lost)
			if lost {
				f.settle(dl)
				f.db.Conn(f.ctx).Model(&models.ExecutionError{}).Where("id = ?", dl.ErrorID).Update("status", models.ErrResolved)
			}
			w, err := f.in(func(st stateTx) (bool, error) {
				return st.groups().EscalateGroup(f.org, *dl.GroupID, 0, 1, `["role:admin"]`)
			})
			return w, f.escalationState(*dl.GroupID, dl.ErrorID), err
		}},
		// Lost: the item's record is not dead-lettered (its item was closed meanwhile).
		{"EscalateErrors", "level 0 open, record escalated", "level 0 open, record resolved", func(f *fixture, lost bool) (bool, string, error) {
			dl := f.escalationFailure("escalate-errors", lost)
			if lost {
				f.db.Conn(f.ctx).Model(&models.ExecutionError{}).Where("id = ?", dl.ErrorID).Update("status", models.ErrResolved)
			}
			w, err := f.in(func(st stateTx) (bool, error) {
				n, err := st.errors().EscalateErrors(f.org, []string{*dl.GroupID})
				return n == 1, err
			})
			return w, f.escalationState(*dl.GroupID, dl.ErrorID), err
		}},
		// Another organization's groups: nothing changes (lost).
		{"EscalateErrors (another organization)", "level 0 open, record escalated", "level 0 open, record dead_letter", func(f *fixture, lost bool) (bool, string, error) {
			dl := f.escalationFailure("escalate-other", lost)
			org := f.org
			if lost {
				org = models.NewID()
			}
			w, err := f.in(func(st stateTx) (bool, error) {
				n, err := st.errors().EscalateErrors(org, []string{*dl.GroupID})
				return n == 1, err
			})
			return w, f.escalationState(*dl.GroupID, dl.ErrorID), err
		}},
		// ResolveGroupIfDone ends the escalation and de-escalates the records of items its
		// closing did not resolve (an expired item's). Lost: an item still pending.
		{"ResolveGroupIfDone (escalated)", "level 0 resolved, record dead_letter", "level 2 open, record escalated", func(f *fixture, lost bool) (bool, string, error) {
			dl := f.escalationFailure("resolve-escalated", lost)
			f.db.Conn(f.ctx).Model(&models.Group{}).Where("id = ?", *dl.GroupID).Update("escalation_level", 2)
			f.db.Conn(f.ctx).Model(&models.ExecutionError{}).Where("id = ?", dl.ErrorID).Update("status", models.ErrEscalated)
			if !lost {
				// Expired as retention expires it: the item and its group's counts.
				f.db.Conn(f.ctx).Model(&models.DeadLetter{}).Where("id = ?", dl.ID).Update("status", models.DLQExpired)
				f.db.Conn(f.ctx).Exec("UPDATE dlq_groups SET pending_count = pending_count - 1, open_count = open_count - 1, closed_count = closed_count + 1 WHERE id = ?", *dl.GroupID)
			}
			w, err := f.in(func(st stateTx) (bool, error) { return st.groups().ResolveGroupIfDone(*dl.GroupID) })
			return w, f.escalationState(*dl.GroupID, dl.ErrorID), err
		}},
		// SettleError closes an escalated record as it closes a dead-lettered one.
		{"SettleError (escalated)", "level 0 open, record resolved", "level 0 open, record retrying", func(f *fixture, lost bool) (bool, string, error) {
			dl := f.escalationFailure("settle-escalated", lost)
			f.db.Conn(f.ctx).Model(&models.ExecutionError{}).Where("id = ?", dl.ErrorID).Update("status", pick(lost, models.ErrEscalated, models.ErrRetrying))
			w, err := f.in(func(st stateTx) (bool, error) { return won(st.errors().SettleError(dl.ErrorID, "manual", nil, nil)) })
			return w, f.escalationState(*dl.GroupID, dl.ErrorID), err
		}},
	}
}

// TestEscalationTransitions is the conformance test of the escalation's transitions, each
// winning and losing, on SQLite and PostgreSQL.
func TestEscalationTransitions(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newFixture(t, db)
		for _, c := range escalationTransitions() {
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
