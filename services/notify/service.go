package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"lifeline/models"
)

// Message is one rendered notification for one recipient on one channel.
type Message struct {
	Channel Channel
	// To is the email address (email), or the webhook URL (slack, teams).
	To string
	// Lang is the recipient's language ("pl", "en").
	Lang string
	// Title is the subject line; Text the plain-text body; HTML the email's HTML body.
	Title, Text, HTML string
	// Facts are label/value pairs (workflow, step, error…), in order, for cards.
	Facts []Fact
	// Link is the absolute URL of the execution ("" when there is none); LinkText its label.
	Link, LinkText string
	// DedupKey identifies the delivery: the same key is sent again only after a crash
	// (email: the Message-ID is derived from it).
	DedupKey string
}

// Fact is a label and its value.
type Fact struct{ Label, Value string }

// Sender sends messages of one channel (a provider: email, slack, teams). Send's error is
// transient unless it wraps a *DeliveryError that says otherwise (see Permanent).
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// DeliveryError classifies a failed send.
type DeliveryError struct {
	// Permanent: retrying cannot help (a webhook's 400, 403, 404; a refused address; a bad
	// email address).
	Permanent bool
	// RetryAfter, when positive, is when to try again (a 429's Retry-After).
	RetryAfter time.Duration
	Err        error
}

func (e *DeliveryError) Error() string { return e.Err.Error() }
func (e *DeliveryError) Unwrap() error { return e.Err }

// Permanentf returns a permanent delivery error.
func Permanentf(format string, args ...any) error {
	return &DeliveryError{Permanent: true, Err: fmt.Errorf(format, args...)}
}

// Transient wraps err as transient, to be retried after retryAfter (0: the backoff).
func Transient(err error, retryAfter time.Duration) error {
	return &DeliveryError{RetryAfter: retryAfter, Err: err}
}

// HTTPStatus classifies a webhook's HTTP status: 400, 401, 403, 404, 405, 410, 413 and 422
// are permanent, 429 and everything else transient (with retryAfter).
func HTTPStatus(code int, retryAfter time.Duration, err error) error {
	switch code {
	case 400, 401, 403, 404, 405, 410, 413, 422:
		return &DeliveryError{Permanent: true, Err: err}
	}
	return &DeliveryError{RetryAfter: retryAfter, Err: err}
}

// classify returns whether err is permanent and its retry-after.
func classify(err error) (bool, time.Duration) {
	var de *DeliveryError
	if errors.As(err, &de) {
		return de.Permanent, de.RetryAfter
	}
	return false, 0
}

// Config configures a Service.
type Config struct {
	// BaseURL is LIFELINE_BASE_URL, for the absolute links to executions.
	BaseURL string
	// ExecutionPath builds the path of an execution's page (default "/executions/{id}").
	ExecutionPath func(id string) string
	// GroupPath builds the path of a failure group's page (default "/dlq/groups/{id}").
	GroupPath func(id string) string
	// ProblemsPath is the path of the Problems page, the failure groups to handle (default
	// "/dlq"): an escalation of several groups links to it.
	ProblemsPath func() string
	// ItemPath builds the path of a dead letter's page (default "/dlq/{id}").
	ItemPath func(id string) string
	// FailuresPath builds the path of the list of exactly the failures a digest or a
	// group's follow-up (delivery id) stands for (default "/notifications/{id}/failures").
	FailuresPath func(deliveryID string) string
	// InterventionPath builds the path of a request's page, where a person answers an ask
	// step (default "/interventions/{id}").
	InterventionPath func(id string) string
	// Allow is LIFELINE_OUTBOUND_ALLOW (webhook URLs inside it are accepted at save).
	Allow []netip.Prefix
	// Senders are the providers by channel; a channel without one fails its deliveries
	// permanently ("not configured"). The app channel needs none.
	Senders map[Channel]Sender
	// Texts are the notification texts by language (cmd/web: views/i18n's Catalog); without
	// them every text is its message id.
	Texts Texts
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MaxAttempts bounds the attempts of a delivery (default 8).
	MaxAttempts int
	// Lease is how long a claimed delivery is its dispatcher's (default 2 minutes); after it
	// another dispatcher may claim it again.
	Lease time.Duration
	// Backoff returns the wait before attempt n+1 after n failed attempts (default 10 s ×
	// 3^(n-1), at most an hour).
	Backoff func(n int) time.Duration
	// Batch is how many deliveries one Dispatch claims at most (default 50).
	Batch int
	// Log records failed sends (default: discard).
	Log *slog.Logger
	// Delivered is told of each delivery's outcome once it is recorded: the channel and
	// DeliverySent, DeliveryFailed (for good) or DeliveryPending (to be tried again), for
	// metrics (nil: nobody is).
	Delivered func(channel, outcome string)
}

// Service records notification events and sends their deliveries.
type Service struct {
	db  *models.DB
	cfg Config
}

// New returns a Service on db.
func New(db *models.DB, cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Texts == nil {
		cfg.Texts = idTexts{}
	}
	if cfg.ExecutionPath == nil {
		cfg.ExecutionPath = func(id string) string { return "/executions/" + id }
	}
	if cfg.GroupPath == nil {
		cfg.GroupPath = func(id string) string { return "/dlq/groups/" + id }
	}
	if cfg.ProblemsPath == nil {
		cfg.ProblemsPath = func() string { return "/dlq" }
	}
	if cfg.ItemPath == nil {
		cfg.ItemPath = func(id string) string { return "/dlq/" + id }
	}
	if cfg.FailuresPath == nil {
		cfg.FailuresPath = func(id string) string { return "/notifications/" + id + "/failures" }
	}
	if cfg.InterventionPath == nil {
		cfg.InterventionPath = func(id string) string { return "/interventions/" + id }
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 8
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 2 * time.Minute
	}
	if cfg.Backoff == nil {
		cfg.Backoff = func(n int) time.Duration {
			d := 10 * time.Second
			for i := 1; i < n && d < time.Hour; i++ {
				d *= 3
			}
			return min(d, time.Hour)
		}
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 50
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Senders == nil {
		cfg.Senders = map[Channel]Sender{}
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	return &Service{db: db, cfg: cfg}
}

// ParseSettings is ParseSettings with the service's allow list.
func (s *Service) ParseSettings(raw json.RawMessage) (Settings, map[string]string) {
	return ParseSettings(raw, s.cfg.Allow...)
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// wants reports whether settings st notify an event of kind k.
func wants(st Settings, ev Event) bool {
	if ev.Kind == Compensation {
		return true
	}
	if !st.Enabled {
		return false
	}
	switch ev.Kind {
	case FirstFailure:
		return st.NotifyOnFirstFailure
	case RetryExhausted:
		return st.NotifyOnRetryExhausted
	case DLQ:
		return st.NotifyOnDLQ || (ev.RetriesExhausted && st.NotifyOnRetryExhausted)
	case BreakerOpened:
		return st.NotifyOnBreakerOpen
	}
	return false
}

// Effective returns the settings Emit applies to ev: the workflow's settings over the
// organization's defaults (q reads them).
func (s *Service) Effective(q *gorm.DB, orgID string, raw json.RawMessage) (Settings, error) {
	row, err := s.db.GetNotificationSettings(q, orgID)
	if err != nil {
		return Settings{}, err
	}
	org := SettingsFromRow(row)
	w, set, _ := parseSettings(raw, FieldPrefix, false, s.cfg.Allow)
	return merge(org, w, set), nil
}

// EffectiveSettings is Effective read outside a transaction: the settings in effect for a
// workflow whose own settings are raw (nil: the organization's defaults).
func (s *Service) EffectiveSettings(ctx context.Context, orgID string, raw json.RawMessage) (Settings, error) {
	return s.Effective(s.db.Conn(ctx), orgID, raw)
}

// keyPart is a recipient as a part of a dedup key (at most 400 characters): itself, or a
// hash of it when it is long (an address may have 320 characters, a webhook URL more).
func keyPart(recipient string) string {
	if len(recipient) <= 64 {
		return recipient
	}
	sum := sha256.Sum256([]byte(recipient))
	return "h:" + hex.EncodeToString(sum[:16])
}

// digestSlack is how long after its minute a digest waits: an engine transaction that
// recorded a failure late in the minute may commit a little after it. It is short (the
// digest goes out within 5 s of the end of its minute, the dispatcher running every
// second): a failure recorded after its digest was taken is folded into a late digest
// instead (see foldInto), never left behind.
const digestSlack = 2 * time.Second

// Emit records ev and its deliveries in tx, the caller's transaction (the one that records
// the failure), following the settings (the workflow's settings.errorNotifications over the
// organization's defaults):
//
//   - first_failure only with notifyOnFirstFailure; retry_exhausted with
//     notifyOnRetryExhausted; dlq with notifyOnDLQ, or with notifyOnRetryExhausted when
//     ev.RetriesExhausted (one message either way); breaker_opened with notifyOnBreakerOpen;
//     compensation always (even when disabled), to the configured channels.
//   - One delivery per channel × recipient: email to the addresses and the members with the
//     roles; app to the members with the roles or the addresses; slack and teams to their
//     webhook (skipped without one).
//   - Beyond the organization's digest threshold a minute (per workflow, channel and
//     recipient), deliveries are recorded "digested" and one digest delivery is due at the
//     end of the minute.
//   - A second Emit with the same dedup key (ev.DedupKey, or kind, execution, step, breaker
//     and At) records nothing.
//
// It does no network I/O and costs a few statements. Its errors are the database's.
func (s *Service) Emit(tx *gorm.DB, ev Event) error {
	if ev.At.IsZero() {
		ev.At = s.now()
	}
	ev.At = ev.At.UTC()
	if decisionKind(ev.Kind) && ev.OrganizationID != "" {
		return s.emitDecision(tx, ev)
	}
	if !slices.Contains(Kinds, ev.Kind) || ev.OrganizationID == "" {
		return nil
	}
	row, err := s.db.GetNotificationSettings(tx, ev.OrganizationID)
	if err != nil {
		return fmt.Errorf("notify: settings: %w", err)
	}
	org := SettingsFromRow(row)
	w, set, _ := parseSettings(ev.Settings, FieldPrefix, false, s.cfg.Allow)
	st := merge(org, w, set)
	if !wants(st, ev) || len(st.Channels) == 0 {
		return nil
	}
	if ev.Kind == DLQ && ev.Group != nil && ev.Group.Muted && st.NotifyPer != PerFailure {
		return nil // a muted group notifies nothing until its mute ends
	}
	targets, err := s.recipients(tx, ev.OrganizationID, st)
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		return nil
	}
	if ev.Kind == DLQ && ev.Group != nil && st.NotifyPer != PerFailure {
		return s.emitGroup(tx, ev, targets)
	}
	dedup := ev.DedupKey
	if dedup == "" {
		dedup = fmt.Sprintf("%s:%s:%s:%s:%d", ev.Kind, ev.ExecutionID, ev.StepID, ev.BreakerID, ev.At.UnixNano())
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
		return fmt.Errorf("notify: record event: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil // already recorded
	}
	window := ev.At.Truncate(time.Minute)
	counts, err := s.windowCounts(tx, ev.WorkflowID, window)
	if err != nil {
		return err
	}
	now := s.now()
	var ds []models.NotificationDelivery
	for _, t := range targets {
		d := models.NotificationDelivery{ID: models.NewID(), OrganizationID: ev.OrganizationID, EventID: &event.ID,
			WorkflowID: ev.WorkflowID, ExecutionID: ev.ExecutionID, Channel: string(t.channel), Recipient: t.recipient,
			Target: t.target, EventKind: string(ev.Kind), Status: models.DeliveryPending, NextAttemptAt: now,
			WindowStart: window, DedupKey: dedup + ":" + string(t.channel) + ":" + keyPart(t.recipient), CreatedAt: now, UpdatedAt: now}
		// Compensations are explicit messages of a rollback: never folded.
		if ev.WorkflowID != "" && ev.Kind != Compensation && counts[string(t.channel)+"\x00"+t.recipient] >= int64(st.DigestThreshold) {
			digest, err := s.foldInto(tx, d, window, now)
			if err != nil {
				return err
			}
			if digest != "" {
				d.Status = models.DeliveryDigested
				d.DigestID = &digest
				d.NextAttemptAt = window.Add(time.Minute + digestSlack)
			}
		}
		if err := s.db.SealDeliveryTarget(&d); err != nil {
			return err
		}
		ds = append(ds, d)
	}
	if err := models.InsertNotificationDeliveries(tx, ds); err != nil {
		return fmt.Errorf("notify: record deliveries: %w", err)
	}
	return nil
}

// windowCounts counts the deliveries of a workflow in the minute window by channel and
// recipient (key channel + "\x00" + recipient), digests excluded.
func (s *Service) windowCounts(tx *gorm.DB, workflowID string, window time.Time) (map[string]int64, error) {
	out := map[string]int64{}
	if workflowID == "" {
		return out, nil
	}
	var rows []struct {
		Channel, Recipient string
		N                  int64
	}
	if err := tx.Model(&models.NotificationDelivery{}).Select("channel, recipient, COUNT(*) AS n").
		Where("workflow_id = ? AND window_start = ? AND event_kind NOT IN ?", workflowID, window, []string{string(Digest), string(GroupOpened), string(GroupFollowUp)}).
		Group("channel, recipient").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("notify: count the minute's deliveries: %w", err)
	}
	for _, r := range rows {
		out[r.Channel+"\x00"+r.Recipient] = r.N
	}
	return out, nil
}

// foldInto returns the digest delivery d (about to be recorded) is folded into: the digest
// of its minute window (channel, recipient, workflow), made now or one already recorded that has not been taken for sending (AttachToDigest holds it
// until tx commits, so the digest names d). When the window's digest was already taken, d
// goes into a late digest of the minute it is recorded in, due at that minute's end; when
// that one was taken too (a dispatcher faster than a commit), d is not folded ("").
func (s *Service) foldInto(tx *gorm.DB, d models.NotificationDelivery, window, now time.Time) (string, error) {
	base := fmt.Sprintf("%s:digest:%s:%s:%s:%d", d.OrganizationID, d.WorkflowID, d.Channel, keyPart(d.Recipient), window.Unix())
	late := now.Truncate(time.Minute)
	for i, key := range []string{base, base + fmt.Sprintf(":late:%d", late.Unix())} {
		var cur models.NotificationDelivery
		if err := tx.Select("id, status").Where("dedup_key = ?", key).Limit(1).Find(&cur).Error; err != nil {
			return "", fmt.Errorf("notify: the minute's digest: %w", err)
		}
		if cur.ID == "" {
			digest := d
			digest.ID = models.NewID()
			digest.EventID = nil
			digest.ExecutionID = ""
			digest.EventKind = string(Digest)
			digest.Status = models.DeliveryPending
			digest.DedupKey = key
			digest.NextAttemptAt = window.Add(time.Minute + digestSlack)
			if i > 0 {
				digest.NextAttemptAt = late.Add(time.Minute + digestSlack)
			}
			if err := s.db.SealDeliveryTarget(&digest); err != nil {
				return "", err
			}
			// A digest made by another transaction meanwhile wins the key: this one is
			// inserted only when it is still free.
			res := tx.Clauses(onConflictDoNothing("dedup_key")).Create(&digest)
			if res.Error != nil {
				return "", fmt.Errorf("notify: record the digest: %w", res.Error)
			}
			if res.RowsAffected == 1 {
				return digest.ID, nil
			}
			if err := tx.Select("id, status").Where("dedup_key = ?", key).Limit(1).Find(&cur).Error; err != nil {
				return "", err
			}
		}
		won, err := AttachToDigest(tx, cur.ID, now)
		if err != nil {
			return "", err
		}
		if won {
			return cur.ID, nil
		}
	}
	return "", nil
}

func jsonOf(ev Event) ([]byte, error) { return json.Marshal(ev) }

type target struct {
	channel   Channel
	recipient string // shown in the log: address, user id, masked URL
	target    string // the webhook URL (sealed)
}

// member is a user of an organization with their role.
type member struct {
	UserID, Email, Role string
}

func (s *Service) members(q *gorm.DB, orgID string) ([]member, error) {
	var ms []member
	err := q.Table("memberships").Select("memberships.user_id AS user_id, users.email AS email, memberships.role AS role").
		Joins("JOIN users ON users.id = memberships.user_id").
		Where("memberships.organization_id = ?", orgID).Order("users.email").Scan(&ms).Error
	if err != nil {
		return nil, fmt.Errorf("notify: members: %w", err)
	}
	return ms, nil
}

// matches reports whether a member is one of the recipients.
func matches(m member, recipients []string) bool {
	for _, r := range recipients {
		if role, ok := strings.CutPrefix(r, "role:"); ok {
			if m.Role == role || (role == models.RoleAdmin && m.Role == models.RoleOwner) {
				return true
			}
		} else if strings.EqualFold(r, m.Email) {
			return true
		}
	}
	return false
}

// recipients lists the deliveries' targets of settings st in the organization.
func (s *Service) recipients(q *gorm.DB, orgID string, st Settings) ([]target, error) {
	rs := st.Recipients
	if len(rs) == 0 {
		rs = DefaultRecipients
	}
	var ms []member
	if slices.Contains(st.Channels, Email) || slices.Contains(st.Channels, App) {
		var err error
		if ms, err = s.members(q, orgID); err != nil {
			return nil, err
		}
	}
	var out []target
	for _, c := range st.Channels {
		switch c {
		case Email:
			seen := map[string]bool{}
			add := func(a string) {
				if k := strings.ToLower(a); !seen[k] {
					seen[k] = true
					out = append(out, target{channel: Email, recipient: a})
				}
			}
			for _, r := range rs {
				if !strings.HasPrefix(r, "role:") {
					add(r)
				}
			}
			for _, m := range ms {
				if matches(m, rs) {
					add(m.Email)
				}
			}
		case App:
			for _, m := range ms {
				if matches(m, rs) {
					out = append(out, target{channel: App, recipient: m.UserID})
				}
			}
		case Slack:
			if st.SlackWebhookURL != "" {
				out = append(out, target{channel: Slack, recipient: models.MaskWebhookURL(st.SlackWebhookURL), target: st.SlackWebhookURL})
			}
		case Teams:
			if st.TeamsWebhookURL != "" {
				out = append(out, target{channel: Teams, recipient: models.MaskWebhookURL(st.TeamsWebhookURL), target: st.TeamsWebhookURL})
			}
		}
	}
	return out, nil
}

func onConflictDoNothing(col string) clause.OnConflict {
	return clause.OnConflict{Columns: []clause.Column{{Name: col}}, DoNothing: true}
}
