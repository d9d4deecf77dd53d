package jobs

import (
	"context"

	"github.com/riverqueue/river"

	"lifeline/services/deadlines"
)

// DeadlineRemindArgs runs one pass of the deadline reminders (deadlines.Service.Remind).
// Which reminders are due follows from the database clock's day and the reminders already
// recorded, so a pass run late, twice, or in two processes at once sends each once.
type DeadlineRemindArgs struct{}

// Kind implements river.JobArgs.
func (DeadlineRemindArgs) Kind() string { return "deadline_remind" }

// InsertOpts implements river.JobArgsWithInsertOpts: one waiting pass at a time; a failed
// one is not retried (the next comes within deadlines.RemindEvery).
func (DeadlineRemindArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: uniqueStates}}
}

// DeadlineRemindWorker runs the pass.
type DeadlineRemindWorker struct {
	river.WorkerDefaults[DeadlineRemindArgs]
	Deadlines *deadlines.Service
}

// Work runs one pass.
func (w *DeadlineRemindWorker) Work(ctx context.Context, _ *river.Job[DeadlineRemindArgs]) error {
	_, err := w.Deadlines.Remind(ctx)
	return err
}

// DeadlineJobs registers the deadline reminders' pass, run every deadlines.RemindEvery and
// at start: add the worker with Config.Register and the periodic job to Config.Periodic.
func DeadlineJobs(svc *deadlines.Service) (func(*river.Workers), *river.PeriodicJob) {
	return func(w *river.Workers) { river.AddWorker(w, &DeadlineRemindWorker{Deadlines: svc}) },
		river.NewPeriodicJob(river.PeriodicInterval(deadlines.RemindEvery),
			func() (river.JobArgs, *river.InsertOpts) { return DeadlineRemindArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true})
}
