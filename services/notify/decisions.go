package notify

import (
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
)

// Decisions on input changes (issue 21): when an admin approves or rejects an accountant's
// edited input on a workflow that moves money, the accountant who asked is told, in her
// language, with the admin's note and a link to the item:
//
//   - always in the app (her inbox: one entry per decision);
//   - by email too when the settings in effect for the workflow (its
//     settings.errorNotifications over the organization's defaults) are enabled and use the
//     email channel: the channels an office chose are where its people read Lifeline's news.
//
// Lifeline has no per-user notification preferences; the recipients list of the settings is
// about failures and does not apply here (she asked, so she is told).

// decisionKind reports whether k is a decision on an input change.
func decisionKind(k Kind) bool { return k == ChangeApproved || k == ChangeRejected }

// emitDecision records a decision's event and its deliveries to the user ev.To (a member of
// the organization; anyone else is told nothing) in tx. A second Emit with the same
// DedupKey records nothing.
func (s *Service) emitDecision(tx *gorm.DB, ev Event) error {
	if ev.To == "" {
		return nil
	}
	var to member
	if err := tx.Table("memberships").Select("memberships.user_id AS user_id, users.email AS email, memberships.role AS role").
		Joins("JOIN users ON users.id = memberships.user_id").
		Where("memberships.organization_id = ? AND memberships.user_id = ?", ev.OrganizationID, ev.To).Limit(1).Scan(&to).Error; err != nil {
		return fmt.Errorf("notify: the requester: %w", err)
	}
	if to.UserID == "" {
		return nil // no longer a member
	}
	st, err := s.Effective(tx, ev.OrganizationID, ev.Settings)
	if err != nil {
		return err
	}
	dedup := ev.DedupKey
	if dedup == "" {
		dedup = fmt.Sprintf("%s:%s:%d", ev.Kind, ev.DeadLetterID, ev.At.UnixNano())
	}
	dedup = ev.OrganizationID + ":" + dedup
	payload, err := jsonOf(ev)
	if err != nil {
		return err
	}
	event := models.NotificationEvent{ID: models.NewID(), OrganizationID: ev.OrganizationID, Kind: string(ev.Kind),
		WorkflowID: ev.WorkflowID, ExecutionID: ev.ExecutionID, Payload: payload, DedupKey: dedup, CreatedAt: ev.At}
	res := tx.Clauses(onConflictDoNothing("dedup_key")).Create(&event)
	if res.Error != nil {
		return fmt.Errorf("notify: record the decision: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil
	}
	targets := []target{{channel: App, recipient: to.UserID}}
	if st.Enabled && slices.Contains(st.Channels, Email) && to.Email != "" {
		targets = append(targets, target{channel: Email, recipient: to.Email})
	}
	now := s.now()
	ds := make([]models.NotificationDelivery, 0, len(targets))
	for _, t := range targets {
		ds = append(ds, models.NotificationDelivery{ID: models.NewID(), OrganizationID: ev.OrganizationID, EventID: &event.ID,
			WorkflowID: ev.WorkflowID, ExecutionID: ev.ExecutionID, Channel: string(t.channel), Recipient: t.recipient,
			EventKind: string(ev.Kind), Status: models.DeliveryPending, NextAttemptAt: now, WindowStart: ev.At.Truncate(time.Minute),
			DedupKey: dedup + ":" + string(t.channel) + ":" + keyPart(t.recipient), CreatedAt: now, UpdatedAt: now})
	}
	if err := models.InsertNotificationDeliveries(tx, ds); err != nil {
		return fmt.Errorf("notify: record the decision's deliveries: %w", err)
	}
	return nil
}

// itemLink returns the absolute URL of a dead letter's page.
func (s *Service) itemLink(id string) string { return s.cfg.BaseURL + s.cfg.ItemPath(id) }

// renderDecision builds the message of a decision on an input change for its requester.
func (s *Service) renderDecision(ev Event, rc recipientCtx) Message {
	l := s.lang(rc.Lang)
	tr := s.tr
	name := ev.WorkflowName
	if name == "" {
		name = ev.WorkflowID
	}
	what := ev.Subject
	if what == "" {
		what = name
	}
	m := Message{Lang: l, Title: tr(l, "title."+string(ev.Kind), "Subject", what), LinkText: tr(l, "link.item")}
	if ev.DeadLetterID != "" {
		m.Link = s.itemLink(ev.DeadLetterID)
	}
	intro := tr(l, "intro."+string(ev.Kind), "Admin", ev.DecidedBy)
	if ev.WorkflowID != "" {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.workflow"), fmt.Sprintf("%s (%s)", name, ev.WorkflowID)})
	}
	if ev.Subject != "" {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.subject"), ev.Subject})
	}
	if ev.DecidedBy != "" {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.decided_by"), ev.DecidedBy})
	}
	if ev.Notes != "" {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.notes"), firstLines(ev.Notes)})
	}
	m.Facts = append(m.Facts, Fact{tr(l, "fact.time"), rc.time(ev.At)})
	m.Text, m.HTML = bodies(l, intro, m.Facts, m.Link, m.LinkText, tr(l, "footer"))
	return m
}
