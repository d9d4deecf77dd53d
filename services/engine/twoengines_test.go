package engine_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/classify"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/steps"
	"lifeline/services/workflows"
)

// runLog records every run of a countStep: which engine ran which idempotency key, and how
// the attempt got to it (a queue job, or a duplicate delivery made by the test).
type runLog struct {
	mu   sync.Mutex
	runs map[string][]runBy // by idempotency key
}

type runBy struct {
	engine    int
	duplicate bool
}

// duplicateKey marks the context of an attempt the test delivers itself, besides its job.
type duplicateKey struct{}

func (l *runLog) add(key string, r runBy) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.runs == nil {
		l.runs = map[string][]runBy{}
	}
	l.runs[key] = append(l.runs[key], r)
}

// countStep is a no-op step type that logs its runs. Attempt 1 of the (execution, step)
// pairs twoEnginesFails picks fails with a transient error, so those retry through the queue.
type countStep struct {
	engine int
	log    *runLog
}

func (c *countStep) Validate(map[string]any) map[string]string { return nil }

func (c *countStep) Run(ctx context.Context, in steps.Input) (any, error) {
	c.log.add(in.IdempotencyKey, runBy{engine: c.engine, duplicate: ctx.Value(duplicateKey{}) != nil})
	if in.Attempt == 1 && twoEnginesFails(in.ExecutionID, in.StepID) {
		return nil, classify.New(classify.Transient, "FLAKY", "first attempt fails")
	}
	return map[string]any{"ok": true}, nil
}

// twoEnginesFails: attempt 1 of about one (execution, step) pair in 20 fails.
func twoEnginesFails(execID, stepID string) bool { return hash32("two-fail", execID, stepID)%20 == 0 }

const (
	twoEnginesExecutions = 1250
	twoEnginesSteps      = 8
)

// TestTwoEngines runs two engine+runner stacks on one PostgreSQL database, each with its own
// connection pool, as two processes would, over 1,250 executions of 8 steps (10,000 first
// attempts and about 500 retries through the queue). Besides the queue's jobs, the test
// delivers due attempts a second time to both engines at once, as a duplicated job would.
// It checks that every execution SUCCEEDED, each (execution, step, attempt) row exists
// once, each attempt ran exactly once (no attempt was claimed twice), and both engines
// worked jobs from the queue.
func TestTwoEngines(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 attempts")
	}
	if os.Getenv("TEST_DATABASE_URL") == "" {
		t.Skip("PostgreSQL only: TEST_DATABASE_URL is not set (make test starts a throwaway server)")
	}
	t.Parallel()
	ctx := context.Background()
	began := time.Now()
	url := modeltest.URL(t, models.Postgres)
	runs := &runLog{}
	type stack struct {
		db  *models.DB
		eng *engine.Engine
	}
	var stacks [2]stack
	var wf *models.Workflow
	var orgID string
	for i := range stacks {
		db, err := models.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		reg := loopbackSteps()
		reg.Register("count", &countStep{engine: i, log: runs})
		eng, runner, _, err := newStackWith(db, testLogger(t), reg)
		if err != nil {
			t.Fatal(err)
		}
		if err := runner.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_ = runner.Stop(ctx)
		})
		stacks[i] = stack{db: db, eng: eng}
		if i == 0 {
			org := models.Organization{ID: models.NewID(), Name: "Biuro Testowe"}
			if err := db.Conn(ctx).Create(&org).Error; err != nil {
				t.Fatal(err)
			}
			orgID = org.ID
			var ss []string
			for s := range twoEnginesSteps {
				ss = append(ss, fmt.Sprintf(`{"id": "s%d", "type": "count", "config": {}}`, s))
			}
			def := `{"name": "Two engines", "settings": {"circuitBreaker": {"enabled": false}, "retryPolicy": {"maxRetries": 3, "initialDelayMs": 1000, "backoffType": "fixed", "jitterRatio": 0}},
			  "steps": [` + strings.Join(ss, ",") + `]}`
			if wf, err = (&workflows.Service{DB: db, Steps: reg}).Create(ctx, orgID, audit.System, []byte(def)); err != nil {
				t.Fatal(err)
			}
		}
	}
	db := stacks[0].db

	open := func() int64 {
		var n int64
		if err := db.Conn(ctx).Model(&models.Execution{}).Where("organization_id = ? AND status NOT IN ?", orgID,
			[]string{models.ExecSucceeded, models.ExecFailed, models.ExecDLQPending}).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Duplicate deliveries: while the engines work, due PENDING attempts are handed to both
	// engines at once, with the generation their job carries. At most one may claim each.
	stopDup := make(chan struct{})
	dupDone := make(chan struct{})
	var dupPairs, dupClaims atomic.Int64
	var dupErr atomic.Value
	go func() {
		defer close(dupDone)
		dctx := context.WithValue(ctx, duplicateKey{}, true)
		for {
			select {
			case <-stopDup:
				return
			default:
			}
			var due []models.StepAttempt
			if err := db.Conn(ctx).Where("organization_id = ? AND status = ? AND scheduled_at <= clock_timestamp()", orgID, models.StepPending).
				Limit(20).Find(&due).Error; err != nil {
				dupErr.Store(err.Error())
				return
			}
			if len(due) == 0 {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			for _, a := range due {
				var outcomes [2]engine.Outcome
				var errs [2]error
				var wg sync.WaitGroup
				for i := range stacks {
					wg.Go(func() { outcomes[i], errs[i] = stacks[i].eng.RunAttempt(dctx, a.ID, a.Generation) })
				}
				wg.Wait()
				dupPairs.Add(1)
				claimed := 0
				for i, o := range outcomes {
					if errs[i] != nil {
						dupErr.Store(fmt.Sprintf("RunAttempt %s gen %d on engine %d: %v", a.IdempotencyKey, a.Generation, i, errs[i]))
						return
					}
					if o != engine.OutcomeSkipped && o != engine.OutcomeDeferred {
						claimed++ // it ran the step (succeeded, retrying, dlq) or held it (released, lost)
					}
				}
				dupClaims.Add(int64(claimed))
				if claimed > 1 {
					dupErr.Store(fmt.Sprintf("attempt %s gen %d was claimed by both engines: outcomes %v", a.IdempotencyKey, a.Generation, outcomes))
					return
				}
			}
		}
	}()
	defer func() {
		select {
		case <-stopDup:
		default:
			close(stopDup)
		}
		<-dupDone
	}()

	// Start the executions through both engines, from four goroutines, while they work.
	var next atomic.Int64
	var wg sync.WaitGroup
	startErrs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for {
				n := next.Add(1) - 1
				if n >= twoEnginesExecutions {
					return
				}
				_, _, err := stacks[g%2].eng.Start(ctx, engine.StartRequest{OrganizationID: orgID, WorkflowID: wf.ID,
					Input: fmt.Appendf(nil, `{"n": %d}`, n), Trigger: engine.TriggerAPI})
				if err != nil {
					startErrs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(startErrs)
	for err := range startErrs {
		t.Fatal(err)
	}
	startedIn := time.Since(began)

	deadline := time.Now().Add(90 * time.Second)
	for open() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d executions still open after 90 s", open(), twoEnginesExecutions)
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stopDup)
	<-dupDone
	if e := dupErr.Load(); e != nil {
		t.Fatal(e)
	}
	workedIn := time.Since(began)

	// Every execution SUCCEEDED.
	var bad []models.Execution
	if err := db.Conn(ctx).Where("organization_id = ? AND status <> ?", orgID, models.ExecSucceeded).Limit(10).Find(&bad).Error; err != nil {
		t.Fatal(err)
	}
	for _, ex := range bad {
		t.Errorf("execution %s is %s, want SUCCEEDED", ex.ID, ex.Status)
	}
	var exCount int64
	db.Conn(ctx).Model(&models.Execution{}).Where("organization_id = ?", orgID).Count(&exCount)
	if exCount != twoEnginesExecutions {
		t.Errorf("%d executions, want %d", exCount, twoEnginesExecutions)
	}

	// Each (execution, step, attempt) once.
	var dups []struct {
		ExecutionID, StepID string
		Attempt, N          int
	}
	if err := db.Conn(ctx).Raw(`SELECT execution_id, step_id, attempt, COUNT(*) AS n FROM step_executions WHERE organization_id = ?
	  GROUP BY execution_id, step_id, attempt HAVING COUNT(*) > 1 LIMIT 10`, orgID).Scan(&dups).Error; err != nil {
		t.Fatal(err)
	}
	for _, d := range dups {
		t.Errorf("attempt %d of %s/%s has %d rows", d.Attempt, d.ExecutionID, d.StepID, d.N)
	}

	// Each step: one attempt, or two where attempt 1 was made to fail; the last SUCCEEDED.
	var as []models.StepAttempt
	if err := db.Conn(ctx).Select("id, execution_id, step_id, step_index, attempt, status, generation, reclaims, idempotency_key").
		Where("organization_id = ?", orgID).Order("execution_id, step_index, attempt").Find(&as).Error; err != nil {
		t.Fatal(err)
	}
	problems := 0
	fail := func(format string, args ...any) {
		if problems++; problems <= 30 {
			t.Errorf(format, args...)
		}
	}
	want := 0
	type stepKey struct{ exec, step string }
	perStep := map[stepKey][]models.StepAttempt{}
	for _, a := range as {
		k := stepKey{a.ExecutionID, a.StepID}
		perStep[k] = append(perStep[k], a)
	}
	if len(perStep) != twoEnginesExecutions*twoEnginesSteps {
		fail("%d (execution, step) pairs have attempts, want %d", len(perStep), twoEnginesExecutions*twoEnginesSteps)
	}
	for k, sa := range perStep {
		statuses := []string{models.StepSucceeded}
		if twoEnginesFails(k.exec, k.step) {
			statuses = []string{models.StepRetrying, models.StepSucceeded}
		}
		want += len(statuses)
		ok := len(sa) == len(statuses)
		for i := 0; ok && i < len(sa); i++ {
			ok = sa[i].Attempt == i+1 && sa[i].Status == statuses[i]
		}
		if !ok {
			var got []string
			for _, a := range sa {
				got = append(got, fmt.Sprintf("%d:%s", a.Attempt, a.Status))
			}
			fail("%s/%s: attempts %v, want statuses %v", k.exec, k.step, got, statuses)
		}
	}
	if len(as) < twoEnginesExecutions*twoEnginesSteps || len(as) != want {
		fail("%d attempt rows, want %d", len(as), want)
	}

	// Each attempt ran exactly once, on one engine: never claimed twice.
	runs.mu.Lock()
	defer runs.mu.Unlock()
	perEngine := [2]int{}
	dupRuns := 0
	for _, a := range as {
		rs := runs.runs[a.IdempotencyKey]
		if len(rs) != 1 {
			fail("attempt %s ran %d times: %+v", a.IdempotencyKey, len(rs), rs)
		}
		if a.Reclaims != 0 {
			fail("attempt %s was reclaimed %d times: no process died", a.IdempotencyKey, a.Reclaims)
		}
	}
	for key, rs := range runs.runs {
		if _, _, _, ok := parseKey(key); !ok {
			fail("a step ran with the key %q", key)
		}
		for _, r := range rs {
			if r.duplicate {
				dupRuns++
			} else {
				perEngine[r.engine]++
			}
		}
	}
	if len(runs.runs) != len(as) {
		fail("%d keys ran, %d attempt rows", len(runs.runs), len(as))
	}
	queued := perEngine[0] + perEngine[1]
	for i, n := range perEngine {
		if n < queued/10 {
			fail("engine %d ran %d of the %d attempts that came from the queue: the engines did not share the work", i+1, n, queued)
		}
	}
	if dupPairs.Load() == 0 {
		fail("no attempt was delivered twice: the test exercised no duplicate claim")
	}
	t.Logf("%d attempts in %s (starts took %s); from the queue: engine 1 ran %d, engine 2 ran %d; %d duplicate deliveries to both engines, %d of them claimed (%d attempts run)",
		len(as), workedIn.Round(time.Millisecond), startedIn.Round(time.Millisecond), perEngine[0], perEngine[1],
		dupPairs.Load(), dupClaims.Load(), dupRuns)
}

// TestLongExecutionYields starts one execution of 200 steps, then 40 short ones, on a queue
// with one worker, so that what the long execution yields only the others can take. A
// worker runs at most 25 steps (or 2 s) of one execution in a row: the long execution must
// go back to the queue within its first 25 steps, behind every short execution, which all
// finish before its next step starts; it needs at least 200/25 queue jobs. Were the chain
// unlimited, the long execution would run its 200 steps in one go before any short one.
func TestLongExecutionYields(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		log := testLogger(t)
		reg := loopbackSteps()
		eng, runner, err := wire(db, log, reg, engine.Config{LeaseGrace: time.Second, PendingGrace: time.Second},
			jobs.Config{Workers: 1, ReconcileEvery: 500 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, TestOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		org := models.Organization{ID: models.NewID(), Name: "Biuro Testowe"}
		if err := db.Conn(ctx).Create(&org).Error; err != nil {
			t.Fatal(err)
		}
		wfs := &workflows.Service{DB: db, Steps: reg}
		transforms := func(name string, n int) string {
			var ss []string
			for i := range n {
				ss = append(ss, fmt.Sprintf(`{"id": "s%d", "type": "transform", "config": {"output": {"n": %d}}}`, i, i))
			}
			return fmt.Sprintf(`{"name": %q, "settings": {}, "steps": [%s]}`, name, strings.Join(ss, ","))
		}
		const longSteps, shorts, shortSteps = 200, 40, 2
		// A definition may have at most 50 steps when saved; the stored version, which the
		// engine does not validate again, gets 200.
		long, err := wfs.Create(ctx, org.ID, audit.System, []byte(transforms("Long", 50)))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Conn(ctx).Exec(`UPDATE workflow_versions SET definition = ? WHERE workflow_id = ?`, transforms("Long", longSteps), long.ID).Error; err != nil {
			t.Fatal(err)
		}
		short, err := wfs.Create(ctx, org.ID, audit.System, []byte(transforms("Short", shortSteps)))
		if err != nil {
			t.Fatal(err)
		}

		// Everything is queued before the worker starts: the long execution first.
		start := func(wf *models.Workflow) string {
			ex, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID, Input: []byte(`{}`), Trigger: engine.TriggerAPI})
			if err != nil {
				t.Fatal(err)
			}
			return ex.ID
		}
		longID := start(long)
		shortIDs := make([]any, shorts)
		for i := range shortIDs {
			shortIDs[i] = start(short)
		}
		if err := runner.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_ = runner.Stop(ctx)
		})

		deadline := time.Now().Add(60 * time.Second)
		for {
			var open int64
			if err := db.Conn(ctx).Model(&models.Execution{}).Where("organization_id = ? AND status NOT IN ?", org.ID,
				[]string{models.ExecSucceeded, models.ExecFailed, models.ExecDLQPending}).Count(&open).Error; err != nil {
				t.Fatal(err)
			}
			if open == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d executions still open after 60 s", open)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var exs []models.Execution
		if err := db.Conn(ctx).Where("organization_id = ?", org.ID).Find(&exs).Error; err != nil {
			t.Fatal(err)
		}
		for _, ex := range exs {
			if ex.Status != models.ExecSucceeded {
				t.Fatalf("execution %s is %s, want SUCCEEDED", ex.ID, ex.Status)
			}
		}

		var longAs, shortAs []models.StepAttempt
		if err := db.Conn(ctx).Where("execution_id = ?", longID).Order("step_index, attempt").Find(&longAs).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Conn(ctx).Where("execution_id IN ?", shortIDs).Find(&shortAs).Error; err != nil {
			t.Fatal(err)
		}
		if len(longAs) != longSteps || len(shortAs) != shorts*shortSteps {
			t.Fatalf("%d attempts of the long execution, want %d; %d of the short ones, want %d", len(longAs), longSteps, len(shortAs), shorts*shortSteps)
		}
		firstShort, lastShort := *shortAs[0].StartedAt, *shortAs[0].FinishedAt
		for _, a := range shortAs {
			if a.StartedAt.Before(firstShort) {
				firstShort = *a.StartedAt
			}
			if a.FinishedAt.After(lastShort) {
				lastShort = *a.FinishedAt
			}
		}
		// The steps the long execution ran before the worker took anything else.
		before := 0
		for i, a := range longAs {
			if a.Status != models.StepSucceeded || a.Attempt != 1 || a.StepIndex != i {
				t.Fatalf("long execution: attempt %d of step %d is %s", a.Attempt, a.StepIndex, a.Status)
			}
			if a.StartedAt.Before(firstShort) {
				before++
			}
		}
		if before == 0 || before > 25 {
			t.Errorf("the long execution ran %d steps before any short execution started: want 1..25 (the chain budget)", before)
		}
		if before < len(longAs) {
			if resumed := longAs[before]; !resumed.StartedAt.After(lastShort) {
				t.Errorf("the long execution resumed at step %d at %s, before the last short execution finished (%s): it did not go to the back of the queue",
					before, resumed.StartedAt.Format(time.RFC3339Nano), lastShort.Format(time.RFC3339Nano))
			}
		}
		if longDone := *longAs[len(longAs)-1].FinishedAt; !longDone.After(lastShort) {
			t.Errorf("the long execution finished at %s, before the last short one (%s)", longDone.Format(time.RFC3339Nano), lastShort.Format(time.RFC3339Nano))
		}

		// One queue job per chain: at least 200/25.
		ids := make([]any, len(longAs))
		for i, a := range longAs {
			ids[i] = a.ID
		}
		where := "kind = 'run_attempt' AND json_extract(args, '$.attempt_id') IN ?"
		if db.Dialect == models.Postgres {
			where = "kind = 'run_attempt' AND args->>'attempt_id' IN ?"
		}
		var queued int64
		if err := db.Conn(ctx).Table("river_job").Where(where, ids).Count(&queued).Error; err != nil {
			t.Fatal(err)
		}
		if queued < longSteps/25 {
			t.Errorf("the long execution's %d steps ran from %d queue jobs: want at least %d (chains of at most 25 steps)", longSteps, queued, longSteps/25)
		}
		t.Logf("long execution: %d of its %d steps ran before the first of %d short executions started; %d queue jobs",
			before, longSteps, shorts, queued)
	})
}
