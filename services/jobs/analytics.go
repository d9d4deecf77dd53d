package jobs

import (
	"context"

	"github.com/riverqueue/river"

	"lifeline/services/analytics"
)

// AnalyticsRefreshArgs recomputes the analytics' daily rollups of every organization
// (analytics.Refresh). A refresh recomputes whole days from the history, so one run late,
// twice or in two processes at once leaves the same rows.
type AnalyticsRefreshArgs struct{}

// Kind implements river.JobArgs.
func (AnalyticsRefreshArgs) Kind() string { return "analytics_refresh" }

// InsertOpts implements river.JobArgsWithInsertOpts: one waiting run at a time; a failed one
// is not retried (the next comes within analytics.RefreshEvery).
func (AnalyticsRefreshArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: uniqueStates}}
}

// AnalyticsRefreshWorker runs the refresh.
type AnalyticsRefreshWorker struct {
	river.WorkerDefaults[AnalyticsRefreshArgs]
	Store analytics.Refresher
}

// Work runs one refresh.
func (w *AnalyticsRefreshWorker) Work(ctx context.Context, _ *river.Job[AnalyticsRefreshArgs]) error {
	return analytics.Refresh(ctx, w.Store)
}

// AnalyticsJobs registers the refresh, run every analytics.RefreshEvery and at start: add
// the worker with Config.Register and the periodic job to Config.Periodic.
func AnalyticsJobs(store analytics.Refresher) (func(*river.Workers), *river.PeriodicJob) {
	return func(w *river.Workers) { river.AddWorker(w, &AnalyticsRefreshWorker{Store: store}) },
		river.NewPeriodicJob(river.PeriodicInterval(analytics.RefreshEvery),
			func() (river.JobArgs, *river.InsertOpts) { return AnalyticsRefreshArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true})
}
