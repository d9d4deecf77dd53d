package notify

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
)

// InterventionAsked is the kind of the notification that tells people an ask step waits for
// them (issue 25): when the request is made, escalated to them, or before it times out.
const InterventionAsked Kind = "intervention"

// Stages of a request's notification.
const (
	StageRequested = "requested"
	StageEscalated = "escalated"
	StageReminded  = "reminded"
)

// InterventionNotice is one notification of a request to its holders.
type InterventionNotice struct {
	OrganizationID string
	InterventionID string
	ExecutionID    string
	// Stage is StageRequested, StageEscalated or StageReminded; Level and Round the
	// escalation's (0 for the others).
	Stage        string
	Level, Round int
	// Kind is the request's (approval, input, decision, error_resolution); not the
	// notification's kind (InterventionAsked), which the in-app list reads as "kind".
	Kind         string `json:"askKind"`
	Title        string
	Message      string
	StepName     string
	WorkflowName string
	Subject      string
	ExpiresAt    time.Time
	// At is when it was made, escalated or reminded (the database clock).
	At time.Time
	// People are the holders, each with the token of their single-use e-mail link (never
	// stored in the event: it travels sealed in the e-mail delivery's target).
	People []LinkedPerson `json:"-"`
}

// LinkedPerson is a holder told of a request: by e-mail with their own link's token, and in
// the app.
type LinkedPerson struct{ UserID, Email, Token string }

// EmitIntervention records a request's notification and its deliveries in tx, the
// transaction that made, escalated or reminded it (its guarded change is the notification's
// guard): e-mail to each person (with their single-use link), in-app to each, and the
// organization's Slack and Teams webhooks (with the request's link, which opens it after
// login) when its settings list those channels. A second one of the same request, stage,
// level, round and time records nothing. Its errors are the database's.
func (s *Service) EmitIntervention(tx *gorm.DB, n InterventionNotice) error {
	if n.OrganizationID == "" || n.InterventionID == "" {
		return nil
	}
	if n.At.IsZero() {
		n.At = s.now()
	}
	n.At = n.At.UTC()
	targets, err := s.peopleTargets(tx, n.OrganizationID, n.People)
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		return nil
	}
	dedup := fmt.Sprintf("%s:intervention:%s:%s:%d:%d:%d", n.OrganizationID, n.InterventionID, n.Stage, n.Level, n.Round, n.At.UnixNano())
	payload, err := json.Marshal(n)
	if err != nil {
		return err
	}
	event := models.NotificationEvent{ID: models.NewID(), OrganizationID: n.OrganizationID, Kind: string(InterventionAsked), ExecutionID: n.ExecutionID,
		Payload: payload, DedupKey: dedup, CreatedAt: n.At}
	res := tx.Clauses(onConflictDoNothing("dedup_key")).Create(&event)
	if res.Error != nil {
		return fmt.Errorf("notify: record the request: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil
	}
	now := s.now()
	ds := make([]models.NotificationDelivery, 0, len(targets))
	for _, t := range targets {
		d := models.NotificationDelivery{ID: models.NewID(), OrganizationID: n.OrganizationID, EventID: &event.ID,
			Channel: string(t.channel), Recipient: t.recipient, Target: t.target, EventKind: string(InterventionAsked),
			Status: models.DeliveryPending, NextAttemptAt: now, WindowStart: n.At.Truncate(time.Minute),
			DedupKey: dedup + ":" + string(t.channel) + ":" + keyPart(t.recipient), CreatedAt: now, UpdatedAt: now}
		d.ExecutionID = n.ExecutionID
		if err := s.db.SealDeliveryTarget(&d); err != nil {
			return err
		}
		ds = append(ds, d)
	}
	if err := models.InsertNotificationDeliveries(tx, ds); err != nil {
		return fmt.Errorf("notify: record the request's deliveries: %w", err)
	}
	return nil
}

// interventionLink is the absolute URL of a request's page; with token, the e-mail's
// single-use link (/interventions/<id>?link=<token>).
func (s *Service) interventionLink(id, token string) string {
	u := s.cfg.BaseURL + s.cfg.InterventionPath(id)
	if token != "" {
		u += "?link=" + url.QueryEscape(token)
	}
	return u
}

// renderIntervention builds a request's message for a recipient; token is their e-mail
// link's ("" for the app, Slack and Teams: the plain link, which opens it after login).
func (s *Service) renderIntervention(n InterventionNotice, token string, rc recipientCtx) Message {
	l := s.lang(rc.Lang)
	tr := s.tr
	m := Message{Lang: l}
	title := clip(n.Title, 160)
	switch n.Stage {
	case StageEscalated:
		m.Title = tr(l, "title.intervention_escalated", "Title", title)
	case StageReminded:
		m.Title = tr(l, "title.intervention_reminded", "Title", title, "Until", rc.time(n.ExpiresAt))
	default:
		m.Title = tr(l, "title.intervention_requested", "Title", title)
	}
	m.Link, m.LinkText = s.interventionLink(n.InterventionID, token), tr(l, "link.intervention")
	intro := tr(l, "intro.intervention."+n.Kind, "Until", rc.time(n.ExpiresAt))
	if n.Message != "" {
		intro += "\n\n" + clip(n.Message, 2000)
	}
	if n.WorkflowName != "" {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.workflow"), n.WorkflowName})
	}
	if n.Subject != "" {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.subject"), clip(n.Subject, 200)})
	}
	if n.StepName != "" {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.step"), n.StepName})
	}
	m.Facts = append(m.Facts, Fact{tr(l, "fact.intervention_expires"), rc.time(n.ExpiresAt)})
	if n.Stage == StageEscalated {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.intervention_level"), fmt.Sprint(n.Level)})
	}
	m.Text, m.HTML = bodies(l, intro, m.Facts, m.Link, m.LinkText, tr(l, "footer"))
	return m
}
