package models

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"lifeline/models/apperr"
)

// Failure group states (stored). A muted group whose MutedUntil has passed is open
// (Group.StateAt); a group with items being processed is shown as being fixed (GroupFixing).
const (
	GroupOpen     = "open"
	GroupResolved = "resolved"
	GroupMuted    = "muted"
	// GroupFixing is shown, never stored: an open group some of whose items are being
	// retried.
	GroupFixing = "fixing"
)

// Why a resolved group is open again (Group.ReopenCause).
const (
	// GroupReopenedByRecurrence: a new failure of its problem joined it (JoinGroup).
	GroupReopenedByRecurrence = "recurrence"
	// GroupReopenedByItem: an admin reopened one of its items closed by hand (ReopenDeadLetter).
	GroupReopenedByItem = "item_reopened"
)

// GroupStates are the states the groups list filters by.
var GroupStates = []string{GroupOpen, GroupFixing, GroupResolved, GroupMuted}

// Group is a failure group: the dead letters of one organization with one fingerprint
// (services/fingerprint). Its state changes only through the engine's group transitions.
type Group struct {
	ID             string
	OrganizationID string
	Fingerprint    string
	Version        int
	WorkflowID     string
	StepID         string
	ErrorType      string
	ErrorCode      string
	// Title is the reason with its variable parts as placeholders.
	Title      string
	SearchText string
	State      string
	MutedUntil *time.Time
	// SplitFrom is the group an item was split out of into this one.
	SplitFrom *string
	// Arrivals counts the items that ever joined the group.
	Arrivals int
	// The group's items by status (pending, processing, closed: resolved, skipped or
	// expired) and OpenCount, pending + processing (what the Problems page ranks by): kept by
	// the engine's transitions in the transaction that changes an item's status or group
	// (migration 00027), never counted when read. On PostgreSQL the row holds them as last
	// folded, and the deltas since are added when read (GroupsNow, groupcounts.go), as for
	// Arrivals and LastSeenAt. GroupCountDrift checks them.
	PendingCount    int
	ProcessingCount int
	ClosedCount     int
	OpenCount       int
	// OpenAmountMinor sums the amounts (minor units, of whatever currency: an order for the
	// Problems page, not a figure to show) of its pending and processing items, kept with
	// the counts (migration 00035).
	OpenAmountMinor int64
	FirstSeenAt     time.Time
	LastSeenAt      time.Time
	ResolvedAt      *time.Time
	// ResolvedBefore is when the group was resolved before it came back (ReopenedAt), and
	// ReopenCause why it came back (GroupReopenedBy…; nil before migration 00036: a
	// recurrence).
	ResolvedBefore *time.Time
	ReopenedAt     *time.Time
	ReopenCause    *string
	// EscalationLevel is the level of the organization's escalation policy the group has
	// reached while pending (0: none; 1 is the first level), since EscalatedAt, naming
	// EscalatedTo (a JSON array of the level's roles and people at that time). Resolving the
	// group clears them.
	EscalationLevel int
	EscalatedAt     *time.Time
	EscalatedTo     *string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

func (Group) TableName() string { return "dlq_groups" }

// StateAt is the group's state at now (the database clock): a mute that has ended is open.
func (g *Group) StateAt(now time.Time) string {
	if g.State == GroupMuted && g.MutedUntil != nil && !g.MutedUntil.After(now) {
		return GroupOpen
	}
	return g.State
}

// GroupCounts are a group's items by status: pending, processing, and closed (resolved,
// skipped or expired).
type GroupCounts struct {
	Pending    int `json:"pending"`
	Processing int `json:"processing"`
	Closed     int `json:"closed"`
}

// GroupView is a group with what its list and page show of it.
type GroupView struct {
	Group
	WorkflowName string
	Counts       GroupCounts
	// RolledBackPending counts its pending items whose executions were rolled back: a retry
	// from the failed step refuses them (only a retry of the whole workflow takes them).
	RolledBackPending int `json:"-"`
	// Subjects are the clients its items are about, at most MaxGroupSubjects, sorted.
	Subjects []string
	// Arrivals24h counts the items that arrived in each hour of the last 24 (oldest first,
	// the last bucket ending at the database clock's now).
	Arrivals24h []int
	// StateNow is the state shown: StateAt, and fixing for an open group with items
	// processing.
	StateNow string
}

// MaxGroupSubjects bounds the subjects a group shows.
const MaxGroupSubjects = 10

// GroupFilter selects groups.
type GroupFilter struct {
	State      string // one of GroupStates; "" for every one
	WorkflowID string
	ErrorType  string
	// Q is text the title contains, ignoring case and diacritics.
	Q      string
	Cursor string // a previous page's next cursor
	Limit  int    // 1-200; anything else is 50
}

// ListGroups returns the organization's groups that match f, the most recently seen first
// (last_seen_at, then id), with their counts, subjects and arrivals, and the next page's
// cursor ("" at the end). A group seen again while someone pages moves to the top: it may be
// on an earlier page than the one it was on. A cursor this server did not make is EINVALID on
// "cursor". The state fixing is an open group with items processing: it is filtered after
// the page is read, so a page of that filter may be short, and the cursor still goes on.
func (db *DB) ListGroups(ctx context.Context, orgID string, f GroupFilter) ([]GroupView, string, error) {
	now, err := db.Now(ctx)
	if err != nil {
		return nil, "", err
	}
	limit := clampLimit(f.Limit)
	q := db.Conn(ctx).Table(GroupsNow+" AS dlq_groups").Where("dlq_groups.organization_id = ?", orgID)
	if f.WorkflowID != "" {
		q = q.Where("dlq_groups.workflow_id = ?", f.WorkflowID)
	}
	if f.ErrorType != "" {
		q = q.Where("dlq_groups.error_type = ?", f.ErrorType)
	}
	if f.Q != "" {
		q = q.Where(db.contains("dlq_groups.search_text"), containsPattern(Fold(f.Q)))
	}
	switch f.State {
	case GroupMuted:
		q = q.Where("dlq_groups.state = ? AND dlq_groups.muted_until > ?", GroupMuted, now)
	case GroupResolved:
		q = q.Where("dlq_groups.state = ?", GroupResolved)
	case GroupOpen, GroupFixing:
		q = q.Where("(dlq_groups.state = ? OR (dlq_groups.state = ? AND dlq_groups.muted_until <= ?))", GroupOpen, GroupMuted, now)
	}
	at, id, err := decodeCursor(f.Cursor)
	if err != nil {
		return nil, "", err
	}
	if id != "" {
		q = q.Where("dlq_groups.last_seen_at <= ? AND (dlq_groups.last_seen_at < ? OR dlq_groups.id < ?)", at, at, id)
	}
	var groups []Group
	if err := q.Order("dlq_groups.last_seen_at DESC, dlq_groups.id DESC").Limit(limit + 1).Find(&groups).Error; err != nil {
		return nil, "", err
	}
	next := ""
	if len(groups) > limit {
		groups = groups[:limit]
		next = encodeCursor(groups[limit-1].LastSeenAt, groups[limit-1].ID)
	}
	views, err := db.groupViews(ctx, orgID, groups, now)
	if err != nil {
		return nil, "", err
	}
	if f.State == GroupOpen || f.State == GroupFixing {
		kept := views[:0]
		for _, v := range views {
			if v.StateNow == f.State {
				kept = append(kept, v)
			}
		}
		views = kept
	}
	return views, next, nil
}

// GetGroup returns one of the organization's groups; ENOTFOUND when it has no such group.
func (db *DB) GetGroup(ctx context.Context, orgID, id string) (*GroupView, error) {
	now, err := db.Now(ctx)
	if err != nil {
		return nil, err
	}
	var g Group
	if err := db.Conn(ctx).Table(GroupsNow).Where("organization_id = ? AND id = ?", orgID, id).First(&g).Error; err != nil {
		if IsNotFound(err) {
			return nil, apperr.NotFound("group")
		}
		return nil, err
	}
	views, err := db.groupViews(ctx, orgID, []Group{g}, now)
	if err != nil {
		return nil, err
	}
	return &views[0], nil
}

// groupViews adds to groups their workflows' names, counts (the group's own), subjects,
// last 24 hours' arrivals and how many of its pending items were rolled back: four queries
// for the page, whatever its length, none of which reads more of a group's items than its
// last day's, its rolled-back ones and MaxGroupSubjects index entries.
func (db *DB) groupViews(ctx context.Context, orgID string, groups []Group, now time.Time) ([]GroupView, error) {
	views := make([]GroupView, len(groups))
	if len(groups) == 0 {
		return views, nil
	}
	ids := make([]string, len(groups))
	wfs := make([]string, 0, len(groups))
	at := make(map[string]int, len(groups))
	for i, g := range groups {
		ids[i] = g.ID
		wfs = append(wfs, g.WorkflowID)
		at[g.ID] = i
		views[i] = GroupView{Group: g, Arrivals24h: make([]int, 24)}
	}
	var names []struct{ ID, Name string }
	if err := db.Conn(ctx).Table("workflows").Select("id, name").Where("organization_id = ? AND id IN ?", orgID, wfs).Scan(&names).Error; err != nil {
		return nil, err
	}
	byWF := make(map[string]string, len(names))
	for _, n := range names {
		byWF[n.ID] = n.Name
	}
	if err := db.groupSubjects(ctx, orgID, ids, func(groupID, subject string) {
		v := &views[at[groupID]]
		v.Subjects = append(v.Subjects, subject)
	}); err != nil {
		return nil, err
	}
	var rolled []struct {
		GroupID string
		N       int
	}
	// From the organization's rolled-back executions (idx_executions_rolled_back: a rollback
	// is an admin's act on one execution, so they are few) to their dead letters, not from
	// every pending item of the groups, which for the Problems page's groups is most of them.
	if err := db.Conn(ctx).Table("workflow_executions").Select("dead_letter_queue.group_id, count(*) AS n").
		Joins("JOIN dead_letter_queue ON dead_letter_queue.execution_id = workflow_executions.id AND dead_letter_queue.organization_id = workflow_executions.organization_id").
		Where("workflow_executions.organization_id = ? AND workflow_executions.rollback_status IS NOT NULL AND dead_letter_queue.group_id IN ? AND dead_letter_queue.status = ?",
			orgID, ids, DLQPending).Group("dead_letter_queue.group_id").Scan(&rolled).Error; err != nil {
		return nil, err
	}
	for _, r := range rolled {
		views[at[r.GroupID]].RolledBackPending = r.N
	}
	if err := db.arrivals24h(ctx, orgID, ids, now, func(groupID string, perHour []int) {
		copy(views[at[groupID]].Arrivals24h, perHour)
	}); err != nil {
		return nil, err
	}
	for i := range views {
		v := &views[i]
		v.WorkflowName = byWF[v.WorkflowID]
		v.Counts = GroupCounts{Pending: v.PendingCount, Processing: v.ProcessingCount, Closed: v.ClosedCount}
		sort.Strings(v.Subjects)
		v.StateNow = v.StateAt(now)
		if v.StateNow == GroupOpen && v.Counts.Processing > 0 {
			v.StateNow = GroupFixing
		}
	}
	return views, nil
}

// groupSubjectsSQL walks, for each group, its items' distinct subjects in order, one index
// probe (idx_dlq_group_subjects) a step, MaxGroupSubjects steps at most: a group of a
// hundred thousand items costs what a group of ten does. Both databases.
const groupSubjectsSQL = `WITH RECURSIVE s(group_id, subject, n) AS (
  SELECT g.id, (SELECT MIN(d.subject) FROM dead_letter_queue d WHERE d.organization_id = @org AND d.group_id = g.id AND d.subject > ''), 1
  FROM dlq_groups g WHERE g.organization_id = @org AND g.id IN @ids
  UNION ALL
  SELECT s.group_id, (SELECT MIN(d.subject) FROM dead_letter_queue d WHERE d.organization_id = @org AND d.group_id = s.group_id AND d.subject > s.subject), s.n + 1
  FROM s WHERE s.subject IS NOT NULL AND s.n < @max)
SELECT group_id, subject FROM s WHERE subject IS NOT NULL`

// groupSubjects calls each with the first MaxGroupSubjects distinct subjects (not empty) of
// the items of each of the organization's groups ids.
func (db *DB) groupSubjects(ctx context.Context, orgID string, ids []string, each func(groupID, subject string)) error {
	var rows []struct {
		GroupID string
		Subject string
	}
	if err := db.Conn(ctx).Raw(groupSubjectsSQL, sql.Named("org", orgID), sql.Named("ids", ids), sql.Named("max", MaxGroupSubjects)).
		Scan(&rows).Error; err != nil {
		return err
	}
	for _, r := range rows {
		each(r.GroupID, r.Subject)
	}
	return nil
}

// arrivals24h counts, in SQL, the items of each of the organization's groups ids that
// arrived in each hour of the 24 before now (the last hour ends at now, inclusive): one row
// per group with 24 sums, so the database reads each recent item's index entry and sends
// 24 numbers per group, whatever the number of items. Every status is named, so that the
// index of a group's items by status and time (idx_dlq_group) serves it, a range per status. It calls each with a group's counts,
// oldest hour first (groups with no recent item are left out).
func (db *DB) arrivals24h(ctx context.Context, orgID string, ids []string, now time.Time, each func(groupID string, perHour []int)) error {
	from := now.Add(-24 * time.Hour)
	var sel strings.Builder
	sel.WriteString("group_id")
	args := make([]any, 0, 48+3)
	for h := range 24 {
		fmt.Fprintf(&sel, ", SUM(CASE WHEN created_at > ? AND created_at <= ? THEN 1 ELSE 0 END) AS h%d", h)
		args = append(args, from.Add(time.Duration(h)*time.Hour), from.Add(time.Duration(h+1)*time.Hour))
	}
	rows, err := db.Conn(ctx).Table("dead_letter_queue").Select(sel.String(), args...).
		Where("organization_id = ? AND group_id IN ? AND status IN ? AND created_at > ? AND created_at <= ?", orgID, ids, DLQStatuses, from, now).
		Group("group_id").Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		counts := make([]int64, 24)
		dest := []any{&id}
		for i := range counts {
			dest = append(dest, &counts[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		perHour := make([]int, 24)
		for i, n := range counts {
			perHour[i] = int(n)
		}
		each(id, perHour)
	}
	return rows.Err()
}

// MaxProblems bounds the groups the Problems page shows.
const MaxProblems = 100

// ProblemGroups returns the organization's groups with items to handle (pending or being
// processed), the most of them first (then the most recently seen), at most limit (1 to
// MaxProblems; anything else is MaxProblems),
// with their counts, subjects and arrivals: what the Problems page lists. The groups are
// ranked by their own counts (OpenCount): the ranking reads the organization's groups'
// rows (no index on a count that every failure changes: migration 00038) and no item.
func (db *DB) ProblemGroups(ctx context.Context, orgID string, limit int) ([]GroupView, error) {
	if limit <= 0 || limit > MaxProblems {
		limit = MaxProblems
	}
	now, err := db.Now(ctx)
	if err != nil {
		return nil, err
	}
	var groups []Group
	if err := db.Conn(ctx).Table(GroupsNow).Where("organization_id = ? AND open_count > 0", orgID).
		Order("open_count DESC, last_seen_at DESC, id DESC").Limit(limit).Find(&groups).Error; err != nil {
		return nil, err
	}
	if len(groups) == 0 {
		return nil, nil
	}
	views, err := db.groupViews(ctx, orgID, groups, now)
	if err != nil {
		return nil, err
	}
	return views, nil
}

// GroupSample is one item a group shows when it is expanded.
type GroupSample struct {
	ID          string
	GroupID     string
	ExecutionID string
	Subject     *string
	Reason      string
	Status      string
	CreatedAt   time.Time
}

// groupSamplesPart is one group's and one status's newest items (at most the LIMIT), on
// the index of group, status and time (idx_dlq_group): what GroupSamples reads of a group
// is this, whatever the group's size.
const groupSamplesPart = `SELECT id, group_id, execution_id, subject, reason, status, created_at FROM dead_letter_queue
  WHERE organization_id = %s AND group_id = %s AND status = '%s' ORDER BY created_at DESC, id DESC LIMIT %s`

// GroupSamples returns, for each of the organization's groups ids, its newest pending or
// processing items, at most per of each (newest first): one query for the page, each
// group's part of it a LIMIT of each status on idx_dlq_group, so that a big group's items
// are not all read. On PostgreSQL one LATERAL join (planned once); on SQLite, which has
// none, a UNION ALL of the parts (100 groups a query: SQLite takes at most 500 parts).
func (db *DB) GroupSamples(ctx context.Context, orgID string, ids []string, per int) (map[string][]GroupSample, error) {
	out := make(map[string][]GroupSample, len(ids))
	var rows []GroupSample
	for start := 0; start < len(ids); start += 100 {
		chunk := ids[start:min(start+100, len(ids))]
		var q strings.Builder
		var args []any
		if db.Dialect == Postgres {
			q.WriteString("SELECT s.* FROM dlq_groups g CROSS JOIN LATERAL (")
			fmt.Fprintf(&q, "("+groupSamplesPart+") UNION ALL ("+groupSamplesPart+")", "g.organization_id", "g.id", DLQPending, "@per",
				"g.organization_id", "g.id", DLQProcessing, "@per")
			q.WriteString(") s WHERE g.organization_id = @org AND g.id IN @ids")
			args = []any{sql.Named("org", orgID), sql.Named("ids", chunk), sql.Named("per", per)}
		} else {
			for i, id := range chunk {
				for j, status := range []string{DLQPending, DLQProcessing} {
					if i+j > 0 {
						q.WriteString("\nUNION ALL ")
					}
					fmt.Fprintf(&q, "SELECT * FROM ("+groupSamplesPart+")", "?", "?", status, "?")
					args = append(args, orgID, id, per)
				}
			}
		}
		var part []GroupSample
		if err := db.Conn(ctx).Raw(q.String(), args...).Scan(&part).Error; err != nil {
			return nil, err
		}
		rows = append(rows, part...)
	}
	sort.Slice(rows, func(i, j int) bool {
		if !rows[i].CreatedAt.Equal(rows[j].CreatedAt) {
			return rows[i].CreatedAt.After(rows[j].CreatedAt)
		}
		return rows[i].ID > rows[j].ID
	})
	for _, r := range rows {
		if len(out[r.GroupID]) < per {
			out[r.GroupID] = append(out[r.GroupID], r)
		}
	}
	return out, nil
}

// GroupDrift is a group whose counts differ from its items' (GroupCountDrift).
type GroupDrift struct {
	GroupID         string
	Kept, FromItems GroupCounts
	KeptOpen        int
	// KeptAmount is its OpenAmountMinor; AmountFromItems its open items' amounts summed.
	KeptAmount, AmountFromItems int64
}

// GroupCountDrift recounts the items of every group of the organization by status and
// returns the groups whose kept counts (PendingCount, ProcessingCount, ClosedCount,
// OpenCount, OpenAmountMinor; read from GroupsNow, its deltas not yet folded added) differ: none, unless a writer changed an item's status or group without its
// transition. It reads every item of the organization: a check for tests and maintenance,
// never for a page.
func (db *DB) GroupCountDrift(ctx context.Context, orgID string) ([]GroupDrift, error) {
	var groups []Group
	if err := db.Conn(ctx).Table(GroupsNow).Select("id, pending_count, processing_count, closed_count, open_count, open_amount_minor").
		Where("organization_id = ?", orgID).Find(&groups).Error; err != nil {
		return nil, err
	}
	var counts []struct {
		GroupID string
		Status  string
		N       int
		Amount  int64
	}
	if err := db.Conn(ctx).Table("dead_letter_queue").Select("group_id, status, count(*) AS n, CAST(COALESCE(SUM(amount_minor), 0) AS BIGINT) AS amount").
		Where("organization_id = ? AND group_id IS NOT NULL", orgID).Group("group_id, status").Scan(&counts).Error; err != nil {
		return nil, err
	}
	items, amounts := map[string]*GroupCounts{}, map[string]int64{}
	for _, c := range counts {
		if c.Status == DLQPending || c.Status == DLQProcessing {
			amounts[c.GroupID] += c.Amount
		}
		gc := items[c.GroupID]
		if gc == nil {
			gc = &GroupCounts{}
			items[c.GroupID] = gc
		}
		switch c.Status {
		case DLQPending:
			gc.Pending += c.N
		case DLQProcessing:
			gc.Processing += c.N
		default:
			gc.Closed += c.N
		}
	}
	var drift []GroupDrift
	for _, g := range groups {
		kept, from := GroupCounts{Pending: g.PendingCount, Processing: g.ProcessingCount, Closed: g.ClosedCount}, GroupCounts{}
		if gc := items[g.ID]; gc != nil {
			from = *gc
		}
		if kept != from || g.OpenCount != from.Pending+from.Processing || g.OpenAmountMinor != amounts[g.ID] {
			drift = append(drift, GroupDrift{GroupID: g.ID, Kept: kept, FromItems: from, KeptOpen: g.OpenCount,
				KeptAmount: g.OpenAmountMinor, AmountFromItems: amounts[g.ID]})
		}
	}
	return drift, nil
}
