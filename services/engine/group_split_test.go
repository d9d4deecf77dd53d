package engine

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
)

// TestTwoSplitsAtOnce: each of a group's two items is split out of it at the same moment,
// both past SplitOut's check on the group they read before either writes (a hook holds
// each until the other has arrived; on SQLite, which runs one transaction at a time, before
// their transactions). One split wins and the other is group.split.alone: the group keeps
// the other item, open, and no group's counts differ from its items'. 5 rounds, both
// databases.
func TestTwoSplitsAtOnce(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newFixture(t, db)
		for round := range 5 {
			step := fmt.Sprintf("send%d", round) // a group of its own each round
			a := f.failure(step, "validation", "token expired")
			b := f.failure(step, "validation", "token expired")
			gid := *a.GroupID
			if *b.GroupID != gid {
				t.Fatal("one cause, two groups")
			}
			var arrived sync.WaitGroup
			arrived.Add(2)
			meet := func() { arrived.Done(); arrived.Wait() }
			hooks := Hooks{InTx: func(transition, id string) {
				if transition == TransitionSplitOut && id == gid {
					meet()
				}
			}}
			if db.Dialect == models.SQLite {
				hooks = Hooks{BeforeTx: func(transition, _ string) {
					if transition == TransitionSplitOut {
						meet()
					}
				}}
			}
			f.e.SetHooks(hooks)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			got := make([]string, 2)
			for i, dl := range []*models.DeadLetter{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i], errs[i] = f.e.Groups().Split(f.ctx, f.org, dl.ID, audit.System)
				}()
			}
			wg.Wait()
			f.e.SetHooks(Hooks{})

			won, lost := -1, -1
			for i, err := range errs {
				var ae *apperr.Error
				switch {
				case err == nil:
					won = i
				case errors.As(err, &ae) && ae.Message == "group.split.alone":
					lost = i
				default:
					t.Fatalf("round %d: split %d: %v", round, i, err)
				}
			}
			if won < 0 || lost < 0 {
				t.Fatalf("round %d: two splits of a group of two: %v", round, errs)
			}
			split, stayed := []*models.DeadLetter{a, b}[won], []*models.DeadLetter{a, b}[lost]
			if f.groupOf(split.ID) != got[won] || got[won] == gid || f.groupOf(stayed.ID) != gid {
				t.Fatalf("round %d: the split item is in %s (split to %s), the other in %s (the group %s)", round,
					f.groupOf(split.ID), got[won], f.groupOf(stayed.ID), gid)
			}
			if g := f.group(gid); g.State != models.GroupOpen || f.counts(gid) != (models.GroupCounts{Pending: 1}) {
				t.Fatalf("round %d: the group left: %s %+v", round, g.State, f.counts(gid))
			}
			if g := f.group(got[won]); g.State != models.GroupOpen || f.counts(got[won]) != (models.GroupCounts{Pending: 1}) {
				t.Fatalf("round %d: the new group: %s %+v", round, g.State, f.counts(got[won]))
			}
			var made int64
			if err := db.Conn(f.ctx).Model(&models.Group{}).Where("split_from = ?", gid).Count(&made).Error; err != nil || made != 1 {
				t.Fatalf("round %d: %d groups split from it, %v; want 1 (a lost split leaves none)", round, made, err)
			}
			noCountDrift(t, f, f.org)
		}
	})
}
