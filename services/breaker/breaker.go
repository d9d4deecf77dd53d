// Package breaker decides what a circuit breaker lets through. It is pure: the caller
// passes the breaker's stored state and the time (the database clock), and stores the
// transition the answer names with a compare-and-set, so every worker and replica shares one
// breaker through the database.
//
// A breaker is closed (attempts run; counted failures in a sliding Window are tallied), open
// (attempts wait, without running, until ResetTimeout after it opened) or half-open (at most
// HalfOpenRequests trial attempts run at once; the first success closes it, a failure opens it
// again for another ResetTimeout). An admin may force it open: it then stays open until reset.
//
// Which trials are running is not in State: a half-open breaker sends an attempt to take one
// of the breaker's trial slots, which the caller holds in the database for as long as the
// attempt runs (its end or its lease frees the slot, never the time since it half-opened);
// an attempt that finds every slot taken asks again after NoFreeSlot.
package breaker

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// States (seed 000's circuit_breaker_state.state).
const (
	Closed   = "closed"
	Open     = "open"
	HalfOpen = "half_open"
)

// States lists the states.
var States = []string{Closed, Open, HalfOpen}

// Scopes: a breaker per (workflow, step), or per target host shared by every workflow of
// the organization that calls it.
const (
	ScopeStep = "step"
	ScopeHost = "host"
)

// Window is the sliding window over which failures are counted ("5 failures in 1 minute").
const Window = 60 * time.Second

// trialWait is how long an attempt that finds every trial slot taken waits before it asks again.
const trialWait = 2 * time.Second

// errorTypes are seed 000's nine error types.
var errorTypes = []string{"transient", "permanent", "timeout", "validation", "authorization", "rate_limit", "external_service", "internal", "unknown"}

// Spec is a breaker's configuration as written in a definition (a step's or the workflow's
// settings); nil fields take the level below.
type Spec struct {
	Enabled          *bool    `json:"enabled,omitempty"`
	FailureThreshold *int     `json:"failureThreshold,omitempty"`
	ResetTimeoutMs   *int     `json:"resetTimeoutMs,omitempty"`
	HalfOpenRequests *int     `json:"halfOpenRequests,omitempty"`
	CountErrors      []string `json:"countErrors,omitempty"`
	Scope            string   `json:"scope,omitempty"`
	WaitBudgetMs     *int     `json:"waitBudgetMs,omitempty"`
}

// Validate returns field messages (seed 000's ranges), or an empty map.
func (s Spec) Validate() map[string]string {
	errs := map[string]string{}
	between := func(field string, v *int, lo, hi int) {
		if v != nil && (*v < lo || *v > hi) {
			errs[field] = fmt.Sprintf("must be between %d and %d", lo, hi)
		}
	}
	between("failureThreshold", s.FailureThreshold, 1, 100)
	between("resetTimeoutMs", s.ResetTimeoutMs, 10_000, 600_000)
	between("halfOpenRequests", s.HalfOpenRequests, 1, 10)
	between("waitBudgetMs", s.WaitBudgetMs, 60_000, 7*24*3_600_000)
	for i, t := range s.CountErrors {
		if !slices.Contains(errorTypes, t) {
			errs[fmt.Sprintf("countErrors[%d]", i)] = "must be one of " + strings.Join(errorTypes, ", ")
		}
	}
	if s.Scope != "" && s.Scope != ScopeStep && s.Scope != ScopeHost {
		errs["scope"] = `must be "step" or "host"`
	}
	return errs
}

// Config is a breaker's effective configuration.
type Config struct {
	Enabled          bool
	FailureThreshold int
	ResetTimeout     time.Duration
	HalfOpenRequests int
	CountErrors      []string
	Scope            string
	// WaitBudget bounds how long a step waits on an open breaker; past it the execution goes
	// to the DLQ.
	WaitBudget time.Duration
}

// defaultCountErrors is shared by every Default (read only): Default runs once per step.
var defaultCountErrors = []string{"transient", "timeout", "rate_limit", "external_service", "unknown"}

// Default is the configuration without a spec: seed 000's defaults; the dependency's health
// is judged by transient, timeout, rate-limit, external-service and unknown errors (a
// validation error says nothing about it).
func Default() Config {
	return Config{Enabled: true, FailureThreshold: 5, ResetTimeout: time.Minute, HalfOpenRequests: 3,
		CountErrors: defaultCountErrors, Scope: ScopeStep,
		WaitBudget: 24 * time.Hour}
}

// Resolve applies specs in order (the workflow's, then the step's) over Default, field by field.
func Resolve(specs ...*Spec) Config {
	c := Default()
	for _, s := range specs {
		if s == nil {
			continue
		}
		if s.Enabled != nil {
			c.Enabled = *s.Enabled
		}
		if s.FailureThreshold != nil {
			c.FailureThreshold = *s.FailureThreshold
		}
		if s.ResetTimeoutMs != nil {
			c.ResetTimeout = time.Duration(*s.ResetTimeoutMs) * time.Millisecond
		}
		if s.HalfOpenRequests != nil {
			c.HalfOpenRequests = *s.HalfOpenRequests
		}
		if s.CountErrors != nil {
			c.CountErrors = s.CountErrors
		}
		if s.Scope != "" {
			c.Scope = s.Scope
		}
		if s.WaitBudgetMs != nil {
			c.WaitBudget = time.Duration(*s.WaitBudgetMs) * time.Millisecond
		}
	}
	return c
}

// Counts reports whether a failure of this error type counts against the breaker.
func (c Config) Counts(errorType string) bool {
	return c.Enabled && slices.Contains(c.CountErrors, errorType)
}

// State is what is stored of a breaker.
type State struct {
	State            string
	OpenedAt         *time.Time
	HalfOpenedAt     *time.Time
	Forced           bool
	ResetTimeout     time.Duration
	HalfOpenRequests int
}

// Verdict is what a breaker lets an attempt do.
type Verdict struct {
	// Run: the attempt runs. Trial: it runs as one of the half-open trials (its result closes
	// or reopens the breaker), once it holds a free trial slot (else NoFreeSlot). ToHalfOpen:
	// the breaker must first move from open to half-open (this attempt then takes a slot).
	Run, Trial, ToHalfOpen bool
	// Until is when a refused attempt asks again.
	Until time.Time
}

// Admit decides for an attempt about to run at now.
func Admit(s State, now time.Time) Verdict {
	switch s.State {
	case Open:
		reopen := now.Add(s.ResetTimeout)
		if s.OpenedAt != nil {
			reopen = s.OpenedAt.Add(s.ResetTimeout)
		}
		if s.Forced { // stays open until an admin resets it; the attempt asks again later
			return Verdict{Until: now.Add(s.ResetTimeout)}
		}
		if now.Before(reopen) {
			return Verdict{Until: reopen}
		}
		return Verdict{Run: true, Trial: true, ToHalfOpen: true}
	case HalfOpen:
		return Verdict{Run: true, Trial: true}
	}
	return Verdict{Run: true}
}

// NoFreeSlot is the verdict for an attempt that would be a trial of a half-open breaker
// whose every trial slot is held by a trial still running: it asks again a little later.
func NoFreeSlot(now time.Time) Verdict {
	return Verdict{Until: now.Add(trialWait)}
}

// Slots is how many trial slots a half-open breaker configured for halfOpenRequests has.
func Slots(halfOpenRequests int) int { return max(halfOpenRequests, 1) }

// Trips reports whether failures counted in the window open a closed breaker.
func Trips(c Config, failuresInWindow int) bool {
	return c.Enabled && failuresInWindow >= c.FailureThreshold
}
