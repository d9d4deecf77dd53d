package notify

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"lifeline/models"
	"lifeline/models/apperr"
)

// DeliveryFilter selects deliveries for the log page. Empty fields select everything.
type DeliveryFilter struct {
	ExecutionID string
	Channel     string
	Status      string
	// After is the cursor of the last delivery of the previous page (DeliveryPage.Next).
	After string
	Limit int
}

// DeliveryPage is one page of the delivery log, newest first.
type DeliveryPage struct {
	Items []Delivery
	// Users names the in-app recipients (user ids) by their email address.
	Users map[string]string
	// Subjects are the subjects of the deliveries' executions (the client), by execution id.
	Subjects map[string]string
	// Next is the cursor of the following page, "" on the last one.
	Next string
}

// DeliveryLog lists the organization's deliveries matching f, newest first, a page of at
// most f.Limit (default 50) after the cursor f.After (keyset on created_at, id). ENOTFOUND
// when f.ExecutionID is not the organization's; EINVALID on "after" for a cursor it did not
// make.
func (s *Service) DeliveryLog(ctx context.Context, orgID string, f DeliveryFilter) (DeliveryPage, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	conn := s.db.Conn(ctx)
	q := conn.Where("organization_id = ?", orgID)
	if f.ExecutionID != "" {
		var n int64
		if err := conn.Model(&models.Execution{}).Where("organization_id = ? AND id = ?", orgID, f.ExecutionID).Count(&n).Error; err != nil {
			return DeliveryPage{}, err
		}
		if n == 0 {
			return DeliveryPage{}, apperr.NotFound("execution")
		}
		q = q.Where("execution_id = ?", f.ExecutionID)
	}
	if f.Channel != "" {
		q = q.Where("channel = ?", f.Channel)
	}
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.After != "" {
		at, id, ok := parseCursor(f.After)
		if !ok {
			return DeliveryPage{}, apperr.Invalid("The page cursor is not valid.", map[string]string{"after": "is not a page of this list"})
		}
		q = q.Where("(created_at < ? OR (created_at = ? AND id < ?))", at, at, id)
	}
	var rows []models.NotificationDelivery
	if err := q.Order("created_at DESC, id DESC").Limit(f.Limit + 1).Find(&rows).Error; err != nil {
		return DeliveryPage{}, err
	}
	page := DeliveryPage{Users: map[string]string{}}
	if len(rows) > f.Limit {
		rows = rows[:f.Limit]
		last := rows[len(rows)-1]
		page.Next = cursor(last.CreatedAt, last.ID)
	}
	var userIDs []string
	for _, r := range rows {
		if r.Channel == string(App) && r.Recipient != "" {
			userIDs = append(userIDs, r.Recipient)
		}
	}
	if len(userIDs) > 0 {
		var users []models.User
		if err := conn.Select("id", "email").Where("id IN ?", userIDs).Find(&users).Error; err != nil {
			return DeliveryPage{}, err
		}
		for _, u := range users {
			page.Users[u.ID] = u.Email
		}
	}
	page.Subjects = map[string]string{}
	var execIDs []string
	for _, r := range rows {
		if r.ExecutionID != "" && !slices.Contains(execIDs, r.ExecutionID) {
			execIDs = append(execIDs, r.ExecutionID)
		}
	}
	if len(execIDs) > 0 {
		var exs []models.Execution
		if err := conn.Select("id", "subject").Where("organization_id = ? AND id IN ?", orgID, execIDs).Find(&exs).Error; err != nil {
			return DeliveryPage{}, err
		}
		for _, ex := range exs {
			if ex.Subject != nil {
				page.Subjects[ex.ID] = *ex.Subject
			}
		}
	}
	page.Items = make([]Delivery, 0, len(rows))
	for _, r := range rows {
		page.Items = append(page.Items, deliveryOf(r))
	}
	return page, nil
}

// deliveryOf is a stored delivery as the log shows it.
func deliveryOf(r models.NotificationDelivery) Delivery {
	d := Delivery{ID: r.ID, Channel: r.Channel, Recipient: r.Recipient, Event: r.EventKind, Status: r.Status,
		Attempts: r.Attempts, LastError: r.LastError, ExecutionID: r.ExecutionID, CreatedAt: r.CreatedAt.UTC().Format(time.RFC3339)}
	if r.SentAt != nil {
		v := r.SentAt.UTC().Format(time.RFC3339)
		d.SentAt = &v
	}
	if r.Status == models.DeliveryPending {
		v := r.NextAttemptAt.UTC().Format(time.RFC3339)
		d.NextAttempt = &v
	}
	return d
}

// cursor encodes a delivery's position in the log.
func cursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(at.UTC().Format(time.RFC3339Nano) + "|" + id))
}

// parseCursor reads a cursor made by cursor: false for anything else, so that no database
// sees a time it cannot hold or an id that is not a canonical UUID.
func parseCursor(c string) (time.Time, string, bool) {
	if len(c) > 200 {
		return time.Time{}, "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", false
	}
	ts, id, ok := strings.Cut(string(b), "|")
	at, err := time.Parse(time.RFC3339Nano, ts)
	if !ok || err != nil || at.UTC().Year() < 1 || at.UTC().Year() > 9999 {
		return time.Time{}, "", false
	}
	if u, err := uuid.Parse(id); err != nil || u.String() != id {
		return time.Time{}, "", false
	}
	return at.UTC(), id, true
}
