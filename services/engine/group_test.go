package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestGroupCommit: statements sent by many workers at once are committed in one batch, each
// worker gets its own row back, and a statement that fails fails alone: the others of its
// batch are committed, nothing of it is. Jobs asked for with a statement are queued in its
// transaction.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	if os.Getenv("TEST_DATABASE_URL") == "" {
		t.Skip("PostgreSQL only: TEST_DATABASE_URL not set")
	}
	db := modeltest.New(t, models.Postgres)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE group_probe (n int PRIMARY KEY, tag text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var queued []Job
	g := &group{pool: db.Pool, insert: func(ctx context.Context, tx pgx.Tx, jobs []Job) error {
		// The jobs' insert runs in the batch's transaction: it sees the batch's rows.
		for _, j := range jobs {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM group_probe WHERE tag = $1`, j.AttemptID).Scan(&n); err != nil || n != 1 {
				return fmt.Errorf("job %s: its row is not in the transaction (%d, %v)", j.AttemptID, n, err)
			}
		}
		mu.Lock()
		queued = append(queued, jobs...)
		mu.Unlock()
		return nil
	}}
	// Every flusher seems busy: the statements gather, then go in one batch.
	g.flushers = groupFlushers
	const insert = `INSERT INTO group_probe (n, tag) VALUES (@n, @tag) RETURNING n * 10`
	const workers = 40
	results := make([]int, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			n := i
			if i == 7 {
				n = 3 // collides with worker 3: one of the two fails
			}
			tag := fmt.Sprintf("w%d", i)
			var jobs func() []Job
			if i%5 == 0 {
				jobs = func() []Job { return []Job{{AttemptID: tag, Generation: results[i]}} }
			}
			errs[i] = g.queryRowJobs(ctx, insert, pgx.NamedArgs{"n": n, "tag": tag}, jobs, &results[i])
		})
	}
	for {
		g.mu.Lock()
		n := len(g.pending)
		if n == workers {
			g.flushers--
			go g.flush()
		}
		g.mu.Unlock()
		if n == workers {
			break
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			want := i * 10
			if i == 7 {
				want = 30
			}
			if results[i] != want {
				t.Errorf("worker %d got %d, want %d", i, results[i], want)
			}
		case (i == 3 || i == 7) && errors.As(err, &pgErr) && pgErr.Code == "23505":
			failed++
		default:
			t.Errorf("worker %d: %v", i, err)
		}
	}
	if failed != 1 {
		t.Fatalf("%d of the two colliding statements failed, want 1", failed)
	}
	var rows int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM group_probe`).Scan(&rows); err != nil || rows != workers-1 {
		t.Fatalf("%d rows committed, want %d (%v)", rows, workers-1, err)
	}
	if len(queued) != workers/5 {
		t.Fatalf("%d jobs queued, want %d: %+v", len(queued), workers/5, queued)
	}
	for _, j := range queued {
		var i int
		fmt.Sscanf(j.AttemptID, "w%d", &i)
		if j.Generation != i*10 {
			t.Errorf("job %s was built before its statement's row was read: %d", j.AttemptID, j.Generation)
		}
	}
}
