package notify

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
)

// Notifications per failure group (issue 22). With the settings' notifyPer "group" (the
// default), a DLQ event whose dead letter joined a failure group is not notified on its own:
//
//   - the first item of a new or reopened group records a group_opened event, sent at once
//     to every channel and recipient (the group's title, workflow, step, count, and a link to
//     the group);
//   - a further item of an open group updates the count of the group's in-app entries
//     (one entry per user and group) in the engine's transaction, and makes sure one
//     group_followup event is scheduled: it stands for the group's items created after the
//     last notification's span up to its own end (covers_from, covers_until on the event),
//     which is at least FollowUpEvery after the last one's end, so each channel gets at most
//     one follow-up an hour; its deliveries are due at that end (the schedule lives in the
//     deliveries' next_attempt_at, sent by the dispatcher like any other);
//   - an item of a muted group records nothing (its mute ends on the database clock, and the
//     next item after it notifies as usual).
//
// Two engines recording items of one group at once compute the same follow-up (from the same
// last span), and the event's unique dedup key keeps one. A follow-up names every item it
// stands for (by execution) and links to the list of exactly them (Config.FailuresPath).

// FollowUpEvery is the least time between two notifications of one group on one channel.
const FollowUpEvery = time.Hour

// followUpSlack is how long after the end of its span a follow-up is due: an engine
// transaction that recorded an item just before the end may commit a little after it.
const followUpSlack = 2 * time.Second

// groupKind reports whether k is a group's notification.
func groupKind(k string) bool { return k == string(GroupOpened) || k == string(GroupFollowUp) }

// emitGroup records what a dead letter of a failure group notifies (see above), in tx.
func (s *Service) emitGroup(tx *gorm.DB, ev Event, targets []target) error {
	g := ev.Group
	if g.Muted {
		return nil
	}
	// The group's count as the engine read it, or (0: on PostgreSQL a failure that joined an
	// open group does not read it) its arrivals now, read only when it has entries to update.
	count := any(g.Count)
	if g.Count == 0 {
		count = gorm.Expr("(SELECT arrivals FROM "+models.GroupsNow+" WHERE organization_id = ? AND id = ?)", ev.OrganizationID, g.ID)
	}
	if err := tx.Model(&models.Notification{}).Where("organization_id = ? AND group_id = ? AND occurrences < ?", ev.OrganizationID, g.ID, count).
		Update("occurrences", count).Error; err != nil {
		return fmt.Errorf("notify: count the group's entries: %w", err)
	}
	var last models.NotificationEvent
	if err := tx.Select("id, covers_until").Where("organization_id = ? AND group_id = ? AND covers_until IS NOT NULL", ev.OrganizationID, g.ID).
		Order("covers_until DESC").Limit(1).Find(&last).Error; err != nil {
		return fmt.Errorf("notify: the group's last notification: %w", err)
	}
	kind, from, until, due := GroupOpened, (*time.Time)(nil), ev.At, s.now()
	if !g.New && !g.Reopened && last.CoversUntil != nil {
		if !last.CoversUntil.Before(ev.At) {
			return nil // a follow-up already scheduled stands for this item
		}
		kind = GroupFollowUp
		f := last.CoversUntil.UTC()
		from = &f
		until = f.Add(FollowUpEvery)
		if end := ev.At.Truncate(time.Minute).Add(time.Minute); end.After(until) {
			until = end
		}
		due = until.Add(followUpSlack)
	}
	dedup := fmt.Sprintf("%s:group:%s:%s:%d", ev.OrganizationID, g.ID, kind, until.UnixNano())
	ev.Kind = kind
	payload, err := jsonOf(ev)
	if err != nil {
		return err
	}
	gid := g.ID
	event := models.NotificationEvent{ID: models.NewID(), OrganizationID: ev.OrganizationID, Kind: string(kind), WorkflowID: ev.WorkflowID,
		Payload: payload, DedupKey: dedup, CreatedAt: ev.At, GroupID: &gid, CoversFrom: from, CoversUntil: &until}
	if kind == GroupOpened {
		event.ExecutionID = ev.ExecutionID
	}
	res := tx.Clauses(onConflictDoNothing("dedup_key")).Create(&event)
	if res.Error != nil {
		return fmt.Errorf("notify: record the group's event: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil // another transaction scheduled it
	}
	now := s.now()
	ds := make([]models.NotificationDelivery, 0, len(targets))
	for _, t := range targets {
		d := models.NotificationDelivery{ID: models.NewID(), OrganizationID: ev.OrganizationID, EventID: &event.ID,
			WorkflowID: ev.WorkflowID, ExecutionID: event.ExecutionID, Channel: string(t.channel), Recipient: t.recipient,
			Target: t.target, EventKind: string(kind), Status: models.DeliveryPending, NextAttemptAt: due,
			WindowStart: ev.At.Truncate(time.Minute), DedupKey: dedup + ":" + string(t.channel) + ":" + keyPart(t.recipient), CreatedAt: now, UpdatedAt: now}
		if err := s.db.SealDeliveryTarget(&d); err != nil {
			return err
		}
		ds = append(ds, d)
	}
	if err := models.InsertNotificationDeliveries(tx, ds); err != nil {
		return fmt.Errorf("notify: record the group's deliveries: %w", err)
	}
	return nil
}

// groupLink returns the absolute URL of a failure group's page.
func (s *Service) groupLink(id string) string { return s.cfg.BaseURL + s.cfg.GroupPath(id) }

// failuresLink returns the absolute URL of the list of exactly the failures a delivery (a
// digest or a follow-up) stands for.
func (s *Service) failuresLink(deliveryID string) string {
	return s.cfg.BaseURL + s.cfg.FailuresPath(deliveryID)
}

// Covered is a failure a digest or a group's follow-up stands for.
type Covered struct {
	ExecutionID  string
	DeadLetterID string
	Subject      string
	Reason       string
	At           time.Time
}

// covered lists the failures delivery d (a digest or a group's follow-up of the
// organization) stands for, oldest first, and the event of a group's notification (nil for a
// digest). A delivery of another kind stands for none.
func (s *Service) covered(q *gorm.DB, d *models.NotificationDelivery) ([]Covered, *models.NotificationEvent, error) {
	var out []Covered
	switch {
	case d.EventKind == string(Digest):
		var rows []struct {
			ExecutionID string
			CreatedAt   time.Time
		}
		if err := q.Model(&models.NotificationDelivery{}).Select("execution_id, created_at").
			Where("organization_id = ? AND status = ? AND (digest_id = ? OR (digest_id IS NULL AND workflow_id = ? AND channel = ? AND recipient = ? AND window_start = ?))",
				d.OrganizationID, models.DeliveryDigested, d.ID, d.WorkflowID, d.Channel, d.Recipient, d.WindowStart).
			Order("created_at, id").Scan(&rows).Error; err != nil {
			return nil, nil, fmt.Errorf("notify: the digest's deliveries: %w", err)
		}
		ids := make([]string, 0, len(rows))
		for _, r := range rows {
			ids = append(ids, r.ExecutionID)
		}
		details, err := s.failureDetails(q, d.OrganizationID, ids)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range rows {
			c := details[r.ExecutionID]
			c.ExecutionID = r.ExecutionID
			if c.At.IsZero() {
				c.At = r.CreatedAt
			}
			out = append(out, c)
		}
		return out, nil, nil
	case groupKind(d.EventKind) && d.EventID != nil:
		var ev models.NotificationEvent
		if err := q.Where("organization_id = ? AND id = ?", d.OrganizationID, *d.EventID).First(&ev).Error; err != nil {
			return nil, nil, fmt.Errorf("notify: the delivery's event: %w", err)
		}
		if ev.GroupID == nil || ev.CoversUntil == nil {
			return nil, &ev, nil
		}
		dq := q.Model(&models.DeadLetter{}).Select("id AS dead_letter_id, execution_id, subject, reason, created_at AS at").
			Where("organization_id = ? AND group_id = ? AND created_at <= ?", d.OrganizationID, *ev.GroupID, *ev.CoversUntil)
		if ev.CoversFrom != nil {
			dq = dq.Where("created_at > ?", *ev.CoversFrom)
		} else {
			dq = dq.Where("execution_id = ?", ev.ExecutionID)
		}
		var rows []struct {
			DeadLetterID, ExecutionID string
			Subject                   *string
			Reason                    string
			At                        time.Time
		}
		if err := dq.Order("created_at, id").Scan(&rows).Error; err != nil {
			return nil, nil, fmt.Errorf("notify: the follow-up's failures: %w", err)
		}
		for _, r := range rows {
			out = append(out, Covered{ExecutionID: r.ExecutionID, DeadLetterID: r.DeadLetterID, Subject: deref(r.Subject), Reason: r.Reason, At: r.At})
		}
		return out, &ev, nil
	}
	return nil, nil, nil
}

// failureDetails returns, by execution, the dead letter of each execution of ids (those that
// have one).
func (s *Service) failureDetails(q *gorm.DB, orgID string, ids []string) (map[string]Covered, error) {
	out := map[string]Covered{}
	for start := 0; start < len(ids); start += 500 {
		chunk := ids[start:min(start+500, len(ids))]
		var rows []struct {
			DeadLetterID, ExecutionID string
			Subject                   *string
			Reason                    string
			At                        time.Time
		}
		if err := q.Model(&models.DeadLetter{}).Select("id AS dead_letter_id, execution_id, subject, reason, created_at AS at").
			Where("organization_id = ? AND execution_id IN ?", orgID, chunk).Order("created_at").Scan(&rows).Error; err != nil {
			return nil, err
		}
		for _, r := range rows {
			out[r.ExecutionID] = Covered{ExecutionID: r.ExecutionID, DeadLetterID: r.DeadLetterID, Subject: deref(r.Subject), Reason: r.Reason, At: r.At}
		}
	}
	return out, nil
}

// Covered lists the failures the organization's delivery id (a digest or a failure group's
// follow-up) stands for, oldest first: exactly the ones its message counts. ENOTFOUND
// (models.ErrNotFound) for another organization's or an unknown delivery.
func (s *Service) Covered(ctx context.Context, orgID, id string) ([]Covered, error) {
	var d models.NotificationDelivery
	if err := s.db.Conn(ctx).Where("organization_id = ? AND id = ?", orgID, id).First(&d).Error; err != nil {
		return nil, err
	}
	out, _, err := s.covered(s.db.Conn(ctx), &d)
	return out, err
}

// renderGroup builds the message of a group's notification (event row ev, decoded e) for a
// recipient: its title, workflow, step, count and link; a follow-up names the failures it
// stands for (cov) and links to exactly them.
func (s *Service) renderGroup(d *models.NotificationDelivery, ev *models.NotificationEvent, e Event, cov []Covered, count int, rc recipientCtx) Message {
	l := s.lang(rc.Lang)
	tr := s.tr
	name := e.WorkflowName
	if name == "" {
		name = e.WorkflowID
	}
	g := e.Group
	if g == nil {
		g = &GroupInfo{}
	}
	// The title in the reader's language, as the inbox shows it (email, Slack, Teams alike).
	title := s.serviceText(l, g.Title)
	if title == "" {
		title = firstLines(s.serviceText(l, e.Reason))
	}
	m := Message{Lang: l}
	var intro string
	switch {
	case e.Kind == GroupFollowUp:
		since := ""
		if ev.CoversFrom != nil {
			since = rc.clock(*ev.CoversFrom)
		}
		m.Title = tr(l, "title.group_followup", "Title", clip(title, 120), "Count", len(cov), "Since", since)
		intro = tr(l, "intro.group_followup", "Count", len(cov), "Since", since, "Total", count)
		m.Link, m.LinkText = s.failuresLink(d.ID), tr(l, "link.failures", "Count", len(cov))
	case g.Reopened:
		m.Title = tr(l, "title.group_reopened", "Title", clip(title, 120), "Workflow", name)
		intro = tr(l, "intro.group_reopened", "Total", count)
		m.Link, m.LinkText = s.groupLink(g.ID), tr(l, "link.group")
	default:
		m.Title = tr(l, "title.group_opened", "Title", clip(title, 120), "Workflow", name)
		intro = tr(l, "intro.group_opened", "Total", count)
		m.Link, m.LinkText = s.groupLink(g.ID), tr(l, "link.group")
	}
	m.Facts = append(m.Facts, Fact{tr(l, "fact.problem"), title})
	if e.WorkflowID != "" {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.workflow"), fmt.Sprintf("%s (%s)", name, e.WorkflowID)})
	}
	if e.StepID != "" || e.StepName != "" {
		step := e.StepID
		if e.StepName != "" && e.StepName != e.StepID {
			step = fmt.Sprintf("%s (%s)", e.StepName, e.StepID)
		}
		m.Facts = append(m.Facts, Fact{tr(l, "fact.step"), step})
	}
	if e.ErrorType != "" {
		et := s.cfg.Texts.Text(l, "errortype."+e.ErrorType)
		if et == "errortype."+e.ErrorType {
			et = e.ErrorType
		}
		if e.ErrorCode != "" {
			et += " · " + e.ErrorCode
		}
		m.Facts = append(m.Facts, Fact{tr(l, "fact.error_type"), et})
	}
	m.Facts = append(m.Facts, Fact{tr(l, "fact.count"), fmt.Sprint(count)})
	if e.Kind == GroupFollowUp {
		m.Facts = append(m.Facts, Fact{tr(l, "fact.executions"), s.executionList(cov)})
		m.Facts = append(m.Facts, Fact{tr(l, "fact.group"), s.groupLink(g.ID)})
	} else {
		if e.Subject != "" {
			m.Facts = append(m.Facts, Fact{tr(l, "fact.subject"), e.Subject})
		}
		if e.ExecutionID != "" {
			m.Facts = append(m.Facts, Fact{tr(l, "fact.execution"), s.link(e.ExecutionID)})
		}
	}
	m.Facts = append(m.Facts, Fact{tr(l, "fact.time"), rc.time(e.At)})
	m.Text, m.HTML = bodies(l, intro, m.Facts, m.Link, m.LinkText, tr(l, "footer"))
	return m
}

// executionList names every failure of cov: a line per execution, its link and its client.
func (s *Service) executionList(cov []Covered) string {
	lines := make([]string, 0, len(cov))
	for _, c := range cov {
		line := s.link(c.ExecutionID)
		if c.Subject != "" {
			line += " – " + c.Subject
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
