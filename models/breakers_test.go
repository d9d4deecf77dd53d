package models_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
)

// mkBreaker inserts a breaker row as the engine would leave it.
func mkBreaker(t testing.TB, db *models.DB, b models.CircuitBreaker) models.CircuitBreaker {
	t.Helper()
	b.ID = models.NewID()
	if b.WorkflowID != nil {
		b.ScopeKey = "step:" + *b.WorkflowID + ":" + *b.StepID
	} else {
		b.ScopeKey = "host:" + *b.Host
	}
	b.FailureThreshold, b.ResetTimeoutMs, b.HalfOpenRequests = 5, 60_000, 3
	b.CreatedAt, b.UpdatedAt = time.Now().UTC(), time.Now().UTC()
	if err := db.Conn(context.Background()).Create(&b).Error; err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBreakerLastFailureFromWindow: a breaker's row is written only when it changes state;
// a failure counted since makes its last failure, and its place in the list.
func TestBreakerLastFailureFromWindow(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org := mkOrg(t, db, "Biuro Bezpieczniki")
		wf := mkWorkflow(t, db, org, "Wyciągi")
		now := time.Now().UTC()
		ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
		recent := mkBreaker(t, db, models.CircuitBreaker{OrganizationID: org, WorkflowID: &wf, StepID: ptr("fetch"), State: "closed", LastFailureAt: ago(time.Minute)})
		stale := mkBreaker(t, db, models.CircuitBreaker{OrganizationID: org, WorkflowID: &wf, StepID: ptr("post"), State: "closed", LastFailureAt: ago(time.Hour)})
		failed := now.Add(-5 * time.Second)
		if err := db.Conn(ctx).Create(&models.BreakerFailure{ID: models.NewID(), BreakerID: stale.ID, At: failed}).Error; err != nil {
			t.Fatal(err)
		}
		rows, err := db.ListBreakers(ctx, org, models.BreakerFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || rows[0].ID != stale.ID || rows[1].ID != recent.ID {
			t.Fatalf("order %+v, want the breaker that failed 5 s ago first", rows)
		}
		if got := rows[0].LastFailureAt; got == nil || got.Sub(failed).Abs() > time.Millisecond || rows[0].InWindow != 1 {
			t.Errorf("last failure %v (in window %d), want %v", got, rows[0].InWindow, failed)
		}
		b, err := db.GetBreaker(ctx, org, stale.ID)
		if err != nil || b.LastFailureAt == nil || b.LastFailureAt.Sub(failed).Abs() > time.Millisecond {
			t.Errorf("get: %+v %v", b, err)
		}
	})
}

func TestListBreakers(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org := mkOrg(t, db, "Biuro Bezpieczniki")
		wfA, wfB := mkWorkflow(t, db, org, "Wyciągi"), mkWorkflow(t, db, org, "Płace")
		now := time.Now().UTC()
		ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
		closedOld := mkBreaker(t, db, models.CircuitBreaker{OrganizationID: org, WorkflowID: &wfA, StepID: ptr("fetch"), State: "closed", LastFailureAt: ago(time.Hour)})
		closedNew := mkBreaker(t, db, models.CircuitBreaker{OrganizationID: org, WorkflowID: &wfB, StepID: ptr("export"), State: "closed", LastFailureAt: ago(time.Second)})
		open := mkBreaker(t, db, models.CircuitBreaker{OrganizationID: org, WorkflowID: &wfA, StepID: ptr("post"), State: "open", LastFailureAt: ago(time.Hour), OpenedAt: ago(time.Hour)})
		half := mkBreaker(t, db, models.CircuitBreaker{OrganizationID: org, Host: ptr("bank.example"), State: "half_open", LastFailureAt: ago(2 * time.Minute)})
		never := mkBreaker(t, db, models.CircuitBreaker{OrganizationID: org, WorkflowID: &wfB, StepID: ptr("mail"), State: "closed"})
		other := mkOrg(t, db, "Biuro Obce")
		otherWF := mkWorkflow(t, db, other, "Wyciągi")
		foreign := mkBreaker(t, db, models.CircuitBreaker{OrganizationID: other, WorkflowID: &otherWF, StepID: ptr("fetch"), State: "open"})

		// Two failures in the window and one before it; two attempts waiting on the open
		// breaker, one that waited and has run since, one of another breaker.
		for _, at := range []time.Time{now.Add(-10 * time.Second), now.Add(-20 * time.Second), now.Add(-2 * time.Minute)} {
			if err := db.Conn(ctx).Create(&models.BreakerFailure{ID: models.NewID(), BreakerID: closedNew.ID, At: at}).Error; err != nil {
				t.Fatal(err)
			}
		}
		ex := mkExecution(t, db, org, wfA, now)
		for i, st := range []string{models.StepPending, models.StepPending, models.StepSucceeded} {
			a := models.StepAttempt{ID: models.NewID(), OrganizationID: org, ExecutionID: ex, StepID: "post", StepIndex: 0, Attempt: i + 1, Status: st,
				IdempotencyKey: models.NewID(), ScheduledAt: now, WaitingBreakerID: &open.ID, CreatedAt: now, UpdatedAt: now}
			if err := db.Conn(ctx).Create(&a).Error; err != nil {
				t.Fatal(err)
			}
		}

		ids := func(rows []models.BreakerRow) []string {
			var out []string
			for _, r := range rows {
				out = append(out, r.ID)
			}
			return out
		}
		rows, err := db.ListBreakers(ctx, org, models.BreakerFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{open.ID, half.ID, closedNew.ID, closedOld.ID, never.ID}; !slices.Equal(ids(rows), want) {
			t.Fatalf("order %v, want %v", ids(rows), want)
		}
		byID := map[string]models.BreakerRow{}
		for _, r := range rows {
			byID[r.ID] = r
		}
		if r := byID[open.ID]; r.Waiting != 2 || r.WorkflowName != "Wyciągi" || r.InWindow != 0 {
			t.Errorf("open: waiting %d, workflow %q, in window %d", r.Waiting, r.WorkflowName, r.InWindow)
		}
		if r := byID[closedNew.ID]; r.InWindow != 2 || r.Waiting != 0 || r.WorkflowName != "Płace" {
			t.Errorf("closed: in window %d, waiting %d, workflow %q", r.InWindow, r.Waiting, r.WorkflowName)
		}
		if r := byID[half.ID]; r.WorkflowName != "" || r.Host == nil || *r.Host != "bank.example" {
			t.Errorf("host breaker: %+v", r)
		}

		for _, c := range []struct {
			name string
			f    models.BreakerFilter
			want []string
		}{
			{"state", models.BreakerFilter{State: "closed"}, []string{closedNew.ID, closedOld.ID, never.ID}},
			{"workflow", models.BreakerFilter{WorkflowID: wfA}, []string{open.ID, closedOld.ID}},
			{"workflow and its hosts", models.BreakerFilter{WorkflowID: wfA, Hosts: []string{"bank.example"}}, []string{open.ID, half.ID, closedOld.ID}},
			{"both", models.BreakerFilter{WorkflowID: wfA, State: "open"}, []string{open.ID}},
			{"another organization's workflow", models.BreakerFilter{WorkflowID: otherWF}, nil},
		} {
			rows, err := db.ListBreakers(ctx, org, c.f)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(rows), c.want) {
				t.Errorf("%s: %v, want %v", c.name, ids(rows), c.want)
			}
		}

		if b, err := db.GetBreaker(ctx, org, open.ID); err != nil || b.Waiting != 2 || b.WorkflowName != "Wyciągi" {
			t.Errorf("get: %+v %v", b, err)
		}
		if _, err := db.GetBreaker(ctx, org, foreign.ID); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("another organization's breaker: %v", err)
		}
		wb, err := db.WorkflowBreakers(ctx, org, wfB, nil)
		if err != nil || len(wb) != 2 {
			t.Errorf("workflow breakers: %d %v", len(wb), err)
		}
	})
}
