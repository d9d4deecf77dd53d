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

// Work starts one execution.
func (w *DemoTrafficWorker) Work(ctx context.Context, job *river.Job[DemoTrafficArgs]) error {
	wfs, err := w.DB.Workflows(ctx, job.Args.OrganizationID)
	if err != nil || len(wfs) == 0 {
		return err
	}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(job.ID)))
	var candidates []models.Workflow
	for _, wf := range wfs {
		if slices.Contains(demo.Names(), wf.Name) {
			candidates = append(candidates, wf)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	wf := candidates[rnd.IntN(len(candidates))]
	input := demo.Input(wf.Name, rnd)
	_, _, err = w.Engine.Start(ctx, engine.StartRequest{OrganizationID: wf.OrganizationID, WorkflowID: wf.ID,
		Input: models.MustJSON(input), Trigger: engine.TriggerDemo, Actor: audit.System})
	return err
}

// DemoTraffic returns the periodic job that starts demo executions every interval.
func DemoTraffic(orgID string, every time.Duration) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(every),
		func() (river.JobArgs, *river.InsertOpts) { return DemoTrafficArgs{OrganizationID: orgID}, nil },
		&river.PeriodicJobOpts{ID: "demo_traffic"})
}
