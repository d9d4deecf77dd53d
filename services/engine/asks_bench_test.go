package engine_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// waitingDef is a workflow that asks for an approval (a day to answer) and then transforms.
const waitingDef = `{"name": "Waiting", "steps": [
  {"id": "approve", "type": "ask", "config": {"kind": "approval", "title": "Approve {{ input.n }}", "timeoutMs": 86400000}},
  {"id": "after", "type": "transform", "config": {"output": {"ok": true}}}]}`

// BenchmarkWaiting parks 10,000 executions (BENCH_WAITING) WAITING at an ask step and
// reports what waiting holds: the heap (MB, after a GC), goroutines and River's live jobs
// before they start and once all wait, and the CPU the idle process used over 6 s (spanning
// a sweep of the requests) each time. Waiting holds no worker, job or connection: the figures
// after must not grow with the count (heap_mb_after, goroutines_after and idle_cpu_ms_after
// stay near their values before; jobs_after is 0).
func BenchmarkWaiting(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("BENCH_WAITING")); err == nil && v > 0 {
		n = v
	}
	for _, dialect := range modeltest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			for range b.N {
				s := newBenchStack(b, dialect, waitingDef)
				heap0, gor0, jobs0 := waitingFootprint(b, s.db)
				cpu0 := idleCPU(b)
				ids := s.startMany(b, n)
				waitWaiting(b, s.db, ids)
				heap1, gor1, jobs1 := waitingFootprint(b, s.db)
				cpu1 := idleCPU(b)
				b.ReportMetric(float64(n), "waiting")
				b.ReportMetric(heap0, "heap_mb_before")
				b.ReportMetric(heap1, "heap_mb_after")
				b.ReportMetric(float64(gor0), "goroutines_before")
				b.ReportMetric(float64(gor1), "goroutines_after")
				b.ReportMetric(float64(jobs0), "jobs_before")
				b.ReportMetric(float64(jobs1), "jobs_after")
				b.ReportMetric(cpu0, "idle_cpu_ms_before")
				b.ReportMetric(cpu1, "idle_cpu_ms_after")
				if jobs1 != 0 {
					b.Errorf("%d River jobs live while %d executions wait", jobs1, n)
				}
			}
		})
	}
}

// waitingFootprint is the heap in use (MB, after a GC), the goroutines, and River's jobs
// that may still run.
func waitingFootprint(b *testing.B, db *models.DB) (float64, int, int64) {
	b.Helper()
	time.Sleep(time.Second) // let the workers that just finished go idle
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var jobs int64
	if err := db.Conn(context.Background()).Table("river_job").Where("kind = ? AND state IN ?", "run_attempt",
		[]string{"available", "scheduled", "running", "retryable", "pending"}).Count(&jobs).Error; err != nil {
		b.Fatal(err)
	}
	return float64(ms.HeapInuse) / (1 << 20), runtime.NumGoroutine(), jobs
}

// idleCPU is the CPU time (user and system, ms) the process used over the next 6 s, left
// alone: River's pollers, the reconciler and at least one sweep of the requests.
func idleCPU(b *testing.B) float64 {
	b.Helper()
	used := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before := used()
	time.Sleep(6 * time.Second)
	return float64((used() - before).Milliseconds())
}

// waitWaiting polls until every execution of ids waits.
func waitWaiting(b *testing.B, db *models.DB, ids []string) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var n int64
		if err := db.Conn(context.Background()).Model(&models.Execution{}).Where("status = ?", models.ExecWaiting).Count(&n).Error; err != nil {
			b.Fatal(err)
		}
		if n == int64(len(ids)) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d executions wait after 10 minutes", n, len(ids))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
