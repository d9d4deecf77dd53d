package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/deadlines"
	"lifeline/services/notify"
	"lifeline/views/i18n"
)

// TestDeadlineSettings: the ZUS day (15 or 20, default 20) and the at-risk working days
// (0–30, default 3) are the admins': through the API and the rules page; anything else is
// 422 with the field named and nothing stored; a change is audited; accountants may not;
// another organization keeps its own.
func TestDeadlineSettings(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		rs := a.recoverySetup("Biuro Terminów")
		other := a.tenant("Inne Biuro Terminów")
		api := func(method, path, token, body string) resp {
			return do(t, http.DefaultClient, method, a.srv.URL+path, body, bearer(token))
		}
		if r := api("GET", "/api/v1/organization/settings", rs.token, ""); r.status != 200 || r.json(t)["zusDay"] != 20.0 || r.json(t)["riskWorkingDays"] != 3.0 {
			t.Fatalf("defaults: %d %s", r.status, r.body)
		}
		for body, field := range map[string]string{`{"zusDay": 10}`: "zusDay", `{"zusDay": "15"}`: "zusDay", `{"zusDay": null}`: "zusDay",
			`{"riskWorkingDays": -1}`: "riskWorkingDays", `{"riskWorkingDays": 31}`: "riskWorkingDays", `{"riskWorkingDays": 1.5}`: "riskWorkingDays",
			`{"zusDay": 15, "riskWorkingDays": 99}`: "riskWorkingDays"} {
			if r := api("PATCH", "/api/v1/organization/settings", rs.token, body); r.status != 422 || fieldsOf(t, r)[field] == nil {
				t.Errorf("PATCH %s: %d %s", body, r.status, r.body)
			}
		}
		if r := api("GET", "/api/v1/organization/settings", rs.token, ""); r.json(t)["zusDay"] != 20.0 || r.json(t)["riskWorkingDays"] != 3.0 {
			t.Fatalf("a refused change was stored: %s", r.body)
		}
		if r := api("PATCH", "/api/v1/organization/settings", rs.accountantToken, `{"zusDay": 15}`); r.status != 403 {
			t.Errorf("accountant sets the ZUS day: %d", r.status)
		}
		if r := api("PATCH", "/api/v1/organization/settings", rs.token, `{"zusDay": 15, "riskWorkingDays": 0}`); r.status != 200 || r.json(t)["zusDay"] != 15.0 || r.json(t)["riskWorkingDays"] != 0.0 || r.json(t)["bulkRate"] != 20.0 {
			t.Fatalf("set 15/0: %d %s", r.status, r.body)
		}
		if d, err := db.DeadlineRules(t.Context(), rs.org); err != nil || d.ZUSDay != 15 || d.RiskWorkingDays != 0 {
			t.Fatalf("stored %+v %v", d, err)
		}
		var audited []string
		if err := db.Conn(t.Context()).Raw("SELECT CAST(details AS TEXT) FROM audit_log WHERE organization_id = ? AND action = ?", rs.org, "organization.rules_updated").Scan(&audited).Error; err != nil {
			t.Fatal(err)
		}
		if len(audited) != 1 || !strings.Contains(strings.ReplaceAll(audited[0], " ", ""), `"zusDay":15`) || !strings.Contains(strings.ReplaceAll(audited[0], " ", ""), `"riskWorkingDays":0`) {
			t.Errorf("audit: %q", audited)
		}
		if d, _ := db.DeadlineRules(t.Context(), other.org); d.ZUSDay != 20 || d.RiskWorkingDays != 3 {
			t.Errorf("another organization's rules changed: %+v", d)
		}

		// The rules page: the fields show the values; a bad one is the form again (422) with
		// its message, nothing stored; a good one is stored.
		admin, csrf := a.browser(rs.tenant)
		page := do(t, admin, "GET", a.srv.URL+"/settings/rules", "", nil)
		if page.status != 200 || !strings.Contains(page.body, `data-testid="rules-zusday"`) || !strings.Contains(page.body, `data-testid="rules-riskdays"`) {
			t.Fatalf("rules page: %d", page.status)
		}
		for _, bad := range []url.Values{{"zusDay": {"21"}}, {"riskWorkingDays": {"31"}}, {"riskWorkingDays": {"trzy"}}, {"zusDay": {"20"}, "riskWorkingDays": {""}}} {
			bad.Set("accountantsMayFix", "true")
			r := postForm(t, admin, csrf, a.srv.URL+"/settings/rules", bad)
			if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, `data-testid="field-error"`) || !strings.Contains(r.body, `aria-invalid="true"`) {
				t.Errorf("form %v: %d", bad, r.status)
			}
		}
		if d, _ := db.DeadlineRules(t.Context(), rs.org); d.ZUSDay != 15 || d.RiskWorkingDays != 0 {
			t.Fatalf("a refused form stored %+v", d)
		}
		if r := postForm(t, admin, csrf, a.srv.URL+"/settings/rules", url.Values{"accountantsMayFix": {"true"}, "zusDay": {"20"}, "riskWorkingDays": {"5"}}); r.status != http.StatusSeeOther {
			t.Fatalf("form 20/5: %d", r.status)
		}
		if d, _ := db.DeadlineRules(t.Context(), rs.org); d.ZUSDay != 20 || d.RiskWorkingDays != 5 {
			t.Fatalf("form stored %+v", d)
		}
		acc, accCSRF := a.browser(rs.accountant)
		if r := postForm(t, acc, accCSRF, a.srv.URL+"/settings/rules", url.Values{"riskWorkingDays": {"7"}}); r.status != http.StatusForbidden {
			t.Errorf("accountant's form: %d", r.status)
		}
	})
}

// jpkSetup makes a tenant with an accountant and a viewer, and a JPK_V7M workflow whose
// filing step always fails (its executions go to the DLQ), for the deadline tests.
func (a *app) jpkSetup(name string) (*recoverySetup, string) {
	a.t.Helper()
	rs := a.recoverySetup(name)
	def := fmt.Sprintf(`{"name": "Wysyłka JPK", "settings": {"retryPolicy": {"maxRetries": 0}, "client": "{{ input.nip }}", "period": "{{ input.period }}",
	  "amount": "{{ input.vat }}", "obligation": "JPK_V7M"}, "steps": [{"id": "file", "type": "http", "config": {"method": "POST", "url": "%s/bad"}}]}`, a.ext.URL)
	r := do(a.t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", def, bearer(rs.token))
	if r.status != http.StatusCreated {
		a.t.Fatalf("create: %d %s", r.status, r.body)
	}
	return rs, r.json(a.t)["id"].(string)
}

// startJPK starts one execution of workflow wf for each input and waits for their dead letters.
func (a *app) startJPK(token, wf string, inputs ...string) []string {
	a.t.Helper()
	var execs []string
	for _, in := range inputs {
		r := do(a.t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf+"/executions", `{"input": `+in+`}`, bearer(token))
		if r.status != http.StatusCreated {
			a.t.Fatalf("start: %d %s", r.status, r.body)
		}
		execs = append(execs, r.json(a.t)["id"].(string))
	}
	for until := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var n int64
		a.db.Conn(context.Background()).Model(&models.DeadLetter{}).Where("execution_id IN ?", execs).Count(&n)
		if n == int64(len(execs)) {
			return execs
		}
		if time.Now().After(until) {
			a.t.Fatalf("%d of %d dead letters", n, len(execs))
		}
	}
}

// warsaw is the instant of a day's hour in Poland.
func warsaw(y int, m time.Month, d, hour int) time.Time {
	loc, err := time.LoadLocation("Europe/Warsaw")
	if err != nil {
		panic(err)
	}
	return time.Date(y, m, d, hour, 0, 0, 0, loc)
}

// TestDeadlineBannerAndAPI: on Monday 25 January 2027 (the database clock), JPK_V7M for
// 2026-12 is due today for three clients and JPK_V7M for 2026-11 was due on 28 December: the
// DLQ list and the Problems page carry a banner line for each (Polish and English), linking
// to the items of that obligation and period, the overdue one with the czynny żal hint for
// admins only; the list puts them first; GET /api/v1/deadlines sums their amounts exactly
// per obligation and due date for every member, and another organization sees none of it.
func TestDeadlineBannerAndAPI(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		modeltest.Clock(t, db).Set(warsaw(2027, time.January, 25, 9))
		a := newApp(t, db)
		rs, wf := a.jpkSetup("Biuro Banerów")
		other := a.tenant("Inne Biuro Banerów")
		if err := db.Conn(t.Context()).Model(&models.Organization{}).Where("id = ?", rs.org).Update("default_language", "pl").Error; err != nil {
			t.Fatal(err)
		}
		a.startJPK(rs.token, wf,
			`{"nip": "5260250274", "period": "2027-01", "vat": "10"}`,        // due Thu 25 Feb: later
			`{"nip": "5260250274", "period": "2026-12", "vat": "184230.50"}`, // due today
			`{"nip": "7010002137", "period": "2026-12", "vat": "0.10"}`,
			`{"nip": "9512345678", "period": "2026-12", "vat": "300"}`,
			`{"nip": "1132853869", "period": "2026-11", "vat": "5"}`) // due Mon 28 Dec 2026: overdue

		page := func(c *http.Client, path string) listDoc {
			t.Helper()
			r := do(t, c, "GET", a.srv.URL+path, "", nil)
			if r.status != http.StatusOK {
				t.Fatalf("%s: %d", path, r.status)
			}
			return parseListDoc(t, r.body)
		}
		first := func(d listDoc, id string) listDoc {
			t.Helper()
			if ds := d.testID(id); len(ds) > 0 {
				return ds[0]
			}
			t.Fatalf("no %s", id)
			return d
		}
		admin, _ := a.browser(rs.tenant)
		acc, _ := a.browser(rs.accountant)
		for _, path := range []string{"/dlq/items", "/dlq"} {
			doc := page(admin, path)
			alerts := first(doc, "deadline-banner").testID("deadline-alert")
			if len(alerts) != 2 {
				t.Fatalf("%s: %d banner lines", path, len(alerts))
			}
			overdue, today := alerts[0], alerts[1]
			if u := overdue.attr("data-urgency"); u != "overdue" || !strings.HasPrefix(first(overdue, "deadline-link").text(), "JPK_V7M za 2026-11: 1 klient po terminie, termin minął pon. 28 gru (18 dni roboczych temu)") {
				t.Errorf("%s: overdue line %q (%s)", path, overdue.text(), u)
			}
			if h := first(overdue, "deadline-hint").text(); !strings.Contains(h, "czynnym żalem") || !strings.Contains(h, "art. 16") {
				t.Errorf("%s: the admin's hint %q", path, h)
			}
			link := first(today, "deadline-link")
			if got := link.text(); got != "JPK_V7M za 2026-12: 3 klientów zagrożonych, termin pon. 25 sty, 0 dni roboczych" {
				t.Errorf("%s: today's line %q", path, got)
			}
			if href := link.attr("href"); href != "/dlq/items?obligation=JPK_V7M&period=2026-12" {
				t.Errorf("%s: link %q", path, href)
			}
			if n := len(page(acc, path).testID("deadline-hint")); n != 0 {
				t.Errorf("%s: the accountant sees %d czynny żal hints", path, n)
			}
		}
		// The link shows exactly them; the list's default order puts the overdue one first,
		// then today's by amount, the later one last.
		if rows := page(admin, "/dlq/items?obligation=JPK_V7M&period=2026-12").testID("dlq-row"); len(rows) != 3 {
			t.Errorf("the banner's link lists %d items", len(rows))
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?sort=urgency&workflowId="+wf, "", bearer(rs.token)); r.status != 200 {
			t.Fatalf("urgency: %d %s", r.status, r.body)
		} else {
			var got []string
			for _, it := range r.json(t)["items"].([]any) {
				m := it.(map[string]any)
				got = append(got, fmt.Sprint(m["client"]))
			}
			if want := "1132853869 5260250274 9512345678 7010002137 5260250274"; strings.Join(got, " ") != want {
				t.Errorf("urgency order %v, want %s", got, want)
			}
		}
		// Problems: the group says its nearest due date.
		if due := first(page(admin, "/dlq"), "problem-due").text(); !strings.Contains(due, "28 gru") {
			t.Errorf("problem's due date %q", due)
		}
		// English.
		accEN, accCSRF := a.browser(rs.accountant)
		if r := postForm(t, accEN, accCSRF, a.srv.URL+"/settings/language", url.Values{"lang": {"en"}}); r.status >= 400 {
			t.Fatalf("language: %d", r.status)
		}
		if got := page(accEN, "/dlq/items").testID("deadline-link")[1].text(); got != "JPK_V7M for 2026-12: 3 clients at risk, due Mon 25 Jan, 0 working days left" {
			t.Errorf("English line %q", got)
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/deadlines?from=2026-12-01&to=2027-03-31", "", bearer(rs.accountantToken)); r.status != 200 {
			t.Fatalf("deadlines: %d %s", r.status, r.body)
		} else {
			var body struct {
				Deadlines []struct {
					Obligation, DueAt, Urgency string
					WorkingDaysLeft            int
					Open, AtRisk               int
					Amount                     map[string]string
					Periods                    []string
					Clients                    struct {
						Count int
						Keys  []string
					}
				}
			}
			if err := json.Unmarshal([]byte(r.body), &body); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range body.Deadlines {
				got = append(got, fmt.Sprintf("%s %s %s %d open=%d atRisk=%d %v %v %d %v", d.Obligation, d.DueAt, d.Urgency, d.WorkingDaysLeft, d.Open, d.AtRisk,
					d.Amount, d.Periods, d.Clients.Count, d.Clients.Keys))
			}
			want := []string{
				"JPK_V7M 2026-12-28 overdue -18 open=1 atRisk=1 map[PLN:5.00] [2026-11] 1 [1132853869]",
				"JPK_V7M 2027-01-25 due_today 0 open=3 atRisk=3 map[PLN:184530.60] [2026-12] 3 [5260250274 7010002137 9512345678]",
				"JPK_V7M 2027-02-25 later 23 open=1 atRisk=0 map[PLN:10.00] [2027-01] 1 [5260250274]",
			}
			if !slices.Equal(got, want) {
				t.Errorf("deadlines:\n got %q\nwant %q", got, want)
			}
		}
		for q, field := range map[string]string{"from=2026-13-01": "from", "to=jutro": "to", "from=2027-02-01&to=2027-01-01": "to", "from=2020-01-01&to=2027-01-01": "to"} {
			if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/deadlines?"+q, "", bearer(rs.token)); r.status != 422 || fieldsOf(t, r)[field] == nil {
				t.Errorf("%s: %d %s", q, r.status, r.body)
			}
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/deadlines", "", bearer(other.token)); r.status != 200 || strings.Contains(r.body, "JPK_V7M") {
			t.Errorf("another organization: %d %s", r.status, r.body)
		}
		otherAdmin, _ := a.browser(other)
		if n := len(page(otherAdmin, "/dlq/items").testID("deadline-alert")); n != 0 {
			t.Errorf("another organization's banner has %d lines", n)
		}
	})
}

// TestDeadlineReminders: as the database clock crosses 3 (the organization's at-risk days),
// 1 and 0 working days before JPK_V7M for 2026-12 is due (Mon 25 Jan 2027), one reminder per
// threshold goes to the admins and the accountants (in-app and email), grouped in one
// message for the obligation and due date, each in its recipient's language; a pass run
// again, a day with the same threshold, a weekend and the day after send nothing more, and
// another organization's work reminds only its own people.
func TestDeadlineReminders(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		clock := modeltest.Clock(t, db)
		clock.Set(warsaw(2027, time.January, 18, 9))
		a := newApp(t, db)
		rs, wf := a.jpkSetup("Biuro Przypomnień")
		if err := db.Conn(ctx).Model(&models.Organization{}).Where("id = ?", rs.org).Update("default_language", "pl").Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Conn(ctx).Model(&models.User{}).Where("email = ?", rs.accountant.email).Update("language", "en").Error; err != nil {
			t.Fatal(err)
		}
		a.startJPK(rs.token, wf,
			`{"nip": "5260250274", "period": "2026-12", "vat": "184230.50"}`,
			`{"nip": "7010002137", "period": "2026-12", "vat": "0.10"}`,
			`{"nip": "9512345678", "period": "2026-12", "vat": "300"}`,
			`{"nip": "5260250274", "period": "2027-01", "vat": "10"}`) // due 25 Feb: no reminder yet
		ns := notify.New(db, notify.Config{Texts: i18n.Catalog{}, BaseURL: "http://lifeline.test"})
		svc := &deadlines.Service{DB: db, Notify: ns, Link: func(o, d string) string { return "http://lifeline.test/dlq/items?obligation=" + o }}
		for _, step := range []struct {
			at   time.Time
			want int
		}{
			{warsaw(2027, time.January, 18, 9), 0},  // Mon: 5 working days left
			{warsaw(2027, time.January, 19, 9), 0},  // 4
			{warsaw(2027, time.January, 20, 7), 1},  // 3: the at-risk reminder
			{warsaw(2027, time.January, 20, 16), 0}, // again the same day
			{warsaw(2027, time.January, 21, 9), 0},  // 2: still the threshold of 3, sent
			{warsaw(2027, time.January, 22, 9), 1},  // 1
			{warsaw(2027, time.January, 23, 12), 0}, // Saturday: 1 left, sent
			{warsaw(2027, time.January, 25, 6), 1},  // 0: due today
			{warsaw(2027, time.January, 26, 9), 0},  // overdue: no reminder
		} {
			clock.Set(step.at)
			n, err := svc.Remind(ctx)
			if err != nil || n != step.want {
				t.Fatalf("%s: %d reminders, %v; want %d", step.at, n, err, step.want)
			}
		}
		var byChannel []struct {
			Channel string
			N       int
		}
		if err := db.Conn(ctx).Raw("SELECT channel, COUNT(*) AS n FROM notification_deliveries WHERE organization_id = ? AND event_kind = ? GROUP BY channel ORDER BY channel",
			rs.org, "deadline").Scan(&byChannel).Error; err != nil {
			t.Fatal(err)
		}
		// Three reminders, each to the admin and the accountant, in the app and by email.
		if got := fmt.Sprint(byChannel); got != "[{app 6} {email 6}]" {
			t.Errorf("deliveries %s", got)
		}
		if _, err := ns.Dispatch(ctx); err != nil {
			t.Fatal(err)
		}
		var titles []struct {
			Email, Title string
		}
		if err := db.Conn(ctx).Raw(`SELECT users.email, notifications.title FROM notifications JOIN users ON users.id = notifications.user_id
			WHERE notifications.organization_id = ? AND notifications.kind = ? ORDER BY users.email, notifications.title`, rs.org, "deadline").Scan(&titles).Error; err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, x := range titles {
			got = append(got, strings.SplitN(x.Email, ".", 2)[0]+": "+x.Title)
		}
		want := []string{
			"accountant: JPK_V7M for 2026-12: 3 clients, due Mon 25 Jan, 0 working days left",
			"accountant: JPK_V7M for 2026-12: 3 clients, due Mon 25 Jan, 1 working day left",
			"accountant: JPK_V7M for 2026-12: 3 clients, due Mon 25 Jan, 3 working days left",
		}
		admin := strings.SplitN(rs.email, ".", 2)[0] + ": "
		want = append(want, admin+"JPK_V7M za 2026-12: 3 klientów, termin pon. 25 sty, 0 dni roboczych",
			admin+"JPK_V7M za 2026-12: 3 klientów, termin pon. 25 sty, 1 dzień roboczy",
			admin+"JPK_V7M za 2026-12: 3 klientów, termin pon. 25 sty, 3 dni robocze")
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("in-app reminders:\n got %q\nwant %q", got, want)
		}
	})
}
