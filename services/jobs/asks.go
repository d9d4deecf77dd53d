package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"lifeline/services/engine"
)

// AsksSweepEvery is how often the sweep of ask steps' requests runs by default: a request
// times out, escalates or reminds within about that much of its time.
const AsksSweepEvery = 5 * time.Second

// AsksSweepArgs runs the sweep of ask steps' requests (engine.Asks.Sweep): timeouts,
// escalation levels and reminders, by the database clock. Each change is a guarded commit,
// so a sweep late, twice or in two processes at once changes each request once.
type AsksSweepArgs struct{}

// Kind implements river.JobArgs.
func (AsksSweepArgs) Kind() string { return "asks_sweep" }

// InsertOpts implements river.JobArgsWithInsertOpts: one waiting sweep at a time; a failed
// one is not retried (the next comes within Config.AsksSweepEvery).
func (AsksSweepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: uniqueStates}}
}

// AsksSweepWorker runs the sweep.
type AsksSweepWorker struct {
	river.WorkerDefaults[AsksSweepArgs]
	Engine *engine.Engine
}

// Work runs one sweep.
func (w *AsksSweepWorker) Work(ctx context.Context, _ *river.Job[AsksSweepArgs]) error {
	_, err := w.Engine.Asks().Sweep(ctx)
	return err
}
