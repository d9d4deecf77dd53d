// Package engine runs workflow executions durably.
//
// The step_executions table is the source of truth: one row per attempt of a step. Every
// state change and the schedule of the next attempt are written in one transaction; the
// River job that runs the attempt is enqueued in that transaction where the database allows
// (SQLite) and right after commit otherwise (PostgreSQL). Reconcile repairs the gap: it
// re-enqueues due attempts that have no job and reclaims attempts left RUNNING by a process
// that died. An attempt is claimed with a compare-and-set on (status, generation), so a late
// or duplicate job never runs it twice; a reclaimed attempt keeps its attempt number and so
// its idempotency key.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/definition"
	"lifeline/services/redact"
	"lifeline/services/steps"
)

// Job asks for one attempt (or, with CompensationID, one compensation of a rollback) to run
// at RunAt (zero: now).
type Job struct {
	AttemptID      string
	CompensationID string
	Generation     int
	RunAt          time.Time
}

// Enqueuer puts attempt and compensation jobs on the queue (jobs.Queue). The engine
// declares it and is given one at construction (Config.Queue); the queue's workers, which
// need the engine, are built after it.
type Enqueuer interface {
	// EnqueueTx is called inside the transaction that made the jobs necessary. It either
	// enqueues in tx, or returns a function to call after commit.
	EnqueueTx(ctx context.Context, tx *gorm.DB, jobs []Job) (afterCommit func(context.Context) error, err error)
	// Enqueue enqueues outside any transaction. A job whose (attempt, generation) is already
	// queued or running is skipped.
	Enqueue(ctx context.Context, jobs []Job) error
	// EnqueuePgx enqueues in tx, a PostgreSQL transaction of the engine's own (group commit:
	// a start commits its first attempt and that attempt's job together).
	EnqueuePgx(ctx context.Context, tx pgx.Tx, jobs []Job) error
}

// Config tunes the engine. Zero values take the defaults, except Queue, which is required.
type Config struct {
	// Queue inserts the jobs that run attempts and compensations: on SQLite in the
	// transaction that made them necessary, on PostgreSQL right after it commits (and, for
	// group commit, in the batch's own transaction). Required: New panics without one.
	Queue Enqueuer
	// LeaseGrace is added to a step's timeout to form the lease of a RUNNING attempt;
	// an attempt whose lease has passed belonged to a dead process and is reclaimed.
	LeaseGrace time.Duration
	// PendingGrace is how long a due PENDING attempt may wait for its job before
	// Reconcile enqueues it again.
	PendingGrace time.Duration
	// DLQRetention is how long dead letters are kept (30 days).
	DLQRetention time.Duration
	// IdempotencyTTL is how long API idempotency keys are kept (24 h).
	IdempotencyTTL time.Duration
	// RedactKeys lists the secret-looking keys redacted in snapshots.
	RedactKeys []string
	// Sealer, when set, encrypts secret values in execution inputs and attempt inputs and
	// outputs at rest; they are decrypted only in memory, when a step needs them.
	Sealer Sealer
	// Notifier is told of failures (nil: nobody is). Events: a step's first failure (when it
	// will be retried), a step's retries exhausted (its failure handed to a handler), an
	// execution in the DLQ, a breaker that opened, and the message of a notification
	// compensation. Each is emitted in the transaction that records it, with a dedup key,
	// so a commit that is tried again never notifies twice.
	Notifier Notifier
	// Databases run database_operation compensations through the organizations' named
	// connections (nil: such compensations fail for good).
	Databases DatabaseExecutor
	// Observer is told of attempts, moves to the DLQ and replays, for metrics and traces
	// (nil: nobody is, at no cost).
	Observer Observer

	// ungrouped leaves new dead letters out of failure groups: only for the benchmark that
	// measures what grouping costs the failure branch (export_test.go).
	ungrouped bool
}

func (c Config) withDefaults() Config {
	if c.LeaseGrace <= 0 {
		c.LeaseGrace = 30 * time.Second
	}
	if c.PendingGrace <= 0 {
		c.PendingGrace = 15 * time.Second
	}
	if c.DLQRetention <= 0 {
		c.DLQRetention = 30 * 24 * time.Hour
	}
	if c.IdempotencyTTL <= 0 {
		c.IdempotencyTTL = 24 * time.Hour
	}
	return c
}

// Hooks are points where a test may hold a state change (nil: nothing happens).
type Hooks struct {
	// BeforeTx is called by a state change of an execution after the checks it makes
	// outside its transaction and before the transaction begins, with the transition's
	// name (Transition…) and the execution's id.
	BeforeTx func(transition, executionID string)
	// InTx is called inside a transition's transaction once it has read what it checks and
	// before it writes, with the transition's name and an id: TransitionSplitOut, after
	// SplitOut read the item's group (its id). SQLite runs one transaction at a time (one
	// connection), so there a hook must not wait for another transaction: hold at BeforeTx.
	InTx func(transition, id string)
	// AfterTx is called by a state change right after its transaction committed, before
	// the jobs it needs are queued (PostgreSQL queues them after the commit).
	AfterTx func()
	// FailureCounted is called in the transaction that records a failure counted against a
	// closed circuit breaker, once the failure is counted and before that transaction
	// commits, with the breaker's id.
	FailureCounted func(breakerID string)
}

// Names of transitions, for Hooks.
const (
	TransitionStartReplay   = "StartReplay"
	TransitionStartRollback = "StartRollback"
	// TransitionSplitOut is an item's split out of its group (Groups.Split): BeforeTx gets
	// the dead letter's id, InTx the id of the group it leaves.
	TransitionSplitOut = "SplitOut"
	// TransitionFoldGroupCounts is the fold of an organization's deltas of group counters
	// (Reconcile, PostgreSQL): InTx gets the organization's id once the fold has taken the
	// deltas committed so far and before it adds them to the groups' rows.
	TransitionFoldGroupCounts = "FoldGroupCounts"
)

// SetHooks sets the points where a test holds state changes (the zero Hooks: none). Safe
// while the engine runs.
func (e *Engine) SetHooks(h Hooks) { e.hooks.Store(&h) }

// hooked returns the hooks set (the zero Hooks when none are).
func (e *core) hooked() Hooks {
	if h := e.hooks.Load(); h != nil {
		return *h
	}
	return Hooks{}
}

func (e *core) beforeTx(transition, executionID string) {
	if f := e.hooked().BeforeTx; f != nil {
		f(transition, executionID)
	}
}

// Engine starts and advances executions. It is the façade of the engine's parts (parts.go),
// each responsible for one thing, which share their dependencies (core).
type Engine struct {
	*core
	starts      *starts
	attempts    *attempts
	recovery    *recovery
	rollbacks   *rollbacks
	circuits    *circuits
	maintenance *maintenance
}

// core is what the engine's parts share: the database, the clock, the log, the queue, the
// hooks, the definition cache, the notifier, the store of transitions, and secrets.
type core struct {
	*secrets
	db    *models.DB
	steps *steps.Registry
	enq   Enqueuer
	log   *slog.Logger
	cfg   Config
	// Rand returns a number in [0, 1) for jitter. Tests may replace it.
	Rand func() float64
	// hooks let tests force an interleaving of two state changes (SetHooks); nil: none.
	hooks atomic.Pointer[Hooks]

	mu   sync.Mutex
	defs map[string]*definition.Definition

	health *Health
	// abandoned holds attempts this process holds RUNNING but could not record, because the
	// database was unreachable for as long as their lease allowed (attempt id → generation).
	// When the database is back they are released at once, not left to their leases.
	abandoned sync.Map
	// breakers caches the closed circuit breakers this process saw (a second at most).
	breakers breakerCache
	// held caches the organizations' held values (a second at most; held.go).
	held heldCache
	// databases runs database_operation compensations (nil: they fail).
	databases DatabaseExecutor
	// notifier is told of failures, in the transactions that record them (nil: nobody is).
	notifier Notifier
	// observer is told of attempts, moves to the DLQ and replays (never nil).
	observer Observer
	// group commits the statements that start executions, claim attempts and record steps
	// together (PostgreSQL; nil on SQLite).
	group *group
	// store makes every change of state (transitions.go).
	store *transitions
}

// New returns an engine that queues its jobs with cfg.Queue. It panics when cfg.Queue is
// nil: that is a wiring mistake, caught at construction rather than at the first job.
func New(db *models.DB, reg *steps.Registry, log *slog.Logger, cfg Config) *Engine {
	if cfg.Queue == nil {
		panic("engine.New: Config.Queue is nil (build it first: jobs.NewQueue)")
	}
	cfg = cfg.withDefaults()
	c := &core{
		secrets:   &secrets{redactor: redact.New(cfg.RedactKeys), sealer: cfg.Sealer},
		db:        db,
		steps:     reg,
		enq:       cfg.Queue,
		log:       log,
		cfg:       cfg,
		Rand:      rand.Float64,
		defs:      map[string]*definition.Definition{},
		health:    newHealth(db, log),
		notifier:  cfg.Notifier,
		databases: cfg.Databases,
		observer:  cfg.Observer,
	}
	if c.observer == nil {
		c.observer = unobserved{}
	}
	if db.Dialect == models.Postgres {
		c.group = &group{pool: db.Pool, insert: cfg.Queue.EnqueuePgx}
	}
	c.store = &transitions{db: db, group: c.group, commit: c.commit}
	e := &Engine{core: c, starts: &starts{c}, rollbacks: &rollbacks{c}, circuits: &circuits{c}}
	e.recovery = &recovery{core: c, starts: e.starts}
	failures := &failures{core: c, rollbacks: e.rollbacks}
	e.attempts = &attempts{core: c, failures: failures, circuits: e.circuits}
	e.maintenance = &maintenance{core: c, failures: failures, attempts: e.attempts}
	c.health.onUp = e.maintenance.recover
	return e
}

// Health tells whether the database answers.
func (e *Engine) Health() *Health { return e.health }

// DatabaseDown reports whether the engine's database is known to be unreachable now.
func (e *Engine) DatabaseDown() bool { return e.health.Down() }

// Redactor returns the redactor used for snapshots.
func (e *Engine) Redactor() *redact.Redactor { return e.redactor }

// commit runs fn in a transaction and enqueues the jobs it returns, in the transaction or
// right after it. A failed enqueue after commit is logged, not returned: Reconcile repairs it.
// fn gets the database clock read just before the transaction began.
func (e *core) commit(ctx context.Context, fn func(tx *gorm.DB, now time.Time) ([]Job, error)) error {
	now, err := e.now(ctx)
	if err != nil {
		return err
	}
	var after func(context.Context) error
	err = e.db.Tx(ctx, func(tx *gorm.DB) error {
		jobs, err := fn(tx, now)
		if err != nil || len(jobs) == 0 {
			return err
		}
		after, err = e.enq.EnqueueTx(ctx, tx, jobs)
		return err
	})
	if err != nil {
		return err
	}
	if f := e.hooked().AfterTx; f != nil {
		f()
	}
	if after != nil {
		// What committed is queued even when the caller's context ends now (a client that
		// went away): otherwise the work waits for the reconciler.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		defer cancel()
		if err := after(actx); err != nil {
			e.log.WarnContext(ctx, "enqueue after commit failed; the reconciler will repair it", "err", err)
		}
	}
	return nil
}

// now reads the database clock. Never call it inside a transaction: on PostgreSQL it takes
// a pool connection of its own, and transactions that each hold one connection while waiting
// for another deadlock once they fill the pool (4 connections on a 2-CPU machine).
func (e *core) now(ctx context.Context) (time.Time, error) { return e.db.Now(ctx) }

// definitionFor returns the parsed definition of a workflow version (cached; versions are immutable).
func (e *core) definitionFor(ctx context.Context, orgID, workflowID string, version int) (*definition.Definition, error) {
	key := fmt.Sprintf("%s:%s:%d", orgID, workflowID, version) // another organization never reads it from here
	e.mu.Lock()
	d, ok := e.defs[key]
	e.mu.Unlock()
	if ok {
		return d, nil
	}
	raw, err := e.db.WorkflowVersionDef(ctx, orgID, workflowID, version)
	if err != nil {
		return nil, fmt.Errorf("load workflow %s version %d: %w", workflowID, version, err)
	}
	// A stored version was valid when it was saved: decode it, don't validate it again. A
	// rule tightened since, or a step type no longer registered, must not stop executions
	// already started on it (an unknown step type fails its attempt for good: STEP_TYPE).
	d = &definition.Definition{}
	if err := json.Unmarshal(raw, d); err != nil {
		return nil, fmt.Errorf("workflow %s version %d is not a definition: %w", workflowID, version, err)
	}
	if len(d.Steps) == 0 {
		return nil, fmt.Errorf("workflow %s version %d has no steps", workflowID, version)
	}
	e.mu.Lock()
	if len(e.defs) > 1000 {
		e.defs = map[string]*definition.Definition{}
	}
	e.defs[key] = d
	e.mu.Unlock()
	return d, nil
}

// IdempotencyKey is the key an attempt sends to external services (seed 003).
func IdempotencyKey(executionID, stepID string, attempt int) string {
	return fmt.Sprintf("wf:%s:step:%s:attempt:%d", executionID, stepID, attempt)
}

// newAttempt builds the PENDING row of an attempt.
// firstGeneration is the generation an attempt is created with; every reclaim and re-queue
// moves it on.
const firstGeneration = 1

func newAttempt(ex *models.Execution, step definition.Step, index, attempt int, at time.Time) models.StepAttempt {
	return models.StepAttempt{
		ID:             models.NewID(),
		OrganizationID: ex.OrganizationID,
		ExecutionID:    ex.ID,
		StepID:         step.ID,
		StepIndex:      index,
		Attempt:        attempt,
		Status:         models.StepPending,
		Generation:     firstGeneration,
		IdempotencyKey: IdempotencyKey(ex.ID, step.ID, attempt),
		ScheduledAt:    at,
		CreatedAt:      at,
		UpdatedAt:      at,
	}
}

// scheduleFor returns when a step's first attempt runs: now, or later for a delay step.
func (e *core) scheduleFor(step definition.Step, now time.Time) time.Time {
	return now.Add(e.delayOf(step))
}

// delayOf is how long after its predecessor a step's first attempt waits (a delay step's).
func (e *core) delayOf(step definition.Step) time.Duration {
	if t, ok := e.steps.Get(step.Type); ok {
		if d, ok := t.(steps.Delayer); ok {
			return max(d.Delay(step.Config), 0)
		}
	}
	return 0
}

// leaseOf is how long a RUNNING attempt of step is held: its timeout plus LeaseGrace.
func (e *core) leaseOf(step definition.Step) time.Duration {
	return time.Duration(step.Timeout())*time.Millisecond + e.cfg.LeaseGrace
}

// markClaimed records in memory what a claim wrote: the attempt RUNNING since now, held for
// lease; and, when ex is given, its execution RUNNING.
func markClaimed(ex *models.Execution, a *models.StepAttempt, now time.Time, lease time.Duration) {
	until := now.Add(lease)
	a.Status, a.StartedAt, a.LeaseExpiresAt = models.StepRunning, &now, &until
	if ex == nil {
		return
	}
	if ex.Status == models.ExecPending {
		ex.Status = models.ExecRunning
	}
	if ex.StartedAt == nil {
		ex.StartedAt = &now
	}
}

var errLost = errors.New("attempt no longer held")
