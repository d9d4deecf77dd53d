package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/workflows"
)

// chaosEnv selects the chaos test's size: "full" is the size of the issue (1,000 executions,
// 20 kills; `make chaos`); unset, the test runs small enough for `make test`.
// LIFELINE_CHAOS_SEED replays the kill moments of an earlier run (the test logs its seed).
const chaosEnv = "LIFELINE_CHAOS"

type chaosSize struct {
	executions int
	kills      int
	full       bool
	// gap is the range of the random time an engine process works before it is killed.
	gapMin, gapMax time.Duration
	// drain bounds the time the last process has to finish everything.
	drain time.Duration
}

func chaosSizeFromEnv() chaosSize {
	if os.Getenv(chaosEnv) == "full" {
		return chaosSize{executions: 1000, kills: 20, full: true, gapMin: time.Second, gapMax: 4 * time.Second, drain: 5 * time.Minute}
	}
	// drain is a bound for a stuck system, not a speed goal: under -race, beside the handlers'
	// race run on two cores, the last process once needed more than 90 s for work still
	// moving (attempts scheduled seconds before the bound).
	return chaosSize{executions: 60, kills: 4, gapMin: 500 * time.Millisecond, gapMax: 2 * time.Second, drain: 3 * time.Minute}
}

// chaosSteps are the steps of the chaos workflow; each calls the chaos ledger.
var chaosSteps = []string{"reserve", "charge", "invoice", "ship", "notify"}

// chaosMaxRetries is the stored policy's retry count: a step that fails at random
// (chaosFailPercent of its keys) practically always succeeds within it; a doomed step
// exhausts it and goes to the DLQ.
const (
	chaosMaxRetries  = 10
	chaosFailPercent = 30
	chaosTimeoutMs   = 2000
)

// chaosPolicy retries after 100–200 ms. It is below what a saved definition may ask for
// (initialDelayMs ≥ 1000), so the test writes it into the stored version, which the engine
// decodes without validating again.
var chaosPolicy = fmt.Sprintf(`{"maxRetries": %d, "initialDelayMs": 150, "maxDelayMs": 1000, "backoffType": "fixed", "jitterRatio": 0.33}`, chaosMaxRetries)

func chaosDef(url, policy string) string {
	var ss []string
	for _, id := range chaosSteps {
		ss = append(ss, fmt.Sprintf(`{"id": %q, "type": "http", "timeoutMs": %d,
		  "config": {"method": "POST", "url": "%s/%s", "body": {"order": "{{ input.order }}"}}}`, id, chaosTimeoutMs, url, id))
	}
	return fmt.Sprintf(`{"name": "Chaos", "settings": {"retryPolicy": %s, "circuitBreaker": {"enabled": false}}, "steps": [%s]}`, policy, strings.Join(ss, ","))
}

// chaosDoomed: about one (execution, step) pair in 40 fails on every attempt (its execution
// ends in the DLQ once the retries are exhausted).
func chaosDoomed(execID, stepID string) bool { return hash32("chaos-doomed", execID, stepID)%40 == 0 }

// chaosFails says whether the ledger answers 503 to a key: always for a doomed step, else
// for chaosFailPercent of the keys. The answer depends on the key only, so a key sent again
// (a reclaimed attempt) gets the answer it got the first time, as from an idempotent service.
func chaosFails(key string) bool {
	execID, stepID, _, ok := parseKey(key)
	if !ok {
		return true
	}
	return chaosDoomed(execID, stepID) || hash32("chaos-fail", key)%100 < chaosFailPercent
}

// chaosDelay: a quarter of the keys answer at once, the rest within 20–320 ms (well inside
// the step's 2 s timeout), so that attempts are in flight when a process is killed.
func chaosDelay(key string) time.Duration {
	h := hash32("chaos-delay", key)
	if h%4 == 0 {
		return 0
	}
	return time.Duration(20+h%300) * time.Millisecond
}

// chaosLedger is a loopback service that applies a side effect per Idempotency-Key, at most
// once: a key seen again gets the same answer and applies nothing. It applies the effect
// before it answers (after a delay), so a process killed in between leaves an effect applied
// whose attempt was never recorded; its reclaimed attempt must send the same key.
type chaosLedger struct {
	mu      sync.Mutex
	sent    map[string]int // requests per key
	applied map[string]int // side effects applied per key (the service deduplicates: 0 or 1)
	bad     []string       // requests without a well-formed key
}

func (l *chaosLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	fails := chaosFails(key)
	l.mu.Lock()
	if l.sent == nil {
		l.sent, l.applied = map[string]int{}, map[string]int{}
	}
	l.sent[key]++
	if _, _, _, ok := parseKey(key); !ok {
		l.bad = append(l.bad, fmt.Sprintf("%s %s key %q", r.Method, r.URL.Path, key))
	} else if !fails && l.applied[key] == 0 {
		l.applied[key] = 1
	}
	l.mu.Unlock()
	time.Sleep(chaosDelay(key))
	w.Header().Set("Content-Type", "application/json")
	if fails {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error": "try again"}`)
		return
	}
	fmt.Fprintf(w, `{"ok": true, "key": %q}`, key)
}

func (l *chaosLedger) snapshot() (sent, applied map[string]int, bad []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sent, applied = map[string]int{}, map[string]int{}
	for k, v := range l.sent {
		sent[k] = v
	}
	for k, v := range l.applied {
		applied[k] = v
	}
	return sent, applied, append([]string(nil), l.bad...)
}

// TestChaos runs executions of five http steps that fail at random against a ledger, while
// the engine process is killed with SIGKILL at random moments and started again, K times.
// Then it verifies: every execution SUCCEEDED or is in the DLQ with its dead letter; no
// attempt is left open; each step's attempts are numbered 1..n, the last one final; each
// succeeded step's side effect was applied exactly once, under its succeeded attempt's key,
// and no attempt that recorded a definite failure applied one; a key was sent again only by
// an attempt reclaimed from a dead process.
//
// Default size: 60 executions, 4 kills. LIFELINE_CHAOS=full (make chaos): 1,000 and 20.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts engine processes")
	}
	t.Parallel()
	size := chaosSizeFromEnv()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LIFELINE_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LIFELINE_CHAOS_SEED: %v", err)
		}
		seed = v
	}
	for _, dialect := range modeltest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			testChaos(t, dialect, size, seed)
		})
	}
}

func testChaos(t *testing.T, dialect string, size chaosSize, seed uint64) {
	ctx := context.Background()
	began := time.Now()
	t.Logf("%d executions, %d kills, seed %d (LIFELINE_CHAOS_SEED)", size.executions, size.kills, seed)
	rng := rand.New(rand.NewPCG(seed, hash64(dialect)))
	url := modeltest.URL(t, dialect)
	db, err := models.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	clock := modeltest.Clock(t, db) // never moved: the chaos runs in real time

	svc := &chaosLedger{}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)

	// This process starts executions (its runner only inserts jobs); child processes work them.
	eng, _, reg, err := newStack(db, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	org := models.Organization{ID: models.NewID(), Name: "Biuro Testowe"}
	if err := db.Conn(ctx).Create(&org).Error; err != nil {
		t.Fatal(err)
	}
	wf, err := (&workflows.Service{DB: db, Steps: reg}).Create(ctx, org.ID, audit.System, []byte(chaosDef(srv.URL, fastPolicy)))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Conn(ctx).Exec(`UPDATE workflow_versions SET definition = ? WHERE workflow_id = ?`, chaosDef(srv.URL, chaosPolicy), wf.ID).Error; err != nil {
		t.Fatal(err)
	}

	count := func(q string, args ...any) int64 {
		var n int64
		if err := db.Conn(ctx).Raw(q, args...).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	running := func() int64 {
		return count("SELECT COUNT(*) FROM step_executions WHERE organization_id = ? AND status = ?", org.ID, models.StepRunning)
	}
	open := func() int64 {
		return count("SELECT COUNT(*) FROM workflow_executions WHERE organization_id = ? AND status NOT IN ?", org.ID,
			[]string{models.ExecSucceeded, models.ExecFailed, models.ExecDLQPending})
	}

	// Executions are started in waves, one as each process starts, so that every process
	// has work when it is killed.
	started := 0
	startWave := func(wave int) {
		n := size.executions * (wave + 1) / (size.kills + 1)
		for ; started < n; started++ {
			if _, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID,
				Input: fmt.Appendf(nil, `{"order": "ZAM/%04d"}`, started), Trigger: engine.TriggerAPI}); err != nil {
				t.Fatal(err)
			}
		}
	}

	interrupted := 0 // kills that found attempts RUNNING
	var last *child
	for i := 0; ; i++ {
		c := startChild(t, url, fmt.Sprintf("engine %d", i+1), clock)
		startWave(i)
		if i == size.kills {
			last = c
			break
		}
		gap := size.gapMin + time.Duration(rng.Int64N(int64(size.gapMax-size.gapMin)))
		time.Sleep(gap)
		// A random moment, but one with work in flight (waiting at most a second for it).
		for deadline := time.Now().Add(time.Second); running() == 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		c.kill(t)
		r := running()
		if r > 0 {
			interrupted++
		}
		t.Logf("kill %d after %s: %d attempts RUNNING, %d of %d started executions open", i+1, gap.Round(time.Millisecond), r, open(), started)
		if !size.full {
			// The dead process may have been River's leader, which runs the reconciler; its
			// leadership would last up to 15 s more. At full size the test waits for that,
			// as a real deployment would; here it lets the next process take over at once.
			if err := db.Conn(ctx).Exec("DELETE FROM river_leader").Error; err != nil {
				t.Fatal(err)
			}
		}
	}
	killedAt := time.Now()

	// The last process finishes everything.
	deadline := killedAt.Add(size.drain)
	for open() > 0 {
		if time.Now().After(deadline) {
			var stuck []models.StepAttempt
			db.Conn(ctx).Where("organization_id = ? AND status IN ?", org.ID, []string{models.StepRunning, models.StepPending}).
				Order("scheduled_at").Limit(20).Find(&stuck)
			var lines []string
			for _, a := range stuck {
				lines = append(lines, fmt.Sprintf("%s %s gen %d reclaims %d scheduled %s lease %v", a.IdempotencyKey, a.Status,
					a.Generation, a.Reclaims, a.ScheduledAt.Format(time.RFC3339Nano), a.LeaseExpiresAt))
			}
			t.Fatalf("%d executions still open %s after the last kill; open attempts (first 20):\n%s", open(), size.drain, strings.Join(lines, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	drained := time.Since(killedAt)
	last.kill(t)
	time.Sleep(50 * time.Millisecond) // requests the last process had sent may still be answering

	st := verifyChaos(t, db, org.ID, size.executions, svc)
	var reclaimed int64
	if err := db.Conn(ctx).Model(&models.AuditEntry{}).Where("organization_id = ? AND action = ?", org.ID, "execution.reclaimed").
		Count(&reclaimed).Error; err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d executions (%d SUCCEEDED, %d in the DLQ, %d of them LEASE_EXHAUSTED), %d attempts (%d retries), %d requests, "+
		"%d keys sent again, %d reclaims; %d of %d kills interrupted work; drained %s after the last kill; %s in all",
		dialect, size.executions, st.succeeded, st.dlq, st.exhausted, st.attempts, st.retries, st.requests, st.resent, reclaimed,
		interrupted, size.kills, drained.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))

	// The run must have exercised what it claims to: failures, and kills that interrupted
	// attempts which the reconciler then took back.
	if st.retries == 0 {
		t.Error("no attempt was retried: the ledger's failures did not happen")
	}
	if interrupted == 0 || reclaimed == 0 {
		t.Errorf("%d kills found attempts running and %d attempts were reclaimed: the kills interrupted nothing", interrupted, reclaimed)
	}
}

func hash64(s string) uint64 { return uint64(hash32("seed", s))<<32 | uint64(hash32("seed2", s)) }

type chaosStats struct {
	succeeded, dlq, exhausted int
	attempts, retries         int
	requests, resent          int
}

// verifyChaos checks the end state of the chaos test (see TestChaos).
func verifyChaos(t *testing.T, db *models.DB, orgID string, executions int, svc *chaosLedger) chaosStats {
	t.Helper()
	ctx := context.Background()
	var st chaosStats
	errs := 0
	fail := func(format string, args ...any) {
		t.Helper()
		if errs++; errs <= 40 {
			t.Errorf(format, args...)
		}
	}
	defer func() {
		if errs > 40 {
			t.Errorf("… and %d more problems", errs-40)
		}
	}()

	var exs []models.Execution
	if err := db.Conn(ctx).Where("organization_id = ?", orgID).Find(&exs).Error; err != nil {
		t.Fatal(err)
	}
	if len(exs) != executions {
		fail("%d executions, want %d", len(exs), executions)
	}
	var as []models.StepAttempt
	if err := db.Conn(ctx).Where("organization_id = ?", orgID).Order("execution_id, step_index, attempt").Find(&as).Error; err != nil {
		t.Fatal(err)
	}
	var dls []models.DeadLetter
	if err := db.Conn(ctx).Where("organization_id = ?", orgID).Find(&dls).Error; err != nil {
		t.Fatal(err)
	}
	dlqOf := map[string][]models.DeadLetter{}
	for _, d := range dls {
		dlqOf[d.ExecutionID] = append(dlqOf[d.ExecutionID], d)
	}
	sent, applied, bad := svc.snapshot()
	for _, b := range bad {
		fail("the ledger got a request without a well-formed Idempotency-Key: %s", b)
	}
	for _, n := range sent {
		st.requests += n
	}

	// Attempts by execution and step, in order.
	type stepKey struct{ exec, step string }
	perStep := map[stepKey][]models.StepAttempt{}
	byKey := map[string]models.StepAttempt{}
	st.attempts = len(as)
	for _, a := range as {
		if _, dup := byKey[a.IdempotencyKey]; dup {
			fail("two attempt rows have the idempotency key %s", a.IdempotencyKey)
		}
		byKey[a.IdempotencyKey] = a
		if want := engine.IdempotencyKey(a.ExecutionID, a.StepID, a.Attempt); a.IdempotencyKey != want {
			fail("attempt %d of %s/%s has key %s, want %s", a.Attempt, a.ExecutionID, a.StepID, a.IdempotencyKey, want)
		}
		if a.Attempt > 1 {
			st.retries++
		}
		k := stepKey{a.ExecutionID, a.StepID}
		perStep[k] = append(perStep[k], a)
	}

	for _, ex := range exs {
		// The steps with attempts form a prefix of the workflow; all but the last succeeded.
		var reached int
		for i, id := range chaosSteps {
			if len(perStep[stepKey{ex.ID, id}]) > 0 {
				if reached != i {
					fail("%s: step %s has attempts but step %s has none", ex.ID, id, chaosSteps[reached])
				}
				reached = i + 1
			}
		}
		var lastStatus string
		for i := range reached {
			sa := perStep[stepKey{ex.ID, chaosSteps[i]}]
			lastStatus = sa[len(sa)-1].Status
			if i < reached-1 && lastStatus != models.StepSucceeded {
				fail("%s: step %s ended %s but the next step ran", ex.ID, chaosSteps[i], lastStatus)
			}
		}
		switch ex.Status {
		case models.ExecSucceeded:
			st.succeeded++
			if reached != len(chaosSteps) || lastStatus != models.StepSucceeded {
				fail("%s is SUCCEEDED but %d of its %d steps have attempts, the last %s", ex.ID, reached, len(chaosSteps), lastStatus)
			}
			if len(dlqOf[ex.ID]) != 0 {
				fail("%s is SUCCEEDED but has %d dead letters", ex.ID, len(dlqOf[ex.ID]))
			}
		case models.ExecDLQPending:
			st.dlq++
			if reached == 0 || lastStatus != models.StepDLQ {
				fail("%s is DLQ_PENDING but its last step with attempts ended %q", ex.ID, lastStatus)
				continue
			}
			failed := chaosSteps[reached-1]
			if d := dlqOf[ex.ID]; len(d) != 1 || d[0].Status != models.DLQPending || d[0].FailedStepID != failed {
				fail("%s is DLQ_PENDING at step %s; its dead letters: %+v", ex.ID, failed, d)
			}
			sa := perStep[stepKey{ex.ID, failed}]
			a := sa[len(sa)-1]
			switch {
			case deref(a.ErrorCode) == "LEASE_EXHAUSTED":
				st.exhausted++
			case a.Attempt == chaosMaxRetries+1 && deref(a.ErrorCode) == "HTTP_503":
				// retries exhausted: every key of the step failed (checked below)
			default:
				fail("%s went to the DLQ at %s for an unexpected reason: attempt %d, %s %s: %s", ex.ID, a.IdempotencyKey, a.Attempt,
					deref(a.ErrorType), deref(a.ErrorCode), deref(a.ErrorMessage))
			}
		default:
			fail("execution %s is %s, want SUCCEEDED or DLQ_PENDING", ex.ID, ex.Status)
		}
	}
	for id, d := range dlqOf {
		found := false
		for _, ex := range exs {
			found = found || ex.ID == id
		}
		if !found {
			fail("dead letter %s names execution %s of no execution here", d[0].ID, id)
		}
	}

	for k, sa := range perStep {
		var appliedKeys, mayApply []string // keys the ledger applied; keys whose attempt may have applied one
		for i, a := range sa {
			if a.Attempt != i+1 {
				fail("%s/%s: attempt numbers %v are not 1..n", k.exec, k.step, attemptNumbers(sa))
				break
			}
			last := i == len(sa)-1
			switch {
			case a.Status == models.StepRunning || a.Status == models.StepPending:
				fail("attempt %s is stuck %s (generation %d, reclaims %d)", a.IdempotencyKey, a.Status, a.Generation, a.Reclaims)
			case last && a.Status != models.StepSucceeded && a.Status != models.StepDLQ, !last && a.Status != models.StepRetrying:
				fail("attempt %s is %s (attempt %d of %d)", a.IdempotencyKey, a.Status, a.Attempt, len(sa))
			}
			if applied[a.IdempotencyKey] > 0 {
				appliedKeys = append(appliedKeys, a.IdempotencyKey)
			}
			switch {
			case a.Status == models.StepSucceeded:
				mayApply = append(mayApply, a.IdempotencyKey)
				if applied[a.IdempotencyKey] != 1 {
					fail("attempt %s SUCCEEDED but the ledger applied its key %d times", a.IdempotencyKey, applied[a.IdempotencyKey])
				}
				if !jsonHas(a.Output, "key", a.IdempotencyKey) {
					fail("attempt %s SUCCEEDED with output %s, not the ledger's answer to its key", a.IdempotencyKey, a.Output)
				}
			case deref(a.ErrorCode) == "HTTP_503":
				// A definite failure: the ledger answered 503 to this key, and so applied nothing.
				if !chaosFails(a.IdempotencyKey) {
					fail("attempt %s recorded HTTP 503 but the ledger answers that key 200", a.IdempotencyKey)
				}
			default:
				// A timeout or a lease exhausted: the request may have reached the ledger.
				mayApply = append(mayApply, a.IdempotencyKey)
			}
			// A key is sent again only by an attempt reclaimed from a dead process.
			if n := sent[a.IdempotencyKey]; n > 1+a.Reclaims {
				fail("key %s was sent %d times, but its attempt was reclaimed only %d times", a.IdempotencyKey, n, a.Reclaims)
			}
			if n := sent[a.IdempotencyKey]; n == 0 && (a.Status == models.StepSucceeded || deref(a.ErrorCode) == "HTTP_503") {
				fail("attempt %s is %s (%s) but its key never reached the ledger", a.IdempotencyKey, a.Status, deref(a.ErrorCode))
			}
		}
		for _, key := range appliedKeys {
			if !slices.Contains(mayApply, key) {
				fail("%s/%s: the ledger applied key %s, whose attempt recorded %s", k.exec, k.step, key, byKey[key].Status)
			}
		}
		if len(appliedKeys) > 1 {
			fail("%s/%s: the side effect was applied %d times, under keys %v", k.exec, k.step, len(appliedKeys), appliedKeys)
		}
	}
	for key, n := range applied {
		if n != 1 {
			fail("the ledger applied key %s %d times", key, n)
		}
		if _, ok := byKey[key]; !ok {
			fail("the ledger applied key %s, which has no attempt row", key)
		}
	}
	for key, n := range sent {
		if n > 1 {
			st.resent++
		}
		if _, ok := byKey[key]; !ok {
			fail("key %s reached the ledger but has no attempt row", key)
		}
	}
	return st
}
