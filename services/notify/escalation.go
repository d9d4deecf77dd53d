package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
)

// Escalated is the kind of an escalation's notification: failure groups left pending
// reached a level of the organization's escalation policy (issue 22).
const Escalated Kind = "escalated"

// Escalation is one level reached by one or more failure groups in one escalation pass:
// one message per recipient names all of them.
type Escalation struct {
	OrganizationID string
	// Level is the level reached (1: the first), AfterMs its wait.
	Level   int
	AfterMs int64
	// People are the members the level names (resolved by the caller from its roles,
	// ids and emails): each is told by email and in the app.
	People []Person
	Groups []EscalatedGroup
	// At is when the pass escalated them (the database clock).
	At time.Time
}

// Person is a member an escalation tells.
type Person struct{ UserID, Email string }

// EscalatedGroup is a group an escalation names.
type EscalatedGroup struct {
	ID           string
	Title        string
	WorkflowID   string
	WorkflowName string
	// Pending counts its items waiting; Since is when the oldest of them began waiting.
	Pending int
	Since   time.Time
}

// EmitEscalation records an escalation's event and its deliveries in tx, the transaction
// that raised the groups' level (so that a level is told once: the level's guarded update
// is the event's guard): email and in-app to each of esc.People, and the organization's
// Slack and Teams webhooks when its notification settings list those channels with a URL.
// Nothing when it names no group or has nobody to tell. A second EmitEscalation of the
// same level, groups and time records nothing. Its errors are the database's.
func (s *Service) EmitEscalation(tx *gorm.DB, esc Escalation) error {
	if len(esc.Groups) == 0 || esc.OrganizationID == "" {
		return nil
	}
	if esc.At.IsZero() {
		esc.At = s.now()
	}
	esc.At = esc.At.UTC()
	people := make([]LinkedPerson, len(esc.People))
	for i, p := range esc.People {
		people[i] = LinkedPerson{UserID: p.UserID, Email: p.Email}
	}
	targets, err := s.peopleTargets(tx, esc.OrganizationID, people)
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		return nil
	}
	ids := make([]string, len(esc.Groups))
	for i, g := range esc.Groups {
		ids[i] = g.ID
	}
	sort.Strings(ids)
	sum := sha256.Sum256([]byte(strings.Join(ids, ",")))
	dedup := fmt.Sprintf("%s:escalation:%d:%d:%s", esc.OrganizationID, esc.Level, esc.At.UnixNano(), hex.EncodeToString(sum[:8]))
	payload, err := json.Marshal(esc)
	if err != nil {
		return err
	}
	event := models.NotificationEvent{ID: models.NewID(), OrganizationID: esc.OrganizationID, Kind: string(Escalated),
		Payload: payload, DedupKey: dedup, CreatedAt: esc.At}
	res := tx.Clauses(onConflictDoNothing("dedup_key")).Create(&event)
	if res.Error != nil {
		return fmt.Errorf("notify: record the escalation: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil
	}
	now := s.now()
	ds := make([]models.NotificationDelivery, 0, len(targets))
	for _, t := range targets {
		d := models.NotificationDelivery{ID: models.NewID(), OrganizationID: esc.OrganizationID, EventID: &event.ID,
			Channel: string(t.channel), Recipient: t.recipient, Target: t.target, EventKind: string(Escalated),
			Status: models.DeliveryPending, NextAttemptAt: now, WindowStart: esc.At.Truncate(time.Minute),
			DedupKey: dedup + ":" + string(t.channel) + ":" + keyPart(t.recipient), CreatedAt: now, UpdatedAt: now}
		if err := s.db.SealDeliveryTarget(&d); err != nil {
			return err
		}
		ds = append(ds, d)
	}
	if err := models.InsertNotificationDeliveries(tx, ds); err != nil {
		return fmt.Errorf("notify: record the escalation's deliveries: %w", err)
	}
	return nil
}

// renderEscalation builds an escalation's message for a recipient: how many problems have
// waited how long, each with its workflow, pending count, since when and link; the link is
// the one group's page, or the Problems page for several.
func (s *Service) renderEscalation(esc Escalation, rc recipientCtx) Message {
	l := s.lang(rc.Lang)
	tr := s.tr
	after := s.afterText(l, time.Duration(esc.AfterMs)*time.Millisecond)
	m := Message{Lang: l}
	n := len(esc.Groups)
	if n == 1 {
		m.Title = tr(l, "title.escalated_one", "Title", clip(esc.Groups[0].Title, 120), "After", after)
		m.Link, m.LinkText = s.groupLink(esc.Groups[0].ID), tr(l, "link.group")
	} else {
		m.Title = tr(l, "title.escalated", "Count", n, "After", after)
		m.Link, m.LinkText = s.cfg.BaseURL+s.cfg.ProblemsPath(), tr(l, "link.problems")
	}
	intro := tr(l, "intro.escalated", "Count", n, "After", after, "Level", esc.Level)
	for _, g := range esc.Groups {
		name := g.WorkflowName
		if name == "" {
			name = g.WorkflowID
		}
		v := tr(l, "escalated.group", "Workflow", name, "Pending", g.Pending, "Since", rc.time(g.Since)) + "\n" + s.groupLink(g.ID)
		m.Facts = append(m.Facts, Fact{clip(g.Title, 200), v})
	}
	m.Facts = append(m.Facts, Fact{tr(l, "fact.time"), rc.time(esc.At)})
	m.Text, m.HTML = bodies(l, intro, m.Facts, m.Link, m.LinkText, tr(l, "footer"))
	return m
}

// afterText says a level's wait in whole units: minutes under 2 hours, hours under 2 days,
// else days.
func (s *Service) afterText(l string, d time.Duration) string {
	switch {
	case d < 2*time.Hour:
		return s.tr(l, "after.minutes", "N", int(d/time.Minute))
	case d < 48*time.Hour:
		return s.tr(l, "after.hours", "N", int(d/time.Hour))
	}
	return s.tr(l, "after.days", "N", int(d/(24*time.Hour)))
}

// peopleTargets lists the deliveries of a notice addressed to people rather than to the
// organization's error-notification recipients (an escalation, a request for an answer):
// e-mail and in-app to each person, once per address and per user (an e-mail's target is the
// person's Token, when there is one), and the organization's Slack and Teams webhooks when its
// settings list those channels with a URL.
func (s *Service) peopleTargets(tx *gorm.DB, orgID string, people []LinkedPerson) ([]target, error) {
	row, err := s.db.GetNotificationSettings(tx, orgID)
	if err != nil {
		return nil, fmt.Errorf("notify: settings: %w", err)
	}
	st := SettingsFromRow(row)
	var targets []target
	seen := map[string]bool{}
	for _, p := range people {
		if p.Email != "" && !seen["e:"+strings.ToLower(p.Email)] {
			seen["e:"+strings.ToLower(p.Email)] = true
			targets = append(targets, target{channel: Email, recipient: p.Email, target: p.Token})
		}
		if p.UserID != "" && !seen["u:"+p.UserID] {
			seen["u:"+p.UserID] = true
			targets = append(targets, target{channel: App, recipient: p.UserID})
		}
	}
	if slices.Contains(st.Channels, Slack) && st.SlackWebhookURL != "" {
		targets = append(targets, target{channel: Slack, recipient: models.MaskWebhookURL(st.SlackWebhookURL), target: st.SlackWebhookURL})
	}
	if slices.Contains(st.Channels, Teams) && st.TeamsWebhookURL != "" {
		targets = append(targets, target{channel: Teams, recipient: models.MaskWebhookURL(st.TeamsWebhookURL), target: st.TeamsWebhookURL})
	}
	return targets, nil
}
