package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
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

// The benchmarks measure batches, not single executions: `make bench` runs -benchtime 1x,
// and one execution says little about throughput or lateness. One op is one batch; at the
// default -benchtime a batch takes over a second, so each benchmark runs a single batch.
const (
	execBatch  = 500 // executions per op in BenchmarkExecutions
	retryBatch = 50  // executions per op in BenchmarkRetryLateness
	noopSteps  = 8
)

// benchStack is an engine with its runner working, one organization and one workflow.
type benchStack struct {
	db  *models.DB
	eng *engine.Engine
	org string
	wf  string
}

func newBenchStack(b *testing.B, dialect, def string) *benchStack {
	b.Helper()
	if dialect == models.Postgres && os.Getenv("TEST_DATABASE_URL") == "" {
		b.Skip("PostgreSQL: TEST_DATABASE_URL not set; `make bench` starts a throwaway server")
	}
	db := modeltest.New(b, dialect)
	eng, runner, reg, err := newStack(db, testLogger(b))
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
	return &benchStack{db: db, eng: eng, org: org.ID, wf: wf.ID}
}

// startMany starts n executions from a few goroutines and returns their ids.
func (s *benchStack) startMany(b *testing.B, n int) []string {
	b.Helper()
	ids := make([]string, n)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	const starters = 4
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
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	final := []string{models.ExecSucceeded, models.ExecFailed, models.ExecDLQPending}
	for {
		var done, ok int64
		if err := s.db.Conn(ctx).Model(&models.Execution{}).Where("id IN ? AND status IN ?", ids, final).Count(&done).Error; err != nil {
			b.Fatal(err)
		}
		if done == int64(len(ids)) {
			if err := s.db.Conn(ctx).Model(&models.Execution{}).Where("id IN ? AND status = ?", ids, models.ExecSucceeded).Count(&ok).Error; err != nil {
				b.Fatal(err)
			}
			if ok != done {
				b.Fatalf("%d of %d executions did not succeed", done-ok, done)
			}
			var last models.Execution
			if err := s.db.Conn(ctx).Where("id IN ?", ids).Order("finished_at DESC").First(&last).Error; err != nil {
				b.Fatal(err)
			}
			return *last.FinishedAt
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
	var ss []string
	for i := range noopSteps {
		ss = append(ss, fmt.Sprintf(`{"id": "s%d", "type": "transform", "config": {"output": {"i": %d}}}`, i+1, i+1))
	}
	def := fmt.Sprintf(`{"name": "No-op", "steps": [%s]}`, strings.Join(ss, ","))
	for _, dialect := range modeltest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			s := newBenchStack(b, dialect, def)
			b.ResetTimer()
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
			b.ReportMetric(startTook.Seconds(), "start-s")
			b.StopTimer()
			n := float64(b.N * execBatch)
			b.ReportMetric(n/elapsed.Seconds(), "executions/s")
			b.ReportMetric(n*noopSteps/elapsed.Seconds(), "steps/s")
		})
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

// BenchmarkRetryLateness measures how late retries run: a batch of retryBatch executions
// whose one http step fails once with 503 and is retried after 1 s (no jitter). Lateness is
// when the retry's request reached the service minus the scheduled_at of its attempt row.
func BenchmarkRetryLateness(b *testing.B) {
	for _, dialect := range modeltest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			svc := &firstFails{arrived: map[string]time.Time{}}
			srv := httptest.NewServer(svc)
			b.Cleanup(srv.Close)
			def := fmt.Sprintf(`{"name": "Retry", "settings": {"retryPolicy": %s},
			  "steps": [{"id": "call", "type": "http", "config": {"method": "POST", "url": %q, "body": {"n": "{{ input.n }}"}}}]}`,
				`{"maxRetries": 3, "initialDelayMs": 1000, "backoffMultiplier": 1, "jitterRatio": 0}`, srv.URL)
			s := newBenchStack(b, dialect, def)
			var late []time.Duration
			b.ResetTimer()
			for range b.N {
				ids := s.startMany(b, retryBatch)
				s.waitAll(b, ids)
				var retries []models.StepAttempt
				if err := s.db.Conn(context.Background()).Where("execution_id IN ? AND attempt = 2", ids).Find(&retries).Error; err != nil {
					b.Fatal(err)
				}
				if len(retries) != len(ids) {
					b.Fatalf("%d retries for %d executions", len(retries), len(ids))
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
