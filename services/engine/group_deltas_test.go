package engine

import (
	"fmt"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestFoldGroupCountsRacing: a fold of a group's counters (PostgreSQL: deltas into the
// row) while failures join the group and replays take and close its items. A hook in the
// fold, once it has taken the deltas committed so far and before it writes the row,
// commits a failure whose transaction was open when the fold began (it held the group's
// row in share mode, its delta not visible to the fold), then makes another failure, a
// replay's claim, a replay's success and a settle. Readers read exact counts in the middle
// of the fold and after it, the deltas committed during it stay for the next fold, and
// GroupCountDrift finds nothing before and after that one. On SQLite (no deltas, the fold
// does nothing) the same steps run without it, and the counts are the same.
func TestFoldGroupCountsRacing(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newFixture(t, db)
		pg := db.Dialect == models.Postgres
		reason := "NIP „%d” ma 9 cyfr, a powinien mieć 10 (400 Bad Request)"
		var items []*models.DeadLetter
		for i := range 4 {
			items = append(items, f.failure("send", "validation", fmt.Sprintf(reason, 100000000+i)))
		}
		g := *items[0].GroupID
		claim := func(dl *models.DeadLetter) {
			t.Helper()
			if _, err := f.in(func(st stateTx) (bool, error) {
				return won(st.deadLetters().ClaimDeadLetter(dl, models.DLQProcessing, nil))
			}); err != nil {
				t.Fatal(err)
			}
		}
		claim(items[0])

		// A failure whose transaction is still open when the fold begins (PostgreSQL).
		var commitOpen func()
		extra := 0
		if pg {
			ex := f.execution(models.ExecDLQPending, nil)
			rec := &models.ExecutionError{ID: models.NewID(), OrganizationID: f.org, ExecutionID: ex.ID, StepID: "send",
				ErrorType: "validation", ErrorMessage: "x", Status: models.ErrDeadLetter, CreatedAt: f.at, UpdatedAt: f.at}
			f.create(rec)
			now, err := db.Now(f.ctx)
			if err != nil {
				t.Fatal(err)
			}
			tx := db.Gorm.WithContext(f.ctx).Begin()
			dl := &models.DeadLetter{ID: models.NewID(), OrganizationID: f.org, ErrorID: rec.ID, WorkflowID: f.wf, ExecutionID: ex.ID,
				OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: "send", Status: models.DLQPending,
				ExpiresAt: f.at, ErrorType: "validation", Reason: fmt.Sprintf(reason, 199999999), CreatedAt: now, UpdatedAt: now}
			dl.AmountMinor = amountOf("open")
			if _, err := (stateTx{tx: tx, now: now}).groups().JoinGroup(dl, "HTTP_400"); err != nil || *dl.GroupID != g {
				tx.Rollback()
				t.Fatalf("the open failure's join: %v", err)
			}
			if err := tx.Create(dl).Error; err != nil {
				tx.Rollback()
				t.Fatal(err)
			}
			commitOpen = func() {
				if err := tx.Commit().Error; err != nil {
					t.Error(err)
				}
			}
			extra = 1
		}

		want := models.GroupCounts{Pending: 2 + extra, Processing: 1, Closed: 2}
		during := func() {
			if commitOpen != nil {
				commitOpen()
			}
			items = append(items, f.failure("send", "validation", fmt.Sprintf(reason, 100000009)))
			claim(items[1])
			if _, err := f.in(func(st stateTx) (bool, error) {
				return true, st.deadLetters().ResolveReplayed(&models.Execution{ID: items[0].ExecutionID, DeadLetterID: &items[0].ID})
			}); err != nil {
				t.Fatal(err)
			}
			f.settle(items[2])
			if got := f.counts(g); got != want {
				t.Errorf("read during the fold: %+v, want %+v", got, want)
			}
		}
		folds := 0
		f.e.SetHooks(Hooks{InTx: func(transition, id string) {
			if transition == TransitionFoldGroupCounts && id == f.org {
				folds++
				during()
			}
		}})
		if err := f.e.maintenance.foldGroupCounts(f.ctx); err != nil {
			t.Fatal(err)
		}
		f.e.SetHooks(Hooks{})
		if !pg {
			during()
		} else if folds != 1 {
			t.Fatalf("the fold's hook ran %d times", folds)
		}
		if got := f.counts(g); got != want {
			t.Errorf("after the fold: %+v, want %+v", got, want)
		}
		if pg {
			// What committed during the fold is still a delta: the fold did not count it.
			var left int64
			if err := db.Conn(f.ctx).Table("dlq_group_counts").Where("organization_id = ? AND group_id = ?", f.org, g).Count(&left).Error; err != nil {
				t.Fatal(err)
			}
			if left != 5 {
				t.Errorf("%d deltas left after the fold, want the 5 written during it", left)
			}
		}
		noCountDrift(t, f, f.org) // and after the next fold, the row alone
		var row models.Group
		if err := db.Conn(f.ctx).Where("id = ?", g).First(&row).Error; err != nil {
			t.Fatal(err)
		}
		if got := (models.GroupCounts{Pending: row.PendingCount, Processing: row.ProcessingCount, Closed: row.ClosedCount}); got != want ||
			row.Arrivals != 5+extra {
			t.Errorf("the row after the next fold: %+v, arrivals %d", got, row.Arrivals)
		}
	})
}

// TestResolveGroupCloseHoldsAnOpenItem: on PostgreSQL a close that finds another open item
// of its group (stillOpenElsewhere) does not lock the group's row, but holds that item until
// it commits: a transaction closing that item at the same time waits for it, then finds
// nothing open and resolves the group. The first close's transaction is left open until
// the second is seen waiting (pg_locks), so the wait is certain, not likely. On SQLite the
// two closes run one after the other.
func TestResolveGroupCloseHoldsAnOpenItem(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newFixture(t, db)
		a := f.failure("send", "validation", "token expired")
		b := f.failure("send", "validation", "token expired")
		g := *a.GroupID
		if db.Dialect != models.Postgres {
			f.settle(a)
			f.settle(b)
			if got := f.group(g); got.State != models.GroupResolved {
				t.Fatalf("both items closed, group %s", got.State)
			}
			return
		}
		now, err := db.Now(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		txA := db.Gorm.WithContext(f.ctx).Begin()
		if err := (stateTx{tx: txA, now: now}).deadLetters().ClaimDeadLetter(a, models.DLQSkipped, nil); err != nil {
			txA.Rollback()
			t.Fatal(err)
		}
		var held []string // what txA holds of the group's items besides its own
		if err := db.Conn(f.ctx).Raw("SELECT id FROM dead_letter_queue WHERE group_id = ? AND status = 'pending' FOR UPDATE SKIP LOCKED", g).
			Scan(&held).Error; err != nil || len(held) != 0 {
			txA.Rollback()
			t.Fatalf("the other item is not held by the first close: %v %v", held, err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := f.in(func(st stateTx) (bool, error) {
				return won(st.deadLetters().ClaimDeadLetter(b, models.DLQSkipped, nil))
			})
			done <- err
		}()
		// Until the second close waits for the first (a lock not granted in this database).
		for waiting := false; !waiting; {
			var n int64
			if err := db.Conn(f.ctx).Raw(`SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
WHERE NOT l.granted AND s.datname = current_database()`).Scan(&n).Error; err != nil {
				txA.Rollback()
				t.Fatal(err)
			}
			select {
			case err := <-done:
				txA.Rollback()
				t.Fatalf("the second close did not wait for the first: %v", err)
			default:
			}
			waiting = n > 0
		}
		if got := f.group(g); got.State != models.GroupOpen {
			t.Fatalf("resolved while an item was open: %s", got.State)
		}
		if err := txA.Commit().Error; err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := f.group(g); got.State != models.GroupResolved {
			t.Fatalf("both items closed at once, group %s", got.State)
		}
		noCountDrift(t, f, f.org)
	})
}
