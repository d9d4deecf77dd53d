package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/outbound"
	"lifeline/services/steps"
	"lifeline/services/workflows"
)

// crashChildEnv marks the re-executed test binary that plays the engine process.
const crashChildEnv = "LIFELINE_CRASH_CHILD"

// crashClockEnv is the engine process's clock offset at its start, in nanoseconds ahead of
// the real clock. On SQLite a process's clock is its own (the database has none to move), so
// the parent tells each engine process how far it moved its clock: at the start through this
// variable, and afterwards by writing each new offset as a line to the process's stdin. On
// PostgreSQL the shift lives in the database and the process reads it there.
const crashClockEnv = "LIFELINE_CRASH_CLOCK"

// newStack builds an engine and its River runner the way newHarness does, without starting
// the runner: an unstarted runner still inserts jobs, so a process can start executions
// without working them.
func newStack(db *models.DB, log *slog.Logger) (*engine.Engine, *jobs.Runner, *steps.Registry, error) {
	return newStackWith(db, log, steps.Builtins(outbound.NewClient(outbound.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})))
}

// newStackWith builds the engine and an unstarted runner over the step types of reg.
func newStackWith(db *models.DB, log *slog.Logger, reg *steps.Registry) (*engine.Engine, *jobs.Runner, *steps.Registry, error) {
	return newStackConfig(db, log, reg, engine.Config{})
}

// newStackConfig is newStackWith with the engine's notifier and databases from cfg.
func newStackConfig(db *models.DB, log *slog.Logger, reg *steps.Registry, cfg engine.Config) (*engine.Engine, *jobs.Runner, *steps.Registry, error) {
	eng, runner, err := wire(db, log, reg,
		engine.Config{LeaseGrace: time.Second, PendingGrace: time.Second, Notifier: cfg.Notifier, Databases: cfg.Databases},
		jobs.Config{ReconcileEvery: 500 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, TestOnly: true})
	if err != nil {
		return nil, nil, nil, err
	}
	return eng, runner, reg, nil
}

// wire builds the stack in serve's order: the queue, the engine over reg queueing with it
// (ecfg.Queue is set here), then the unstarted runner whose workers call the engine.
func wire(db *models.DB, log *slog.Logger, reg *steps.Registry, ecfg engine.Config, jcfg jobs.Config) (*engine.Engine, *jobs.Runner, error) {
	queue, err := jobs.NewQueue(db, jcfg, log)
	if err != nil {
		return nil, nil, err
	}
	ecfg.Queue = queue
	eng := engine.New(db, reg, log, ecfg)
	runner, err := jobs.New(db, eng, queue, jcfg, log)
	if err != nil {
		return nil, nil, err
	}
	return eng, runner, nil
}

// TestCrashChild is not a test: it is the engine process of TestCrashRecovery, which runs
// this binary again with LIFELINE_CRASH_CHILD=1 and DATABASE_URL set, and kills it with
// SIGKILL. It works jobs until killed, or until its stdin closes (the parent died).
func TestCrashChild(t *testing.T) {
	if os.Getenv(crashChildEnv) != "1" {
		t.Skip("helper process of TestCrashRecovery")
	}
	ctx := context.Background()
	db, err := models.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		os.Exit(3)
	}
	// The clock comes before the stack: River reads a SQLite database's clock when built.
	clock := modeltest.Clock(t, db)
	follow := func(line string) {
		offset, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: clock offset:", err)
			os.Exit(3)
		}
		if db.Dialect == models.SQLite {
			clock.Advance(time.Duration(offset) - clock.Offset())
		}
	}
	if off := os.Getenv(crashClockEnv); off != "" {
		follow(off)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	_, runner, _, err := newStack(db, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: runner:", err)
		os.Exit(3)
	}
	if err := runner.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child: start:", err)
		os.Exit(3)
	}
	fmt.Fprintln(os.Stderr, "child: working")
	for in := bufio.NewScanner(os.Stdin); in.Scan(); {
		follow(in.Text()) // the parent moved the clock
	}
	os.Exit(4) // the parent went away without killing us
}

// openDialect opens a new test database of dialect (closed when t ends) and returns its URL,
// for engine processes of its own to work on.
func openDialect(t *testing.T, dialect string) (string, *models.DB) {
	t.Helper()
	url := modeltest.URL(t, dialect)
	db, err := models.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return url, db
}

// child is a running engine process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bytes.Buffer
	done  chan struct{}
}

// startChild runs the engine in a new process on url, with the clock where clock has moved
// it (see crashClockEnv); t's cleanup kills it.
// crashChildApp is the application_name of an engine child's PostgreSQL sessions.
const crashChildApp = "lifeline-crash-child"

func startChild(t *testing.T, url, name string, clock *modeltest.MovableClock) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.timeout=5m")
	if strings.HasPrefix(url, "postgres") {
		// Named, so that a test can wait for the server to be done with a dead child's sessions.
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		url += sep + "application_name=" + crashChildApp
	}
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", "DATABASE_URL="+url,
		crashClockEnv+"="+strconv.FormatInt(int64(clock.Offset()), 10))
	c := &child{cmd: cmd, out: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		c.kill(t)
		if t.Failed() {
			t.Logf("%s output:\n%s", name, c.out.String())
		}
	})
	return c
}

// followClock tells the engine processes kids where clock now reads (SQLite).
func followClock(clock *modeltest.MovableClock, kids ...*child) {
	for _, c := range kids {
		// A process that died (or was killed) reads no more; its pipe's error says nothing.
		_, _ = fmt.Fprintf(c.stdin, "%d\n", int64(clock.Offset()))
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill(t *testing.T) {
	_ = c.cmd.Process.Kill()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Errorf("process %d did not die after SIGKILL", c.cmd.Process.Pid)
	}
	_ = c.stdin.Close()
}

// ledger is a loopback service with side effects deduplicated by Idempotency-Key. Some
// keys answer slowly so that attempts are in flight when the engine dies; attempt 1 of a
// deterministic subset of steps fails with 503 (every time that key is sent, as an
// idempotent service would answer a replay), so retries are scheduled when it dies.
type ledger struct {
	mu       sync.Mutex
	requests []string            // Idempotency-Key of every request, in arrival order
	applied  map[string]struct{} // keys whose side effect was applied (once)
}

func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	l.mu.Lock()
	l.requests = append(l.requests, key)
	l.mu.Unlock()
	time.Sleep(crashDelay(key))
	w.Header().Set("Content-Type", "application/json")
	if crashFails(key) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error": "try again"}`)
		return
	}
	l.mu.Lock()
	if l.applied == nil {
		l.applied = map[string]struct{}{}
	}
	l.applied[key] = struct{}{}
	l.mu.Unlock()
	fmt.Fprintf(w, `{"ok": true, "key": %q}`, key)
}

func (l *ledger) snapshot() (requests []string, applied map[string]struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	applied = make(map[string]struct{}, len(l.applied))
	for k := range l.applied {
		applied[k] = struct{}{}
	}
	return append([]string(nil), l.requests...), applied
}

func hash32(parts ...string) uint32 {
	h := fnv.New32a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum32()
}

// parseKey splits "wf:EXEC:step:STEP:attempt:N".
func parseKey(key string) (execID, stepID string, attempt int, ok bool) {
	p := strings.Split(key, ":")
	if len(p) != 6 || p[0] != "wf" || p[2] != "step" || p[4] != "attempt" {
		return "", "", 0, false
	}
	n, err := strconv.Atoi(p[5])
	return p[1], p[3], n, err == nil
}

// crashDelay: a quarter of the keys answer at once, the rest in 50–150 ms.
func crashDelay(key string) time.Duration {
	h := hash32("delay", key)
	if h%4 == 0 {
		return 0
	}
	return time.Duration(50+h%100) * time.Millisecond
}

// crashFails: attempt 1 of about a third of the (execution, step) pairs fails.
func crashFails(key string) bool {
	execID, stepID, attempt, ok := parseKey(key)
	return ok && attempt == 1 && hash32("fail", execID, stepID)%3 == 0
}

var crashSteps = []string{"reserve", "charge", "ship", "notify"}

// crashTimeout is the crash tests' step timeout. With the stack's LeaseGrace it is the lease
// of a RUNNING attempt, which the tests' moves of the clock must stay well inside while a
// request is in flight (a request lasts at most crashDelay's 150 ms, during which the clock
// moves at most a few retry delays); the kill then moves the clock past it.
const crashTimeout = 30 * time.Second

// riverLeaderTTL is how long River's leadership lasts unless its holder renews it (River's
// elect interval, 5 s, plus 10 s of padding; not configurable). A killed leader renews
// nothing: the next process leads, and runs the reconciler, once the clock passes it.
const riverLeaderTTL = 15 * time.Second

// afterKill moves the clock past the lease of whatever a killed process left RUNNING and past
// its River leadership, as the time a real restart takes would.
const afterKill = crashTimeout + time.Second + riverLeaderTTL

// moveToNextRetryIn moves the clock to the organization's next due attempt or compensation,
// when that is later than the clock reads, in this process and in the engine processes kids.
// Each move is at most a retry delay, which keeps a request in flight well inside its lease.
func moveToNextRetryIn(t *testing.T, db *models.DB, clock *modeltest.MovableClock, orgID string, kids ...*child) {
	t.Helper()
	ctx := context.Background()
	var next time.Time
	var a []models.StepAttempt
	if err := db.Conn(ctx).Where("organization_id = ? AND status = ? AND waiting_breaker_id IS NULL", orgID, models.StepPending).
		Order("scheduled_at").Limit(1).Find(&a).Error; err != nil {
		t.Fatal(err)
	}
	if len(a) == 1 {
		next = a[0].ScheduledAt
	}
	var c []models.CompensationAction
	if err := db.Conn(ctx).Where("organization_id = ? AND status = ? AND scheduled_at IS NOT NULL", orgID, models.CompPending).
		Order("scheduled_at").Limit(1).Find(&c).Error; err != nil {
		t.Fatal(err)
	}
	if len(c) == 1 && (next.IsZero() || c[0].ScheduledAt.Before(next)) {
		next = *c[0].ScheduledAt
	}
	if next.After(clock.Now()) {
		clock.Set(next)
		followClock(clock, kids...)
	}
}

func crashDef(url string) string {
	var ss []string
	for _, id := range crashSteps {
		ss = append(ss, fmt.Sprintf(`{"id": %q, "type": "http", "timeoutMs": %d,
		  "config": {"method": "POST", "url": "%s/%s", "body": {"order": "{{ input.order }}"}}}`, id, crashTimeout.Milliseconds(), url, id))
	}
	return fmt.Sprintf(`{"name": "Order", "settings": {"retryPolicy": %s, "circuitBreaker": {"enabled": false}}, "steps": [%s]}`, fastPolicy, strings.Join(ss, ","))
}

// crashState is what the parent sees of the engine process while deciding when to kill it.
type crashState struct {
	running   int64 // attempts RUNNING
	succeeded int64 // executions SUCCEEDED
	retries   int64 // retries (attempt > 1) PENDING
	taken     int64 // PENDING attempts whose job River already marked running: taken, not yet claimed
}

// crashMoments are the instants TestCrashRecovery kills the engine at.
var crashMoments = []struct {
	name string
	now  func(crashState) bool
}{
	// Requests in flight, executions done, retries scheduled.
	{"mid-flight", func(s crashState) bool { return s.running >= 3 && s.succeeded >= 2 && s.retries >= 1 }},
	// Jobs taken off the queue whose attempts are not claimed yet: the reconciler must
	// not wait for River to rescue those jobs (75 minutes).
	{"just-taken", func(s crashState) bool { return s.taken >= 1 && s.running >= 1 }},
}

// TestCrashRecovery kills the engine process with SIGKILL, starts another on the same
// database, and checks that nothing was lost and no attempt ran twice: only attempts
// RUNNING at the kill are sent again, with the same idempotency key, and each step's side
// effect is applied once.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts engine processes; about 25 s per subtest")
	}
	t.Parallel()
	for _, dialect := range modeltest.Dialects {
		for _, m := range crashMoments {
			t.Run(dialect+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				testCrashRecovery(t, dialect, m.now)
			})
		}
	}
}

func testCrashRecovery(t *testing.T, dialect string, killNow func(crashState) bool) {
	ctx := context.Background()
	url := modeltest.URL(t, dialect)
	db, err := models.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	clock := modeltest.Clock(t, db) // before the stack: River reads a SQLite database's clock when built

	svc := &ledger{}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)

	// Start the executions here, with a runner that only inserts jobs.
	eng, _, reg, err := newStack(db, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	org := models.Organization{ID: models.NewID(), Name: "Biuro Testowe"}
	if err := db.Conn(ctx).Create(&org).Error; err != nil {
		t.Fatal(err)
	}
	wf, err := (&workflows.Service{DB: db, Steps: reg}).Create(ctx, org.ID, audit.System, []byte(crashDef(srv.URL)))
	if err != nil {
		t.Fatal(err)
	}
	const executions = 25
	for i := range executions {
		_, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID,
			Input: fmt.Appendf(nil, `{"order": "ZAM/%03d"}`, i), Trigger: engine.TriggerAPI})
		if err != nil {
			t.Fatal(err)
		}
	}

	count := func(q string, args ...any) int64 {
		var n int64
		if err := db.Conn(ctx).Raw(q, args...).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	attempts := func() []models.StepAttempt {
		var as []models.StepAttempt
		if err := db.Conn(ctx).Where("organization_id = ?", org.ID).Order("execution_id, step_index, attempt").Find(&as).Error; err != nil {
			t.Fatal(err)
		}
		return as
	}

	// River's job table, read to find jobs taken but not yet claimed.
	takenQ := `SELECT COUNT(*) FROM step_executions s JOIN river_job j ON j.kind = 'run_attempt' AND j.state = 'running'
	  AND json_extract(j.args, '$.attempt_id') = s.id AND json_extract(j.args, '$.generation') = s.generation
	  WHERE s.organization_id = ? AND s.status = ?`
	if dialect == models.Postgres {
		takenQ = `SELECT COUNT(*) FROM step_executions s JOIN river_job j ON j.kind = 'run_attempt' AND j.state = 'running'
		  AND j.args->>'attempt_id' = s.id::text AND (j.args->>'generation')::int = s.generation
		  WHERE s.organization_id = ? AND s.status = ?`
	}

	// Child 1 works until the moment comes; then it is killed.
	first := startChild(t, url, "engine 1", clock)
	deadline := time.Now().Add(60 * time.Second)
	var st crashState
	for {
		st = crashState{
			running:   count("SELECT COUNT(*) FROM step_executions WHERE organization_id = ? AND status = ?", org.ID, models.StepRunning),
			succeeded: count("SELECT COUNT(*) FROM workflow_executions WHERE organization_id = ? AND status = ?", org.ID, models.ExecSucceeded),
			retries:   count("SELECT COUNT(*) FROM step_executions WHERE organization_id = ? AND status = ? AND attempt > 1", org.ID, models.StepPending),
			taken:     count(takenQ, org.ID, models.StepPending),
		}
		if killNow(st) {
			break
		}
		if st.succeeded == executions || time.Now().After(deadline) {
			t.Fatalf("no moment to kill at; last seen %+v", st)
		}
		if st.retries >= 1 { // retries are scheduled: let them fall due
			moveToNextRetryIn(t, db, clock, org.ID, first)
		}
		time.Sleep(2 * time.Millisecond)
	}
	first.kill(t)
	killedAt := time.Now()
	if db.Dialect == models.Postgres {
		// The server may still be running what the process sent just before it died (a group
		// commit of step results): it commits that, and only then is the process's work all
		// in the database.
		// A session of the dead process looks idle while the server has not yet read what the
		// process sent last (a batch still in the socket): wait for its sessions to end, which
		// the server does only after running what it had received.
		for waitUntil := time.Now().Add(10 * time.Second); count(`SELECT COUNT(*) FROM pg_stat_activity
		  WHERE datname = current_database() AND pid <> pg_backend_pid() AND (application_name = ? OR state NOT IN ('idle', 'disabled'))`, crashChildApp) > 0; {
			if time.Now().After(waitUntil) {
				t.Fatal("the dead process's statements still run 10 s after the kill")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// What the dead process left in flight.
	inFlight := map[string]models.StepAttempt{} // by idempotency key
	for _, a := range attempts() {
		if a.Status == models.StepRunning {
			inFlight[a.IdempotencyKey] = a
		}
	}
	t.Logf("killed with %d attempts RUNNING; at the last poll %+v", len(inFlight), st)
	if len(inFlight) == 0 {
		t.Fatal("no attempt was RUNNING at the kill")
	}

	// Child 2 recovers. Its reconciler starts once the dead process's River leadership expires
	// and takes back the attempts left RUNNING once their leases expire: the clock moves past
	// both, as the time a restart takes would.
	clock.Advance(afterKill)
	second := startChild(t, url, "engine 2", clock)
	deadline = time.Now().Add(90 * time.Second)
	for {
		open := count("SELECT COUNT(*) FROM workflow_executions WHERE organization_id = ? AND status NOT IN ?", org.ID,
			[]string{models.ExecSucceeded, models.ExecFailed, models.ExecDLQPending})
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			var stuck []string
			for _, a := range attempts() {
				if a.Status == models.StepRunning || a.Status == models.StepPending {
					stuck = append(stuck, fmt.Sprintf("%s %s (gen %d, scheduled %s)", a.IdempotencyKey, a.Status, a.Generation, a.ScheduledAt.Format(time.RFC3339Nano)))
				}
			}
			t.Fatalf("%d executions not final %s after the kill; open attempts:\n%s", open, time.Since(killedAt), strings.Join(stuck, "\n"))
		}
		moveToNextRetryIn(t, db, clock, org.ID, second)
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("recovered %s after the kill", time.Since(killedAt).Round(time.Millisecond))
	second.kill(t)

	// Nothing lost: every execution succeeded (failures were transient and retried).
	var exs []models.Execution
	if err := db.Conn(ctx).Where("organization_id = ?", org.ID).Find(&exs).Error; err != nil {
		t.Fatal(err)
	}
	if len(exs) != executions {
		t.Fatalf("%d executions, want %d", len(exs), executions)
	}
	for _, ex := range exs {
		if ex.Status != models.ExecSucceeded {
			t.Errorf("execution %s is %s, want SUCCEEDED", ex.ID, ex.Status)
		}
	}

	// Attempts: numbered 1..n per step, one success, which is the last; none left open.
	requests, applied := svc.snapshot()
	all := attempts()
	byKey := map[string]models.StepAttempt{}
	type stepKey struct{ exec, step string }
	perStep := map[stepKey][]models.StepAttempt{}
	for _, a := range all {
		if _, dup := byKey[a.IdempotencyKey]; dup {
			t.Errorf("two attempt rows share idempotency key %s", a.IdempotencyKey)
		}
		byKey[a.IdempotencyKey] = a
		k := stepKey{a.ExecutionID, a.StepID}
		perStep[k] = append(perStep[k], a)
	}
	if len(perStep) != executions*len(crashSteps) {
		t.Errorf("%d (execution, step) pairs have attempts, want %d", len(perStep), executions*len(crashSteps))
	}
	for k, as := range perStep {
		for i, a := range as {
			if a.Attempt != i+1 {
				t.Errorf("%s/%s: attempt numbers %v are not 1..n", k.exec, k.step, attemptNumbers(as))
				break
			}
			last := i == len(as)-1
			switch {
			case last && a.Status != models.StepSucceeded, !last && a.Status != models.StepRetrying:
				t.Errorf("%s: status %s", a.IdempotencyKey, a.Status)
			}
		}
		// Each step's side effect applied once: exactly one of its keys is in the ledger,
		// and it is the key of the succeeded attempt.
		var keys []string
		for _, a := range as {
			if _, ok := applied[a.IdempotencyKey]; ok {
				keys = append(keys, a.IdempotencyKey)
			}
		}
		if last := as[len(as)-1]; len(keys) != 1 || keys[0] != last.IdempotencyKey {
			t.Errorf("%s/%s: ledger holds keys %v, want just the succeeded attempt's %s", k.exec, k.step, keys, last.IdempotencyKey)
		}
	}
	for key := range applied {
		if _, ok := byKey[key]; !ok {
			t.Errorf("ledger key %s has no attempt row", key)
		}
	}

	// Only attempts in flight at the kill were sent again, and with their own key: the
	// reclaimed row kept its id and attempt number and moved to a later generation.
	sent := map[string]int{}
	for _, key := range requests {
		sent[key]++
	}
	repeats := 0
	for key, n := range sent {
		if n == 1 {
			continue
		}
		repeats += n - 1
		before, ok := inFlight[key]
		if !ok {
			t.Errorf("key %s was sent %d times but its attempt was not in flight at the kill", key, n)
			continue
		}
		after := byKey[key]
		if after.ID != before.ID || after.Attempt != before.Attempt || after.Generation <= before.Generation {
			t.Errorf("key %s: in flight as attempt %d (row %s, gen %d), re-ran as attempt %d (row %s, gen %d)", key,
				before.Attempt, before.ID, before.Generation, after.Attempt, after.ID, after.Generation)
		}
	}
	if repeats > len(inFlight) {
		t.Errorf("%d requests repeated a key, but only %d attempts were in flight at the kill", repeats, len(inFlight))
	}
	for key, a := range byKey {
		if sent[key] == 0 {
			t.Errorf("attempt %s (%s) never reached the service", key, a.Status)
		}
	}

	// Every attempt left in flight was reclaimed, and recorded as such.
	var rows []models.AuditEntry
	if err := db.Conn(ctx).Where("organization_id = ? AND action = ?", org.ID, "execution.reclaimed").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	reclaimed := map[string]bool{}
	for _, r := range rows {
		var d struct {
			IdempotencyKey string `json:"idempotencyKey"`
		}
		if err := json.Unmarshal(r.Details, &d); err != nil {
			t.Fatalf("audit details %s: %v", r.Details, err)
		}
		reclaimed[d.IdempotencyKey] = true
	}
	if len(rows) == 0 {
		t.Fatal("no execution.reclaimed in the audit log: nothing was recovered from the crash")
	}
	for key, before := range inFlight {
		if !reclaimed[key] {
			t.Errorf("attempt %s was in flight at the kill but not reclaimed", key)
		}
		if after := byKey[key]; after.Generation <= before.Generation {
			t.Errorf("attempt %s: generation %d after the kill, %d before", key, after.Generation, before.Generation)
		}
	}
	t.Logf("%d requests for %d attempts; %d repeated a key; %d reclaimed", len(requests), len(all), repeats, len(rows))
}

func attemptNumbers(as []models.StepAttempt) []int {
	out := make([]int, len(as))
	for i, a := range as {
		out[i] = a.Attempt
	}
	return out
}
