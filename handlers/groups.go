package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/bulk"
	"lifeline/services/classify"
	"lifeline/services/deadlines"
	"lifeline/services/fixrules"
	"lifeline/services/groups"
	"lifeline/services/poison"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// groupService is what the failure groups' handlers need (groups.Service).
type groupService interface {
	List(ctx context.Context, orgID string, f models.GroupFilter) ([]models.GroupView, string, error)
	Get(ctx context.Context, orgID, id string) (*models.GroupView, error)
	Act(ctx context.Context, r groups.ActRequest) (*groups.ActResult, error)
	Split(ctx context.Context, orgID, id string, actor audit.Actor) (*models.GroupView, error)
	Problems(ctx context.Context, orgID string) ([]models.GroupView, map[string][]models.GroupSample, error)
	FieldValues(ctx context.Context, orgID, groupID, path string) ([]groups.FieldValue, int, error)
	EditableFields(ctx context.Context, orgID string, g *models.GroupView) ([]string, error)
	PendingClients(ctx context.Context, orgID, groupID string) ([]string, error)
}

var _ groupService = (*groups.Service)(nil)

// GroupsHandler serves failure groups (issue 22): the Problems page, and through the API
// the list, one group, one action on a whole group, and splitting an item out of its group.
type GroupsHandler struct {
	*chrome
	svc   groupService
	wfs   workflowLister
	items dlqStore
	rules fixRules
	// deadlines orders the Problems page by urgency and says what is at risk (nil: neither).
	deadlines urgencyOrderer
	// money reports whether a workflow moves money (settings.movesMoney).
	money func(c echo.Context, workflowID string) bool
	// Now is the clock of the page's relative times.
	Now func() time.Time
	// poison checks the values of a group's items, and flags shows those that break runs or
	// are quarantined (nil: no flags).
	poison groupPoison
	flags  *flagger
	// members lists the organization's members (who an escalation names); nil: shown as
	// stored.
	members func(ctx context.Context, orgID string) ([]models.RoleMember, error)
}

// groupPoison checks the values of a group's items (poison.Service).
type groupPoison interface {
	Group(ctx context.Context, orgID, groupID string) ([]poison.Flag, error)
}

var _ groupPoison = (*poison.Service)(nil)

// newGroupsHandler returns the handler.
func newGroupsHandler(ch *chrome, svc groupService, wfs workflowLister, items dlqStore, rules fixRules, money func(echo.Context, string) bool) *GroupsHandler {
	return &GroupsHandler{chrome: ch, svc: svc, wfs: wfs, items: items, rules: rules, money: money, Now: time.Now}
}

// Problems: GET /dlq ("Kolejka DLQ"), the groups with items to handle, the most first, each with
// one action on all of its pending items (the DLQ list's bulk confirmation).
func (h *GroupsHandler) Problems(c echo.Context) error {
	if qs := c.QueryString(); qs != "" {
		// An address of the item list from before the problems led (/dlq?status=pending): its
		// filters are the item list's.
		return redirect(c, h.url("dlq")+"?"+qs)
	}
	p, l, ctx := principal(c), localizer(c), c.Request().Context()
	list, samples, err := h.svc.Problems(ctx, p.OrganizationID)
	if err != nil {
		return err
	}
	wfs, err := h.wfs.All(ctx, p.OrganizationID)
	if err != nil {
		return err
	}
	steps, now := stepsOf(wfs), h.Now()
	vm := pages.ProblemsVM{ListURL: h.url("dlq"), RefreshURL: h.url("dlq.problems"), CanAct: p.Can(models.RoleAccountant), BulkURL: h.url("dlq.bulk.start"), CSRF: csrfToken(c)}
	if vm.CanAct {
		if vm.AdminOnly, err = adminOnly(c, h.rules); err != nil {
			return err
		}
	}
	if p.Can(models.RoleAdmin) {
		vm.CredentialsURL = h.url("credentials")
	}
	// Urgent work first (issue 23): a follow-up sort of the groups ProblemGroups returned, by
	// the urgency of their nearest due date, then their amounts.
	var dues map[string]deadlines.GroupDue
	if h.deadlines != nil {
		if dues, err = h.deadlines.OrderByUrgency(ctx, p.OrganizationID, list); err != nil {
			return err
		}
		if vm.Deadlines, err = deadlineAlerts(c, h.deadlines, h.url("dlq")); err != nil {
			return err
		}
	}
	for i := range list {
		g := h.problem(l, &list[i], samples[list[i].ID], steps, now)
		if d, ok := dues[list[i].ID]; ok {
			g.DueText, g.DueUrgency = groupDueText(l, d), d.Urgency.String()
		}
		vm.Groups = append(vm.Groups, g)
	}
	return render(c, http.StatusOK, pages.Problems(h.page(c, "problems.title", "dlq"), vm))
}

// stateBadges are the badge classes of the groups' states.
var stateBadges = map[string]string{models.GroupOpen: "badge--danger", models.GroupFixing: "badge--warn",
	models.GroupMuted: "badge--muted", models.GroupResolved: "badge--ok"}

// problem is one group for the Problems page.
func (h *GroupsHandler) problem(l *i18n.Localizer, g *models.GroupView, items []models.GroupSample, steps workflowSteps, now time.Time) pages.ProblemGroup {
	out := pages.ProblemGroup{ID: g.ID, URL: h.url("dlq.group", g.ID), Title: l.Text(g.Title), Workflow: g.WorkflowName, WorkflowURL: h.url("workflow", g.WorkflowID),
		Step: steps.name(g.WorkflowID, g.StepID), ErrorType: g.ErrorType, FixData: g.ErrorType == "validation", State: g.StateNow,
		Credentials: g.ErrorType == string(classify.Authorization), PeriodClosed: g.ErrorCode == classify.CodePeriodClosed,
		StateText: l.T("problems.state." + g.StateNow), Badge: stateBadges[g.StateNow],
		Pending: g.Counts.Pending, Processing: g.Counts.Processing, Closed: g.Counts.Closed,
		PendingText: l.N("problems.count.pending", g.Counts.Pending), ProcessingText: l.N("problems.count.processing", g.Counts.Processing),
		ClosedText: l.N("problems.count.closed", g.Counts.Closed), Subjects: g.Subjects,
		FirstSeen: l.Relative(g.FirstSeenAt, now), FirstSeenTitle: displayTime(l, g.FirstSeenAt), FirstSeenAt: rfc(g.FirstSeenAt),
		LastSeen: l.Relative(g.LastSeenAt, now), LastSeenTitle: displayTime(l, g.LastSeenAt), LastSeenAt: rfc(g.LastSeenAt),
		ItemsURL:  h.url("dlq") + "?" + url.Values{"groupId": {g.ID}}.Encode(),
		ItemsText: l.N("problems.items", g.Counts.Pending+g.Counts.Processing+g.Counts.Closed),
		Spark:     spark(l, g.Arrivals24h)}
	switch rolled := g.RolledBackPending; {
	case rolled > 0 && rolled >= g.Counts.Pending:
		out.FullFirst = true
	case rolled > 0: // as the bulk confirmation counts them
		out.Refusals = []string{l.N("bulk.confirm.rolledback", rolled), l.T("problems.refusals.full")}
	}
	switch {
	case g.ResolvedBefore == nil || g.ReopenedAt == nil:
	case g.ReopenCause != nil && *g.ReopenCause == models.GroupReopenedByItem:
		out.CameBack = l.T("problems.reopened", "At", displayTime(l, *g.ReopenedAt), "When", displayTime(l, *g.ResolvedBefore))
	default: // a recurrence (or a group reopened before its cause was kept)
		out.CameBack = l.T("problems.cameback", "When", displayTime(l, *g.ResolvedBefore))
	}
	if g.StateNow == models.GroupMuted && g.MutedUntil != nil {
		out.MutedUntil = l.T("problems.muteduntil", "When", displayTime(l, *g.MutedUntil))
	}
	if g.EscalationLevel > 0 {
		out.Escalated, out.EscalatedBadge = true, l.T("escalation.badge", "Level", g.EscalationLevel)
	}
	for _, it := range items {
		out.Items = append(out.Items, pages.ProblemItem{URL: h.url("dlq.item", it.ID), Title: cmp.Or(deref(it.Subject), shortID(it.ExecutionID)),
			Reason: l.Text(it.Reason), Age: l.Relative(it.CreatedAt, now), At: rfc(it.CreatedAt), Status: it.Status})
	}
	return out
}

// spark draws arrivals per hour as bars, 4 px wide and 1 px apart, scaled to the busiest hour.
func spark(l *i18n.Localizer, perHour []int) pages.Sparkline {
	const bar, gap, height = 4, 1, 24
	s := pages.Sparkline{Width: len(perHour) * (bar + gap), Height: height}
	peak, total := 0, 0
	for _, n := range perHour {
		peak, total = max(peak, n), total+n
	}
	s.Label = l.N("problems.spark", total)
	for i, n := range perHour {
		h := 1 // an empty hour is a baseline
		if peak > 0 && n > 0 {
			h = max(2, n*height/peak)
		}
		s.Bars = append(s.Bars, pages.SparkBar{X: i * (bar + gap), Y: height - h, W: bar, H: h,
			Title: l.N("problems.spark.hour", n, "Ago", len(perHour)-i)})
	}
	return s
}

type apiGroup struct {
	ID           string             `json:"id"`
	Fingerprint  string             `json:"fingerprint"`
	Version      int                `json:"version"`
	Title        string             `json:"title"`
	WorkflowID   string             `json:"workflowId"`
	WorkflowName string             `json:"workflowName"`
	StepID       string             `json:"stepId"`
	ErrorType    string             `json:"errorType"`
	ErrorCode    string             `json:"errorCode,omitempty"`
	Counts       models.GroupCounts `json:"counts"`
	// Arrivals counts every item that ever joined the group; Arrivals24h those of each hour
	// of the last 24, oldest first.
	Arrivals    int      `json:"arrivals"`
	Arrivals24h []int    `json:"arrivals24h"`
	Subjects    []string `json:"subjects"`
	State       string   `json:"state"`
	MutedUntil  *string  `json:"mutedUntil,omitempty"`
	FirstSeenAt string   `json:"firstSeenAt"`
	LastSeenAt  string   `json:"lastSeenAt"`
	ResolvedAt  *string  `json:"resolvedAt,omitempty"`
	// ResolvedBefore and ReopenedAt: the group came back after being resolved then.
	ResolvedBefore *string `json:"resolvedBefore,omitempty"`
	ReopenedAt     *string `json:"reopenedAt,omitempty"`
	// ReopenCause says why: "recurrence" (a new failure) or "item_reopened" (an admin
	// reopened an item closed by hand).
	ReopenCause *string `json:"reopenCause,omitempty"`
	SplitFrom   *string `json:"splitFrom,omitempty"`
	// EscalationLevel is the level of the escalation policy the group reached while
	// pending (0: none), since EscalatedAt, naming EscalatedTo.
	EscalationLevel int      `json:"escalationLevel"`
	EscalatedAt     *string  `json:"escalatedAt,omitempty"`
	EscalatedTo     []string `json:"escalatedTo,omitempty"`
	// Items lists the group's items (GET /api/v1/dlq?groupId=…).
	Items string `json:"items"`
}

func (h *GroupsHandler) apiGroup(g *models.GroupView) apiGroup {
	out := apiGroup{ID: g.ID, Fingerprint: g.Fingerprint, Version: g.Version, Title: g.Title, WorkflowID: g.WorkflowID,
		WorkflowName: g.WorkflowName, StepID: g.StepID, ErrorType: g.ErrorType, ErrorCode: g.ErrorCode, Counts: g.Counts,
		Arrivals: g.Arrivals, Arrivals24h: g.Arrivals24h, Subjects: g.Subjects, State: g.StateNow,
		FirstSeenAt: rfc(g.FirstSeenAt), LastSeenAt: rfc(g.LastSeenAt), ResolvedAt: rfcPtr(g.ResolvedAt),
		ResolvedBefore: rfcPtr(g.ResolvedBefore), ReopenedAt: rfcPtr(g.ReopenedAt), SplitFrom: g.SplitFrom,
		ReopenCause: g.ReopenCause,
		Items:       h.url("api.dlq") + "?" + url.Values{"groupId": {g.ID}}.Encode()}
	if out.Subjects == nil {
		out.Subjects = []string{}
	}
	if g.StateNow == models.GroupMuted {
		out.MutedUntil = rfcPtr(g.MutedUntil)
	}
	if g.EscalationLevel > 0 {
		out.EscalationLevel, out.EscalatedAt = g.EscalationLevel, rfcPtr(g.EscalatedAt)
		if g.EscalatedTo != nil {
			_ = json.Unmarshal([]byte(*g.EscalatedTo), &out.EscalatedTo)
		}
	}
	return out
}

// GroupFilterOf reads the groups list's filter from a query: status, workflowId,
// errorType, q, cursor, limit. Bad values are EINVALID with field messages.
func GroupFilterOf(c echo.Context) (models.GroupFilter, error) {
	q := queryOf(localizer(c), c.QueryParams())
	f := models.GroupFilter{State: q.oneOf("status", models.GroupStates), WorkflowID: q.workflowID("workflowId"),
		ErrorType: q.oneOf("errorType", errorTypes()), Q: q.search("q"), Cursor: q.get("cursor"), Limit: q.limit()}
	return f, q.err()
}

// APIList: GET /api/v1/dlq/groups, the most recently seen first, a page at a time ("next").
func (h *GroupsHandler) APIList(c echo.Context) error {
	f, err := GroupFilterOf(c)
	if err != nil {
		return err
	}
	list, next, err := h.svc.List(c.Request().Context(), principal(c).OrganizationID, f)
	if err != nil {
		return err
	}
	items := make([]apiGroup, 0, len(list))
	for i := range list {
		items = append(items, h.apiGroup(&list[i]))
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items, "next": nullIfEmpty(next)})
}

// APIGet: GET /api/v1/dlq/groups/{id}.
func (h *GroupsHandler) APIGet(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "group"); err != nil {
		return err
	}
	g, err := h.svc.Get(c.Request().Context(), principal(c).OrganizationID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, h.apiGroup(g))
}

// apiGroupJob is a group action's bulk job: the job as GET /api/v1/dlq/bulk/{id} gives it,
// the group, and what it covers.
type apiGroupJob struct {
	apiBulk
	GroupID string `json:"groupId"`
	Scope   string `json:"scope"`
}

// APIAct: POST /api/v1/dlq/groups/{id}/actions with {"action": "retry" | "retry_full" |
// "resolve" | "skip" | "edit_retry" | "mute", "resolutionNotes", "muteUntil", "field",
// "value"} and an optional
// Idempotency-Key. A bulk action answers 202 with its job (200 and Idempotency-Replayed for a
// repeated key), whose total is the group's pending count now: items that join the group
// later are not in it. A mute answers 200 with the group. Accountants must give a note to
// resolve or skip, as for one item.
func (h *GroupsHandler) APIAct(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "group"); err != nil {
		return err
	}
	var req struct {
		Action          string `json:"action"`
		ResolutionNotes string `json:"resolutionNotes"`
		MuteUntil       string `json:"muteUntil"`
		// Field and Value: edit_retry's input field and its new value.
		Field string `json:"field"`
		Value any    `json:"value"`
	}
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	p := principal(c)
	r := groups.ActRequest{OrganizationID: p.OrganizationID, GroupID: id, Action: req.Action, Notes: req.ResolutionNotes,
		Actor: actorOf(p), IdempotencyKey: key, Field: req.Field, Value: req.Value}
	if err := h.rule(c, id, req.Action); err != nil {
		return err
	}
	if req.MuteUntil != "" {
		if r.MuteUntil, err = time.Parse(time.RFC3339, req.MuteUntil); err != nil {
			return apperr.Invalid("group.invalid", map[string]string{"muteUntil": "must be a time (RFC 3339)"})
		}
	}
	if err := bulkNote(p, bulk.Request{Action: req.Action, Notes: req.ResolutionNotes}); err != nil {
		return err
	}
	res, err := h.svc.Act(c.Request().Context(), r)
	if err != nil {
		return err
	}
	if res.Job == nil {
		return c.JSON(http.StatusOK, h.apiGroup(res.Group))
	}
	c.Response().Header().Set(echo.HeaderLocation, h.url("api.dlq.bulk", res.Job.ID))
	out := apiGroupJob{apiBulk: bulkOf(res.Job, nil, false), GroupID: id,
		Scope: localizer(c).N("group.action.scope", res.Job.Total)}
	if res.Replayed {
		c.Response().Header().Set("Idempotency-Replayed", "true")
		return c.JSON(http.StatusOK, out)
	}
	return c.JSON(http.StatusAccepted, out)
}

// split moves the dead letter of the path's id into a group of its own and returns it.
func (h *GroupsHandler) split(c echo.Context) (*models.GroupView, error) {
	id := c.Param("id")
	if err := checkID(id, "dead letter"); err != nil {
		return nil, err
	}
	p := principal(c)
	return h.svc.Split(c.Request().Context(), p.OrganizationID, id, actorOf(p))
}

// APISplit: POST /api/v1/dlq/{id}/split moves the item into a group of its own: 201 with
// that group.
func (h *GroupsHandler) APISplit(c echo.Context) error {
	g, err := h.split(c)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, h.url("api.dlq.group", g.ID))
	return c.JSON(http.StatusCreated, h.apiGroup(g))
}

// rule refuses what the organization's rule keeps from accountants: closing (resolve,
// skip) and editing items when admins only fix (rules.adminonly); and an accountant's group
// edit of a workflow that moves money (a single edit there waits for an admin's approval;
// a group edit is refused, with that said: group.edit.money).
func (h *GroupsHandler) rule(c echo.Context, groupID, action string) error {
	p := principal(c)
	if p.Can(models.RoleAdmin) || (action != bulk.Resolve && action != bulk.Skip && action != bulk.EditRetry) {
		return nil
	}
	r, err := h.rules.Rules(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return err
	}
	if !r.AccountantsMayFix {
		return errAdminOnly
	}
	if action != bulk.EditRetry {
		return nil
	}
	g, err := h.svc.Get(c.Request().Context(), p.OrganizationID, groupID)
	if err != nil {
		return err
	}
	if h.money != nil && h.money(c, g.WorkflowID) {
		return errMoneyGroupEdit
	}
	return nil
}

var errMoneyGroupEdit = &apperr.Error{Code: apperr.EFORBIDDEN, Message: "group.edit.money"}

// groupItemsPage is how many items a group's page lists at a time.
const groupItemsPage = 50

// Show: GET /dlq/groups/{id}, a group's page: what fails where, its counts, clients, first
// and last seen, arrivals, state, its items (a page at a time, as the list shows them) and
// its actions: retry all, retry the whole workflows, resolve or skip all with one note, mute
// until, and correct a field the reason names on every item.
func (h *GroupsHandler) Show(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "group"); err != nil {
		return err
	}
	p, l, ctx := principal(c), localizer(c), c.Request().Context()
	g, err := h.svc.Get(ctx, p.OrganizationID, id)
	if err != nil {
		return err
	}
	wfs, err := h.wfs.All(ctx, p.OrganizationID)
	if err != nil {
		return err
	}
	steps, now := stepsOf(wfs), h.Now()
	f := models.DLQFilter{GroupID: g.ID, Limit: groupItemsPage, Cursor: c.QueryParam("cursor")}
	rows, next, err := h.items.ListDLQ(ctx, p.OrganizationID, f)
	if err != nil {
		return err
	}
	list := &DLQHandler{chrome: h.chrome, Now: h.Now}
	vm := pages.GroupVM{Group: h.problem(l, g, nil, steps, now), CSRF: csrfToken(c), ProblemsURL: h.url("dlq.problems"), Done: c.QueryParam("done")}
	if vm.Done != "muted" && vm.Done != "asked" && vm.Done != "already" {
		vm.Done = ""
	}
	vm.Group.URL = "" // the card is this page: its title links nowhere
	if g.EscalationLevel > 0 {
		var ms []models.RoleMember
		if h.members != nil {
			if ms, err = h.members(ctx, p.OrganizationID); err != nil {
				return err
			}
		}
		vm.Group.Escalation = escalationText(l, g, ms)
	}
	vm.Table.ProblemsURL = vm.ProblemsURL
	maySplit := p.Can(models.RoleAccountant) && h.url("dlq.split", g.ID) != ""
	if maySplit {
		vm.Table.SplitCSRF = vm.CSRF
	}
	for i := range rows {
		row := list.row(l, &rows[i], steps)
		if maySplit && rows[i].Status == models.DLQPending { // as the item's page offers it
			row.SplitURL = h.url("dlq.split", rows[i].ID)
		}
		vm.Table.Rows = append(vm.Table.Rows, row)
	}
	if next != "" {
		vm.Table.NextURL = h.url("dlq.group", g.ID) + "?" + url.Values{"cursor": {next}}.Encode()
	}
	if h.flags != nil && h.poison != nil {
		checked, err := h.poison.Group(ctx, p.OrganizationID, g.ID)
		if err != nil {
			return err
		}
		if vm.Poison, err = h.flags.flags(c, checked, h.url("dlq.group", g.ID)); err != nil {
			return err
		}
	}
	if p.Can(models.RoleAccountant) && h.url("dlq.bulk.start") != "" && g.Counts.Pending > 0 {
		vm.CanAct, vm.BulkURL, vm.MuteURL = true, h.url("dlq.bulk.start"), h.url("dlq.group.mute", g.ID)
		vm.MutePresets = mutePresets(l, now)
		// Closing and correcting are the organization's to keep from accountants (as on one item).
		vm.CanFix = p.Can(models.RoleAdmin)
		if !vm.CanFix {
			r, err := h.rules.Rules(ctx, p.OrganizationID)
			if err != nil {
				return err
			}
			vm.CanFix = r.AccountantsMayFix
		}
		// Who can, and "ask an admin" (as on one item); an authorization problem is cured by
		// an admin's new credentials, whoever may close items.
		if !vm.CanFix || (vm.Group.Credentials && !p.Can(models.RoleAdmin)) {
			vm.AskURL = h.url("dlq.group.ask", g.ID)
		}
		if vm.Group.Credentials && p.Can(models.RoleAdmin) {
			vm.CredentialsURL = h.url("credentials")
		}
		fields, err := h.svc.EditableFields(ctx, p.OrganizationID, g)
		if !vm.CanFix {
			fields = nil
		}
		if err != nil {
			return err
		}
		if vm.CanFix && vm.Group.FixData && !vm.Group.PeriodClosed {
			// No field set once for items of several clients: each is corrected on its own.
			clients, err := h.svc.PendingClients(ctx, p.OrganizationID, g.ID)
			if err != nil {
				return err
			}
			if len(clients) > 1 {
				vm.ManyClients = l.N("group.edit.manyclients", len(clients))
			}
		}
		money := !p.Can(models.RoleAdmin) && h.money != nil && h.money(c, g.WorkflowID)
		for _, fld := range fields {
			vals, _, err := h.svc.FieldValues(ctx, p.OrganizationID, g.ID, fld)
			if err != nil {
				return err
			}
			e := pages.GroupEdit{Field: fld, Money: money}
			for _, v := range vals {
				e.Values = append(e.Values, pages.GroupFieldValue{Value: v.Value, Count: l.N("problems.count.pending", v.Count)})
			}
			vm.Edits = append(vm.Edits, e)
		}
	}
	return render(c, http.StatusOK, pages.Group(h.page(c, vm.Group.Title+" · "+l.T("problems.title"), "dlq"), vm))
}

// mutePresets are the mute form's choices: an hour, 4 hours, until tomorrow 8:00 (the
// user's zone), a week.
func mutePresets(l *i18n.Localizer, now time.Time) []pages.Option {
	loc := l.Zone()
	t := now.In(loc)
	tomorrow := time.Date(t.Year(), t.Month(), t.Day()+1, 8, 0, 0, 0, loc)
	return []pages.Option{
		{Value: now.Add(time.Hour).UTC().Format(time.RFC3339), Label: l.T("group.mute.1h")},
		{Value: now.Add(4 * time.Hour).UTC().Format(time.RFC3339), Label: l.T("group.mute.4h")},
		{Value: tomorrow.UTC().Format(time.RFC3339), Label: l.T("group.mute.1d")},
		{Value: now.Add(7 * 24 * time.Hour).UTC().Format(time.RFC3339), Label: l.T("group.mute.7d")},
	}
}

// Mute: POST /dlq/groups/{id}/mute from the group's page: until (a preset, RFC 3339) or at
// (a date and time in the user's zone, as a datetime-local field sends it).
func (h *GroupsHandler) Mute(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "group"); err != nil {
		return err
	}
	p, l := principal(c), localizer(c)
	var until time.Time
	var err error
	switch at, preset := c.FormValue("at"), c.FormValue("until"); {
	case at != "":
		until, err = time.ParseInLocation("2006-01-02T15:04", at, l.Zone())
	case preset != "":
		until, err = time.Parse(time.RFC3339, preset)
	default:
		err = errNoTime
	}
	if err != nil {
		return apperr.Invalid("group.invalid", map[string]string{"muteUntil": l.T("group.mute.until")})
	}
	if _, err := h.svc.Act(c.Request().Context(), groups.ActRequest{OrganizationID: p.OrganizationID, GroupID: id,
		Action: groups.Mute, MuteUntil: until, Actor: actorOf(p)}); err != nil {
		return err
	}
	return redirect(c, h.url("dlq.group", id)+"?done=muted")
}

var errNoTime = errors.New("no time")

// Ask: POST /dlq/groups/{id}/ask (accountants), "ask an admin" about a group whose items the
// organization keeps to its admins to close or correct, with an optional note: the group's
// page again, saying it was sent (or when the open ask was made).
func (h *GroupsHandler) Ask(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "group"); err != nil {
		return err
	}
	p, l, ctx := principal(c), localizer(c), c.Request().Context()
	g, err := h.svc.Get(ctx, p.OrganizationID, id)
	if err != nil {
		return err
	}
	asked, err := h.rules.AskAdminGroup(ctx, fixrules.GroupAsk{OrganizationID: p.OrganizationID, GroupID: g.ID, Note: c.FormValue("note"),
		Actor: actorOf(p), Title: l.Text(g.Title), Link: h.url("dlq.group", g.ID)})
	if err != nil {
		return err
	}
	done := "asked"
	if asked.Already {
		done = "already"
	}
	return redirect(c, h.url("dlq.group", g.ID)+"?done="+done)
}

// Split: POST /dlq/{id}/split from the item's page: the item moves to a group of its own,
// whose page answers.
func (h *GroupsHandler) Split(c echo.Context) error {
	g, err := h.split(c)
	if err != nil {
		return err
	}
	return redirect(c, h.url("dlq.group", g.ID))
}
