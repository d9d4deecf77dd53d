package jobs

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// The River-only baseline of BenchmarkExecutions (services/engine): the same work, chains of
// eight no-op steps, done by River alone. Each job of a chain inserts the next job and marks
// itself completed in one transaction, so every step is as durable as a Lifeline step.
const (
	chainBatch = 500 // chains per op, as BenchmarkExecutions starts 500 executions
	chainLen   = 8
)

type chainArgs struct {
	Chain int `json:"chain"`
	Step  int `json:"step"`
}

func (chainArgs) Kind() string { return "bench_chain" }

// chainWorker runs one step of a chain: in one transaction, it inserts the next step and
// completes itself. done counts finished chains.
type chainWorker[TTx any, TDriver riverdriver.Driver[TTx]] struct {
	river.WorkerDefaults[chainArgs]
	begin func(context.Context) (TTx, func() error, func(), error)
	done  *atomic.Int64
}

func (w *chainWorker[TTx, TDriver]) Work(ctx context.Context, job *river.Job[chainArgs]) error {
	tx, commit, rollback, err := w.begin(ctx)
	if err != nil {
		return err
	}
	defer rollback()
	if job.Args.Step+1 < chainLen {
		client := river.ClientFromContext[TTx](ctx)
		if _, err := client.InsertTx(ctx, tx, chainArgs{Chain: job.Args.Chain, Step: job.Args.Step + 1}, nil); err != nil {
			return err
		}
	}
	if _, err := river.JobCompleteTx[TDriver](ctx, tx, job); err != nil {
		return err
	}
	if err := commit(); err != nil {
		return err
	}
	if job.Args.Step+1 == chainLen {
		w.done.Add(1)
	}
	return nil
}

// riverSettings is one point of the sweep of River's queue settings: how many jobs run at
// once, and how often (and how soon after a fetch) a producer looks for new jobs.
type riverSettings struct {
	workers        int
	poll, cooldown time.Duration
}

func (r riverSettings) String() string {
	return fmt.Sprintf("workers=%d,poll=%s,cooldown=%s", r.workers, r.poll, r.cooldown)
}

// riverSweep is what BenchmarkRiverChains tries, so that the baseline is River at its best on
// this machine, not at our settings: worker counts up to River's maximum (10,000) against
// fetch settings from River's defaults (1 s poll, 100 ms cooldown) down to its floor (1 ms).
// LIFELINE_RIVER_SWEEP=short tries only the settings that came out best before.
func riverSweep() []riverSettings {
	if os.Getenv("LIFELINE_RIVER_SWEEP") == "short" {
		return []riverSettings{{100, 10 * time.Millisecond, time.Millisecond}}
	}
	var out []riverSettings
	for _, w := range []int{20, 100, 1000, 10000} {
		for _, f := range [][2]time.Duration{{time.Second, 100 * time.Millisecond}, {50 * time.Millisecond, 10 * time.Millisecond}, {10 * time.Millisecond, time.Millisecond}, {time.Millisecond, time.Millisecond}} {
			out = append(out, riverSettings{w, f[0], f[1]})
		}
	}
	return out
}

// BenchmarkRiverChains measures River alone: chainBatch chains of chainLen no-op jobs, once
// per point of riverSweep, each on a database of its own. scripts/bench-table.sh reports the
// best point of each database as the baseline.
func BenchmarkRiverChains(b *testing.B) {
	for _, dialect := range modeltest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			if dialect == models.Postgres && os.Getenv("TEST_DATABASE_URL") == "" {
				b.Skip("PostgreSQL: TEST_DATABASE_URL not set; `make bench` starts a throwaway server")
			}
			for _, set := range riverSweep() {
				b.Run(set.String(), func(b *testing.B) { benchRiverChains(b, dialect, set) })
			}
		})
	}
}

func benchRiverChains(b *testing.B, dialect string, set riverSettings) {
	db := modeltest.New(b, dialect)
	var done atomic.Int64
	if db.Dialect == models.Postgres {
		w := &chainWorker[pgx.Tx, *riverpgxv5.Driver]{done: &done, begin: func(ctx context.Context) (pgx.Tx, func() error, func(), error) {
			tx, err := db.Pool.Begin(ctx)
			if err != nil {
				return nil, nil, nil, err
			}
			return tx, func() error { return tx.Commit(ctx) }, func() { _ = tx.Rollback(ctx) }, nil
		}}
		runChains(b, riverpgxv5.New(db.Pool), w, &done, set)
		return
	}
	w := &chainWorker[*sql.Tx, *riversqlite.Driver]{done: &done, begin: func(ctx context.Context) (*sql.Tx, func() error, func(), error) {
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			return nil, nil, nil, err
		}
		return tx, tx.Commit, func() { _ = tx.Rollback() }, nil
	}}
	runChains(b, riversqlite.New(db.SQL), w, &done, set)
}

func runChains[TTx any, TDriver riverdriver.Driver[TTx]](b *testing.B, driver TDriver, w *chainWorker[TTx, TDriver], done *atomic.Int64, set riverSettings) {
	ctx := context.Background()
	rc := Config{Workers: set.workers, FetchPollInterval: set.poll, FetchCooldown: set.cooldown}.withDefaults(models.SQLite).queue() // Workers is set
	rc.Workers = river.NewWorkers()
	river.AddWorker(rc.Workers, w)
	rc.Logger = slog.New(slog.DiscardHandler)
	client, err := river.NewClient(driver, rc)
	if err != nil {
		b.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})
	b.ResetTimer()
	began := time.Now()
	for range b.N {
		want := done.Load() + chainBatch
		params := make([]river.InsertManyParams, chainBatch)
		for i := range params {
			params[i] = river.InsertManyParams{Args: chainArgs{Chain: i}}
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Minute)
		for done.Load() < want {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d chains done after 5 minutes", done.Load()-want+chainBatch, chainBatch)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	elapsed := time.Since(began)
	b.StopTimer()
	n := float64(b.N * chainBatch)
	b.ReportMetric(n/elapsed.Seconds(), "chains/s")
	b.ReportMetric(n*chainLen/elapsed.Seconds(), "steps/s")
}
