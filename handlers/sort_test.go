package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// sortSeed is a tenant whose five dead letters differ in every sortable column (age,
// expiry, retries, subject), so that each order has one right answer.
type sortSeed struct {
	*tenant
	dls []string
}

func (a *app) sortSeed(name string) *sortSeed {
	a.t.Helper()
	t := a.t
	ctx := context.Background()
	tn := a.tenant(name)
	if err := a.db.Conn(ctx).Where("id = ?", tn.dlqID).Delete(&models.DeadLetter{}).Error; err != nil {
		t.Fatal(err)
	}
	s := &sortSeed{tenant: tn}
	now := time.Now().UTC()
	for i, d := range []struct {
		age, expiresIn time.Duration
		retries        int
		subject        string
	}{
		{1 * time.Hour, 5 * 24 * time.Hour, 3, "Celina · 2026-10"},
		{3 * time.Hour, 1 * 24 * time.Hour, 1, "Adam · 2026-10"},
		{2 * time.Hour, 9 * 24 * time.Hour, 0, ""},
		{5 * time.Hour, 3 * 24 * time.Hour, 4, "Bogdan · 2026-10"},
		{4 * time.Hour, 7 * 24 * time.Hour, 2, "Dorota · 2026-10"},
	} {
		at := now.Add(-d.age)
		ex := models.Execution{ID: models.NewID(), OrganizationID: tn.org, WorkflowID: tn.wfID, WorkflowVersion: 1, Status: models.ExecDLQPending,
			Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: at, UpdatedAt: at}
		if d.subject != "" {
			ex.Subject = &d.subject
		}
		e := models.ExecutionError{ID: models.NewID(), OrganizationID: tn.org, ExecutionID: ex.ID, StepID: "submit", ErrorType: "timeout",
			ErrorMessage: "no answer", Status: models.ErrDeadLetter, CreatedAt: at, UpdatedAt: at}
		dl := models.DeadLetter{ID: models.NewID(), OrganizationID: tn.org, ErrorID: e.ID, WorkflowID: tn.wfID, ExecutionID: ex.ID,
			OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: "submit", Status: models.DLQPending, Subject: ex.Subject,
			ErrorType: "timeout", Reason: "no answer", RetryCount: d.retries, ExpiresAt: now.Add(d.expiresIn), CreatedAt: at, UpdatedAt: at}
		for _, row := range []any{&ex, &e, &dl} {
			if err := a.db.Conn(ctx).Create(row).Error; err != nil {
				t.Fatalf("seed %d: %v", i, err)
			}
		}
		s.dls = append(s.dls, dl.ID)
	}
	return s
}

func (s *sortSeed) ids(positions ...int) []string {
	out := []string{}
	for _, p := range positions {
		out = append(out, s.dls[p])
	}
	return out
}

// dlqSortCases are each order of the dead-letter list, the column whose header shows it and
// its aria-sort, and the seed's dead letters in that order.
var dlqSortCases = []struct {
	sort, column, aria string
	want               []int
}{
	{"age", "col-age", "ascending", []int{0, 2, 1, 4, 3}},
	{"-age", "col-age", "descending", []int{3, 4, 1, 2, 0}},
	{"expires", "col-expires", "ascending", []int{1, 3, 0, 4, 2}},
	{"-expires", "col-expires", "descending", []int{2, 4, 0, 3, 1}},
	{"retries", "col-retries", "ascending", []int{2, 1, 4, 0, 3}},
	{"-retries", "col-retries", "descending", []int{3, 0, 4, 1, 2}},
	{"subject", "col-title", "ascending", []int{2, 1, 3, 0, 4}},
	{"-subject", "col-title", "descending", []int{4, 0, 3, 1, 2}},
}

// The dead-letter list sorts by each column both ways, on the page (following "load more"
// across pages of two, which keeps the order and the filter) and in the API (following
// "next"); the column's header says its order (aria-sort) and links to the other one; the
// filter form and the live refresh keep the order.
func TestDLQListSorted(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		s := a.sortSeed("Biuro Sortowanie")
		b, _ := a.browser(s.tenant)
		for _, c := range dlqSortCases {
			want := s.ids(c.want...)
			var got []string
			next := "/dlq/items?" + url.Values{"sort": {c.sort}, "limit": {"2"}, "status": {"pending"}}.Encode()
			for i := 0; next != ""; i++ {
				if i > 5 {
					t.Fatal("too many pages")
				}
				r := do(t, b, "GET", a.srv.URL+next, "", nil)
				if r.status != 200 {
					t.Fatalf("%s: %d", next, r.status)
				}
				doc := parseListDoc(t, r.body)
				got = append(got, doc.rowIDs("dlq-row")...)
				if i == 0 {
					// The header of the column in use says the order; the others say none.
					var sorted []string
					for _, th := range doc.all(func(n *html.Node) bool { return n.Data == "th" && listAttr(n, "aria-sort") != "" }) {
						sorted = append(sorted, listAttr(th, "class")+" "+listAttr(th, "aria-sort"))
					}
					if len(sorted) != 1 || !strings.Contains(sorted[0], c.column) || !strings.HasSuffix(sorted[0], " "+c.aria) {
						t.Errorf("sort %s: headers with aria-sort %v, want %s %s", c.sort, sorted, c.column, c.aria)
					}
					// Its link is the other direction, with the filter and without a cursor.
					other := strings.TrimPrefix(c.sort, "-")
					if !strings.HasPrefix(c.sort, "-") {
						other = "-" + c.sort
					}
					for _, l := range doc.testID("sort-link") {
						u, _ := url.Parse(l.attr("href"))
						if th := l.root.Parent; strings.Contains(listAttr(th, "class"), c.column) &&
							(u.Query().Get("sort") != other || u.Query().Get("status") != "pending" || u.Query().Has("cursor")) {
							t.Errorf("sort %s: the header links to %s", c.sort, u)
						}
					}
					// The filter form keeps the order when a filter changes (every one of these:
					// the page's default is urgency).
					hidden := doc.testID("filter-sort")
					if len(hidden) != 1 || hidden[0].attr("value") != c.sort {
						t.Errorf("sort %s: the filter form's sort field: %d", c.sort, len(hidden))
					}
					// The live refresh asks for the address shown: the rows stay in order.
					live := do(t, b, "GET", a.srv.URL+next, "", map[string]string{"HX-Request": "true", "X-Live": "1"})
					if lr := parseListDoc(t, live.body).rowIDs("dlq-row"); !slices.Equal(lr, want[:2]) {
						t.Errorf("sort %s: live refresh %v, want %v", c.sort, lr, want[:2])
					}
				}
				next = ""
				if more := doc.testID("load-more"); len(more) == 1 {
					next = more[0].attr("href")
					if u, _ := url.Parse(next); u.Query().Get("sort") != c.sort && c.sort != "age" || u.Query().Get("status") != "pending" {
						t.Errorf("sort %s: load more loses the order or the filter: %s", c.sort, next)
					}
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("page, sort %s: %v, want %v", c.sort, got, want)
			}
			got = nil
			cursor := ""
			for i := 0; i < 6; i++ {
				q := url.Values{"sort": {c.sort}, "limit": {"2"}, "cursor": {cursor}}
				r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?"+q.Encode(), "", bearer(s.token))
				if r.status != 200 {
					t.Fatalf("API sort %s: %d %s", c.sort, r.status, r.body)
				}
				got = append(got, apiIDs(t, r)...)
				if cursor, _ = r.json(t)["next"].(string); cursor == "" {
					break
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("API, sort %s: %v, want %v", c.sort, got, want)
			}
		}
		// A cursor of one order is refused by another.
		r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?sort=subject&limit=2", "", bearer(s.token))
		c, _ := r.json(t)["next"].(string)
		r = do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?"+url.Values{"sort": {"expires"}, "cursor": {c}}.Encode(), "", bearer(s.token))
		if f := fieldsOf(t, r); r.status != 422 || f["cursor"] == nil {
			t.Errorf("a subject cursor with sort=expires: %d %s", r.status, r.body)
		}
	})
}

// The executions list sorts by subject and by start, both ways, across pages, on the page
// and in the API.
func TestExecutionsListSorted(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		s := a.sortSeed("Biuro Sortowanie Wykonań")
		b, _ := a.browser(s.tenant)
		ctx := context.Background()
		var exes []models.Execution
		if err := db.Conn(ctx).Where("organization_id = ?", s.org).Find(&exes).Error; err != nil {
			t.Fatal(err)
		}
		byDL := map[string]string{} // dead letter id → execution id
		for _, id := range s.dls {
			var dl models.DeadLetter
			if err := db.Conn(ctx).Where("id = ?", id).First(&dl).Error; err != nil {
				t.Fatal(err)
			}
			byDL[id] = dl.ExecutionID
		}
		// The tenant's own execution (the engine's, whose dead letter the seed removed) has no
		// subject here only if its workflow sets none: it is placed by its keys like the rest.
		for _, c := range []struct {
			sort string
			want []int
		}{
			{"started", []int{3, 4, 1, 2, 0}},
			{"-started", []int{0, 2, 1, 4, 3}},
			{"subject", []int{2, 1, 3, 0, 4}},
			{"-subject", []int{4, 0, 3, 1, 2}},
		} {
			var want []string
			for _, p := range c.want {
				want = append(want, byDL[s.dls[p]])
			}
			var got []string
			next := "/executions?" + url.Values{"sort": {c.sort}, "limit": {"2"}, "status": {models.ExecDLQPending}}.Encode()
			for i := 0; next != "" && i < 6; i++ {
				doc := parseListDoc(t, do(t, b, "GET", a.srv.URL+next, "", nil).body)
				got = append(got, doc.rowIDs("execution-row")...)
				next = ""
				if more := doc.testID("load-more"); len(more) == 1 {
					next = more[0].attr("href")
				}
			}
			got = onlyOf(got, want)
			if !slices.Equal(got, want) {
				t.Errorf("page, sort %s: %v, want %v", c.sort, got, want)
			}
			r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions?"+url.Values{"sort": {c.sort}, "limit": {"200"}}.Encode(), "", bearer(s.token))
			var apiGot []string
			items, _ := r.json(t)["items"].([]any)
			for _, it := range items {
				apiGot = append(apiGot, it.(map[string]any)["id"].(string))
			}
			if apiGot = onlyOf(apiGot, want); r.status != 200 || !slices.Equal(apiGot, want) {
				t.Errorf("API, sort %s: %d %v, want %v", c.sort, r.status, apiGot, want)
			}
		}
	})
}

// onlyOf keeps the ids of got that are in want, in got's order.
func onlyOf(got, want []string) []string {
	out := []string{}
	for _, id := range got {
		if slices.Contains(want, id) {
			out = append(out, id)
		}
	}
	return out
}
