package retry_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"syscall"
	"testing"
	"time"

	"lifeline/services/classify"
	"lifeline/services/retry"
)

func ptr[T any](v T) *T { return &v }

func fixed(v float64) func() float64 { return func() float64 { return v } }

// almostOne is the largest float64 below 1, the top of rnd's range.
var almostOne = math.Nextafter(1, 0)

func TestDelay(t *testing.T) {
	t.Parallel()
	noJitter := func(p retry.Policy) retry.Policy { p.JitterRatio = 0; return p }
	with := func(f func(*retry.Policy)) retry.Policy { p := retry.Default(); f(&p); return p }
	sec := time.Second
	tests := []struct {
		name string
		p    retry.Policy
		rnd  func() float64
		want []time.Duration // for n = 1, 2, …
	}{
		{"defaults, jitter 0", noJitter(retry.Default()), fixed(0), []time.Duration{5 * sec, 10 * sec, 20 * sec}},
		{"defaults, rnd 0.5", retry.Default(), fixed(0.5), []time.Duration{5 * sec, 10 * sec, 20 * sec}},
		{"defaults, nil rnd", retry.Default(), nil, []time.Duration{5 * sec, 10 * sec, 20 * sec}},
		{"defaults, rnd 0 is -10%", retry.Default(), fixed(0), []time.Duration{4500 * time.Millisecond, 9 * sec, 18 * sec}},
		{"defaults, rnd near 1 is +10%", retry.Default(), fixed(almostOne), []time.Duration{5500 * time.Millisecond, 11 * sec, 22 * sec}},
		{"exponential capped", with(func(p *retry.Policy) { p.MaxDelay = 15 * sec }), nil, []time.Duration{5 * sec, 10 * sec, 15 * sec, 15 * sec}},
		{"exponential, multiplier 3", with(func(p *retry.Policy) { p.Multiplier = 3; p.InitialDelay = sec }), nil, []time.Duration{sec, 3 * sec, 9 * sec, 27 * sec}},
		{"seed: 1000ms x2", with(func(p *retry.Policy) { p.InitialDelay = sec; p.MaxDelay = time.Minute }), nil, []time.Duration{sec, 2 * sec, 4 * sec}},
		{"fixed", with(func(p *retry.Policy) { p.Backoff = retry.Fixed }), nil, []time.Duration{5 * sec, 5 * sec, 5 * sec}},
		{"linear", with(func(p *retry.Policy) { p.Backoff = retry.Linear }), nil, []time.Duration{5 * sec, 10 * sec, 15 * sec, 20 * sec}},
		{"fibonacci", with(func(p *retry.Policy) { p.Backoff = retry.Fibonacci; p.InitialDelay = sec }), nil,
			[]time.Duration{sec, sec, 2 * sec, 3 * sec, 5 * sec, 8 * sec, 13 * sec}},
		{"fibonacci capped", with(func(p *retry.Policy) { p.Backoff = retry.Fibonacci; p.MaxDelay = 12 * sec }), nil,
			[]time.Duration{5 * sec, 5 * sec, 10 * sec, 12 * sec, 12 * sec}},
		{"custom, last repeated", with(func(p *retry.Policy) {
			p.Backoff = retry.Custom
			p.CustomSchedule = []time.Duration{sec, 30 * sec, 2 * time.Minute}
		}), nil, []time.Duration{sec, 30 * sec, 2 * time.Minute, 2 * time.Minute, 2 * time.Minute}},
		{"custom capped", with(func(p *retry.Policy) {
			p.Backoff = retry.Custom
			p.CustomSchedule = []time.Duration{sec, time.Hour}
		}), nil, []time.Duration{sec, 5 * time.Minute}},
		{"custom, empty schedule falls back to initial", with(func(p *retry.Policy) { p.Backoff = retry.Custom }), nil, []time.Duration{5 * sec, 5 * sec}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for i, want := range tt.want {
				if got := tt.p.Delay(i+1, tt.rnd); got != want {
					t.Errorf("Delay(%d) = %v, want %v", i+1, got, want)
				}
			}
		})
	}
	if got := retry.Default().Delay(0, nil); got != 5*time.Second {
		t.Errorf("Delay(0) = %v, want 5s", got)
	}
}

func TestDelayJitterNeverAboveMax(t *testing.T) {
	t.Parallel()
	p := retry.Default()
	p.JitterRatio = 0.5
	for n := 1; n <= 40; n++ { // 40 also exercises huge exponents
		for _, r := range []float64{0, 0.25, 0.5, 0.75, almostOne} {
			d := p.Delay(n, fixed(r))
			base := min(5*time.Second*time.Duration(1<<min(n-1, 20)), p.MaxDelay)
			lo := time.Duration(float64(base) * 0.5)
			if d > p.MaxDelay || d < lo {
				t.Fatalf("Delay(%d, %v) = %v, want in [%v, %v]", n, r, d, lo, p.MaxDelay)
			}
		}
	}
}

func TestWithRetryAfter(t *testing.T) {
	t.Parallel()
	p := retry.Default() // MaxDelay 5m
	tests := []struct {
		computed, retryAfter, want time.Duration
	}{
		{10 * time.Second, 0, 10 * time.Second},
		{10 * time.Second, 30 * time.Second, 30 * time.Second},
		{30 * time.Second, 10 * time.Second, 30 * time.Second},
		{10 * time.Second, time.Hour, 5 * time.Minute},
		{10 * time.Second, -time.Second, 10 * time.Second},
	}
	for _, tt := range tests {
		if got := p.WithRetryAfter(tt.computed, tt.retryAfter); got != tt.want {
			t.Errorf("WithRetryAfter(%v, %v) = %v, want %v", tt.computed, tt.retryAfter, got, tt.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		h      string
		want   time.Duration
		wantOK bool
	}{
		{"120", 2 * time.Minute, true},
		{" 0 ", 0, true},
		{"Sun, 01 Mar 2026 12:01:30 GMT", 90 * time.Second, true},  // IMF-fixdate
		{"Sunday, 01-Mar-26 12:00:10 GMT", 10 * time.Second, true}, // RFC 850
		{"Sun Mar  1 12:00:05 2026", 5 * time.Second, true},        // ANSI C
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0, true},                 // in the past
		{"99999999999999999999", 0, false},                         // overflows
		{"", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"12abc", 0, false},
	}
	for _, tt := range tests {
		got, ok := retry.ParseRetryAfter(tt.h, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.h, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	def := retry.Default()
	tests := []struct {
		name           string
		workflow, step *retry.Spec
		want           func(*retry.Policy)
	}{
		{"both nil", nil, nil, func(*retry.Policy) {}},
		{"both empty", &retry.Spec{}, &retry.Spec{}, func(*retry.Policy) {}},
		{"workflow only", &retry.Spec{MaxRetries: ptr(5), JitterRatio: ptr(0.0)}, nil,
			func(p *retry.Policy) { p.MaxRetries = 5; p.JitterRatio = 0 }},
		{"step only", nil, &retry.Spec{InitialDelayMs: ptr(2000)},
			func(p *retry.Policy) { p.InitialDelay = 2 * time.Second }},
		{"field by field",
			&retry.Spec{MaxRetries: ptr(5), InitialDelayMs: ptr(2000), MaxElapsedMs: ptr(60000)},
			&retry.Spec{MaxRetries: ptr(1), BackoffMultiplier: ptr(3.0)},
			func(p *retry.Policy) {
				p.MaxRetries = 1                 // step beats workflow
				p.InitialDelay = 2 * time.Second // workflow beats default
				p.Multiplier = 3                 // step beats default
				p.MaxElapsed = time.Minute
			}},
		{"step sets zero explicitly", &retry.Spec{MaxRetries: ptr(5)}, &retry.Spec{MaxRetries: ptr(0)},
			func(p *retry.Policy) { p.MaxRetries = 0 }},
		{"custom schedule",
			&retry.Spec{BackoffType: ptr(retry.Custom), CustomScheduleMs: []int{1000, 2000}},
			&retry.Spec{MaxDelayMs: ptr(60000)},
			func(p *retry.Policy) {
				p.Backoff = retry.Custom
				p.CustomSchedule = []time.Duration{time.Second, 2 * time.Second}
				p.MaxDelay = time.Minute
			}},
		{"step replaces a list",
			&retry.Spec{RetryOnErrors: []classify.Type{classify.Transient}},
			&retry.Spec{RetryOnErrors: []classify.Type{classify.Timeout}},
			func(p *retry.Policy) { p.RetryOn = []classify.Type{classify.Timeout} }},
		{"explicit retryOn removes from inherited noRetryOn", nil,
			&retry.Spec{RetryOnErrors: []classify.Type{classify.Transient, classify.Authorization}},
			func(p *retry.Policy) {
				p.RetryOn = []classify.Type{classify.Transient, classify.Authorization}
				p.NoRetryOn = []classify.Type{classify.Permanent, classify.Validation}
			}},
		{"explicit noRetryOn removes from inherited retryOn",
			&retry.Spec{NoRetryOnErrors: []classify.Type{classify.RateLimit}}, nil,
			func(p *retry.Policy) {
				p.RetryOn = []classify.Type{classify.Transient, classify.Timeout}
				p.NoRetryOn = []classify.Type{classify.RateLimit}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := retry.Default()
			tt.want(&want)
			if got := retry.ResolveLevels(tt.workflow, tt.step); !reflect.DeepEqual(got, want) {
				t.Errorf("Resolve =\n %+v\nwant\n %+v", got, want)
			}
		})
	}
	if !reflect.DeepEqual(def, retry.Default()) {
		t.Error("Resolve changed Default()")
	}
}

func TestResolveDoesNotAlias(t *testing.T) {
	t.Parallel()
	step := &retry.Spec{RetryOnErrors: []classify.Type{classify.Transient}}
	p := retry.ResolveLevels(nil, step)
	step.RetryOnErrors[0] = classify.Permanent
	if p.RetryOn[0] != classify.Transient {
		t.Error("policy shares the spec's slice")
	}
}

func TestPolicySpecRoundTrip(t *testing.T) {
	t.Parallel()
	policies := map[string]retry.Policy{
		"default": retry.Default(),
		"custom": retry.ResolveLevels(nil, &retry.Spec{
			BackoffType: ptr(retry.Custom), CustomScheduleMs: []int{1000, 90000}, MaxElapsedMs: ptr(3600000),
		}),
	}
	for name, p := range policies {
		s := p.Spec()
		if errs := s.Validate(); errs != nil {
			t.Errorf("%s: Spec() invalid: %v", name, errs)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back retry.Spec
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if got := retry.ResolveLevels(nil, &back); !reflect.DeepEqual(got, p) {
			t.Errorf("%s: round trip via %s gave %+v, want %+v", name, b, got, p)
		}
	}
	want := `{"maxRetries":3,"initialDelayMs":5000,"maxDelayMs":300000,"backoffMultiplier":2,"jitterRatio":0.1,"backoffType":"exponential",` +
		`"retryOnErrors":["transient","timeout","rate_limit"],"noRetryOnErrors":["permanent","validation","authorization"],"maxElapsedMs":0}`
	if b, _ := json.Marshal(retry.Default().Spec()); string(b) != want {
		t.Errorf("Default().Spec() JSON =\n %s\nwant\n %s", b, want)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	types := func(ts ...classify.Type) []classify.Type { return ts }
	ok := map[string]string(nil)
	one := func(k, v string) map[string]string { return map[string]string{k: v} }
	tests := []struct {
		name string
		s    retry.Spec
		want map[string]string
	}{
		{"empty", retry.Spec{}, ok},

		{"maxRetries -1", retry.Spec{MaxRetries: ptr(-1)}, one("maxRetries", "must be between 0 and 10")},
		{"maxRetries 0", retry.Spec{MaxRetries: ptr(0)}, ok},
		{"maxRetries 10", retry.Spec{MaxRetries: ptr(10)}, ok},
		{"maxRetries 11", retry.Spec{MaxRetries: ptr(11)}, one("maxRetries", "must be between 0 and 10")},

		{"initialDelayMs 999", retry.Spec{InitialDelayMs: ptr(999)}, one("initialDelayMs", "must be between 1000 and 300000")},
		{"initialDelayMs 1000", retry.Spec{InitialDelayMs: ptr(1000)}, ok},
		{"initialDelayMs 300000", retry.Spec{InitialDelayMs: ptr(300000)}, ok},
		{"initialDelayMs 300001", retry.Spec{InitialDelayMs: ptr(300001)}, one("initialDelayMs", "must be between 1000 and 300000")},

		{"maxDelayMs 4999", retry.Spec{MaxDelayMs: ptr(4999)}, one("maxDelayMs", "must be between 5000 and 3600000")},
		{"maxDelayMs 5000", retry.Spec{MaxDelayMs: ptr(5000)}, ok},
		{"maxDelayMs 3600000", retry.Spec{MaxDelayMs: ptr(3600000)}, ok},
		{"maxDelayMs 3600001", retry.Spec{MaxDelayMs: ptr(3600001)}, one("maxDelayMs", "must be between 5000 and 3600000")},
		{"maxDelayMs < initialDelayMs", retry.Spec{InitialDelayMs: ptr(10000), MaxDelayMs: ptr(9999)},
			one("maxDelayMs", "must be at least initialDelayMs (10000)")},
		{"maxDelayMs = initialDelayMs", retry.Spec{InitialDelayMs: ptr(10000), MaxDelayMs: ptr(10000)}, ok},
		{"both out of range", retry.Spec{InitialDelayMs: ptr(300001), MaxDelayMs: ptr(4999)}, map[string]string{
			"initialDelayMs": "must be between 1000 and 300000", "maxDelayMs": "must be between 5000 and 3600000"}},

		{"backoffMultiplier 0.99", retry.Spec{BackoffMultiplier: ptr(0.99)}, one("backoffMultiplier", "must be between 1 and 5")},
		{"backoffMultiplier 1", retry.Spec{BackoffMultiplier: ptr(1.0)}, ok},
		{"backoffMultiplier 5", retry.Spec{BackoffMultiplier: ptr(5.0)}, ok},
		{"backoffMultiplier 5.01", retry.Spec{BackoffMultiplier: ptr(5.01)}, one("backoffMultiplier", "must be between 1 and 5")},
		{"backoffMultiplier NaN", retry.Spec{BackoffMultiplier: ptr(math.NaN())}, one("backoffMultiplier", "must be between 1 and 5")},

		{"jitterRatio -0.01", retry.Spec{JitterRatio: ptr(-0.01)}, one("jitterRatio", "must be between 0 and 0.5")},
		{"jitterRatio 0", retry.Spec{JitterRatio: ptr(0.0)}, ok},
		{"jitterRatio 0.5", retry.Spec{JitterRatio: ptr(0.5)}, ok},
		{"jitterRatio 0.51", retry.Spec{JitterRatio: ptr(0.51)}, one("jitterRatio", "must be between 0 and 0.5")},

		{"maxElapsedMs 0", retry.Spec{MaxElapsedMs: ptr(0)}, ok},
		{"maxElapsedMs -1", retry.Spec{MaxElapsedMs: ptr(-1)}, one("maxElapsedMs", "must be 0 (no budget) or between 1000 and 86400000")},
		{"maxElapsedMs 999", retry.Spec{MaxElapsedMs: ptr(999)}, one("maxElapsedMs", "must be 0 (no budget) or between 1000 and 86400000")},
		{"maxElapsedMs 1000", retry.Spec{MaxElapsedMs: ptr(1000)}, ok},
		{"maxElapsedMs 86400000", retry.Spec{MaxElapsedMs: ptr(86400000)}, ok},
		{"maxElapsedMs 86400001", retry.Spec{MaxElapsedMs: ptr(86400001)}, one("maxElapsedMs", "must be 0 (no budget) or between 1000 and 86400000")},

		{"backoffType fibonacci", retry.Spec{BackoffType: ptr(retry.Fibonacci)}, ok},
		{"backoffType unknown", retry.Spec{BackoffType: ptr(retry.BackoffType("cubic"))},
			one("backoffType", "must be one of exponential, fixed, linear, fibonacci, custom")},

		{"custom without schedule", retry.Spec{BackoffType: ptr(retry.Custom)}, one("customScheduleMs", "required when backoffType is custom")},
		{"schedule without custom", retry.Spec{CustomScheduleMs: []int{1000}}, one("customScheduleMs", "only allowed when backoffType is custom")},
		{"schedule with linear", retry.Spec{BackoffType: ptr(retry.Linear), CustomScheduleMs: []int{1000}},
			one("customScheduleMs", "only allowed when backoffType is custom")},
		{"custom, 1 entry", retry.Spec{BackoffType: ptr(retry.Custom), CustomScheduleMs: []int{1000}}, ok},
		{"custom, 10 entries", retry.Spec{BackoffType: ptr(retry.Custom), CustomScheduleMs: make10(1000)}, ok},
		{"custom, 11 entries", retry.Spec{BackoffType: ptr(retry.Custom), CustomScheduleMs: append(make10(1000), 1000)},
			one("customScheduleMs", "must have between 1 and 10 entries")},
		{"custom entry bounds", retry.Spec{BackoffType: ptr(retry.Custom), CustomScheduleMs: []int{999, 1000, 3600000, 3600001}},
			map[string]string{
				"customScheduleMs[0]": "must be between 1000 and 3600000",
				"customScheduleMs[3]": "must be between 1000 and 3600000",
			}},

		{"lists ok", retry.Spec{RetryOnErrors: types(classify.Unknown), NoRetryOnErrors: types(classify.Transient)}, ok},
		{"unknown type names", retry.Spec{
			RetryOnErrors:   types(classify.Transient, "foo"),
			NoRetryOnErrors: types("Permanent"),
		}, map[string]string{
			"retryOnErrors[1]":   `unknown error type "foo" (want one of transient, permanent, timeout, validation, authorization, rate_limit, external_service, internal, unknown)`,
			"noRetryOnErrors[0]": `unknown error type "Permanent" (want one of transient, permanent, timeout, validation, authorization, rate_limit, external_service, internal, unknown)`,
		}},
		{"overlapping lists", retry.Spec{
			RetryOnErrors:   types(classify.Transient, classify.Timeout),
			NoRetryOnErrors: types(classify.Permanent, classify.Timeout),
		}, one("noRetryOnErrors[1]", `"timeout" is also in retryOnErrors`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.s.Validate(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Validate() = %v, want %v", got, tt.want)
			}
		})
	}
}

func make10(ms int) []int {
	s := make([]int, 10)
	for i := range s {
		s[i] = ms
	}
	return s
}

func TestValidateFromJSON(t *testing.T) {
	t.Parallel()
	var s retry.Spec
	if err := json.Unmarshal([]byte(`{"maxRetries":0,"retryOnErrors":["transient","nope"]}`), &s); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"retryOnErrors[1]": `unknown error type "nope" (want one of transient, permanent, timeout, validation, authorization, rate_limit, external_service, internal, unknown)`}
	if got := s.Validate(); !reflect.DeepEqual(got, want) {
		t.Errorf("Validate() = %v, want %v", got, want)
	}
	if p := retry.ResolveLevels(nil, &retry.Spec{MaxRetries: s.MaxRetries}); p.MaxRetries != 0 {
		t.Errorf("explicit maxRetries 0 resolved to %d", p.MaxRetries)
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	def := retry.Default()
	budget := retry.Default()
	budget.MaxElapsed = time.Minute
	tests := []struct {
		name         string
		p            retry.Policy
		t            classify.Type
		retriesDone  int
		unknownRetry bool
		elapsed      time.Duration
		want         retry.Decision
	}{
		{"noRetryOn wins even with retries left", def, classify.Validation, 0, true, 0, retry.Decision{Retry: false, Reason: "error type validation is not retried"}},
		{"noRetryOn checked before exhaustion", def, classify.Permanent, 5, false, 0, retry.Decision{Retry: false, Reason: "error type permanent is not retried"}},
		{"exhausted", def, classify.Transient, 3, false, 0, retry.Decision{Retry: false, Reason: "retries exhausted (3 of 3)"}},
		{"exhausted beats unknownRetry", def, classify.Unknown, 3, true, 0, retry.Decision{Retry: false, Reason: "retries exhausted (3 of 3)"}},
		{"last retry allowed", def, classify.Transient, 2, false, 0, retry.Decision{Retry: true, Reason: "retryable error (transient)"}},
		{"budget exhausted", budget, classify.Transient, 0, false, time.Minute, retry.Decision{Retry: false, Reason: "retry time budget exhausted"}},
		{"budget left", budget, classify.Timeout, 0, false, time.Minute - 1, retry.Decision{Retry: true, Reason: "retryable error (timeout)"}},
		{"no budget ignores elapsed", def, classify.RateLimit, 0, false, 1000 * time.Hour, retry.Decision{Retry: true, Reason: "retryable error (rate_limit)"}},
		{"unknown, setting on", def, classify.Unknown, 0, true, 0, retry.Decision{Retry: true, Reason: "unknown error type, retried by workflow setting"}},
		{"unknown, setting off", def, classify.Unknown, 0, false, 0, retry.Decision{Retry: false, Reason: "error type unknown is not retried"}},
		{"in neither list", def, classify.ExternalService, 0, true, 0, retry.Decision{Retry: false, Reason: "error type external_service is not retried"}},
		{"max retries 0", retry.ResolveLevels(nil, &retry.Spec{MaxRetries: ptr(0)}), classify.Transient, 0, false, 0, retry.Decision{Retry: false, Reason: "retries exhausted (0 of 0)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.p.Decide(tt.t, tt.retriesDone, tt.unknownRetry, tt.elapsed); got != tt.want {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestSeedHandleError runs the seed's handleError cases through classify and
// the default policy.
func TestSeedHandleError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		err       error
		wantRetry bool
	}{
		{"Network error ECONNRESET is retried", fmt.Errorf("Network error: %w", syscall.ECONNRESET), true},
		{"Not found 404 is not retried", &classify.HTTPError{Method: "GET", URL: "https://x", StatusCode: 404}, false},
		{"Connection timeout is retried", fmt.Errorf("Connection timeout: %w", syscall.ETIMEDOUT), true},
		{"429 is retried", &classify.HTTPError{StatusCode: 429}, true},
		{"400 is not retried", &classify.HTTPError{StatusCode: 400}, false},
		{"plain unknown error follows the setting", errors.New("boom"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := classify.Classify(tt.err)
			if got := retry.Default().Decide(r.Type, 0, true, 0); got.Retry != tt.wantRetry {
				t.Errorf("Decide(%s) = %+v, want retry %v", r.Type, got, tt.wantRetry)
			}
		})
	}
}

// TestBoundsAreWhatValidateEnforces: the limits a form shows (Bounds) are the ones Validate
// enforces, just inside passes and just outside fails, and the defaults are Default's.
func TestBoundsAreWhatValidateEnforces(t *testing.T) {
	set := func(field string, v float64) retry.Spec {
		var s retry.Spec
		i := int(v)
		switch field {
		case "maxRetries":
			s.MaxRetries = &i
		case "initialDelayMs":
			s.InitialDelayMs = &i
		case "maxDelayMs":
			s.MaxDelayMs = &i
		case "maxElapsedMs":
			s.MaxElapsedMs = &i
		case "backoffMultiplier":
			s.BackoffMultiplier = &v
		case "jitterRatio":
			s.JitterRatio = &v
		case "customScheduleMs":
			c := retry.Custom
			s.BackoffType, s.CustomScheduleMs = &c, []int{i}
		default:
			t.Fatalf("no spec field for bound %q", field)
		}
		return s
	}
	for _, b := range retry.Bounds() {
		step := 0.01
		if b.Integer {
			step = 1
		}
		for _, v := range []float64{b.Min, b.Max} {
			if errs := set(b.Field, v).Validate(); errs != nil {
				t.Errorf("%s = %v (a bound) refused: %v", b.Field, v, errs)
			}
		}
		for _, v := range []float64{b.Min - step, b.Max + step} {
			if v == 0 && b.ZeroAllowed {
				continue
			}
			if errs := set(b.Field, v).Validate(); errs == nil {
				t.Errorf("%s = %v (outside %v..%v) accepted", b.Field, v, b.Min, b.Max)
			}
		}
	}
	d := retry.Default()
	want := map[string]float64{"maxRetries": float64(d.MaxRetries), "initialDelayMs": float64(d.InitialDelay.Milliseconds()),
		"maxDelayMs": float64(d.MaxDelay.Milliseconds()), "backoffMultiplier": d.Multiplier, "jitterRatio": d.JitterRatio}
	for _, b := range retry.Bounds() {
		if w, ok := want[b.Field]; ok && b.Default != w {
			t.Errorf("%s default %v, Default() has %v", b.Field, b.Default, w)
		}
	}
}
