package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeline/handlers"
	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/dbconn"
	"lifeline/services/definition"
	"lifeline/services/notify"
	"lifeline/services/notify/email"
	"lifeline/services/notify/slack"
	"lifeline/services/notify/teams"
	"lifeline/services/outbound"
	"lifeline/services/workflows"
	"lifeline/views/i18n"
)

// recorder is a loopback service that keeps every request it gets (method, URL, headers
// and body as one text) and answers with status, echoing the request back as a careless
// upstream does.
type recorder struct {
	status int
	mu     sync.Mutex
	got    []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.got = append(r.got, fmt.Sprintf("%s %s %v %s", req.Method, req.URL, req.Header, body))
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.status)
	var parsed any
	if json.Unmarshal(body, &parsed) != nil {
		parsed = string(body)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"error": "echo", "url": req.URL.String(), "authorization": req.Header.Get("Authorization"),
		"received": parsed, "id": "B-7"})
}

func (r *recorder) requests() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.got, "\n")
}

func newRecorder(t *testing.T, status int) (*recorder, *httptest.Server) {
	rec := &recorder{status: status}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return rec, srv
}

// canaryApp is the whole app as `lifeline serve` wires it: secrets sealed under a key ring,
// the queue, notifications by email (a real SMTP sink), in the app, on Slack and Teams
// (loopback receivers), and the named database connections.
type canaryApp struct {
	*app
	ns   *notify.Service
	sink *email.Sink
}

func newCanaryApp(t *testing.T, db *models.DB, logw io.Writer) *canaryApp {
	t.Helper()
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	client := outbound.NewClient(outbound.Options{Allow: allow, Timeout: 5 * time.Second})
	sink, err := email.StartSink("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	ca := &canaryApp{sink: sink}
	ca.app = newAppWith(t, db, logw, func(d *handlers.Deps, _ string) {
		ca.ns = notify.New(db, notify.Config{Texts: i18n.Catalog{}, BaseURL: "http://lifeline.test", Allow: allow, Senders: map[notify.Channel]notify.Sender{
			notify.Email: email.New(sink.Config("lifeline@lifeline.test")),
			notify.Slack: slack.New(client),
			notify.Teams: skipURLCheck(teams.New(client)),
		}})
		d.Databases = dbconn.New(db, dbconn.Config{})
		d.Notify = ca.ns
		d.Workflows.Checks = []definition.Check{workflows.NotificationsCheck(ca.ns)}
		d.LoginThrottle = nil // the defaults: three sign-ins are well within them
	})
	return ca
}

func skipURLCheck(s *teams.Sender) *teams.Sender {
	s.SkipURLCheck = true
	return s
}

// TestCanariesAreNowhereInClear puts one canary per secret path through a run that
// succeeds, one that dead-letters, a replay with an edited input and a rollback: an input
// key, a header, a query parameter, a template's copy into a plain key, upper() of it, a
// key built at run time, toJSON(input), a compensation's header and endpoint, the Slack and
// Teams webhook URLs, a connection string. Then it reads every page and API response as
// viewer, accountant and admin, every notification sent, the audit log and its CSV, the
// server log, every column of every table, and on SQLite the database and WAL files: no
// canary appears in clear (in any letter case). The services still got the secrets.
func TestCanariesAreNowhereInClear(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		var logBuf syncBuffer
		clock := modeltest.Clock(t, db)
		a := newCanaryApp(t, db, &logBuf)
		ctx := context.Background()
		rs := a.recoverySetup("Biuro Kanarek")
		ok, okSrv := newRecorder(t, http.StatusOK)
		failing, failSrv := newRecorder(t, http.StatusInternalServerError)
		comp, compSrv := newRecorder(t, http.StatusInternalServerError)
		slackRec, slackSrv := newRecorder(t, http.StatusOK)
		teamsRec, teamsSrv := newRecorder(t, http.StatusBadGateway) // its failures are recorded: without the URL

		const (
			password = "Canary-Pass-71xQ" // input.password, copied into plain keys
			token    = "canary-tok-9f3a"  // input.apiToken: a header, upper(), input["api"+"Token"]
			apiKey   = "CanaryKey5c2d"    // input.apiKey: a query parameter
			defHdr   = "DefCanary-Hdr-88" // a literal header of the definition
			compHdr  = "CompCanary-Auth"  // a literal header of a compensation
			compQ    = "CompCanaryQ-63"   // a literal ?api_key= of a compensation's endpoint
			slackC   = "SlackCanary-T9Z"  // the Slack webhook URL's secret part
			teamsC   = "TeamsCanary-W7Y"  // the Teams webhook URL's signature
			dsnC     = "DsnCanary-Pw-55"  // a connection string's password
		)
		inputCanaries := []string{password, token, apiKey}
		definitionCanaries := []string{defHdr, compHdr, compQ}
		all := append(append(append([]string{}, inputCanaries...), definitionCanaries...), slackC, teamsC, dsnC)

		// Notifications on every channel, the webhook URLs carrying their canaries.
		settings := fmt.Sprintf(`{"enabled": true, "channels": ["email", "app", "slack", "teams"], "recipients": ["role:admin", "role:accountant"],
		  "notifyOnDLQ": true, "notifyOnFirstFailure": true, "slackWebhookUrl": %q, "teamsWebhookUrl": %q}`,
			slackSrv.URL+"/services/T0/B0/"+slackC, teamsSrv.URL+"/workflows/run?api-version=1&sig="+teamsC)
		if r := do(t, http.DefaultClient, "PUT", a.srv.URL+"/api/v1/notifications/settings", settings, bearer(rs.token)); r.status != 200 {
			t.Fatalf("notification settings: %d %s", r.status, r.body)
		}
		// A connection string with a password.
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/connections",
			fmt.Sprintf(`{"name": "office", "dsn": "postgres://office:%s@db.example.invalid:5432/office"}`, dsnC), bearer(rs.token)); r.status != 201 {
			t.Fatalf("connection: %d %s", r.status, r.body)
		}

		prep := `{"id": "prep", "type": "transform", "config": {"output": {"copy": "{{ input.password }}", "shout": "{{ upper(input.apiToken) }}",
		    "dyn": "{{ input[\"api\" + \"Token\"] }}", "dump": "{{ toJSON(input) }}", "client": "{{ input.client }}"}}}`
		send := func(id, base string) string {
			return fmt.Sprintf(`{"id": %q, "type": "http", "config": {"method": "POST", "url": "%s/%s?api_key={{ input.apiKey }}&page=1",
			  "headers": {"Authorization": "Bearer {{ input.apiToken }}", "X-Api-Key": %q},
			  "body": {"pw": "{{ input.password }}", "all": "{{ steps.prep.output.dump }}", "shout": "{{ steps.prep.output.shout }}", "client": "{{ input.client }}"}}}`,
				id, base, id, defHdr)
		}
		create := func(def string) string {
			t.Helper()
			r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", def, bearer(rs.token))
			if r.status != 201 {
				t.Fatalf("create: %d %s", r.status, r.body)
			}
			return r.json(t)["id"].(string)
		}
		subject := `"subject": "{{ input.client }} · {{ input.password }}"`
		okWF := create(fmt.Sprintf(`{"name": "Import wyciągu", "settings": {%s}, "steps": [%s, %s]}`, subject, prep, send("post", okSrv.URL)))
		failWF := create(fmt.Sprintf(`{"name": "Deklaracja VAT", "settings": {%s, "retryPolicy": {"maxRetries": 1, "initialDelayMs": 1000}},
		  "steps": [
		    {"id": "book", "type": "http", "config": {"method": "POST", "url": "%s/book", "body": {"client": "{{ input.client }}"}},
		     "compensation": {"compensationType": "api_call", "retryPolicy": {"maxRetries": 0},
		       "config": {"method": "DELETE", "endpoint": "%s/cancel/{{ step.output.id }}?api_key=%s",
		         "headers": {"Authorization": "Bearer %s", "X-Copy": "{{ input.apiToken }}"}, "body": {"pw": "{{ input.password }}"}}}},
		    %s, %s]}`, subject, okSrv.URL, compSrv.URL, compQ, compHdr, prep, send("file", failSrv.URL)))

		input := fmt.Sprintf(`{"input": {"client": "Kowalski", "password": %q, "apiToken": %q, "apiKey": %q}}`, password, token, apiKey)
		start := func(wf string) string {
			t.Helper()
			r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wf+"/executions", input, bearer(rs.token))
			if r.status != 201 {
				t.Fatalf("start: %d %s", r.status, r.body)
			}
			return r.json(t)["id"].(string)
		}
		// wait polls for cond, moving the clock to each retry's time instead of waiting for it.
		wait := func(what string, cond func() bool) {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for !cond() {
				if time.Now().After(deadline) {
					t.Fatalf("waiting for %s", what)
				}
				var next models.StepAttempt
				if db.Conn(ctx).Where("status = ? AND waiting_breaker_id IS NULL", models.StepPending).Order("scheduled_at").
					First(&next).Error == nil && next.ScheduledAt.After(clock.Now()) {
					clock.Set(next.ScheduledAt)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		execution := func(id string) map[string]any {
			return do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+id, "", bearer(rs.token)).json(t)
		}
		okID, failID := start(okWF), start(failWF)
		wait("the successful run", func() bool { return execution(okID)["status"] == models.ExecSucceeded })
		wait("the dead letter", func() bool { return execution(failID)["status"] == models.ExecDLQPending })

		// A replay with an edited input: the masked secrets sent back keep their values.
		var dl models.DeadLetter
		if err := db.Conn(ctx).Where("execution_id = ?", failID).First(&dl).Error; err != nil {
			t.Fatal(err)
		}
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/dlq/"+dl.ID+"/actions",
			`{"action": "retry_modified", "modifiedInput": {"client": "Kowalska", "password": "[REDACTED]", "apiToken": "[REDACTED]", "apiKey": "[REDACTED]"},
			  "resolutionNotes": "client renamed"}`, bearer(rs.token))
		if r.status != http.StatusAccepted {
			t.Fatalf("retry_modified: %d %s", r.status, r.body)
		}
		wait("the replay to fail again", func() bool {
			var d models.DeadLetter
			return db.Conn(ctx).First(&d, "id = ?", dl.ID).Error == nil && d.Status == models.DLQPending && d.ManualRetryCount > dl.ManualRetryCount
		})
		// A rollback: the compensation's service echoes its request in a 500.
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/executions/"+failID+"/rollback", "", bearer(rs.token)); r.status != http.StatusAccepted {
			t.Fatalf("rollback: %d %s", r.status, r.body)
		}
		wait("the rollback to end", func() bool { return execution(failID)["rollbackStatus"] == models.RollbackFailed })
		// The notifications go out (a connection test fails on the way, on purpose).
		conns := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/connections", "", bearer(rs.token)).body
		if m := regexp.MustCompile(`"id":"([0-9a-f-]{36})"`).FindStringSubmatch(conns); m != nil {
			do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/connections/"+m[1]+"/test", "", bearer(rs.token))
		}
		for range 5 {
			if _, err := a.ns.Dispatch(ctx); err != nil {
				t.Fatal(err)
			}
		}

		// The services got what they were meant to get.
		for what, got := range map[string]string{"the step": ok.requests(), "the failing step": failing.requests()} {
			for _, want := range []string{"Bearer " + token, "api_key=" + apiKey, password, strings.ToUpper(token), defHdr} {
				if !strings.Contains(got, want) {
					t.Errorf("%s did not get %q: %.400s", what, want, got)
				}
			}
		}
		if got := comp.requests(); !strings.Contains(got, "Bearer "+compHdr) || !strings.Contains(got, "api_key="+compQ) || !strings.Contains(got, token) || !strings.Contains(got, password) {
			t.Errorf("the compensation did not get its secrets: %.400s", got)
		}
		if !strings.Contains(slackRec.requests(), "/services/T0/B0/"+slackC) || !strings.Contains(teamsRec.requests(), "sig="+teamsC) {
			t.Errorf("the notifications did not reach their webhooks: slack %.200s teams %.200s", slackRec.requests(), teamsRec.requests())
		}
		if len(a.sink.Messages()) == 0 {
			t.Error("no email was sent")
		}

		leaks := func(where, text string, canaries []string) {
			t.Helper()
			lower := strings.ToLower(text)
			for _, c := range canaries {
				if i := strings.Index(lower, strings.ToLower(c)); i >= 0 {
					t.Errorf("%s shows %s in clear: …%s…", where, c, text[max(0, i-100):min(len(text), i+40)])
				}
			}
		}
		// The notifications: only their webhook URLs' owners see those.
		leaks("the Slack message", bodiesOf(slackRec.requests()), all)
		leaks("the Teams message", bodiesOf(teamsRec.requests()), all)
		for _, m := range a.sink.Messages() {
			leaks("an email", string(m.Data), all)
		}
		dump := dumpDatabase(t, db)
		if db.Dialect == models.SQLite {
			dump += sqliteFiles(t, db)
		}
		leaks("the database", dump, all)
		leaks("the server log", logBuf.String(), all)

		// Every page and API response, as each role.
		var execIDs []string
		if err := db.Conn(ctx).Model(&models.Execution{}).Where("organization_id = ?", rs.org).Pluck("id", &execIDs).Error; err != nil {
			t.Fatal(err)
		}
		var dlqIDs []string
		if err := db.Conn(ctx).Model(&models.DeadLetter{}).Where("organization_id = ?", rs.org).Pluck("id", &dlqIDs).Error; err != nil {
			t.Fatal(err)
		}
		pages := []string{"/executions", "/dlq", "/dlq/items?status=all", "/workflows", "/notifications", "/notifications/bell", "/profile", "/breakers"}
		apis := []string{"/api/v1/executions", "/api/v1/dlq", "/api/v1/dlq?status=all", "/api/v1/notifications", "/api/v1/breakers"}
		adminPages := []string{"/audit", "/audit/export.csv", "/settings/notifications", "/notifications/deliveries", "/settings/connections", "/settings/tokens"}
		adminAPIs := []string{"/api/v1/notifications/settings", "/api/v1/notifications/deliveries", "/api/v1/connections"}
		for _, id := range execIDs {
			pages, apis = append(pages, "/executions/"+id), append(apis, "/api/v1/executions/"+id)
			adminAPIs = append(adminAPIs, "/api/v1/notifications/deliveries?executionId="+id)
		}
		for _, id := range dlqIDs {
			pages, apis = append(pages, "/dlq/"+id), append(apis, "/api/v1/dlq/"+id)
		}
		// A workflow's definition is the admins' own: they read its literal secrets.
		definitionViews := []string{"/api/v1/workflows"}
		for _, wf := range []string{okWF, failWF} {
			definitionViews = append(definitionViews, "/workflows/"+wf, "/api/v1/workflows/"+wf)
			pages = append(pages, "/workflows/"+wf+"/notifications")
		}
		roles := []struct {
			role  string
			login *tenant
		}{{models.RoleViewer, rs.viewer}, {models.RoleAccountant, rs.accountant}, {models.RoleAdmin, rs.tenant}}
		for _, u := range roles {
			browser, _ := a.browser(u.login)
			tok, _, err := a.as.CreateToken(ctx, rs.org, u.role, "canary-"+u.role)
			if err != nil {
				t.Fatal(err)
			}
			read := func(path string) string {
				if strings.HasPrefix(path, "/api/") {
					return do(t, http.DefaultClient, "GET", a.srv.URL+path, "", bearer(tok)).body
				}
				return do(t, browser, "GET", a.srv.URL+path, "", nil).body
			}
			paths := append(append([]string{}, pages...), apis...)
			if u.role == models.RoleAdmin {
				paths = append(append(paths, adminPages...), adminAPIs...)
			}
			for _, p := range paths {
				leaks(u.role+" "+p, read(p), all)
			}
			for _, p := range definitionViews {
				body := read(p)
				if u.role == models.RoleAdmin {
					leaks(u.role+" "+p, body, append(append([]string{}, inputCanaries...), slackC, teamsC, dsnC))
				} else {
					leaks(u.role+" "+p, body, all)
				}
			}
		}
	})
}

// bodiesOf drops the request lines (method and URL) of a recorder's requests: the webhook's
// own URL is where the message went, not what it says.
func bodiesOf(requests string) string {
	var b strings.Builder
	for _, line := range strings.Split(requests, "\n") {
		if _, rest, ok := strings.Cut(line, " map["); ok {
			b.WriteString(rest)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
