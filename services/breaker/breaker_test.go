package breaker_test

import (
	"testing"
	"time"

	"lifeline/services/breaker"
)

func TestAdmit(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	base := breaker.State{ResetTimeout: time.Minute, HalfOpenRequests: 3}
	with := func(f func(*breaker.State)) breaker.State { s := base; f(&s); return s }
	cases := []struct {
		name string
		s    breaker.State
		now  time.Time
		want breaker.Verdict
	}{
		{"closed runs", with(func(s *breaker.State) { s.State = breaker.Closed }), t0, breaker.Verdict{Run: true}},
		{"no state runs", base, t0, breaker.Verdict{Run: true}},
		{"open waits until the reset timeout", with(func(s *breaker.State) { s.State, s.OpenedAt = breaker.Open, at(0) }), t0.Add(10 * time.Second),
			breaker.Verdict{Until: t0.Add(time.Minute)}},
		{"open after the reset timeout half-opens with a trial", with(func(s *breaker.State) { s.State, s.OpenedAt = breaker.Open, at(0) }), t0.Add(time.Minute),
			breaker.Verdict{Run: true, Trial: true, ToHalfOpen: true}},
		{"forced open stays open", with(func(s *breaker.State) { s.State, s.OpenedAt, s.Forced = breaker.Open, at(0), true }), t0.Add(time.Hour),
			breaker.Verdict{Until: t0.Add(time.Hour + time.Minute)}},
		{"half-open sends the attempt to take a trial slot", with(func(s *breaker.State) { s.State, s.HalfOpenedAt = breaker.HalfOpen, at(0) }), t0.Add(time.Second),
			breaker.Verdict{Run: true, Trial: true}},
		// The time since it half-opened frees no slot: the database holds them (a trial's
		// end or its lease frees its slot), so the verdict does not change with time.
		{"half-open long after the reset timeout still asks for a slot", with(func(s *breaker.State) { s.State, s.HalfOpenedAt = breaker.HalfOpen, at(0) }),
			t0.Add(2 * time.Minute), breaker.Verdict{Run: true, Trial: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := breaker.Admit(c.s, c.now); got != c.want {
				t.Errorf("Admit = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestNoFreeSlotAndSlots(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	if got := breaker.NoFreeSlot(t0); got != (breaker.Verdict{Until: t0.Add(2 * time.Second)}) {
		t.Errorf("NoFreeSlot = %+v", got)
	}
	if breaker.Slots(3) != 3 || breaker.Slots(0) != 1 {
		t.Errorf("Slots(3) = %d, Slots(0) = %d", breaker.Slots(3), breaker.Slots(0))
	}
}

func TestResolveValidateTrips(t *testing.T) {
	three, ten := 3, 10_000
	off := false
	c := breaker.Resolve(&breaker.Spec{FailureThreshold: &three}, &breaker.Spec{ResetTimeoutMs: &ten, CountErrors: []string{"timeout"}})
	if c.FailureThreshold != 3 || c.ResetTimeout != 10*time.Second || c.HalfOpenRequests != 3 || !c.Counts("timeout") || c.Counts("transient") {
		t.Errorf("resolved %+v", c)
	}
	if d := breaker.Default(); d.Counts("validation") || !d.Counts("transient") || d.FailureThreshold != 5 || d.ResetTimeout != time.Minute || d.WaitBudget != 24*time.Hour {
		t.Errorf("defaults %+v", d)
	}
	if breaker.Resolve(&breaker.Spec{Enabled: &off}).Counts("transient") {
		t.Error("a disabled breaker counts")
	}
	for _, tc := range []struct {
		spec  breaker.Spec
		field string
	}{
		{breaker.Spec{FailureThreshold: ptr(0)}, "failureThreshold"},
		{breaker.Spec{FailureThreshold: ptr(101)}, "failureThreshold"},
		{breaker.Spec{ResetTimeoutMs: ptr(9_999)}, "resetTimeoutMs"},
		{breaker.Spec{ResetTimeoutMs: ptr(600_001)}, "resetTimeoutMs"},
		{breaker.Spec{HalfOpenRequests: ptr(11)}, "halfOpenRequests"},
		{breaker.Spec{CountErrors: []string{"cosmic"}}, "countErrors[0]"},
		{breaker.Spec{Scope: "planet"}, "scope"},
	} {
		if errs := tc.spec.Validate(); errs[tc.field] == "" || len(errs) != 1 {
			t.Errorf("%+v: %v, want a message on %s", tc.spec, errs, tc.field)
		}
	}
	if errs := (breaker.Spec{FailureThreshold: ptr(100), ResetTimeoutMs: ptr(600_000), HalfOpenRequests: ptr(1), Scope: "host"}).Validate(); len(errs) != 0 {
		t.Errorf("valid spec refused: %v", errs)
	}
	c5 := breaker.Default()
	if breaker.Trips(c5, 4) || !breaker.Trips(c5, 5) {
		t.Error("5 failures in the window trip a default breaker, 4 do not")
	}
}

func ptr(n int) *int { return &n }
