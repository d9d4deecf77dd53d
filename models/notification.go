package models

import (
	"bytes"
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"lifeline/models/apperr"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Delivery statuses (notification_deliveries.status).
const (
	DeliveryPending  = "pending"
	DeliverySending  = "sending"
	DeliverySent     = "sent"
	DeliveryFailed   = "failed"
	DeliveryDigested = "digested"
)

// TextList is a list of strings kept as a JSON array in a TEXT column (both dialects).
type TextList []string

// Value writes the JSON array.
func (l TextList) Value() (driver.Value, error) {
	if l == nil {
		l = TextList{}
	}
	b, err := json.Marshal([]string(l))
	return string(b), err
}

// Scan reads the JSON array.
func (l *TextList) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*l = nil
		return nil
	case []byte:
		return json.Unmarshal(v, (*[]string)(l))
	case string:
		return json.Unmarshal([]byte(v), (*[]string)(l))
	}
	return fmt.Errorf("models.TextList: cannot scan %T", src)
}

// GormDataType tells GORM's schema parser what the field is.
func (TextList) GormDataType() string { return "text" }

// NotificationSettings are an organization's notification defaults (one row per
// organization; none: the built-in defaults). The webhook URLs are sealed at rest; the
// queries here fill SlackWebhookURL and TeamsWebhookURL in clear.
type NotificationSettings struct {
	OrganizationID         string `gorm:"primaryKey"`
	Enabled                bool
	Channels               TextList
	Recipients             TextList
	SealedSlack            *string `gorm:"column:slack_webhook_url"`
	SealedTeams            *string `gorm:"column:teams_webhook_url"`
	SlackWebhookURL        string  `gorm:"-"`
	TeamsWebhookURL        string  `gorm:"-"`
	NotifyOnFirstFailure   bool
	NotifyOnRetryExhausted bool
	NotifyOnDLQ            bool `gorm:"column:notify_on_dlq"`
	NotifyOnBreakerOpen    bool
	// DigestThreshold is how many messages a minute one recipient gets for one workflow on
	// one channel before the rest of the minute is folded into one digest.
	DigestThreshold int
	// NotifyPer is NotifyPerGroup or NotifyPerFailure: whether a dead letter notifies once
	// for its failure group (and follow-ups) or once for itself.
	NotifyPer string
	UpdatedBy *string
	UpdatedAt time.Time
}

func (NotificationSettings) TableName() string { return "notification_settings" }

// NotificationSettingsAAD identifies a sealed webhook URL column of an organization's
// notification settings.
func NotificationSettingsAAD(orgID, column string) string {
	return "notification_settings:" + orgID + ":" + column
}

// NotificationDeliveryAAD identifies the sealed target (webhook URL) of a delivery.
func NotificationDeliveryAAD(id string) string { return "notification_deliveries:" + id + ":target" }

// ErrNotSealed is returned when a Sealer is set but left a secret in clear: the configured
// secret keys (LIFELINE_REDACT_KEYS) do not match "password".
var ErrNotSealed = errors.New("the secret was not encrypted: LIFELINE_REDACT_KEYS must match the key \"password\"")

// SealText returns the stored form of a secret text for the row aad names: the JSON
// document {"password": s} with the value sealed (in clear without a Sealer). "" is nil.
func (db *DB) SealText(s, aad string) (*string, error) {
	if s == "" {
		return nil, nil
	}
	raw, err := json.Marshal(map[string]string{dsnKey: s})
	if err != nil {
		return nil, err
	}
	sealed, err := db.Seal(raw, aad)
	if err != nil {
		return nil, err
	}
	if db.Sealer != nil && !bytes.Contains(sealed, []byte(`"enc:`)) {
		return nil, ErrNotSealed
	}
	out := string(sealed)
	return &out, nil
}

// OpenText reverses SealText (nil is "").
func (db *DB) OpenText(stored *string, aad string) (string, error) {
	if stored == nil || *stored == "" {
		return "", nil
	}
	plain, err := db.Open(JSON(*stored), aad)
	if err != nil {
		return "", err
	}
	var doc map[string]string
	if err := json.Unmarshal(plain, &doc); err != nil {
		return "", fmt.Errorf("%s: the stored secret is not readable: %w", aad, err)
	}
	return doc[dsnKey], nil
}

// GetNotificationSettings returns the organization's stored defaults with the webhook URLs
// in clear, or nil when it has stored none.
func (db *DB) GetNotificationSettings(q *gorm.DB, orgID string) (*NotificationSettings, error) {
	var s NotificationSettings
	if err := q.Where("organization_id = ?", orgID).First(&s).Error; err != nil {
		if IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	var err error
	if s.SlackWebhookURL, err = db.OpenText(s.SealedSlack, NotificationSettingsAAD(orgID, "slack_webhook_url")); err != nil {
		return nil, err
	}
	if s.TeamsWebhookURL, err = db.OpenText(s.SealedTeams, NotificationSettingsAAD(orgID, "teams_webhook_url")); err != nil {
		return nil, err
	}
	return &s, nil
}

// SaveNotificationSettings inserts or replaces the organization's defaults with tx, the
// webhook URLs sealed.
func (db *DB) SaveNotificationSettings(tx *gorm.DB, s *NotificationSettings) error {
	var err error
	if s.SealedSlack, err = db.SealText(s.SlackWebhookURL, NotificationSettingsAAD(s.OrganizationID, "slack_webhook_url")); err != nil {
		return err
	}
	if s.SealedTeams, err = db.SealText(s.TeamsWebhookURL, NotificationSettingsAAD(s.OrganizationID, "teams_webhook_url")); err != nil {
		return err
	}
	return tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "organization_id"}}, UpdateAll: true}).Create(s).Error
}

// NotificationEvent is something that happened that people are told about.
type NotificationEvent struct {
	ID             string
	OrganizationID string
	Kind           string
	WorkflowID     string
	ExecutionID    string
	// Payload is the event as services/notify encodes it (texts already masked).
	Payload   JSON
	DedupKey  string
	CreatedAt time.Time
	// GroupID is the failure group of a group's notification (opened or follow-up); it
	// stands for the group's dead letters created after CoversFrom (none: from the start) up
	// to CoversUntil, inclusive.
	GroupID     *string
	CoversFrom  *time.Time
	CoversUntil *time.Time
}

// Notification grouping (notification_settings.notify_per).
const (
	NotifyPerGroup   = "group"
	NotifyPerFailure = "failure"
)

func (NotificationEvent) TableName() string { return "notification_events" }

// NotificationDelivery is one message of one event on one channel to one recipient: the
// outbox row a dispatcher claims and sends.
type NotificationDelivery struct {
	ID             string
	OrganizationID string
	EventID        *string
	WorkflowID     string
	ExecutionID    string
	Channel        string
	// Recipient is what the delivery log shows: an email address, a user's id (app), or
	// the masked webhook URL (slack, teams).
	Recipient string
	// SealedTarget is the webhook URL of slack and teams deliveries, sealed; Target is it in
	// clear (filled by the queries here).
	SealedTarget  *string `gorm:"column:target"`
	Target        string  `gorm:"-"`
	EventKind     string
	Status        string
	Attempts      int
	LastError     *string
	NextAttemptAt time.Time
	LeaseUntil    *time.Time
	ClaimToken    *string
	SentAt        *time.Time
	// WindowStart is the minute the delivery counts in for digests.
	WindowStart time.Time
	DedupKey    string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// DigestID names the digest a digested delivery is folded into.
	DigestID *string
}

func (NotificationDelivery) TableName() string { return "notification_deliveries" }

// SealDeliveryTarget seals d.Target into d.SealedTarget (d.ID must be set).
func (db *DB) SealDeliveryTarget(d *NotificationDelivery) error {
	var err error
	d.SealedTarget, err = db.SealText(d.Target, NotificationDeliveryAAD(d.ID))
	return err
}

// OpenDeliveryTarget fills d.Target from d.SealedTarget.
func (db *DB) OpenDeliveryTarget(d *NotificationDelivery) error {
	var err error
	d.Target, err = db.OpenText(d.SealedTarget, NotificationDeliveryAAD(d.ID))
	return err
}

// InsertNotificationDeliveries inserts ds with tx; a delivery whose dedup key exists
// already is skipped. Targets must already be sealed.
func InsertNotificationDeliveries(tx *gorm.DB, ds []NotificationDelivery) error {
	if len(ds) == 0 {
		return nil
	}
	return tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "dedup_key"}}, DoNothing: true}).Create(&ds).Error
}

// Notification is an in-app notification of one user.
type Notification struct {
	ID             string
	OrganizationID string
	UserID         string
	DeliveryID     string
	Kind           string
	Title          string
	Body           string
	Link           string
	ExecutionID    string
	CreatedAt      time.Time
	ReadAt         *time.Time
	// GroupID: the entry of a failure group (one per user and group, updated in place);
	// Occurrences is how many items the group had when it was last updated.
	GroupID     *string
	Occurrences int
}

func (Notification) TableName() string { return "notifications" }

// Notifications returns the user's latest in-app notifications in the organization (newest
// first, at most limit) and how many are unread.
func (db *DB) Notifications(ctx context.Context, orgID, userID string, limit int) ([]Notification, int64, error) {
	var out []Notification
	q := db.Conn(ctx).Where("organization_id = ? AND user_id = ?", orgID, userID)
	if err := q.Order("created_at DESC, id DESC").Limit(limit).Find(&out).Error; err != nil {
		return nil, 0, err
	}
	var unread int64
	if err := db.Conn(ctx).Model(&Notification{}).Where("organization_id = ? AND user_id = ? AND read_at IS NULL", orgID, userID).
		Count(&unread).Error; err != nil {
		return nil, 0, err
	}
	return out, unread, nil
}

// MarkNotificationRead marks the user's notification id read (again is a no-op), or
// apperr.ENOTFOUND when it is not the user's in the organization.
func (db *DB) MarkNotificationRead(ctx context.Context, orgID, userID, id string, at time.Time) error {
	var n Notification
	if err := db.Conn(ctx).Where("organization_id = ? AND user_id = ? AND id = ?", orgID, userID, id).First(&n).Error; err != nil {
		if IsNotFound(err) {
			return apperr.NotFound("notification")
		}
		return err
	}
	if n.ReadAt != nil {
		return nil
	}
	return db.Conn(ctx).Model(&Notification{}).Where("id = ? AND read_at IS NULL", id).Update("read_at", at.UTC()).Error
}

// MarkAllNotificationsRead marks every unread notification of the user read and returns
// how many it marked.
func (db *DB) MarkAllNotificationsRead(ctx context.Context, orgID, userID string, at time.Time) (int64, error) {
	res := db.Conn(ctx).Model(&Notification{}).Where("organization_id = ? AND user_id = ? AND read_at IS NULL", orgID, userID).
		Update("read_at", at.UTC())
	return res.RowsAffected, res.Error
}

// MaskedWebhookMark ends every masked webhook URL.
const MaskedWebhookMark = "/•••"

// MaskWebhookURL shows a webhook URL's scheme and host only.
func MaskWebhookURL(u string) string {
	if u == "" {
		return ""
	}
	rest := u
	scheme := ""
	if i := strings.Index(u, "://"); i >= 0 {
		scheme, rest = u[:i+3], u[i+3:]
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = rest[at+1:]
	}
	return scheme + rest + MaskedWebhookMark
}
