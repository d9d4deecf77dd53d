package engine

import (
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
)

// failure makes a dead letter of step with type and reason, in its group, as deadLetter does.
func (f *fixture) failure(step, typ, reason string) *models.DeadLetter {
	f.t.Helper()
	ex := f.execution(models.ExecDLQPending, nil)
	rec := &models.ExecutionError{ID: models.NewID(), OrganizationID: f.org, ExecutionID: ex.ID, StepID: step, ErrorType: typ,
		ErrorMessage: reason, Status: models.ErrDeadLetter, CreatedAt: f.at, UpdatedAt: f.at}
	f.create(rec)
	dl := &models.DeadLetter{ID: models.NewID(), OrganizationID: f.org, ErrorID: rec.ID, WorkflowID: f.wf, ExecutionID: ex.ID,
		OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: step, Status: models.DLQPending, ExpiresAt: f.at,
		ErrorType: typ, Reason: reason, CreatedAt: f.at, UpdatedAt: f.at}
	dl.AmountMinor = amountOf(dl.ID)
	if _, err := f.in(func(st stateTx) (bool, error) {
		if _, err := st.groups().JoinGroup(dl, "HTTP_400"); err != nil {
			return false, err
		}
		dl.CreatedAt = st.now
		return true, st.tx.Create(dl).Error
	}); err != nil {
		f.t.Fatal(err)
	}
	return dl
}

// amountOf is an amount in minor units (up to 1,000,000.00) that differs from item to item.
func amountOf(id string) *int64 {
	a := int64(crc32.ChecksumIEEE([]byte(id)) % 100_000_000)
	return &a
}

func (f *fixture) group(id string) models.Group {
	f.t.Helper()
	var g models.Group // as readers read it: its counters' deltas not yet folded added
	if err := f.db.Conn(f.ctx).Table(models.GroupsNow).First(&g, "id = ?", id).Error; err != nil {
		f.t.Fatal(err)
	}
	return g
}

// settle closes a dead letter as Settle does (ClaimDeadLetter to resolved).
func (f *fixture) settle(dl *models.DeadLetter) {
	f.t.Helper()
	if _, err := f.in(func(st stateTx) (bool, error) {
		return won(st.deadLetters().ClaimDeadLetter(dl, models.DLQResolved, nil))
	}); err != nil {
		f.t.Fatal(err)
	}
}

// TestGroupTransitions is the conformance test of the failure groups' transitions, each
// winning and losing, on SQLite and PostgreSQL.
func TestGroupTransitions(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		clock := modeltest.Clock(t, db)
		f := newFixture(t, db)

		// JoinGroup: one cause of different NIPs is one group; another step or type is another.
		a := f.failure("send", "validation", "NIP „526104082” ma 9 cyfr, a powinien mieć 10 (400 Bad Request)")
		b := f.failure("send", "validation", "NIP „701000213” ma 9 cyfr, a powinien mieć 10 (400 Bad Request)")
		step := f.failure("fetch", "validation", "NIP „701000213” ma 9 cyfr, a powinien mieć 10 (400 Bad Request)")
		typ := f.failure("send", "permanent", "NIP „701000213” ma 9 cyfr, a powinien mieć 10 (400 Bad Request)")
		if *a.GroupID != *b.GroupID {
			t.Fatal("two NIPs of one cause are two groups")
		}
		if *step.GroupID == *a.GroupID || *typ.GroupID == *a.GroupID || *step.GroupID == *typ.GroupID {
			t.Fatal("another step or type joined the group")
		}
		g := f.group(*a.GroupID)
		if g.State != models.GroupOpen || g.Arrivals != 2 || g.Title != "NIP „…” ma … cyfr, a powinien mieć … (400 Bad Request)" || g.StepID != "send" {
			t.Fatalf("group %+v", g)
		}

		// ResolveGroupOf: lost while an item is pending; won when the last one closes.
		f.settle(a)
		if g := f.group(*a.GroupID); g.State != models.GroupOpen || g.ResolvedAt != nil {
			t.Fatalf("resolved with an item pending: %+v", g)
		}
		if won, err := f.in(func(st stateTx) (bool, error) { return st.groups().ResolveGroupOf(b.ID) }); err != nil || won {
			t.Fatalf("ResolveGroupOf with b pending: won %v, %v", won, err)
		}
		f.settle(b)
		g = f.group(*a.GroupID)
		if g.State != models.GroupResolved || g.ResolvedAt == nil {
			t.Fatalf("not resolved when its last item closed: %+v", g)
		}
		resolvedAt := *g.ResolvedAt

		// MuteGroup: lost on a resolved group (ECONFLICT), on another organization's (ENOTFOUND).
		err := f.mute(*a.GroupID, f.org, time.Hour)
		if ae := (*apperr.Error)(nil); !errors.As(err, &ae) || ae.Message != "group.conflict.resolved" {
			t.Fatalf("mute a resolved group: %v", err)
		}
		if err := f.mute(*step.GroupID, models.NewID(), time.Hour); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Fatalf("mute another organization's group: %v", err)
		}

		// JoinGroup reopens a resolved group and remembers when it was resolved.
		clock.Advance(time.Minute)
		c := f.failure("send", "validation", "NIP „111111111” ma 9 cyfr, a powinien mieć 10 (400 Bad Request)")
		g = f.group(*c.GroupID)
		if *c.GroupID != *a.GroupID || g.State != models.GroupOpen || g.ResolvedAt != nil || g.ReopenedAt == nil ||
			g.ResolvedBefore == nil || !g.ResolvedBefore.Equal(resolvedAt) {
			t.Fatalf("recurrence did not reopen the group: %+v", g)
		}
		// A recurrence of an open group reopens nothing (the lost case).
		var join GroupJoin
		if _, err := f.in(func(st stateTx) (bool, error) {
			dl := *c
			var err error
			join, err = st.groups().JoinGroup(&dl, "HTTP_400")
			return true, err
		}); err != nil || join.Reopened || join.New || join.GroupID != *a.GroupID {
			t.Fatalf("join an open group: %+v, %v", join, err)
		}

		// MuteGroup wins on an open group; it collects silently until the time passes.
		if err := f.mute(*step.GroupID, f.org, time.Hour); err != nil {
			t.Fatal(err)
		}
		d := f.failure("fetch", "validation", "NIP „222222222” ma 9 cyfr, a powinien mieć 10 (400 Bad Request)")
		if g := f.group(*d.GroupID); *d.GroupID != *step.GroupID || g.State != models.GroupMuted || g.Arrivals != 2 {
			t.Fatalf("muted group %+v", g)
		}
		clock.Advance(2 * time.Hour)
		now, _ := db.Now(f.ctx)
		if g := f.group(*d.GroupID); g.StateAt(now) != models.GroupOpen {
			t.Fatalf("a mute past its time is %s", g.StateAt(now))
		}
		e := f.failure("fetch", "validation", "NIP „333333333” ma 9 cyfr, a powinien mieć 10 (400 Bad Request)")
		if g := f.group(*e.GroupID); g.State != models.GroupOpen || g.MutedUntil != nil {
			t.Fatalf("an item after the mute did not open the group: %+v", g)
		}

		// SplitOut: won for an item of a group of several; lost for an item alone in its group.
		var split string
		if _, err := f.in(func(st stateTx) (bool, error) {
			var err error
			split, err = st.groups().SplitOut(d)
			return err == nil, err
		}); err != nil {
			t.Fatal(err)
		}
		if g := f.group(split); split == *step.GroupID || g.SplitFrom == nil || *g.SplitFrom != *step.GroupID || g.State != models.GroupOpen ||
			g.Title != f.group(*step.GroupID).Title {
			t.Fatalf("split group %+v", g)
		}
		if got := f.groupOf(d.ID); got != split {
			t.Fatalf("the item is in %s, not its own group %s", got, split)
		}
		dd := *d
		_, err = f.in(func(st stateTx) (bool, error) { _, err := st.groups().SplitOut(&dd); return err == nil, err })
		if ae := (*apperr.Error)(nil); !errors.As(err, &ae) || ae.Message != "group.split.alone" {
			t.Fatalf("split an item alone in its group: %v", err)
		}
		if got := f.groupOf(d.ID); got != split {
			t.Fatal("a lost split moved the item")
		}
		// Another split of the same stale copy loses: the item left the group it names.
		stale := *d
		stale.GroupID = step.GroupID
		_, err = f.in(func(st stateTx) (bool, error) { _, err := st.groups().SplitOut(&stale); return err == nil, err })
		if ae := (*apperr.Error)(nil); !errors.As(err, &ae) || ae.Message != "group.split.moved" {
			t.Fatalf("split of a stale copy: %v", err)
		}
		var n int64
		db.Conn(f.ctx).Model(&models.Group{}).Where("split_from = ?", *step.GroupID).Count(&n)
		if n != 1 {
			t.Fatalf("%d split groups, want 1 (a lost split leaves none)", n)
		}
		// BackfillGroup: won for an item without a group; lost (nothing counted) for one with.
		old := f.failure("send", "validation", "token expired")
		db.Conn(f.ctx).Exec("UPDATE dead_letter_queue SET group_id = NULL WHERE id = ?", old.ID)
		before := f.group(*old.GroupID).Arrivals
		for _, lost := range []bool{false, true} {
			cp := *old
			cp.GroupID = nil
			won, err := f.in(func(st stateTx) (bool, error) { return st.groups().BackfillGroup(&cp, "HTTP_400") })
			if err != nil || won == lost || f.groupOf(old.ID) != *old.GroupID || f.group(*old.GroupID).Arrivals != before+1 {
				t.Fatalf("BackfillGroup (lost case %v): won %v, %v, arrivals %d", lost, won, err, f.group(*old.GroupID).Arrivals)
			}
		}
		// Closing the split item resolves its own group, not the one it left.
		f.settle(d)
		if f.group(split).State != models.GroupResolved || f.group(*step.GroupID).State != models.GroupOpen {
			t.Fatal("closing the split item did not resolve its own group alone")
		}
	})
}

func (f *fixture) mute(groupID, orgID string, d time.Duration) error {
	now, err := f.db.Now(f.ctx)
	if err != nil {
		return err
	}
	_, err = f.in(func(st stateTx) (bool, error) { return true, st.groups().MuteGroup(orgID, groupID, now.Add(d)) })
	return err
}

func (f *fixture) groupOf(dlID string) string {
	f.t.Helper()
	var dl models.DeadLetter
	if err := f.db.Conn(f.ctx).Select("group_id").First(&dl, "id = ?", dlID).Error; err != nil || dl.GroupID == nil {
		f.t.Fatalf("group of %s: %v", dlID, err)
	}
	return *dl.GroupID
}

// Of two transactions closing a group's last two items at once, one resolves it: each
// locks the group before it looks for what is left (PostgreSQL, read committed).
func TestResolveGroupConcurrentCloses(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newFixture(t, db)
		for range 5 {
			a := f.failure("send", "validation", "token expired")
			b := f.failure("send", "validation", "token expired")
			if *a.GroupID != *b.GroupID {
				t.Fatal("one cause, two groups")
			}
			errs := make(chan error, 2)
			for _, dl := range []*models.DeadLetter{a, b} {
				go func() {
					_, err := f.in(func(st stateTx) (bool, error) {
						return won(st.deadLetters().ClaimDeadLetter(dl, models.DLQSkipped, nil))
					})
					errs <- err
				}()
			}
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if g := f.group(*a.GroupID); g.State != models.GroupResolved {
				t.Fatalf("both items closed at once, group %s", g.State)
			}
		}
	})
}

// reopenable makes the closed dead letter dl reopenable by hand, as Settle leaves one: its
// error record resolved "manual", its retention not over.
func (f *fixture) reopenable(dl *models.DeadLetter) {
	f.t.Helper()
	if err := f.db.Conn(f.ctx).Model(&models.DeadLetter{}).Where("id = ?", dl.ID).Update("expires_at", time.Now().Add(time.Hour)).Error; err != nil {
		f.t.Fatal(err)
	}
	if err := f.db.Conn(f.ctx).Model(&models.ExecutionError{}).Where("id = ?", dl.ErrorID).Update("resolution_type", "manual").Error; err != nil {
		f.t.Fatal(err)
	}
}

// TestReopenGroupOf is the conformance test of an admin's reopening of a closed item in a
// resolved group (ReopenDeadLetter, and its ReopenGroupOf), winning and losing, on SQLite
// and PostgreSQL: the item pending again reopens its resolved group in the same transaction,
// with counts that match its items and the cause kept (item_reopened, as against a
// recurrence's); a second item reopened in the now open group is counted and reopens nothing.
func TestReopenGroupOf(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		clock := modeltest.Clock(t, db)
		f := newFixture(t, db)
		a := f.failure("send", "validation", "token expired")
		b := f.failure("send", "validation", "token expired")
		gid := *a.GroupID
		f.settle(a)
		f.settle(b)
		g := f.group(gid)
		if g.State != models.GroupResolved || g.ResolvedAt == nil {
			t.Fatalf("both items closed: %+v", g)
		}
		resolvedAt := *g.ResolvedAt
		f.reopenable(a)
		f.reopenable(b)

		clock.Advance(time.Minute)
		reopen := func(dl *models.DeadLetter) error {
			_, err := f.in(func(st stateTx) (bool, error) { return true, st.deadLetters().ReopenDeadLetter(dl) })
			return err
		}
		if err := reopen(a); err != nil {
			t.Fatal(err)
		}
		g = f.group(gid)
		if g.State != models.GroupOpen || g.ResolvedAt != nil || g.ReopenedAt == nil || g.ResolvedBefore == nil ||
			!g.ResolvedBefore.Equal(resolvedAt) || g.ReopenCause == nil || *g.ReopenCause != models.GroupReopenedByItem {
			t.Fatalf("the reopened item's group: %+v", g)
		}
		if got := f.counts(gid); got != (models.GroupCounts{Pending: 1, Closed: 1}) {
			t.Fatalf("counts after the reopening: %+v", got)
		}
		noCountDrift(t, f, f.org)
		reopenedAt := *g.ReopenedAt

		// Lost: the item is pending already (ECONFLICT, nothing written).
		var ae *apperr.Error
		if err := reopen(a); !errors.As(err, &ae) || ae.Message != "dlq.reopen.open" {
			t.Fatalf("reopen twice: %v", err)
		}
		// ReopenGroupOf lost: the group is open (its answer is false; f.in takes it back).
		if w, err := f.in(func(st stateTx) (bool, error) { return st.groups().ReopenGroupOf(b.ID) }); err != nil || w {
			t.Fatalf("ReopenGroupOf on an open group: won %v, %v", w, err)
		}
		// The second item reopened in the open group: counted, the group's reopening unchanged.
		clock.Advance(time.Minute)
		if err := reopen(b); err != nil {
			t.Fatal(err)
		}
		if g := f.group(gid); g.State != models.GroupOpen || !g.ReopenedAt.Equal(reopenedAt) || !g.ResolvedBefore.Equal(resolvedAt) {
			t.Fatalf("reopening into an open group changed its reopening: %+v", g)
		}
		if got := f.counts(gid); got != (models.GroupCounts{Pending: 2}) {
			t.Fatalf("counts after the second reopening: %+v", got)
		}
		noCountDrift(t, f, f.org)

		// Closed again, then a recurrence: the cause is the recurrence's.
		f.settle(a)
		f.settle(b)
		clock.Advance(time.Minute)
		c := f.failure("send", "validation", "token expired")
		if g := f.group(*c.GroupID); *c.GroupID != gid || g.State != models.GroupOpen || g.ReopenCause == nil || *g.ReopenCause != models.GroupReopenedByRecurrence {
			t.Fatalf("recurrence after an item's reopening: %+v", g)
		}
		// An item without a group: nothing to count, lost.
		lone := f.deadLetter(f.execution(models.ExecDLQPending, nil), models.DLQResolved)
		if w, err := f.in(func(st stateTx) (bool, error) { return st.groups().ReopenGroupOf(lone.ID) }); err != nil || w {
			t.Fatalf("ReopenGroupOf of an ungrouped item: won %v, %v", w, err)
		}
		noCountDrift(t, f, f.org)
	})
}
