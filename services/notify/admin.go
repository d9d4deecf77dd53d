package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
)

// OrgSettings returns the organization's defaults (seed 000's when it saved none), webhook
// URLs in clear: callers show them Masked.
func (s *Service) OrgSettings(ctx context.Context, orgID string) (Settings, error) {
	row, err := s.db.GetNotificationSettings(s.db.Conn(ctx), orgID)
	if err != nil {
		return Settings{}, err
	}
	return SettingsFromRow(row), nil
}

// SaveOrgSettings validates raw (ParseOrgSettings; a webhook URL sent back masked keeps the
// stored one) and stores it as the organization's defaults, with the audit event
// notifications.updated. raw replaces the stored settings: a key it leaves out takes its
// default. raw must be a JSON object: anything else (empty, null, an array…) changes
// nothing. Invalid settings are apperr.Invalid with field messages keyed by the setting
// ("slackWebhookUrl"), or "settings" for raw itself.
func (s *Service) SaveOrgSettings(ctx context.Context, orgID string, actor audit.Actor, raw json.RawMessage) (Settings, error) {
	var doc map[string]json.RawMessage
	if json.Unmarshal(raw, &doc) != nil || doc == nil {
		return Settings{}, apperr.Invalid("The notification settings have errors.", map[string]string{"settings": "must be an object"})
	}
	old, err := s.OrgSettings(ctx, orgID)
	if err != nil {
		return Settings{}, err
	}
	// A masked URL is the stored one, sent back unchanged.
	for k, cur := range map[string]string{"slackWebhookUrl": old.SlackWebhookURL, "teamsWebhookUrl": old.TeamsWebhookURL} {
		var v string
		if json.Unmarshal(doc[k], &v) == nil && v != "" && v == models.MaskWebhookURL(cur) {
			doc[k], _ = json.Marshal(cur)
		}
	}
	raw, _ = json.Marshal(doc)
	st, fields := ParseOrgSettings(raw, s.cfg.Allow...)
	if fields != nil {
		return Settings{}, apperr.Invalid("The notification settings have errors.", fields)
	}
	row := &models.NotificationSettings{OrganizationID: orgID, Enabled: st.Enabled, Recipients: st.Recipients,
		SlackWebhookURL: st.SlackWebhookURL, TeamsWebhookURL: st.TeamsWebhookURL, NotifyOnFirstFailure: st.NotifyOnFirstFailure,
		NotifyOnRetryExhausted: st.NotifyOnRetryExhausted, NotifyOnDLQ: st.NotifyOnDLQ, NotifyOnBreakerOpen: st.NotifyOnBreakerOpen,
		DigestThreshold: st.DigestThreshold, NotifyPer: st.NotifyPer, UpdatedAt: s.now()}
	if row.Recipients == nil {
		row.Recipients = models.TextList{}
	}
	row.Channels = models.TextList{}
	for _, c := range st.Channels {
		row.Channels = append(row.Channels, string(c))
	}
	if actor.Type == audit.ActorUser {
		row.UpdatedBy = &actor.ID
	}
	err = s.db.Tx(ctx, func(tx *gorm.DB) error {
		if err := s.db.SaveNotificationSettings(tx, row); err != nil {
			return err
		}
		masked, _ := json.Marshal(st.Masked())
		var details map[string]any
		_ = json.Unmarshal(masked, &details)
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "notifications.updated",
			EntityType: "notification_settings", EntityID: orgID, Details: details, At: s.now()})
	})
	return st, err
}

// Delivery is a delivery as the log shows it.
type Delivery struct {
	ID          string  `json:"id"`
	Channel     string  `json:"channel"`
	Recipient   string  `json:"recipient"`
	Event       string  `json:"event"`
	Status      string  `json:"status"`
	Attempts    int     `json:"attempts"`
	LastError   *string `json:"lastError"`
	ExecutionID string  `json:"executionId,omitempty"`
	CreatedAt   string  `json:"createdAt"`
	SentAt      *string `json:"sentAt,omitempty"`
	NextAttempt *string `json:"nextAttemptAt,omitempty"`
}

// Deliveries lists the organization's deliveries, newest first (at most limit), of one
// execution when executionID is set (ENOTFOUND when the organization has no such execution).
func (s *Service) Deliveries(ctx context.Context, orgID, executionID string, limit int) ([]Delivery, error) {
	q := s.db.Conn(ctx).Where("organization_id = ?", orgID)
	if executionID != "" {
		var n int64
		if err := s.db.Conn(ctx).Model(&models.Execution{}).Where("organization_id = ? AND id = ?", orgID, executionID).Count(&n).Error; err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, apperr.NotFound("execution")
		}
		q = q.Where("execution_id = ?", executionID)
	}
	var rows []models.NotificationDelivery
	if err := q.Order("created_at DESC, id DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]Delivery, 0, len(rows))
	for _, r := range rows {
		d := Delivery{ID: r.ID, Channel: r.Channel, Recipient: r.Recipient, Event: r.EventKind, Status: r.Status,
			Attempts: r.Attempts, LastError: r.LastError, ExecutionID: r.ExecutionID, CreatedAt: r.CreatedAt.UTC().Format("2006-01-02T15:04:05Z")}
		if r.SentAt != nil {
			v := r.SentAt.UTC().Format("2006-01-02T15:04:05Z")
			d.SentAt = &v
		}
		if r.Status == models.DeliveryPending {
			v := r.NextAttemptAt.UTC().Format("2006-01-02T15:04:05Z")
			d.NextAttempt = &v
		}
		out = append(out, d)
	}
	return out, nil
}

// Resend queues the organization's delivery id to be sent again at once (a sent or failed
// one; attempts start over). ENOTFOUND for another organization's, ECONFLICT while it is
// pending, being sent or folded into a digest.
func (s *Service) Resend(ctx context.Context, orgID, id string, actor audit.Actor) error {
	now := s.now()
	return s.db.Tx(ctx, func(tx *gorm.DB) error {
		var d models.NotificationDelivery
		if err := tx.Where("organization_id = ? AND id = ?", orgID, id).First(&d).Error; err != nil {
			if models.IsNotFound(err) {
				return apperr.NotFound("delivery")
			}
			return err
		}
		if d.Status != models.DeliverySent && d.Status != models.DeliveryFailed {
			return apperr.Errorf(apperr.ECONFLICT, "The delivery is %s; only sent or failed deliveries can be sent again.", d.Status)
		}
		won, err := ResendDelivery(tx, &d, now)
		if err != nil {
			return err
		}
		if !won {
			return apperr.Errorf(apperr.ECONFLICT, "The delivery changed meanwhile; reload.")
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "notification.resent",
			EntityType: "notification_delivery", EntityID: id, Details: map[string]any{"channel": d.Channel, "recipient": d.Recipient}, At: now})
	})
}

// ErrTestFailed wraps the error of a test message that was not delivered.
var ErrTestFailed = errors.New("the test notification was not delivered")

// Test sends a test message on a channel now, with the organization's saved settings: email
// to the user's address, app to the user, slack and teams to the saved webhook. It records
// the delivery (event "test") in the log. It returns nil when it was delivered, an error
// wrapping ErrTestFailed with the exact cause when it was not, and apperr.Invalid for an
// unknown channel or one with no webhook saved.
func (s *Service) Test(ctx context.Context, orgID, userID string, ch Channel) error {
	if !slices.Contains(Channels, ch) {
		return apperr.Invalid("Unknown channel.", map[string]string{"channel": "use email, app, slack or teams"})
	}
	st, err := s.OrgSettings(ctx, orgID)
	if err != nil {
		return err
	}
	var u models.User
	if err := s.db.Conn(ctx).Where("id = ?", userID).First(&u).Error; err != nil && ch != Slack && ch != Teams {
		return apperr.Invalid("A test email or in-app notification is sent to a signed-in user.", map[string]string{"channel": "needs a user, not an API token"})
	}
	now := s.now()
	d := models.NotificationDelivery{ID: models.NewID(), OrganizationID: orgID, Channel: string(ch), EventKind: string(Test),
		Status: models.DeliveryPending, NextAttemptAt: now, WindowStart: now.Truncate(60e9), CreatedAt: now, UpdatedAt: now}
	switch ch {
	case Email:
		d.Recipient = u.Email
	case App:
		d.Recipient = u.ID
	case Slack, Teams:
		url := st.SlackWebhookURL
		if ch == Teams {
			url = st.TeamsWebhookURL
		}
		if url == "" {
			return apperr.Invalid("No webhook URL is saved for this channel.", map[string]string{string(ch) + "WebhookUrl": "save a webhook URL first"})
		}
		d.Recipient, d.Target = models.MaskWebhookURL(url), url
	}
	d.DedupKey = orgID + ":test:" + d.ID
	// Created already claimed by this request (sending, with its token and a lease): the
	// dispatcher never takes it, and a request that dies leaves it to be failed, not resent.
	tok, lease := models.NewID(), now.Add(s.cfg.Lease)
	d.Status, d.ClaimToken, d.LeaseUntil, d.Attempts = models.DeliverySending, &tok, &lease, 1
	if err := s.db.SealDeliveryTarget(&d); err != nil {
		return err
	}
	if err := s.db.Conn(ctx).Create(&d).Error; err != nil {
		return err
	}
	if err := s.deliver(ctx, &d, true); err != nil {
		return err
	}
	var done models.NotificationDelivery
	if err := s.db.Conn(ctx).Where("id = ?", d.ID).First(&done).Error; err != nil {
		return err
	}
	if done.Status != models.DeliverySent {
		msg := ""
		if done.LastError != nil {
			msg = *done.LastError
		}
		return fmt.Errorf("%w: %s", ErrTestFailed, msg)
	}
	return nil
}

// InApp is an in-app notification as the bell shows it.
type InApp struct {
	ID          string  `json:"id"`
	Kind        string  `json:"kind"`
	Title       string  `json:"title"`
	Body        string  `json:"body"`
	Link        string  `json:"link"`
	ExecutionID string  `json:"executionId,omitempty"`
	CreatedAt   string  `json:"createdAt"`
	ReadAt      *string `json:"readAt"`
	// GroupID is the failure group of a group's entry (the user's one for it), and
	// Occurrences how many executions the group has had, counted in place.
	GroupID     string `json:"groupId,omitempty"`
	Occurrences int    `json:"occurrences,omitempty"`
	// Event is what the notification tells of (nil for a digest or a test), so a page can
	// show it in its reader's language rather than the text made when it was sent.
	Event *Event `json:"-"`
}

// Inbox returns the user's latest in-app notifications in the organization (newest first,
// at most limit) and how many are unread.
func (s *Service) Inbox(ctx context.Context, orgID, userID string, limit int) ([]InApp, int64, error) {
	rows, unread, err := s.db.Notifications(ctx, orgID, userID, limit)
	if err != nil {
		return nil, 0, err
	}
	events, err := s.eventsOf(ctx, orgID, rows)
	if err != nil {
		return nil, 0, err
	}
	out := make([]InApp, 0, len(rows))
	for _, r := range rows {
		n := InApp{ID: r.ID, Kind: r.Kind, Title: r.Title, Body: r.Body, Link: r.Link, ExecutionID: r.ExecutionID,
			CreatedAt: r.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"), Event: events[r.DeliveryID], GroupID: deref(r.GroupID)}
		if r.GroupID != nil {
			n.Occurrences = r.Occurrences
		}
		if r.ReadAt != nil {
			v := r.ReadAt.UTC().Format("2006-01-02T15:04:05Z")
			n.ReadAt = &v
		}
		out = append(out, n)
	}
	return out, unread, nil
}

// eventsOf returns the events the notifications tell of, by delivery id, in one query.
func (s *Service) eventsOf(ctx context.Context, orgID string, rows []models.Notification) (map[string]*Event, error) {
	ids := make([]string, 0, len(rows))
	for _, r := range rows {
		if r.DeliveryID != "" {
			ids = append(ids, r.DeliveryID)
		}
	}
	out := make(map[string]*Event, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var found []struct {
		DeliveryID string
		Payload    models.JSON
	}
	if err := s.db.Conn(ctx).Table("notification_deliveries d").Select("d.id AS delivery_id, e.payload").
		Joins("JOIN notification_events e ON e.id = d.event_id AND e.organization_id = d.organization_id").
		Where("d.organization_id = ? AND d.id IN ?", orgID, ids).Scan(&found).Error; err != nil {
		return nil, err
	}
	for _, f := range found {
		var e Event
		if json.Unmarshal(f.Payload, &e) == nil {
			out[f.DeliveryID] = &e
		}
	}
	return out, nil
}

// MarkRead marks the user's notification id read; ENOTFOUND when it is not theirs.
func (s *Service) MarkRead(ctx context.Context, orgID, userID, id string) error {
	return s.db.MarkNotificationRead(ctx, orgID, userID, id, s.now())
}

// MarkAllRead marks all the user's notifications read and returns how many it marked.
func (s *Service) MarkAllRead(ctx context.Context, orgID, userID string) (int64, error) {
	return s.db.MarkAllNotificationsRead(ctx, orgID, userID, s.now())
}
