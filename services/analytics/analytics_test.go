package analytics_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/analytics"
)

var base = time.Date(2026, 11, 17, 0, 0, 0, 0, time.UTC)

// at is day d of November 2026 (17 = base) at hh:mm UTC.
func at(d, hh, mm int) time.Time { return time.Date(2026, 11, d, hh, mm, 0, 0, time.UTC) }

type seeder struct {
	t   *testing.T
	db  *models.DB
	org string
}

func (s seeder) create(v any) {
	s.t.Helper()
	if err := s.db.Conn(context.Background()).Create(v).Error; err != nil {
		s.t.Fatal(err)
	}
}

func (s seeder) workflow(name, def string) string {
	wf := models.Workflow{ID: models.NewID(), OrganizationID: s.org, Name: name, Version: 1, Definition: models.JSON(def),
		UnknownErrors: "retry", WebhookToken: models.NewID(), WebhookSecret: "s"}
	s.create(&wf)
	return wf.ID
}

func (s seeder) execution(wf, client, status string, started, finished time.Time) string {
	ex := models.Execution{ID: models.NewID(), OrganizationID: s.org, WorkflowID: wf, WorkflowVersion: 1, Status: status,
		Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: started, UpdatedAt: finished,
		StartedAt: &started, FinishedAt: &finished}
	ex.Client = &client
	s.create(&ex)
	return ex.ID
}

// attempt records a finished attempt; errType "" is a success.
func (s seeder) attempt(ex, step string, n int, status, errType, code string, finished time.Time) {
	a := models.StepAttempt{ID: models.NewID(), OrganizationID: s.org, ExecutionID: ex, StepID: step, Attempt: n, Status: status,
		IdempotencyKey: models.NewID(), Input: models.JSON(`{}`), ScheduledAt: finished, StartedAt: &finished, FinishedAt: &finished,
		CreatedAt: finished, UpdatedAt: finished}
	if errType != "" {
		a.ErrorType = &errType
	}
	if code != "" {
		a.ErrorCode = &code
	}
	s.create(&a)
}

func (s seeder) group(wf, step string) string {
	g := models.Group{ID: models.NewID(), OrganizationID: s.org, Fingerprint: models.NewID()[:20], Version: 1, WorkflowID: wf,
		StepID: step, ErrorType: "validation", Title: "Problem " + step, State: models.GroupOpen,
		FirstSeenAt: base, LastSeenAt: base, CreatedAt: base, UpdatedAt: base}
	s.create(&g)
	return g.ID
}

// deadLetter records a dead letter of ex created at created, closed as status at closed
// (updated_at; resolved_at too unless expired).
func (s seeder) deadLetter(wf, ex, step, errType, code, group, client, status string, created, closed time.Time, replay *string) string {
	e := models.ExecutionError{ID: models.NewID(), OrganizationID: s.org, ExecutionID: ex, StepID: step, ErrorType: errType,
		ErrorMessage: "x", Status: models.ErrDeadLetter, CreatedAt: created, UpdatedAt: created}
	if code != "" {
		e.ErrorCode = &code
	}
	s.create(&e)
	dl := models.DeadLetter{ID: models.NewID(), OrganizationID: s.org, ErrorID: e.ID, WorkflowID: wf, ExecutionID: ex, GroupID: &group,
		OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: step, Status: status, ErrorType: errType,
		Reason: "x", ExpiresAt: created.Add(30 * 24 * time.Hour), CreatedAt: created, UpdatedAt: closed, ReplayExecutionID: replay}
	dl.Client = &client
	if status == models.DLQResolved || status == models.DLQSkipped {
		dl.ResolvedAt = &closed
	}
	s.create(&dl)
	return dl.ID
}

func (s seeder) audit(breaker, action string, when time.Time) {
	s.create(&models.AuditEntry{ID: models.NewID(), OrganizationID: s.org, ActorType: "system", Action: action,
		EntityType: "circuit_breaker_state", EntityID: breaker, Details: models.JSON(`{}`), CreatedAt: when})
}

func (s seeder) breaker(wf, step, host *string) string {
	key := "host:x"
	if host == nil {
		key = "step:" + *wf + ":" + *step
	}
	b := models.CircuitBreaker{ID: models.NewID(), OrganizationID: s.org, ScopeKey: key, WorkflowID: wf, StepID: step, Host: host,
		State: "closed", FailureThreshold: 5, ResetTimeoutMs: 60000, HalfOpenRequests: 1, CreatedAt: base, UpdatedAt: base}
	s.create(&b)
	return b.ID
}

type history struct {
	org, vat, imp string
	g1, g2, g3    string
}

// seedHistory writes the history whose figures TestReport knows (see its comments), and a
// failure of another organization on the same days.
func seedHistory(t *testing.T, db *models.DB) history {
	other := models.Organization{ID: models.NewID(), Name: "Biuro Obok"}
	org := models.Organization{ID: models.NewID(), Name: "Biuro Analiz"}
	for _, o := range []*models.Organization{&org, &other} {
		if err := db.Conn(context.Background()).Create(o).Error; err != nil {
			t.Fatal(err)
		}
	}
	s := seeder{t: t, db: db, org: org.ID}
	vat := s.workflow("VAT", `{"steps": [{"id": "prepare", "type": "http", "config": {"url": "https://api.mf.gov.pl/prepare"}},
		{"id": "submit", "name": "Wysyłka JPK", "type": "http", "config": {"url": "https://bramka.e-deklaracje.mf.gov.pl/send"}}]}`)
	imp := s.workflow("Import", `{"steps": [{"id": "fetch", "type": "http", "config": {"url": "https://bank.example/api/{{ input.nip }}"}}]}`)
	h := history{org: org.ID, vat: vat, imp: imp, g1: s.group(vat, "submit"), g2: s.group(imp, "fetch"), g3: s.group(imp, "fetch")}

	// E1: a rate-limited submit, retried, succeeded: recovered by itself.
	e1 := s.execution(vat, "111", models.ExecSucceeded, at(17, 8, 0), at(17, 8, 5))
	s.attempt(e1, "prepare", 1, models.StepSucceeded, "", "", at(17, 8, 1))
	s.attempt(e1, "submit", 1, models.StepRetrying, "rate_limit", "", at(17, 8, 2))
	s.attempt(e1, "submit", 2, models.StepSucceeded, "", "", at(17, 8, 5))
	// E2: three failures of submit, a dead letter at 10:00, a replay that succeeded 10 minutes later.
	e2 := s.execution(vat, "222", models.ExecSucceeded, at(17, 9, 0), at(17, 10, 10))
	s.attempt(e2, "prepare", 1, models.StepSucceeded, "", "", at(17, 9, 1))
	s.attempt(e2, "submit", 1, models.StepRetrying, "external_service", "HTTP_503", at(17, 9, 2))
	s.attempt(e2, "submit", 2, models.StepRetrying, "external_service", "HTTP_503", at(17, 9, 30))
	s.attempt(e2, "submit", 3, models.StepDLQ, "external_service", "HTTP_503", at(17, 10, 0))
	s.attempt(e2, "submit", 4, models.StepSucceeded, "", "", at(17, 10, 10))
	s.deadLetter(vat, e2, "submit", "external_service", "HTTP_503", h.g1, "222", models.DLQResolved, at(17, 10, 0), at(17, 10, 10), &e2)
	// E3: a validation error retried once, then a dead letter resolved by hand two hours later.
	e3 := s.execution(imp, "111", models.ExecFailed, at(18, 8, 0), at(18, 9, 0))
	s.attempt(e3, "fetch", 1, models.StepRetrying, "validation", "NIP", at(18, 8, 30))
	s.attempt(e3, "fetch", 2, models.StepDLQ, "validation", "NIP", at(18, 9, 0))
	s.deadLetter(imp, e3, "fetch", "validation", "NIP", h.g2, "111", models.DLQResolved, at(18, 9, 0), at(18, 11, 0), nil)
	// E4: a timeout straight to the DLQ, skipped an hour later.
	e4 := s.execution(imp, "222", models.ExecFailed, at(18, 12, 0), at(18, 12, 0))
	s.attempt(e4, "fetch", 1, models.StepDLQ, "timeout", "", at(18, 12, 0))
	s.deadLetter(imp, e4, "fetch", "timeout", "", h.g3, "222", models.DLQSkipped, at(18, 12, 0), at(18, 13, 0), nil)
	// E5: no failure at all.
	e5 := s.execution(imp, "333", models.ExecSucceeded, at(19, 8, 0), at(19, 8, 1))
	s.attempt(e5, "fetch", 1, models.StepSucceeded, "", "", at(19, 8, 1))
	// E6: a transient failure of prepare, recovered by itself.
	e6 := s.execution(vat, "333", models.ExecSucceeded, at(19, 9, 0), at(19, 9, 5))
	s.attempt(e6, "prepare", 1, models.StepRetrying, "transient", "", at(19, 9, 1))
	s.attempt(e6, "prepare", 2, models.StepSucceeded, "", "", at(19, 9, 3))
	s.attempt(e6, "submit", 1, models.StepSucceeded, "", "", at(19, 9, 5))
	// Before the range: E7's dead letter (group 2, still pending) on the 15th, E8's on the
	// 16th (group 3), which expired on the 19th at 06:00.
	e7 := s.execution(imp, "111", models.ExecDLQPending, at(15, 8, 0), at(15, 8, 0))
	s.attempt(e7, "fetch", 1, models.StepDLQ, "validation", "NIP", at(15, 8, 0))
	s.deadLetter(imp, e7, "fetch", "validation", "NIP", h.g2, "111", models.DLQPending, at(15, 8, 0), at(15, 8, 0), nil)
	e8 := s.execution(imp, "444", models.ExecDLQPending, at(16, 6, 0), at(16, 6, 0))
	s.attempt(e8, "fetch", 1, models.StepDLQ, "timeout", "", at(16, 6, 0))
	s.deadLetter(imp, e8, "fetch", "timeout", "", h.g3, "444", models.DLQExpired, at(16, 6, 0), at(19, 6, 0), nil)

	// Breakers: submit's opened twice on the 17th (60 s, then 180 s open); the bank's host
	// breaker opened before the range and closed a minute into it.
	submit, host := "submit", "bank.example"
	b1 := s.breaker(&vat, &submit, nil)
	s.audit(b1, "circuit.opened", at(17, 10, 0))
	s.audit(b1, "circuit.half_opened", at(17, 10, 1))
	s.audit(b1, "circuit.opened", at(17, 10, 2))
	s.audit(b1, "circuit.closed", at(17, 10, 5))
	b2 := s.breaker(nil, nil, &host)
	s.audit(b2, "circuit.opened", at(16, 23, 59))
	s.audit(b2, "circuit.closed", at(17, 0, 1))

	// Another organization's failure on the same day is not counted.
	o := seeder{t: t, db: db, org: other.ID}
	owf := o.workflow("VAT", `{"steps": [{"id": "submit", "type": "http"}]}`)
	oe := o.execution(owf, "111", models.ExecFailed, at(17, 8, 0), at(17, 8, 0))
	o.attempt(oe, "submit", 1, models.StepFailed, "rate_limit", "", at(17, 8, 0))
	if _, err := db.RefreshAnalytics(context.Background(), other.ID); err != nil {
		t.Fatal(err)
	}
	return h
}

func f64(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

func i64(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

// TestReport computes every figure from a seeded history with a known answer (see
// seedHistory), from the rollups RefreshAnalytics wrote, on both databases; and the same
// figures of one client read live from the history.
func TestReport(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		modeltest.Clock(t, db).Set(at(20, 12, 0))
		h := seedHistory(t, db)
		asOf, err := db.RefreshAnalytics(ctx, h.org)
		if err != nil {
			t.Fatal(err)
		}
		svc := analytics.New(db)
		q := analytics.Query{From: at(17, 0, 0), To: at(19, 0, 0)}
		r, err := svc.Report(ctx, h.org, q)
		if err != nil {
			t.Fatal(err)
		}
		if r.AsOf == nil || !r.AsOf.Equal(asOf) {
			t.Errorf("as of %v, want %v", r.AsOf, asOf)
		}
		// Failures: 4 on the 17th (1 rate-limit, 3 external), 3 on the 18th (2 validation,
		// 1 timeout), 1 on the 19th (transient); the other organization's is not counted.
		if r.Total != 8 {
			t.Errorf("total %d, want 8", r.Total)
		}
		wantDays := []struct {
			total int
			by    map[string]int
		}{{4, map[string]int{"rate_limit": 1, "external_service": 3}}, {3, map[string]int{"validation": 2, "timeout": 1}}, {1, map[string]int{"transient": 1}}}
		if len(r.Failures) != 3 {
			t.Fatalf("failure days %+v", r.Failures)
		}
		for i, w := range wantDays {
			d := r.Failures[i]
			if d.Total != w.total || len(d.ByErrorType) != len(w.by) {
				t.Errorf("day %s: %+v, want %+v", d.Day, d, w)
			}
			for k, n := range w.by {
				if d.ByErrorType[k] != n {
					t.Errorf("day %s %s: %d, want %d", d.Day, k, d.ByErrorType[k], n)
				}
			}
		}
		// The three days before: E7's and E8's failures, nothing closed.
		if p := r.Previous; p == nil || *p != (analytics.Previous{From: "2026-11-14", To: "2026-11-16", Total: 2}) {
			t.Errorf("previous %+v", p)
		}
		// Arrivals and closures per day.
		wantDLQ := [][2]int{{1, 1}, {2, 2}, {0, 1}}
		for i, w := range wantDLQ {
			if d := r.DLQ[i]; d.Arrivals != w[0] || d.Closures != w[1] {
				t.Errorf("dlq day %s: %+v, want %v", d.Day, d, w)
			}
		}
		count := func(name string, cs []analytics.Count, key string, failures, attempts int) {
			t.Helper()
			for _, c := range cs {
				if c.Key == key {
					if c.Failures != failures || (attempts > 0 && (c.Attempts != attempts || f64(c.ErrorRate) != float64(failures)/float64(attempts))) {
						t.Errorf("%s %s: %+v, want %d of %d", name, key, c, failures, attempts)
					}
					return
				}
			}
			t.Errorf("%s: no %s in %+v", name, key, cs)
		}
		count("byWorkflow", r.ByWorkflow, h.vat, 5, 11)
		count("byWorkflow", r.ByWorkflow, h.imp, 3, 4)
		count("byStep", r.ByStep, h.vat+"/submit", 4, 7)
		count("byStep", r.ByStep, h.vat+"/prepare", 1, 4)
		count("byStep", r.ByStep, h.imp+"/fetch", 3, 4)
		count("byErrorType", r.ByErrorType, "external_service", 3, 0)
		count("byErrorType", r.ByErrorType, "validation", 2, 0)
		count("byCode", r.ByCode, "HTTP_503", 3, 0)
		count("byCode", r.ByCode, "NIP", 2, 0)
		count("byHost", r.ByHost, "bramka.e-deklaracje.mf.gov.pl", 4, 7)
		count("byHost", r.ByHost, "api.mf.gov.pl", 1, 4)
		if len(r.ByHost) != 2 { // the bank's url is templated: its host is not known
			t.Errorf("byHost %+v", r.ByHost)
		}
		if r.ByStep[0].Key != h.vat+"/submit" || r.ByStep[0].Label != "VAT · Wysyłka JPK" {
			t.Errorf("byStep first %+v", r.ByStep[0])
		}
		// Groups: each had one arrival; group 2 and 3 had one in the three days before too.
		groups := map[string][3]int{}
		for _, g := range r.ByGroup {
			groups[g.GroupID] = [3]int{g.Arrivals, g.Previous, g.Trend}
		}
		if groups[h.g1] != [3]int{1, 0, 1} || groups[h.g2] != [3]int{1, 1, 0} || groups[h.g3] != [3]int{1, 1, 0} || len(groups) != 3 {
			t.Errorf("groups %v", groups)
		}
		// Times to resolution 600, 3600, 7200, 259200: median (rank 2) 3600, p90 (rank 4) 259200.
		ttr := r.TimeToResolution
		if ttr.Count != 4 || i64(ttr.Median) != 3600 || i64(ttr.P90) != 259200 {
			t.Errorf("ttr %+v median %d p90 %d", ttr, i64(ttr.Median), i64(ttr.P90))
		}
		byWF := map[string][2]int64{}
		for _, d := range ttr.ByWorkflow {
			byWF[d.Key] = [2]int64{i64(d.Median), i64(d.P90)}
		}
		if byWF[h.vat] != [2]int64{600, 600} || byWF[h.imp] != [2]int64{7200, 259200} {
			t.Errorf("ttr by workflow %v", byWF)
		}
		byHow := map[string]int64{}
		for _, d := range ttr.ByHow {
			byHow[d.Key] = i64(d.Median)
		}
		if byHow["replay"] != 600 || byHow["resolved"] != 7200 || byHow["skipped"] != 3600 || byHow["expired"] != 259200 {
			t.Errorf("ttr by how %v", byHow)
		}
		if r.Recovery != (analytics.Recovery{Closed: 4, ByReplay: 1, Resolved: 1, Skipped: 1, Expired: 1}) || f64(r.RecoveryRate) != 0.25 {
			t.Errorf("recovery %+v rate %v", r.Recovery, f64(r.RecoveryRate))
		}
		// E1 and E6 recovered by themselves; E2, E3, E4 reached the DLQ.
		if r.AutoRecovery != (analytics.AutoRecovery{WithFailure: 5, Recovered: 2}) || f64(r.AutoRecoveryRate) != 0.4 {
			t.Errorf("auto recovery %+v rate %v", r.AutoRecovery, f64(r.AutoRecoveryRate))
		}
		wantPaid := []analytics.AttemptPaid{{Attempt: 1, Attempts: 9, Succeeded: 4}, {Attempt: 2, Attempts: 4, Succeeded: 2},
			{Attempt: 3, Attempts: 1, Succeeded: 0}, {Attempt: 4, Attempts: 1, Succeeded: 1}}
		if len(r.RetriesThatPaid) != len(wantPaid) {
			t.Fatalf("retries that paid %+v", r.RetriesThatPaid)
		}
		for i, w := range wantPaid {
			g := r.RetriesThatPaid[i]
			if g.Attempt != w.Attempt || g.Attempts != w.Attempts || g.Succeeded != w.Succeeded {
				t.Errorf("attempt %d: %+v, want %+v", w.Attempt, g, w)
			}
		}
		// Breakers: submit's opened twice, 240 s open; the host's not in the range, 60 s in it.
		if len(r.BreakerOpenings) != 2 || r.BreakerOpenings[0].Openings != 2 || r.BreakerOpenings[0].SecondsOpen != 240 ||
			r.BreakerOpenings[1].Openings != 0 || r.BreakerOpenings[1].SecondsOpen != 60 || r.BreakerOpenings[1].Host != "bank.example" {
			t.Errorf("breakers %+v", r.BreakerOpenings)
		}
		// Recommendations: every rate here is over its threshold (fetch fails 3 of 4 attempts,
		// 25 % recovered by a replay, 1 of 4 failures at the gateway rate-limited, fetch's 2nd
		// attempt never succeeded) but on a sample below its minimum (20 attempts, 10 closed,
		// 20 failures, 10 tries), so only the validation error retried by policy (a fact, not
		// a rate) is advised (TestRecommendationThresholds tests each rule at its minimum).
		var codes []string
		for _, a := range r.Recommendations {
			codes = append(codes, a.Code+":"+a.Subject)
		}
		if want := []string{"validation_retried:" + h.imp + "/fetch"}; !slices.Equal(codes, want) {
			t.Errorf("recommendations %v, want %v", codes, want)
		}

		// One client, read live: client 222 had E2 (3 failures) and E4 (1), two dead letters
		// closed (600 s by replay, 3600 s skipped).
		q.Client = "222"
		c, err := svc.Report(ctx, h.org, q)
		if err != nil {
			t.Fatal(err)
		}
		if c.Total != 4 || c.Recovery.Closed != 2 || c.Recovery.ByReplay != 1 || i64(c.TimeToResolution.Median) != 600 || i64(c.TimeToResolution.P90) != 3600 {
			t.Errorf("client 222: total %d recovery %+v ttr %d/%d", c.Total, c.Recovery, i64(c.TimeToResolution.Median), i64(c.TimeToResolution.P90))
		}
		// Filters: the import workflow's validation errors.
		f, err := svc.Report(ctx, h.org, analytics.Query{From: q.From, To: q.To, WorkflowID: h.imp, ErrorType: "validation"})
		if err != nil {
			t.Fatal(err)
		}
		if f.Total != 2 || f.Recovery.Closed != 1 || len(f.ByWorkflow) != 1 {
			t.Errorf("filtered: total %d closed %d byWorkflow %+v", f.Total, f.Recovery.Closed, f.ByWorkflow)
		}
	})
}

// TestRefreshIncremental: a refresh recomputes the days since the day before its last run;
// a failure recorded after it is counted by the next one, and nothing twice.
func TestRefreshIncremental(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		clock := modeltest.Clock(t, db)
		clock.Set(at(20, 12, 0))
		h := seedHistory(t, db)
		if _, err := db.RefreshAnalytics(ctx, h.org); err != nil {
			t.Fatal(err)
		}
		clock.Set(at(21, 12, 0))
		s := seeder{t: t, db: db, org: h.org}
		ex := s.execution(h.vat, "555", models.ExecFailed, at(21, 8, 0), at(21, 8, 0))
		s.attempt(ex, "submit", 1, models.StepFailed, "timeout", "", at(21, 8, 0))
		for range 2 {
			if _, err := db.RefreshAnalytics(ctx, h.org); err != nil {
				t.Fatal(err)
			}
		}
		r, err := analytics.New(db).Report(ctx, h.org, analytics.Query{From: at(17, 0, 0), To: at(21, 0, 0)})
		if err != nil {
			t.Fatal(err)
		}
		if r.Total != 9 || r.Failures[4].Total != 1 {
			t.Errorf("total %d, the 21st %+v; want 9 and 1", r.Total, r.Failures[4])
		}
	})
}

// TestRefreshReopen: a dead letter reopened after the refresh that counted its closing still
// counts as closed on the day it closed when that day is rebuilt, and closed again later
// counts once more on that day; times to resolution over 10 minutes are kept to the minute.
func TestRefreshReopen(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		clock := modeltest.Clock(t, db)
		clock.Set(at(20, 12, 0))
		org := models.Organization{ID: models.NewID(), Name: "Biuro Ponowne"}
		if err := db.Conn(ctx).Create(&org).Error; err != nil {
			t.Fatal(err)
		}
		s := seeder{t: t, db: db, org: org.ID}
		wf := s.workflow("KSeF", `{"steps": [{"id": "send", "type": "http"}]}`)
		g := s.group(wf, "send")
		dead := func(client, status string, created, closed time.Time) string {
			ex := s.execution(wf, client, models.ExecFailed, created, created)
			s.attempt(ex, "send", 1, models.StepDLQ, "timeout", "", created)
			return s.deadLetter(wf, ex, "send", "timeout", "", g, client, status, created, closed, nil)
		}
		a := dead("1", models.DLQResolved, at(19, 10, 0), at(19, 11, 0))                             // 3600 s
		dead("2", models.DLQResolved, at(19, 8, 0), time.Date(2026, 11, 19, 11, 0, 30, 0, time.UTC)) // 10830 s: 10800
		dead("3", models.DLQSkipped, at(19, 9, 0), time.Date(2026, 11, 19, 9, 5, 7, 0, time.UTC))    // 307 s
		report := func(to int) *analytics.Report {
			t.Helper()
			if _, err := db.RefreshAnalytics(ctx, org.ID); err != nil {
				t.Fatal(err)
			}
			r, err := analytics.New(db).Report(ctx, org.ID, analytics.Query{From: at(19, 0, 0), To: at(to, 0, 0)})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		if r := report(20); r.Recovery.Closed != 3 || r.DLQ[0].Closures != 3 {
			t.Fatalf("before the reopen: %+v %+v", r.Recovery, r.DLQ)
		}
		// Reopened the next day (as ReopenDeadLetter does), and the 19th rebuilt (the refresh
		// starts again the day before its last run).
		clock.Set(at(20, 13, 0))
		if err := db.Conn(ctx).Model(&models.DeadLetter{}).Where("id = ?", a).
			Updates(map[string]any{"status": models.DLQPending, "resolved_at": nil, "updated_at": at(20, 13, 0)}).Error; err != nil {
			t.Fatal(err)
		}
		clock.Set(at(20, 13, 5))
		if r := report(20); r.Recovery.Closed != 3 || r.Recovery.Resolved != 2 || r.DLQ[0].Closures != 3 || i64(r.TimeToResolution.Median) != 3600 {
			t.Errorf("after the reopen: %+v %+v median %d", r.Recovery, r.DLQ, i64(r.TimeToResolution.Median))
		}
		// Closed again on the 21st, 47 hours after it arrived.
		clock.Set(at(21, 9, 0))
		if err := db.Conn(ctx).Model(&models.DeadLetter{}).Where("id = ?", a).
			Updates(map[string]any{"status": models.DLQResolved, "resolved_at": at(21, 9, 0), "updated_at": at(21, 9, 0)}).Error; err != nil {
			t.Fatal(err)
		}
		clock.Set(at(21, 10, 0))
		r := report(21)
		if r.Recovery.Closed != 4 || r.Recovery.Resolved != 3 || r.Recovery.Skipped != 1 ||
			r.DLQ[0].Closures != 3 || r.DLQ[1].Closures != 0 || r.DLQ[2].Closures != 1 {
			t.Errorf("closed again: %+v %+v", r.Recovery, r.DLQ)
		}
		// 307, 3600, 10800 (10830 to the minute), 169200: median rank 2, p90 rank 4.
		if ttr := r.TimeToResolution; ttr.Count != 4 || i64(ttr.Median) != 3600 || i64(ttr.P90) != 169200 {
			t.Errorf("ttr %+v median %d p90 %d", ttr, i64(ttr.Median), i64(ttr.P90))
		}
		var byHow []string
		for _, d := range r.TimeToResolution.ByHow {
			byHow = append(byHow, fmt.Sprintf("%s:%d:%d", d.Key, d.Count, i64(d.Median)))
		}
		if want := []string{"resolved:3:10800", "skipped:1:307"}; !slices.Equal(byHow, want) {
			t.Errorf("ttr by how %v, want %v", byHow, want)
		}
	})
}
