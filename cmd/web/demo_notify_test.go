package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/demo"
)

// TestDemoNotifiesEndToEnd runs `lifeline serve` in the demo, as `make run` does, on both
// databases. The kickoff's dead letters are notified: the demo inbox shows the emails the
// demo's SMTP server received and the Slack and Teams messages the sandbox's webhooks got,
// and the delivery log says each delivery was sent once. The kickoff's VAT filing that the
// tax office refuses is handled by its on-failure handler: PARTIAL, with the handler's task
// in the API and on the page.
func TestDemoNotifiesEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole demo")
	}
	t.Parallel()
	for _, dialect := range modeltest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			dbURL := modeltest.URL(t, dialect)
			if dialect == models.SQLite {
				dbURL = "sqlite://" + filepath.Join(t.TempDir(), "demo.db")
			}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			env := map[string]string{"DATABASE_URL": dbURL, "LIFELINE_ADDR": addr, "LIFELINE_DEMO": "true", "LIFELINE_DEMO_TRAFFIC_EVERY": "1h",
				"LIFELINE_DATA_DIR": t.TempDir(), "LIFELINE_ENCRYPTION_KEYS": testKeys(t), "LIFELINE_LOG_LEVEL": "error"}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"serve"}, func(k string) string { return env[k] }, io.Discard, io.Discard)
			}()
			t.Cleanup(func() {
				cancel()
				select {
				case <-done:
				case <-time.After(40 * time.Second):
					t.Error("serve did not stop")
				}
			})
			base := "http://" + addr
			jar, _ := cookiejar.New(nil)
			c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
			get := func(path string) string {
				t.Helper()
				r, err := c.Get(base + path)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Body.Close()
				b, _ := io.ReadAll(r.Body)
				return string(b)
			}
			var login string
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				if r, err := c.Get(base + "/login"); err == nil {
					b, _ := io.ReadAll(r.Body)
					r.Body.Close()
					if login = string(b); r.StatusCode == 200 {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatal("the demo never served")
				}
			}
			csrf := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindStringSubmatch(login)
			if csrf == nil {
				t.Fatal("no CSRF token on the login page")
			}
			r, err := c.PostForm(base+"/login", url.Values{"_csrf": {csrf[1]}, "email": {demoUsers[0].Email}, "password": {demoUsers[0].Password}})
			if err != nil {
				t.Fatal(err)
			}
			r.Body.Close()

			// The kickoff's dead letters (demo.Morning) are told per problem (notifyPer "group",
			// the default): each failure group once to the demo's admin and accountant by email
			// and in the app, and once on Slack and on Teams.
			dead := 0
			for _, s := range demo.Morning() {
				if s.Fate == demo.DeadLetter || s.Fate == demo.PeriodClosed {
					dead++
				}
			}
			// The morning's JPK_V7M for 2026-10 is due on 25 November: while that is at risk,
			// its deadline reminder (issue 23) goes out too, once per obligation and due date
			// and threshold: each person (the admin and the accountant) gets it once by email,
			// and Slack and Teams once each. The deadlines the API says are due today or at
			// risk are those reminded of (serve reminds of the kickoff's right after it).
			dueSoon := func() int {
				var deadlines struct {
					Deadlines []struct {
						Urgency string
						Open    int
					}
				}
				if err := json.Unmarshal([]byte(get("/api/v1/deadlines")), &deadlines); err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, d := range deadlines.Deadlines {
					if d.Open > 0 && (d.Urgency == "due_today" || d.Urgency == "at_risk") {
						n++
					}
				}
				return n
			}
			count := func(page, testID string) int { return strings.Count(page, `data-testid="`+testID+`"`) }
			// reminded counts the reminders in the inbox by recipient (an email's address, a
			// hook's channel): an item whose subject names a due date ("…, termin śr. 25 lis, …").
			subject := regexp.MustCompile(`<span class="inbox-subject[^"]*">([^<]*)</span>`)
			reminded := func(page, testID string) map[string]int {
				by := map[string]int{}
				for _, item := range strings.Split(page, `data-testid="`+testID+`"`)[1:] {
					item, _, _ = strings.Cut(item, "</summary>")
					m := subject.FindStringSubmatch(item)
					if m == nil || !strings.Contains(m[1], ", termin ") {
						continue
					}
					to := regexp.MustCompile(`data-channel="([^"]+)"`).FindStringSubmatch(item)
					if testID == "email" {
						to = regexp.MustCompile(`<span class="inbox-meta muted small">([^ <]+)`).FindStringSubmatch(item)
					}
					if to != nil {
						by[to[1]]++
					}
				}
				return by
			}
			problems := func() int { return count(get("/dlq"), "problem") }
			var inbox string
			var groups, reminders int
			for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
				inbox, groups, reminders = get("/demo/inbox"), problems(), dueSoon()
				if groups > 0 && count(inbox, "email") >= 2*(groups+reminders) && count(inbox, "hook") >= 2*(groups+reminders) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("demo inbox after a minute: %d emails, %d hooks for %d problems and %d deadline reminders", count(inbox, "email"),
						count(inbox, "hook"), groups, reminders)
				}
			}
			if groups >= dead {
				t.Errorf("%d problems for %d dead letters: the morning's failures share causes", groups, dead)
			}
			// Nothing more arrives later: each was sent once (a duplicate would come within the
			// dispatcher's next passes, one a second).
			time.Sleep(3 * time.Second)
			inbox, groups, reminders = get("/demo/inbox"), problems(), dueSoon()
			// The kickoff's VAT return waiting for the partner's approval (demo.Waiting) is told
			// once too: by email to the demo's admin, with its link, and on Slack and Teams.
			asked := len(demo.Waiting(time.Now()))
			if n := count(inbox, "email"); n != 2*(groups+reminders)+asked {
				t.Errorf("%d emails, want %d problems and %d deadline reminders × admin and accountant, and %d requests to the admin", n, groups, reminders, asked)
			}
			if count(inbox, "hook") != 2*(groups+reminders+asked) {
				t.Errorf("hooks: %d, want one per problem, deadline reminder and request on Slack and on Teams", count(inbox, "hook"))
			}
			if !strings.Contains(inbox, "Czeka na Ciebie: Zatwierdź JPK_V7") {
				t.Error("the inbox has no request for the partner's approval of the waiting VAT return")
			}
			// The partner answers through the link in that e-mail, as sent by SMTP: opening it
			// shows the request's form with the link's token; the answer uses the token up.
			link := regexp.MustCompile(`/interventions/([0-9a-f-]+)\?link=([A-Za-z0-9_-]+)`).FindStringSubmatch(inbox)
			if link == nil {
				t.Fatal("the request's e-mail carries no link to it")
			}
			page := get(link[0])
			formCSRF := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindStringSubmatch(page)
			if formCSRF == nil || !strings.Contains(page, `name="link" value="`+link[2]+`"`) {
				t.Fatalf("the e-mail's link does not open the request's form with its token: %.300s", page)
			}
			noFollow := *c
			noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			ar, err := noFollow.PostForm(base+"/interventions/"+link[1]+"/answer", url.Values{"_csrf": {formCSRF[1]}, "link": {link[2]},
				"answer": {"approved"}, "note": {"Zgodne z rejestrem"}})
			if err != nil {
				t.Fatal(err)
			}
			ar.Body.Close()
			if ar.StatusCode != http.StatusSeeOther {
				t.Errorf("the answer through the e-mail's link: %d", ar.StatusCode)
			}
			if again := get(link[0]); !strings.Contains(again, `data-testid="ask-link-note"`) || strings.Contains(again, `name="link"`) ||
				!strings.Contains(again, `data-status="answered"`) {
				t.Errorf("the link opened again is not used up, or the request not answered: %.300s", again)
			}
			want := map[string]int{}
			if reminders > 0 {
				want = map[string]int{demoUsers[0].Email: reminders, demoUsers[1].Email: reminders}
			}
			if got := reminded(inbox, "email"); !maps.Equal(got, want) {
				t.Errorf("deadline reminders by email %v, want %v (once per person, obligation and due date)", got, want)
			}
			if reminders > 0 {
				want = map[string]int{"slack": reminders, "teams": reminders}
			}
			if got := reminded(inbox, "hook"); !maps.Equal(got, want) {
				t.Errorf("deadline reminders on Slack and Teams %v, want %v", got, want)
			}
			if !strings.Contains(inbox, "Nowak i Wspólnicy") || !strings.Contains(inbox, "kolejki DLQ") {
				t.Error("the emails do not name the client or say, in Polish, that the execution is in the DLQ")
			}
			log := get("/notifications/deliveries")
			named := false // the log's first page names a client of the morning's dead letters
			for _, s := range demo.Morning() {
				named = named || (s.Fate == demo.DeadLetter && strings.Contains(log, s.Input["clientName"].(string)))
			}
			if !strings.Contains(log, "admin@demo.lifeline.local") || !named {
				t.Error("the delivery log does not list the admin's email, or does not name the client")
			}

			// The kickoff's VAT filing with a NIP a digit short is handled: the failure goes back
			// to its preparer as a task, and the execution ends PARTIAL (issue 13).
			var list struct {
				Items []struct {
					ID, Subject string
				}
			}
			for deadline := time.Now().Add(30 * time.Second); len(list.Items) == 0; time.Sleep(300 * time.Millisecond) {
				if err := json.Unmarshal([]byte(get("/api/v1/executions?status=PARTIAL")), &list); err != nil {
					t.Fatal(err)
				}
				if time.Now().After(deadline) {
					t.Fatal("no PARTIAL execution in the demo")
				}
			}
			if len(list.Items) != 1 || !strings.HasPrefix(list.Items[0].Subject, "Apteka Pod Lipami") {
				t.Fatalf("partial executions %+v", list.Items)
			}
			var ex struct {
				Status string
				Steps  []struct {
					ID, Status, HandlerFor, HandledBy string
					Attempts                          []struct{ Output map[string]any }
				}
			}
			if err := json.Unmarshal([]byte(get("/api/v1/executions/"+list.Items[0].ID)), &ex); err != nil {
				t.Fatal(err)
			}
			handled := false
			for _, st := range ex.Steps {
				if st.ID == "validate_jpk" && st.HandledBy != "return_to_preparer" {
					t.Errorf("validate_jpk handed to %q", st.HandledBy)
				}
				if st.ID == "return_to_preparer" && st.HandlerFor == "validate_jpk" && st.Status == models.StepSucceeded && len(st.Attempts) == 1 {
					task, _ := st.Attempts[0].Output["taskId"].(string)
					handled = strings.HasPrefix(task, "ZAD-")
				}
			}
			if ex.Status != models.ExecPartial || !handled {
				t.Errorf("the handled execution: %+v", ex)
			}
			page = get("/executions/" + list.Items[0].ID)
			if !strings.Contains(page, `data-testid="handled-failure"`) || !strings.Contains(page, "ZAD-") {
				t.Error("the execution page does not show the handled failure and the handler's output")
			}
			// The admin goes from an execution to its deliveries.
			if link := regexp.MustCompile(`href="([^"]*)" data-testid="execution-deliveries-link"`).FindStringSubmatch(page); link == nil ||
				link[1] != "/notifications/deliveries?executionId="+list.Items[0].ID {
				t.Errorf("the execution page's link to its deliveries: %v", link)
			}
			// The kickoff's late September statement of the client whose September the demo
			// office closed: its posting is not sent; the item is validation / period_closed,
			// and its page says who closed September and offers what to do instead (issue 23).
			closed := demo.ClosedPeriods()[0]
			var late struct {
				Items []struct{ ID, ErrorType, FailedStepId, Period, Client string }
			}
			for deadline := time.Now().Add(30 * time.Second); len(late.Items) == 0; time.Sleep(300 * time.Millisecond) {
				q := url.Values{"client": {closed.Client}, "period": {closed.Period}}
				if err := json.Unmarshal([]byte(get("/api/v1/dlq?"+q.Encode())), &late); err != nil {
					t.Fatal(err)
				}
				if time.Now().After(deadline) {
					t.Fatal("no dead letter in the closed period")
				}
			}
			if it := late.Items[0]; len(late.Items) != 1 || it.ErrorType != "validation" || it.FailedStepId != "post_ledger" {
				t.Errorf("the closed period's item: %+v", late.Items)
			}
			if item := get("/dlq/" + late.Items[0].ID); !strings.Contains(item, `data-testid="period-closed"`) || !strings.Contains(item, "2026-09") ||
				!strings.Contains(item, `data-testid="period-closed-reopen"`) || !strings.Contains(item, `data-testid="period-closed-edit"`) {
				t.Errorf("the item page does not show the closed period and what to do: %.3000s", item)
			}
			// The kickoff's bank import for Piekarnia Zielińscy fails at its 4th step (the report)
			// and rolls back: steps 3, 2 and 1 undone in that order, in the API and on the page
			// (issue 10).
			var found struct{ Items []struct{ ID string } }
			if err := json.Unmarshal([]byte(get("/api/v1/executions?q=Piekarnia+Zieli%C5%84scy&status=DLQ_PENDING")), &found); err != nil || len(found.Items) != 1 {
				t.Fatalf("the rolled-back bank import: %+v %v", found, err)
			}
			var rb struct {
				RollbackStatus string
				Compensations  []struct{ StepID, Status string }
			}
			for deadline := time.Now().Add(30 * time.Second); rb.RollbackStatus != "ROLLED_BACK"; time.Sleep(300 * time.Millisecond) {
				if err := json.Unmarshal([]byte(get("/api/v1/executions/"+found.Items[0].ID)), &rb); err != nil {
					t.Fatal(err)
				}
				if time.Now().After(deadline) {
					t.Fatalf("the rollback never finished: %+v", rb)
				}
			}
			var order []string
			for _, c := range rb.Compensations {
				order = append(order, c.StepID+" "+c.Status)
			}
			if strings.Join(order, ", ") != "post_ledger completed, match_invoices completed, import_statement completed" {
				t.Errorf("compensations %v", order)
			}
			// The rollback section of the page: its three compensations, last step first.
			section := get("/executions/" + found.Items[0].ID)
			if i := strings.Index(section, `data-testid="rollback"`); i >= 0 {
				section = section[i:]
				section = section[:strings.Index(section, "</section>")]
			}
			at := func(s string) int { return strings.Index(section, s) }
			if strings.Count(section, `data-testid="compensation"`) != 3 || !(0 <= at("Księgowanie w dzienniku") &&
				at("Księgowanie w dzienniku") < at("Dopasowanie transakcji do faktur") && at("Dopasowanie transakcji do faktur") < at("Import wyciągu bankowego")) {
				t.Errorf("the execution page does not show steps 3, 2 and 1 undone in that order: %.2000s", section)
			}
		})
	}
}
