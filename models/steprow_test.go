package models_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// The step path's hand-written rows (steprow.go) read and write every column GORM maps:
// an attempt written by CreateAttempt reads back through GORM with every field set, and
// AttemptAndExecution reads what GORM's First reads of the attempt and of its execution.
// A field added to StepAttempt or Execution and not to steprow.go's lists fails here.
func TestStepRowColumns(t *testing.T) {
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org := mkOrg(t, db, "Biuro")
		wf := mkWorkflow(t, db, org, "Księgowanie")
		at := time.Date(2026, 11, 3, 10, 4, 5, 123456000, time.UTC)
		str := func(s string) *string { return &s }
		tm := func(d time.Duration) *time.Time { x := at.Add(d); return &x }
		n := int64(4321)
		amount := int64(123456)
		ex := models.Execution{ID: models.NewID(), OrganizationID: org, WorkflowID: wf, WorkflowVersion: 3, Status: models.ExecRunning,
			Input: models.JSON(`{"nip": "5260250274"}`), TriggerType: "api", CorrelationID: models.NewID(), CurrentStepID: str("post"),
			CreatedBy: str(models.NewID()), Subject: str("Faktura FV/1"), SearchText: "faktura fv/1", RetryOf: str(models.NewID()),
			About: models.About{Client: str("ACME"), Period: str("2026-10"), Obligation: str("VAT"), DueOn: str("2026-11-25"),
				AmountMinor: &amount, Currency: str("PLN")},
			DeadLetterID: str(models.NewID()), ReplayedAt: tm(time.Minute), RetryOverride: models.JSON(`{"maxRetries": 2}`),
			OriginalInput: models.JSON(`{"nip": "1"}`), RollbackStatus: str(models.RollingBack), StartedAt: tm(2 * time.Minute),
			FinishedAt: tm(3 * time.Minute), CreatedAt: at, UpdatedAt: at.Add(4 * time.Minute)}
		allSet(t, "execution", ex)
		if err := models.CreateExecution(db.Conn(ctx), &ex); err != nil {
			t.Fatal(err)
		}
		a := models.StepAttempt{ID: models.NewID(), OrganizationID: org, ExecutionID: ex.ID, StepID: "post", StepIndex: 2, Attempt: 3,
			Status: models.StepRunning, Generation: 4, Reclaims: 1, IdempotencyKey: "key-1", Input: models.JSON(`{"a": 1}`),
			Output: models.JSON(`{"b": 2}`), ErrorType: str("transient"), ErrorCode: str("HTTP_503"), ErrorMessage: str("busy"),
			StackTrace: str("trace"), ScheduledAt: at, StartedAt: tm(time.Second), FinishedAt: tm(2 * time.Second),
			LeaseExpiresAt: tm(3 * time.Second), NextRetryAt: tm(4 * time.Second), DurationUs: &n, WaitingBreakerID: str(models.NewID()),
			HandlesAttemptID: str(models.NewID()), CreatedAt: at, UpdatedAt: at.Add(5 * time.Second)}
		allSet(t, "attempt", a)
		if err := models.CreateAttempt(db.Conn(ctx), &a); err != nil {
			t.Fatal(err)
		}
		var wantA models.StepAttempt
		if err := db.Conn(ctx).Where("id = ?", a.ID).First(&wantA).Error; err != nil {
			t.Fatal(err)
		}
		allSet(t, "attempt written by CreateAttempt", wantA)
		if !wantA.ScheduledAt.Equal(a.ScheduledAt) || !wantA.LeaseExpiresAt.Equal(*a.LeaseExpiresAt) || string(wantA.Output) != string(a.Output) {
			t.Fatalf("CreateAttempt wrote %+v, want %+v", wantA, a)
		}
		var wantEx models.Execution
		if err := db.Conn(ctx).Where("id = ?", ex.ID).First(&wantEx).Error; err != nil {
			t.Fatal(err)
		}
		allSet(t, "execution written by CreateExecution", wantEx)
		if *wantEx.DueOn != *ex.DueOn || *wantEx.AmountMinor != amount || !wantEx.ReplayedAt.Equal(*ex.ReplayedAt) {
			t.Fatalf("CreateExecution wrote %+v, want %+v", wantEx, ex)
		}
		var gotA models.StepAttempt
		var gotEx models.Execution
		if err := db.AttemptAndExecution(ctx, a.ID, &gotA, &gotEx); err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "attempt", gotA, wantA)
		sameJSON(t, "execution", gotEx, wantEx)

		// As GORM's Create: the search text from the subject when none is given, the times
		// from the clock when zero.
		bare := models.Execution{ID: models.NewID(), OrganizationID: org, WorkflowID: wf, WorkflowVersion: 1, Status: models.ExecPending,
			Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), Subject: str("Deklaracja ŁÓDŹ")}
		if err := models.CreateExecution(db.Conn(ctx), &bare); err != nil {
			t.Fatal(err)
		}
		var back models.Execution
		if err := db.Conn(ctx).Where("id = ?", bare.ID).First(&back).Error; err != nil {
			t.Fatal(err)
		}
		if back.SearchText != models.SearchText("Deklaracja ŁÓDŹ") || back.SearchText == "" || back.CreatedAt.IsZero() || back.UpdatedAt.IsZero() {
			t.Fatalf("bare execution stored %+v", back)
		}

		if err := db.AttemptAndExecution(ctx, models.NewID(), &gotA, &gotEx); !models.IsNotFound(err) {
			t.Fatalf("unknown attempt: %v, want not found", err)
		}
		// An attempt is read only with an execution of its own organization.
		other := mkOrg(t, db, "Inne biuro")
		stray := models.StepAttempt{ID: models.NewID(), OrganizationID: other, ExecutionID: ex.ID, StepID: "post", Attempt: 1,
			Status: models.StepPending, Generation: 1, IdempotencyKey: "key-2", ScheduledAt: at, CreatedAt: at, UpdatedAt: at}
		if err := models.CreateAttempt(db.Conn(ctx), &stray); err != nil {
			t.Fatal(err)
		}
		if err := db.AttemptAndExecution(ctx, stray.ID, &gotA, &gotEx); !models.IsNotFound(err) {
			t.Fatalf("attempt of another organization's execution: %v, want not found", err)
		}
	})
}

// allSet fails unless every field of v (a struct, embedded structs included) is non-zero.
func allSet(t *testing.T, what string, v any) {
	t.Helper()
	var walk func(rv reflect.Value, path string)
	walk = func(rv reflect.Value, path string) {
		for i := range rv.NumField() {
			f, name := rv.Field(i), path+rv.Type().Field(i).Name
			if rv.Type().Field(i).Anonymous && f.Kind() == reflect.Struct {
				walk(f, name+".")
				continue
			}
			if f.IsZero() {
				t.Errorf("%s: %s is not set", what, name)
			}
		}
	}
	walk(reflect.ValueOf(v), "")
}

func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
	}
}
