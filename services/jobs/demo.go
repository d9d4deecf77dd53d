package jobs

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/demo"
	"lifeline/services/engine"
)

// DemoTrafficArgs starts one demo execution in an organization.
type DemoTrafficArgs struct {
	OrganizationID string `json:"organization_id"`
}

// Kind implements river.JobArgs.
func (DemoTrafficArgs) Kind() string { return "demo_traffic" }

// DemoTrafficWorker starts an execution of a random demo workflow with a realistic input
// whose sandbox scenarios make some executions retry and some land in the DLQ.
type DemoTrafficWorker struct {
	river.WorkerDefaults[DemoTrafficArgs]
	DB     *models.DB
	Engine *engine.Engine
}

// Work starts one execution, unless the demo office's backlog is full (demo.Next).
func (w *DemoTrafficWorker) Work(ctx context.Context, job *river.Job[DemoTrafficArgs]) error {
	org := job.Args.OrganizationID
	wfs, err := w.DB.Workflows(ctx, org)
	if err != nil || len(wfs) == 0 {
		return err
	}
	byName := map[string]models.Workflow{}
	var names []string
	for _, wf := range wfs {
		if slices.Contains(demo.Names(), wf.Name) {
			byName[wf.Name] = wf
			names = append(names, wf.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	pending, err := w.DB.CountDLQPending(ctx, org)
	if err != nil {
		return err
	}
	var asks int64
	if err := w.DB.Conn(ctx).Model(&models.Intervention{}).Where("organization_id = ? AND status = ?", org, models.InterventionOpen).
		Count(&asks).Error; err != nil {
		return err
	}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(job.ID)))
	name := demo.Next(names, pending, int(asks), rnd)
	if name == "" {
		return nil
	}
	wf := byName[name]
	_, _, err = w.Engine.Start(ctx, engine.StartRequest{OrganizationID: org, WorkflowID: wf.ID,
		Input: models.MustJSON(demo.Input(wf.Name, rnd)), Trigger: engine.TriggerDemo, Actor: audit.System})
	return err
}

// DemoTraffic returns the periodic job that starts demo executions every interval.
func DemoTraffic(orgID string, every time.Duration) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(every),
		func() (river.JobArgs, *river.InsertOpts) { return DemoTrafficArgs{OrganizationID: orgID}, nil },
		&river.PeriodicJobOpts{ID: "demo_traffic"})
}
