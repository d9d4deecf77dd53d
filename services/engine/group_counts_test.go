package engine

import (
	"fmt"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// noCountDrift fails t when a group of org has counts other than its items' (recounted).
func noCountDrift(t *testing.T, f *fixture, org string) {
	t.Helper()
	// With the deltas not yet folded (PostgreSQL), then after a fold, which leaves none.
	for _, when := range []string{"with deltas", "after a fold"} {
		drift, err := f.db.GroupCountDrift(f.ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range drift {
			t.Errorf("%s: group %s keeps %+v (open %d, amount %d), its items are %+v (amount %d)", when, d.GroupID, d.Kept, d.KeptOpen,
				d.KeptAmount, d.FromItems, d.AmountFromItems)
		}
		if when == "after a fold" {
			var left int64
			if err := f.db.Conn(f.ctx).Table("dlq_group_counts").Where("organization_id = ?", org).Count(&left).Error; err != nil || left != 0 {
				t.Fatalf("after a fold: %d deltas left (%v)", left, err)
			}
			break
		}
		if err := f.db.FoldGroupCounts(f.ctx, org, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// counts are a group's kept counts.
func (f *fixture) counts(groupID string) models.GroupCounts {
	f.t.Helper()
	g := f.group(groupID)
	if g.OpenCount != g.PendingCount+g.ProcessingCount {
		f.t.Fatalf("group %s: open %d, pending %d + processing %d", groupID, g.OpenCount, g.PendingCount, g.ProcessingCount)
	}
	return models.GroupCounts{Pending: g.PendingCount, Processing: g.ProcessingCount, Closed: g.ClosedCount}
}

// replayFails is deadLetter's path when a manual replay of the item dl fails again with
// reason: the new failure joins its group, and the item returns to pending in it
// (ReturnToGroup), or, when the item is no longer processing (lost), a new item is made.
func (f *fixture) replayFails(dl *models.DeadLetter, step, typ, reason string) (returned bool, now *models.DeadLetter) {
	f.t.Helper()
	next := *dl
	next.ExecutionID = f.execution(models.ExecDLQPending, nil).ID // a full retry's new execution, if it comes to a new item
	next.ID, next.Reason, next.Status, next.GroupID = models.NewID(), reason, models.DLQPending, nil
	next.FailedStepID, next.ErrorType = step, typ
	next.AmountMinor = amountOf(next.ID) // as an edited input may change it
	if _, err := f.in(func(st stateTx) (bool, error) {
		if _, err := st.groups().JoinGroup(&next, "HTTP_400"); err != nil {
			return false, err
		}
		var err error
		if returned, err = st.groups().ReturnToGroup(dl.ID, &next); err != nil || returned {
			return true, err
		}
		next.CreatedAt, next.UpdatedAt = st.now, st.now
		return true, st.tx.Create(&next).Error
	}); err != nil {
		f.t.Fatal(err)
	}
	if returned {
		next.ID = dl.ID
	}
	return returned, &next
}

// TestGroupCountsKept: after a mix of every transition that changes a dead letter's status
// or group (joining, claim for a replay, return to pending in the same group and in
// another, a replay's success, settling, reopening, expiry, split, backfill), each also
// lost where it can lose, every group's kept counts equal its items' counted by status, on
// both databases; and the Problems ranking reads them.
func TestGroupCountsKept(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newFixture(t, db)
		nip := "NIP „%s” ma 9 cyfr, a powinien mieć 10 (400 Bad Request)"
		var items []*models.DeadLetter
		for _, n := range []string{"526104082", "701000213", "111111111", "222222222", "333333333", "444444444"} {
			items = append(items, f.failure("send", "validation", fmt.Sprintf(nip, n)))
		}
		token := f.failure("fetch", "authorization", "token expired")
		token2 := f.failure("fetch", "authorization", "token expired")
		a := *items[0].GroupID
		if got := f.counts(a); got != (models.GroupCounts{Pending: 6}) {
			t.Fatalf("after 6 failures: %+v", got)
		}

		claim := func(dl *models.DeadLetter, status string) bool {
			w, err := f.in(func(st stateTx) (bool, error) { return won(st.deadLetters().ClaimDeadLetter(dl, status, nil)) })
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		// Claims for replays (pending → processing), one of them lost (claimed already).
		for _, dl := range items[:4] {
			if !claim(dl, models.DLQProcessing) {
				t.Fatal("claim lost")
			}
		}
		if claim(items[0], models.DLQProcessing) || claim(items[0], models.DLQSkipped) {
			t.Fatal("a second claim of a processing item won")
		}
		// A replay fails again with the same cause (back to pending, same group), another
		// with another cause (pending in the token group, leaving the NIP group).
		if ret, _ := f.replayFails(items[0], "send", "validation", fmt.Sprintf(nip, "999999999")); !ret {
			t.Fatal("ReturnToGroup lost")
		}
		if ret, moved := f.replayFails(items[1], "fetch", "authorization", "token expired"); !ret || f.groupOf(moved.ID) != *token.GroupID {
			t.Fatal("ReturnToGroup to another group")
		}
		// A replay succeeds (processing → resolved); ResolveReplayed again is lost.
		ex := f.execution(models.ExecSucceeded, nil)
		ex.DeadLetterID = &items[2].ID
		for range 2 {
			if _, err := f.in(func(st stateTx) (bool, error) { return true, st.deadLetters().ResolveReplayed(ex) }); err != nil {
				t.Fatal(err)
			}
		}
		// A replay that fails after its item was settled (lost ReturnToGroup): a new item.
		if !claim(items[4], models.DLQSkipped) {
			t.Fatal("skip lost")
		}
		if ret, extra := f.replayFails(items[4], "send", "validation", fmt.Sprintf(nip, "555555555")); ret || f.groupOf(extra.ID) != a {
			t.Fatal("a settled item returned to pending")
		}
		// Settled by hand, then reopened (closed → pending); a second reopen is lost.
		if !claim(items[5], models.DLQResolved) {
			t.Fatal("resolve lost")
		}
		if err := db.Conn(f.ctx).Model(&models.DeadLetter{}).Where("id = ?", items[5].ID).Update("expires_at", time.Now().Add(time.Hour)).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Conn(f.ctx).Model(&models.ExecutionError{}).Where("id = ?", items[5].ErrorID).Update("resolution_type", "manual").Error; err != nil {
			t.Fatal(err)
		}
		for i, want := range []bool{true, false} {
			if w, err := f.in(func(st stateTx) (bool, error) { return won(st.deadLetters().ReopenDeadLetter(items[5])) }); err != nil || w != want {
				t.Fatalf("reopen %d: won %v, %v", i, w, err)
			}
		}
		// Now: a has items[0] pending (returned), items[2] resolved, items[3] processing,
		// items[4] skipped, items[5] pending, and the new item pending.
		if got := f.counts(a); got != (models.GroupCounts{Pending: 3, Processing: 1, Closed: 2}) {
			t.Fatalf("NIP group: %+v", got)
		}
		// Expiry by retention (pending past expires_at): items[0] and token2 expire; the
		// processing item and the closed one are left (ExpireDeadLetters checks again).
		var expired []string
		if _, err := f.in(func(st stateTx) (bool, error) {
			var err error
			expired, err = st.deadLetters().ExpireDeadLetters([]string{items[0].ID, token2.ID, items[3].ID, items[2].ID})
			return true, err
		}); err != nil || len(expired) != 2 {
			t.Fatalf("expired %v, %v", expired, err)
		}
		// Split: won for a processing item, lost for a stale copy (it left its group).
		var split string
		if _, err := f.in(func(st stateTx) (bool, error) {
			var err error
			split, err = st.groups().SplitOut(items[3])
			return err == nil, err
		}); err != nil {
			t.Fatal(err)
		}
		stale := *items[3]
		stale.GroupID = &a
		if w, err := f.in(func(st stateTx) (bool, error) { _, err := st.groups().SplitOut(&stale); return won(err) }); err != nil || w {
			t.Fatalf("stale split: won %v, %v", w, err)
		}
		if got := f.counts(split); got != (models.GroupCounts{Processing: 1}) {
			t.Fatalf("split group: %+v", got)
		}
		// Backfill of items made before groups (pending and skipped); a second one is lost.
		for _, status := range []string{models.DLQPending, models.DLQSkipped} {
			old := f.deadLetter(f.execution(models.ExecDLQPending, nil), status)
			old.Reason, old.ErrorType = "token expired", "authorization"
			old.FailedStepID = "fetch"
			old.AmountMinor = amountOf(old.ID)
			if err := db.Conn(f.ctx).Model(old).Update("amount_minor", *old.AmountMinor).Error; err != nil {
				t.Fatal(err)
			}
			for i, want := range []bool{true, false} {
				cp := *old
				if w, err := f.in(func(st stateTx) (bool, error) { return st.groups().BackfillGroup(&cp, "HTTP_400") }); err != nil || w != want {
					t.Fatalf("backfill %s %d: won %v, %v", status, i, w, err)
				}
			}
		}
		// The token group: token pending, items[1] pending (moved in), token2 expired, the
		// backfilled pending and skipped ones.
		if got := f.counts(*token.GroupID); got != (models.GroupCounts{Pending: 3, Closed: 2}) {
			t.Fatalf("token group: %+v", got)
		}
		noCountDrift(t, f, f.org)
		// The token group's open amount: its three pending items'.
		var open int64
		if err := db.Conn(f.ctx).Model(&models.DeadLetter{}).Select("COALESCE(SUM(amount_minor), 0)").
			Where("group_id = ? AND status = ?", *token.GroupID, models.DLQPending).Scan(&open).Error; err != nil || open == 0 {
			t.Fatalf("token group's pending amounts: %d, %v", open, err)
		}
		if g := f.group(*token.GroupID); g.OpenAmountMinor != open {
			t.Fatalf("token group keeps open amount %d, its pending items hold %d", g.OpenAmountMinor, open)
		}

		// The Problems page ranks by them: the token group (3 open), then the NIP group (2).
		groups, err := db.ProblemGroups(f.ctx, f.org, 0)
		if err != nil || len(groups) != 3 || groups[0].ID != *token.GroupID || groups[1].ID != a || groups[2].ID != split {
			t.Fatalf("problems %d, %v", len(groups), err)
		}
		if groups[1].Counts != (models.GroupCounts{Pending: 2, Closed: 3}) || groups[1].StateNow != models.GroupOpen {
			t.Fatalf("NIP group's view: %+v %s", groups[1].Counts, groups[1].StateNow)
		}
		if groups[2].StateNow != models.GroupFixing {
			t.Fatalf("the split group (its item processing) is %s", groups[2].StateNow)
		}
	})
}

// TestGroupsDueFromKeptAmounts: what the Problems page orders groups by (issue 23) on both
// databases: a group's nearest due date and its items due by the horizon are its open
// items' (a closed item no longer counts), and its amount is the open amount its
// transitions keep; a group with nothing open is left out.
func TestGroupsDueFromKeptAmounts(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newFixture(t, db)
		due := func(dl *models.DeadLetter, on string) {
			if err := db.Conn(f.ctx).Model(dl).Update("due_on", on).Error; err != nil {
				t.Fatal(err)
			}
		}
		a1 := f.failure("send", "validation", "NIP 526104082 ma 9 cyfr")
		a2 := f.failure("send", "validation", "NIP 701000213 ma 9 cyfr")
		a3 := f.failure("send", "validation", "NIP 111111111 ma 9 cyfr")
		b := f.failure("fetch", "authorization", "token expired")
		c := f.failure("post", "permanent", "konto 201-0001 nie istnieje")
		due(a1, "2026-11-25")
		due(a2, "2026-11-20")
		due(a3, "2026-12-28")
		for _, dl := range []*models.DeadLetter{a2, c} { // settled: no longer open
			if _, err := f.in(func(st stateTx) (bool, error) {
				return won(st.deadLetters().ClaimDeadLetter(dl, models.DLQResolved, nil))
			}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := db.GroupsDue(f.ctx, f.org, []string{*a1.GroupID, *b.GroupID, *c.GroupID}, "2026-11-30")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got[*c.GroupID]; ok || len(got) != 2 {
			t.Fatalf("groups with open items: %+v", got)
		}
		if g := got[*a1.GroupID]; g.NearestDue != "2026-11-25" || g.AtRisk != 1 || g.Amount != *a1.AmountMinor+*a3.AmountMinor {
			t.Errorf("NIP group: %+v (amounts %d + %d)", g, *a1.AmountMinor, *a3.AmountMinor)
		}
		if g := got[*b.GroupID]; g.NearestDue != "" || g.AtRisk != 0 || g.Amount != *b.AmountMinor {
			t.Errorf("token group: %+v (amount %d)", g, *b.AmountMinor)
		}
		noCountDrift(t, f, f.org)
	})
}
