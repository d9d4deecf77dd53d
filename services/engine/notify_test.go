package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/quotedprintable"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alexedwards/argon2id"
	"github.com/riverqueue/river"
	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/auth"
	"lifeline/services/definition"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/notify"
	"lifeline/services/notify/email"
	"lifeline/services/notify/slack"
	"lifeline/services/notify/teams"
	"lifeline/services/outbound"
	"lifeline/services/workflows"
)

// qpDecoded undoes quoted-printable encoding so an email's text can be searched.
func qpDecoded(b []byte) string {
	out, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(string(b))))
	if err != nil {
		return string(b)
	}
	return string(out)
}

// hooks is a loopback receiver of Slack and Teams webhooks: the bodies posted to each path.
type hooks struct {
	mu    sync.Mutex
	posts map[string][]string
}

func (h *hooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.posts[r.URL.Path] = append(h.posts[r.URL.Path], string(body))
	h.mu.Unlock()
	if r.URL.Path == "/teams" {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	fmt.Fprint(w, "ok")
}

func (h *hooks) get(path string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.posts[path]...)
}

// TestFailuresAreNotified runs the engine with the notification service and its dispatcher,
// as `lifeline serve` does: an execution that goes to the DLQ after exhausting its retries
// produces exactly one email (to the real SMTP sink), one Slack and one Teams message (to
// loopback receivers) and one in-app notification per admin and accountant; a failure handed
// to a handler, a first failure and a notification compensation are notified as configured.
// The workflow notifies per failure (notifyPer "failure"): the old behaviour, kept.
func TestFailuresAreNotified(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		clock := modeltest.Clock(t, db)
		sink, err := email.StartSink("127.0.0.1:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sink.Close()
		hk := &hooks{posts: map[string][]string{}}
		hookSrv := httptest.NewServer(hk)
		defer hookSrv.Close()
		loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		client := outbound.NewClient(outbound.Options{Allow: loopback, Timeout: 5 * time.Second})
		tm := teams.New(client)
		tm.SkipURLCheck = true
		// The notifier reads the clock the test moves, as the engine does.
		notifier := notify.New(db, notify.Config{Texts: plainTexts{}, BaseURL: "https://lifeline.example", Allow: loopback, Now: clock.Now, Senders: map[notify.Channel]notify.Sender{
			notify.Email: email.New(sink.Config("lifeline@biuro.example")),
			notify.Slack: slack.New(client), notify.Teams: tm}})

		reg := loopbackSteps()
		register, dispatch := jobs.NotifyJobs(notifier, 100*time.Millisecond)
		eng, runner, err := wire(db, testLogger(t), reg,
			engine.Config{LeaseGrace: time.Second, PendingGrace: time.Second, Notifier: notifier},
			jobs.Config{ReconcileEvery: 500 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, TestOnly: true,
				Register: func(w *river.Workers) { register(w) }, Periodic: dispatch})
		if err != nil {
			t.Fatal(err)
		}
		if err := runner.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_ = runner.Stop(sctx)
		}()
		as := &auth.Service{DB: db, Params: &argon2id.Params{Memory: 8 * 1024, Iterations: 1, Parallelism: 1, SaltLength: 16, KeyLength: 32}}
		org, err := as.CreateOrg(ctx, "Biuro Powiadomień")
		if err != nil {
			t.Fatal(err)
		}
		users := map[string]string{}
		for _, role := range []string{models.RoleAdmin, models.RoleAccountant, models.RoleViewer} {
			u, err := as.CreateUser(ctx, org.ID, role+"@biuro.example", "correct horse battery", role)
			if err != nil {
				t.Fatal(err)
			}
			users[role] = u.ID
		}
		svc := newTaskDesk()
		srv := httptest.NewServer(svc)
		defer srv.Close()
		wfs := &workflows.Service{DB: db, Steps: reg, Checks: []definition.Check{workflows.NotificationsCheck(notifier)}}
		settings := fmt.Sprintf(`"errorNotifications": {"channels": ["email", "app", "slack", "teams"], "recipients": ["ksiegowa@biuro.example", "role:admin", "role:accountant"],
		  "slackWebhookUrl": "%[1]s/slack", "teamsWebhookUrl": "%[1]s/teams", "notifyOnFirstFailure": true,
		  "notifyPer": "failure"}`, hookSrv.URL)
		def := fmt.Sprintf(`{"name": "VAT powiadomienia", "settings": {"retryPolicy": {"maxRetries": 1, "initialDelayMs": 1000, "jitterRatio": 0},
		  "circuitBreaker": {"enabled": false}, "subject": "{{ input.client }}", %s},
		  "steps": [{"id": "file", "name": "Wysyłka JPK", "type": "http", "config": {"method": "POST", "url": "%s/bank"}}]}`, settings, srv.URL)
		// The settings are validated at save: a webhook on a private address is refused.
		if _, err := wfs.Create(ctx, org.ID, audit.System, []byte(strings.Replace(def, hookSrv.URL+"/slack", "https://10.0.0.7/slack", 1))); err == nil ||
			!strings.Contains(fmt.Sprint(err.(*apperr.Error).Fields), "settings.errorNotifications.slackWebhookUrl") {
			t.Fatalf("private webhook accepted: %v", err)
		}
		wf, err := wfs.Create(ctx, org.ID, audit.System, []byte(def))
		if err != nil {
			t.Fatal(err, err.(*apperr.Error).Fields)
		}
		ex, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID, Input: []byte(`{"client": "Kwiaciarnia Róża"}`)})
		if err != nil {
			t.Fatal(err)
		}
		var got models.Execution
		for deadline := time.Now().Add(20 * time.Second); got.Status != models.ExecDLQPending; {
			if err := db.Conn(ctx).First(&got, "id = ?", ex.ID).Error; err != nil || time.Now().After(deadline) {
				t.Fatalf("execution %s %v", got.Status, err)
			}
			moveToNextRetry(t, db, clock, ex.ID)
			time.Sleep(50 * time.Millisecond)
		}
		// Two events (first failure, DLQ) × (email to the address and to the admin and accountant
		// the roles name, in-app to those two, slack, teams).
		var ds []models.NotificationDelivery
		for deadline := time.Now().Add(20 * time.Second); ; {
			ds = nil
			db.Conn(ctx).Where("organization_id = ? AND execution_id = ?", org.ID, ex.ID).Order("event_kind, channel, recipient").Find(&ds)
			sent := 0
			for _, d := range ds {
				if d.Status == models.DeliverySent {
					sent++
				}
			}
			if len(ds) == 14 && sent == 14 {
				break
			}
			if time.Now().After(deadline) {
				var rows []string
				for _, d := range ds {
					rows = append(rows, fmt.Sprintf("%s %s %s %s %v", d.EventKind, d.Channel, d.Recipient, d.Status, d.LastError))
				}
				t.Fatalf("deliveries:\n%s", strings.Join(rows, "\n"))
			}
			time.Sleep(100 * time.Millisecond)
		}
		msgs := sink.Messages()
		to := map[string]int{}
		for _, m := range msgs {
			to[strings.Join(m.To, ",")]++
			if body := qpDecoded(m.Data); !strings.Contains(body, "Kwiaciarnia") || !strings.Contains(body, "https://lifeline.example/executions/"+ex.ID) {
				t.Errorf("email to %v lacks the subject or the link", m.To)
			}
		}
		if len(msgs) != 6 || to["ksiegowa@biuro.example"] != 2 || to["admin@biuro.example"] != 2 || to["viewer@biuro.example"] != 0 {
			t.Errorf("emails %d: %v", len(msgs), to)
		}
		if s, tm := hk.get("/slack"), hk.get("/teams"); len(s) != 2 || len(tm) != 2 || !strings.Contains(s[1], "Wysyłka JPK") {
			t.Errorf("slack %d, teams %d", len(s), len(tm))
		}
		var inbox []models.Notification
		db.Conn(ctx).Where("organization_id = ?", org.ID).Find(&inbox)
		for _, n := range inbox {
			if n.UserID == users[models.RoleViewer] {
				t.Error("the viewer got an in-app notification")
			}
		}
		if len(inbox) != 4 {
			t.Errorf("%d in-app notifications, want 2 events × admin and accountant", len(inbox))
		}
		var kinds []string
		for _, d := range ds {
			if d.Channel == string(notify.Slack) {
				kinds = append(kinds, d.EventKind)
			}
		}
		if strings.Join(kinds, ",") != "dlq,first_failure" {
			t.Errorf("email events %v", kinds)
		}
		// In the app only, to admins: a failure handed to a handler after its retries ran out
		// (retry_exhausted), a notification compensation's message, a breaker that opened.
		kindsOf := func(execID string) string {
			var ks []string
			db.Conn(ctx).Model(&models.NotificationDelivery{}).Where("execution_id = ?", execID).Order("event_kind").Pluck("event_kind", &ks)
			return strings.Join(ks, ",")
		}
		appOnly := `"errorNotifications": {"channels": ["app"], "recipients": ["role:admin"], "notifyOnBreakerOpen": true}`
		more, err := wfs.Create(ctx, org.ID, audit.System, []byte(fmt.Sprintf(`{"name": "Wyciągi", "settings": {"retryPolicy": {"maxRetries": 1, "initialDelayMs": 1000, "jitterRatio": 0},
		  "circuitBreaker": {"failureThreshold": 2, "resetTimeoutMs": 60000}, "rollbackOnFailure": true, %s},
		  "steps": [
		    {"id": "import", "type": "http", "config": {"method": "POST", "url": "%[2]s/ok"},
		     "compensation": {"compensationType": "notification", "config": {"message": "Wycofano import {{ input.n }}"}}},
		    {"id": "post", "type": "http", "config": {"method": "POST", "url": "%[2]s/{{ input.path }}"}, "onFailure": {"byErrorType": {"transient": "task"}}},
		    {"id": "task", "type": "http", "handler": true, "config": {"method": "POST", "url": "%[2]s/task", "body": {"title": "x"}}}]}`, appOnly, srv.URL)))
		if err != nil {
			t.Fatal(err, err.(*apperr.Error).Fields)
		}
		waitFor := func(id string, statuses ...string) {
			t.Helper()
			var ex models.Execution
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				db.Conn(ctx).First(&ex, "id = ?", id)
				if ex.Status == statuses[0] && (len(statuses) == 1 || ex.RollbackStatus != nil && *ex.RollbackStatus == statuses[1]) {
					return
				}
				moveToNextRetry(t, db, clock, id)
				if time.Now().After(deadline) {
					var as []models.StepAttempt
					db.Conn(ctx).Where("execution_id = ?", id).Order("created_at").Find(&as)
					var rows []string
					for _, a := range as {
						rows = append(rows, fmt.Sprintf("%s#%d %s %v %v", a.StepID, a.Attempt, a.Status, deref(a.ErrorCode), deref(a.ErrorMessage)))
					}
					var au []models.AuditEntry
					db.Conn(ctx).Where("organization_id = ?", org.ID).Order("created_at").Find(&au)
					for _, a := range au {
						rows = append(rows, fmt.Sprintf("audit %s %s %s", a.Action, a.EntityID, a.Details))
					}
					var bs []models.CircuitBreaker
					db.Conn(ctx).Find(&bs)
					for _, b := range bs {
						rows = append(rows, fmt.Sprintf("breaker %s %s %d", b.ScopeKey, b.State, b.FailureCount))
					}
					t.Fatalf("execution %s: %s %v\n%s", id, ex.Status, ex.RollbackStatus, strings.Join(rows, "\n"))
				}
			}
		}
		handled, _, _ := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: more.ID, Input: []byte(`{"n": 1, "path": "bank"}`)})
		waitFor(handled.ID, models.ExecPartial)
		// The breaker the handled execution opened is reset before the next one runs.
		var b models.CircuitBreaker
		if err := db.Conn(ctx).Where("organization_id = ?", org.ID).First(&b).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := eng.ActOnBreaker(ctx, engine.BreakerAction{OrganizationID: org.ID, BreakerID: b.ID, Reason: "test"}); err != nil {
			t.Fatal(err)
		}
		rolled, _, _ := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: more.ID, Input: []byte(`{"n": 2, "path": "refuse"}`)})
		waitFor(rolled.ID, models.ExecDLQPending, models.RolledBack)
		if got := kindsOf(handled.ID); got != "breaker_opened,retry_exhausted" {
			t.Errorf("handled execution: %s", got)
		}
		// This workflow keeps the organization's default, per group: its dead letter opens a group.
		if got := kindsOf(rolled.ID); got != "compensation,group_opened" {
			t.Errorf("rolled-back execution: %s", got)
		}
		var msg models.NotificationEvent
		if db.Conn(ctx).Where("execution_id = ? AND kind = ?", rolled.ID, "compensation").First(&msg).Error != nil || !strings.Contains(string(msg.Payload), "Wycofano import 2") {
			t.Errorf("compensation message %s", msg.Payload)
		}

		var payload map[string]any
		var evs []models.NotificationEvent
		db.Conn(ctx).Where("execution_id = ? AND kind = ?", ex.ID, "dlq").Find(&evs)
		if len(evs) != 1 || json.Unmarshal(evs[0].Payload, &payload) != nil || payload["RetriesExhausted"] != true || payload["StepName"] != "Wysyłka JPK" {
			t.Errorf("dlq event %s", evs[0].Payload)
		}
	})
}

// refusedNotifier's Emit makes the database refuse a statement inside the engine's
// transaction (a NOT NULL violation: on PostgreSQL it aborts the transaction).
type refusedNotifier struct{}

func (refusedNotifier) Emit(tx *gorm.DB, _ notify.Event) error {
	return tx.Exec("INSERT INTO notification_events (id) VALUES (NULL)").Error
}

func (refusedNotifier) EmitEscalation(tx *gorm.DB, _ notify.Escalation) error {
	return tx.Exec("INSERT INTO notification_events (id) VALUES (NULL)").Error
}

// TestANotificationNeverAffectsTheWorkflow: a notification the database refuses is rolled
// back alone; the failure, its retry and its dead letter are recorded as without it.
func TestANotificationNeverAffectsTheWorkflow(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		clock := modeltest.Clock(t, db)
		h := newHarnessConfig(t, db, loopbackSteps(), engine.Config{Notifier: refusedNotifier{}})
		svc := &scripted{script: []int{-503}}
		srv := httptest.NewServer(svc)
		defer srv.Close()
		ex := h.start(h.workflow(httpDef(srv.URL, `{"maxRetries": 1, "initialDelayMs": 1000, "jitterRatio": 0}`)), `{"nip": "1"}`)
		if got := h.waitMoving(clock, ex.ID, 10*time.Second); got.Status != models.ExecDLQPending {
			t.Fatalf("status %s", got.Status)
		}
		if n := len(svc.Calls()); n != 2 {
			t.Errorf("%d calls, want the attempt and its retry", n)
		}
		h.deadLetter(ex.ID)
	})
}

// plainTexts are notification texts without views/i18n: a message's id followed by its data,
// so that the values a notification carries (names, links) are all in it. The package's
// benchmarks measure the engine's memory: linking views/i18n into this test binary builds its
// message catalog and compiled formats when the binary starts (about 3 MB of heap that stays,
// 5 MB of resident memory), which the engine never uses. services/notify tests the real texts.
type plainTexts struct{}

func (plainTexts) Text(_, id string, data ...any) string { return id + " " + fmt.Sprint(data...) }
func (plainTexts) Supported(lang string) bool            { return lang == "pl" || lang == "en" }
