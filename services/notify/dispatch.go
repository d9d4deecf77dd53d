package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"lifeline/models"
	"lifeline/services/redact"
)

// dispatchConcurrency is how many deliveries one Dispatch sends at once.
const dispatchConcurrency = 4

// maxRetryAfter caps the wait a receiver's Retry-After asks for.
const maxRetryAfter = time.Hour

// Dispatch sends the deliveries that are due (pending and due, or sending with an expired
// lease), oldest first, dispatchConcurrency at a time, and records each outcome; it returns
// how many it claimed. Each delivery is claimed only when a sender is free to send it, so its
// lease starts when its send starts (a batch never holds claims it is not sending: a batch
// slower than a lease is not sent twice), and its send must end before its lease does (see
// deliver). A delivery claimed by another dispatcher meanwhile is skipped. Its error is the
// database's; a delivery's own failure is recorded on it (and retried or not), never
// returned.
func (s *Service) Dispatch(ctx context.Context) (int, error) {
	var ids []string
	if err := s.db.Conn(ctx).Model(&models.NotificationDelivery{}).
		Where("(status = ? AND next_attempt_at <= ?) OR (status = ? AND lease_until < ?)",
			models.DeliveryPending, s.now(), models.DeliverySending, s.now()).
		Order("next_attempt_at").Limit(s.cfg.Batch).Pluck("id", &ids).Error; err != nil {
		return 0, fmt.Errorf("notify: due deliveries: %w", err)
	}
	sem := make(chan struct{}, dispatchConcurrency)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	claimed := 0
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for _, id := range ids {
		sem <- struct{}{} // a sender is free: claim the next one now
		d, err := s.claim(ctx, id, s.now())
		if err != nil {
			<-sem
			fail(err)
			break
		}
		if d == nil {
			<-sem
			continue
		}
		claimed++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := s.deliver(ctx, d, false); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	return claimed, errors.Join(errs...)
}

// leaseMargin is kept between a send's deadline and its lease's end: the outcome is recorded
// while the claim is still this dispatcher's.
const leaseMargin = 5 * time.Second

// claim takes delivery id if it is still due: status sending, a new claim token, a lease,
// one more attempt (compare-and-set). nil: someone else has it, or it is done.
func (s *Service) claim(ctx context.Context, id string, now time.Time) (*models.NotificationDelivery, error) {
	tok, err := ClaimDelivery(s.db.Conn(ctx), id, now, s.cfg.Lease)
	if err != nil {
		return nil, fmt.Errorf("notify: claim delivery: %w", err)
	}
	if tok == "" {
		return nil, nil
	}
	var d models.NotificationDelivery
	if err := s.db.Conn(ctx).Where("id = ? AND claim_token = ?", id, tok).First(&d).Error; err != nil {
		if models.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	if err := s.db.OpenDeliveryTarget(&d); err != nil {
		// Its webhook URL cannot be decrypted (a key left the ring): it can never be sent.
		// It fails now rather than being claimed again every lease, and the batch goes on.
		s.cfg.Log.Warn("notification not delivered: its target cannot be decrypted", "delivery", d.ID, "err", err)
		won, err := FinishDelivery(s.db.Conn(ctx), &d, models.DeliveryFailed, now,
			map[string]any{"last_error": "the webhook URL cannot be decrypted with the current keys"})
		s.delivered(won, &d, models.DeliveryFailed)
		return nil, err
	}
	return &d, nil
}

// deliver sends a claimed delivery and records the outcome under its claim token. once: a
// failure is final (test messages).
func (s *Service) deliver(ctx context.Context, d *models.NotificationDelivery, once bool) error {
	m, app, err := s.message(ctx, d)
	// What happened is recorded even if the job's context ends meanwhile: a message sent but
	// not recorded would be sent again when the lease runs out.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err == nil {
		if d.Channel == string(App) {
			return s.recordApp(rctx, d, app)
		}
		// The send ends before the lease does: never sent while another dispatcher may
		// already have taken the delivery over.
		sctx, cancel := context.WithTimeout(ctx, max(s.cfg.Lease-leaseMargin, s.cfg.Lease/2))
		err = s.send(sctx, m)
		cancel()
	}
	now := s.now()
	conn := s.db.Conn(rctx)
	if err == nil {
		won, err := FinishDelivery(conn, d, models.DeliverySent, now, map[string]any{"sent_at": now, "last_error": nil})
		s.delivered(won, d, models.DeliverySent)
		return err
	}
	permanent, after := classify(err)
	msg := err.Error()
	if d.Target != "" { // the webhook URL is a secret: errors show it masked
		msg = webhookSecrets(d.Target).Mask(strings.ReplaceAll(msg, d.Target, models.MaskWebhookURL(d.Target)))
	}
	msg = clip(msg, 2000)
	if permanent || once || d.Attempts >= s.cfg.MaxAttempts {
		s.cfg.Log.Warn("notification not delivered", "delivery", d.ID, "channel", d.Channel, "err", msg)
		won, err := FinishDelivery(conn, d, models.DeliveryFailed, now, map[string]any{"last_error": msg})
		s.delivered(won, d, models.DeliveryFailed)
		return err
	}
	if after <= 0 {
		after = s.cfg.Backoff(d.Attempts)
	}
	after = min(after, maxRetryAfter) // a service's Retry-After of a year is not a schedule
	won, err := FinishDelivery(conn, d, models.DeliveryPending, now, map[string]any{"last_error": msg, "next_attempt_at": now.Add(after)})
	s.delivered(won, d, models.DeliveryPending)
	return err
}

// delivered tells Config.Delivered of an outcome this dispatcher recorded (won its claim).
func (s *Service) delivered(won bool, d *models.NotificationDelivery, outcome string) {
	if won && s.cfg.Delivered != nil {
		s.cfg.Delivered(d.Channel, outcome)
	}
}

func (s *Service) send(ctx context.Context, m Message) error {
	snd := s.cfg.Senders[m.Channel]
	if snd == nil {
		return Permanentf("the %s channel is not configured on this server", m.Channel)
	}
	return snd.Send(ctx, m)
}

// recordApp writes the in-app notification of a claimed delivery and marks it sent, in one
// transaction: one row per delivery whatever happens.
func (s *Service) recordApp(ctx context.Context, d *models.NotificationDelivery, n models.Notification) error {
	now := s.now()
	var won bool
	err := s.db.Tx(ctx, func(tx *gorm.DB) (err error) {
		won, err = FinishDelivery(tx, d, models.DeliverySent, now, map[string]any{"sent_at": now, "last_error": nil})
		if err != nil || !won {
			return err // lost the claim: the new holder writes it
		}
		if n.GroupID != nil {
			// A group's entry is the user's one for the group: updated in place (unread
			// again, on top), made only the first time; of two deliveries of one group
			// recorded at once, the second updates what the first made (the partial unique
			// index idx_notifications_group is the conflict's target).
			return tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "user_id"}, {Name: "group_id"}},
				TargetWhere: clause.Where{Exprs: []clause.Expression{clause.Expr{SQL: "group_id IS NOT NULL"}}},
				DoUpdates: clause.Assignments(map[string]any{"delivery_id": n.DeliveryID, "kind": n.Kind, "title": n.Title, "body": n.Body,
					"link": n.Link, "execution_id": n.ExecutionID,
					"occurrences": gorm.Expr("CASE WHEN notifications.occurrences > ? THEN notifications.occurrences ELSE ? END", n.Occurrences, n.Occurrences),
					"read_at":     nil, "created_at": now})}).Create(&n).Error
		}
		return tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "delivery_id"}},
			DoUpdates: clause.Assignments(map[string]any{"read_at": nil, "created_at": now})}).Create(&n).Error
	})
	s.delivered(won && err == nil, d, models.DeliverySent)
	return err
}

// message renders a delivery for its recipient; for the app channel it returns the row.
func (s *Service) message(ctx context.Context, d *models.NotificationDelivery) (Message, models.Notification, error) {
	rc, userID, err := s.recipientCtx(ctx, d)
	if err != nil {
		return Message{}, models.Notification{}, err
	}
	var m Message
	var group *string
	occurrences := 1
	switch {
	case d.EventKind == string(Digest):
		cov, _, err := s.covered(s.db.Conn(ctx), d)
		if err != nil {
			return m, models.Notification{}, err
		}
		var name string
		s.db.Conn(ctx).Model(&models.Workflow{}).Where("organization_id = ? AND id = ?", d.OrganizationID, d.WorkflowID).Pluck("name", &name)
		m = s.renderDigest(name, d, cov, rc)
	case groupKind(d.EventKind) && d.EventID != nil:
		cov, ev, err := s.covered(s.db.Conn(ctx), d)
		if err != nil {
			return m, models.Notification{}, err
		}
		var e Event
		if err := json.Unmarshal(ev.Payload, &e); err != nil {
			return m, models.Notification{}, Permanentf("the event is not readable: %v", err)
		}
		count := 0
		if ev.GroupID != nil {
			s.db.Conn(ctx).Table(models.GroupsNow).Where("organization_id = ? AND id = ?", d.OrganizationID, *ev.GroupID).Pluck("arrivals", &count)
		}
		if count == 0 && e.Group != nil {
			count = e.Group.Count
		}
		m = s.renderGroup(d, ev, e, cov, count, rc)
		group = ev.GroupID
		occurrences = count
	case d.EventKind == string(Escalated) && d.EventID != nil:
		var ev models.NotificationEvent
		if err := s.db.Conn(ctx).Where("organization_id = ? AND id = ?", d.OrganizationID, *d.EventID).First(&ev).Error; err != nil {
			return m, models.Notification{}, fmt.Errorf("notify: the delivery's event: %w", err)
		}
		var esc Escalation
		if err := json.Unmarshal(ev.Payload, &esc); err != nil {
			return m, models.Notification{}, Permanentf("the event is not readable: %v", err)
		}
		m = s.renderEscalation(esc, rc)
	case d.EventKind == string(InterventionAsked) && d.EventID != nil:
		var ev models.NotificationEvent
		if err := s.db.Conn(ctx).Where("organization_id = ? AND id = ?", d.OrganizationID, *d.EventID).First(&ev).Error; err != nil {
			return m, models.Notification{}, fmt.Errorf("notify: the delivery's event: %w", err)
		}
		var n InterventionNotice
		if err := json.Unmarshal(ev.Payload, &n); err != nil {
			return m, models.Notification{}, Permanentf("the request is not readable: %v", err)
		}
		token := ""
		if d.Channel == string(Email) { // an e-mail's target is its recipient's link token
			token = d.Target
		}
		m = s.renderIntervention(n, token, rc)
		m.To, m.DedupKey = d.Recipient, d.DedupKey
		if d.Channel != string(Email) && d.Target != "" {
			m.To = d.Target
		}
		m.Channel = Channel(d.Channel)
		return m, models.Notification{ID: models.NewID(), OrganizationID: d.OrganizationID, UserID: userID, DeliveryID: d.ID,
			Kind: d.EventKind, Title: m.Title, Body: m.Text, Link: s.interventionLink(n.InterventionID, ""), ExecutionID: n.ExecutionID,
			CreatedAt: s.now(), Occurrences: 1}, nil
	case d.EventKind == string(Deadline) && d.EventID != nil:
		var ev models.NotificationEvent
		if err := s.db.Conn(ctx).Where("organization_id = ? AND id = ?", d.OrganizationID, *d.EventID).First(&ev).Error; err != nil {
			return m, models.Notification{}, fmt.Errorf("notify: the delivery's event: %w", err)
		}
		var r DeadlineReminder
		if err := json.Unmarshal(ev.Payload, &r); err != nil {
			return m, models.Notification{}, Permanentf("the reminder is not readable: %v", err)
		}
		m = s.renderDeadline(r, rc)
	case d.EventKind == string(Test) || d.EventID == nil:
		m = s.render(Event{Kind: Test, At: d.CreatedAt}, rc)
	default:
		var ev models.NotificationEvent
		if err := s.db.Conn(ctx).Where("organization_id = ? AND id = ?", d.OrganizationID, *d.EventID).First(&ev).Error; err != nil {
			return m, models.Notification{}, fmt.Errorf("notify: the delivery's event: %w", err)
		}
		var e Event
		if err := json.Unmarshal(ev.Payload, &e); err != nil {
			return m, models.Notification{}, Permanentf("the event is not readable: %v", err)
		}
		m = s.render(e, rc)
	}
	m.Channel = Channel(d.Channel)
	m.To = d.Recipient
	if d.Target != "" {
		m.To = d.Target
	}
	m.DedupKey = d.DedupKey
	n := models.Notification{ID: models.NewID(), OrganizationID: d.OrganizationID, UserID: userID, DeliveryID: d.ID,
		Kind: d.EventKind, Title: m.Title, Body: m.Text, Link: m.Link, ExecutionID: d.ExecutionID, CreatedAt: s.now(),
		GroupID: group, Occurrences: occurrences}
	return m, n, nil
}

// recipientCtx returns the language and time zone of a delivery's recipient: a member's own,
// else the organization's, else DefaultLanguage and UTC; and the user's id (app).
func (s *Service) recipientCtx(ctx context.Context, d *models.NotificationDelivery) (recipientCtx, string, error) {
	var org models.Organization
	if err := s.db.Conn(ctx).Where("id = ?", d.OrganizationID).First(&org).Error; err != nil {
		return recipientCtx{}, "", fmt.Errorf("notify: organization: %w", err)
	}
	langs := []*string{nil, org.DefaultLanguage}
	zones := []*string{nil, org.TimeZone}
	userID := ""
	if d.Channel == string(App) || d.Channel == string(Email) {
		var u models.User
		q := s.db.Conn(ctx).Model(&models.User{}).Joins("JOIN memberships ON memberships.user_id = users.id AND memberships.organization_id = ?", d.OrganizationID)
		if d.Channel == string(App) {
			q = q.Where("users.id = ?", d.Recipient)
		} else {
			q = q.Where("LOWER(users.email) = ?", strings.ToLower(d.Recipient))
		}
		err := q.First(&u).Error
		switch {
		case err == nil:
			langs[0], zones[0], userID = u.Language, u.TimeZone, u.ID
		case !models.IsNotFound(err):
			return recipientCtx{}, "", err
		case d.Channel == string(App):
			return recipientCtx{}, "", Permanentf("the user is no longer a member of the organization")
		}
	}
	rc := recipientCtx{Lang: DefaultLanguage, Zone: time.UTC}
	rc.times, _ = s.cfg.Texts.(TimeTexts)
	for _, l := range langs {
		if l != nil && *l != "" {
			rc.Lang = s.lang(*l)
			break
		}
	}
	for _, z := range zones {
		if z != nil && *z != "" {
			if loc, err := time.LoadLocation(*z); err == nil {
				rc.Zone = loc
				break
			}
		}
	}
	return rc, userID, nil
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// webhookSecrets returns the masker of a webhook URL's secret parts, wherever an error
// text shows them (a service that echoes the request, JSON-escaped or not): the URL, what
// follows its host, its path, its query, each query value, and each path segment that
// looks like a token (a digit in it, or 16 characters or more).
func webhookSecrets(target string) *redact.Masker {
	parts := []string{target}
	u, err := url.Parse(target)
	if err != nil {
		return redact.NewMasker(parts...)
	}
	parts = append(parts, u.RequestURI(), u.EscapedPath(), u.RawQuery)
	for _, vs := range u.Query() {
		parts = append(parts, vs...)
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if len(seg) >= 16 || strings.ContainsAny(seg, "0123456789") {
			parts = append(parts, seg)
		}
	}
	return redact.NewMasker(parts...)
}
