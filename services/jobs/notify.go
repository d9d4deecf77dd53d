package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"lifeline/services/notify"
)

// Notifications are sent by a periodic dispatcher, not by a job per delivery: River on
// PostgreSQL cannot join GORM's transaction, so the deliveries the engine records in its own
// transaction (the outbox) are the source of truth, and this job claims the due ones every
// NotifyEvery (compare-and-set with a lease: two runs at once, or a run after a crash, never
// send one delivery twice; an expired lease is claimed again). Schedules (retries, Retry-After,
// digests at the end of their minute) live in the deliveries' next_attempt_at.

// NotifyEvery is how often the dispatcher runs.
const NotifyEvery = time.Second

// NotifyArgs runs one dispatch of due notification deliveries.
type NotifyArgs struct{}

// Kind implements river.JobArgs.
func (NotifyArgs) Kind() string { return "notify_dispatch" }

// InsertOpts implements river.JobArgsWithInsertOpts: one waiting dispatch at a time; a
// failed one is not retried (the next tick comes within a second).
func (NotifyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: uniqueStates}}
}

// NotifyWorker sends due notification deliveries.
type NotifyWorker struct {
	river.WorkerDefaults[NotifyArgs]
	Notify *notify.Service
}

// Work dispatches until nothing is due, for at most 20 s.
func (w *NotifyWorker) Work(ctx context.Context, _ *river.Job[NotifyArgs]) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := w.Notify.Dispatch(ctx)
		if err != nil || n == 0 || time.Now().After(deadline) {
			return err
		}
	}
}

// Timeout bounds a dispatch: a batch at the sends' worst (each has its own timeout, 15 s,
// four at a time) fits in it, so a slow server does not cut a batch short; outcomes are
// recorded even when it ends (see notify.Service.Dispatch).
func (w *NotifyWorker) Timeout(*river.Job[NotifyArgs]) time.Duration { return 5 * time.Minute }

// NotifyRetentionArgs deletes old notifications (notify.Retention).
type NotifyRetentionArgs struct{}

// Kind implements river.JobArgs.
func (NotifyRetentionArgs) Kind() string { return "notify_retention" }

// NotifyRetentionWorker deletes old notification events, deliveries and in-app notifications.
type NotifyRetentionWorker struct {
	river.WorkerDefaults[NotifyRetentionArgs]
	Notify *notify.Service
}

// Work runs one retention pass.
func (w *NotifyRetentionWorker) Work(ctx context.Context, _ *river.Job[NotifyRetentionArgs]) error {
	_, err := w.Notify.Retain(ctx)
	return err
}

// NotifyJobs registers the notification dispatcher, run every every (0: NotifyEvery), and
// its hourly retention: add the workers with Config.Register and the returned periodic jobs
// to Config.Periodic. Tests pass a shorter interval instead of waiting for the dispatcher.
func NotifyJobs(svc *notify.Service, every time.Duration) (func(*river.Workers), []*river.PeriodicJob) {
	if every <= 0 {
		every = NotifyEvery
	}
	return func(w *river.Workers) {
			river.AddWorker(w, &NotifyWorker{Notify: svc})
			river.AddWorker(w, &NotifyRetentionWorker{Notify: svc})
		}, []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(every),
				func() (river.JobArgs, *river.InsertOpts) { return NotifyArgs{}, nil },
				&river.PeriodicJobOpts{RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
				func() (river.JobArgs, *river.InsertOpts) { return NotifyRetentionArgs{}, nil },
				&river.PeriodicJobOpts{RunOnStart: true}),
		}
}
