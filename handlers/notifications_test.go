package handlers_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"lifeline/handlers"
	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/auth"
	"lifeline/services/definition"
	"lifeline/services/notify"
	"lifeline/services/notify/email"
	"lifeline/services/notify/slack"
	"lifeline/services/outbound"
	"lifeline/services/redact"
	"lifeline/services/secrets"
	"lifeline/services/steps"
	"lifeline/services/workflows"
	"lifeline/views/i18n"
)

// notifApp is the app with the notification service (and no queue: the test dispatches).
type notifApp struct {
	*app
	ns   *notify.Service
	sink *email.Sink
	wfs  *workflows.Service
}

func newNotifApp(t *testing.T, db *models.DB) *notifApp {
	t.Helper()
	spec, _ := secrets.NewKeySpec("test")
	ring, err := secrets.ParseRing(spec)
	if err != nil {
		t.Fatal(err)
	}
	db.Sealer = secrets.JSONSealer{Ring: ring, IsSecret: redact.New(nil).Match}
	sink, err := email.StartSink("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	ns := notify.New(db, notify.Config{Texts: i18n.Catalog{}, BaseURL: "http://lifeline.test", Allow: allow, Senders: map[notify.Channel]notify.Sender{
		notify.Email: email.New(sink.Config("lifeline@lifeline.test")),
		notify.Slack: slack.New(outbound.NewClient(outbound.Options{Allow: allow, Timeout: 5 * time.Second})),
	}})
	as := &auth.Service{DB: db, Params: fastHash}
	a := &app{t: t, db: db, as: as}
	wfs := &workflows.Service{DB: db, Steps: steps.Builtins(outbound.NewClient(outbound.Options{Allow: allow})),
		Checks: []definition.Check{workflows.NotificationsCheck(ns)}}
	a.srv = httptest.NewServer(handlers.New(handlers.Deps{DB: db, Auth: as, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		BaseURL: "http://lifeline.test", Notify: ns, Workflows: wfs, LoginThrottle: &auth.Throttle{PerAddress: 10000, PerAccountNetwork: 10000, PerAccount: 10000}}))
	t.Cleanup(a.srv.Close)
	return &notifApp{app: a, ns: ns, sink: sink, wfs: wfs}
}

type notifTenant struct {
	org, wf, exec                         string
	adminToken, accountantToken, viewerTk string
	admin, accountant, viewer             *tenant
}

func (a *notifApp) tenant(name string) *notifTenant {
	t := a.t
	t.Helper()
	ctx := context.Background()
	org, err := a.as.CreateOrg(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	nt := &notifTenant{org: org.ID, wf: models.NewID(), exec: models.NewID()}
	slug := strings.ToLower(strings.ReplaceAll(name, " ", ""))
	for _, u := range []struct {
		role string
		dst  **tenant
	}{{models.RoleAdmin, &nt.admin}, {models.RoleAccountant, &nt.accountant}, {models.RoleViewer, &nt.viewer}} {
		tn := &tenant{org: org.ID, email: u.role + "@" + slug + ".pl", password: "correct horse battery"}
		if _, err := a.as.CreateUser(ctx, org.ID, tn.email, tn.password, u.role); err != nil {
			t.Fatal(err)
		}
		*u.dst = tn
	}
	for role, dst := range map[string]*string{models.RoleAdmin: &nt.adminToken, models.RoleAccountant: &nt.accountantToken, models.RoleViewer: &nt.viewerTk} {
		if *dst, _, err = a.as.CreateToken(ctx, org.ID, role, role); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	if err := a.db.Conn(ctx).Create(&models.Workflow{ID: nt.wf, OrganizationID: org.ID, Name: "Deklaracja VAT", Version: 1, Definition: models.JSON(`{}`),
		UnknownErrors: "retry", WebhookToken: models.NewID(), WebhookSecret: "x", CreatedAt: now, UpdatedAt: now}).Error; err != nil {
		t.Fatal(err)
	}
	if err := a.db.Conn(ctx).Create(&models.Execution{ID: nt.exec, OrganizationID: org.ID, WorkflowID: nt.wf, WorkflowVersion: 1, Status: models.ExecDLQPending,
		Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: now, UpdatedAt: now}).Error; err != nil {
		t.Fatal(err)
	}
	return nt
}

func TestNotificationsAPI(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newNotifApp(t, db)
		nt := a.tenant("Biuro Powiadomienia")
		other := a.tenant("Biuro Obce")
		api := a.srv.URL + "/api/v1/notifications"
		var mu sync.Mutex
		var posts []string
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			posts = append(posts, string(b))
			mu.Unlock()
		}))
		defer hook.Close()
		secretURL := hook.URL + "/services/T1/B1/sekret-hook"

		// Admins only, for settings, tests, the delivery log and resend.
		for _, tok := range []string{nt.accountantToken, nt.viewerTk} {
			for _, m := range []struct{ method, path, body string }{{"GET", "/settings", ""}, {"PUT", "/settings", `{}`}, {"POST", "/test", `{"channel": "email"}`},
				{"GET", "/deliveries", ""}, {"POST", "/deliveries/" + models.NewID() + "/resend", ""}} {
				if r := do(t, http.DefaultClient, m.method, api+m.path, m.body, bearer(tok)); r.status != http.StatusForbidden {
					t.Errorf("%s %s below admin: %d", m.method, m.path, r.status)
				}
			}
		}

		r := do(t, http.DefaultClient, "GET", api+"/settings", "", bearer(nt.adminToken))
		if s := r.json(t); r.status != 200 || s["enabled"] != true || fmt.Sprint(s["channels"]) != "[email app]" || s["notifyOnDLQ"] != true ||
			s["notifyOnBreakerOpen"] != false || s["digestThresholdPerMinute"] != float64(10) {
			t.Errorf("defaults: %d %s", r.status, r.body)
		}
		r = do(t, http.DefaultClient, "PUT", api+"/settings", `{"channels": ["email", "pager"], "slackWebhookUrl": "https://169.254.169.254/latest", "teamsWebhookUrl": "https://0x0a000001/x", "recipients": ["role:boss"], "digestThresholdPerMinute": 0}`, bearer(nt.adminToken))
		f := fieldsOf(t, r)
		for _, k := range []string{"channels", "slackWebhookUrl", "teamsWebhookUrl", "recipients[0]", "digestThresholdPerMinute"} {
			if f[k] == nil {
				t.Errorf("422 lacks %s: %d %s", k, r.status, r.body)
			}
		}
		if r.status != 422 {
			t.Errorf("invalid settings: %d", r.status)
		}
		r = do(t, http.DefaultClient, "PUT", api+"/settings", fmt.Sprintf(`{"channels": ["email", "app", "slack"], "slackWebhookUrl": %q, "recipients": ["role:admin", "role:accountant"]}`, secretURL), bearer(nt.adminToken))
		if r.status != 200 || strings.Contains(r.body, "sekret") || !strings.Contains(r.body, `"slackWebhookUrl":"http://127.0.0.1:`) {
			t.Fatalf("save: %d %s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "GET", api+"/settings", "", bearer(nt.adminToken)); strings.Contains(r.body, "sekret") {
			t.Errorf("settings show the webhook URL: %s", r.body)
		}

		// Test messages: success, or the exact error; a channel without a webhook is 422.
		if r := do(t, http.DefaultClient, "POST", api+"/test", `{"channel": "slack"}`, bearer(nt.adminToken)); r.status != 200 || r.json(t)["ok"] != true {
			t.Errorf("test slack: %d %s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "POST", api+"/test", `{"channel": "teams"}`, bearer(nt.adminToken)); r.status != 422 {
			t.Errorf("test teams without a webhook: %d %s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "POST", api+"/test", `{"channel": "sms"}`, bearer(nt.adminToken)); r.status != 422 {
			t.Errorf("test an unknown channel: %d %s", r.status, r.body)
		}

		// A dead letter: its deliveries in the log, sent.
		ev := notify.Event{Kind: notify.DLQ, OrganizationID: nt.org, WorkflowID: nt.wf, WorkflowName: "Deklaracja VAT", ExecutionID: nt.exec,
			StepID: "file", ErrorType: "validation", Reason: "nip: NIP must have 10 digits"}
		if err := db.Tx(context.Background(), func(tx *gorm.DB) error { return a.ns.Emit(tx, ev) }); err != nil {
			t.Fatal(err)
		}
		if _, err := a.ns.Dispatch(context.Background()); err != nil {
			t.Fatal(err)
		}
		r = do(t, http.DefaultClient, "GET", api+"/deliveries?executionId="+nt.exec, "", bearer(nt.adminToken))
		items, _ := r.json(t)["items"].([]any)
		if r.status != 200 || len(items) != 5 { // email ×2, app ×2, slack
			t.Fatalf("deliveries: %d %s", r.status, r.body)
		}
		var slackID string
		for _, it := range items {
			d := it.(map[string]any)
			for _, k := range []string{"id", "channel", "recipient", "event", "status", "attempts", "lastError"} {
				if _, ok := d[k]; !ok {
					t.Errorf("delivery lacks %s: %v", k, d)
				}
			}
			if d["status"] != "sent" || d["event"] != "dlq" || strings.Contains(fmt.Sprint(d["recipient"]), "sekret") {
				t.Errorf("delivery %v", d)
			}
			if d["channel"] == "slack" {
				slackID = d["id"].(string)
			}
		}
		// Another organization: 404 for the execution and the delivery; its own log is empty.
		if r := do(t, http.DefaultClient, "GET", api+"/deliveries?executionId="+nt.exec, "", bearer(other.adminToken)); r.status != 404 {
			t.Errorf("another organization's execution: %d %s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "POST", api+"/deliveries/"+slackID+"/resend", "", bearer(other.adminToken)); r.status != 404 {
			t.Errorf("another organization's resend: %d", r.status)
		}
		if r := do(t, http.DefaultClient, "GET", api+"/deliveries", "", bearer(other.adminToken)); r.status != 200 || strings.Contains(r.body, nt.exec) {
			t.Errorf("another organization's log: %d %s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "POST", api+"/deliveries/"+slackID+"/resend", "", bearer(nt.adminToken)); r.status != 202 {
			t.Errorf("resend: %d %s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "POST", api+"/deliveries/"+slackID+"/resend", "", bearer(nt.adminToken)); r.status != 409 {
			t.Errorf("resend while pending: %d %s", r.status, r.body)
		}
		if _, err := a.ns.Dispatch(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(posts) != 3 { // the test, the dead letter, the resend
			t.Errorf("slack posts: %d", len(posts))
		}
		mu.Unlock()

		// In-app: the accountant sees it (browser session, CSRF), the viewer does not.
		acc, csrf := a.browser(nt.accountant)
		r = do(t, acc, "GET", api, "", nil)
		in := r.json(t)
		list, _ := in["items"].([]any)
		if r.status != 200 || in["unread"] != float64(1) || len(list) != 1 {
			t.Fatalf("accountant's notifications: %d %s", r.status, r.body)
		}
		nid := list[0].(map[string]any)["id"].(string)
		if link := list[0].(map[string]any)["link"]; link != "http://lifeline.test/executions/"+nt.exec {
			t.Errorf("link %v", link)
		}
		viewer, vcsrf := a.browser(nt.viewer)
		if r := do(t, viewer, "GET", api, "", nil); r.json(t)["unread"] != float64(0) {
			t.Errorf("viewer's notifications: %s", r.body)
		}
		if r := do(t, viewer, "POST", api+"/"+nid+"/read", "", map[string]string{"X-CSRF-Token": vcsrf}); r.status != 404 {
			t.Errorf("the viewer marked the accountant's notification: %d", r.status)
		}
		if r := do(t, acc, "POST", api+"/"+nid+"/read", "", nil); r.status != 403 {
			t.Errorf("a browser post without CSRF: %d", r.status)
		}
		if r := do(t, acc, "POST", api+"/"+nid+"/read", "", map[string]string{"X-CSRF-Token": csrf}); r.status != 204 {
			t.Errorf("read: %d %s", r.status, r.body)
		}
		if r := do(t, acc, "GET", api, "", nil); r.json(t)["unread"] != float64(0) {
			t.Errorf("after read: %s", r.body)
		}
		if r := do(t, acc, "POST", api+"/read-all", "", map[string]string{"X-CSRF-Token": csrf}); r.status != 200 || r.json(t)["marked"] != float64(0) {
			t.Errorf("read-all: %d %s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "GET", api, "", bearer(other.adminToken)); r.status != 200 || r.json(t)["unread"] != float64(0) {
			t.Errorf("a token's notifications: %d %s", r.status, r.body)
		}
		if len(a.sink.Messages()) != 2 {
			t.Errorf("emails: %d", len(a.sink.Messages()))
		}
	})
}
