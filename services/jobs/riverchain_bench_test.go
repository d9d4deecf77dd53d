package jobs

import (
	"context"
	"database/sql"
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

// BenchmarkRiverChains measures River alone: chainBatch chains of chainLen no-op jobs.
func BenchmarkRiverChains(b *testing.B) {
	for _, dialect := range modeltest.Dialects {
		b.Run(dialect, func(b *testing.B) {
			if dialect == models.Postgres && os.Getenv("TEST_DATABASE_URL") == "" {
				b.Skip("PostgreSQL: TEST_DATABASE_URL not set; `make bench` starts a throwaway server")
			}
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
				runChains(b, riverpgxv5.New(db.Pool), w, &done)
				return
			}
			w := &chainWorker[*sql.Tx, *riversqlite.Driver]{done: &done, begin: func(ctx context.Context) (*sql.Tx, func() error, func(), error) {
				tx, err := db.SQL.BeginTx(ctx, nil)
				if err != nil {
					return nil, nil, nil, err
				}
				return tx, tx.Commit, func() { _ = tx.Rollback() }, nil
			}}
			runChains(b, riversqlite.New(db.SQL), w, &done)
		})
	}
}

func runChains[TTx any, TDriver riverdriver.Driver[TTx]](b *testing.B, driver TDriver, w *chainWorker[TTx, TDriver], done *atomic.Int64) {
	ctx := context.Background()
	// River gets the queue settings that suit it best on this machine (as measured): many
	// workers and a fetch as soon as possible, since every step of a chain waits for one.
	rc := Config{Workers: 100, FetchPollInterval: 10 * time.Millisecond, FetchCooldown: time.Millisecond}.withDefaults(models.SQLite).queue() // Workers is set
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
