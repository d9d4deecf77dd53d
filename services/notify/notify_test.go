package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/quotedprintable"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/notify"
	"lifeline/services/notify/email"
	"lifeline/services/notify/slack"
	"lifeline/services/notify/teams"
	"lifeline/services/outbound"
	"lifeline/services/redact"
	"lifeline/services/secrets"
	"lifeline/views/i18n"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// org is an organization with an admin (English), an accountant (the org's Polish) and a
// viewer, in Europe/Warsaw.
type org struct {
	id, wf                    string
	admin, accountant, viewer models.User
}

func str(s string) *string { return &s }

func newOrg(t *testing.T, db *models.DB, name string) org {
	t.Helper()
	o := org{id: models.NewID(), wf: models.NewID()}
	ctx := context.Background()
	if err := db.Conn(ctx).Create(&models.Organization{ID: o.id, Name: name, DefaultLanguage: str("pl"), TimeZone: str("Europe/Warsaw"), CreatedAt: time.Now().UTC()}).Error; err != nil {
		t.Fatal(err)
	}
	slug := strings.ToLower(strings.ReplaceAll(name, " ", ""))
	mk := func(role string, lang *string) models.User {
		u := models.User{ID: models.NewID(), Email: role + "@" + slug + ".pl", Name: role, PasswordHash: "x", Language: lang, CreatedAt: time.Now().UTC()}
		if err := db.Conn(ctx).Create(&u).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Conn(ctx).Create(&models.Membership{ID: models.NewID(), OrganizationID: o.id, UserID: u.ID, Role: role, CreatedAt: time.Now().UTC()}).Error; err != nil {
			t.Fatal(err)
		}
		return u
	}
	o.admin = mk(models.RoleAdmin, str("en"))
	o.accountant = mk(models.RoleAccountant, nil)
	o.viewer = mk(models.RoleViewer, nil)
	return o
}

// seal seals secrets at rest as `lifeline serve` does.
func seal(t *testing.T, db *models.DB) {
	spec, err := secrets.NewKeySpec("test")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := secrets.ParseRing(spec)
	if err != nil {
		t.Fatal(err)
	}
	db.Sealer = secrets.JSONSealer{Ring: ring, IsSecret: redact.New(nil).Match}
}

// receiver is a loopback webhook that records bodies and answers with the next status.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   [][]byte
	statuses []int // answered in turn; the last one repeats
}

func newReceiver(t *testing.T, ok int, statuses ...int) *receiver {
	r := &receiver{statuses: append(statuses, ok)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, b)
		st := r.statuses[0]
		if len(r.statuses) > 1 {
			r.statuses = r.statuses[1:]
		}
		r.mu.Unlock()
		if st == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "30")
		}
		w.WriteHeader(st)
		if st == 200 {
			_, _ = io.WriteString(w, "ok")
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

type env struct {
	db   *models.DB
	svc  *notify.Service
	clk  *clock
	sink *email.Sink
	org  org
	// outcomes counts what Config.Delivered was told, by "channel outcome".
	outcomes *outcomes
}

type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) add(channel, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[channel+" "+outcome]++
}

func (o *outcomes) get() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.n)
}

func newEnv(t *testing.T, db *models.DB) *env {
	t.Helper()
	seal(t, db)
	sink, err := email.StartSink("127.0.0.1:0", &email.Sink{Users: map[string]string{"lifeline": "smtp-haslo"},
		RejectRcpt: func(to string) bool { return strings.HasPrefix(to, "nobody@") }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	client := outbound.NewClient(outbound.Options{Allow: loopback, Timeout: 5 * time.Second})
	tm := teams.New(client)
	tm.SkipURLCheck = true
	clk := &clock{t: time.Date(2026, 11, 23, 9, 0, 10, 0, time.UTC)}
	outs := &outcomes{n: map[string]int{}}
	svc := notify.New(db, notify.Config{Texts: i18n.Catalog{}, BaseURL: "https://lifeline.example.pl/", Allow: loopback, Now: clk.Now,
		Delivered: outs.add,
		Senders: map[notify.Channel]notify.Sender{
			notify.Email: email.New(withLogin(sink.Config("Lifeline <alerts@lifeline.example.pl>"), "lifeline", "smtp-haslo")),
			notify.Slack: slack.New(client), notify.Teams: tm,
		}})
	return &env{db: db, svc: svc, clk: clk, sink: sink, org: newOrg(t, db, "Biuro Nowak"), outcomes: outs}
}

func (e *env) settings(t *testing.T, orgID, raw string) {
	t.Helper()
	if _, err := e.svc.SaveOrgSettings(context.Background(), orgID, audit.System, []byte(raw)); err != nil {
		t.Fatalf("save settings %s: %v", raw, err)
	}
}

func (e *env) emit(t *testing.T, ev notify.Event) {
	t.Helper()
	if err := e.db.Tx(context.Background(), func(tx *gorm.DB) error { return e.svc.Emit(tx, ev) }); err != nil {
		t.Fatalf("emit: %v", err)
	}
}

func (e *env) dispatch(t *testing.T) int {
	t.Helper()
	n, err := e.svc.Dispatch(context.Background())
	if err != nil {
		t.Fatalf("dispatch: %v", err)
	}
	return n
}

func (e *env) deliveries(t *testing.T) []models.NotificationDelivery {
	t.Helper()
	var ds []models.NotificationDelivery
	if err := e.db.Conn(context.Background()).Order("channel, recipient, created_at").Find(&ds).Error; err != nil {
		t.Fatal(err)
	}
	return ds
}

func (e *env) dlqEvent(exec string) notify.Event {
	return notify.Event{Kind: notify.DLQ, OrganizationID: e.org.id, WorkflowID: e.org.wf, WorkflowName: "Deklaracja VAT",
		ExecutionID: exec, Subject: "Kowalski sp. z o.o. · 2026-10", StepID: "file", StepName: "Wyślij do bramki",
		ErrorType: "validation", ErrorCode: "HTTP_400", Reason: "nip: NIP must have 10 digits (400 Bad Request)\n\tat stack.go:12",
		RetriesExhausted: true, At: e.clk.Now()}
}

func TestNotifyEveryChannel(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newEnv(t, db)
		other := newOrg(t, db, "Biuro Obce")
		sl := newReceiver(t, 200)
		tm := newReceiver(t, 202)
		e.settings(t, e.org.id, fmt.Sprintf(`{"channels": ["email", "app", "slack", "teams"], "slackWebhookUrl": %q, "teamsWebhookUrl": %q}`,
			sl.URL+"/services/T1/B1/x", tm.URL+"/workflows/1"))
		exec := models.NewID()
		ev := e.dlqEvent(exec)
		// The workflow turns DLQ messages off but keeps retry-exhausted ones: one message.
		ev.Settings = json.RawMessage(`{"notifyOnDLQ": false, "notifyOnRetryExhausted": true}`)
		e.emit(t, ev)
		e.emit(t, ev) // the same failure again: recorded once

		ds := e.deliveries(t)
		if len(ds) != 6 { // email ×2 (admin, accountant), app ×2, slack, teams
			t.Fatalf("deliveries: %d %+v", len(ds), ds)
		}
		for _, d := range ds {
			if d.Target != "" || (d.SealedTarget != nil && strings.Contains(*d.SealedTarget, "127.0.0.1")) {
				t.Errorf("webhook URL stored in clear: %v", *d.SealedTarget)
			}
		}
		if n := e.dispatch(t); n != 6 {
			t.Fatalf("dispatched %d", n)
		}
		for _, d := range e.deliveries(t) {
			if d.Status != models.DeliverySent || d.Attempts != 1 || d.SentAt == nil {
				t.Errorf("%s %s: %s after %d attempts (%v)", d.Channel, d.Recipient, d.Status, d.Attempts, d.LastError)
			}
		}
		if n := e.dispatch(t); n != 0 {
			t.Errorf("sent again: %d", n)
		}

		// Email: the admin in English, the accountant in the organization's Polish; both parts; the link.
		msgs := e.sink.Messages()
		if len(msgs) != 2 {
			t.Fatalf("emails: %d", len(msgs))
		}
		link := "https://lifeline.example.pl/executions/" + exec
		byTo := map[string]string{}
		for _, m := range msgs {
			if len(m.To) != 1 || m.User != "lifeline" || m.From != "alerts@lifeline.example.pl" {
				t.Errorf("envelope %v from %s as %q", m.To, m.From, m.User)
			}
			byTo[m.To[0]] = string(m.Data)
		}
		en, pl := byTo[e.org.admin.Email], byTo[e.org.accountant.Email]
		for _, c := range []struct {
			mail  string
			wants []string
		}{
			{en, []string{"Subject: An execution of workflow “Deklaracja VAT” went to the dead-letter queue", "text/plain", "text/html", "Reason", "Kowalski sp. z o.o.", "23 Nov 2026, 10:00:10 CET", "Content-Language: en", "Validation"}},
			{pl, []string{"Subject: Wykonanie przepływu „Deklaracja VAT” trafiło do kolejki DLQ", "text/plain", "text/html", "Przyczyna", "Walidacja", "23 lis 2026, 10:00:10 CET", "Content-Language: pl"}},
		} {
			body := decodeQP(c.mail)
			if m, err := mail.ReadMessage(strings.NewReader(c.mail)); err == nil {
				subj, _ := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
				body = "Subject: " + subj + "\n" + body
			}
			for _, w := range append(c.wants, link, "Deklaracja VAT", e.org.wf, "Wyślij do bramki", "HTTP_400") {
				if !strings.Contains(c.mail, w) && !strings.Contains(body, w) {
					t.Errorf("email lacks %q:\n%s", w, c.mail)
				}
			}
			if strings.Contains(body, "stack.go") {
				t.Errorf("email carries a stack trace")
			}
		}
		if byTo[e.org.viewer.Email] != "" {
			t.Error("the viewer got an email")
		}

		// Slack: Block Kit with a button to the execution.
		var sp struct {
			Text   string `json:"text"`
			Blocks []struct {
				Type     string `json:"type"`
				Elements []struct {
					Type string `json:"type"`
					URL  string `json:"url"`
				} `json:"elements"`
			} `json:"blocks"`
		}
		if got := sl.got(); len(got) != 1 || json.Unmarshal(got[0], &sp) != nil {
			t.Fatalf("slack got %q", got)
		}
		if sp.Text == "" || len(sp.Blocks) < 3 || sp.Blocks[0].Type != "header" || sp.Blocks[len(sp.Blocks)-1].Type != "actions" ||
			sp.Blocks[len(sp.Blocks)-1].Elements[0].Type != "button" || sp.Blocks[len(sp.Blocks)-1].Elements[0].URL != link {
			t.Errorf("slack payload: %s", sl.got()[0])
		}
		// Teams: an Adaptive Card in a message envelope.
		var tp struct {
			Type        string `json:"type"`
			Attachments []struct {
				ContentType string `json:"contentType"`
				Content     struct {
					Type    string `json:"type"`
					Body    []map[string]any
					Actions []struct{ Type, URL string }
				} `json:"content"`
			} `json:"attachments"`
		}
		if got := tm.got(); len(got) != 1 || json.Unmarshal(got[0], &tp) != nil {
			t.Fatalf("teams got %q", got)
		}
		if tp.Type != "message" || len(tp.Attachments) != 1 || tp.Attachments[0].ContentType != "application/vnd.microsoft.card.adaptive" ||
			tp.Attachments[0].Content.Type != "AdaptiveCard" || len(tp.Attachments[0].Content.Actions) != 1 ||
			tp.Attachments[0].Content.Actions[0].Type != "Action.OpenUrl" || tp.Attachments[0].Content.Actions[0].URL != link {
			t.Errorf("teams payload: %s", tm.got()[0])
		}
		if !strings.Contains(string(tm.got()[0]), "FactSet") {
			t.Errorf("teams card without facts: %s", tm.got()[0])
		}

		// In-app: the admin and the accountant, nobody else, nobody of the other organization.
		ctx := context.Background()
		for _, c := range []struct {
			org, user string
			want      int
			title     string
		}{{e.org.id, e.org.admin.ID, 1, "An execution of workflow “Deklaracja VAT”"}, {e.org.id, e.org.accountant.ID, 1, "Wykonanie przepływu „Deklaracja VAT”"},
			{e.org.id, e.org.viewer.ID, 0, ""}, {other.id, other.admin.ID, 0, ""}, {other.id, e.org.admin.ID, 0, ""}} {
			items, unread, err := e.svc.Inbox(ctx, c.org, c.user, 10)
			if err != nil || len(items) != c.want || unread != int64(c.want) {
				t.Errorf("inbox of %s: %d items, %d unread, %v", c.user, len(items), unread, err)
				continue
			}
			if c.want == 1 && (!strings.HasPrefix(items[0].Title, c.title) || items[0].Link != link) {
				t.Errorf("in-app %+v", items[0])
			}
		}
		items, _, _ := e.svc.Inbox(ctx, e.org.id, e.org.admin.ID, 10)
		if err := e.svc.MarkRead(ctx, other.id, other.admin.ID, items[0].ID); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("another organization's user marked it read: %v", err)
		}
		if err := e.svc.MarkRead(ctx, e.org.id, e.org.admin.ID, items[0].ID); err != nil {
			t.Fatal(err)
		}
		if _, unread, _ := e.svc.Inbox(ctx, e.org.id, e.org.admin.ID, 10); unread != 0 {
			t.Errorf("unread after read: %d", unread)
		}
		if n, err := e.svc.MarkAllRead(ctx, e.org.id, e.org.accountant.ID); n != 1 || err != nil {
			t.Errorf("read-all: %d %v", n, err)
		}
	})
}

// decodeQP undoes quoted-printable soft breaks so texts can be searched.
func decodeQP(s string) string {
	b, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(s)))
	if err != nil {
		return s
	}
	return string(b)
}

func TestEmitRules(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newEnv(t, db)
		e.settings(t, e.org.id, `{"channels": ["app"], "recipients": ["role:admin"]}`)
		count := func() int { return len(e.deliveries(t)) }
		cases := []struct {
			name     string
			kind     notify.Kind
			settings string
			extra    func(*notify.Event)
			want     int
		}{
			{"first failure off by default", notify.FirstFailure, "", nil, 0},
			{"first failure on", notify.FirstFailure, `{"notifyOnFirstFailure": true}`, nil, 1},
			{"retry exhausted on by default", notify.RetryExhausted, "", nil, 1},
			{"dlq", notify.DLQ, "", nil, 1},
			{"dlq off", notify.DLQ, `{"notifyOnDLQ": false}`, nil, 0},
			{"dlq off but retries exhausted", notify.DLQ, `{"notifyOnDLQ": false}`, func(ev *notify.Event) { ev.RetriesExhausted = true }, 1},
			{"disabled", notify.DLQ, `{"enabled": false}`, nil, 0},
			{"breaker off by default", notify.BreakerOpened, "", func(ev *notify.Event) { ev.BreakerID = "api.ksef.gov.pl" }, 0},
			{"breaker on", notify.BreakerOpened, `{"notifyOnBreakerOpen": true}`, func(ev *notify.Event) { ev.BreakerID = "api.ksef.gov.pl" }, 1},
			{"compensation even when disabled", notify.Compensation, `{"enabled": false}`, func(ev *notify.Event) { ev.Message = "Cofnięto księgowanie" }, 1},
			{"workflow recipients", notify.DLQ, `{"recipients": ["role:accountant", "role:viewer", "biuro@nowak.pl"]}`, nil, 2},
			{"workflow channels: email to roles and addresses", notify.DLQ, `{"channels": ["email"], "recipients": ["role:admin", "szef@nowak.pl"]}`, nil, 2},
		}
		for i, c := range cases {
			before := count()
			ev := e.dlqEvent(models.NewID())
			ev.Kind, ev.RetriesExhausted, ev.At = c.kind, false, e.clk.Now().Add(time.Duration(i)*time.Minute)
			if c.settings != "" {
				ev.Settings = json.RawMessage(c.settings)
			}
			if c.extra != nil {
				c.extra(&ev)
			}
			e.emit(t, ev)
			if got := count() - before; got != c.want {
				t.Errorf("%s: %d deliveries, want %d", c.name, got, c.want)
			}
		}
	})
}

func TestRetryAfterAndPermanentFailures(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newEnv(t, db)
		sl := newReceiver(t, 200, 429) // 429 with Retry-After: 30, then 200
		tm := newReceiver(t, 404)      // the Teams workflow was deleted
		e.settings(t, e.org.id, fmt.Sprintf(`{"channels": ["slack", "teams", "email"], "recipients": ["nobody@nowak.pl"], "slackWebhookUrl": %q, "teamsWebhookUrl": %q}`,
			sl.URL, tm.URL))
		e.emit(t, e.dlqEvent(models.NewID()))
		e.dispatch(t)
		by := func() map[string]models.NotificationDelivery {
			out := map[string]models.NotificationDelivery{}
			for _, d := range e.deliveries(t) {
				out[d.Channel] = d
			}
			return out
		}
		ds := by()
		if d := ds["slack"]; d.Status != models.DeliveryPending || d.Attempts != 1 || !d.NextAttemptAt.Equal(e.clk.Now().Add(30*time.Second)) ||
			d.LastError == nil || !strings.Contains(*d.LastError, "429") {
			t.Errorf("slack after 429: %s, %d attempts, next %v, %v", d.Status, d.Attempts, d.NextAttemptAt, d.LastError)
		}
		if d := ds["teams"]; d.Status != models.DeliveryFailed || d.Attempts != 1 || d.LastError == nil || !strings.Contains(*d.LastError, "404") {
			t.Errorf("teams after 404: %s, %d attempts, %v", d.Status, d.Attempts, d.LastError)
		}
		if d := ds["email"]; d.Status != models.DeliveryFailed || d.Attempts != 1 || d.LastError == nil || !strings.Contains(*d.LastError, "550") {
			t.Errorf("email to a rejected address: %s, %d attempts, %v", d.Status, d.Attempts, d.LastError)
		}
		// Each recorded outcome is told once (lifeline_notification_deliveries_total).
		if got, want := e.outcomes.get(), map[string]int{"slack pending": 1, "teams failed": 1, "email failed": 1}; !maps.Equal(got, want) {
			t.Errorf("outcomes told: %v, want %v", got, want)
		}
		e.clk.Add(29 * time.Second)
		if n := e.dispatch(t); n != 0 {
			t.Errorf("retried before Retry-After: %d", n)
		}
		e.clk.Add(2 * time.Second)
		if n := e.dispatch(t); n != 1 {
			t.Errorf("not retried after Retry-After: %d", n)
		}
		e.clk.Add(24 * time.Hour)
		e.dispatch(t)
		ds = by()
		if ds["slack"].Status != models.DeliverySent || ds["slack"].Attempts != 2 || len(sl.got()) != 2 {
			t.Errorf("slack: %s after %d attempts, %d posts", ds["slack"].Status, ds["slack"].Attempts, len(sl.got()))
		}
		if len(tm.got()) != 1 {
			t.Errorf("a 404 was retried: %d posts", len(tm.got()))
		}
		if got, want := e.outcomes.get(), map[string]int{"slack pending": 1, "slack sent": 1, "teams failed": 1, "email failed": 1}; !maps.Equal(got, want) {
			t.Errorf("outcomes told: %v, want %v", got, want)
		}

		// Resend: a failed delivery goes again, attempts start over.
		ctx := context.Background()
		if err := e.svc.Resend(ctx, newOrg(t, db, "Biuro Trzecie").id, ds["teams"].ID, audit.System); apperr.ErrorCode(err) != apperr.ENOTFOUND {
			t.Errorf("resend across organizations: %v", err)
		}
		if err := e.svc.Resend(ctx, e.org.id, ds["teams"].ID, audit.System); err != nil {
			t.Fatal(err)
		}
		if err := e.svc.Resend(ctx, e.org.id, ds["teams"].ID, audit.System); apperr.ErrorCode(err) != apperr.ECONFLICT {
			t.Errorf("resend while pending: %v", err)
		}
		e.dispatch(t)
		if len(tm.got()) != 2 {
			t.Errorf("resend did not post: %d", len(tm.got()))
		}
	})
}

// A dispatcher that dies after claiming leaves the delivery "sending"; when its lease ends,
// another sends it with the same dedup key, and once sent it is never sent again.
func TestCrashedDispatcherLeaseExpires(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newEnv(t, db)
		e.settings(t, e.org.id, `{"channels": ["email", "app"], "recipients": ["role:admin"]}`)
		e.emit(t, e.dlqEvent(models.NewID()))
		ctx := context.Background()
		// The crashed worker's claim, as Dispatch leaves it before sending.
		now := e.clk.Now()
		res := db.Conn(ctx).Model(&models.NotificationDelivery{}).Where("status = ?", models.DeliveryPending).
			Updates(map[string]any{"status": models.DeliverySending, "claim_token": "crashed", "lease_until": now.Add(2 * time.Minute), "attempts": 1})
		if res.Error != nil || res.RowsAffected != 2 {
			t.Fatalf("claim: %v %d", res.Error, res.RowsAffected)
		}
		if n := e.dispatch(t); n != 0 {
			t.Fatalf("a leased delivery was taken: %d", n)
		}
		e.clk.Add(2*time.Minute + time.Second)
		// Two dispatchers at once after the lease: each delivery is sent by one of them.
		var wg sync.WaitGroup
		var claimed atomic.Int64
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := e.svc.Dispatch(ctx)
				if err != nil {
					t.Error(err)
				}
				claimed.Add(int64(n))
			}()
		}
		wg.Wait()
		if claimed.Load() != 2 {
			t.Errorf("claimed %d", claimed.Load())
		}
		e.clk.Add(time.Hour)
		e.dispatch(t)
		msgs := e.sink.Messages()
		if len(msgs) != 1 {
			t.Fatalf("emails: %d", len(msgs))
		}
		var d models.NotificationDelivery
		db.Conn(ctx).Where("channel = ?", "email").First(&d)
		if d.Status != models.DeliverySent || d.Attempts != 2 || !strings.Contains(string(msgs[0].Data), email.MessageID(d.DedupKey)) {
			t.Errorf("email delivery %s after %d attempts; Message-ID not from the dedup key", d.Status, d.Attempts)
		}
		// The crashed worker wakes up and records its outcome: its claim is gone.
		res = db.Conn(ctx).Model(&models.NotificationDelivery{}).Where("id = ? AND claim_token = ?", d.ID, "crashed").Update("status", models.DeliveryFailed)
		if res.RowsAffected != 0 {
			t.Error("a stale claim overwrote the outcome")
		}
		var n int64
		db.Conn(ctx).Model(&models.Notification{}).Count(&n)
		if n != 1 {
			t.Errorf("in-app notifications: %d", n)
		}
	})
}

func TestStormBecomesDigest(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newEnv(t, db)
		e.settings(t, e.org.id, `{"channels": ["email"], "recipients": ["szef@nowak.pl"], "digestThresholdPerMinute": 3}`)
		var execs []string
		for i := range 8 {
			ev := e.dlqEvent(models.NewID())
			ev.At = e.clk.Now().Add(time.Duration(i) * time.Second)
			execs = append(execs, ev.ExecutionID)
			e.emit(t, ev)
		}
		st := map[string]int{}
		for _, d := range e.deliveries(t) {
			st[d.EventKind+"/"+d.Status]++
		}
		if st["dlq/pending"] != 3 || st["dlq/digested"] != 5 || st["digest/pending"] != 1 {
			t.Fatalf("deliveries %v", st)
		}
		if n := e.dispatch(t); n != 3 {
			t.Errorf("sent %d before the minute ends", n)
		}
		e.clk.Add(50 * time.Second) // 09:01:00: a late commit of the minute may still come
		if n := e.dispatch(t); n != 0 {
			t.Errorf("digest sent before its slack: %d", n)
		}
		e.clk.Add(5 * time.Second) // 09:01:05: within 5 s of the end of its minute
		if n := e.dispatch(t); n != 1 {
			t.Errorf("digest not sent within 5 s of the end of its minute: %d", n)
		}
		msgs := e.sink.Messages()
		if len(msgs) != 4 {
			t.Fatalf("emails: %d", len(msgs))
		}
		digest := decodeQP(string(msgs[3].Data))
		if !strings.Contains(digest, "5 kolejnych") || !strings.Contains(digest, execs[7]) || strings.Contains(digest, execs[0]) {
			t.Errorf("digest:\n%s", digest)
		}
		// The next minute starts counting again.
		ev := e.dlqEvent(models.NewID())
		ev.At = e.clk.Now()
		e.emit(t, ev)
		if n := e.dispatch(t); n != 1 {
			t.Errorf("the next minute's first failure: %d", n)
		}
	})
}

func TestWebhookURLsAtSaveAndDial(t *testing.T) {
	t.Parallel()
	refused := []string{
		"http://127.0.0.1/hook", "https://127.0.0.1/hook", "https://2130706433/hook", "https://0x7f.1/hook", "https://0177.0.0.1/hook",
		"https://[::1]/hook", "https://[::ffff:127.0.0.1]/hook", "https://localhost/hook", "https://10.0.0.7/hook", "https://192.168.1.1/hook",
		"https://169.254.169.254/latest/meta-data", "https://[::ffff:a9fe:a9fe]/", "https://0xa9fea9fe/", "https://[64:ff9b::a9fe:a9fe]/",
		"http://hooks.slack.com/services/x", "https://hooks.slack.com.evil.example/services/x", "https://user:pw@hooks.slack.com/services/x",
		"ftp://hooks.slack.com/x", "hooks.slack.com/services/x",
	}
	for _, u := range refused {
		if err := notify.ValidateWebhookURL(notify.Slack, u, nil); err == nil {
			t.Errorf("accepted %s", u)
		}
	}
	// Even an allow list that covers it never opens the metadata address.
	if err := notify.ValidateWebhookURL(notify.Slack, "http://169.254.169.254/", []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}); err == nil {
		t.Error("metadata address accepted through the allow list")
	}
	for _, c := range []struct {
		ch notify.Channel
		u  string
	}{{notify.Slack, "https://hooks.slack.com/services/T0/B0/abc"}, {notify.Teams, "https://prod-12.westeurope.logic.azure.com:443/workflows/1/triggers/manual/paths/invoke?sig=x"},
		{notify.Teams, "https://default1234.environment.api.powerplatform.com/powerautomate/automations/direct/workflows/1"}} {
		if err := notify.ValidateWebhookURL(c.ch, c.u, nil); err != nil {
			t.Errorf("%s refused: %v", c.u, err)
		}
	}
	if err := notify.ValidateWebhookURL(notify.Teams, "https://hooks.slack.com/services/x", nil); err == nil {
		t.Error("a Slack URL for Teams")
	}
	for _, u := range []string{"http://127.0.0.1:8099/hook", "http://localhost:8099/hook", "http://2130706433:8099/"} {
		if err := notify.ValidateWebhookURL(notify.Teams, u, loopback); err != nil {
			t.Errorf("allowed loopback %s refused: %v", u, err)
		}
	}
	// Field messages keyed by the definition's path.
	_, fields := notify.ParseSettings(json.RawMessage(`{"channels": ["email", "sms"], "slackWebhookUrl": "https://0x7f.1/x", "recipients": ["role:boss", "ok@nowak.pl", "nope"], "colour": 1, "enabled": "yes"}`))
	for _, k := range []string{"channels", "slackWebhookUrl", "recipients[0]", "recipients[2]", "colour", "enabled"} {
		if fields["settings.errorNotifications."+k] == "" {
			t.Errorf("no message on %s: %v", k, fields)
		}
	}
	if _, fields := notify.ParseSettings(json.RawMessage(`{"channels": ["slack"], "slackWebhookUrl": ""}`)); fields["settings.errorNotifications.slackWebhookUrl"] == "" {
		t.Errorf("slack without a URL: %v", fields)
	}
	s, fields := notify.ParseSettings(nil)
	if fields != nil || !s.Enabled || len(s.Channels) != 2 || !s.NotifyOnDLQ || !s.NotifyOnRetryExhausted || s.NotifyOnFirstFailure || s.NotifyOnBreakerOpen {
		t.Errorf("defaults %+v %v", s, fields)
	}

	// At dial time: a client without the allow list refuses loopback before connecting.
	hits := newReceiver(t, 200)
	err := slack.New(outbound.NewClient(outbound.Options{})).Send(context.Background(), notify.Message{Channel: notify.Slack, To: hits.URL, Title: "x"})
	var de *notify.DeliveryError
	if !errors.As(err, &de) || !de.Permanent || !errors.Is(err, outbound.ErrDenied) {
		t.Errorf("slack dial to loopback: %v", err)
	}
	tm := teams.New(outbound.NewClient(outbound.Options{}))
	tm.SkipURLCheck = true
	err = tm.Send(context.Background(), notify.Message{Channel: notify.Teams, To: "http://[::ffff:169.254.169.254]:" + strings.Split(hits.URL, ":")[2], Title: "x"})
	if !errors.As(err, &de) || !de.Permanent {
		t.Errorf("teams dial to metadata: %v", err)
	}
	if len(hits.got()) != 0 {
		t.Error("a refused address was reached")
	}
}

func TestSettingsSealedAndMasked(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newEnv(t, db)
		sl := newReceiver(t, 200)
		secret := sl.URL + "/services/T1/B1/sekret-123"
		e.settings(t, e.org.id, fmt.Sprintf(`{"channels": ["slack"], "slackWebhookUrl": %q}`, secret))
		var raw string
		db.Conn(context.Background()).Raw("SELECT slack_webhook_url FROM notification_settings WHERE organization_id = ?", e.org.id).Scan(&raw)
		if strings.Contains(raw, "sekret-123") || !strings.Contains(raw, "enc:") {
			t.Errorf("stored in clear: %s", raw)
		}
		st, err := e.svc.OrgSettings(context.Background(), e.org.id)
		if err != nil || st.SlackWebhookURL != secret || strings.Contains(st.Masked().SlackWebhookURL, "sekret") {
			t.Errorf("settings %+v %v", st.Masked(), err)
		}
		// Saving the masked form back keeps the stored URL.
		e.settings(t, e.org.id, fmt.Sprintf(`{"channels": ["slack"], "slackWebhookUrl": %q, "notifyOnBreakerOpen": true}`, st.Masked().SlackWebhookURL))
		if st, _ := e.svc.OrgSettings(context.Background(), e.org.id); st.SlackWebhookURL != secret || !st.NotifyOnBreakerOpen {
			t.Errorf("after saving the masked URL: %+v", st)
		}
		// A test message reports success, or the exact error.
		if err := e.svc.Test(context.Background(), e.org.id, e.org.admin.ID, notify.Slack); err != nil || len(sl.got()) != 1 {
			t.Errorf("test: %v, %d posts", err, len(sl.got()))
		}
		sl.Close()
		if err := e.svc.Test(context.Background(), e.org.id, e.org.admin.ID, notify.Slack); !errors.Is(err, notify.ErrTestFailed) ||
			!strings.Contains(err.Error(), "slack: failed to post webhook") || strings.Contains(err.Error(), "sekret") {
			t.Errorf("test against a closed receiver: %v", err)
		}
		if err := e.svc.Test(context.Background(), e.org.id, e.org.admin.ID, notify.Email); err != nil || len(e.sink.Messages()) != 1 {
			t.Errorf("test email: %v", err)
		}
	})
}

// withLogin is c with a user name and password.
func withLogin(c email.Config, user, password string) email.Config {
	c.Username, c.Password = user, password
	return c
}

// blockingSender holds every send until released, and tells when one started.
type blockingSender struct {
	started   chan time.Time // each send's deadline (zero: none)
	release   chan struct{}
	mu        sync.Mutex
	sentTimes map[string]int
}

func (b *blockingSender) Send(ctx context.Context, m notify.Message) error {
	dl, _ := ctx.Deadline()
	b.started <- dl
	<-b.release
	b.mu.Lock()
	b.sentTimes[m.Title+m.Text]++
	b.mu.Unlock()
	return nil
}

// TestBatchClaimsOnlyWhatItSends: a dispatcher claims a delivery only when one of its
// senders is free to send it, so a batch slower than a lease never holds claims it has not
// started (another dispatcher would take them over after the lease and both would send);
// each send must end before its lease does.
func TestBatchClaimsOnlyWhatItSends(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		seal(t, db)
		snd := &blockingSender{started: make(chan time.Time, 10), release: make(chan struct{}), sentTimes: map[string]int{}}
		svc := notify.New(db, notify.Config{Texts: i18n.Catalog{}, BaseURL: "https://lifeline.example.pl/", Allow: loopback,
			Senders: map[notify.Channel]notify.Sender{notify.Slack: snd}})
		e := &env{db: db, svc: svc, clk: &clock{t: time.Now()}, org: newOrg(t, db, "Biuro Wsad")}
		e.settings(t, e.org.id, `{"channels": ["slack"], "slackWebhookUrl": "https://hooks.slack.com/services/T0/B0/abcdef123456"}`)
		const n = 6
		for range n {
			ev := e.dlqEvent(models.NewID())
			ev.At = time.Now()
			e.emit(t, ev)
		}
		done := make(chan int)
		go func() {
			k, err := svc.Dispatch(context.Background())
			if err != nil {
				t.Error(err)
			}
			done <- k
		}()
		for range 4 { // four senders busy
			if dl := <-snd.started; dl.IsZero() || time.Until(dl) > 2*time.Minute {
				t.Errorf("a send's deadline %v is not within its lease", dl)
			}
		}
		var sending, pending int64
		db.Conn(context.Background()).Model(&models.NotificationDelivery{}).Where("status = ?", models.DeliverySending).Count(&sending)
		db.Conn(context.Background()).Model(&models.NotificationDelivery{}).Where("status = ?", models.DeliveryPending).Count(&pending)
		if sending != 4 || pending != n-4 {
			t.Fatalf("while four are being sent: %d claimed, %d waiting; want 4 and %d", sending, pending, n-4)
		}
		close(snd.release)
		if k := <-done; k != n {
			t.Fatalf("claimed %d, want %d", k, n)
		}
		for range n - 4 {
			<-snd.started
		}
		var sent int64
		db.Conn(context.Background()).Model(&models.NotificationDelivery{}).Where("status = ?", models.DeliverySent).Count(&sent)
		if sent != n {
			t.Fatalf("sent %d of %d", sent, n)
		}
	})
}

// A storm of 100 failures of one workflow in a minute: the first ones are sent one by one,
// the rest go into one digest that goes out within 5 s of the end of its minute, names every
// one of them and links to the list of exactly them (with their count); a failure of that
// minute recorded after its digest was sent goes into a late digest, not into no message.
func TestDigestNamesEveryFailure(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		sl := newReceiver(t, 200)
		e.settings(t, e.org.id, fmt.Sprintf(`{"channels": ["email", "slack"], "recipients": ["szef@nowak.pl"], "slackWebhookUrl": %q}`, sl.URL+"/services/T1/B1/x"))
		start := e.clk.Now() // 09:00:10
		var execs []string
		for i := range 100 {
			ev := e.dlqEvent(models.NewID())
			ev.At = start.Add(time.Duration(i) * 400 * time.Millisecond)
			execs = append(execs, ev.ExecutionID)
			e.emit(t, ev)
		}
		if n := e.dispatch(t); n != 2*notify.DefaultDigestThreshold {
			t.Fatalf("sent %d one by one, want %d", n, 2*notify.DefaultDigestThreshold)
		}
		e.clk.Add(55 * time.Second) // 09:01:05
		if n := e.dispatch(t); n != 2 {
			t.Fatalf("digests sent within 5 s of the end of their minute: %d, want 2 (email, Slack)", n)
		}
		msgs := e.sink.Messages()
		digest := decodeQP(string(msgs[len(msgs)-1].Data))
		folded := execs[notify.DefaultDigestThreshold:]
		for _, id := range folded {
			if !strings.Contains(digest, id) {
				t.Fatalf("the digest does not name %s:\n%s", id, digest)
			}
		}
		if !strings.Contains(digest, "90 kolejnych") {
			t.Errorf("the digest does not count its 90 failures:\n%s", digest)
		}
		// Its minute as the pages write times, the day and zone said once.
		if !regexp.MustCompile(`Od \d{1,2} \p{L}+ \d{4}, \d\d:\d\d \S+ do \d\d:\d\d przepływ`).MatchString(digest) {
			t.Errorf("the digest's minute:\n%s", digest)
		}
		var dg models.NotificationDelivery
		if err := db.Conn(ctx).Where("event_kind = ? AND channel = ?", "digest", "slack").First(&dg).Error; err != nil {
			t.Fatal(err)
		}
		posts := sl.got()
		if !strings.Contains(string(posts[len(posts)-1]), "https://lifeline.example.pl/notifications/"+dg.ID+"/failures") ||
			!strings.Contains(string(posts[len(posts)-1]), "(90)") {
			t.Errorf("the Slack digest does not link to the list of its 90 failures: %s", posts[len(posts)-1])
		}
		cov, err := e.svc.Covered(ctx, e.org.id, dg.ID)
		if err != nil || len(cov) != len(folded) {
			t.Fatalf("the digest's list: %d failures (%v), want %d", len(cov), err, len(folded))
		}
		for i, c := range cov {
			if c.ExecutionID != folded[i] {
				t.Fatalf("the digest's list %d: %s, want %s", i, c.ExecutionID, folded[i])
			}
		}

		// A commit of the past minute after its digest went out: a late digest names it.
		late := e.dlqEvent(models.NewID())
		late.At = start.Add(49 * time.Second)
		e.emit(t, late)
		e.clk.Add(time.Minute) // 09:02:05
		if n := e.dispatch(t); n != 2 {
			t.Fatalf("late digests sent: %d, want 2", n)
		}
		msgs = e.sink.Messages()
		if !strings.Contains(decodeQP(string(msgs[len(msgs)-1].Data)), late.ExecutionID) {
			t.Errorf("the late failure is named in no message")
		}
	})
}
