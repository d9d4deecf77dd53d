package engine

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/steps"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRetainRepairsGroupCounts: the retention pass (maintenance, hourly) recounts the failure
// groups whose kept counts a writer outside the transitions left different from their items'
// (GroupCountDrift), logs how many it repaired, and leaves the others alone; a second pass
// finds nothing (RepairGroupCounts lost: the counts match). The conformance of
// RepairGroupCounts, won and lost, on both databases.
func TestRetainRepairsGroupCounts(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newFixture(t, db)
		var logs syncBuffer
		f.e = New(db, steps.NewRegistry(), slog.New(slog.NewTextHandler(&logs, nil)), Config{Queue: &jobLog{}})
		a := f.failure("send", "validation", "token expired")
		f.failure("send", "validation", "token expired")
		c := f.failure("fetch", "authorization", "401 Unauthorized")
		healthy := f.failure("post", "permanent", "the ledger refused it")
		f.settle(c)
		// Within their retention: the pass expires none of them.
		if err := db.Conn(f.ctx).Exec("UPDATE dead_letter_queue SET expires_at = ? WHERE organization_id = ?", time.Now().Add(time.Hour), f.org).Error; err != nil {
			t.Fatal(err)
		}
		noCountDrift(t, f, f.org)
		kept := f.group(*healthy.GroupID).UpdatedAt

		// Writers that went around the transitions: a's group counts one item too few and its
		// open count is off; c's item was reopened by a raw UPDATE (closed → pending).
		if err := db.Conn(f.ctx).Exec("UPDATE dlq_groups SET pending_count = 1, open_count = 5 WHERE id = ?", *a.GroupID).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Conn(f.ctx).Exec("UPDATE dead_letter_queue SET status = ? WHERE id = ?", models.DLQPending, c.ID).Error; err != nil {
			t.Fatal(err)
		}
		if drift, err := db.GroupCountDrift(f.ctx, f.org); err != nil || len(drift) != 2 {
			t.Fatalf("drift before the pass: %+v, %v", drift, err)
		}

		res, err := f.e.Retain(f.ctx)
		if err != nil || res.RepairedGroups != 2 {
			t.Fatalf("retention: %+v, %v; want 2 groups repaired", res, err)
		}
		noCountDrift(t, f, f.org)
		if got := f.counts(*a.GroupID); got != (models.GroupCounts{Pending: 2}) {
			t.Errorf("a's group after the repair: %+v", got)
		}
		if got := f.counts(*c.GroupID); got != (models.GroupCounts{Pending: 1}) {
			t.Errorf("c's group after the repair: %+v", got)
		}
		if !f.group(*healthy.GroupID).UpdatedAt.Equal(kept) {
			t.Error("a group without drift was written")
		}
		if !strings.Contains(logs.String(), "failure groups' counts repaired") || !strings.Contains(logs.String(), "groups=2") {
			t.Errorf("the pass did not log how many it repaired: %s", logs.String())
		}

		// Lost: nothing to repair (the second pass; the transition on a matching group).
		if res, err := f.e.Retain(f.ctx); err != nil || res.RepairedGroups != 0 {
			t.Fatalf("second retention: %+v, %v", res, err)
		}
		if w, err := f.in(func(st stateTx) (bool, error) { return st.groups().RepairGroupCounts(*healthy.GroupID) }); err != nil || w {
			t.Fatalf("RepairGroupCounts of a group without drift: won %v, %v", w, err)
		}
		if w, err := f.in(func(st stateTx) (bool, error) { return st.groups().RepairGroupCounts(models.NewID()) }); err != nil || w {
			t.Fatalf("RepairGroupCounts of no group: won %v, %v", w, err)
		}
	})
}
