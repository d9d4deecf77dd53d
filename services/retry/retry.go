// Package retry holds retry policies: the JSON form users write ([Spec]), its
// validation, resolution of step and workflow specs into a complete [Policy],
// the delay before each retry and the retry-or-stop [Decision].
//
// The package is pure: it never reads the clock or a random source itself.
// Callers pass elapsed time, "now" and a random function, so every result is
// reproducible in tests.
package retry

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"lifeline/services/classify"
)

// BackoffType names how delays grow between retries.
type BackoffType string

// The backoff types. Exponential is the default.
const (
	Exponential BackoffType = "exponential" // InitialDelay * Multiplier^(n-1)
	Fixed       BackoffType = "fixed"       // InitialDelay
	Linear      BackoffType = "linear"      // InitialDelay * n
	Fibonacci   BackoffType = "fibonacci"   // InitialDelay * fib(n), fib = 1, 1, 2, 3, 5, …
	Custom      BackoffType = "custom"      // CustomSchedule[n-1], last entry repeated
)

// BackoffTypes returns the five backoff types, default first.
func BackoffTypes() []BackoffType {
	return []BackoffType{Exponential, Fixed, Linear, Fibonacci, Custom}
}

// Spec is the JSON form users write (camelCase keys). Every field is
// optional: nil (or an empty list) means "not set here", and [Resolve] takes
// the value from the next level down.
type Spec struct {
	MaxRetries        *int            `json:"maxRetries,omitempty"`        // 0..10, default 3
	InitialDelayMs    *int            `json:"initialDelayMs,omitempty"`    // 1000..300000, default 5000
	MaxDelayMs        *int            `json:"maxDelayMs,omitempty"`        // 5000..3600000, default 300000; >= initialDelayMs
	BackoffMultiplier *float64        `json:"backoffMultiplier,omitempty"` // 1..5, default 2
	JitterRatio       *float64        `json:"jitterRatio,omitempty"`       // 0..0.5, default 0.1
	BackoffType       *BackoffType    `json:"backoffType,omitempty"`       // default exponential
	CustomScheduleMs  []int           `json:"customScheduleMs,omitempty"`  // only with backoffType custom: 1..10 entries, each 1000..3600000
	RetryOnErrors     []classify.Type `json:"retryOnErrors,omitempty"`     // default transient, timeout, rate_limit
	NoRetryOnErrors   []classify.Type `json:"noRetryOnErrors,omitempty"`   // default permanent, validation, authorization
	MaxElapsedMs      *int            `json:"maxElapsedMs,omitempty"`      // retry time budget: 0 = none, else 1000..86400000
}

// Bound is the range [Spec.Validate] accepts for one numeric field of a Spec (for
// customScheduleMs, for each entry), with its default; forms show it as the field's limits.
// ZeroAllowed: 0 is accepted besides the range (maxElapsedMs: no budget).
type Bound struct {
	Field       string
	Min, Max    float64
	Default     float64
	Integer     bool
	ZeroAllowed bool
}

// Bounds returns the ranges Validate enforces, in the order a form shows the fields.
func Bounds() []Bound {
	return []Bound{
		{Field: "maxRetries", Min: 0, Max: 10, Default: 3, Integer: true},
		{Field: "initialDelayMs", Min: 1000, Max: 300000, Default: 5000, Integer: true},
		{Field: "backoffMultiplier", Min: 1, Max: 5, Default: 2},
		{Field: "maxDelayMs", Min: 5000, Max: 3600000, Default: 300000, Integer: true},
		{Field: "jitterRatio", Min: 0, Max: 0.5, Default: 0.1},
		{Field: "maxElapsedMs", Min: 1000, Max: 86400000, Default: 0, Integer: true, ZeroAllowed: true},
		{Field: "customScheduleMs", Min: 1000, Max: 3600000, Integer: true},
	}
}

// boundOf is field's entry of Bounds (the zero Bound for a field with none).
func boundOf(field string) Bound {
	for _, b := range Bounds() {
		if b.Field == field {
			return b
		}
	}
	return Bound{}
}

// num writes a bound as a person would: 3600000, 0.5.
func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// Validate checks s on its own and returns one message per offending JSON
// field, keyed by the field name ("maxRetries") or, for list entries, by
// name and index ("retryOnErrors[1]"). It returns nil when s is valid.
//
// maxDelayMs >= initialDelayMs is checked only when both are set: each range
// is compatible with the other's default. backoffType "custom" requires
// customScheduleMs in the same spec, and customScheduleMs requires
// backoffType "custom" in the same spec. A type may not be in both lists.
func (s Spec) Validate() map[string]string {
	errs := map[string]string{}
	intRange := func(field string, v *int) {
		if b := boundOf(field); v != nil && (float64(*v) < b.Min || float64(*v) > b.Max) {
			errs[field] = "must be between " + num(b.Min) + " and " + num(b.Max)
		}
	}
	floatRange := func(field string, v *float64) {
		if b := boundOf(field); v != nil && !(*v >= b.Min && *v <= b.Max) { // also rejects NaN
			errs[field] = "must be between " + num(b.Min) + " and " + num(b.Max)
		}
	}

	intRange("maxRetries", s.MaxRetries)
	intRange("initialDelayMs", s.InitialDelayMs)
	intRange("maxDelayMs", s.MaxDelayMs)
	if s.InitialDelayMs != nil && s.MaxDelayMs != nil && errs["maxDelayMs"] == "" && *s.MaxDelayMs < *s.InitialDelayMs {
		errs["maxDelayMs"] = fmt.Sprintf("must be at least initialDelayMs (%d)", *s.InitialDelayMs)
	}
	floatRange("backoffMultiplier", s.BackoffMultiplier)
	floatRange("jitterRatio", s.JitterRatio)
	if b := boundOf("maxElapsedMs"); s.MaxElapsedMs != nil && *s.MaxElapsedMs != 0 && (float64(*s.MaxElapsedMs) < b.Min || float64(*s.MaxElapsedMs) > b.Max) {
		errs["maxElapsedMs"] = "must be 0 (no budget) or between " + num(b.Min) + " and " + num(b.Max)
	}

	custom := s.BackoffType != nil && *s.BackoffType == Custom
	if s.BackoffType != nil && !slices.Contains(BackoffTypes(), *s.BackoffType) {
		errs["backoffType"] = "must be one of " + joinTypes(BackoffTypes())
	}
	switch {
	case custom && len(s.CustomScheduleMs) == 0:
		errs["customScheduleMs"] = "required when backoffType is custom"
	case !custom && len(s.CustomScheduleMs) > 0:
		errs["customScheduleMs"] = "only allowed when backoffType is custom"
	case len(s.CustomScheduleMs) > 10:
		errs["customScheduleMs"] = "must have between 1 and 10 entries"
	default:
		for i, ms := range s.CustomScheduleMs {
			if b := boundOf("customScheduleMs"); float64(ms) < b.Min || float64(ms) > b.Max {
				errs[fmt.Sprintf("customScheduleMs[%d]", i)] = "must be between " + num(b.Min) + " and " + num(b.Max)
			}
		}
	}

	for i, t := range s.RetryOnErrors {
		if _, ok := classify.ParseType(string(t)); !ok {
			errs[fmt.Sprintf("retryOnErrors[%d]", i)] = unknownType(t)
		}
	}
	for i, t := range s.NoRetryOnErrors {
		key := fmt.Sprintf("noRetryOnErrors[%d]", i)
		if _, ok := classify.ParseType(string(t)); !ok {
			errs[key] = unknownType(t)
		} else if slices.Contains(s.RetryOnErrors, t) {
			errs[key] = fmt.Sprintf("%q is also in retryOnErrors", t)
		}
	}

	if len(errs) == 0 {
		return nil
	}
	return errs
}

func unknownType(t classify.Type) string {
	return fmt.Sprintf("unknown error type %q (want one of %s)", t, joinTypes(classify.Types()))
}

func joinTypes[T ~string](ts []T) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// Policy is a resolved, complete policy. Build it with [Default] or
// [Resolve]; the zero Policy never retries.
type Policy struct {
	MaxRetries     int
	InitialDelay   time.Duration
	MaxDelay       time.Duration
	Multiplier     float64
	JitterRatio    float64
	Backoff        BackoffType
	CustomSchedule []time.Duration // used only when Backoff is Custom
	RetryOn        []classify.Type
	NoRetryOn      []classify.Type
	MaxElapsed     time.Duration // 0 = no retry time budget
}

// Default returns the default policy: 3 retries, exponential backoff from 5s
// doubling up to 5m with 10% jitter, retrying transient, timeout and
// rate_limit errors and never permanent, validation or authorization errors.
func Default() Policy {
	return Policy{
		MaxRetries:   3,
		InitialDelay: 5 * time.Second,
		MaxDelay:     5 * time.Minute,
		Multiplier:   2,
		JitterRatio:  0.1,
		Backoff:      Exponential,
		RetryOn:      []classify.Type{classify.Transient, classify.Timeout, classify.RateLimit},
		NoRetryOn:    []classify.Type{classify.Permanent, classify.Validation, classify.Authorization},
	}
}

// ResolveLevels builds the effective policy: specs apply over [Default] in order, each
// field set in a later spec winning over the same field in earlier ones; nil specs are
// skipped. Lifeline resolves organization default, workflow, step. Specs are expected to
// have passed [Spec.Validate]; values are used as given.
//
// The two error lists are resolved field by field too, with one addition: a type a level
// lists explicitly is removed from the other list inherited from the levels below. So a
// step that sets retryOnErrors to include "authorization" does retry authorization errors,
// although the default noRetryOnErrors lists it. The resolved lists never overlap.
func ResolveLevels(specs ...*Spec) Policy {
	p := Default()
	for _, s := range specs {
		if s != nil {
			p.apply(s)
		}
	}
	return p
}

func (p *Policy) apply(s *Spec) {
	if s.MaxRetries != nil {
		p.MaxRetries = *s.MaxRetries
	}
	if s.InitialDelayMs != nil {
		p.InitialDelay = ms(*s.InitialDelayMs)
	}
	if s.MaxDelayMs != nil {
		p.MaxDelay = ms(*s.MaxDelayMs)
	}
	if s.BackoffMultiplier != nil {
		p.Multiplier = *s.BackoffMultiplier
	}
	if s.JitterRatio != nil {
		p.JitterRatio = *s.JitterRatio
	}
	if s.BackoffType != nil {
		p.Backoff = *s.BackoffType
	}
	if len(s.CustomScheduleMs) > 0 {
		p.CustomSchedule = make([]time.Duration, len(s.CustomScheduleMs))
		for i, v := range s.CustomScheduleMs {
			p.CustomSchedule[i] = ms(v)
		}
	}
	if s.MaxElapsedMs != nil {
		p.MaxElapsed = ms(*s.MaxElapsedMs)
	}
	if len(s.RetryOnErrors) > 0 {
		p.RetryOn = slices.Clone(s.RetryOnErrors)
		p.NoRetryOn = without(p.NoRetryOn, s.RetryOnErrors)
	}
	if len(s.NoRetryOnErrors) > 0 {
		p.NoRetryOn = slices.Clone(s.NoRetryOnErrors)
		p.RetryOn = without(p.RetryOn, s.NoRetryOnErrors)
	}
}

// without returns a new slice of the entries of ts not in drop.
func without(ts, drop []classify.Type) []classify.Type {
	out := []classify.Type{}
	for _, t := range ts {
		if !slices.Contains(drop, t) {
			out = append(out, t)
		}
	}
	return out
}

func ms(v int) time.Duration { return time.Duration(v) * time.Millisecond }

func ptr[T any](v T) *T { return &v }

// Spec returns p as a spec with every field set, for showing the effective
// policy as JSON. customScheduleMs is set only when Backoff is Custom. For a
// policy from [ResolveLevels] of valid specs, ResolveLevels(&spec) gives p back.
func (p Policy) Spec() Spec {
	s := Spec{
		MaxRetries:        ptr(p.MaxRetries),
		InitialDelayMs:    ptr(int(p.InitialDelay.Milliseconds())),
		MaxDelayMs:        ptr(int(p.MaxDelay.Milliseconds())),
		BackoffMultiplier: ptr(p.Multiplier),
		JitterRatio:       ptr(p.JitterRatio),
		BackoffType:       ptr(p.Backoff),
		RetryOnErrors:     slices.Clone(p.RetryOn),
		NoRetryOnErrors:   slices.Clone(p.NoRetryOn),
		MaxElapsedMs:      ptr(int(p.MaxElapsed.Milliseconds())),
	}
	if p.Backoff == Custom {
		for _, d := range p.CustomSchedule {
			s.CustomScheduleMs = append(s.CustomScheduleMs, int(d.Milliseconds()))
		}
	}
	return s
}

// Delay returns the wait before retry number n (n = 1 is the first retry;
// n < 1 counts as 1). The base delay follows p.Backoff (see the BackoffType
// constants; Custom with an empty schedule falls back to InitialDelay and an
// unknown type to Exponential), is capped at MaxDelay, then jittered to
// d*(1-J) + rnd()*2*J*d, uniform in [d*(1-J), d*(1+J)) for rnd() in [0, 1),
// and capped at MaxDelay again. rnd() = 0.5 means no jitter; a nil rnd is
// treated as that.
func (p Policy) Delay(n int, rnd func() float64) time.Duration {
	n = max(n, 1)
	limit := float64(p.MaxDelay)
	base := float64(p.InitialDelay)
	var d float64
	switch p.Backoff {
	case Fixed:
		d = base
	case Linear:
		d = base * float64(n)
	case Fibonacci:
		a, b := 1.0, 1.0 // fib(1), fib(2)
		for i := 2; i < n && base*b < limit; i++ {
			a, b = b, a+b
		}
		d = base * b
	case Custom:
		d = base
		if k := len(p.CustomSchedule); k > 0 {
			d = float64(p.CustomSchedule[min(n, k)-1])
		}
	default:
		d = base * math.Pow(p.Multiplier, float64(n-1))
	}
	d = math.Min(d, limit) // also tames +Inf before conversion

	r := 0.5
	if rnd != nil {
		r = rnd()
	}
	d *= 1 - p.JitterRatio + 2*p.JitterRatio*r
	return time.Duration(math.Round(math.Min(d, limit)))
}

// WithRetryAfter returns max(computed, retryAfter) capped at MaxDelay: a
// server's Retry-After can lengthen the wait but never beyond the policy's
// limit. A retryAfter <= 0 leaves computed (capped) as is.
func (p Policy) WithRetryAfter(computed, retryAfter time.Duration) time.Duration {
	return min(max(computed, retryAfter), p.MaxDelay)
}

// Decision is the outcome of [Policy.Decide]. Reason is a short English
// sentence for logs and the UI.
type Decision struct {
	Retry  bool
	Reason string
}

// Decide says whether to retry a failure of type t. retriesDone is the number
// of retries already performed (0 after the first attempt fails);
// unknownRetry is the workflow's setting for [classify.Unknown] errors;
// elapsed is the time since the first attempt started. The checks, in order:
// t in NoRetryOn → stop; retriesDone >= MaxRetries → stop; MaxElapsed > 0 and
// elapsed >= MaxElapsed → stop; t in RetryOn → retry; t is unknown →
// unknownRetry; otherwise stop.
func (p Policy) Decide(t classify.Type, retriesDone int, unknownRetry bool, elapsed time.Duration) Decision {
	switch {
	case slices.Contains(p.NoRetryOn, t):
		return Decision{false, fmt.Sprintf("error type %s is not retried", t)}
	case retriesDone >= p.MaxRetries:
		return Decision{false, fmt.Sprintf("retries exhausted (%d of %d)", retriesDone, p.MaxRetries)}
	case p.MaxElapsed > 0 && elapsed >= p.MaxElapsed:
		return Decision{false, "retry time budget exhausted"}
	case slices.Contains(p.RetryOn, t):
		return Decision{true, fmt.Sprintf("retryable error (%s)", t)}
	case t == classify.Unknown && unknownRetry:
		return Decision{true, "unknown error type, retried by workflow setting"}
	}
	return Decision{false, fmt.Sprintf("error type %s is not retried", t)}
}

// ParseRetryAfter parses a Retry-After header value: delay-seconds (a
// non-negative integer) or an HTTP date, which is taken relative to now (a
// date in the past gives 0). It returns false for an empty or malformed
// value.
func ParseRetryAfter(h string, now time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if h[0] >= '0' && h[0] <= '9' {
		secs, err := strconv.ParseUint(h, 10, 63)
		if err != nil {
			return 0, false
		}
		return time.Duration(min(secs, math.MaxInt64/uint64(time.Second))) * time.Second, true
	}
	at, err := http.ParseTime(h)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}
