package engine_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/notify"
	"lifeline/services/notify/email"
	"lifeline/services/notify/slack"
	"lifeline/services/notify/teams"
	"lifeline/services/outbound"
)

// groupNotifyEnv is an engine with the notification service on the moved clock, an admin
// and an accountant, every channel configured (the real SMTP server, loopback Slack and
// Teams receivers), and the NIP office that refuses every NIP.
type groupNotifyEnv struct {
	h      *harness
	db     *models.DB
	clock  *modeltest.MovableClock
	notify *notify.Service
	sink   *email.Sink
	hooks  *hooks
	admin  string
	wf     *models.Workflow
}

func newGroupNotifyEnv(t *testing.T, db *models.DB, workflowSettings string) *groupNotifyEnv {
	t.Helper()
	ctx := context.Background()
	clock := modeltest.Clock(t, db)
	sink, err := email.StartSink("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	hk := &hooks{posts: map[string][]string{}}
	hookSrv := httptest.NewServer(hk)
	t.Cleanup(hookSrv.Close)
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	client := outbound.NewClient(outbound.Options{Allow: loopback, Timeout: 5 * time.Second})
	tm := teams.New(client)
	tm.SkipURLCheck = true
	svc := notify.New(db, notify.Config{Texts: plainTexts{}, BaseURL: "https://lifeline.example", Allow: loopback, Now: clock.Now,
		Senders: map[notify.Channel]notify.Sender{notify.Email: email.New(sink.Config("lifeline@biuro.example")),
			notify.Slack: slack.New(client), notify.Teams: tm}})
	h := newHarnessConfig(t, db, harnessSteps(), engine.Config{Notifier: svc})
	e := &groupNotifyEnv{h: h, db: db, clock: clock, notify: svc, sink: sink, hooks: hk}
	for _, role := range []string{models.RoleAdmin, models.RoleAccountant} {
		u := models.User{ID: models.NewID(), Email: role + "@grupy.example", Name: role, PasswordHash: "x", CreatedAt: time.Now().UTC()}
		if err := db.Conn(ctx).Create(&u).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Conn(ctx).Create(&models.Membership{ID: models.NewID(), OrganizationID: h.org, UserID: u.ID, Role: role, CreatedAt: time.Now().UTC()}).Error; err != nil {
			t.Fatal(err)
		}
		if role == models.RoleAdmin {
			e.admin = u.ID
		}
	}
	if _, err := svc.SaveOrgSettings(ctx, h.org, audit.System, []byte(fmt.Sprintf(`{"channels": ["email", "app", "slack", "teams"],
	  "recipients": ["role:admin"], "slackWebhookUrl": "%[1]s/slack", "teamsWebhookUrl": "%[1]s/teams"}`, hookSrv.URL))); err != nil {
		t.Fatal(err)
	}
	office := nipOffice()
	t.Cleanup(office.Close)
	def := strings.Replace(httpDef(office.URL, noRetries), `"settings": {`, `"settings": {"subject": "Klient {{ input.nip }}", `+workflowSettings, 1)
	e.wf = h.workflow(def)
	return e
}

// fail runs one execution that the NIP office refuses, to the DLQ, and returns its id.
func (e *groupNotifyEnv) fail(t *testing.T, nip string) string {
	t.Helper()
	ex := e.h.start(e.wf, fmt.Sprintf(`{"nip": %q}`, nip))
	if got := e.h.wait(ex.ID, 20*time.Second); got.Status != models.ExecDLQPending {
		t.Fatalf("%s: %s", nip, got.Status)
	}
	return ex.ID
}

// dispatch sends everything due now.
func (e *groupNotifyEnv) dispatch(t *testing.T) {
	t.Helper()
	for {
		n, err := e.notify.Dispatch(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// sent counts what each channel received: emails, Slack and Teams posts.
func (e *groupNotifyEnv) sent() (int, int, int) {
	return len(e.sink.Messages()), len(e.hooks.get("/slack")), len(e.hooks.get("/teams"))
}

// inbox returns the admin's in-app notifications.
func (e *groupNotifyEnv) inbox(t *testing.T) []models.Notification {
	t.Helper()
	ns, _, err := e.db.Notifications(context.Background(), e.h.org, e.admin, 100)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// events counts the organization's notification events by kind.
func (e *groupNotifyEnv) events(t *testing.T) map[string]int {
	t.Helper()
	var rows []models.NotificationEvent
	if err := e.db.Conn(context.Background()).Where("organization_id = ?", e.h.org).Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Kind]++
	}
	return out
}

// The first failure of a new group notifies once per channel; its further failures update
// the in-app entry's count (one entry per group) and send one follow-up per channel an hour
// later that names exactly them; a muted group notifies nothing; a resolved group that comes
// back notifies again, into the same in-app entry.
func TestGroupNotifications(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		e := newGroupNotifyEnv(t, db, "")
		first := e.fail(t, "526104082")
		opened := e.clock.Now()
		var later []string
		for i := range 4 {
			later = append(later, e.fail(t, fmt.Sprintf("70100021%d", i)))
		}
		e.dispatch(t)
		if m, s, tm := e.sent(); m != 1 || s != 1 || tm != 1 {
			t.Fatalf("after 5 failures of one new group: %d emails, %d Slack, %d Teams; want one each", m, s, tm)
		}
		mail := qpDecoded(e.sink.Messages()[0].Data)
		dl, err := db.DLQForExecution(ctx, e.h.org, first)
		if err != nil || dl == nil || dl.GroupID == nil {
			t.Fatalf("dead letter %+v %v", dl, err)
		}
		group := *dl.GroupID
		if !strings.Contains(mail, "notify.title.group_opened") || !strings.Contains(mail, "https://lifeline.example/dlq/groups/"+group) ||
			!strings.Contains(mail, "NIP") {
			t.Errorf("the group's email does not name the group and link to it:\n%s", mail)
		}
		inbox := e.inbox(t)
		if len(inbox) != 1 || inbox[0].GroupID == nil || *inbox[0].GroupID != group || inbox[0].Occurrences != 5 || inbox[0].ReadAt != nil {
			t.Fatalf("the admin's inbox: %+v, want one unread entry of the group counting 5", inbox)
		}
		if ev := e.events(t); ev["group_opened"] != 1 || ev["group_followup"] != 1 || ev["dlq"] != 0 {
			t.Fatalf("events %v", ev)
		}

		// Half an hour later, two more: no message yet, still one follow-up scheduled.
		e.clock.Advance(30 * time.Minute)
		later = append(later, e.fail(t, "123456789"), e.fail(t, "12345"))
		e.dispatch(t)
		if m, s, tm := e.sent(); m != 1 || s != 1 || tm != 1 {
			t.Fatalf("a follow-up went out within the hour: %d emails, %d Slack, %d Teams", m, s, tm)
		}
		if ev := e.events(t); ev["group_followup"] != 1 {
			t.Fatalf("events %v", ev)
		}
		if inbox := e.inbox(t); len(inbox) != 1 || inbox[0].Occurrences != 7 {
			t.Fatalf("the inbox did not count the new failures in place: %+v", inbox)
		}

		// An hour after the first: one follow-up per channel naming the 6 failures since.
		e.clock.Set(opened.Add(time.Hour + time.Minute + 5*time.Second))
		e.dispatch(t)
		if m, s, tm := e.sent(); m != 2 || s != 2 || tm != 2 {
			t.Fatalf("after the hour: %d emails, %d Slack, %d Teams; want one follow-up each", m, s, tm)
		}
		follow := qpDecoded(e.sink.Messages()[1].Data)
		for _, id := range later {
			if !strings.Contains(follow, id) {
				t.Errorf("the follow-up does not name %s", id)
			}
		}
		if strings.Contains(follow, "/executions/"+first) || !strings.Contains(follow, "notify.title.group_followup") {
			t.Errorf("follow-up:\n%s", follow)
		}
		var fd models.NotificationDelivery
		if err := db.Conn(ctx).Where("organization_id = ? AND event_kind = ? AND channel = ?", e.h.org, "group_followup", "slack").First(&fd).Error; err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(e.hooks.get("/slack")[1], "https://lifeline.example/notifications/"+fd.ID+"/failures") {
			t.Errorf("the Slack follow-up does not link to the list of its failures: %s", e.hooks.get("/slack")[1])
		}
		cov, err := e.notify.Covered(ctx, e.h.org, fd.ID)
		if err != nil || len(cov) != len(later) {
			t.Fatalf("the follow-up stands for %d failures (%v), want %d", len(cov), err, len(later))
		}
		if _, err := e.notify.Covered(ctx, models.NewID(), fd.ID); !models.IsNotFound(err) {
			t.Errorf("another organization reads the follow-up's failures: %v", err)
		}
		if inbox := e.inbox(t); len(inbox) != 1 || inbox[0].ReadAt != nil || inbox[0].Kind != "group_followup" {
			t.Fatalf("the follow-up did not update the one entry: %+v", inbox)
		}

		// Muted: nothing recorded, nothing sent, even past the next hour.
		if err := e.h.eng.Groups().Mute(ctx, e.h.org, group, e.clock.Now().Add(3*time.Hour), audit.System); err != nil {
			t.Fatal(err)
		}
		before := e.events(t)
		e.fail(t, "999")
		e.clock.Advance(2 * time.Hour)
		e.dispatch(t)
		if after := e.events(t); after["group_followup"] != before["group_followup"] || after["group_opened"] != before["group_opened"] {
			t.Fatalf("a muted group notified: %v → %v", before, after)
		}
		if m, _, _ := e.sent(); m != 2 {
			t.Fatalf("a muted group sent %d emails", m-2)
		}

		// Resolved (every item skipped), then back: notified again, into the same entry.
		rows, _, err := db.ListDLQ(ctx, e.h.org, models.DLQFilter{GroupID: group, Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if _, err := e.h.eng.Settle(ctx, engine.SettleRequest{OrganizationID: e.h.org, DeadLetterID: r.ID, Status: models.DLQSkipped, Actor: audit.System}); err != nil {
				t.Fatal(err)
			}
		}
		e.fail(t, "4444")
		e.dispatch(t)
		if m, s, tm := e.sent(); m != 3 || s != 3 || tm != 3 {
			t.Fatalf("the reopened group: %d emails, %d Slack, %d Teams; want one more each", m, s, tm)
		}
		if !strings.Contains(qpDecoded(e.sink.Messages()[2].Data), "notify.title.group_reopened") {
			t.Errorf("the reopened group's email does not say it came back")
		}
		if inbox := e.inbox(t); len(inbox) != 1 || inbox[0].ReadAt != nil || inbox[0].Occurrences != 9 {
			t.Fatalf("the reopened group's entry: %+v", inbox)
		}
	})
}

// A workflow that notifies per failure keeps the old behaviour: every dead letter notifies.
func TestPerFailureNotifications(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		e := newGroupNotifyEnv(t, db, `"errorNotifications": {"notifyPer": "failure"}, `)
		for i := range 3 {
			e.fail(t, fmt.Sprintf("52610408%d", i))
		}
		e.dispatch(t)
		if m, s, tm := e.sent(); m != 3 || s != 3 || tm != 3 {
			t.Fatalf("per failure: %d emails, %d Slack, %d Teams; want 3 each", m, s, tm)
		}
		if ev := e.events(t); ev["dlq"] != 3 || ev["group_opened"] != 0 {
			t.Fatalf("events %v", ev)
		}
		if inbox := e.inbox(t); len(inbox) != 3 {
			t.Fatalf("inbox %d entries, want 3", len(inbox))
		}
	})
}
