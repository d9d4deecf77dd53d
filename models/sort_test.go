package models_test

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
)

// sortFixture is an organization's dead letters (and their executions) whose sort keys tie
// in pairs, so that a page boundary falls between equal keys, where only the id orders.
type sortFixture struct {
	db  *models.DB
	org string
	dls []models.DeadLetter
	exs []models.Execution
}

func newSortFixture(t *testing.T, db *models.DB) *sortFixture {
	t.Helper()
	ctx := context.Background()
	f := &sortFixture{db: db, org: mkOrg(t, db, "Biuro Sort")}
	wf := mkWorkflow(t, db, f.org, "VAT")
	base := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	subjects := []string{"Echo", "Alfa", "", "Delta", "Alfa", "Bravo", "", "Charlie", "Bravo"}
	statuses := []string{models.DLQPending, models.DLQResolved, models.DLQPending}
	// What each is about: due dates and amounts with ties, none, and a refund below zero.
	dues := []string{"2026-11-25", "", "2026-10-26", "2026-11-25", "2026-12-28", "", "2026-10-26", "2026-11-25", ""}
	amounts := []int64{18423050, 300, 0, -1250, 300, 0, 99999999999, 18423050, 0}
	for i, s := range subjects {
		about := models.About{}
		if dues[i] != "" {
			about.DueOn = ptr(dues[i])
		}
		if i%3 != 2 { // every third has no amount
			about.AmountMinor, about.Currency = &amounts[i], ptr("PLN")
		}
		at := base.Add(time.Duration(i/2) * time.Hour) // two at each instant
		var subj []string
		if s != "" {
			subj = []string{s}
		}
		exID := mkExecution(t, db, f.org, wf, at, subj...)
		if err := db.Conn(ctx).Model(&models.Execution{}).Where("id = ?", exID).Updates(about.Columns()).Error; err != nil {
			t.Fatal(err)
		}
		var ex models.Execution
		if err := db.Conn(ctx).Where("id = ?", exID).First(&ex).Error; err != nil {
			t.Fatal(err)
		}
		f.exs = append(f.exs, ex)
		e := models.ExecutionError{ID: models.NewID(), OrganizationID: f.org, ExecutionID: exID, StepID: "validate", ErrorType: "validation",
			ErrorMessage: "x", Status: models.ErrDeadLetter, CreatedAt: at, UpdatedAt: at}
		if err := db.Conn(ctx).Create(&e).Error; err != nil {
			t.Fatal(err)
		}
		dl := models.DeadLetter{ID: models.NewID(), OrganizationID: f.org, ErrorID: e.ID, WorkflowID: wf, ExecutionID: exID,
			OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: "validate", Status: statuses[i%3],
			ErrorType: "validation", Reason: "r", RetryCount: i % 3, ExpiresAt: base.Add(30*24*time.Hour + time.Duration(i%4)*time.Hour),
			CreatedAt: at, UpdatedAt: at, About: about}
		if s != "" {
			dl.Subject = ptr(s)
		}
		if err := db.Conn(ctx).Create(&dl).Error; err != nil {
			t.Fatal(err)
		}
		f.dls = append(f.dls, dl)
	}
	// Another organization's rows sort among these and must never show.
	other := mkOrg(t, db, "Biuro Obce")
	owf := mkWorkflow(t, db, other, "VAT")
	ex := mkExecution(t, db, other, owf, base, "Alfa")
	e := models.ExecutionError{ID: models.NewID(), OrganizationID: other, ExecutionID: ex, StepID: "validate", ErrorType: "validation",
		ErrorMessage: "x", Status: models.ErrDeadLetter}
	if err := db.Conn(ctx).Create(&e).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Conn(ctx).Create(&models.DeadLetter{ID: models.NewID(), OrganizationID: other, ErrorID: e.ID, WorkflowID: owf, ExecutionID: ex,
		OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: "validate", Status: models.DLQPending,
		ErrorType: "validation", Reason: "r", Subject: ptr("Alfa"), RetryCount: 1, ExpiresAt: base, CreatedAt: base, UpdatedAt: base}).Error; err != nil {
		t.Fatal(err)
	}
	return f
}

// expectedDLQ is the fixture's dead letters (those keep accepts) in the order sort names,
// worked out here from the keys: the keys, then the id, all one direction.
func (f *sortFixture) expectedDLQ(sort string, keep func(models.DeadLetter) bool) []string {
	name := strings.TrimPrefix(sort, "-")
	// "-" is the other way round; "age" ascending is youngest first: created_at descending.
	desc := strings.HasPrefix(sort, "-") != (name == "age" || name == "amount")
	key := func(a, b models.DeadLetter) int {
		if name == models.DLQUrgency { // soonest due (of those still to handle), largest amount, newest, last id
			open := func(d models.DeadLetter) models.About {
				if d.Status != models.DLQPending && d.Status != models.DLQProcessing {
					d.About.DueOn = nil
				}
				return d.About
			}
			c, _ := aboutOrder("due", open(a), open(b))
			am, _ := aboutOrder("amount", a.About, b.About)
			return cmp.Or(c, -am, b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID, a.ID))
		}
		if c, ok := aboutOrder(name, a.About, b.About); ok {
			return c
		}
		switch name {
		case "age":
			return a.CreatedAt.Compare(b.CreatedAt)
		case "expires":
			return a.ExpiresAt.Compare(b.ExpiresAt)
		case "retries":
			return cmp.Or(cmp.Compare(a.RetryCount, b.RetryCount), a.CreatedAt.Compare(b.CreatedAt))
		}
		return strings.Compare(deref(a.Subject), deref(b.Subject))
	}
	var dls []models.DeadLetter
	for _, dl := range f.dls {
		if keep == nil || keep(dl) {
			dls = append(dls, dl)
		}
	}
	slices.SortFunc(dls, func(a, b models.DeadLetter) int {
		c := cmp.Or(key(a, b), strings.Compare(a.ID, b.ID))
		if desc {
			return -c
		}
		return c
	})
	out := make([]string, len(dls))
	for i, dl := range dls {
		out[i] = dl.ID
	}
	return out
}

// allPages reads every page of the list of f (two rows a page), and fails on a page that
// repeats a row.
func allDLQPages(t *testing.T, db *models.DB, org string, f models.DLQFilter) []string {
	t.Helper()
	var got []string
	seen := map[string]bool{}
	for page := 0; page < 20; page++ {
		rows, next, err := db.ListDLQ(context.Background(), org, f)
		if err != nil {
			t.Fatalf("sort %q page %d: %v", f.Sort, page, err)
		}
		for _, r := range rows {
			if seen[r.ID] {
				t.Fatalf("sort %q: %s twice", f.Sort, r.ID)
			}
			seen[r.ID] = true
			got = append(got, r.ID)
		}
		if next == "" {
			return got
		}
		f.Cursor = next
	}
	t.Fatalf("sort %q: more than 20 pages", f.Sort)
	return nil
}

// TestListDLQSorted: every order of the dead-letter list, in both directions, reads every
// dead letter of the organization once, across pages whose boundaries fall between equal
// keys, in the order of its keys then ids; with a filter too.
func TestListDLQSorted(t *testing.T) {
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newSortFixture(t, db)
		for _, sort := range models.DLQSorts {
			got := allDLQPages(t, db, f.org, models.DLQFilter{Sort: sort, Limit: 2})
			if want := f.expectedDLQ(sort, nil); !slices.Equal(got, want) {
				t.Errorf("sort %q:\n got %v\nwant %v", sort, got, want)
			}
			got = allDLQPages(t, db, f.org, models.DLQFilter{Sort: sort, Limit: 2, Status: models.DLQPending})
			if want := f.expectedDLQ(sort, func(dl models.DeadLetter) bool { return dl.Status == models.DLQPending }); !slices.Equal(got, want) {
				t.Errorf("sort %q, pending:\n got %v\nwant %v", sort, got, want)
			}
		}
		if got := allDLQPages(t, db, f.org, models.DLQFilter{Limit: 2}); !slices.Equal(got, f.expectedDLQ("age", nil)) {
			t.Errorf("the default order is not newest first: %v", got)
		}
	})
}

// TestListSortRefusals: an unknown order is EINVALID on "sort"; a cursor made for another
// order (or none this server made) is EINVALID on "cursor", on both lists.
func TestListSortRefusals(t *testing.T) {
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newSortFixture(t, db)
		ctx := context.Background()
		field := func(err error) string {
			e, ok := err.(*apperr.Error)
			if !ok || e.Code != apperr.EINVALID {
				t.Fatalf("want EINVALID, got %v", err)
			}
			for k := range e.Fields {
				return k
			}
			return ""
		}
		if _, _, err := db.ListDLQ(ctx, f.org, models.DLQFilter{Sort: "workflow"}); field(err) != "sort" {
			t.Errorf("unknown sort: %v", err)
		}
		if _, _, err := db.ListExecutions(ctx, f.org, models.ExecutionFilter{Sort: "duration!"}); field(err) != "sort" {
			t.Errorf("unknown executions sort: %v", err)
		}
		_, bySubject, err := db.ListDLQ(ctx, f.org, models.DLQFilter{Sort: "subject", Limit: 2})
		if err != nil || bySubject == "" {
			t.Fatal(bySubject, err)
		}
		_, byAge, err := db.ListDLQ(ctx, f.org, models.DLQFilter{Limit: 2})
		if err != nil || byAge == "" {
			t.Fatal(byAge, err)
		}
		for _, c := range []struct{ sort, cursor string }{{"expires", bySubject}, {"-subject", bySubject}, {"retries", byAge}, {"", bySubject}, {"subject", "bm90IGpzb24"}} {
			if _, _, err := db.ListDLQ(ctx, f.org, models.DLQFilter{Sort: c.sort, Cursor: c.cursor}); field(err) != "cursor" {
				t.Errorf("sort %q with cursor %q: %v", c.sort, c.cursor, err)
			}
		}
	})
}

// TestListExecutionsSorted: the executions list's orders read every execution of the
// organization once across pages, in the order of their keys then ids.
func TestListExecutionsSorted(t *testing.T) {
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newSortFixture(t, db)
		for _, sort := range models.ExecutionSorts {
			var got []string
			filter := models.ExecutionFilter{Sort: sort, Limit: 2}
			for page := 0; page < 20; page++ {
				rows, next, err := db.ListExecutions(context.Background(), f.org, filter)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					got = append(got, r.ID)
				}
				if filter.Cursor = next; next == "" {
					break
				}
			}
			exs := slices.Clone(f.exs)
			desc := strings.HasPrefix(sort, "-") != (strings.TrimPrefix(sort, "-") == "amount")
			slices.SortFunc(exs, func(a, b models.Execution) int {
				c := strings.Compare(deref(a.Subject), deref(b.Subject))
				if strings.HasSuffix(sort, "started") {
					c = a.CreatedAt.Compare(b.CreatedAt)
				}
				if o, ok := aboutOrder(strings.TrimPrefix(sort, "-"), a.About, b.About); ok {
					c = o
				}
				if c = cmp.Or(c, strings.Compare(a.ID, b.ID)); desc {
					return -c
				}
				return c
			})
			want := make([]string, len(exs))
			for i, ex := range exs {
				want[i] = ex.ID
			}
			if !slices.Equal(got, want) {
				t.Errorf("sort %q:\n got %v\nwant %v", sort, got, want)
			}
		}
	})
}

// aboutOrder compares a and b by the about order name ("due": no due date after every
// date; "amount": no amount below every amount), false for another order.
func aboutOrder(name string, a, b models.About) (int, bool) {
	switch name {
	case "due":
		due := func(x models.About) string { return cmp.Or(deref(x.DueOn), "9999-12-31") }
		return strings.Compare(due(a), due(b)), true
	case "amount":
		amount := func(x models.About) int64 {
			if x.AmountMinor == nil {
				return math.MinInt64
			}
			return *x.AmountMinor
		}
		return cmp.Compare(amount(a), amount(b)), true
	}
	return 0, false
}
