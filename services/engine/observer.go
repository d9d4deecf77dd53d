package engine

import (
	"context"
	"time"
)

// Observer is told what the engine did, for metrics and traces (Config.Observer). The engine
// does not know what it does with it: it never imports a metrics or tracing library, and
// without an Observer it calls one that does nothing.
//
// Its methods are called by this process once per event it made, after the change they
// report committed (an idempotent repeat, a lost claim or a rolled-back transaction is not
// reported). They must return quickly and cannot fail. What they are given is bounded by
// configuration (workflow and step ids, error types, replay modes): never an execution's
// input or output.
type Observer interface {
	// Attempt is called when a claimed attempt's step is about to run. The context it returns
	// is the one the step runs with (a trace span may hang from it); end is called once with
	// what became of the attempt.
	Attempt(ctx context.Context, a AttemptInfo) (context.Context, func(AttemptEnd))
	// DeadLettered is called when an execution's move to the dead-letter queue committed,
	// with the workflow's id, the step that failed and its error type.
	DeadLettered(workflowID, stepID, errorType string)
	// Replayed is called when a replay of a dead letter committed (not for an idempotent
	// repeat of an earlier request), with the workflow's id and the mode (ReplayModes).
	Replayed(workflowID, mode string)
}

// AttemptInfo is an attempt about to run: what a trace or a metric may say of it.
type AttemptInfo struct {
	WorkflowID string
	StepID     string
	// StepType is the step's type ("http", "delay", …): a small set, for labels.
	StepType string
	// Attempt is the attempt's number (1 for the first).
	Attempt       int
	CorrelationID string
}

// AttemptEnd is what became of an attempt.
type AttemptEnd struct {
	// Outcome is RunAttempt's for this attempt: OutcomeSucceeded, OutcomeRetrying,
	// OutcomeDLQ and OutcomeHandled are attempts whose result was recorded; others
	// (released, lost, waiting, fallback) ran no step or kept no result.
	Outcome Outcome
	// ErrorType is the failure's classification (empty when it succeeded).
	ErrorType string
	// Took is how long the step ran (0 when it did not).
	Took time.Duration
	// Err is the error RunAttempt returns (a database failure recording the attempt).
	Err error
}

// Recorded reports whether the attempt ran and its result was recorded: what
// workflow_step_attempts_total counts.
func (a AttemptEnd) Recorded() bool {
	switch a.Outcome {
	case OutcomeSucceeded, OutcomeRetrying, OutcomeDLQ, OutcomeHandled:
		return a.Err == nil
	}
	return false
}

// Observers returns an Observer that tells each of obs in turn (nil ones are left out).
func Observers(obs ...Observer) Observer {
	var t tee
	for _, o := range obs {
		if o != nil {
			t = append(t, o)
		}
	}
	switch len(t) {
	case 0:
		return nil
	case 1:
		return t[0]
	}
	return t
}

type tee []Observer

func (t tee) Attempt(ctx context.Context, a AttemptInfo) (context.Context, func(AttemptEnd)) {
	ends := make([]func(AttemptEnd), len(t))
	for i, o := range t {
		ctx, ends[i] = o.Attempt(ctx, a)
	}
	return ctx, func(e AttemptEnd) {
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i](e)
		}
	}
}

func (t tee) DeadLettered(workflowID, stepID, errorType string) {
	for _, o := range t {
		o.DeadLettered(workflowID, stepID, errorType)
	}
}

func (t tee) Replayed(workflowID, mode string) {
	for _, o := range t {
		o.Replayed(workflowID, mode)
	}
}

// unobserved is the Observer of an engine without one: it does nothing and allocates nothing.
type unobserved struct{}

func (unobserved) Attempt(ctx context.Context, _ AttemptInfo) (context.Context, func(AttemptEnd)) {
	return ctx, noEnd
}
func (unobserved) DeadLettered(string, string, string) {}
func (unobserved) Replayed(string, string)             {}

func noEnd(AttemptEnd) {}

// startAttempt tells the observer that the claimed attempt r is about to run; the context
// it returns is the step's.
func (e *attempts) startAttempt(ctx context.Context, r *attemptRun) (context.Context, func(AttemptEnd)) {
	return e.observer.Attempt(ctx, AttemptInfo{WorkflowID: r.ex.WorkflowID, StepID: r.a.StepID, StepType: r.def.Steps[r.a.StepIndex].Type,
		Attempt: r.a.Attempt, CorrelationID: r.ex.CorrelationID})
}

// endAttempt tells what became of r (end, from startAttempt), and a move to the DLQ.
func (e *attempts) endAttempt(r *attemptRun, end func(AttemptEnd), outcome Outcome, err error) {
	end(AttemptEnd{Outcome: outcome, ErrorType: r.errorType, Took: r.took, Err: err})
	if outcome == OutcomeDLQ && err == nil {
		e.observer.DeadLettered(r.ex.WorkflowID, r.a.StepID, r.errorType)
	}
}
