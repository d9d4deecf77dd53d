package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/escalation"
	"lifeline/services/notify"
)

// escalationEnv is groupNotifyEnv with an owner and a second workflow (whose failures are
// another group), and the organization's policy: 1 h → admins (owners included), 4 h →
// owners and the accountant by email.
type escalationEnv struct {
	*groupNotifyEnv
	owner, accountant string
	wf2               *models.Workflow
}

func newEscalationEnv(t *testing.T, db *models.DB) *escalationEnv {
	t.Helper()
	ctx := context.Background()
	e := &escalationEnv{groupNotifyEnv: newGroupNotifyEnv(t, db, "")}
	en := "en"
	u := models.User{ID: models.NewID(), Email: "owner@grupy.example", Name: "Owner", PasswordHash: "x", Language: &en, CreatedAt: time.Now().UTC()}
	if err := db.Conn(ctx).Create(&u).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Conn(ctx).Create(&models.Membership{ID: models.NewID(), OrganizationID: e.h.org, UserID: u.ID, Role: models.RoleOwner, CreatedAt: time.Now().UTC()}).Error; err != nil {
		t.Fatal(err)
	}
	e.owner = u.ID
	if err := db.Conn(ctx).Model(&models.User{}).Where("email = ?", "accountant@grupy.example").Pluck("id", &e.accountant).Error; err != nil {
		t.Fatal(err)
	}
	office := nipOffice()
	t.Cleanup(office.Close)
	e.wf2 = e.h.workflow(strings.Replace(httpDef(office.URL, noRetries), `"name": "`, `"name": "Drugi `, 1))
	svc := &escalation.Service{DB: db}
	if _, err := svc.Save(ctx, e.h.org, audit.System, escalation.Policy{Levels: []escalation.Level{
		{AfterMs: time.Hour.Milliseconds(), To: []string{"role:admin"}},
		{AfterMs: (4 * time.Hour).Milliseconds(), To: []string{"role:owner", "ACCOUNTANT@grupy.example"}},
	}}); err != nil {
		t.Fatal(err)
	}
	return e
}

// failIn runs one execution of wf that the NIP office refuses, to the DLQ, and returns its
// dead letter.
func (e *escalationEnv) failIn(t *testing.T, wf *models.Workflow, nip string) *models.DeadLetter {
	t.Helper()
	ex := e.h.start(wf, `{"nip": "`+nip+`"}`)
	if got := e.h.wait(ex.ID, 20*time.Second); got.Status != models.ExecDLQPending {
		t.Fatalf("%s: %s", nip, got.Status)
	}
	dl, err := e.db.DLQForExecution(context.Background(), e.h.org, ex.ID)
	if err != nil || dl == nil || dl.GroupID == nil {
		t.Fatalf("dead letter %+v %v", dl, err)
	}
	return dl
}

func (e *escalationEnv) escalate(t *testing.T) engine.EscalationResult {
	t.Helper()
	r, err := e.h.eng.Escalate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// escalations returns the organization's escalation events' payloads, oldest first.
func (e *escalationEnv) escalations(t *testing.T) []notify.Escalation {
	t.Helper()
	var rows []models.NotificationEvent
	if err := e.db.Conn(context.Background()).Where("organization_id = ? AND kind = ?", e.h.org, "escalated").Order("created_at").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := make([]notify.Escalation, len(rows))
	for i, r := range rows {
		if err := json.Unmarshal(r.Payload, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// deliveries counts the escalations' deliveries by channel and recipient.
func (e *escalationEnv) deliveries(t *testing.T) map[string]int {
	t.Helper()
	var rows []models.NotificationDelivery
	if err := e.db.Conn(context.Background()).Where("organization_id = ? AND event_kind = ?", e.h.org, "escalated").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, d := range rows {
		out[d.Channel+" "+d.Recipient]++
	}
	return out
}

func (e *escalationEnv) errorStatus(t *testing.T, dl *models.DeadLetter) string {
	t.Helper()
	var s string
	if err := e.db.Conn(context.Background()).Model(&models.ExecutionError{}).Where("id = ?", dl.ErrorID).Pluck("status", &s).Error; err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *escalationEnv) group(t *testing.T, id string) *models.GroupView {
	t.Helper()
	g, err := e.db.GetGroup(context.Background(), e.h.org, id)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func groupIDs(esc notify.Escalation) []string {
	var out []string
	for _, g := range esc.Groups {
		out = append(out, g.ID)
	}
	return out
}

// Groups left pending climb the levels in order on the database clock: each level is told
// once (one message per level naming every group that reached it in the pass, to the
// level's people and the organization's Slack and Teams), their items' error records are
// escalated, closing a group ends its escalation, and a reopened group starts again from
// level 0.
func TestEscalation(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		e := newEscalationEnv(t, db)
		a1 := e.failIn(t, e.wf, "526104082")
		a2 := e.failIn(t, e.wf, "701000213")
		b := e.failIn(t, e.wf2, "526104082")
		ga, gb := *a1.GroupID, *b.GroupID
		if ga == gb || *a2.GroupID != ga {
			t.Fatalf("groups: %s %s %s", ga, *a2.GroupID, gb)
		}
		// Before the first level's time: nothing.
		e.clock.Advance(59 * time.Minute)
		e.escalate(t)
		if len(e.escalations(t)) != 0 || e.group(t, ga).EscalationLevel != 0 {
			t.Fatal("escalated before its time")
		}

		// Past 1 h: both groups reach level 1 in one pass: one message naming both.
		e.clock.Advance(2 * time.Minute)
		e.escalate(t)
		escs := e.escalations(t)
		if len(escs) != 1 || escs[0].Level != 1 || len(escs[0].Groups) != 2 || len(escs[0].People) != 2 {
			t.Fatalf("level 1's notifications: %+v, want one naming both groups, to the admin and the owner", escs)
		}
		if got := strings.Join(groupIDs(escs[0]), " "); !strings.Contains(got, ga) || !strings.Contains(got, gb) {
			t.Fatalf("level 1 names %s", got)
		}
		want := map[string]int{"email admin@grupy.example": 1, "email owner@grupy.example": 1, "app " + e.admin: 1, "app " + e.owner: 1}
		d := e.deliveries(t)
		for k, n := range want {
			if d[k] != n {
				t.Errorf("level 1: %d deliveries %q, want %d (all: %v)", d[k], k, n, d)
			}
		}
		if len(d) != len(want)+2 { // and Slack and Teams, once each
			t.Errorf("level 1's deliveries: %v", d)
		}
		g := e.group(t, ga)
		if g.EscalationLevel != 1 || g.EscalatedAt == nil || g.EscalatedTo == nil || *g.EscalatedTo != `["role:admin"]` {
			t.Fatalf("group after level 1: level %d at %v to %v", g.EscalationLevel, g.EscalatedAt, g.EscalatedTo)
		}
		for _, dl := range []*models.DeadLetter{a1, a2, b} {
			if s := e.errorStatus(t, dl); s != models.ErrEscalated {
				t.Errorf("error record of %s: %s, want escalated", dl.ID, s)
			}
		}
		// Told once: a second pass (and more time within the level) adds nothing.
		e.clock.Advance(time.Hour)
		e.escalate(t)
		if n := len(e.escalations(t)); n != 1 {
			t.Fatalf("a second pass told level 1 again: %d escalations", n)
		}
		e.dispatch(t)
		inbox := e.inbox(t)
		found := false
		for _, n := range inbox {
			if n.Kind == "escalated" {
				found = true
				if !strings.Contains(n.Title, "notify.title.escalated") || !strings.Contains(n.Link, "/dlq") {
					t.Errorf("the admin's escalation entry: %+v", n)
				}
			}
		}
		if !found {
			t.Fatalf("the admin's inbox has no escalation: %+v", inbox)
		}

		// Group b closes: its escalation ends (level 0), its record resolved.
		if _, err := e.h.eng.Settle(ctx, engine.SettleRequest{OrganizationID: e.h.org, DeadLetterID: b.ID, Status: models.DLQSkipped, Actor: audit.System}); err != nil {
			t.Fatal(err)
		}
		if g := e.group(t, gb); g.State != models.GroupResolved || g.EscalationLevel != 0 || g.EscalatedAt != nil || g.EscalatedTo != nil {
			t.Fatalf("closed group: state %s level %d", g.State, g.EscalationLevel)
		}
		if s := e.errorStatus(t, b); s != models.ErrResolved {
			t.Fatalf("closed item's error record: %s", s)
		}

		// A new item of the escalated group a is caught up (its record escalated), told nothing.
		a3 := e.failIn(t, e.wf, "12345")
		e.escalate(t)
		if e.errorStatus(t, a3) != models.ErrEscalated || len(e.escalations(t)) != 1 {
			t.Fatalf("catch-up: record %s", e.errorStatus(t, a3))
		}

		// Past 4 h: group a reaches level 2: told to the owner and the accountant.
		e.clock.Advance(2*time.Hour + time.Minute)
		e.escalate(t)
		escs = e.escalations(t)
		if len(escs) != 2 || escs[1].Level != 2 || len(escs[1].Groups) != 1 || escs[1].Groups[0].ID != ga || escs[1].Groups[0].Pending != 3 {
			t.Fatalf("level 2's notification: %+v", escs)
		}
		people := map[string]bool{}
		for _, p := range escs[1].People {
			people[p.UserID] = true
		}
		if len(people) != 2 || !people[e.owner] || !people[e.accountant] {
			t.Fatalf("level 2 tells %+v, want the owner and the accountant", escs[1].People)
		}
		if d := e.deliveries(t); d["email accountant@grupy.example"] != 1 || d["email owner@grupy.example"] != 2 || d["email admin@grupy.example"] != 1 {
			t.Fatalf("deliveries after level 2: %v", d)
		}
		if g := e.group(t, ga); g.EscalationLevel != 2 || *g.EscalatedTo != `["role:owner","accountant@grupy.example"]` {
			t.Fatalf("group after level 2: %d %v", g.EscalationLevel, *g.EscalatedTo)
		}
		// The last level reached: nothing more, ever.
		e.clock.Advance(24 * time.Hour)
		e.escalate(t)
		if n := len(e.escalations(t)); n != 2 {
			t.Fatalf("past the last level: %d escalations", n)
		}

		// Closing the group ends the escalation; the records leave escalated as they close.
		for _, dl := range []*models.DeadLetter{a1, a2, a3} {
			if _, err := e.h.eng.Settle(ctx, engine.SettleRequest{OrganizationID: e.h.org, DeadLetterID: dl.ID, Status: models.DLQResolved, Actor: audit.System}); err != nil {
				t.Fatal(err)
			}
			if s := e.errorStatus(t, dl); s != models.ErrResolved {
				t.Fatalf("record of a closed item: %s", s)
			}
		}
		if g := e.group(t, ga); g.State != models.GroupResolved || g.EscalationLevel != 0 {
			t.Fatalf("resolved group: %s level %d", g.State, g.EscalationLevel)
		}

		// Reopened by a new failure: from level 0, timed from the reopening.
		a4 := e.failIn(t, e.wf, "999")
		if *a4.GroupID != ga {
			t.Fatalf("the recurrence went to another group")
		}
		e.escalate(t)
		if g := e.group(t, ga); g.EscalationLevel != 0 || len(e.escalations(t)) != 2 {
			t.Fatalf("the reopened group escalated at once: level %d", g.EscalationLevel)
		}
		e.clock.Advance(time.Hour + time.Minute)
		e.escalate(t)
		if escs := e.escalations(t); len(escs) != 3 || escs[2].Level != 1 || escs[2].Groups[0].ID != ga {
			t.Fatalf("the reopened group's level 1: %+v", escs)
		}
		var audited int64
		if err := db.Conn(ctx).Model(&models.AuditEntry{}).Where("organization_id = ? AND entity_id = ? AND action = ?", e.h.org, ga, "dlq.group_escalated").
			Count(&audited).Error; err != nil || audited != 3 {
			t.Errorf("the group's escalations audited: %d (%v), want 3", audited, err)
		}
	})
}

// A muted group is not escalated while muted; an organization without a policy never is.
func TestEscalationMutedAndNoPolicy(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		e := newEscalationEnv(t, db)
		a := e.failIn(t, e.wf, "526104082")
		b := e.failIn(t, e.wf2, "526104082")
		if err := e.h.eng.Groups().Mute(ctx, e.h.org, *a.GroupID, e.clock.Now().Add(3*time.Hour), audit.System); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(2 * time.Hour)
		e.escalate(t)
		if e.group(t, *a.GroupID).EscalationLevel != 0 || e.group(t, *b.GroupID).EscalationLevel != 1 {
			t.Fatal("a muted group escalated, or the other did not")
		}
		// The mute over (3 h), it catches up: 3 h 1 min pending is level 1.
		e.clock.Advance(61 * time.Minute)
		e.escalate(t)
		if e.group(t, *a.GroupID).EscalationLevel != 1 {
			t.Fatal("the group did not escalate after its mute")
		}
		// No policy: nothing more, whatever the wait.
		if _, err := (&escalation.Service{DB: db}).Save(ctx, e.h.org, audit.System, escalation.Policy{}); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(48 * time.Hour)
		e.escalate(t)
		if e.group(t, *a.GroupID).EscalationLevel != 1 || e.group(t, *b.GroupID).EscalationLevel != 1 {
			t.Fatal("escalated without a policy")
		}
	})
}
