package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/classify"
	"lifeline/services/definition"
	"lifeline/services/notify"
	"lifeline/services/redact"
	"lifeline/services/retry"
	"lifeline/services/steps"
	"lifeline/services/tmpl"
)

// Outcome says what RunAttempt did.
type Outcome string

const (
	OutcomeSkipped   Outcome = "skipped"   // the attempt was not PENDING at this generation: a stale or duplicate job
	OutcomeSucceeded Outcome = "succeeded" // the step succeeded
	OutcomeRetrying  Outcome = "retrying"  // the step failed; its next attempt is scheduled
	OutcomeDLQ       Outcome = "dlq"       // the step failed for good; the execution is in the DLQ
	OutcomeReleased  Outcome = "released"  // shutdown interrupted the attempt; it was put back to run again
	OutcomeLost      Outcome = "lost"      // the lease was taken over while the step ran; the result was discarded
	OutcomeDeferred  Outcome = "deferred"  // the job came before the attempt's time; it was re-queued for that time
	OutcomeWaiting   Outcome = "waiting"   // an open circuit breaker refused the attempt; it waits, unsent, for the breaker
	OutcomeHandled   Outcome = "handled"   // the step failed for good; its on-failure handler step runs instead of the DLQ
	OutcomeFailed    Outcome = "failed"    // the attempt names a step its definition does not have; the execution ended FAILED
)

// failMissingStep ends an attempt that names a step its execution's definition does not
// have (at its index): the attempt FAILED (internal / STEP_MISSING) and the execution
// FAILED, guarded on the attempt being PENDING at generation (OutcomeSkipped when it is not
// any more), audited and logged once.
func (e *Engine) failMissingStep(ctx context.Context, ex *models.Execution, a *models.StepAttempt, generation int) (Outcome, error) {
	msg := fmt.Sprintf("Step %q (position %d) is not in version %d of the workflow: the attempt cannot run.", a.StepID, a.StepIndex+1, ex.WorkflowVersion)
	err := e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		r := tx.Model(&models.StepAttempt{}).Where("id = ? AND status = ? AND generation = ?", a.ID, models.StepPending, generation).
			Updates(map[string]any{"status": models.StepFailed, "error_type": string(classify.Internal), "error_code": "STEP_MISSING",
				"error_message": msg, "finished_at": now, "updated_at": now})
		if r.Error != nil {
			return nil, r.Error
		}
		if r.RowsAffected == 0 {
			return nil, errLost
		}
		if err := tx.Model(&models.Execution{}).Where("id = ? AND organization_id = ?", ex.ID, ex.OrganizationID).
			Updates(map[string]any{"status": models.ExecFailed, "current_step_id": a.StepID, "finished_at": now, "updated_at": now}).Error; err != nil {
			return nil, err
		}
		return nil, audit.Record(tx, audit.Entry{OrganizationID: ex.OrganizationID, Actor: audit.System, Action: "execution.failed",
			EntityType: "workflow_execution", EntityID: ex.ID, At: now, Details: map[string]any{"stepId": a.StepID, "errorCode": "STEP_MISSING", "message": msg}})
	})
	if errors.Is(err, errLost) {
		return OutcomeSkipped, nil
	}
	if err != nil {
		return "", err
	}
	e.log.ErrorContext(ctx, "an attempt names a step its definition does not have; the execution ended FAILED",
		"execution_id", ex.ID, "attempt_id", a.ID, "step_id", a.StepID, "step_index", a.StepIndex, "workflow_version", ex.WorkflowVersion)
	return OutcomeFailed, nil
}

// commitTimeout bounds the commits that record an attempt's result. They run on a context
// that shutdown does not cancel: a step that has finished is always recorded.
const commitTimeout = 30 * time.Second

// RunAttempt claims the attempt at this generation, runs its step and records the result.
// It returns an error only when the database failed; the job should then be retried. A job
// that comes before its attempt's time by the database clock (the application's clock may
// be off) does not run it: the attempt is re-queued for its time (OutcomeDeferred).
func (e *Engine) RunAttempt(ctx context.Context, attemptID string, generation int) (Outcome, error) {
	var a models.StepAttempt
	if err := e.db.Conn(ctx).Where("id = ?", attemptID).First(&a).Error; err != nil {
		if models.IsNotFound(err) {
			return OutcomeSkipped, nil
		}
		return "", err
	}
	if a.Status != models.StepPending || a.Generation != generation {
		return OutcomeSkipped, nil
	}
	var ex models.Execution
	if err := e.db.Conn(ctx).Where("organization_id = ? AND id = ?", a.OrganizationID, a.ExecutionID).First(&ex).Error; err != nil {
		return "", err
	}
	def, err := e.definitionFor(ctx, ex.OrganizationID, ex.WorkflowID, ex.WorkflowVersion)
	if err != nil {
		return "", err
	}
	if a.StepIndex < 0 || a.StepIndex >= len(def.Steps) || def.Steps[a.StepIndex].ID != a.StepID {
		// Never runnable: ending it beats a job that fails, is re-queued, and fails again.
		return e.failMissingStep(ctx, &ex, &a, generation)
	}
	step := def.Steps[a.StepIndex]

	// Claim: compare-and-set PENDING → RUNNING at this generation, once due by the database clock.
	var claimed bool
	var now time.Time
	if e.db.Dialect == models.Postgres {
		claimed, now, err = e.claim(ctx, &ex, &a, generation, e.leaseOf(step))
	} else {
		claimed, now, err = e.claimTx(ctx, &ex, &a, generation, e.leaseOf(step))
	}
	if err != nil {
		if e.health.Failed(err) {
			// The claim may have committed before the connection broke: if it did, the
			// attempt is RUNNING for nobody. Release it when the database is back.
			e.abandoned.Store(a.ID, generation)
		}
		return "", err
	}
	if !claimed {
		if a.ScheduledAt.Sub(now) > dueTolerance {
			return e.deferAttempt(ctx, &a, generation)
		}
		return OutcomeSkipped, nil
	}
	// Run the step outside any transaction; then, while the chain budget lasts, the steps
	// that its success claimed in the same commit.
	// The first step has no earlier outputs to read: its attempts are read only if it fails
	// again (fail needs the first attempt of its run).
	var attempts []models.StepAttempt
	if a.StepIndex > 0 || a.HandlesAttemptID != nil {
		if attempts, err = e.db.Attempts(ctx, ex.OrganizationID, ex.ID); err != nil {
			return "", err
		}
	}
	chain := &chainBudget{started: time.Now()}
	var env map[string]any // what templates see: built at the first step, extended after each
	for {
		outcome, next, err := e.runClaimed(ctx, &ex, def, &a, generation, attempts, &env, chain)
		if next == nil || err != nil {
			return outcome, err
		}
		attempts = append(attempts, a) // a is now the SUCCEEDED attempt, with its stored output
		if env != nil {
			if err := e.addOutput(env, a); err != nil {
				env = nil // built again from attempts, where the error is the step's
			}
		}
		a, generation = *next, next.Generation
	}
}

// claimTx claims a due PENDING attempt in a transaction (SQLite): RUNNING, leased for
// lease (leaseOf), and its execution RUNNING. It returns whether it claimed
// it, and the database time it compared the attempt's schedule with.
func (e *Engine) claimTx(ctx context.Context, ex *models.Execution, a *models.StepAttempt, generation int, lease time.Duration) (bool, time.Time, error) {
	now, err := e.now(ctx)
	if err != nil {
		return false, now, err
	}
	if a.ScheduledAt.Sub(now) > dueTolerance {
		return false, now, nil
	}
	claimed := false
	err = e.db.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&models.StepAttempt{}).
			Where("id = ? AND status = ? AND generation = ?", a.ID, models.StepPending, generation).
			Updates(map[string]any{"status": models.StepRunning, "started_at": now, "lease_expires_at": now.Add(lease), "updated_at": now})
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		claimed = true
		upd := map[string]any{"current_step_id": a.StepID, "updated_at": now}
		if ex.Status == models.ExecPending {
			upd["status"] = models.ExecRunning
		}
		if ex.StartedAt == nil {
			upd["started_at"] = now
		}
		if err := tx.Model(&models.Execution{}).Where("id = ? AND organization_id = ?", ex.ID, ex.OrganizationID).Updates(upd).Error; err != nil {
			return err
		}
		markClaimed(ex, a, now, lease)
		return nil
	})
	return claimed, now, err
}

// Chain budget: a worker runs at most chainSteps steps of one execution, or for chainTime,
// before the next step goes back to the queue, so one long execution never starves others.
const (
	chainSteps = 25
	chainTime  = 2 * time.Second
)

// showAfter: a step a worker claims right after its predecessor (in a row) is written as the
// execution's current step only once it has run this long. Faster steps go by before anyone
// could see them, and not writing them saves a row update per step. The execution's current
// step is always written when a run stops at a step (a retry, a delay, the queue, the DLQ),
// and when a run starts (the claim).
const showAfter = 500 * time.Millisecond

// chainBudget counts the steps a worker ran in a row for one execution.
type chainBudget struct {
	started time.Time
	steps   int
}

// more reports whether the worker may claim and run one more step now.
func (c *chainBudget) more(ctx context.Context) bool {
	return ctx.Err() == nil && c.steps < chainSteps && time.Since(c.started) < chainTime
}

// runClaimed runs a claimed (RUNNING at generation) attempt and records its result. When the
// step succeeded and its successor was claimed in the same commit, it returns that attempt:
// the caller runs it next. On return a holds what was stored (status, output).
func (e *Engine) runClaimed(ctx context.Context, ex *models.Execution, def *definition.Definition, a *models.StepAttempt, generation int,
	attempts []models.StepAttempt, envp *map[string]any, chain *chainBudget) (Outcome, *models.StepAttempt, error) {
	step := def.Steps[a.StepIndex]
	timeout := time.Duration(step.Timeout()) * time.Millisecond
	h := holder{stop: ctx, deadline: leaseDeadline(a)}
	if chain.steps > 0 { // claimed by its predecessor's commit: not shown yet
		// The timer's function may still run after this returns, when the caller reuses a
		// for the next step: it gets copies.
		exID, attemptID, stepID := ex.ID, a.ID, a.StepID
		shown := time.AfterFunc(showAfter, func() { e.showRunning(exID, attemptID, stepID) })
		defer shown.Stop()
	}
	log := e.log.With("execution_id", ex.ID, "correlation_id", ex.CorrelationID, "step_id", a.StepID, "attempt", a.Attempt)
	var input json.RawMessage
	var mask *redact.Masker
	out, runErr := func() (any, error) {
		t, ok := e.steps.Get(step.Type)
		if !ok {
			return nil, classify.New(classify.Permanent, "STEP_TYPE", fmt.Sprintf("step type %q is not registered in this process", step.Type))
		}
		if *envp == nil {
			env, err := e.env(ex, attempts, a.StepIndex)
			if err != nil {
				return nil, classify.New(classify.Internal, "DECRYPT", err.Error())
			}
			*envp = env
		}
		env := *envp
		// Every secret the attempt can see (the execution's input, earlier outputs, the
		// definition's literal secrets, what its templates produce under secret-looking
		// keys) is sealed or masked wherever it appears in what is stored.
		var failedStep any
		var mapped json.RawMessage
		if a.HandlesAttemptID != nil { // a handler: it also reads the failure it was handed
			var err error
			if env, mapped, err = e.handlerEnv(ctx, ex, def, a, attempts, env); err != nil {
				var c classify.Classified
				if !errors.As(err, &c) {
					return nil, &storeError{err}
				}
				return nil, err
			}
			failedStep = env["failedStep"]
		}
		cfg, err := tmpl.Render(step.Config, env)
		if err != nil {
			return nil, classify.New(classify.Validation, "TEMPLATE", err.Error())
		}
		mask = e.masker(def, env["input"], env["steps"], failedStep, cfg)
		input, _ = json.Marshal(cfg)
		if mapped != nil {
			input = mapped
		}
		cfgMap, _ := cfg.(map[string]any)
		if h.gate = breakerOf(ex, def, a.StepIndex, cfgMap); h.gate != nil {
			if err := e.admit(ctx, ex, h.gate, a); err != nil {
				var w *waitOnBreaker
				if !errors.As(err, &w) {
					return nil, &storeError{err}
				}
				return nil, err
			}
		}
		stepCtx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return safeRun(stepCtx, t, steps.Input{ExecutionID: ex.ID, StepID: a.StepID, Attempt: a.Attempt, IdempotencyKey: a.IdempotencyKey, Config: cfgMap})
	}()
	chain.steps++

	// What happens next is recorded even if the job's context ends now (shutdown).
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	var se *storeError
	if runErr != nil && (ctx.Err() != nil || errors.As(runErr, &se)) {
		// Shutdown (or a lost job), not the step's own timeout; or the engine's own database
		// failed before the step ran: hand the attempt back, unsent, to run again with the
		// same idempotency key.
		delay := time.Duration(0)
		if se != nil {
			log.WarnContext(ctx, "the database failed before the step ran; the attempt is handed back", "err", se.err)
			delay = storeRetryDelay
		}
		outcome, err := e.release(rctx, h, a, generation, log, delay)
		return outcome, nil, err
	}
	var w *waitOnBreaker
	if errors.As(runErr, &w) {
		budget := def.Breaker(a.StepIndex).WaitBudget
		if w.until.Sub(a.CreatedAt) <= budget {
			outcome, err := e.waitOn(rctx, h, ex, a, generation, w, log)
			return outcome, nil, err
		}
		// Waited too long: the step fails for good, without counting against the breaker;
		// its dead letter records the breaker's state.
		h.gate.refused = true
		runErr = classify.New(classify.ExternalService, CodeCircuitOpen, fmt.Sprintf(
			"The circuit breaker stayed open longer than the step may wait (%s); the step was not run.", budget))
	}
	if runErr == nil {
		return e.succeed(rctx, h, ex, def, a, generation, input, out, attempts, mask, chain.more(ctx), log)
	}
	outcome, err := e.fail(rctx, h, ex, def, a, generation, input, runErr, attempts, mask, log)
	return outcome, nil, err
}

// storeError is the engine's own database failing while it prepares an attempt (reading a
// breaker's state, or the failure a handler handles), before any request left: not the
// step's failure, so it costs no attempt and no idempotency key.
type storeError struct{ err error }

// storeRetryDelay is how long an attempt handed back for a storeError waits before it runs
// again: a database that answers but fails (a broken table) is not asked in a tight loop.
const storeRetryDelay = time.Second

func (s *storeError) Error() string {
	return "the database failed before the step ran: " + s.err.Error()
}
func (s *storeError) Unwrap() error { return s.err }

// neverRetried lists error codes no retry can fix, whatever the policy says (even one that
// retries permanent errors): the step's destination or type cannot be used at all, nor a
// database connection that reaches Lifeline's own servers or logs in as a privileged role.
var neverRetried = map[string]bool{"URL_SCHEME": true, "HEADER": true, "DESTINATION_DENIED": true, "STEP_TYPE": true, CodeCircuitOpen: true,
	"OWN_SERVER": true, "PRIVILEGED_ROLE": true}

// dueTolerance: a job may run this much before its attempt's time (clock granularity).
const dueTolerance = 50 * time.Millisecond

func safeRun(ctx context.Context, t steps.Type, in steps.Input) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{msg: fmt.Sprint(r), stack: string(debug.Stack())}
		}
	}()
	return t.Run(ctx, in)
}

type panicError struct{ msg, stack string }

func (p *panicError) Error() string            { return "step panicked: " + p.msg }
func (p *panicError) ErrorType() classify.Type { return classify.Internal }
func (p *panicError) ErrorCode() string        { return "PANIC" }

// env is what templates see at step index: input, the outputs of the succeeded (or skipped)
// steps before it, the execution. (A replay from an earlier step leaves outputs of later
// steps from the first run in attempts; they are not the replay's.) Secret values are
// decrypted here, in memory only.
func (e *Engine) env(ex *models.Execution, attempts []models.StepAttempt, index int) (map[string]any, error) {
	input, err := e.open(ex.Input, tableExecutions, ex.ID, "input")
	if err != nil {
		return nil, err
	}
	env := map[string]any{
		"input":     input,
		"steps":     map[string]any{},
		"execution": map[string]any{"id": ex.ID, "correlationId": ex.CorrelationID, "workflowId": ex.WorkflowID},
	}
	for _, at := range attempts {
		if at.StepIndex >= index {
			continue
		}
		if err := e.addOutput(env, at); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// addOutput adds a succeeded or skipped attempt's output to env (other attempts add nothing).
func (e *Engine) addOutput(env map[string]any, at models.StepAttempt) error {
	if at.Status != models.StepSucceeded && at.Status != models.StepSkipped {
		return nil
	}
	out, err := e.open(at.Output, tableAttempts, at.ID, "output")
	if err != nil {
		return err
	}
	env["steps"].(map[string]any)[at.StepID] = map[string]any{"output": out, "status": at.Status, "attempt": at.Attempt}
	return nil
}

// landedNext reads the next attempt a commit that landed created (nil when it created none)
// and reports whether it is this worker's to run: only when the commit claimed it (claim:
// the next step was runnable at once and the worker chains) and it is still RUNNING at the
// generation it was created with. The commit queued no job for an attempt it claimed, so no
// one else can hold that generation; a reclaim (after a long outage, its lease ran out)
// moves it to the next one, which another worker may hold: that one is not run here, or the
// same idempotency key would be sent twice at once.
func (e *Engine) landedNext(ctx context.Context, id string, claim bool) (*models.StepAttempt, bool, error) {
	var n models.StepAttempt
	err := e.db.Conn(ctx).Where("id = ?", id).First(&n).Error
	if models.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return &n, claim && n.Status == models.StepRunning && n.Generation == firstGeneration, nil
}

// claimsNext reports whether the commit recording step index's success claims the step after
// it (when the worker chains): there is one and it is runnable at once (no delay).
func (e *Engine) claimsNext(def *definition.Definition, index int) bool {
	i := def.After(index)
	return i >= 0 && e.delayOf(def.Steps[i]) == 0
}

// showRunning writes a step as its execution's current step if its attempt is still running.
func (e *Engine) showRunning(executionID, attemptID, stepID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now, err := e.now(ctx)
	if err == nil {
		err = e.db.Conn(ctx).Model(&models.Execution{}).
			Where("id = ? AND EXISTS (SELECT 1 FROM step_executions WHERE id = ? AND status = ?)", executionID, attemptID, models.StepRunning).
			Updates(map[string]any{"current_step_id": stepID, "updated_at": now}).Error
	}
	if err != nil {
		e.log.DebugContext(ctx, "could not show the running step", "execution_id", executionID, "step_id", stepID, "err", err)
	}
}

// showStep writes the execution's current step (see showAfter).
func showStep(tx *gorm.DB, executionID, stepID string, now time.Time) error {
	return tx.Model(&models.Execution{}).Where("id = ?", executionID).
		Updates(map[string]any{"current_step_id": stepID, "updated_at": now}).Error
}

// finishAttempt moves the attempt from RUNNING at generation to status; errLost if it is no longer held.
func finishAttempt(tx *gorm.DB, a *models.StepAttempt, generation int, upd map[string]any) error {
	res := tx.Model(&models.StepAttempt{}).
		Where("id = ? AND status = ? AND generation = ?", a.ID, models.StepRunning, generation).
		Updates(upd)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return errLost
	}
	return nil
}

// deferAttempt moves a PENDING attempt that is not due yet to the next generation and
// queues a job for its scheduled time (read from the database clock, as River compares it).
func (e *Engine) deferAttempt(ctx context.Context, a *models.StepAttempt, generation int) (Outcome, error) {
	err := e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		r := tx.Model(&models.StepAttempt{}).Where("id = ? AND status = ? AND generation = ?", a.ID, models.StepPending, generation).
			Updates(map[string]any{"generation": generation + 1, "updated_at": now})
		if r.Error != nil {
			return nil, r.Error
		}
		if r.RowsAffected == 0 {
			return nil, errLost
		}
		return []Job{{AttemptID: a.ID, Generation: generation + 1, RunAt: a.ScheduledAt}}, nil
	})
	if errors.Is(err, errLost) {
		return OutcomeSkipped, nil
	}
	if err != nil {
		return "", err
	}
	return OutcomeDeferred, nil
}

// release hands a held attempt back: PENDING at the next generation, due after delay (0:
// now), with its job. It logs that on log (nil: the caller says it for many at once).
func (e *Engine) release(ctx context.Context, h holder, a *models.StepAttempt, generation int, log *slog.Logger, delay time.Duration) (Outcome, error) {
	landed, err := e.persist(ctx, h, a, generation, func(ctx context.Context) error {
		return e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			due := now.Add(delay)
			err := finishAttempt(tx, a, generation, map[string]any{"status": models.StepPending, "generation": generation + 1,
				"started_at": nil, "lease_expires_at": nil, "scheduled_at": due, "updated_at": now})
			if err != nil {
				return nil, err
			}
			if err := showStep(tx, a.ExecutionID, a.StepID, now); err != nil {
				return nil, err
			}
			return []Job{{AttemptID: a.ID, Generation: generation + 1, RunAt: due}}, nil
		})
	})
	if errors.Is(err, errLost) || landed {
		return OutcomeLost, nil
	}
	if err != nil {
		return "", err
	}
	if log != nil {
		log.InfoContext(ctx, "attempt handed back; it will run again with the same idempotency key")
	}
	return OutcomeReleased, nil
}

func (e *Engine) succeed(ctx context.Context, h holder, ex *models.Execution, def *definition.Definition, a *models.StepAttempt, generation int,
	input json.RawMessage, out any, attempts []models.StepAttempt, mask *redact.Masker, claimNext bool, log *slog.Logger) (Outcome, *models.StepAttempt, error) {
	output, err := json.Marshal(out)
	if err != nil {
		output, _ = json.Marshal(fmt.Sprint(out))
	}
	sealedIn, err := e.sealFound(cleanJSON(input), tableAttempts, a.ID, "input", mask)
	if err != nil {
		return "", nil, err
	}
	sealedOut, err := e.sealFound(cleanJSON(output), tableAttempts, a.ID, "output", mask)
	if err != nil {
		return "", nil, err
	}
	var next *models.StepAttempt
	var claimed bool
	nextID := models.NewID()
	// One statement on PostgreSQL, except for a manual replay: its end settles a dead letter
	// and its next steps may have run before (see advanceTx).
	one := e.db.Dialect == models.Postgres && ex.DeadLetterID == nil
	landed, err := e.persist(ctx, h, a, generation, func(ctx context.Context) (err error) {
		if one {
			next, claimed, err = e.advance(ctx, ex, def, a, generation, nextID, sealedIn, sealedOut, claimNext)
		} else {
			next, claimed, err = e.advanceTx(ctx, ex, def, a, generation, nextID, sealedIn, sealedOut, claimNext)
		}
		return err
	})
	if landed { // a try committed though it seemed to fail: see what it left
		next, claimed, err = e.landedNext(ctx, nextID, claimNext && e.claimsNext(def, a.StepIndex))
	}
	if err == nil && next != nil && !claimed && (landed || one) {
		if err := e.enq.Enqueue(ctx, []Job{{AttemptID: next.ID, Generation: next.Generation, RunAt: next.ScheduledAt}}); err != nil {
			log.WarnContext(ctx, "enqueue after commit failed; the reconciler will repair it", "err", err)
		}
	}
	if errors.Is(err, errLost) {
		return OutcomeLost, nil, nil
	}
	if permanentStoreError(err) {
		// The database refuses this result and always will: record the attempt as an
		// internal failure that follows the retry policy, instead of running it forever.
		log.ErrorContext(ctx, "the step's result could not be stored", "err", err)
		storeErr := classify.New(classify.Internal, "STORE_RESULT",
			"The step succeeded but the database refused to store its result: "+err.Error())
		outcome, err := e.fail(ctx, h, ex, def, a, generation, input, storeErr, attempts, mask, log)
		return outcome, nil, err
	}
	if err != nil {
		return "", nil, err
	}
	a.Status, a.Output, a.Input = models.StepSucceeded, models.JSON(sealedOut), models.JSON(sealedIn)
	e.breakerSucceeded(ctx, ex, h.gate)
	log.DebugContext(ctx, "step succeeded")
	if !claimed {
		next = nil
	}
	return OutcomeSucceeded, next, nil
}

// advanceTx is advance as a transaction of several statements, for SQLite, where a
// statement costs no round trip and the jobs are inserted in the same transaction.
func (e *Engine) advanceTx(ctx context.Context, ex *models.Execution, def *definition.Definition, a *models.StepAttempt, generation int,
	nextID string, sealedIn, sealedOut []byte, chain bool) (next *models.StepAttempt, claimed bool, err error) {
	err = e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
		if err := finishAttempt(tx, a, generation, map[string]any{"status": models.StepSucceeded, "input": models.JSON(sealedIn),
			"output": models.JSON(sealedOut), "finished_at": now, "lease_expires_at": nil, "updated_at": now}); err != nil {
			return nil, err
		}
		// A step that recovers by retrying resolves its error record (a first attempt has none).
		if a.Attempt > 1 {
			if err := tx.Model(&models.ExecutionError{}).
				Where("organization_id = ? AND execution_id = ? AND step_id = ? AND status IN ?", ex.OrganizationID, ex.ID, a.StepID, []string{models.ErrPending, models.ErrRetrying}).
				Updates(map[string]any{"status": models.ErrResolved, "resolution_type": "auto_retry", "resolved_at": now, "next_retry_at": nil, "updated_at": now}).Error; err != nil {
				return nil, err
			}
		}
		i := def.After(a.StepIndex)
		if i < 0 {
			if err := tx.Model(&models.Execution{}).Where("id = ?", ex.ID).
				Updates(map[string]any{"status": endStatus(def, a.StepIndex), "current_step_id": nil, "finished_at": now, "updated_at": now}).Error; err != nil {
				return nil, err
			}
			return nil, e.replaySucceeded(tx, ex, now)
		}
		step := def.Steps[i]
		number, err := nextAttemptNumber(tx, ex, step.ID)
		if err != nil {
			return nil, err
		}
		na := newAttempt(ex, step, i, number, e.scheduleFor(step, now))
		na.ID, na.CreatedAt, na.UpdatedAt = nextID, now, now
		// The next step is runnable now: claim it in this commit (RUNNING, leased by the
		// database clock) and run it in this worker, with no queue round trip. A crash
		// leaves a leased row the reconciler reclaims with the same idempotency key.
		claimed = chain && !na.ScheduledAt.After(now)
		if claimed {
			markClaimed(nil, &na, now, e.leaseOf(step))
		}
		if err := tx.Create(&na).Error; err != nil {
			return nil, err
		}
		if !claimed { // a claimed step is shown by showRunning
			if err := showStep(tx, ex.ID, step.ID, now); err != nil {
				return nil, err
			}
		}
		next = &na
		if claimed {
			return nil, nil
		}
		return []Job{{AttemptID: na.ID, Generation: na.Generation, RunAt: na.ScheduledAt}}, nil
	})
	if err != nil {
		return nil, false, err
	}
	return next, claimed, nil
}

// Policy returns the effective retry policy of a step of the workflow's latest version as
// stored in retry_policies: the step's over the workflow's over the organization default
// over the built-in default. Executions use PolicyFor, the policy of their own version.
func (e *Engine) Policy(tx *gorm.DB, orgID, workflowID, stepID string) (retry.Policy, error) {
	var rows []models.RetryPolicy
	err := tx.Where("organization_id = ? AND ((workflow_id IS NULL AND step_id IS NULL) OR (workflow_id = ? AND (step_id IS NULL OR step_id = ?)))",
		orgID, workflowID, stepID).Find(&rows).Error
	if err != nil {
		return retry.Policy{}, err
	}
	var org, wf, st *retry.Spec
	for _, r := range rows {
		var s retry.Spec
		if err := json.Unmarshal(r.Spec, &s); err != nil {
			return retry.Policy{}, fmt.Errorf("retry policy %s: %w", r.ID, err)
		}
		switch {
		case r.WorkflowID == nil:
			org = &s
		case r.StepID == nil:
			wf = &s
		default:
			st = &s
		}
	}
	return retry.ResolveLevels(org, wf, st), nil
}

// PolicyFor returns the retry policy an execution's step retries under: the step's and the
// workflow's policies as written in the definition version the execution started on (a
// later save does not change them), over the organization default, over the built-in one.
// A manual replay's retry-policy override (the execution's RetryOverride) is applied last.
func (e *Engine) PolicyFor(tx *gorm.DB, ex *models.Execution, def *definition.Definition, stepIndex int) (retry.Policy, error) {
	var rows []models.RetryPolicy
	if err := tx.Where("organization_id = ? AND workflow_id IS NULL AND step_id IS NULL", ex.OrganizationID).Limit(1).Find(&rows).Error; err != nil {
		return retry.Policy{}, err
	}
	var org *retry.Spec
	if len(rows) == 1 {
		var s retry.Spec
		if err := json.Unmarshal(rows[0].Spec, &s); err != nil {
			return retry.Policy{}, fmt.Errorf("retry policy %s: %w", rows[0].ID, err)
		}
		org = &s
	}
	var st *retry.Spec
	if stepIndex >= 0 && stepIndex < len(def.Steps) {
		st = def.Steps[stepIndex].RetryPolicy
	}
	var override *retry.Spec
	if len(ex.RetryOverride) > 0 {
		override = &retry.Spec{}
		if err := json.Unmarshal(ex.RetryOverride, override); err != nil {
			return retry.Policy{}, fmt.Errorf("execution %s retry override: %w", ex.ID, err)
		}
	}
	return retry.ResolveLevels(org, def.Settings.RetryPolicy, st, override), nil
}

// fail records a failed attempt and schedules its retry or dead-letters the execution. What
// it stores is made storable first; if the database still refuses it for good, the failure
// is recorded again with a plain internal error, so the attempt never loops.
func (e *Engine) fail(ctx context.Context, h holder, ex *models.Execution, def *definition.Definition, a *models.StepAttempt, generation int,
	input json.RawMessage, runErr error, attempts []models.StepAttempt, mask *redact.Masker, log *slog.Logger) (Outcome, error) {
	c := classify.Classify(runErr)
	var he *classify.HTTPError
	if errors.As(runErr, &he) { // the service's own words and the status; the URL is in the trace
		c.Message = he.Reason()
	}
	c.Code = cleanText(c.Code, maxErrorCode)
	c.Message = cleanText(e.maskText(c.Message, mask), maxErrorMessage)
	trace := cleanText(e.maskText(traceOf(runErr), mask), maxTrace)
	input, err := e.sealFound(cleanJSON(input), tableAttempts, a.ID, "input", mask)
	if err != nil {
		return "", err
	}
	if attempts == nil && a.Attempt > 1 { // not read before it ran (see RunAttempt)
		if attempts, err = e.db.Attempts(ctx, ex.OrganizationID, ex.ID); err != nil {
			return "", err
		}
	}
	out, err := e.failWith(ctx, h, ex, def, a, generation, input, runErr, c, trace, attempts, log)
	if permanentStoreError(err) {
		log.ErrorContext(ctx, "the step's failure could not be stored as it was; storing a plain internal error", "err", err)
		c = classify.Result{Type: classify.Internal, Code: "STORE_ERROR",
			Message: cleanText(e.maskText("The step failed and the database refused to store its error: "+err.Error(), mask), maxErrorMessage)}
		return e.failWith(ctx, h, ex, def, a, generation, nil, runErr, c, "", attempts, log)
	}
	return out, err
}

func (e *Engine) failWith(ctx context.Context, h holder, ex *models.Execution, def *definition.Definition, a *models.StepAttempt, generation int,
	input json.RawMessage, runErr error, c classify.Result, trace string, attempts []models.StepAttempt, log *slog.Logger) (Outcome, error) {
	outcome := OutcomeRetrying
	var delay time.Duration
	var decision retry.Decision
	retryID := models.NewID()
	landed, err := e.persist(ctx, h, a, generation, func(ctx context.Context) error {
		if err := e.ensureBreaker(ctx, h.gate, string(c.Type)); err != nil {
			return err
		}
		return e.commit(ctx, func(tx *gorm.DB, now time.Time) ([]Job, error) {
			policy, err := e.PolicyFor(tx, ex, def, a.StepIndex)
			if err != nil {
				return nil, err
			}
			first := firstOfRun(ex, attempts, a)
			retriesDone := a.Attempt - first.Attempt
			elapsed := time.Duration(0)
			if first.StartedAt != nil {
				elapsed = now.Sub(*first.StartedAt)
			}
			decision = policy.Decide(c.Type, retriesDone, def.UnknownRetry(), elapsed)
			if neverRetried[c.Code] {
				decision = retry.Decision{Retry: false, Reason: "error code " + c.Code + " is never retried"}
			}
			upd := map[string]any{"input": models.JSON(input), "error_type": string(c.Type), "error_code": nullable(c.Code),
				"error_message": c.Message, "stack_trace": nullable(trace), "finished_at": now, "lease_expires_at": nil, "updated_at": now}

			errRec, created, err := e.errorRecord(tx, ex, a, c, trace, input, policy, now)
			if err != nil {
				return nil, err
			}
			released, err := e.breakerFailed(tx, ex, def, h.gate, string(c.Type), now)
			if err != nil {
				return nil, err
			}
			if created {
				if err := audit.Record(tx, audit.Entry{OrganizationID: ex.OrganizationID, Actor: audit.System, Action: "error.recorded",
					EntityType: "workflow_execution_error", EntityID: errRec.ID, At: now,
					Details: map[string]any{"executionId": ex.ID, "stepId": a.StepID, "errorType": c.Type, "errorCode": c.Code, "message": c.Message}}); err != nil {
					return nil, err
				}
			}

			if decision.Retry {
				delay = policy.Delay(retriesDone+1, e.Rand)
				if ra, ok := classify.RetryAfter(runErr); ok {
					delay = policy.WithRetryAfter(delay, ra)
				}
				next := now.Add(delay)
				upd["status"] = models.StepRetrying
				upd["next_retry_at"] = next
				if err := finishAttempt(tx, a, generation, upd); err != nil {
					return nil, err
				}
				if err := tx.Model(&models.ExecutionError{}).Where("id = ?", errRec.ID).Updates(map[string]any{
					"retry_count": retriesDone + 1, "next_retry_at": next, "last_retry_at": now, "status": models.ErrRetrying, "updated_at": now,
				}).Error; err != nil {
					return nil, err
				}
				if err := showStep(tx, ex.ID, a.StepID, now); err != nil {
					return nil, err
				}
				step := def.Steps[a.StepIndex]
				na := newAttempt(ex, step, a.StepIndex, a.Attempt+1, next)
				na.ID = retryID
				if err := tx.Create(&na).Error; err != nil {
					return nil, err
				}
				if err := audit.Record(tx, audit.Entry{OrganizationID: ex.OrganizationID, Actor: audit.System, Action: "error.retry_scheduled",
					EntityType: "workflow_execution_error", EntityID: errRec.ID, At: now,
					Details: map[string]any{"executionId": ex.ID, "stepId": a.StepID, "retry": retriesDone + 1, "maxRetries": policy.MaxRetries,
						"delayMs": delay.Milliseconds(), "nextRetryAt": next.Format(time.RFC3339Nano), "errorType": c.Type, "reason": decision.Reason}}); err != nil {
					return nil, err
				}
				if retriesDone == 0 {
					if err := e.emit(tx, stepEvent(notify.FirstFailure, ex, def, a, c, now)); err != nil {
						return nil, err
					}
				}
				return append(released, Job{AttemptID: na.ID, Generation: na.Generation, RunAt: next}), nil
			}

			var jobs []Job
			outcome, jobs, err = e.failedForGood(tx, ex, def, a, generation, upd, failure{errRec, c, policy, decision, retriesDone, h.gate}, retryID, now)
			return append(released, jobs...), err
		})
	})
	if landed { // a try committed though it seemed to fail: see what it left
		var retry *models.StepAttempt
		retry, _, err = e.landedNext(ctx, retryID, false) // a retry is never claimed by its commit
		outcome = OutcomeDLQ
		if retry != nil {
			outcome = OutcomeRetrying
			if retry.StepID != a.StepID {
				outcome = OutcomeHandled
			}
			err = e.enq.Enqueue(ctx, []Job{{AttemptID: retry.ID, Generation: retry.Generation, RunAt: retry.ScheduledAt}})
		}
	}
	if errors.Is(err, errLost) {
		return OutcomeLost, nil
	}
	if err != nil {
		return "", err
	}
	e.breakerAfter(ctx, ex, def, h.gate)
	switch outcome {
	case OutcomeRetrying:
		log.InfoContext(ctx, "step failed; retry scheduled", "error_type", c.Type, "error", c.Message, "delay", delay.String(), "reason", decision.Reason)
	case OutcomeHandled:
		log.InfoContext(ctx, "step failed; its failure was handed to its handler step", "error_type", c.Type, "error", c.Message, "reason", decision.Reason)
	default:
		log.WarnContext(ctx, "step failed; execution moved to the dead-letter queue", "error_type", c.Type, "error", c.Message, "reason", decision.Reason)
	}
	return outcome, nil
}

// errorRecord returns the open error record of the step, creating it on the first failure.
func (e *Engine) errorRecord(tx *gorm.DB, ex *models.Execution, a *models.StepAttempt, c classify.Result, trace string,
	input json.RawMessage, policy retry.Policy, now time.Time) (*models.ExecutionError, bool, error) {
	var rec models.ExecutionError
	err := tx.Where("organization_id = ? AND execution_id = ? AND step_id = ? AND status IN ?", ex.OrganizationID, ex.ID, a.StepID,
		[]string{models.ErrPending, models.ErrRetrying}).Order("created_at DESC").First(&rec).Error
	state := models.MustJSON(map[string]any{"attempt": a.Attempt, "status": a.Status, "idempotencyKey": a.IdempotencyKey,
		"startedAt": a.StartedAt, "finishedAt": now})
	if err == nil {
		return &rec, false, tx.Model(&rec).Updates(map[string]any{"error_type": string(c.Type), "error_code": nullable(c.Code),
			"error_message": c.Message, "stack_trace": nullable(trace), "input_data": models.JSON(e.redactor.JSON(input)),
			"step_state": state, "updated_at": now}).Error
	}
	if !models.IsNotFound(err) {
		return nil, false, err
	}
	rec = models.ExecutionError{
		ID: models.NewID(), OrganizationID: ex.OrganizationID, ExecutionID: ex.ID, StepID: a.StepID,
		ErrorType: string(c.Type), ErrorCode: nullable(c.Code), ErrorMessage: nonEmpty(c.Message), StackTrace: nullable(trace),
		InputData: models.JSON(e.redactor.JSON(input)), StepState: state, MaxRetries: policy.MaxRetries,
		Status: models.ErrPending, CreatedAt: now, UpdatedAt: now,
	}
	return &rec, true, tx.Create(&rec).Error
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(no message)"
	}
	return s
}

// traceOf returns what the UI shows as the stack or trace of a failure.
func traceOf(err error) string {
	var p *panicError
	if errors.As(err, &p) {
		return p.stack
	}
	var he *classify.HTTPError
	if errors.As(err, &he) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s\n→ HTTP %d", he.Method, he.URL, he.StatusCode)
		if he.RetryAfter > 0 {
			fmt.Fprintf(&b, "\nRetry-After: %s", he.RetryAfter)
		}
		if he.Body != "" {
			fmt.Fprintf(&b, "\n\n%s", he.Body)
		}
		return b.String()
	}
	var lines []string
	for e := err; e != nil; e = errors.Unwrap(e) {
		lines = append(lines, fmt.Sprintf("%T: %v", e, e))
		if len(lines) > 10 {
			break
		}
	}
	if len(lines) <= 1 {
		return ""
	}
	return strings.Join(lines, "\n")
}
