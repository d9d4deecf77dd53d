package models_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
)

// listFixture is an organization with two workflows and dead letters made directly (not
// through the engine), so that every list column has a known value.
type listFixture struct {
	db       *models.DB
	org      string
	wfA, wfB string
	dls      []models.DeadLetter // oldest first
}

func newListFixture(t *testing.T, db *models.DB) *listFixture {
	t.Helper()
	ctx := context.Background()
	f := &listFixture{db: db}
	f.org = mkOrg(t, db, "Biuro Listy")
	f.wfA, f.wfB = mkWorkflow(t, db, f.org, "VAT"), mkWorkflow(t, db, f.org, "Płace")
	base := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	type spec struct {
		wf, step, status, typ, subject, reason string
		at                                     time.Time
	}
	specs := []spec{
		{f.wfA, "validate", models.DLQPending, "validation", "Kowalski sp. z o.o. · 2026-10", "NIP must have 10 digits", base},
		{f.wfA, "submit", models.DLQPending, "timeout", "Nowak · 2026-10", "no answer in 30 s", base.Add(time.Hour)},
		{f.wfB, "export", models.DLQResolved, "external_service", "Zielińska · 2026-10", "503 Service Unavailable", base.Add(24 * time.Hour)},
		// Two at the same instant: the id breaks the tie.
		{f.wfB, "export", models.DLQPending, "rate_limit", "", "429 Too Many Requests (100% of quota_used)", base.Add(48 * time.Hour)},
		{f.wfA, "validate", models.DLQSkipped, "validation", "KOWALSKI · 2026-11", "NIP must have 10 digits", base.Add(48 * time.Hour)},
	}
	for i, s := range specs {
		ex := mkExecution(t, db, f.org, s.wf, s.at)
		e := models.ExecutionError{ID: models.NewID(), OrganizationID: f.org, ExecutionID: ex, StepID: s.step, ErrorType: s.typ,
			ErrorCode: ptr("E" + fmt.Sprint(i)), ErrorMessage: "record: " + s.reason, StackTrace: ptr("trace"), Status: models.ErrDeadLetter,
			CreatedAt: s.at, UpdatedAt: s.at}
		if err := db.Conn(ctx).Create(&e).Error; err != nil {
			t.Fatal(err)
		}
		dl := models.DeadLetter{ID: models.NewID(), OrganizationID: f.org, ErrorID: e.ID, WorkflowID: s.wf, ExecutionID: ex,
			OriginalInput: models.JSON(`{"nip": "1"}`), StepStates: models.JSON(`[]`), FailedStepID: s.step, Status: s.status,
			ErrorType: s.typ, Reason: s.reason, RetryCount: i, ExpiresAt: s.at.Add(30 * 24 * time.Hour), CreatedAt: s.at, UpdatedAt: s.at}
		if s.subject != "" {
			dl.Subject = ptr(s.subject)
		}
		if err := db.Conn(ctx).Create(&dl).Error; err != nil {
			t.Fatal(err)
		}
		f.dls = append(f.dls, dl)
	}
	// Another organization's dead letter matches every filter but the organization.
	other := mkOrg(t, db, "Biuro Obce")
	wf := mkWorkflow(t, db, other, "VAT")
	ex := mkExecution(t, db, other, wf, base)
	e := models.ExecutionError{ID: models.NewID(), OrganizationID: other, ExecutionID: ex, StepID: "validate", ErrorType: "validation",
		ErrorMessage: "x", Status: models.ErrDeadLetter}
	if err := db.Conn(ctx).Create(&e).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Conn(ctx).Create(&models.DeadLetter{ID: models.NewID(), OrganizationID: other, ErrorID: e.ID, WorkflowID: wf, ExecutionID: ex,
		OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: "validate", Status: models.DLQPending,
		ErrorType: "validation", Reason: "NIP must have 10 digits", Subject: ptr("Kowalski"), ExpiresAt: base, CreatedAt: base, UpdatedAt: base}).Error; err != nil {
		t.Fatal(err)
	}
	return f
}

func ptr(s string) *string { return &s }

func mkOrg(t testing.TB, db *models.DB, name string) string {
	t.Helper()
	org := models.Organization{ID: models.NewID(), Name: name}
	if err := db.Conn(context.Background()).Create(&org).Error; err != nil {
		t.Fatal(err)
	}
	return org.ID
}

func mkWorkflow(t testing.TB, db *models.DB, org, name string) string {
	t.Helper()
	wf := models.Workflow{ID: models.NewID(), OrganizationID: org, Name: name, Version: 1, Definition: models.JSON(`{"steps": []}`),
		UnknownErrors: "retry", WebhookToken: models.NewID(), WebhookSecret: "s"}
	if err := db.Conn(context.Background()).Create(&wf).Error; err != nil {
		t.Fatal(err)
	}
	return wf.ID
}

func mkExecution(t testing.TB, db *models.DB, org, wf string, at time.Time, subject ...string) string {
	t.Helper()
	ex := models.Execution{ID: models.NewID(), OrganizationID: org, WorkflowID: wf, WorkflowVersion: 1, Status: models.ExecDLQPending,
		Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: at, UpdatedAt: at}
	if len(subject) > 0 {
		ex.Subject = &subject[0]
	}
	if err := db.Conn(context.Background()).Create(&ex).Error; err != nil {
		t.Fatal(err)
	}
	return ex.ID
}

// ids are the fixture's dead letters by position, newest first as the list orders them.
func (f *listFixture) ids(positions ...int) []string {
	out := make([]string, len(positions))
	for i, p := range positions {
		out[i] = f.dls[p].ID
	}
	return out
}

// newestFirst orders the positions as the list does: created_at, then id, descending.
func (f *listFixture) newestFirst(positions ...int) []int {
	slices.SortFunc(positions, func(a, b int) int {
		if c := f.dls[b].CreatedAt.Compare(f.dls[a].CreatedAt); c != 0 {
			return c
		}
		if f.dls[b].ID > f.dls[a].ID {
			return 1
		}
		return -1
	})
	return positions
}

func rowIDs(rows []models.DLQRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// Every filter of the dead-letter list, alone and together, on both databases; the list
// reads the dead letter's own columns (subject, reason, type, retries) and no other
// organization's rows.
func TestListDLQFilters(t *testing.T) {
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		fx := newListFixture(t, db)
		base := fx.dls[0].CreatedAt
		for _, c := range []struct {
			name string
			f    models.DLQFilter
			want []int
		}{
			{"all", models.DLQFilter{}, []int{0, 1, 2, 3, 4}},
			{"workflow", models.DLQFilter{WorkflowID: fx.wfB}, []int{2, 3}},
			{"status", models.DLQFilter{Status: models.DLQPending}, []int{0, 1, 3}},
			{"error type", models.DLQFilter{ErrorType: "validation"}, []int{0, 4}},
			{"failed step", models.DLQFilter{StepID: "export"}, []int{2, 3}},
			{"from", models.DLQFilter{From: base.Add(24 * time.Hour)}, []int{2, 3, 4}},
			{"to (exclusive)", models.DLQFilter{To: base.Add(24 * time.Hour)}, []int{0, 1}},
			{"search subject, any case", models.DLQFilter{Q: "kowalski"}, []int{0, 4}},
			{"search reason", models.DLQFilter{Q: "too many"}, []int{3}},
			{"search with LIKE characters", models.DLQFilter{Q: "100% of quota_"}, []int{3}},
			{"a % is not a wildcard", models.DLQFilter{Q: "0%"}, []int{3}},
			{"an _ is not a wildcard", models.DLQFilter{Q: "y_R"}, nil},
			{"together", models.DLQFilter{WorkflowID: fx.wfA, Status: models.DLQPending, ErrorType: "validation", StepID: "validate", Q: "NIP"}, []int{0}},
			{"nothing", models.DLQFilter{Q: "no such text"}, nil},
		} {
			rows, next, err := db.ListDLQ(ctx, fx.org, c.f)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			want := fx.ids(fx.newestFirst(c.want...)...)
			if got := rowIDs(rows); !slices.Equal(got, want) || next != "" {
				t.Errorf("%s: got %v next %q, want %v", c.name, got, next, want)
			}
		}
		rows, _, err := db.ListDLQ(ctx, fx.org, models.DLQFilter{Q: "Nowak"})
		if err != nil || len(rows) != 1 {
			t.Fatalf("Nowak: %v %v", rows, err)
		}
		r := rows[0]
		if deref(r.Subject) != "Nowak · 2026-10" || r.Reason != "no answer in 30 s" || r.ErrorType != "timeout" || r.RetryCount != 1 ||
			r.WorkflowName != "VAT" || r.FailedStepID != "submit" || r.Status != models.DLQPending {
			t.Errorf("row: %+v", r)
		}
		if len(r.OriginalInput) != 0 || len(r.StepStates) != 0 || r.ErrorMessage != "" {
			t.Errorf("the list read the payload or the error record: %+v", r)
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Keyset pages: every row once, in order, across ties in created_at, with a filter kept.
func TestListDLQPages(t *testing.T) {
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		fx := newListFixture(t, db)
		for _, f := range []models.DLQFilter{{Limit: 1}, {Limit: 2}, {Limit: 2, Status: models.DLQPending}} {
			var got []string
			for pages := 0; ; pages++ {
				rows, next, err := db.ListDLQ(ctx, fx.org, f)
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) > f.Limit || pages > 10 {
					t.Fatalf("page of %d rows, limit %d", len(rows), f.Limit)
				}
				got = append(got, rowIDs(rows)...)
				if next == "" {
					break
				}
				f.Cursor = next
			}
			all, _, err := db.ListDLQ(ctx, fx.org, models.DLQFilter{Status: f.Status})
			if err != nil {
				t.Fatal(err)
			}
			if want := rowIDs(all); !slices.Equal(got, want) {
				t.Errorf("limit %d status %q: pages %v, want %v", f.Limit, f.Status, got, want)
			}
		}
		if _, _, err := db.ListDLQ(ctx, fx.org, models.DLQFilter{Cursor: "garbage"}); apperr.ErrorCode(err) != apperr.EINVALID {
			t.Errorf("bad cursor: %v", err)
		}
	})
}

func TestDLQCountsAndItem(t *testing.T) {
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		fx := newListFixture(t, db)
		counts, err := db.DLQStatusCounts(ctx, fx.org)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"pending": 3, "processing": 0, "resolved": 1, "skipped": 1, "expired": 0}
		for st, n := range want {
			if counts[st] != n {
				t.Errorf("count %s = %d, want %d (%v)", st, counts[st], n, counts)
			}
		}
		if n, err := db.CountDLQPending(ctx, fx.org); err != nil || n != 3 {
			t.Errorf("pending badge: %d %v", n, err)
		}
		r, err := db.GetDLQ(ctx, fx.org, fx.dls[1].ID)
		if err != nil {
			t.Fatal(err)
		}
		if deref(r.ErrorCode) != "E1" || r.ErrorMessage != "record: no answer in 30 s" || deref(r.StackTrace) != "trace" ||
			r.ErrorType != "timeout" || r.Reason != "no answer in 30 s" || string(r.OriginalInput) == "" || r.WorkflowName != "VAT" {
			t.Errorf("item: %+v", r)
		}
		if _, err := db.GetDLQ(ctx, mkOrg(t, db, "Inne"), fx.dls[1].ID); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("another organization's item: %v", err)
		}
	})
}

// The executions list searches the subject and pages by keyset like the DLQ.
func TestListExecutionsSearch(t *testing.T) {
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org := mkOrg(t, db, "Biuro")
		wf := mkWorkflow(t, db, org, "VAT")
		at := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
		kowalski := mkExecution(t, db, org, wf, at, "Kowalski sp. z o.o. · 2026-10")
		mkExecution(t, db, org, wf, at.Add(time.Minute), "Nowak · 2026-10")
		mkExecution(t, db, org, wf, at.Add(2*time.Minute))
		rows, next, err := db.ListExecutions(ctx, org, models.ExecutionFilter{Q: "KOWALSKI"})
		if err != nil || len(rows) != 1 || rows[0].ID != kowalski || deref(rows[0].Subject) != "Kowalski sp. z o.o. · 2026-10" || next != "" {
			t.Fatalf("search: %v %q %v", rows, next, err)
		}
		if len(rows[0].Input) != 0 {
			t.Error("the list read the input")
		}
		var got int
		f := models.ExecutionFilter{Limit: 1}
		for {
			rows, next, err := db.ListExecutions(ctx, org, f)
			if err != nil {
				t.Fatal(err)
			}
			got += len(rows)
			if next == "" {
				break
			}
			f.Cursor = next
		}
		if got != 3 {
			t.Errorf("pages of one: %d executions, want 3", got)
		}
	})
}
