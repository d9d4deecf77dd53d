package definition

import "fmt"

// Fallbacks (issue 22, seed 001's "transitioning to fallback steps"). A step may name
// fallbackStepId: a handler step ("handler": true) that runs instead of the step while the
// step's circuit breaker is open, rather than the attempt waiting for the breaker. The step's
// attempt ends FAILED without a request (error code circuit_open_fallback), and the
// fallback's first attempt is created in the same commit, naming it (as an on-failure
// handler's names the failed attempt: its templates read error and failedStep alike). The
// fallback runs like any step (its own retry policy, breaker and idempotency key); when it
// fails for good the execution goes to the DLQ.
//
// When the fallback succeeds it stands in for the step: the execution goes on at the step
// after the one it replaced (never at the fallback's next, which is for on-failure
// handling), and ends SUCCEEDED after the last step. Later steps read the fallback's output
// as the replaced step's, steps.<step>.output (with steps.<step>.fallback naming the
// fallback), so their templates need no change; it is also steps.<fallback>.output to the
// steps after the fallback's own position, as for any handler. While the breaker is
// half-open or closed the step itself runs as usual.

// FallbackOf returns the index of the fallback step of step i, or -1 when it has none (or
// the definition names a step that is not a handler: Validate refuses that at save).
func (d *Definition) FallbackOf(i int) int {
	if i < 0 || i >= len(d.Steps) || d.Steps[i].FallbackStepID == "" || d.Steps[i].Handler {
		return -1
	}
	f := d.Index(d.Steps[i].FallbackStepID)
	if f < 0 || f == i || !d.Steps[f].Handler {
		return -1
	}
	return f
}

// validateFallbacks checks every fallbackStepId: it names an existing handler step other
// than the step itself, which names no fallback of its own (no chains); the step is not a
// handler, and its circuit breaker is enabled (the workflow's and the step's settings over
// the default, which is on): a fallback runs only while that breaker is open.
func (d *Definition) validateFallbacks(errs map[string]string) {
	for i, s := range d.Steps {
		if s.FallbackStepID == "" {
			continue
		}
		p := fmt.Sprintf("steps[%d].fallbackStepId", i)
		f := d.Index(s.FallbackStepID)
		switch {
		case s.Handler:
			errs[p] = "a handler step cannot have a fallback (a fallback is itself a handler step)"
		case f < 0:
			errs[p] = fmt.Sprintf("names unknown step %q", s.FallbackStepID)
		case f == i:
			errs[p] = "cannot name the step itself"
		case !d.Steps[f].Handler:
			errs[p] = fmt.Sprintf(`names step %q, which is not marked "handler": true`, s.FallbackStepID)
		case d.Steps[f].FallbackStepID != "":
			errs[p] = fmt.Sprintf("names step %q, which has a fallback of its own; fallbacks do not chain", s.FallbackStepID)
		case !d.Breaker(i).Enabled:
			errs[p] = "needs the step's circuit breaker, which is disabled (circuitBreaker.enabled: false): a fallback runs only while the breaker is open"
		}
	}
}
