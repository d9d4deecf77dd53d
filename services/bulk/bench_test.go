package bulk_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/bulk"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/outbound"
	"lifeline/services/steps"
	"lifeline/services/workflows"
)

// benchBulkRate is the organization's rate of BenchmarkBulkRetry (issue 22: 10,000 items in
// at most 60 s at 200 a second).
const benchBulkRate = 200

// BenchmarkBulkRetry measures a bulk retry at the organization's rate on PostgreSQL: it
// seeds BENCH_BULK_ITEMS (default 10,000) dead letters of a one-step workflow whose target
// refuses them, then lets the target answer (a no-op) and retries them all with one bulk
// job at benchBulkRate a second, through the engine and River as `lifeline serve` runs them.
// It reports the bulk job's wall time (job-s) and rate (items/s), and the time until every
// retried execution succeeded (resolved-s). Seeding is not timed.
func BenchmarkBulkRetry(b *testing.B) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		b.Skip("PostgreSQL: TEST_DATABASE_URL not set; `make bench` starts a throwaway server")
	}
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("BENCH_BULK_ITEMS")); err == nil && v > 0 {
		n = min(v, bulk.MaxItems)
	}
	ctx := context.Background()
	url := models.WithPool(modeltest.URL(b, models.Postgres), jobs.PoolSize(jobs.DefaultWorkers(models.Postgres)))
	db, err := models.Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	var up atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !up.Load() {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error": "refused"}`)
			return
		}
		fmt.Fprint(w, `{"ok": true}`)
	}))
	b.Cleanup(target.Close)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := steps.Builtins(outbound.NewClient(outbound.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
	var jcfg jobs.Config // as `lifeline serve`: no rate override
	queue, err := jobs.NewQueue(db, jcfg, log)
	if err != nil {
		b.Fatal(err)
	}
	eng := engine.New(db, reg, log, engine.Config{Queue: queue})
	runner, err := jobs.New(db, eng, queue, jcfg, log)
	if err != nil {
		b.Fatal(err)
	}
	if err := runner.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = runner.Stop(c)
	})
	org := models.Organization{ID: models.NewID(), Name: "Biuro Zbiorcze"}
	if err := db.Conn(ctx).Create(&org).Error; err != nil {
		b.Fatal(err)
	}
	def := fmt.Sprintf(`{"name": "Wysyłka", "settings": {"retryPolicy": {"maxRetries": 0}, "circuitBreaker": {"enabled": false}},
	  "steps": [{"id": "send", "name": "Wyślij", "type": "http", "config": {"method": "POST", "url": "%s/send", "body": {"n": "{{ input.n }}"}}}]}`, target.URL)
	wf, err := (&workflows.Service{DB: db, Steps: reg}).Create(ctx, org.ID, audit.System, []byte(def))
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				if _, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID,
					Input: fmt.Appendf(nil, `{"n": %d}`, i), Trigger: engine.TriggerAPI}); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	count := func(status string) int64 {
		var c int64
		if err := db.Conn(ctx).Model(&models.DeadLetter{}).Where("organization_id = ? AND status = ?", org.ID, status).Count(&c).Error; err != nil {
			b.Fatal(err)
		}
		return c
	}
	for deadline := time.Now().Add(20 * time.Minute); count(models.DLQPending) < int64(n); {
		if time.Now().After(deadline) {
			b.Fatalf("seeding: %d of %d dead letters", count(models.DLQPending), n)
		}
		time.Sleep(time.Second)
	}
	if err := models.SetBulkRate(db.Conn(ctx), org.ID, benchBulkRate); err != nil {
		b.Fatal(err)
	}
	up.Store(true)

	b.ResetTimer()
	began := time.Now()
	job, err := runner.Bulk().Create(ctx, bulk.Request{OrganizationID: org.ID, Action: bulk.Retry,
		Filter: &models.DLQFilter{WorkflowID: wf.ID}, Actor: audit.System})
	if err != nil {
		b.Fatal(err)
	}
	var jobTime time.Duration
	for deadline := began.Add(10 * time.Minute); ; {
		sum, err := runner.Bulk().Summary(ctx, org.ID, job.ID) // its counts are its items'
		if err != nil {
			b.Fatal(err)
		}
		got := *sum.Job
		if got.Status == models.BulkDone && jobTime == 0 {
			jobTime = got.FinishedAt.Sub(got.CreatedAt)
			if got.Succeeded != n {
				b.Fatalf("the job retried %d of %d", got.Succeeded, n)
			}
		}
		if jobTime > 0 && count(models.DLQResolved) == int64(n) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("after 10 minutes: job %s %d/%d, %d resolved", got.Status, got.Processed, n, count(models.DLQResolved))
		}
		time.Sleep(250 * time.Millisecond)
	}
	resolved := time.Since(began)
	b.StopTimer()
	b.ReportMetric(jobTime.Seconds(), "job-s")
	b.ReportMetric(float64(n)/jobTime.Seconds(), "items/s")
	b.ReportMetric(resolved.Seconds(), "resolved-s")
}
