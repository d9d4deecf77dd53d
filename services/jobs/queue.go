package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"
	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/bulk"
	"lifeline/services/engine"
)

// Queue inserts Lifeline's jobs into River's tables. It is an insert-only River client: it
// works nothing, so it needs neither the workers nor the engine they call, and is built
// first; the engine is given it (engine.Config.Queue), and the Runner, whose workers need
// the engine, comes after. Jobs it inserts are worked by any started Runner on the same
// database (on PostgreSQL the insert notifies the workers; on SQLite they poll for jobs
// every FetchPollInterval).
type Queue struct {
	riverClient
	db *models.DB
}

var (
	_ engine.Enqueuer = (*Queue)(nil)
	_ bulk.Queue      = (*Queue)(nil)
)

// NewQueue builds the insert-only River client for db's dialect. cfg gives the clock River
// stamps jobs with and the cooldown between insert notifications; pass the Runner the same
// Config. It fails only when River refuses the configuration.
func NewQueue(db *models.DB, cfg Config, log *slog.Logger) (*Queue, error) {
	cfg = cfg.withDefaults(db.Dialect)
	rc := cfg.riverConfig(db, slog.New(levelFilter{log.Handler(), slog.LevelWarn, func() bool { return false }}))
	c, err := newRiverClient(db, rc)
	if err != nil {
		return nil, fmt.Errorf("river insert client: %w", err)
	}
	return &Queue{riverClient: c, db: db}, nil
}

// riverClient is River's client for one dialect: sqlite or pg is set.
type riverClient struct {
	sqlite *river.Client[*sql.Tx]
	pg     *river.Client[pgx.Tx]
}

func newRiverClient(db *models.DB, rc *river.Config) (c riverClient, err error) {
	if db.Dialect == models.Postgres {
		c.pg, err = river.NewClient(riverpgxv5.New(db.Pool), rc)
	} else {
		c.sqlite, err = river.NewClient(riversqlite.New(db.SQL), rc)
	}
	return c, err
}

// riverConfig is River's configuration common to the queue's client and the runner's: the
// clock, the insert middleware, the fetch intervals (the cooldown also spaces insert
// notifications) and the job timeout. The runner adds its queues, workers and periodic jobs.
func (c Config) riverConfig(db *models.DB, log *slog.Logger) *river.Config {
	rc := &river.Config{
		FetchPollInterval: c.FetchPollInterval,
		FetchCooldown:     c.FetchCooldown,
		JobTimeout:        15 * time.Minute,
		Logger:            log,
		TestOnly:          c.TestOnly,
		Middleware:        append([]rivertype.Middleware{&onTime{}}, c.Middleware...),
	}
	switch {
	case c.Clock != nil:
		rc.Test.Time = clock(c.Clock)
	case db.Dialect == models.SQLite && db.TestClock != nil:
		// A test moves this SQLite database's clock (db.Now): River must compare due times
		// with the same clock. (On PostgreSQL the moved clock is the database's now().)
		rc.Test.Time = clock(db.TestClock)
	}
	return rc
}

// clock adapts an application clock to River's time generator.
type clock func() time.Time

func (c clock) Now() time.Time { return c() }

func (c clock) NowOrNil() *time.Time {
	t := c().UTC()
	return &t
}

func params(jobs []engine.Job) []river.InsertManyParams {
	out := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		if j.CompensationID != "" {
			opts := CompensateArgs{}.InsertOpts()
			if !j.RunAt.IsZero() {
				opts.ScheduledAt = j.RunAt
			}
			out[i] = river.InsertManyParams{Args: CompensateArgs{CompensationID: j.CompensationID, Generation: j.Generation}, InsertOpts: &opts}
			continue
		}
		opts := AttemptArgs{}.InsertOpts()
		// RunAt is read from the database clock; River compares it with the same clock.
		// (The application clock may be off: it never decides when an attempt is due.)
		if !j.RunAt.IsZero() {
			opts.ScheduledAt = j.RunAt
		}
		out[i] = river.InsertManyParams{Args: AttemptArgs{AttemptID: j.AttemptID, Generation: j.Generation}, InsertOpts: &opts}
	}
	return out
}

// EnqueueTx inserts in tx on SQLite; on PostgreSQL (River cannot share GORM's transaction)
// it returns the insert to run after commit.
func (q *Queue) EnqueueTx(ctx context.Context, tx *gorm.DB, jobs []engine.Job) (func(context.Context) error, error) {
	if q.sqlite != nil {
		sqlTx, ok := tx.Statement.ConnPool.(*sql.Tx)
		if !ok {
			return nil, errors.New("jobs: EnqueueTx needs a GORM transaction")
		}
		_, err := q.sqlite.InsertManyTx(ctx, sqlTx, params(jobs))
		return nil, err
	}
	return func(ctx context.Context) error { return q.Enqueue(ctx, jobs) }, nil
}

// EnqueueBulk queues the next batch of a bulk job (skipped when one is already queued).
func (q *Queue) EnqueueBulk(ctx context.Context, id string) error {
	var err error
	if q.pg != nil {
		_, err = q.pg.Insert(ctx, BulkArgs{BulkID: id}, nil)
	} else {
		_, err = q.sqlite.Insert(ctx, BulkArgs{BulkID: id}, nil)
	}
	return err
}

// EnqueuePgx inserts in tx, a transaction of the engine's on PostgreSQL.
func (q *Queue) EnqueuePgx(ctx context.Context, tx pgx.Tx, jobs []engine.Job) error {
	if len(jobs) == 0 {
		return nil
	}
	_, err := q.pg.InsertManyTx(ctx, tx, params(jobs))
	return err
}

// Enqueue inserts outside a transaction.
func (q *Queue) Enqueue(ctx context.Context, jobs []engine.Job) error {
	if len(jobs) == 0 {
		return nil
	}
	if q.pg == nil {
		_, err := q.sqlite.InsertMany(ctx, params(jobs))
		return err
	}
	// The attempts these jobs run are already committed, durably; a job only makes an
	// attempt start at once. So the job's commit does not wait for the disk: were it lost in
	// a crash, the reconciler would queue the attempt again. That saves a WAL flush per job.
	tx, err := q.db.Pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL synchronous_commit TO OFF"})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := q.EnqueuePgx(ctx, tx, jobs); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// onTime keeps attempt and compensation jobs "available" even when they are due in the future. River's
// fetch takes available jobs whose scheduled_at has passed, so a retry starts within
// FetchPollInterval of its time, instead of waiting for River's scheduler, which
// promotes "scheduled" jobs only every 5 seconds.
type onTime struct{ river.MiddlewareDefaults }

func (*onTime) InsertMany(ctx context.Context, many []*rivertype.JobInsertParams,
	doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	for _, p := range many {
		if (p.Kind == (AttemptArgs{}).Kind() || p.Kind == (CompensateArgs{}).Kind()) && p.State == rivertype.JobStateScheduled {
			p.State = rivertype.JobStateAvailable
		}
	}
	return doInner(ctx)
}
