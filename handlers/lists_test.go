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

// listDoc is a page's DOM, to select by data-testid and id.
type listDoc struct{ root *html.Node }

func parseListDoc(t *testing.T, body string) listDoc {
	t.Helper()
	n, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return listDoc{n}
}

func (d listDoc) all(pred func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && pred(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(d.root)
	return out
}

func (d listDoc) testID(id string) []listDoc {
	var out []listDoc
	for _, n := range d.all(func(n *html.Node) bool { return listAttr(n, "data-testid") == id }) {
		out = append(out, listDoc{n})
	}
	return out
}

func (d listDoc) byID(id string) *html.Node {
	if ns := d.all(func(n *html.Node) bool { return listAttr(n, "id") == id }); len(ns) == 1 {
		return ns[0]
	}
	return nil
}

func (d listDoc) attr(name string) string { return listAttr(d.root, name) }

func (d listDoc) text() string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(d.root)
	return strings.Join(strings.Fields(b.String()), " ")
}

func listAttr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// rowIDs are the data-id of the rows with data-testid testID.
func (d listDoc) rowIDs(testID string) []string {
	var out []string
	for _, r := range d.testID(testID) {
		out = append(out, r.attr("data-id"))
	}
	return out
}

// formKey is the name a filter form sends for the control with the given id: tests build
// their queries with it, so a form that sends a key the server does not read fails them.
func (d listDoc) formKey(t *testing.T, controlID string) string {
	t.Helper()
	n := d.byID(controlID)
	if n == nil || listAttr(n, "name") == "" {
		t.Fatalf("no named filter control #%s", controlID)
	}
	return listAttr(n, "name")
}

// listSeed is a tenant with a second workflow whose steps have names, and dead letters and
// executions made directly, so that every column has a known value.
type listSeed struct {
	*tenant
	wfB  string
	dls  []string // dead letter ids, by position in the specs below
	exes []string // their executions
	now  time.Time
}

func (a *app) listSeed(name string) *listSeed {
	a.t.Helper()
	t := a.t
	ctx := context.Background()
	tn := a.tenant(name)
	// The engine's dead letter would count in every list: the seed's own are the whole list.
	if err := a.db.Conn(ctx).Where("id = ?", tn.dlqID).Delete(&models.DeadLetter{}).Error; err != nil {
		t.Fatal(err)
	}
	wf, err := a.wfs.Create(ctx, tn.org, actorSystem, []byte(`{"name": "Płace", "steps": [
	  {"id": "validate", "name": "Sprawdzenie NIP", "type": "transform", "config": {"output": 1}},
	  {"id": "export", "type": "transform", "config": {"output": 2}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &listSeed{tenant: tn, wfB: wf.ID, now: time.Now().UTC()}
	for i, d := range []struct {
		wf, step, status, typ, subject, reason string
		age, expiresIn                         time.Duration
		retries                                int
	}{
		{wf.ID, "validate", models.DLQPending, "validation", "Kowalski sp. z o.o. · 2026-10", "NIP must have 10 digits", time.Hour, 2 * 24 * time.Hour, 3},
		{tn.wfID, "submit", models.DLQResolved, "timeout", "", "no answer in 30 s", 40 * 24 * time.Hour, -10 * 24 * time.Hour, 0},
		{wf.ID, "export", models.DLQPending, "rate_limit", "Nowak · 2026-10", "429 Too Many Requests", 2 * time.Hour, 20 * 24 * time.Hour, 1},
	} {
		at := s.now.Add(-d.age)
		ex := models.Execution{ID: models.NewID(), OrganizationID: tn.org, WorkflowID: d.wf, WorkflowVersion: 1, Status: models.ExecDLQPending,
			Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: at, UpdatedAt: at, CurrentStepID: &d.step}
		if d.subject != "" {
			ex.Subject = &d.subject
		}
		e := models.ExecutionError{ID: models.NewID(), OrganizationID: tn.org, ExecutionID: ex.ID, StepID: d.step, ErrorType: d.typ,
			ErrorMessage: d.reason, Status: models.ErrDeadLetter, CreatedAt: at, UpdatedAt: at}
		dl := models.DeadLetter{ID: models.NewID(), OrganizationID: tn.org, ErrorID: e.ID, WorkflowID: d.wf, ExecutionID: ex.ID,
			OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: d.step, Status: d.status, Subject: ex.Subject,
			ErrorType: d.typ, Reason: d.reason, RetryCount: d.retries, ExpiresAt: s.now.Add(d.expiresIn), CreatedAt: at, UpdatedAt: at}
		for _, row := range []any{&ex, &e, &dl} {
			if err := a.db.Conn(ctx).Create(row).Error; err != nil {
				t.Fatalf("seed %d: %v", i, err)
			}
		}
		s.dls, s.exes = append(s.dls, dl.ID), append(s.exes, ex.ID)
	}
	return s
}

func (s *listSeed) ids(positions ...int) []string {
	out := []string{}
	for _, p := range positions {
		out = append(out, s.dls[p])
	}
	return out
}

func apiIDs(t *testing.T, r resp) []string {
	t.Helper()
	out := []string{}
	items, _ := r.json(t)["items"].([]any)
	for _, it := range items {
		out = append(out, it.(map[string]any)["id"].(string))
	}
	return out
}

// Every filter of the dead-letter list, sent with the key its form sends, filters the page
// and the API alike; the URL's keys are the API's.
func TestDLQListFilters(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		s := a.listSeed("Biuro Filtry")
		b, _ := a.browser(s.tenant)
		page := do(t, b, "GET", a.srv.URL+"/dlq/items", "", nil)
		if page.status != 200 {
			t.Fatalf("/dlq: %d", page.status)
		}
		doc := parseListDoc(t, page.body)
		// The form sends exactly the list's keys.
		var names []string
		for _, n := range doc.testID("dlq-filter")[0].all(func(n *html.Node) bool { return (n.Data == "select" || n.Data == "input") && listAttr(n, "name") != "" }) {
			names = append(names, listAttr(n, "name"))
		}
		slices.Sort(names)
		if want := []string{"errorType", "from", "q", "status", "stepId", "to", "workflowId"}; !slices.Equal(names, want) {
			t.Errorf("the filter form sends %v, want %v", names, want)
		}
		today := s.now.Format(time.DateOnly)
		for _, c := range []struct {
			name, control, value string
			want                 []int
		}{
			{"workflow", "filter-dlq-workflow", s.wfB, []int{0, 2}},
			{"status", "filter-dlq-status", models.DLQResolved, []int{1}},
			{"error type", "filter-dlq-type", "rate_limit", []int{2}},
			{"failed step", "filter-dlq-step", "validate", []int{0}},
			{"from", "filter-dlq-from", s.now.AddDate(0, 0, -3).Format(time.DateOnly), []int{0, 2}},
			{"to", "filter-dlq-to", s.now.AddDate(0, 0, -30).Format(time.DateOnly), []int{1}},
			{"search subject", "filter-dlq-q", "kowalski", []int{0}},
			{"search reason", "filter-dlq-q", "too many", []int{2}},
			{"to today", "filter-dlq-to", today, []int{0, 2, 1}},
		} {
			q := url.Values{doc.formKey(t, c.control): {c.value}}.Encode()
			want := s.ids(c.want...)
			if got := parseListDoc(t, do(t, b, "GET", a.srv.URL+"/dlq/items?"+q, "", nil).body).rowIDs("dlq-row"); !slices.Equal(got, want) {
				t.Errorf("page %s (?%s): %v, want %v", c.name, q, got, want)
			}
			if got := apiIDs(t, do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?"+q, "", bearer(s.token))); !slices.Equal(got, want) {
				t.Errorf("API %s (?%s): %v, want %v", c.name, q, got, want)
			}
		}
		// The keys together, and an htmx request (a filter change) gets the table alone.
		q := url.Values{"workflowId": {s.wfB}, "status": {"pending"}, "errorType": {"validation"}, "stepId": {"validate"}, "q": {"NIP"}}.Encode()
		r := do(t, b, "GET", a.srv.URL+"/dlq/items?"+q, "", map[string]string{"HX-Request": "true"})
		if got := parseListDoc(t, r.body).rowIDs("dlq-row"); r.status != 200 || strings.Contains(r.body, "<html") || !slices.Equal(got, s.ids(0)) {
			t.Errorf("htmx, every filter: %d %v", r.status, got)
		}
	})
}

// What a row shows, the counts above the list, and the API's fields.
func TestDLQListRowsAndCounts(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		s := a.listSeed("Biuro Wiersze")
		b, _ := a.browser(s.tenant)
		doc := parseListDoc(t, do(t, b, "GET", a.srv.URL+"/dlq/items", "", nil).body)
		rows := doc.testID("dlq-row")
		if len(rows) != 3 {
			t.Fatalf("rows: %d", len(rows))
		}
		first := rows[0] // the Kowalski item: newest
		for testID, want := range map[string]string{
			"dlq-open": "Kowalski sp. z o.o. · 2026-10", "dlq-workflow": "Płace", "dlq-step": "Sprawdzenie NIP",
			"dlq-reason": "NIP must have 10 digits", "dlq-retries": "3",
		} {
			if got := first.testID(testID); len(got) != 1 || got[0].text() != want {
				t.Errorf("%s: %v, want %q", testID, got, want)
			}
		}
		if got := first.testID("error-type")[0].attr("data-error-type"); got != "validation" {
			t.Errorf("error type %q", got)
		}
		if got := first.testID("dlq-open")[0].attr("href"); got != "/dlq/"+s.dls[0] {
			t.Errorf("subject links to %q", got)
		}
		// In Polish the counts agree with their numbers: 1 rozwiązany, 0 wygasłych.
		pl := parseListDoc(t, do(t, b, "GET", a.srv.URL+"/dlq/items", "", map[string]string{"Accept-Language": "pl"}).body)
		for status, want := range map[string]string{"resolved": "1 rozwiązany", "expired": "0 wygasłych", "pending": "2 do rozpatrzenia"} {
			if c := pl.countOf(status); c == nil || strings.Join(strings.Fields(c.text()), " ") != want {
				t.Errorf("Polish count of %s: want %q", status, want)
			}
		}
		// No subject: the short execution id. A step the definition does not name: its id.
		third := rows[2]
		if got := third.testID("dlq-open")[0].text(); got != strings.Split(s.exes[1], "-")[0] {
			t.Errorf("title without a subject: %q", got)
		}
		if got := rows[1].testID("dlq-step")[0].text(); got != "export" {
			t.Errorf("unnamed step: %q", got)
		}
		// Expiring within 3 days: flagged; resolved ones have no expiry.
		if len(first.testID("expiring")) != 1 || len(rows[1].testID("expiring")) != 0 || len(third.testID("expiring")) != 0 {
			t.Error("the expiring flag is not on the Kowalski item alone")
		}
		if got := third.testID("dlq-expires")[0].text(); got != "—" {
			t.Errorf("a resolved item expires: %q", got)
		}
		for st, want := range map[string]string{"pending": "2", "resolved": "1", "expired": "0"} {
			c := doc.countOf(st)
			if c == nil || !strings.HasPrefix(c.text(), want+" ") || c.attr("href") != "/dlq/items?status="+st {
				t.Errorf("count %s: %v", st, c)
			}
		}
		// The API: the list's fields, no payload.
		r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?limit=1", "", bearer(s.viewerToken))
		m := r.json(t)
		items := m["items"].([]any)
		if r.status != 200 || len(items) != 1 || m["next"] == nil {
			t.Fatalf("API: %d %s", r.status, r.body)
		}
		it := items[0].(map[string]any)
		for k, want := range map[string]any{"id": s.dls[0], "executionId": s.exes[0], "workflowId": s.wfB, "subject": "Kowalski sp. z o.o. · 2026-10",
			"reason": "NIP must have 10 digits", "errorType": "validation", "retryCount": 3.0, "failedStepId": "validate", "status": "pending"} {
			if it[k] != want {
				t.Errorf("API %s = %v, want %v", k, it[k], want)
			}
		}
		if it["expiresAt"] == nil || it["createdAt"] == nil || it["originalInput"] != nil {
			t.Errorf("API item: %v", it)
		}
		r = do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?status=resolved", "", bearer(s.token))
		if it := r.json(t)["items"].([]any)[0].(map[string]any); it["subject"] != nil {
			t.Errorf("no subject is null: %v", it["subject"])
		}
	})
}

func (d listDoc) countOf(status string) *listDoc {
	for _, c := range d.testID("dlq-count") {
		if c.attr("data-status") == status {
			return &c
		}
	}
	return nil
}

// Pages: the next page's link keeps the filter; following it (or the API's next) gives
// every matching row once.
func TestListPages(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		s := a.listSeed("Biuro Strony")
		b, _ := a.browser(s.tenant)
		var got []string
		next := "/dlq/items?workflowId=" + s.wfB + "&limit=1"
		for i := 0; next != ""; i++ {
			if i > 5 {
				t.Fatal("too many pages")
			}
			doc := parseListDoc(t, do(t, b, "GET", a.srv.URL+next, "", nil).body)
			got = append(got, doc.rowIDs("dlq-row")...)
			next = ""
			if more := doc.testID("load-more"); len(more) == 1 {
				next = more[0].attr("href")
				u, _ := url.Parse(next)
				if u.Query().Get("workflowId") != s.wfB || u.Query().Get("limit") != "1" || u.Query().Get("cursor") == "" {
					t.Errorf("next page link loses the filter: %s", next)
				}
			}
		}
		if want := s.ids(0, 2); !slices.Equal(got, want) {
			t.Errorf("pages: %v, want %v", got, want)
		}
		got, cursor := nil, ""
		for {
			r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?limit=2&cursor="+url.QueryEscape(cursor), "", bearer(s.token))
			got = append(got, apiIDs(t, r)...)
			c, _ := r.json(t)["next"].(string)
			if c == "" {
				break
			}
			cursor = c
		}
		if want := s.ids(0, 2, 1); !slices.Equal(got, want) {
			t.Errorf("API pages: %v, want %v", got, want)
		}
	})
}

// A value a list cannot use is a 422 naming its key, on the page and in the API, never
// ignored; the API says it in the request's language.
func TestListBadValuesAre422(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Błędy")
		b, _ := a.browser(tn)
		long := strings.Repeat("x", 201)
		for _, c := range []struct {
			query, key string
			lists      []string
		}{
			{"limit=0", "limit", []string{"dlq", "executions"}},
			{"limit=201", "limit", []string{"dlq", "executions"}},
			{"limit=ten", "limit", []string{"dlq", "executions"}},
			{"limit=-5", "limit", []string{"dlq", "executions"}},
			{"status=lost", "status", []string{"dlq", "executions"}},
			{"workflowId=not-a-uuid", "workflowId", []string{"dlq", "executions"}},
			{"q=" + long, "q", []string{"dlq", "executions"}},
			{"q=a%00b", "q", []string{"dlq", "executions"}},
			{"errorType=boom", "errorType", []string{"dlq"}},
			{"stepId=a+b", "stepId", []string{"dlq"}},
			{"from=2026-13-01", "from", []string{"dlq"}},
			{"to=yesterday", "to", []string{"dlq"}},
			{"from=2026-11-05&to=2026-11-01", "to", []string{"dlq"}},
			{"cursor=garbage", "cursor", []string{"dlq", "executions"}},
			{"sort=workflow", "sort", []string{"dlq", "executions"}},
			{"sort=age&sort=-age", "sort", []string{"dlq"}},
			{"sort=duration", "sort", []string{"executions"}},
		} {
			for _, list := range c.lists {
				r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/"+list+"?"+c.query, "", bearer(tn.token))
				if f := fieldsOf(t, r); r.status != 422 || f[c.key] == nil {
					t.Errorf("API /%s?%.30s: %d %s, want 422 on %s", list, c.query, r.status, r.body, c.key)
				}
				if c.key == "cursor" {
					continue // the page shows a cursor error as the error page
				}
				page := list
				if list == "dlq" {
					page = "dlq/items" // the item list; /dlq is the Problems page
				}
				r = do(t, b, "GET", a.srv.URL+"/"+page+"?"+c.query, "", nil)
				doc := parseListDoc(t, r.body)
				var fields []string
				for _, e := range doc.testID("field-error") {
					fields = append(fields, e.attr("data-field"))
				}
				if r.status != 422 || !slices.Contains(fields, c.key) || len(doc.testID("filter-refused")) != 1 {
					t.Errorf("page /%s?%.30s: %d, field errors %v, want 422 on %s", list, c.query, r.status, fields, c.key)
				}
			}
		}
		// htmx (a filter change): the table says what to fix; 422 is swapped.
		r := do(t, b, "GET", a.srv.URL+"/dlq/items?limit=500", "", map[string]string{"HX-Request": "true"})
		if r.status != 422 || strings.Contains(r.body, "<html") || !strings.Contains(r.body, `data-testid="filter-refused"`) {
			t.Errorf("htmx 422: %d %.200s", r.status, r.body)
		}
		// In Polish.
		r = do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?limit=500&errorType=boom", "", map[string]string{"Authorization": "Bearer " + tn.token, "Accept-Language": "pl"})
		f := fieldsOf(t, r)
		if f["limit"] != "musi być liczbą całkowitą od 1 do 200" || !strings.HasPrefix(f["errorType"].(string), "musi być jednym z: transient, ") {
			t.Errorf("Polish field messages: %v", f)
		}
		// Good values: 200.
		for _, q := range []string{"limit=1", "limit=200", "q=%25_%5C", "from=2026-01-01&to=2026-01-01"} {
			if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?"+q, "", bearer(tn.token)); r.status != 200 {
				t.Errorf("?%s: %d %s", q, r.status, r.body)
			}
		}
	})
}

// The executions list: its Workflow filter sends the key the server reads (it sent
// "workflow", which the server ignored); the subject is each row's title and searchable.
func TestExecutionsListFilters(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		s := a.listSeed("Biuro Wykonania")
		b, _ := a.browser(s.tenant)
		doc := parseListDoc(t, do(t, b, "GET", a.srv.URL+"/executions", "", nil).body)
		all := doc.rowIDs("execution-row")
		if len(all) != 4 { // the tenant's own and the seed's three
			t.Fatalf("executions: %v", all)
		}
		wfKey, qKey := doc.formKey(t, "filter-workflow"), doc.formKey(t, "filter-q")
		for _, c := range []struct {
			name string
			q    url.Values
			want []string
		}{
			{"workflow", url.Values{wfKey: {s.wfB}}, []string{s.exes[0], s.exes[2]}},
			{"subject", url.Values{qKey: {"nowak"}}, []string{s.exes[2]}},
			{"workflow and subject", url.Values{wfKey: {s.tenant.wfID}, qKey: {"nowak"}}, []string{}},
		} {
			got := parseListDoc(t, do(t, b, "GET", a.srv.URL+"/executions?"+c.q.Encode(), "", nil).body).rowIDs("execution-row")
			if !slices.Equal(orEmpty(got), c.want) {
				t.Errorf("page %s: %v, want %v", c.name, got, c.want)
			}
			if got := apiIDs(t, do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions?"+c.q.Encode(), "", bearer(s.token))); !slices.Equal(got, c.want) {
				t.Errorf("API %s: %v, want %v", c.name, got, c.want)
			}
		}
		// The subject is the row's title; without one, the short id.
		titles := map[string]string{}
		for _, r := range doc.testID("execution-row") {
			titles[r.attr("data-id")] = r.testID("execution-title")[0].text()
		}
		if titles[s.exes[2]] != "Nowak · 2026-10" || titles[s.exes[1]] != strings.Split(s.exes[1], "-")[0] {
			t.Errorf("titles: %v", titles)
		}
		// The step a row stopped at shows by its name, else (none given) by its id.
		stepsShown := map[string]string{}
		for _, r := range doc.testID("execution-row") {
			if st := r.testID("execution-step"); len(st) == 1 {
				stepsShown[r.attr("data-id")] = st[0].text()
			}
		}
		if stepsShown[s.exes[0]] != "Sprawdzenie NIP" || stepsShown[s.exes[2]] != "export" {
			t.Errorf("steps shown: %v", stepsShown)
		}
		r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions?q=Nowak", "", bearer(s.token))
		if it := r.json(t)["items"].([]any)[0].(map[string]any); it["subject"] != "Nowak · 2026-10" {
			t.Errorf("API subject: %v", it["subject"])
		}
		// The workflow page's "all executions" link filters too.
		wf := parseListDoc(t, do(t, b, "GET", a.srv.URL+"/workflows/"+s.wfB, "", nil).body)
		if l := wf.testID("all-executions"); len(l) == 1 {
			got := parseListDoc(t, do(t, b, "GET", a.srv.URL+l[0].attr("href"), "", nil).body).rowIDs("execution-row")
			if !slices.Equal(got, []string{s.exes[0], s.exes[2]}) {
				t.Errorf("all executions of the workflow: %v", got)
			}
		}
	})
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
