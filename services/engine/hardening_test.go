package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/classify"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/outbound"
	"lifeline/services/steps"
	"lifeline/services/workflows"
)

// funcStep is a step type whose attempts run fn.
type funcStep struct {
	mu    sync.Mutex
	calls int
	fn    func(n int) (any, error)
}

func (f *funcStep) Validate(map[string]any) map[string]string { return nil }

func (f *funcStep) Run(_ context.Context, _ steps.Input) (any, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	return f.fn(n)
}

func (f *funcStep) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func loopbackSteps() *steps.Registry {
	return steps.Builtins(outbound.NewClient(outbound.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
}

// counter is a loopback service answering body with status, counting calls and their times.
type counter struct {
	mu     sync.Mutex
	times  []time.Time
	status int
	body   string
	// now is the clock of the times (default time.Now; a test moving the clock sets its).
	now func() time.Time
}

func (c *counter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	c.times = append(c.times, now())
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(c.status)
	fmt.Fprint(w, c.body)
}

func (c *counter) Times() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.times...)
}

func (h *harness) deadLetter(execID string) *models.DeadLetter {
	h.t.Helper()
	var dl models.DeadLetter
	if err := h.db.Conn(context.Background()).First(&dl, "execution_id = ?", execID).Error; err != nil {
		h.t.Fatalf("dead letter of %s: %v", execID, err)
	}
	return &dl
}

// Point 2: a result the database would refuse is made storable, not retried forever.
func TestUnstorableResultIsNormalised(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		st := &funcStep{fn: func(int) (any, error) {
			return map[string]any{"name": "Kowal\x00ski", "huge": json.Number("1e1000000"), "tiny": json.Number("1e-400"),
				"ok": json.Number("12.5"), "k\x00ey": true}, nil
		}}
		reg := loopbackSteps()
		reg.Register("odd", st)
		h := newHarnessWith(t, db, reg)
		ex := h.start(h.workflow(`{"name": "NUL", "steps": [
		    {"id": "fetch", "type": "odd", "config": {}},
		    {"id": "use", "type": "transform", "config": {"output": {"name": "{{ steps.fetch.output.name }}", "huge": "{{ steps.fetch.output.huge }}"}}}]}`), `{}`)
		if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecSucceeded {
			t.Fatalf("status %s, want SUCCEEDED; attempts %s", got.Status, h.describe(ex.ID))
		}
		if n := st.Calls(); n != 1 {
			t.Fatalf("%d calls, want exactly 1", n)
		}
		as := h.attempts(ex.ID)
		var out map[string]any
		if err := json.Unmarshal(as[0].Output, &out); err != nil {
			t.Fatal(err)
		}
		if out["name"] != "Kowalski" || out["huge"] != "1e1000000" || out["ok"] != 12.5 || out["key"] != true {
			t.Fatalf("stored output %s", as[0].Output)
		}
		var next map[string]any
		_ = json.Unmarshal(as[1].Output, &next)
		if next["name"] != "Kowalski" || next["huge"] != "1e1000000" {
			t.Fatalf("next step saw %s", as[1].Output)
		}
	})
}

// Point 2: the same through a real HTTP step: a JSON response with NUL and 1e1000000.
func TestUnstorableHTTPResponseIsNormalised(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		svc := &counter{status: 200, body: `{"name": "Kowal\u0000ski", "huge": 1e1000000, "ok": 12.5}`}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		h := newHarness(t, db)
		ex := h.start(h.workflow(fmt.Sprintf(`{"name": "NUL", "steps": [
		    {"id": "fetch", "type": "http", "config": {"url": %q}},
		    {"id": "use", "type": "transform", "config": {"output": {"name": "{{ steps.fetch.output.name }}"}}}]}`, srv.URL)), `{}`)
		if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecSucceeded {
			t.Fatalf("status %s, want SUCCEEDED; attempts %s", got.Status, h.describe(ex.ID))
		}
		if n := len(svc.Times()); n != 1 {
			t.Fatalf("%d calls, want exactly 1", n)
		}
		var out map[string]any
		if err := json.Unmarshal(h.attempts(ex.ID)[0].Output, &out); err != nil || out["name"] != "Kowalski" || out["huge"] != "1e1000000" || out["ok"] != 12.5 {
			t.Fatalf("stored output %s (%v)", h.attempts(ex.ID)[0].Output, err)
		}
	})
}

// Point 2: an error code longer than its column and a message with NUL are cut and cleaned;
// the failure is recorded once and reaches the DLQ.
func TestUnstorableErrorIsNormalised(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		long := strings.Repeat("VERY_LONG_CODE_", 20)
		st := &funcStep{fn: func(int) (any, error) {
			return nil, classify.New(classify.Permanent, long, "refused: \x00 bad byte")
		}}
		reg := loopbackSteps()
		reg.Register("refuse", st)
		h := newHarnessWith(t, db, reg)
		ex := h.start(h.workflow(`{"name": "Long", "steps": [{"id": "r", "type": "refuse", "config": {}}]}`), `{}`)
		if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecDLQPending {
			t.Fatalf("status %s, want DLQ_PENDING", got.Status)
		}
		if st.Calls() != 1 {
			t.Fatalf("%d calls, want 1", st.Calls())
		}
		a := h.attempts(ex.ID)[0]
		if a.ErrorCode == nil || len([]rune(*a.ErrorCode)) > 50 || !strings.HasPrefix(*a.ErrorCode, "VERY_LONG_CODE_") {
			t.Fatalf("error code %v", a.ErrorCode)
		}
		if a.ErrorMessage == nil || *a.ErrorMessage != "refused:  bad byte" {
			t.Fatalf("error message %q", *a.ErrorMessage)
		}
		h.deadLetter(ex.ID)
	})
}

// refuseOutput makes the database refuse any attempt update whose output mentions
// "poison", the way PostgreSQL refuses a value it cannot hold.
func refuseOutput(t *testing.T, db *models.DB) {
	t.Helper()
	stmts := []string{`CREATE TRIGGER refuse_poison BEFORE UPDATE ON step_executions
		WHEN NEW.output IS NOT NULL AND CAST(NEW.output AS TEXT) LIKE '%poison%'
		BEGIN SELECT RAISE(ABORT, 'value refused'); END`}
	if db.Dialect == models.Postgres {
		stmts = []string{`CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
			  IF NEW.output IS NOT NULL AND NEW.output::text LIKE '%poison%' THEN
			    RAISE EXCEPTION 'value refused' USING ERRCODE = '22023';
			  END IF;
			  RETURN NEW;
			END $$`,
			`CREATE TRIGGER refuse_poison BEFORE UPDATE ON step_executions FOR EACH ROW EXECUTE FUNCTION refuse_poison()`}
	}
	for _, s := range stmts {
		if err := db.Conn(context.Background()).Exec(s).Error; err != nil {
			t.Fatal(err)
		}
	}
}

// Point 2: a commit that fails for a reason that will not go away records the attempt as
// an internal failure that follows the retry policy and ends in the DLQ.
func TestRefusedCommitFollowsRetryPolicy(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		refuseOutput(t, db)
		svc := &counter{status: 200, body: `{"x": "poison"}`}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		clock := modeltest.Clock(t, db)
		h := newHarness(t, db)
		ex := h.start(h.workflow(fmt.Sprintf(`{"name": "Poison", "settings": {"retryPolicy": {"maxRetries": 1, "initialDelayMs": 1000,
		    "jitterRatio": 0, "retryOnErrors": ["transient", "internal"]}},
		  "steps": [{"id": "fetch", "type": "http", "config": {"url": %q}}]}`, srv.URL)), `{}`)
		if got := h.waitMoving(clock, ex.ID, 10*time.Second); got.Status != models.ExecDLQPending {
			t.Fatalf("status %s, want DLQ_PENDING", got.Status)
		}
		if n := len(svc.Times()); n != 2 {
			t.Fatalf("%d calls, want 2 (the first attempt and its one retry)", n)
		}
		for _, a := range h.attempts(ex.ID) {
			if a.ErrorType == nil || *a.ErrorType != "internal" || a.ErrorCode == nil || *a.ErrorCode != "STORE_RESULT" {
				t.Fatalf("attempt %d: %v %v", a.Attempt, a.ErrorType, a.ErrorCode)
			}
		}
	})
}

// Point 2: an attempt whose process died while running it MaxReclaims times goes to the
// DLQ with LEASE_EXHAUSTED instead of running again.
func TestLeaseExhausted(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		eng, _, reg, err := newStack(db, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		org := models.Organization{ID: models.NewID(), Name: "Biuro"}
		if err := db.Conn(ctx).Create(&org).Error; err != nil {
			t.Fatal(err)
		}
		wfs := &workflows.Service{DB: db, Steps: reg}
		wf, err := wfs.Create(ctx, org.ID, auditSystem, []byte(`{"name": "Crashy", "steps": [{"id": "t", "type": "transform", "config": {"output": {}}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		start := func() *models.Execution {
			ex, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID, Input: []byte(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			return ex
		}
		// Two attempts left RUNNING by dead processes: one reclaimed once before, one twice.
		once, twice := start(), start()
		past := time.Now().UTC().Add(-time.Hour)
		for ex, n := range map[*models.Execution]int{once: 1, twice: MaxReclaimsMinusOne()} {
			if err := db.Conn(ctx).Model(&models.StepAttempt{}).Where("execution_id = ?", ex.ID).
				Updates(map[string]any{"status": models.StepRunning, "lease_expires_at": past, "started_at": past, "reclaims": n}).Error; err != nil {
				t.Fatal(err)
			}
		}
		res, err := eng.Reconcile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Reclaimed != 1 || res.Exhausted != 1 {
			t.Fatalf("reconcile %+v, want 1 reclaimed and 1 exhausted", res)
		}
		var a models.StepAttempt
		db.Conn(ctx).First(&a, "execution_id = ?", once.ID)
		if a.Status != models.StepPending || a.Reclaims != 2 || a.Generation != 2 {
			t.Fatalf("reclaimed attempt %+v", a)
		}
		a = models.StepAttempt{}
		db.Conn(ctx).First(&a, "execution_id = ?", twice.ID)
		if a.Status != models.StepDLQ || a.ErrorCode == nil || *a.ErrorCode != "LEASE_EXHAUSTED" || *a.ErrorType != "internal" {
			t.Fatalf("exhausted attempt %+v", a)
		}
		var ex models.Execution
		db.Conn(ctx).First(&ex, "id = ?", twice.ID)
		var dl models.DeadLetter
		if ex.Status != models.ExecDLQPending || db.Conn(ctx).First(&dl, "execution_id = ?", twice.ID).Error != nil {
			t.Fatalf("execution %s, dead letter %+v", ex.Status, dl)
		}
	})
}

// MaxReclaimsMinusOne is the reclaim count after which the next lease expiry exhausts.
func MaxReclaimsMinusOne() int { return engine.MaxReclaims - 1 }

// Point 3: a stored version is decoded, not validated again; a step type that is no longer
// registered is a permanent failure (STEP_TYPE) that reaches the DLQ.
func TestStoredDefinitionIsNotRevalidated(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		h := newHarness(t, db) // the engine knows http, transform and delay only

		// Saved by a process that had the "legacy" step type.
		withLegacy := loopbackSteps()
		withLegacy.Register("legacy", &funcStep{fn: func(int) (any, error) { return "ok", nil }})
		old := &workflows.Service{DB: db, Steps: withLegacy}
		wf, err := old.Create(ctx, h.org, auditSystem, []byte(`{"name": "Legacy", "steps": [{"id": "l", "type": "legacy", "config": {}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		ex := h.start(wf, `{}`)
		if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecDLQPending {
			t.Fatalf("status %s, want DLQ_PENDING", got.Status)
		}
		as := h.attempts(ex.ID)
		if len(as) != 1 || *as[0].ErrorCode != "STEP_TYPE" || *as[0].ErrorType != "permanent" {
			t.Fatalf("attempts %+v", as)
		}

		// A rule tightened since the version was saved (timeoutMs below today's minimum).
		wf2 := h.workflow(`{"name": "Old rules", "steps": [{"id": "t", "type": "transform", "timeoutMs": 5000, "config": {"output": {"a": 1}}}]}`)
		if err := db.Conn(ctx).Exec(`UPDATE workflow_versions SET definition = ? WHERE workflow_id = ?`,
			`{"name": "Old rules", "settings": {}, "steps": [{"id": "t", "type": "transform", "timeoutMs": 5, "config": {"output": {"a": 1}}}]}`, wf2.ID).Error; err != nil {
			t.Fatal(err)
		}
		ex2 := h.start(wf2, `{}`)
		if got := h.wait(ex2.ID, 20*time.Second); got.Status != models.ExecSucceeded {
			t.Fatalf("status %s, want SUCCEEDED", got.Status)
		}
	})
}

// Point 4: the reconciler repairs only attempts without a live job; a backlog keeps its order.
func TestReconcileRepairsOnlyAttemptsWithoutALiveJob(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		eng, _, reg, err := newStack(db, testLogger(t)) // not started: jobs wait in the queue
		if err != nil {
			t.Fatal(err)
		}
		org := models.Organization{ID: models.NewID(), Name: "Biuro"}
		if err := db.Conn(ctx).Create(&org).Error; err != nil {
			t.Fatal(err)
		}
		wf, err := (&workflows.Service{DB: db, Steps: reg}).Create(ctx, org.ID, auditSystem,
			[]byte(`{"name": "Backlog", "steps": [{"id": "t", "type": "transform", "config": {"output": {}}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for range 6 {
			ex, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID, Input: []byte(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, ex.ID)
		}
		// Every attempt has been waiting for a minute: a backlog.
		if err := db.Conn(ctx).Model(&models.StepAttempt{}).Where("organization_id = ?", org.ID).
			Update("scheduled_at", time.Now().UTC().Add(-time.Minute)).Error; err != nil {
			t.Fatal(err)
		}
		res, err := eng.Reconcile(ctx)
		if err != nil || res.Requeued != 0 {
			t.Fatalf("backlog: %+v %v; queued attempts must keep their jobs", res, err)
		}

		attemptOf := func(execID string) models.StepAttempt {
			var a models.StepAttempt
			db.Conn(ctx).First(&a, "execution_id = ?", execID)
			return a
		}
		jobWhere := "kind = 'run_attempt' AND json_extract(args, '$.attempt_id') = ?"
		if db.Dialect == models.Postgres {
			jobWhere = "kind = 'run_attempt' AND args->>'attempt_id' = ?"
		}
		// ids[0]: its job vanished (a crash between commit and enqueue).
		if err := db.Conn(ctx).Exec("DELETE FROM river_job WHERE "+jobWhere, attemptOf(ids[0]).ID).Error; err != nil {
			t.Fatal(err)
		}
		// ids[1]: taken a minute ago by a worker that died before claiming it.
		// ids[2]: taken just now by a live worker about to claim it.
		// ids[3]: its job finished (completed) without the attempt moving: lost.
		long, now := "now() - interval '1 minute'", "now()"
		if db.Dialect == models.SQLite {
			long, now = "strftime('%Y-%m-%d %H:%M:%f', 'now', '-60 seconds')", "strftime('%Y-%m-%d %H:%M:%f', 'now')"
		}
		for _, u := range []struct {
			id, set string
		}{{ids[1], "state = 'running', attempted_at = " + long}, {ids[2], "state = 'running', attempted_at = " + now},
			{ids[3], "state = 'completed', finalized_at = " + now}} {
			if err := db.Conn(ctx).Exec("UPDATE river_job SET "+u.set+" WHERE "+jobWhere, attemptOf(u.id).ID).Error; err != nil {
				t.Fatal(err)
			}
		}
		res, err = eng.Reconcile(ctx)
		if err != nil || res.Requeued != 3 {
			t.Fatalf("reconcile %+v %v, want 3 requeued", res, err)
		}
		for i, id := range ids {
			want := 1
			if i <= 1 || i == 3 {
				want = 2
			}
			if g := attemptOf(id).Generation; g != want {
				t.Errorf("execution %d: generation %d, want %d", i, g, want)
			}
		}
	})
}

// Point 5: an execution retries under the policy of the version it started on.
func TestRetryPolicyIsVersioned(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		svc := &counter{status: 503, body: `{}`}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		clock := modeltest.Clock(t, db)
		h := newHarness(t, db)
		def := func(maxRetries int) string {
			return fmt.Sprintf(`{"name": "Versioned", "settings": {"retryPolicy": {"maxRetries": %d, "initialDelayMs": 1000, "backoffMultiplier": 1, "jitterRatio": 0}},
			  "steps": [{"id": "fetch", "type": "http", "config": {"url": %q}}]}`, maxRetries, srv.URL)
		}
		wf := h.workflow(def(2))
		ex := h.start(wf, `{}`)
		deadline := time.Now().Add(10 * time.Second)
		for len(svc.Times()) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("first attempt never ran")
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Saved while the execution waits for its first retry: no retries from now on.
		if _, err := h.wfs.Update(context.Background(), h.org, wf.ID, auditSystem, []byte(def(0))); err != nil {
			t.Fatal(err)
		}
		if got := h.waitMoving(clock, ex.ID, 10*time.Second); got.Status != models.ExecDLQPending {
			t.Fatalf("status %s", got.Status)
		}
		if n := len(svc.Times()); n != 3 {
			t.Fatalf("%d calls, want 3: the version the execution started on allows 2 retries", n)
		}
		// A new execution uses the new version: one call, no retry.
		before := len(svc.Times())
		h.waitMoving(clock, h.start(wf, `{}`).ID, 10*time.Second)
		if n := len(svc.Times()) - before; n != 1 {
			t.Fatalf("new execution: %d calls, want 1", n)
		}
	})
}

// Point 6: when a retry fires is decided by the database clock. The application's clock
// (River's included) runs 5 minutes ahead of the database: River takes every job the moment
// it is queued, and the retry must still wait for its 2 s. The test moves the database clock
// to the retry's time once it has seen that the retry did not run before.
func TestRetryTimingIgnoresSkewedAppClock(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		clock := modeltest.Clock(t, db)
		svc := &counter{status: 503, body: `{}`, now: clock.Now}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		reg := loopbackSteps()
		eng, runner, err := wire(db, testLogger(t), reg, engine.Config{LeaseGrace: time.Second, PendingGrace: time.Second},
			jobs.Config{ReconcileEvery: time.Second, FetchPollInterval: 50 * time.Millisecond, TestOnly: true,
				Clock: func() time.Time { return clock.Now().Add(5 * time.Minute) }})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := runner.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = runner.Stop(ctx)
		})
		org := models.Organization{ID: models.NewID(), Name: "Biuro"}
		if err := db.Conn(ctx).Create(&org).Error; err != nil {
			t.Fatal(err)
		}
		h := &harness{t: t, db: db, eng: eng, runner: runner, wfs: &workflows.Service{DB: db, Steps: reg}, org: org.ID}
		ex := h.start(h.workflow(fmt.Sprintf(`{"name": "Skew", "settings": {"retryPolicy": {"maxRetries": 1, "initialDelayMs": 2000, "backoffType": "fixed", "jitterRatio": 0}},
		  "steps": [{"id": "fetch", "type": "http", "config": {"url": %q}}]}`, srv.URL)), `{}`)
		next := h.pendingAttempt(ex.ID, 2, 10*time.Second)
		clock.Set(next.ScheduledAt.Add(-time.Second))
		time.Sleep(300 * time.Millisecond) // River, five minutes ahead, takes the job at once
		if n := len(svc.Times()); n != 1 {
			t.Fatalf("%d calls a second before the retry's time, want 1", n)
		}
		clock.Set(next.ScheduledAt)
		h.wait(ex.ID, 10*time.Second)
		ts := svc.Times()
		if len(ts) != 2 {
			t.Fatalf("%d calls, want 2", len(ts))
		}
		// Never early; and not five minutes late, the skew.
		if gap := ts[1].Sub(ts[0]); gap < 1900*time.Millisecond || gap > 5*time.Second {
			t.Fatalf("retry came %s after the first attempt, want about 2s", gap)
		}
	})
}

func (h *harness) describe(execID string) string {
	var b strings.Builder
	for _, a := range h.attempts(execID) {
		fmt.Fprintf(&b, "\n  %s #%d %s out=%s", a.StepID, a.Attempt, a.Status, a.Output)
		if a.ErrorMessage != nil {
			fmt.Fprintf(&b, " %s %s: %s", deref(a.ErrorType), deref(a.ErrorCode), *a.ErrorMessage)
		}
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Point 12: a URL whose scheme is not http or https is a permanent failure that no retry
// policy retries, even one that retries permanent errors.
func TestBadSchemeIsNeverRetried(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		ex := h.start(h.workflow(`{"name": "Scheme", "settings": {"retryPolicy": {"maxRetries": 3, "initialDelayMs": 1000,
		    "retryOnErrors": ["permanent", "transient"]}},
		  "steps": [{"id": "fetch", "type": "http", "config": {"url": "{{ input.target }}"}}]}`), `{"target": "file:///etc/passwd"}`)
		if got := h.wait(ex.ID, 20*time.Second); got.Status != models.ExecDLQPending {
			t.Fatalf("status %s, want DLQ_PENDING", got.Status)
		}
		as := h.attempts(ex.ID)
		if len(as) != 1 || deref(as[0].ErrorCode) != "URL_SCHEME" || deref(as[0].ErrorType) != "permanent" {
			t.Fatalf("attempts %s", h.describe(ex.ID))
		}
	})
}

// Throughput: a succeeded step claims its successor in the same commit and the same worker
// runs it, with no queue round trip; after the chain budget (25 steps) the next step goes
// back to the queue, so a long execution yields to others. (Before chaining, every step
// had its own job: 50.)
func TestChainedStepsYieldAfterBudget(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		h := newHarness(t, db)
		var stepsDef []string
		for i := range 50 {
			stepsDef = append(stepsDef, fmt.Sprintf(`{"id": "s%d", "type": "transform", "config": {"output": {"n": %d}}}`, i, i))
		}
		ex := h.start(h.workflow(`{"name": "Long", "steps": [`+strings.Join(stepsDef, ",")+`]}`), `{}`)
		if got := h.wait(ex.ID, 30*time.Second); got.Status != models.ExecSucceeded {
			t.Fatalf("status %s", got.Status)
		}
		as := h.attempts(ex.ID)
		if len(as) != 50 {
			t.Fatalf("%d attempts, want 50", len(as))
		}
		ids := make([]any, len(as))
		for i, a := range as {
			if a.Status != models.StepSucceeded || a.Attempt != 1 {
				t.Fatalf("attempt %+v", a)
			}
			ids[i] = a.ID
		}
		where := "kind = 'run_attempt' AND json_extract(args, '$.attempt_id') IN ?"
		if db.Dialect == models.Postgres {
			where = "kind = 'run_attempt' AND args->>'attempt_id' IN ?"
		}
		var jobs int64
		if err := db.Conn(context.Background()).Table("river_job").Where(where, ids).Count(&jobs).Error; err != nil {
			t.Fatal(err)
		}
		// One job for the first step, then one each time the budget ran out: 50 steps in
		// chains of at most 25 need at least 2 jobs, and far fewer than one per step.
		if jobs < 2 || jobs > 15 {
			t.Fatalf("%d queue jobs for 50 steps: want chains (≥ 2 jobs: the budget yields; ≤ 15: steps are chained)", jobs)
		}
	})
}
