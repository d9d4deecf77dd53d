package notify

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
)

// Deadline is the kind of a deadline reminder (issue 23); EmitDeadline records it.
const Deadline Kind = "deadline"

// DeadlineReminder is one reminder of an obligation and due date: its open work, grouped.
type DeadlineReminder struct {
	OrganizationID string
	Obligation     string
	// Due is the due date (a civil date); DaysLeft the working days left (the threshold).
	Due      time.Time
	DaysLeft int
	// Periods are the periods the open work is for; Clients counts its distinct clients,
	// Open its executions.
	Periods       []string
	Clients, Open int
	// Users are the members told besides the admins (the executions' accountants).
	Users []string
	// Link is the absolute URL of the list of the open work.
	Link string
	At   time.Time
}

// EmitDeadline records reminder r's deliveries in tx: in-app and (when the organization's
// settings send email) email to the admins and r.Users, and the organization's Slack and
// Teams webhooks when those channels are on. Each recipient reads it in their language. The
// caller records that the reminder was sent (once per obligation, due date and threshold);
// a second call with the same reminder records nothing (the event's dedup key).
func (s *Service) EmitDeadline(tx *gorm.DB, r DeadlineReminder) error {
	row, err := s.db.GetNotificationSettings(tx, r.OrganizationID)
	if err != nil {
		return fmt.Errorf("notify: settings: %w", err)
	}
	st := SettingsFromRow(row)
	channels := []Channel{App}
	if st.Enabled {
		for _, c := range st.Channels {
			if c != App {
				channels = append(channels, c)
			}
		}
	}
	ms, err := s.members(tx, r.OrganizationID)
	if err != nil {
		return err
	}
	var told []member
	for _, m := range ms {
		if m.Role == models.RoleAdmin || m.Role == models.RoleOwner || slices.Contains(r.Users, m.UserID) {
			told = append(told, m)
		}
	}
	var targets []target
	for _, c := range channels {
		switch c {
		case App:
			for _, m := range told {
				targets = append(targets, target{channel: App, recipient: m.UserID})
			}
		case Email:
			for _, m := range told {
				targets = append(targets, target{channel: Email, recipient: m.Email})
			}
		case Slack:
			if st.SlackWebhookURL != "" {
				targets = append(targets, target{channel: Slack, recipient: models.MaskWebhookURL(st.SlackWebhookURL), target: st.SlackWebhookURL})
			}
		case Teams:
			if st.TeamsWebhookURL != "" {
				targets = append(targets, target{channel: Teams, recipient: models.MaskWebhookURL(st.TeamsWebhookURL), target: st.TeamsWebhookURL})
			}
		}
	}
	if len(targets) == 0 {
		return nil
	}
	at := r.At.UTC()
	if at.IsZero() {
		at = s.now()
	}
	r.At = at
	payload, err := json.Marshal(r)
	if err != nil {
		return err
	}
	dedup := fmt.Sprintf("%s:deadline:%s:%s:%d", r.OrganizationID, r.Obligation, r.Due.Format(time.DateOnly), r.DaysLeft)
	event := models.NotificationEvent{ID: models.NewID(), OrganizationID: r.OrganizationID, Kind: string(Deadline),
		Payload: payload, DedupKey: dedup, CreatedAt: at}
	res := tx.Clauses(onConflictDoNothing("dedup_key")).Create(&event)
	if res.Error != nil {
		return fmt.Errorf("notify: record the reminder: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil
	}
	now := s.now()
	ds := make([]models.NotificationDelivery, 0, len(targets))
	for _, t := range targets {
		d := models.NotificationDelivery{ID: models.NewID(), OrganizationID: r.OrganizationID, EventID: &event.ID,
			Channel: string(t.channel), Recipient: t.recipient, Target: t.target, EventKind: string(Deadline),
			Status: models.DeliveryPending, NextAttemptAt: now, WindowStart: at.Truncate(time.Minute),
			DedupKey: dedup + ":" + string(t.channel) + ":" + keyPart(t.recipient), CreatedAt: now, UpdatedAt: now}
		if err := s.db.SealDeliveryTarget(&d); err != nil {
			return err
		}
		ds = append(ds, d)
	}
	if err := models.InsertNotificationDeliveries(tx, ds); err != nil {
		return fmt.Errorf("notify: record the reminder's deliveries: %w", err)
	}
	return nil
}

// plural is the Polish plural form of n (one, few, many); English reads one and the rest.
func plural(n int) string {
	switch {
	case n == 1:
		return "one"
	case n%10 >= 2 && n%10 <= 4 && (n%100 < 12 || n%100 > 14):
		return "few"
	}
	return "many"
}

// renderDeadline builds a reminder's message for a recipient: "JPK_V7M za 2026-10:
// 3 klientów, termin śr. 25 lis, 1 dzień roboczy".
func (s *Service) renderDeadline(r DeadlineReminder, rc recipientCtx) Message {
	l := s.lang(rc.Lang)
	tx := func(id string, data ...any) string { return s.cfg.Texts.Text(l, id, data...) }
	due := tx("deadlines.date", "Weekday", tx("deadlines.weekday."+strconv.Itoa(int(r.Due.Weekday()))), "Day", r.Due.Day(),
		"Month", tx("deadlines.month."+strconv.Itoa(int(r.Due.Month()))))
	periods := strings.Join(r.Periods, ", ")
	if periods == "" {
		periods = "–"
	}
	clients := s.tr(l, "deadline.clients."+plural(r.Clients), "Count", r.Clients)
	m := Message{Lang: l, Link: r.Link, LinkText: s.tr(l, "deadline.link")}
	m.Title = s.tr(l, "deadline.title", "Obligation", r.Obligation, "Periods", periods, "Clients", clients, "Due", due,
		"Days", s.tr(l, "deadline.days."+plural(r.DaysLeft), "Count", r.DaysLeft))
	m.Facts = []Fact{{s.tr(l, "deadline.fact.obligation"), r.Obligation}, {s.tr(l, "deadline.fact.due"), r.Due.Format(time.DateOnly)},
		{s.tr(l, "deadline.fact.clients"), strconv.Itoa(r.Clients)}, {s.tr(l, "deadline.fact.open"), strconv.Itoa(r.Open)}}
	m.Text, m.HTML = bodies(l, m.Title+"\n"+s.tr(l, "deadline.intro"), m.Facts, m.Link, m.LinkText, s.tr(l, "footer"))
	return m
}
