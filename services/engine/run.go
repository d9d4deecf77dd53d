package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"lifeline/models"
	"lifeline/services/classify"
	"lifeline/services/definition"
	"lifeline/services/redact"
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
	OutcomeFallback  Outcome = "fallback"  // an open circuit breaker refused the attempt; the step's fallback step runs instead
)

// commitTimeout bounds the commits that record an attempt's result. They run on a context
// that shutdown does not cancel: a step that has finished is always recorded.
const commitTimeout = 30 * time.Second

// RunAttempt does what Engine.RunAttempt says.
func (e *attempts) RunAttempt(ctx context.Context, attemptID string, generation int) (Outcome, error) {
	// The attempt and its execution (of the attempt's organization) in one query, without
	// GORM's reflection: this runs for every job.
	var a models.StepAttempt
	var ex models.Execution
	if err := e.db.AttemptAndExecution(ctx, attemptID, &a, &ex); err != nil {
		if models.IsNotFound(err) {
			return OutcomeSkipped, nil
		}
		return "", err
	}
	if a.Status != models.StepPending || a.Generation != generation {
		return OutcomeSkipped, nil
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
	claimed, now, err := e.store.ClaimAttempt(ctx, &ex, &a, generation, e.leaseOf(step))
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
	var ce chainEnv // what templates see: built at the first step, extended after each
	for {
		r := &attemptRun{ex: &ex, def: def, a: &a, generation: generation, attempts: attempts}
		octx, end := e.startAttempt(ctx, r)
		outcome, next, err := e.runClaimed(octx, r, &ce, chain)
		e.endAttempt(r, end, outcome, err)
		if next == nil || err != nil {
			return outcome, err
		}
		attempts = append(attempts, a) // a is now the SUCCEEDED attempt, with its stored output
		if ce.env != nil {
			if err := e.addOutput(ce.env, a); err != nil {
				ce.drop() // built again from attempts, where the error is the step's
			} else if err := e.standIn(ce.env, a, attempts, -1); err != nil {
				ce.drop()
			}
		}
		a, generation = *next, next.Generation
	}
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

// attemptRun is an attempt this worker holds (RUNNING at generation) and what recording it
// needs: every step of the attempt path takes it, instead of a dozen parameters.
type attemptRun struct {
	ex         *models.Execution
	def        *definition.Definition
	a          *models.StepAttempt
	generation int
	// attempts are the execution's attempts read before the step ran (nil: not read).
	attempts []models.StepAttempt
	// h is how long the worker may keep trying to record the attempt, and the breaker it passed.
	h holder
	// input is what the step was sent (its rendered configuration, or a handler's mapped input).
	input json.RawMessage
	// mask hides every secret the attempt could see.
	mask *redact.Masker
	// log says what happened to the attempt (nil: the caller says it for many at once).
	log *slog.Logger
	// took is how long the step's run (its request) took; 0 when it did not run.
	took time.Duration
	// errorType is the recorded failure's type (empty: none was), for the Observer.
	errorType string
}

// durationUs is what an attempt's duration_us records of took: microseconds, at least 1
// for a step that ran (a step never takes no time), nil for one that did not.
func durationUs(took time.Duration) *int64 {
	if took <= 0 {
		return nil
	}
	us := max(took.Microseconds(), 1)
	return &us
}

// stepFailure is a step's failure as failWith records it: the error, its classification,
// trace and the input it was sent, made storable.
type stepFailure struct {
	err   error
	c     classify.Result
	trace string
	input json.RawMessage
}

// runClaimed runs a claimed (RUNNING at generation) attempt and records its result. When the
// step succeeded and its successor was claimed in the same commit, it returns that attempt:
// the caller runs it next. On return a holds what was stored (status, output).
func (e *attempts) runClaimed(ctx context.Context, r *attemptRun, ce *chainEnv, chain *chainBudget) (Outcome, *models.StepAttempt, error) {
	ex, def, a, attempts := r.ex, r.def, r.a, r.attempts
	step := def.Steps[a.StepIndex]
	timeout := time.Duration(step.Timeout()) * time.Millisecond
	r.h = holder{stop: ctx, deadline: leaseDeadline(a)}
	h := &r.h
	if chain.steps > 0 { // claimed by its predecessor's commit: not shown yet
		// The timer's function may still run after this returns, when the caller reuses a
		// for the next step: it gets copies.
		exID, attemptID, stepID := ex.ID, a.ID, a.StepID
		shown := time.AfterFunc(showAfter, func() { e.showRunning(exID, attemptID, stepID) })
		defer shown.Stop()
	}
	r.log = lazyWith(e.log, "execution_id", ex.ID, "correlation_id", ex.CorrelationID, "step_id", a.StepID, "attempt", a.Attempt)
	log := r.log
	var input json.RawMessage
	var mask *redact.Masker
	out, runErr := func() (any, error) {
		// A held value in the input: nothing is rendered, admitted or sent (held.go).
		if hv, err := e.heldIn(ctx, ex); err != nil {
			return nil, &storeError{err}
		} else if hv != nil {
			return nil, quarantined(hv)
		}
		t, ok := e.steps.Get(step.Type)
		if !ok && step.Type != steps.AskType { // an ask is never run (asks_run.go)
			return nil, classify.New(classify.Permanent, "STEP_TYPE", fmt.Sprintf("step type %q is not registered in this process", step.Type))
		}
		if err := e.periodGate(ctx, ex, step); err != nil {
			return nil, err
		}
		if ce.env == nil {
			env, err := e.env(ctx, ex, attempts, a.StepIndex, def.UsesCredentials())
			if err != nil {
				return nil, classify.New(classify.Internal, "DECRYPT", err.Error())
			}
			ce.env = env
		}
		env := ce.env
		// Every secret the attempt can see (the execution's input, earlier outputs, the
		// definition's literal secrets, what its templates produce under secret-looking
		// keys) is sealed or masked wherever it appears in what is stored.
		var failedStep any
		var mapped json.RawMessage
		if a.HandlesAttemptID != nil { // a handler: it also reads the failure it was handed
			var err error
			if env, mapped, err = e.failures.handlerEnv(ctx, r, env); err != nil {
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
		// (A handler's env shares the chain's input and steps: their secrets are the chain's.)
		mask = e.masker(nil, ce.secrets(e.redactor, def), failedStep, cfg, credentialsOf(env))
		input, _ = json.Marshal(cfg)
		if mapped != nil {
			input = mapped
		}
		cfgMap, _ := cfg.(map[string]any)
		if step.Type == steps.AskType { // it waits for a person instead of running
			return e.ask(ctx, r, cfgMap, env)
		}
		if h.gate = breakerOf(ex, def, a.StepIndex, cfgMap); h.gate != nil {
			if err := e.circuits.admit(ctx, ex, h.gate, a); err != nil {
				var w *waitOnBreaker
				if !errors.As(err, &w) {
					return nil, &storeError{err}
				}
				return nil, err
			}
		}
		stepCtx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		// The attempt's duration is its request's: measured here by the monotonic clock (not a
		// schedule; the database's clock times the claim and the record, which add to it).
		began := time.Now()
		defer func() { r.took = time.Since(began) }()
		return safeRun(stepCtx, t, steps.Input{ExecutionID: ex.ID, StepID: a.StepID, Attempt: a.Attempt, IdempotencyKey: a.IdempotencyKey, Config: cfgMap})
	}()
	r.input, r.mask = input, mask
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
		outcome, err := e.release(rctx, r, delay)
		return outcome, nil, err
	}
	var park *askPark
	if errors.As(runErr, &park) {
		outcome, err := e.park(rctx, r, park)
		return outcome, nil, err
	}
	var w *waitOnBreaker
	if errors.As(runErr, &w) && w.open {
		if fi := def.FallbackOf(a.StepIndex); fi >= 0 { // its fallback runs instead of waiting
			outcome, err := e.fallBack(rctx, r, w, fi)
			return outcome, nil, err
		}
	}
	if errors.As(runErr, &w) {
		budget := def.Breaker(a.StepIndex).WaitBudget
		if w.until.Sub(a.CreatedAt) <= budget {
			outcome, err := e.waitOn(rctx, r, w)
			return outcome, nil, err
		}
		// Waited too long: the step fails for good, without counting against the breaker;
		// its dead letter records the breaker's state.
		h.gate.refused = true
		runErr = classify.New(classify.ExternalService, CodeCircuitOpen, fmt.Sprintf(
			"The circuit breaker stayed open longer than the step may wait (%s); the step was not run.", budget))
	}
	if runErr == nil {
		return e.succeed(rctx, r, out, chain.more(ctx))
	}
	outcome, err := e.fail(rctx, r, runErr)
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
var neverRetried = map[string]bool{"URL_SCHEME": true, "HEADER": true, "DESTINATION_DENIED": true, "STEP_TYPE": true, CodeCircuitOpen: true, CodeQuarantined: true,
	"OWN_SERVER": true, "PRIVILEGED_ROLE": true,
	// A closed period (the office's, or the service's lock date) stays closed until someone
	// reopens it or moves the input to an open one: a retry would only post into it later.
	classify.CodePeriodClosed: true,
	// A person's answer (a rejection, an abort), a request nobody answered in time, and a
	// cancel are decisions, not faults: a retry would only ask again (the DLQ's retry does).
	CodeRejected: true, CodeAborted: true, CodeNoAnswer: true, CodeCancelled: true, CodeNoDueDate: true}

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
