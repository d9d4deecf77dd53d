package engine_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/outbound"
	"lifeline/services/steps"
	"lifeline/services/workflows"
)

// The benchmarks measure batches, not single executions: `make bench` runs -benchtime 1x,
// and one execution says little about throughput or lateness. One op is one batch; at the
// default -benchtime a batch takes over a second, so each benchmark runs a single batch.
const (
	execBatch  = 500  // executions per op in BenchmarkExecutions
	retryBatch = 1000 // executions per op in BenchmarkRetryLateness
	noopSteps  = 8
)

// benchStack is an engine with its runner working, one organization and one workflow.
type benchStack struct {
	db  *models.DB
	url string
	eng *engine.Engine
	org string
	wf  string
}

func newBenchStack(b *testing.B, dialect, def string) *benchStack {
	b.Helper()
	return newBenchStackWith(b, dialect, def, engine.Config{})
}

// newBenchStackWith is newBenchStack with the engine configured by ecfg.
func newBenchStackWith(b *testing.B, dialect, def string, ecfg engine.Config) *benchStack {
	b.Helper()
	if dialect == models.Postgres && os.Getenv("TEST_DATABASE_URL") == "" {
		b.Skip("PostgreSQL: TEST_DATABASE_URL not set; `make bench` starts a throwaway server")
	}
	url := modeltest.URL(b, dialect)
	// The pool `lifeline serve` sizes for its workers, unless BENCH_POOL says otherwise.
	q := benchQueue()
	pool := jobs.PoolSize(cmp.Or(q.Workers, jobs.DefaultWorkers(dialect)))
	if n, err := strconv.Atoi(os.Getenv("BENCH_POOL")); err == nil {
		pool = n
	}
	url = models.WithPool(url, pool)
	db, err := models.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	// The engine and queue as `lifeline serve` configures them (no test intervals).
	reg := steps.Builtins(outbound.NewClient(outbound.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
	eng, runner, err := wire(db, testLogger(b), reg, ecfg, q)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := runner.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = runner.Stop(ctx)
	})
	org := models.Organization{ID: models.NewID(), Name: "Biuro Testowe"}
	if err := db.Conn(ctx).Create(&org).Error; err != nil {
		b.Fatal(err)
	}
	wf, err := (&workflows.Service{DB: db, Steps: reg}).Create(ctx, org.ID, audit.System, []byte(def))
	if err != nil {
		b.Fatal(err)
	}
	return &benchStack{db: db, url: url, eng: eng, org: org.ID, wf: wf.ID}
}

// benchQueue is the queue's configuration: the default unless BENCH_WORKERS or
// BENCH_POLL (a duration) say otherwise, for tuning.
func benchQueue() jobs.Config {
	var c jobs.Config
	if n, err := strconv.Atoi(os.Getenv("BENCH_WORKERS")); err == nil {
		c.Workers = n
	}
	if d, err := time.ParseDuration(os.Getenv("BENCH_POLL")); err == nil {
		c.FetchPollInterval = d
	}
	if d, err := time.ParseDuration(os.Getenv("BENCH_COOLDOWN")); err == nil {
		c.FetchCooldown = d
	}
	return c
}

// startMany starts n executions from a few goroutines (8, or BENCH_STARTERS) and returns
// their ids.
func (s *benchStack) startMany(b *testing.B, n int) []string {
	b.Helper()
	ids := make([]string, n)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	starters := 8
	if n, err := strconv.Atoi(os.Getenv("BENCH_STARTERS")); err == nil && n > 0 {
		starters = n
	}
	for w := range starters {
		wg.Go(func() {
			for i := w; i < n; i += starters {
				ex, _, err := s.eng.Start(context.Background(), engine.StartRequest{OrganizationID: s.org, WorkflowID: s.wf,
					Input: fmt.Appendf(nil, `{"n": %d}`, i), Trigger: engine.TriggerAPI})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				ids[i] = ex.ID
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatalf("start: %v", err)
	default:
	}
	return ids
}

// waitAll polls until every execution in ids is final and fails b unless all succeeded. It
// returns when the last one finished, by the database clock: polling seldom keeps the
// benchmark's own queries from competing with the engine, without making the figure coarse.
func (s *benchStack) waitAll(b *testing.B, ids []string) time.Time {
	b.Helper()
	return s.waitStatus(b, ids, models.ExecSucceeded)
}

// waitStatus is waitAll for executions that must all end with status want.
func (s *benchStack) waitStatus(b *testing.B, ids []string, want string) time.Time {
	b.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	final := []string{models.ExecSucceeded, models.ExecFailed, models.ExecDLQPending}
	for {
		var done, ok int64
		if err := s.db.Conn(ctx).Model(&models.Execution{}).Where("id IN ? AND status IN ?", ids, final).Count(&done).Error; err != nil {
			b.Fatal(err)
		}
		if done == int64(len(ids)) {
			if err := s.db.Conn(ctx).Model(&models.Execution{}).Where("id IN ? AND status = ?", ids, want).Count(&ok).Error; err != nil {
				b.Fatal(err)
			}
			if ok != done {
				b.Fatalf("%d of %d executions did not end %s", done-ok, done, want)
			}
			var last models.Execution
			if err := s.db.Conn(ctx).Where("id IN ?", ids).Order("updated_at DESC").First(&last).Error; err != nil {
				b.Fatal(err)
			}
			return last.UpdatedAt
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d executions final after 5 minutes", done, len(ids))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// BenchmarkExecutions measures throughput: executions of eight no-op (transform) steps,
// started in a batch of execBatch and run to SUCCEEDED.
func BenchmarkExecutions(b *testing.B) {
	def := noopDef()
	for _, dialect := range modeltest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			s := newBenchStack(b, dialect, def)
			runtime.GC()
			idle := rssBytes()
			peak := sampleRSS(b)
			b.ResetTimer()
			s.batches(b)
			b.StopTimer()
			if idle > 0 {
				b.ReportMetric(float64(idle)/(1<<20), "idle-rss-MB")
				b.ReportMetric(float64(peak())/(1<<20), "load-rss-MB")
			}
		})
	}
}

// BenchmarkBreakerCost measures the circuit breakers' cost on the step path: the throughput
// of BenchmarkExecutions with every step's breaker on (the default) and off.
func BenchmarkBreakerCost(b *testing.B) {
	for _, dialect := range modeltest.Dialects {
		for _, on := range []bool{true, false} {
			name := dialect + "/breakers-on"
			if !on {
				name = dialect + "/breakers-off"
			}
			b.Run(name, func(b *testing.B) {
				def := noopDef()
				if !on {
					def = strings.Replace(def, `"steps": [`, `"settings": {"circuitBreaker": {"enabled": false}}, "steps": [`, 1)
				}
				s := newBenchStack(b, dialect, def)
				b.ResetTimer()
				s.batches(b)
			})
		}
	}
}

// noopDef is a workflow of noopSteps transform steps that do nothing but return a value.
func noopDef() string {
	var ss []string
	for i := range noopSteps {
		ss = append(ss, fmt.Sprintf(`{"id": "s%d", "type": "transform", "config": {"output": {"i": %d}}}`, i+1, i+1))
	}
	return fmt.Sprintf(`{"name": "No-op", "steps": [%s]}`, strings.Join(ss, ","))
}

// batches starts b.N batches of execBatch executions, one after the other, and reports how
// long starting took, executions and steps per second. Each batch is timed by the database
// clock, from before its first start to its last execution's finish.
func (s *benchStack) batches(b *testing.B) {
	var elapsed, startTook time.Duration
	for range b.N {
		began, err := s.db.Now(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		ids := s.startMany(b, execBatch)
		now, err := s.db.Now(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		startTook += now.Sub(began)
		elapsed += s.waitAll(b, ids).Sub(began)
	}
	n := float64(b.N * execBatch)
	b.ReportMetric(startTook.Seconds()/float64(b.N), "start-s")
	b.ReportMetric(n/elapsed.Seconds(), "executions/s")
	b.ReportMetric(n*noopSteps/elapsed.Seconds(), "steps/s")
}

// rssBytes is this process's resident memory now (0 where /proc is not there).
func rssBytes() int64 {
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, resident int64
	if _, err := fmt.Sscan(string(raw), &size, &resident); err != nil {
		return 0
	}
	return resident * int64(os.Getpagesize())
}

// sampleRSS samples resident memory every 20 ms until b ends; peak returns the highest.
func sampleRSS(b *testing.B) (peak func() int64) {
	var mu sync.Mutex
	var most int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				r := rssBytes()
				mu.Lock()
				most = max(most, r)
				mu.Unlock()
			}
		}
	}()
	b.Cleanup(func() { close(stop); <-done })
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return most
	}
}

// firstFails answers 503 to attempt 1 of every step and 200 to later attempts, and notes
// when each Idempotency-Key first arrived.
type firstFails struct {
	mu      sync.Mutex
	arrived map[string]time.Time
}

func (f *firstFails) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	if _, ok := f.arrived[key]; !ok {
		f.arrived[key] = at
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if strings.HasSuffix(key, ":attempt:1") {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error": "try again"}`)
		return
	}
	fmt.Fprint(w, `{"ok": true}`)
}

// BenchmarkRetryLateness measures how late retries run when many fall due together:
// retryBatch executions whose one http step fails once with 503, each retry then moved to a
// time within the same second (spread evenly over it), with its job. Lateness is when the
// retry's request reached the service minus the scheduled_at of its attempt row.
func BenchmarkRetryLateness(b *testing.B) {
	for _, dialect := range modeltest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			svc := &firstFails{arrived: map[string]time.Time{}}
			srv := httptest.NewServer(svc)
			b.Cleanup(srv.Close)
			// A retry 5 minutes later: the benchmark moves it to the second under test.
			def := fmt.Sprintf(`{"name": "Retry", "settings": {"retryPolicy": %s, "circuitBreaker": {"enabled": false}},
			  "steps": [{"id": "call", "type": "http", "config": {"method": "POST", "url": %q, "body": {"n": "{{ input.n }}"}}}]}`,
				`{"maxRetries": 3, "initialDelayMs": 300000, "backoffMultiplier": 1, "jitterRatio": 0}`, srv.URL)
			s := newBenchStack(b, dialect, def)
			ctx := context.Background()
			var late []time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				ids := s.startMany(b, retryBatch)
				retries := s.waitRetries(b, ids)
				b.StartTimer()
				s.dueWithinASecond(b, retries)
				s.waitAll(b, ids)
				if err := s.db.Conn(ctx).Where("execution_id IN ? AND attempt = 2", ids).Find(&retries).Error; err != nil {
					b.Fatal(err)
				}
				svc.mu.Lock()
				for _, a := range retries {
					at, ok := svc.arrived[a.IdempotencyKey]
					if !ok {
						svc.mu.Unlock()
						b.Fatalf("retry %s never reached the service", a.IdempotencyKey)
					}
					late = append(late, at.Sub(a.ScheduledAt))
				}
				svc.mu.Unlock()
			}
			b.StopTimer()
			slices.Sort(late)
			pct := func(p int) float64 {
				i := (len(late)*p + 99) / 100 // nearest rank
				return float64(late[max(i-1, 0)].Microseconds()) / 1000
			}
			b.ReportMetric(pct(50), "p50-late-ms")
			b.ReportMetric(pct(99), "p99-late-ms")
		})
	}
}

// waitRetries waits until every execution in ids has its retry (attempt 2) PENDING.
func (s *benchStack) waitRetries(b *testing.B, ids []string) []models.StepAttempt {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var retries []models.StepAttempt
		if err := s.db.Conn(context.Background()).Where("execution_id IN ? AND attempt = 2 AND status = ?", ids, models.StepPending).
			Find(&retries).Error; err != nil {
			b.Fatal(err)
		}
		if len(retries) == len(ids) {
			return retries
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d retries scheduled after 5 minutes", len(retries), len(ids))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dueWithinASecond moves the retries, and their jobs, to times spread evenly over one second
// starting half a second from now (database clock).
func (s *benchStack) dueWithinASecond(b *testing.B, retries []models.StepAttempt) {
	b.Helper()
	ctx := context.Background()
	now, err := s.db.Now(ctx)
	if err != nil {
		b.Fatal(err)
	}
	at := now.Add(500 * time.Millisecond)
	attemptID := "args->>'attempt_id'"
	if s.db.Dialect == models.SQLite {
		attemptID = "json_extract(args, '$.attempt_id')"
	}
	err = s.db.Tx(ctx, func(tx *gorm.DB) error {
		for i, a := range retries {
			due := at.Add(time.Duration(i) * time.Second / time.Duration(len(retries)))
			if err := tx.Model(&models.StepAttempt{}).Where("id = ?", a.ID).Update("scheduled_at", due).Error; err != nil {
				return err
			}
			if err := tx.Exec("UPDATE river_job SET scheduled_at = ? WHERE kind = 'run_attempt' AND "+attemptID+" = ?", due, a.ID).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// benchChildEnv marks the re-executed test binary that plays a second engine process.
const benchChildEnv = "LIFELINE_BENCH_CHILD"

// TestBenchChild is not a test: it is the second engine process of BenchmarkProcesses, which
// runs this binary again with LIFELINE_BENCH_CHILD=1 and DATABASE_URL set. It works jobs,
// configured as `lifeline serve` is, until its stdin closes.
func TestBenchChild(t *testing.T) {
	if os.Getenv(benchChildEnv) != "1" {
		t.Skip("helper process of BenchmarkProcesses")
	}
	ctx := context.Background()
	db, err := models.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := steps.Builtins(outbound.NewClient(outbound.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
	_, runner, err := wire(db, log, reg, engine.Config{}, benchQueue())
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = runner.Stop(stop)
}

// BenchmarkProcesses measures how throughput scales with engine processes on one PostgreSQL:
// the work of BenchmarkExecutions with this process alone, and with a second process.
func BenchmarkProcesses(b *testing.B) {
	for _, procs := range []int{1, 2} {
		b.Run(fmt.Sprintf("postgres-%d", procs), func(b *testing.B) {
			s := newBenchStack(b, models.Postgres, noopDef())
			if procs == 2 {
				cmd := exec.Command(os.Args[0], "-test.run=^TestBenchChild$", "-test.bench=^$")
				cmd.Env = append(os.Environ(), benchChildEnv+"=1", "DATABASE_URL="+s.url)
				cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
				stdin, err := cmd.StdinPipe()
				if err != nil {
					b.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
				time.Sleep(time.Second) // let it start its queue
			}
			b.ResetTimer()
			s.batches(b)
		})
	}
}

// BenchmarkFailureBranch measures what failure groups (issue 22) cost the step path's
// failure branch: executions whose one http step gets a 422 from a service on loopback
// (validation: dead-lettered at once, with its fingerprint, group join and notification
// event), batches of execBatch run to DLQ_PENDING, on two stacks side by side: one with its
// dead letters grouped (as `lifeline serve` runs) and one with them left out of groups (the
// baseline). An op is failureRounds rounds of one batch on each, their order alternating, so
// that what the machine does meanwhile falls on both alike; each stack ran one batch
// untimed first (the group is made, the caches and pool warm). The reasons name ten
// different NIPs of one problem, so most failures join a group that exists. It reports both
// rates (all rounds) and grouped-%: the grouped rate as a share of the baseline's in the
// median round. Target: at least 95 % (scripts/bench-table.sh).
func BenchmarkFailureBranch(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ N int }
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, `{"error": "NIP %d must have 10 digits"}`, 526025027+in.N%10)
	}))
	b.Cleanup(srv.Close)
	def := fmt.Sprintf(`{"name": "Wysyłka JPK", "settings": {"circuitBreaker": {"enabled": false}},
	  "steps": [{"id": "send", "type": "http", "config": {"method": "POST", "url": %q, "body": {"n": "{{ input.n }}"}}}]}`, srv.URL)
	const failureRounds = 7
	for _, dialect := range modeltest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			stacks := [2]*benchStack{ // grouped, ungrouped
				newBenchStackWith(b, dialect, def, engine.Config{}),
				newBenchStackWith(b, dialect, def, engine.Ungrouped(engine.Config{})),
			}
			batch := func(s *benchStack) time.Duration {
				began, err := s.db.Now(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				return s.waitStatus(b, s.startMany(b, execBatch), models.ExecDLQPending).Sub(began)
			}
			for _, s := range stacks {
				batch(s)
			}
			b.ResetTimer()
			var took [2]time.Duration
			var ratios []float64 // per round, the baseline's time over the grouped one's, in %
			for i := range b.N {
				for r := range failureRounds {
					first := (i*failureRounds + r) % 2
					var round [2]time.Duration
					for _, k := range []int{first, 1 - first} {
						round[k] = batch(stacks[k])
						took[k] += round[k]
					}
					ratios = append(ratios, 100*round[1].Seconds()/round[0].Seconds())
				}
			}
			b.StopTimer()
			for k, s := range stacks {
				var groups int64
				if err := s.db.Conn(context.Background()).Model(&models.Group{}).Where("organization_id = ?", s.org).Count(&groups).Error; err != nil {
					b.Fatal(err)
				}
				if grouped := k == 0; grouped != (groups > 0) {
					b.Fatalf("grouped %v, but %d groups", grouped, groups)
				}
			}
			n := float64(b.N * failureRounds * execBatch)
			b.ReportMetric(n/took[0].Seconds(), "grouped-failures/s")
			b.ReportMetric(n/took[1].Seconds(), "ungrouped-failures/s")
			// The median round: a stall of the machine or the disk (a checkpoint) that falls on
			// one batch moves one round, not the figure.
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "grouped-%")
			if testing.Verbose() {
				b.Logf("rounds, grouped %% of the baseline: %.1f", ratios)
			}
		})
	}
}
