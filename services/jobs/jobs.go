// Package jobs is Lifeline's background work on River: thin workers that call services.
// Every job here is safe to run twice: the services they call are compare-and-set guarded.
//
// Wiring goes one way, each part built with what it needs: NewQueue (an insert-only River
// client), engine.New given that queue, then New (the River client that works the jobs,
// whose workers call the engine and insert bulk jobs with the same queue).
package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"lifeline/models"
	"lifeline/services/auth"
	"lifeline/services/bulk"
	"lifeline/services/engine"
)

// AttemptArgs runs one attempt of a step at one generation.
type AttemptArgs struct {
	AttemptID  string `json:"attempt_id"`
	Generation int    `json:"generation"`
}

// Kind implements river.JobArgs.
func (AttemptArgs) Kind() string { return "run_attempt" }

// uniqueStates: a job with the same args (attempt, generation, requeued) is not inserted
// again while one is waiting or running; once it has finished, the reconciler may insert another.
var uniqueStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled}

// InsertOpts implements river.JobArgsWithInsertOpts.
func (AttemptArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 10, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: uniqueStates}}
}

// AttemptWorker runs attempts.
type AttemptWorker struct {
	river.WorkerDefaults[AttemptArgs]
	Engine *engine.Engine
}

// Work runs the attempt; only database errors make River retry the job.
func (w *AttemptWorker) Work(ctx context.Context, job *river.Job[AttemptArgs]) error {
	_, err := w.Engine.RunAttempt(ctx, job.Args.AttemptID, job.Args.Generation)
	w.Engine.Health().Failed(err) // an unreachable database is logged once, by the engine
	return err
}

// Timeout: steps carry their own timeouts (at most 10 minutes).
func (w *AttemptWorker) Timeout(*river.Job[AttemptArgs]) time.Duration { return 15 * time.Minute }

// ReconcileArgs runs the reconciler.
type ReconcileArgs struct{}

// Kind implements river.JobArgs.
func (ReconcileArgs) Kind() string { return "reconcile" }

// ReconcileWorker repairs stuck executions and bulk jobs whose queue job was lost.
type ReconcileWorker struct {
	river.WorkerDefaults[ReconcileArgs]
	Engine *engine.Engine
	Bulk   *bulk.Service
}

// Work runs one reconciliation pass.
func (w *ReconcileWorker) Work(ctx context.Context, _ *river.Job[ReconcileArgs]) error {
	if _, err := w.Engine.Reconcile(ctx); err != nil {
		return err
	}
	return w.Bulk.Repair(ctx)
}

// BulkArgs runs the next batch of a bulk action on dead letters.
type BulkArgs struct {
	BulkID string `json:"bulk_id"`
}

// Kind implements river.JobArgs.
func (BulkArgs) Kind() string { return "dlq_bulk" }

// InsertOpts implements river.JobArgsWithInsertOpts: one queue job per bulk job at a time.
func (BulkArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: uniqueStates}}
}

// BulkWorker works through a bulk job a batch at a time: each run acts on one batch
// (bulk.Service.Run, at the organization's rate, pausing behind open breakers) and, while
// items remain, snoozes until the next batch is due. The pacing is River's scheduling:
// nothing waits in a goroutine, and where the job stands is in the database (a crash loses
// nothing: the job runs again, or Repair queues it).
type BulkWorker struct {
	river.WorkerDefaults[BulkArgs]
	Bulk *bulk.Service
}

// Work runs one batch.
func (w *BulkWorker) Work(ctx context.Context, job *river.Job[BulkArgs]) error {
	o, err := w.Bulk.Run(ctx, job.Args.BulkID)
	if err != nil || !o.More {
		return err
	}
	return river.JobSnooze(max(o.Wait, time.Millisecond))
}

// CompensateArgs runs one compensation of a rollback at one generation.
type CompensateArgs struct {
	CompensationID string `json:"compensation_id"`
	Generation     int    `json:"generation"`
}

// Kind implements river.JobArgs.
func (CompensateArgs) Kind() string { return "compensate" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (CompensateArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 10, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: uniqueStates}}
}

// CompensateWorker runs compensations; only database errors make River retry the job.
type CompensateWorker struct {
	river.WorkerDefaults[CompensateArgs]
	Engine *engine.Engine
}

// Work runs the compensation.
func (w *CompensateWorker) Work(ctx context.Context, job *river.Job[CompensateArgs]) error {
	return w.Engine.RunCompensation(ctx, job.Args.CompensationID, job.Args.Generation)
}

// RetentionArgs applies retention rules.
type RetentionArgs struct{}

// Kind implements river.JobArgs.
func (RetentionArgs) Kind() string { return "retention" }

// RetentionWorker expires dead letters and deletes old idempotency keys and sessions.
type RetentionWorker struct {
	river.WorkerDefaults[RetentionArgs]
	Engine   *engine.Engine
	Sessions *auth.SessionStore
}

// Timeout lets one pass expire a day's dead letters at the million-item scale (River's
// default is a minute).
func (w *RetentionWorker) Timeout(*river.Job[RetentionArgs]) time.Duration { return 15 * time.Minute }

// Work runs one retention pass.
func (w *RetentionWorker) Work(ctx context.Context, _ *river.Job[RetentionArgs]) error {
	if _, err := w.Engine.Retain(ctx); err != nil {
		return err
	}
	return w.Sessions.DeleteExpired()
}

// EscalateArgs runs the escalation pass.
type EscalateArgs struct{}

// Kind implements river.JobArgs.
func (EscalateArgs) Kind() string { return "escalate" }

// EscalateWorker raises failure groups left pending to the levels of their organizations'
// escalation policies (engine.Engine.Escalate).
type EscalateWorker struct {
	river.WorkerDefaults[EscalateArgs]
	Engine *engine.Engine
}

// Work runs one escalation pass.
func (w *EscalateWorker) Work(ctx context.Context, _ *river.Job[EscalateArgs]) error {
	_, err := w.Engine.Escalate(ctx)
	return err
}

// Config tunes the queue.
type Config struct {
	Workers int // concurrent jobs (default: DefaultWorkers of the database)
	// FetchPollInterval is how often idle workers look for jobs that have fallen due
	// (default 50 ms): a retry runs within about that much of its time.
	FetchPollInterval time.Duration
	// FetchCooldown is the least time between two fetches, at most FetchPollInterval
	// (default 10 ms). A worker that finishes takes its next job at the next fetch, so the
	// cooldown bounds how many jobs a second start: Workers per cooldown.
	FetchCooldown  time.Duration
	ReconcileEvery time.Duration // default 10 s
	// EscalateEvery is how often the escalation pass runs (default 30 s): a level is
	// reached within that much of its time.
	EscalateEvery time.Duration
	// AsksSweepEvery is how often the sweep of ask steps' requests runs (default
	// AsksSweepEvery, 5 s).
	AsksSweepEvery time.Duration
	// Periodic lists further periodic jobs (demo traffic, retention).
	Periodic []*river.PeriodicJob
	// BulkRate, when set, overrides every organization's bulk rate (dead letters a second;
	// tests). Unset, each organization's setting holds.
	BulkRate int
	// Register adds further workers.
	Register func(*river.Workers)
	// TestOnly is for tests: River's maintenance services (the scheduler of retries, the
	// periodic jobs that run the reconciler) start at once when the process becomes River's
	// leader, instead of each after a random wait of up to a second, one after another.
	TestOnly bool
	// Middleware are more River middlewares, after Lifeline's own: metrics of jobs' wait and
	// run times, trace spans (nil: none).
	Middleware []rivertype.Middleware
	// Clock is the application's clock, River's included (default time.Now). Lifeline never
	// decides when an attempt is due by it: the database clock does. Tests skew it.
	Clock func() time.Time
}

// DefaultWorkers is how many jobs run at once when nothing says: 20 on SQLite, whose one
// writer they take turns on; 50 on PostgreSQL, where a worker waiting for its step's commit
// holds no connection (group commit), so more workers make fuller batches. `make bench`
// measured 20 and 50 on PostgreSQL: 50 gave more steps a second and later retries less late.
func DefaultWorkers(dialect string) int {
	if dialect == models.Postgres {
		return 50
	}
	return 20
}

// PoolSize is the PostgreSQL connection pool for a process with workers: a worker needs a
// connection only to read its attempt and for a failure's transaction (its successes go
// through the engine's two group-commit flushers), so up to 20 for the workers, and room for
// web requests, River's own work and the reconciler.
func PoolSize(workers int) int { return min(workers, 20) + 10 }

func (c Config) withDefaults(dialect string) Config {
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers(dialect)
	}
	if c.FetchPollInterval <= 0 {
		c.FetchPollInterval = 50 * time.Millisecond
	}
	if c.ReconcileEvery <= 0 {
		c.ReconcileEvery = 10 * time.Second
	}
	if c.EscalateEvery <= 0 {
		c.EscalateEvery = 30 * time.Second
	}
	if c.AsksSweepEvery <= 0 {
		c.AsksSweepEvery = AsksSweepEvery
	}
	if c.FetchCooldown <= 0 {
		c.FetchCooldown = 10 * time.Millisecond
	}
	c.FetchCooldown = min(c.FetchCooldown, c.FetchPollInterval)
	return c
}

// queue is River's configuration of the queue: how many jobs run at once and how often
// producers fetch. The River-only baseline benchmark uses the same.
func (c Config) queue() *river.Config {
	return &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c.Workers}},
		FetchPollInterval: c.FetchPollInterval,
		FetchCooldown:     c.FetchCooldown,
	}
}

// Runner owns the River client that works Lifeline's jobs. It inserts none of the engine's
// jobs itself: the Queue does, for the engine and the bulk actions alike.
type Runner struct {
	eng   *engine.Engine
	queue *Queue
	bulk  *bulk.Service
	// stopWatch stops the engine's database health watch.
	stopWatch context.CancelFunc
	riverClient
}

// New builds the River client for db's dialect with Lifeline's workers, which run eng's
// attempts and compensations and q's bulk jobs. It comes last in the wiring: NewQueue, then
// engine.New with the queue (engine.Config.Queue), then New. cfg should be the Config q was
// built with (the same clock). The client works nothing until Start.
func New(db *models.DB, eng *engine.Engine, q *Queue, cfg Config, log *slog.Logger) (*Runner, error) {
	cfg = cfg.withDefaults(db.Dialect)
	workers := river.NewWorkers()
	r := &Runner{eng: eng, queue: q}
	r.bulk = &bulk.Service{DB: db, Engine: eng, Queue: q, Rate: cfg.BulkRate, Redact: eng.Redactor()}
	river.AddWorker(workers, &AttemptWorker{Engine: eng})
	river.AddWorker(workers, &ReconcileWorker{Engine: eng, Bulk: r.bulk})
	river.AddWorker(workers, &BulkWorker{Bulk: r.bulk})
	river.AddWorker(workers, &CompensateWorker{Engine: eng})
	river.AddWorker(workers, &RetentionWorker{Engine: eng, Sessions: &auth.SessionStore{DB: db}})
	river.AddWorker(workers, &EscalateWorker{Engine: eng})
	river.AddWorker(workers, &AsksSweepWorker{Engine: eng})
	if cfg.Register != nil {
		cfg.Register(workers)
	}
	periodic := append([]*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(cfg.ReconcileEvery),
			func() (river.JobArgs, *river.InsertOpts) { return ReconcileArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return RetentionArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(cfg.EscalateEvery),
			func() (river.JobArgs, *river.InsertOpts) { return EscalateArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(cfg.AsksSweepEvery),
			func() (river.JobArgs, *river.InsertOpts) { return AsksSweepArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
	}, cfg.Periodic...)
	// While the database is unreachable River's components fail and say so every few
	// milliseconds; the engine's health says it once instead.
	rc := cfg.riverConfig(db, slog.New(levelFilter{log.Handler(), slog.LevelWarn, eng.Health().Down}))
	rc.Queues = cfg.queue().Queues
	rc.Workers = workers
	rc.PeriodicJobs = periodic
	var err error
	if r.riverClient, err = newRiverClient(db, rc); err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return r, nil
}

// Queue returns the queue New was given, which the bulk service inserts with.
func (r *Runner) Queue() *Queue { return r.queue }

// Bulk returns the service of bulk actions on dead letters, whose jobs this runner works.
func (r *Runner) Bulk() *bulk.Service { return r.bulk }

// Start starts working jobs. Cancelling ctx does not stop them (River would stop hard and
// cancel running steps): call Stop, which lets them finish.
func (r *Runner) Start(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	wctx, stop := context.WithCancel(ctx)
	r.stopWatch = stop
	go r.eng.Health().Watch(wctx)
	if r.pg != nil {
		return r.pg.Start(ctx)
	}
	return r.sqlite.Start(ctx)
}

// Stop stops taking jobs and lets running ones finish until shortly before ctx's deadline;
// then it cancels what still runs (the engine hands those attempts back to run again) and
// waits for that until the deadline. Without a deadline it waits for running jobs.
func (r *Runner) Stop(ctx context.Context) error {
	if r.stopWatch != nil {
		defer r.stopWatch()
	}
	soft, hard := r.client()
	sctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		// Keep a fifth of the time (at most 5 s) to cancel and release what still runs.
		reserve := min(time.Until(dl)/5, 5*time.Second)
		var cancel context.CancelFunc
		sctx, cancel = context.WithDeadline(ctx, dl.Add(-reserve))
		defer cancel()
	}
	err := soft(sctx)
	if err == nil {
		return nil
	}
	hctx := ctx
	if ctx.Err() != nil {
		// No time left at all: still give cancelled jobs a moment to release their attempts.
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
	}
	return hard(hctx)
}

func (r *Runner) client() (soft, hard func(context.Context) error) {
	if r.pg != nil {
		return r.pg.Stop, r.pg.StopAndCancel
	}
	return r.sqlite.Stop, r.sqlite.StopAndCancel
}

// Kill stops abruptly without waiting (tests of crashes).
func (r *Runner) Kill() {
	if r.stopWatch != nil {
		r.stopWatch()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r.pg != nil {
		_ = r.pg.StopAndCancel(ctx)
		return
	}
	_ = r.sqlite.StopAndCancel(ctx)
}

// levelFilter drops River's records below a level (River is chatty at info), and all of
// them while quiet says so.
type levelFilter struct {
	slog.Handler
	min   slog.Level
	quiet func() bool
}

func (l levelFilter) Enabled(ctx context.Context, lv slog.Level) bool {
	return lv >= l.min && !l.quiet() && l.Handler.Enabled(ctx, lv)
}

func (l levelFilter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelFilter{l.Handler.WithAttrs(attrs), l.min, l.quiet}
}

func (l levelFilter) WithGroup(name string) slog.Handler {
	return levelFilter{l.Handler.WithGroup(name), l.min, l.quiet}
}
