package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/deadline"
)

// TestExecutionAbout: a workflow says what its executions are about (client, period, amount,
// obligation); a start renders them, counts the due date from the period (JPK_V7M for
// 2025-11 is due 29 December 2025: the 25th is Christmas, then 26th and a weekend), and the
// API carries them, the amount as an exact decimal string; an input whose amount or period is
// not of its kind is a 422 naming the input's field, and nothing is started; the workflow's
// settings are checked when it is saved.
func TestExecutionAbout(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		a := newApp(t, db)
		tn := a.tenant("Biuro Terminy")
		def := fmt.Sprintf(`{"name": "JPK_V7M", "settings": {"subject": "{{ input.client }} · {{ input.period }}", "client": "{{ input.nip }}",
		  "period": "{{ input.period }}", "amount": "{{ input.vat }}", "obligation": "JPK_V7M"},
		  "steps": [{"id": "file", "type": "http", "config": {"method": "POST", "url": "%s/ok", "body": {"nip": "{{ input.nip }}"}}}]}`, a.ext.URL)
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", def, bearer(tn.token))
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		wfID := r.json(t)["id"].(string)
		start := func(input string) resp {
			return do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wfID+"/executions", `{"input": `+input+`}`, bearer(tn.token))
		}
		r = start(`{"client": "Piekarnia Kowalski", "nip": "5260250274", "period": "2025-11", "vat": "184 230,50"}`)
		if r.status != http.StatusCreated {
			t.Fatalf("start: %d %s", r.status, r.body)
		}
		id := r.json(t)["id"].(string)
		for _, u := range []string{"/api/v1/executions/" + id, "/api/v1/executions?workflowId=" + wfID} {
			r = do(t, http.DefaultClient, "GET", a.srv.URL+u, "", bearer(tn.token))
			ex := r.json(t)
			if items, ok := ex["items"].([]any); ok {
				ex = items[0].(map[string]any)
			}
			want := map[string]any{"client": "5260250274", "period": "2025-11", "obligation": "JPK_V7M", "dueAt": "2025-12-29", "amount": "184230.50", "currency": "PLN"}
			for k, v := range want {
				if ex[k] != v {
					t.Errorf("%s: %s = %v, want %v", u, k, ex[k], v)
				}
			}
		}

		var before int64
		db.Conn(ctx).Model(&models.Execution{}).Where("organization_id = ?", tn.org).Count(&before)
		for input, field := range map[string]string{
			`{"nip": "5260250274", "period": "2025-11", "vat": "dużo"}`: "input.vat",
			`{"nip": "5260250274", "period": "11/2025", "vat": "10"}`:   "input.period",
			`{"nip": "5260250274", "period": "2025-Q4", "vat": "10"}`:   "input.period", // JPK_V7M is monthly
		} {
			r := start(input)
			if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, `"`+field+`"`) {
				t.Errorf("%s: %d %s, want 422 on %s", input, r.status, r.body, field)
			}
		}
		var after int64
		db.Conn(ctx).Model(&models.Execution{}).Where("organization_id = ?", tn.org).Count(&after)
		if after != before {
			t.Errorf("refused starts left %d executions", after-before)
		}
		// What the input lacks is not known: the start goes on.
		if r := start(`{"nip": "5260250274"}`); r.status != http.StatusCreated || r.json(t)["dueAt"] != nil {
			t.Errorf("no period: %d %s", r.status, r.body)
		}

		bad := strings.Replace(def, `"obligation": "JPK_V7M"`, `"obligation": "VAT-7"`, 1)
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", bad, bearer(tn.token)); r.status != http.StatusUnprocessableEntity ||
			!strings.Contains(r.body, "settings.obligation") {
			t.Errorf("unknown obligation saved: %d %s", r.status, r.body)
		}
	})
}

// TestExecutionsByDueAndAmount: the executions list filters by client, period, obligation and
// due date, and sorts by due date (soonest first, none last) and by amount (largest first,
// none last), page by page without repeating or skipping a row; a bad filter is a 422 naming
// it.
func TestExecutionsByDueAndAmount(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Kolejność")
		def := fmt.Sprintf(`{"name": "Terminy", "settings": {"client": "{{ input.nip }}", "period": "{{ input.period }}", "amount": "{{ input.vat }}",
		  "obligation": "{{ input.kind }}"}, "steps": [{"id": "file", "type": "http", "config": {"method": "POST", "url": "%s/ok"}}]}`, a.ext.URL)
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", def, bearer(tn.token))
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		wfID := r.json(t)["id"].(string)
		inputs := []string{
			`{"nip": "111", "period": "2026-10", "kind": "JPK_V7M", "vat": "100.00"}`, // due 2026-11-25
			`{"nip": "222", "period": "2026-10", "kind": "ZUS", "vat": "184230.50"}`,  // due 2026-11-20
			`{"nip": "111", "period": "2026-09", "kind": "JPK_V7M", "vat": "0.07"}`,   // due 2026-10-26
			`{"nip": "333"}`, // no due date, no amount
			`{"nip": "222", "period": "2026-Q3", "kind": "JPK_V7K", "vat": "99999999.99"}`, // due 2026-10-26
		}
		ids := make([]string, len(inputs))
		for i, in := range inputs {
			r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wfID+"/executions", `{"input": `+in+`}`, bearer(tn.token))
			if r.status != http.StatusCreated {
				t.Fatalf("start %d: %d %s", i, r.status, r.body)
			}
			ids[i] = r.json(t)["id"].(string)
		}
		list := func(query string) []string {
			t.Helper()
			var out []string
			cursor := ""
			for page := 0; page < 10; page++ {
				u := a.srv.URL + "/api/v1/executions?limit=2&workflowId=" + wfID + "&" + query
				if cursor != "" {
					u += "&cursor=" + cursor
				}
				r := do(t, http.DefaultClient, "GET", u, "", bearer(tn.token))
				if r.status != http.StatusOK {
					t.Fatalf("%s: %d %s", query, r.status, r.body)
				}
				m := r.json(t)
				for _, it := range m["items"].([]any) {
					id := it.(map[string]any)["id"].(string)
					for i, x := range ids {
						if x == id {
							out = append(out, fmt.Sprint(i))
						}
					}
				}
				if cursor, _ = m["next"].(string); cursor == "" {
					break
				}
			}
			return out
		}
		for query, want := range map[string]string{
			"sort=due":               "2 4 1 0 3", // ties by id: 2 and 4 are both due 2026-10-26, in id order
			"sort=amount":            "4 1 0 2 3",
			"sort=-amount":           "3 2 0 1 4",
			"client=111":             "",
			"obligation=JPK_V7M":     "",
			"period=2026-10":         "",
			"dueBefore=2026-11-20":   "",
			"client=222&sort=amount": "4 1",
		} {
			got := strings.Join(list(query), " ")
			switch query {
			case "sort=due":
				// 2 and 4 share a due date: either order, but both before 1, 0 and 3.
				if got != "2 4 1 0 3" && got != "4 2 1 0 3" {
					t.Errorf("%s: %s", query, got)
				}
				continue
			case "client=111":
				want = sortedOf(got, "0", "2")
			case "obligation=JPK_V7M":
				want = sortedOf(got, "0", "2")
			case "period=2026-10":
				want = sortedOf(got, "0", "1")
			case "dueBefore=2026-11-20":
				want = sortedOf(got, "1", "2", "4")
			}
			if got != want {
				t.Errorf("%s: %q, want %q", query, got, want)
			}
		}
		for query, field := range map[string]string{"period=2026-13": "period", "dueBefore=jutro": "dueBefore", "obligation=VAT": "obligation"} {
			r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions?"+query, "", bearer(tn.token))
			if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, `"`+field+`"`) {
				t.Errorf("%s: %d %s", query, r.status, r.body)
			}
		}
	})
}

// sortedOf returns want (the expected members, in any order) in got's order when got holds
// exactly them, else want as written, so a mismatch reports.
func sortedOf(got string, want ...string) string {
	fields := strings.Fields(got)
	if len(fields) != len(want) {
		return strings.Join(want, " ")
	}
	for _, w := range want {
		found := false
		for _, f := range fields {
			found = found || f == w
		}
		if !found {
			return strings.Join(want, " ")
		}
	}
	return got
}

// TestDeadLettersByDueAndAmount: a dead letter carries its execution's client, period,
// obligation, due date and amount; the DLQ list filters and sorts by them, and a bulk
// action's filter reaches exactly one client's items.
func TestDeadLettersByDueAndAmount(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		a := newApp(t, db)
		tn := a.tenant("Biuro Zaległości")
		def := fmt.Sprintf(`{"name": "Wysyłka JPK", "settings": {"retryPolicy": {"maxRetries": 0}, "client": "{{ input.nip }}", "period": "{{ input.period }}",
		  "amount": "{{ input.vat }}", "obligation": "JPK_V7M"}, "steps": [{"id": "file", "type": "http", "config": {"method": "POST", "url": "%s/bad"}}]}`, a.ext.URL)
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", def, bearer(tn.token))
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		wfID := r.json(t)["id"].(string)
		inputs := []string{
			`{"nip": "5260250274", "period": "2026-10", "vat": "184230.50"}`, // due 2026-11-25
			`{"nip": "7010002137", "period": "2026-09", "vat": "300"}`,       // due 2026-10-26
			`{"nip": "5260250274", "period": "2026-11", "vat": "12,40"}`,     // due 2026-12-28
		}
		execs := make([]string, len(inputs))
		for i, in := range inputs {
			r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wfID+"/executions", `{"input": `+in+`}`, bearer(tn.token))
			if r.status != http.StatusCreated {
				t.Fatalf("start: %d %s", r.status, r.body)
			}
			execs[i] = r.json(t)["id"].(string)
		}
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var n int64
			db.Conn(ctx).Model(&models.DeadLetter{}).Where("execution_id IN ?", execs).Count(&n)
			if n == int64(len(execs)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d dead letters", n, len(execs))
			}
		}
		order := func(query string) string {
			t.Helper()
			r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?workflowId="+wfID+"&"+query, "", bearer(tn.token))
			if r.status != http.StatusOK {
				t.Fatalf("%s: %d %s", query, r.status, r.body)
			}
			var out []string
			for _, it := range r.json(t)["items"].([]any) {
				m := it.(map[string]any)
				for i, x := range execs {
					if m["executionId"] == x {
						out = append(out, fmt.Sprintf("%d:%v:%v:%v", i, m["dueAt"], m["amount"], m["client"]))
					}
				}
			}
			return strings.Join(out, " ")
		}
		for query, want := range map[string]string{
			"sort=due":                          "1:2026-10-26:300.00:7010002137 0:2026-11-25:184230.50:5260250274 2:2026-12-28:12.40:5260250274",
			"sort=amount":                       "0:2026-11-25:184230.50:5260250274 1:2026-10-26:300.00:7010002137 2:2026-12-28:12.40:5260250274",
			"client=7010002137":                 "1:2026-10-26:300.00:7010002137",
			"dueBefore=2026-11-25&sort=-due":    "0:2026-11-25:184230.50:5260250274 1:2026-10-26:300.00:7010002137",
			"period=2026-11&obligation=JPK_V7M": "2:2026-12-28:12.40:5260250274",
		} {
			if got := order(query); got != want {
				t.Errorf("%s:\n got %s\nwant %s", query, got, want)
			}
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?period=październik", "", bearer(tn.token)); r.status != http.StatusUnprocessableEntity ||
			!strings.Contains(r.body, `"period"`) {
			t.Errorf("bad period: %d %s", r.status, r.body)
		}
	})
}

// TestClientPage: a client's page and API show its open failures, the money they hold up
// (summed exactly, per currency, formatted for the language) and its deadlines with days
// left; every member reads it; another organization's client, or a key no execution is
// about, is a 404.
func TestClientPage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		a := newApp(t, db)
		tn := a.tenant("Biuro Klienci")
		other := a.tenant("Biuro Inne")
		def := fmt.Sprintf(`{"name": "Wysyłka JPK", "settings": {"retryPolicy": {"maxRetries": 0}, "subject": "{{ input.name }}", "client": "{{ input.nip }}",
		  "period": "{{ input.period }}", "amount": "{{ input.vat }}", "currency": "{{ input.cur }}", "obligation": "JPK_V7M"},
		  "steps": [{"id": "file", "type": "http", "config": {"method": "POST", "url": "%s/bad"}}]}`, a.ext.URL)
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", def, bearer(tn.token))
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		wfID := r.json(t)["id"].(string)
		var execs []string
		for _, in := range []string{
			`{"name": "Piekarnia Kowalski", "nip": "5260250274", "period": "2026-10", "vat": "184230.50"}`,
			`{"name": "Piekarnia Kowalski", "nip": "5260250274", "period": "2026-09", "vat": "0.10"}`,
			`{"name": "Piekarnia Kowalski", "nip": "5260250274", "period": "2026-09", "vat": "100", "cur": "EUR"}`,
			`{"name": "Apteka Nowak", "nip": "7010002137", "period": "2026-10", "vat": "999"}`,
		} {
			r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wfID+"/executions", `{"input": `+in+`}`, bearer(tn.token))
			if r.status != http.StatusCreated {
				t.Fatalf("start: %d %s", r.status, r.body)
			}
			execs = append(execs, r.json(t)["id"].(string))
		}
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var n int64
			db.Conn(ctx).Model(&models.DeadLetter{}).Where("execution_id IN ?", execs).Count(&n)
			if n == int64(len(execs)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d dead letters", n)
			}
		}
		r = do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/clients/5260250274", "", bearer(tn.viewerToken))
		if r.status != http.StatusOK {
			t.Fatalf("api: %d %s", r.status, r.body)
		}
		var got struct {
			Stuck []struct {
				Currency, Amount string
				Count            int
			}
			Deadlines []struct{ Obligation, Period, DueAt string }
			Failures  []map[string]any
		}
		if err := json.Unmarshal([]byte(r.body), &got); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got.Stuck) != "[{PLN 184230.60 2} {EUR 100.00 1}]" {
			t.Errorf("stuck: %v", got.Stuck)
		}
		if fmt.Sprint(got.Deadlines) != "[{JPK_V7M 2026-09 2026-10-26} {JPK_V7M 2026-10 2026-11-25}]" {
			t.Errorf("deadlines: %v", got.Deadlines)
		}
		if len(got.Failures) != 3 {
			t.Errorf("failures: %d", len(got.Failures))
		}

		b, _ := a.browser(tn)
		r = do(t, b, "GET", a.srv.URL+"/clients/5260250274", "", nil)
		doc := parseListDoc(t, r.body)
		texts := func(id string) string {
			var out []string
			for _, d := range doc.testID(id) {
				out = append(out, d.text())
			}
			return strings.Join(out, " | ")
		}
		if r.status != http.StatusOK || texts("client-key") != "5260250274" {
			t.Fatalf("page: %d %s", r.status, texts("client-key"))
		}
		if got := texts("client-stuck"); got != "PLN 184,230.60 | EUR 100.00" {
			t.Errorf("page stuck: %q", got)
		}
		if rows := doc.testID("client-failure"); len(rows) != 3 {
			t.Errorf("page failures: %d", len(rows))
		}
		// The days left follow the real calendar: each says one of its forms, the earlier
		// deadline no later than the other.
		left := strings.Split(texts("client-deadline-left"), " | ")
		if len(left) != 2 || !regexp.MustCompile(`^(due today|\d+ working days? (left|overdue))$`).MatchString(left[0]) {
			t.Errorf("days left: %q", left)
		}
		for _, u := range []string{"/api/v1/clients/0000000000", "/api/v1/clients/" + "7010002137"} {
			tok := tn.token
			if strings.HasSuffix(u, "7010002137") {
				tok = other.token // the other organization has no such client
			}
			if r := do(t, http.DefaultClient, "GET", a.srv.URL+u, "", bearer(tok)); r.status != http.StatusNotFound {
				t.Errorf("%s: %d", u, r.status)
			}
		}
	})
}

// TestListsShowAbout: the DLQ and executions lists show each row's client (linking to its
// page), period, due date and amount under its title.
func TestListsShowAbout(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		a := newApp(t, db)
		tn := a.tenant("Biuro Wiersze")
		def := fmt.Sprintf(`{"name": "Wysyłka JPK", "settings": {"retryPolicy": {"maxRetries": 0}, "client": "{{ input.nip }}", "period": "{{ input.period }}",
		  "amount": "{{ input.vat }}", "obligation": "JPK_V7M"}, "steps": [{"id": "file", "type": "http", "config": {"method": "POST", "url": "%s/bad"}}]}`, a.ext.URL)
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", def, bearer(tn.token))
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		wfID := r.json(t)["id"].(string)
		r = do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wfID+"/executions",
			`{"input": {"nip": "5260250274", "period": "2026-10", "vat": "184230.50"}}`, bearer(tn.token))
		exID := r.json(t)["id"].(string)
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var n int64
			if db.Conn(ctx).Model(&models.DeadLetter{}).Where("execution_id = ?", exID).Count(&n); n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no dead letter")
			}
		}
		b, _ := a.browser(tn)
		for _, page := range []string{"/dlq/items?client=5260250274", "/executions?client=5260250274"} {
			r := do(t, b, "GET", a.srv.URL+page, "", nil)
			doc := parseListDoc(t, r.body)
			lines := doc.testID("about-line")
			if r.status != http.StatusOK || len(lines) != 1 {
				t.Fatalf("%s: %d, %d about lines", page, r.status, len(lines))
			}
			line := lines[0]
			client := line.testID("about-client")
			if len(client) != 1 || client[0].attr("href") != "/clients/5260250274" || client[0].text() != "5260250274" {
				t.Errorf("%s: client %v", page, line.text())
			}
			for id, want := range map[string]string{"about-period": "JPK_V7M 2026-10", "about-amount": "PLN 184,230.50"} {
				if got := line.testID(id); len(got) != 1 || got[0].text() != want {
					t.Errorf("%s: %s = %q, want %q", page, id, line.text(), want)
				}
			}
			if due := line.testID("about-due"); len(due) != 1 || due[0].attr("datetime") != "2026-11-25" || !strings.HasPrefix(due[0].text(), "Wed 25 Nov 2026 (") {
				t.Errorf("%s: due %q", page, line.text())
			}
		}
	})
}

// TestTodayPage: an accountant lands on Today; it shows the obligation due within the
// organization's at-risk days with its clients and the money its failures hold up, the
// clients whose failures hold up the most money (largest first), the top problem, and what
// she asked an admin for.
func TestTodayPage(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Dziś")
		// A custom obligation due on today's day of this month: today, or the next working day.
		today := deadline.Day(time.Now())
		def := fmt.Sprintf(`{"name": "Rozliczenie", "settings": {"retryPolicy": {"maxRetries": 0}, "subject": "{{ input.name }}", "client": "{{ input.name }}",
		  "period": "{{ input.period }}", "amount": "{{ input.amount }}", "obligation": "custom", "obligationRule": {"dayOfMonth": %d, "monthsAfterPeriod": 0}},
		  "steps": [{"id": "file", "type": "http", "config": {"method": "POST", "url": "%s/bad"}}]}`, today.Day(), a.ext.URL)
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", def, bearer(rs.token))
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		wfID := r.json(t)["id"].(string)
		period := today.Format("2006-01")
		var dls []string
		for _, in := range []string{`{"name": "Apteka Nowak", "amount": "100.00"}`, `{"name": "Piekarnia Kowalski", "amount": "250,50"}`} {
			in = strings.Replace(in, "{", `{"period": "`+period+`", `, 1)
			r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wfID+"/executions", `{"input": `+in+`}`, bearer(rs.token))
			if r.status != http.StatusCreated {
				t.Fatalf("start: %d %s", r.status, r.body)
			}
			exID := r.json(t)["id"].(string)
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				var dl models.DeadLetter
				if err := db.Conn(ctx).Where("execution_id = ?", exID).First(&dl).Error; err == nil {
					dls = append(dls, dl.ID)
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no dead letter")
				}
			}
		}
		acc, csrf := a.browser(rs.accountant)
		if r := postForm(t, acc, csrf, a.srv.URL+"/dlq/"+dls[0]+"/ask", url.Values{"note": {"Proszę o pomoc"}}); r.status >= 400 {
			t.Fatalf("ask: %d", r.status)
		}
		noRedirect := *acc
		noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		if r := do(t, &noRedirect, "GET", a.srv.URL+"/", "", nil); r.header.Get("Location") != "/today" {
			t.Errorf("an accountant lands on %q", r.header.Get("Location"))
		}
		r = do(t, acc, "GET", a.srv.URL+"/today", "", nil)
		if r.status != http.StatusOK {
			t.Fatalf("today: %d", r.status)
		}
		doc := parseListDoc(t, r.body)
		texts := func(id string) []string {
			var out []string
			for _, d := range doc.testID(id) {
				out = append(out, d.text())
			}
			return out
		}
		if !strings.Contains(r.body, "Deadlines at risk (within 3 working days)") {
			t.Error("the at-risk heading does not read \"within 3 working days\"")
		}
		if pl := do(t, acc, "GET", a.srv.URL+"/today", "", map[string]string{"Accept-Language": "pl"}); !strings.Contains(pl.body, "Terminy zagrożone (w ciągu 3 dni roboczych)") {
			t.Error("the Polish at-risk heading is not \"w ciągu 3 dni roboczych\" (genitive)")
		}
		due := texts("today-due")
		if len(due) != 1 || !strings.Contains(due[0], "custom") || !strings.Contains(due[0], period) || !strings.Contains(due[0], "2 clients") ||
			!strings.Contains(due[0], "PLN 350.50") {
			t.Errorf("due: %q", due)
		}
		if got := strings.Join(texts("today-money-amount"), " | "); got != "PLN 250.50 | PLN 100.00" {
			t.Errorf("money: %q", got)
		}
		// The most to handle first: this workflow's two, then the tenant's own failure.
		if p := texts("today-problem"); len(p) != 2 || !strings.Contains(p[0], "Rozliczenie · 2 to handle") {
			t.Errorf("problems: %q", p)
		}
		if req := texts("today-request"); len(req) != 1 || !strings.Contains(req[0], "Apteka Nowak") || !strings.Contains(req[0], "asked for help · waiting") {
			t.Errorf("requests: %q", req)
		}
		// The admin lands on the workflows, and reads Today too.
		admin, _ := a.browser(rs.tenant)
		adminNoRedirect := *admin
		adminNoRedirect.CheckRedirect = noRedirect.CheckRedirect
		if r := do(t, &adminNoRedirect, "GET", a.srv.URL+"/", "", nil); r.header.Get("Location") != "/workflows" {
			t.Errorf("an admin lands on %q", r.header.Get("Location"))
		}
		if r := do(t, admin, "GET", a.srv.URL+"/today", "", nil); r.status != http.StatusOK || len(parseListDoc(t, r.body).testID("today-request")) != 0 {
			t.Errorf("admin's today: %d", r.status)
		}
	})
}
