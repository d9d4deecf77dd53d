package engine

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Group commit (PostgreSQL). Every step ends in one statement and one commit (AdvanceAttempt), and
// on a durable server each commit waits for its write-ahead log to reach the disk, one flush
// at a time. So the statements that workers want to commit at about the same moment are sent
// together: one round trip, one transaction, one flush for all of them. A worker still waits
// for its own statement's commit before it goes on: nothing is acknowledged that is not on
// disk, and a step's result is committed before the next step's side effect starts.
//
// A batch is sent as soon as a flusher is free, so a lone statement waits for nobody; while
// flushers are busy the next statements gather into the next batch.
const (
	groupFlushers = 2  // batches in flight at once
	groupMax      = 64 // statements per batch at most
)

// group sends statements in batches, each batch one transaction.
type group struct {
	pool *pgxpool.Pool
	// insert queues jobs in a batch's transaction (the Enqueuer's EnqueuePgx).
	insert   func(ctx context.Context, tx pgx.Tx, jobs []Job) error
	mu       sync.Mutex
	pending  []*unit
	flushers int
}

// unit is one statement of one worker: it returns one row, scanned into dest; then jobs,
// when set, says which jobs to queue in the same transaction.
type unit struct {
	sql  string
	args pgx.NamedArgs
	dest []any
	jobs func() []Job
	done chan error
}

// queryRow runs sql with args in the next batch and scans its one row into dest, once the
// batch committed. An error means nothing of this statement was committed, or (when the
// connection broke during the commit) that nobody knows: the callers' persist finds out.
func (g *group) queryRow(ctx context.Context, sql string, args pgx.NamedArgs, dest ...any) error {
	return g.queryRowJobs(ctx, sql, args, nil, dest...)
}

// queryRowJobs is queryRow that also queues the jobs that jobs returns (called once dest is
// scanned) in the same transaction.
func (g *group) queryRowJobs(ctx context.Context, sql string, args pgx.NamedArgs, jobs func() []Job, dest ...any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	u := &unit{sql: sql, args: args, dest: dest, jobs: jobs, done: make(chan error, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, u)
	if g.flushers < groupFlushers {
		g.flushers++
		go g.flush()
	}
	g.mu.Unlock()
	// The statement may already be on its way: wait for its outcome (bounded by
	// commitTimeout), whatever happens to ctx, so that dest is never written after return.
	return <-u.done
}

// flush sends batches until nothing is pending.
func (g *group) flush() {
	for {
		g.mu.Lock()
		n := min(len(g.pending), groupMax)
		if n == 0 {
			g.flushers--
			g.mu.Unlock()
			return
		}
		batch := make([]*unit, n)
		copy(batch, g.pending)
		g.pending = append(g.pending[:0], g.pending[n:]...)
		g.mu.Unlock()
		g.send(batch)
	}
}

// send runs a batch as one transaction. When one statement fails the transaction takes the
// others with it, uncommitted: each then runs alone, so that only the failing one fails.
func (g *group) send(batch []*unit) {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	err := g.run(ctx, batch)
	var pgErr *pgconn.PgError
	if err != nil && len(batch) > 1 && errors.As(err, &pgErr) {
		for _, u := range batch {
			u.done <- g.run(ctx, []*unit{u})
		}
		return
	}
	for _, u := range batch {
		u.done <- err
	}
}

// run sends the statements of batch in one round trip and one transaction: an implicit one
// (committed when the batch ends), or, when some want jobs queued, an explicit one that
// queues all their jobs in one insert before it commits.
func (g *group) run(ctx context.Context, batch []*unit) error {
	b := &pgx.Batch{}
	withJobs := false
	for _, u := range batch {
		b.Queue(u.sql, u.args).QueryRow(func(row pgx.Row) error { return row.Scan(u.dest...) })
		withJobs = withJobs || u.jobs != nil
	}
	if !withJobs {
		return g.pool.SendBatch(ctx, b).Close()
	}
	tx, err := g.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	var jobs []Job
	for _, u := range batch {
		if u.jobs != nil {
			jobs = append(jobs, u.jobs()...)
		}
	}
	if err := g.insert(ctx, tx, jobs); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
