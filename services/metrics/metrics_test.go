package metrics_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/riverqueue/river/rivertype"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/metrics"
	"lifeline/services/outbound"
	"lifeline/services/steps"
	"lifeline/services/workflows"
)

// stack is the engine and its queue, wired as serve wires them, told of by m.
type stack struct {
	db  *models.DB
	eng *engine.Engine
	wfs *workflows.Service
}

func newStack(t *testing.T, db *models.DB, obs engine.Observer, mw ...rivertype.Middleware) *stack {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := steps.Builtins(outbound.NewClient(outbound.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
	jcfg := jobs.Config{ReconcileEvery: 500 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, TestOnly: true, Middleware: mw}
	queue, err := jobs.NewQueue(db, jcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(db, reg, log, engine.Config{Queue: queue, LeaseGrace: time.Second, PendingGrace: time.Second, Observer: obs})
	runner, err := jobs.New(db, eng, queue, jcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = runner.Stop(ctx)
	})
	return &stack{db: db, eng: eng, wfs: &workflows.Service{DB: db, Steps: reg}}
}

func (s *stack) org(t *testing.T, name string) string {
	t.Helper()
	o := models.Organization{ID: models.NewID(), Name: name}
	if err := s.db.Conn(context.Background()).Create(&o).Error; err != nil {
		t.Fatal(err)
	}
	return o.ID
}

// workflow saves a one-step workflow that POSTs to url, retried once after a second.
func (s *stack) workflow(t *testing.T, org, name, url string) *models.Workflow {
	t.Helper()
	wf, err := s.wfs.Create(context.Background(), org, audit.System, []byte(fmt.Sprintf(`{"name": %q,
	  "settings": {"retryPolicy": {"maxRetries": 1, "initialDelayMs": 1000, "backoffMultiplier": 1, "jitterRatio": 0}},
	  "steps": [{"id": "fetch", "type": "http", "config": {"method": "POST", "url": %q, "body": {"nip": "{{ input.nip }}"}}}]}`, name, url)))
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

func (s *stack) start(t *testing.T, org string, wf *models.Workflow, input string) *models.Execution {
	t.Helper()
	ex, _, err := s.eng.Start(context.Background(), engine.StartRequest{OrganizationID: org, WorkflowID: wf.ID, Input: []byte(input), Trigger: engine.TriggerAPI})
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// wait polls until the execution reaches want.
func (s *stack) wait(t *testing.T, id, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ex models.Execution
		if err := s.db.Conn(context.Background()).First(&ex, "id = ?", id).Error; err != nil {
			t.Fatal(err)
		}
		if ex.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s is %s, want %s", id, ex.Status, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// service answers 503 while failing is set, and 200 with a JSON body otherwise.
type service struct{ failing atomic.Bool }

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if s.failing.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error": "busy"}`)
		return
	}
	fmt.Fprint(w, `{"ok": true}`)
}

// TestCountersMoveByOnePerEvent runs executions through the real engine, in two
// organizations: each attempt, retry, move to the DLQ and replay moves its counter by
// exactly one, an idempotent repeat of a replay moves nothing, and every label value is
// from the bounded set (workflow ids, error types, modes, organizations), never an
// execution's id.
func TestCountersMoveByOnePerEvent(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		m := metrics.New(db, nil)
		s := newStack(t, db, m, m.River())
		failing, fine := &service{}, &service{}
		failing.failing.Store(true)
		fsrv, osrv := httptest.NewServer(failing), httptest.NewServer(fine)
		defer fsrv.Close()
		defer osrv.Close()
		orgA, orgB := s.org(t, "Biuro A"), s.org(t, "Biuro B")
		wfA, wfB := s.workflow(t, orgA, "VAT", fsrv.URL), s.workflow(t, orgB, "JPK", osrv.URL)

		// Org A: two executions, each fails, retries once, fails again and is dead-lettered.
		a1, a2 := s.start(t, orgA, wfA, `{"nip": "5260250274"}`), s.start(t, orgA, wfA, `{"nip": "1234563218"}`)
		// Org B: two executions that succeed at once.
		b1, b2 := s.start(t, orgB, wfB, `{"nip": "5260250274"}`), s.start(t, orgB, wfB, `{"nip": "1234563218"}`)
		for _, id := range []string{a1.ID, a2.ID} {
			s.wait(t, id, models.ExecDLQPending)
		}
		for _, id := range []string{b1.ID, b2.ID} {
			s.wait(t, id, models.ExecSucceeded)
		}
		var errType string
		if err := db.Conn(context.Background()).Model(&models.StepAttempt{}).Where("execution_id = ? AND attempt = 1", a1.ID).
			Pluck("error_type", &errType).Error; err != nil || errType == "" {
			t.Fatalf("the failed attempt's error type: %q, %v", errType, err)
		}
		// An attempt is counted after its commit, which the polling above may see first.
		g := gatherUntil(t, m, func(g families) bool {
			return g.total(metrics.NameAttempts, labels{"workflow": wfA.ID}) == 4 && g.total(metrics.NameAttempts, labels{"workflow": wfB.ID}) == 2 &&
				g.total(metrics.NameDuration, labels{"step_type": "http"}) == 6
		})
		g.want(t, metrics.NameAttempts, labels{"workflow": wfA.ID, "outcome": "failed", "error_type": errType}, 4)
		g.want(t, metrics.NameAttempts, labels{"workflow": wfB.ID, "outcome": "succeeded", "error_type": ""}, 2)
		g.want(t, metrics.NameRetries, labels{"workflow": wfA.ID, "error_type": errType}, 2)
		g.want(t, metrics.NameDLQMoves, labels{"workflow": wfA.ID, "error_type": errType}, 2)
		g.absent(t, metrics.NameRetries, labels{"workflow": wfB.ID})
		g.absent(t, metrics.NameReplays, labels{})
		g.wantCount(t, metrics.NameDuration, labels{"step_type": "http", "outcome": "failed"}, 4)
		g.wantCount(t, metrics.NameDuration, labels{"step_type": "http", "outcome": "succeeded"}, 2)
		g.want(t, metrics.NamePending, labels{"organization": orgA}, 2)
		g.absent(t, metrics.NamePending, labels{"organization": orgB})

		// The service is back: one dead letter is replayed (twice, with one idempotency key).
		failing.failing.Store(false)
		var dl models.DeadLetter
		if err := db.Conn(context.Background()).First(&dl, "execution_id = ?", a1.ID).Error; err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := s.eng.Replay(context.Background(), engine.ReplayRequest{OrganizationID: orgA, DeadLetterID: dl.ID,
				Mode: engine.ReplayFromFailed, Actor: audit.System, IdempotencyKey: "replay-1"}); err != nil {
				t.Fatal(err)
			}
		}
		s.wait(t, a1.ID, models.ExecSucceeded)
		g = gatherUntil(t, m, func(g families) bool {
			return g.total(metrics.NameAttempts, labels{"workflow": wfA.ID}) == 5 && g.total(metrics.NameDuration, labels{"step_type": "http"}) == 7 &&
				g.total(metrics.NameJobRun, labels{"queue": "default", "kind": "run_attempt", "outcome": "ok"}) > 0
		})
		g.want(t, metrics.NameReplays, labels{"workflow": wfA.ID, "mode": engine.ReplayFromFailed}, 1)
		g.want(t, metrics.NameAttempts, labels{"workflow": wfA.ID, "outcome": "succeeded", "error_type": ""}, 1)
		g.want(t, metrics.NameAttempts, labels{"workflow": wfA.ID, "outcome": "failed", "error_type": errType}, 4)
		g.want(t, metrics.NameDLQMoves, labels{"workflow": wfA.ID, "error_type": errType}, 2)
		g.want(t, metrics.NamePending, labels{"organization": orgA}, 1)
		g.wantCount(t, metrics.NameJobRun, labels{"queue": "default", "kind": "run_attempt", "outcome": "ok"}, -1)

		// Bounded labels: workflows are ids, organizations are the two, and no execution,
		// dead letter or correlation id is a label value anywhere.
		forbidden := map[string]bool{dl.ID: true}
		for _, ex := range []*models.Execution{a1, a2, b1, b2} {
			forbidden[ex.ID], forbidden[ex.CorrelationID] = true, true
		}
		allowed := map[string]map[string]bool{
			"workflow":     {wfA.ID: true, wfB.ID: true},
			"organization": {orgA: true, orgB: true},
			"outcome":      {"succeeded": true, "failed": true, "ok": true, "error": true},
			"error_type":   {"": true, errType: true},
			"mode":         {engine.ReplayFromFailed: true},
			"step_type":    {"http": true},
		}
		for _, f := range g {
			for _, mt := range f.GetMetric() {
				for _, l := range mt.GetLabel() {
					if forbidden[l.GetValue()] {
						t.Errorf("%s has label %s=%q, an id of one execution", f.GetName(), l.GetName(), l.GetValue())
					}
					if set, ok := allowed[l.GetName()]; ok && !set[l.GetValue()] {
						t.Errorf("%s has label %s=%q, outside the bounded set", f.GetName(), l.GetName(), l.GetValue())
					}
				}
			}
		}
	})
}

// TestBreakerAndQueueGauges: each breaker is one series valued 0 closed, 1 half-open, 2
// open, labelled by what it guards; River's unfinished jobs are counted by queue and state.
func TestBreakerAndQueueGauges(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org := models.Organization{ID: models.NewID(), Name: "Biuro"}
		if err := db.Conn(ctx).Create(&org).Error; err != nil {
			t.Fatal(err)
		}
		reg := steps.Builtins(outbound.NewClient(outbound.Options{}))
		w, err := (&workflows.Service{DB: db, Steps: reg}).Create(ctx, org.ID, audit.System, []byte(`{"name": "VAT",
		  "steps": [{"id": "fetch", "type": "http", "config": {"method": "GET", "url": "https://api.example.com/"}},
		            {"id": "other", "type": "http", "config": {"method": "GET", "url": "https://api.example.com/"}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		wf, step, host := w.ID, "fetch", "api.example.com"
		now := time.Now().UTC()
		rows := []models.CircuitBreaker{
			{ID: models.NewID(), OrganizationID: org.ID, ScopeKey: "step:" + wf + ":fetch", WorkflowID: &wf, StepID: &step, State: "open", OpenedAt: &now},
			{ID: models.NewID(), OrganizationID: org.ID, ScopeKey: "host:api.example.com", Host: &host, State: "half_open"},
			{ID: models.NewID(), OrganizationID: org.ID, ScopeKey: "step:" + wf + ":other", WorkflowID: &wf, StepID: ptr("other"), State: "closed"},
			// Open for longer than its reset timeout: the next call is a trial, so half-open;
			// unless an admin forced it open.
			{ID: models.NewID(), OrganizationID: org.ID, ScopeKey: "step:" + wf + ":late", WorkflowID: &wf, StepID: ptr("late"), State: "open", OpenedAt: ptr(now.Add(-time.Minute))},
			{ID: models.NewID(), OrganizationID: org.ID, ScopeKey: "step:" + wf + ":forced", WorkflowID: &wf, StepID: ptr("forced"), State: "open", Forced: true, OpenedAt: ptr(now.Add(-time.Minute))},
		}
		for i := range rows {
			rows[i].FailureThreshold, rows[i].ResetTimeoutMs, rows[i].HalfOpenRequests = 5, 30000, 1
			rows[i].CreatedAt, rows[i].UpdatedAt = now, now
			if err := db.Conn(ctx).Create(&rows[i]).Error; err != nil {
				t.Fatal(err)
			}
		}
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		q, err := jobs.NewQueue(db, jobs.Config{}, log)
		if err != nil {
			t.Fatal(err)
		}
		// Three attempt jobs for later: queued, not worked (no runner).
		at := time.Now().Add(time.Hour)
		if err := q.Enqueue(ctx, []engine.Job{{AttemptID: models.NewID(), Generation: 1, RunAt: at},
			{AttemptID: models.NewID(), Generation: 1, RunAt: at}, {AttemptID: models.NewID(), Generation: 1, RunAt: at}}); err != nil {
			t.Fatal(err)
		}
		g := gather(t, metrics.New(db, nil))
		g.want(t, metrics.NameBreaker, labels{"organization": org.ID, "workflow": wf, "step": step, "host": ""}, 2)
		g.want(t, metrics.NameBreaker, labels{"organization": org.ID, "workflow": "", "step": "", "host": host}, 1)
		g.want(t, metrics.NameBreaker, labels{"organization": org.ID, "workflow": wf, "step": "other", "host": ""}, 0)
		g.want(t, metrics.NameBreaker, labels{"organization": org.ID, "workflow": wf, "step": "late", "host": ""}, 1)
		g.want(t, metrics.NameBreaker, labels{"organization": org.ID, "workflow": wf, "step": "forced", "host": ""}, 2)
		g.want(t, metrics.NameQueueDepth, labels{"queue": "default", "state": "available"}, 3)
	})
}

func ptr[T any](v T) *T { return &v }

type labels map[string]string

type families []*dto.MetricFamily

func gather(t *testing.T, m *metrics.Metrics) families {
	t.Helper()
	fs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// gatherUntil gathers until ok accepts the figures, or for 10 s (then the caller's checks
// say what is missing): an event is counted after the commit a test can see first.
func gatherUntil(t *testing.T, m *metrics.Metrics, ok func(families) bool) families {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g := gather(t, m)
		if ok(g) || time.Now().After(deadline) {
			return g
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// total is the sum of the series of name whose labels include want: counters' and gauges'
// values, histograms' sample counts.
func (g families) total(name string, want labels) float64 {
	sum := 0.0
	for _, m := range g.find(name, want) {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
	}
	return sum
}

// find returns the series of name whose labels include want.
func (g families) find(name string, want labels) []*dto.Metric {
	var out []*dto.Metric
	for _, f := range g {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue series
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// want checks the one series of name with exactly these labels has value v.
func (g families) want(t *testing.T, name string, l labels, v float64) {
	t.Helper()
	ms := g.find(name, l)
	if len(ms) != 1 {
		t.Errorf("%s%v: %d series, want 1 (%s)", name, l, len(ms), g.names())
		return
	}
	got := ms[0].GetCounter().GetValue() + ms[0].GetGauge().GetValue()
	if got != v {
		t.Errorf("%s%v = %v, want %v", name, l, got, v)
	}
}

// wantCount checks the histogram series of name with these labels observed n values (n < 0:
// at least one).
func (g families) wantCount(t *testing.T, name string, l labels, n int) {
	t.Helper()
	ms := g.find(name, l)
	if len(ms) != 1 {
		t.Errorf("%s%v: %d series, want 1 (%s)", name, l, len(ms), g.names())
		return
	}
	got := int(ms[0].GetHistogram().GetSampleCount())
	if (n < 0 && got < 1) || (n >= 0 && got != n) {
		t.Errorf("%s%v counted %d, want %d", name, l, got, n)
	}
}

func (g families) absent(t *testing.T, name string, l labels) {
	t.Helper()
	if ms := g.find(name, l); len(ms) != 0 {
		t.Errorf("%s%v: %d series, want none", name, l, len(ms))
	}
}

func (g families) names() string {
	var out []string
	for _, f := range g {
		if !strings.HasPrefix(f.GetName(), "go_") && !strings.HasPrefix(f.GetName(), "process_") {
			out = append(out, fmt.Sprintf("%s:%d", f.GetName(), len(f.GetMetric())))
		}
	}
	return strings.Join(out, " ")
}
