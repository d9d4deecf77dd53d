package handlers

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/auth"
	"lifeline/services/bulk"
	"lifeline/services/executions"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// bulkService is what the bulk handlers need.
type bulkService interface {
	Create(ctx context.Context, r bulk.Request) (*models.BulkJob, error)
	CreateOnce(ctx context.Context, r bulk.Request) (*models.BulkJob, bool, error)
	Preview(ctx context.Context, r bulk.Request) ([]string, error)
	Summary(ctx context.Context, orgID, id string) (*bulk.Summary, error)
	Items(ctx context.Context, orgID, id string, q bulk.ItemQuery) (*bulk.ItemPage, error)
	Outcomes(ctx context.Context, orgID, id string) (map[string]int, error)
	Cancel(ctx context.Context, orgID, id string, actor audit.Actor) error
}

// deadLetterBriefs reads dead letters in brief, by id (executions.Service).
type deadLetterBriefs interface {
	DeadLetterBriefs(ctx context.Context, orgID string, ids []string) (map[string]models.DLQBrief, error)
}

var (
	_ bulkService      = (*bulk.Service)(nil)
	_ deadLetterBriefs = (*executions.Service)(nil)
)

// BulkHandler serves bulk actions on dead letters (admins): start one from the list, follow
// its progress, cancel it; and the same through the API.
type BulkHandler struct {
	*chrome
	svc    bulkService
	briefs deadLetterBriefs
	rules  fixRules
	// groupRule checks an action on a failure group's items (GroupsHandler.rule; nil
	// without groups).
	groupRule func(c echo.Context, groupID, action string) error
}

// newBulkHandler returns the handler.
func newBulkHandler(ch *chrome, svc bulkService, briefs deadLetterBriefs, rules fixRules) *BulkHandler {
	return &BulkHandler{chrome: ch, svc: svc, briefs: briefs, rules: rules}
}

// shownItems is a page of the progress page's items (the API pages its own).
const shownItems = 100

type apiBulk struct {
	ID        string `json:"id"`
	Action    string `json:"action"`
	Status    string `json:"status"`
	Total     int    `json:"total"`
	Processed int    `json:"processed"`
	Succeeded int    `json:"succeeded"`
	Failed    int    `json:"failed"`
	CreatedAt string `json:"createdAt"`
	// Counts are the items by status (pending, waiting, done, failed, skipped): waiting
	// items wait for their target's circuit breaker to let calls through.
	Counts map[string]int `json:"counts,omitempty"`
	// Items is a page of the items, when asked for (items=true, limit, cursor or status);
	// NextCursor asks for the next page ("" on the last).
	Items      []apiBulkItem `json:"items,omitempty"`
	NextCursor *string       `json:"nextCursor,omitempty"`
}

type apiBulkItem struct {
	DeadLetterID string  `json:"deadLetterId"`
	Status       string  `json:"status"`
	Message      string  `json:"message,omitempty"`
	ExecutionID  *string `json:"executionId"`
}

// APICreate: POST /api/v1/dlq/bulk with {"action", "ids": […]} or {"action", "filter": {…}}
// (the list's query keys) and an optional "resolutionNotes" → 202 and the job. With an
// Idempotency-Key, the same request again → 200 and that job (Idempotency-Replayed: true).
func (h *BulkHandler) APICreate(c echo.Context) error {
	var req struct {
		Action          string            `json:"action"`
		IDs             []string          `json:"ids"`
		Filter          map[string]string `json:"filter"`
		ResolutionNotes string            `json:"resolutionNotes"`
	}
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	r := bulk.Request{OrganizationID: principal(c).OrganizationID, Action: req.Action, IDs: req.IDs, Notes: req.ResolutionNotes,
		Actor: actorOf(principal(c)), IdempotencyKey: key}
	if err := h.bulkRule(c, r); err != nil {
		return err
	}
	if err := bulkNote(principal(c), r); err != nil {
		return err
	}
	if req.Filter != nil {
		v := url.Values{}
		for k, val := range req.Filter {
			v.Set(k, val)
		}
		f, err := DLQFilterOf(localizer(c), v)
		if err != nil {
			return prefixFields(err, "filter.")
		}
		r.Filter = &f
	}
	job, replayed, err := h.svc.CreateOnce(c.Request().Context(), r)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, h.url("api.dlq.bulk", job.ID))
	if replayed {
		// The same request with the same Idempotency-Key: the job it made, not a second one.
		c.Response().Header().Set("Idempotency-Replayed", "true")
		return c.JSON(http.StatusOK, bulkOf(job, nil, false))
	}
	return c.JSON(http.StatusAccepted, bulkOf(job, nil, false))
}

// APIGet: GET /api/v1/dlq/bulk/{id}, the progress and the items counted by status. With
// items=true, or any of limit (1–500, default 100), cursor (a page's nextCursor) and status
// (an item status), a page of the items in order too; a bad one is 422.
func (h *BulkHandler) APIGet(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "bulk job"); err != nil {
		return err
	}
	p, ctx := principal(c), c.Request().Context()
	sum, err := h.svc.Summary(ctx, p.OrganizationID, id)
	if err != nil {
		return err
	}
	out := bulkOf(sum.Job, nil, false)
	out.Counts = sum.Counts
	qp := c.QueryParams()
	if qp.Get("items") != "true" && !qp.Has("limit") && !qp.Has("cursor") && !qp.Has("status") {
		return c.JSON(http.StatusOK, out)
	}
	q, err := bulkItemQuery(qp)
	if err != nil {
		return err
	}
	page, err := h.svc.Items(ctx, p.OrganizationID, id, q)
	if err != nil {
		return err
	}
	out = bulkOf(sum.Job, page.Items, true)
	out.Counts = sum.Counts
	l := localizer(c)
	for i := range out.Items {
		out.Items[i].Message = l.Text(out.Items[i].Message)
	}
	next := ""
	if page.Next >= 0 {
		next = bulkCursor(page.Next)
	}
	out.NextCursor = &next
	return c.JSON(http.StatusOK, out)
}

// bulkItemQuery reads a page's query: limit, cursor, status. EINVALID per field.
func bulkItemQuery(qp url.Values) (bulk.ItemQuery, error) {
	q := bulk.ItemQuery{After: -1, Limit: bulk.DefaultPage, Status: qp.Get("status")}
	fields := map[string]string{}
	if v := qp.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			n = 0
		}
		q.Limit = n
	}
	if v := qp.Get("cursor"); v != "" {
		after, ok := bulkAfter(v)
		if !ok {
			fields["cursor"] = "is not a cursor this list gave"
		}
		q.After = after
	}
	maps.Copy(fields, q.Validate())
	if len(fields) > 0 {
		return q, apperr.Invalid("bulk.items.invalid", fields)
	}
	return q, nil
}

// bulkCursor and bulkAfter write and read a page's cursor: the position of its last item.
func bulkCursor(pos int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("p" + strconv.Itoa(pos)))
}

func bulkAfter(cursor string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) < 2 || b[0] != 'p' {
		return -1, false
	}
	n, err := strconv.Atoi(string(b[1:]))
	if err != nil || n < 0 {
		return -1, false
	}
	return n, true
}

// APICancel: POST /api/v1/dlq/bulk/{id}/cancel.
func (h *BulkHandler) APICancel(c echo.Context) error {
	if err := h.cancel(c); err != nil {
		return err
	}
	return h.APIGet(c)
}

func (h *BulkHandler) cancel(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "bulk job"); err != nil {
		return err
	}
	p := principal(c)
	return h.svc.Cancel(c.Request().Context(), p.OrganizationID, id, actorOf(p))
}

func bulkOf(job *models.BulkJob, items []models.BulkItem, withItems bool) apiBulk {
	out := apiBulk{ID: job.ID, Action: job.Action, Status: job.Status, Total: job.Total, Processed: job.Processed,
		Succeeded: job.Succeeded, Failed: job.Failed, CreatedAt: rfc(job.CreatedAt)}
	if withItems {
		out.Items = make([]apiBulkItem, 0, len(items))
		for _, it := range items {
			out.Items = append(out.Items, apiBulkItem{DeadLetterID: it.DeadLetterID, Status: it.Status, Message: deref(it.Message), ExecutionID: it.ExecutionID})
		}
	}
	return out
}

// Start: POST /dlq/bulk, the list's bulk form: the checked rows (ids), or with scope=filter
// every pending item the list's filter (sent as its query keys) matches. Without confirm=1
// it starts nothing: it answers the confirmation page (how many items, what will happen,
// notes for resolve and skip), or, when the request cannot be carried out (nothing
// selected, nothing matches), that page with the reason and a way back (422).
func (h *BulkHandler) Start(c echo.Context) error {
	p := principal(c)
	r := bulk.Request{OrganizationID: p.OrganizationID, Action: c.FormValue("action"), Notes: c.FormValue("notes"), Actor: actorOf(p)}
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	if c.FormValue("scope") == "filter" {
		f, err := DLQFilterOf(localizer(c), form)
		if err != nil {
			return err
		}
		r.Filter = &f
	} else {
		r.IDs = form["ids"]
	}
	if r.Action == bulk.EditRetry {
		// A group's correction: one field of every pending item of the group, one value.
		if r.Filter == nil || r.Filter.GroupID == "" || h.groupRule == nil {
			return apperr.Invalid("bulk.invalid", map[string]string{"action": "edit_retry applies to a failure group's items"})
		}
		r.Edit = &bulk.Edit{Field: c.FormValue("field"), Value: c.FormValue("value")}
	}
	ctx := c.Request().Context()
	ids, err := h.svc.Preview(ctx, r)
	if err != nil && invalid(err) == nil {
		return err
	}
	if c.FormValue("confirm") != "1" || err != nil {
		return h.confirm(c, r, form, ids, err, false)
	}
	if r.Filter != nil && r.Filter.GroupID != "" && h.groupRule != nil {
		if err := h.groupRule(c, r.Filter.GroupID, r.Action); err != nil {
			return err
		}
	} else if err := h.bulkRule(c, r); err != nil {
		return err
	}
	if err := bulkNote(p, r); err != nil {
		return h.confirm(c, r, form, ids, err, false)
	}
	// What was confirmed is what runs: when the items changed since (new failures match
	// the filter, one was resolved meanwhile), the confirmation is shown again.
	if c.FormValue("token") != bulkToken(r.Action, ids) {
		return h.confirm(c, r, form, ids, nil, true)
	}
	// The confirmation's nonce makes a double click one job.
	if nonce := c.FormValue("nonce"); nonce != "" {
		r.IdempotencyKey = "form:" + nonce
	}
	job, _, err := h.svc.CreateOnce(ctx, r)
	if invalid(err) != nil {
		return h.confirm(c, r, form, ids, err, false)
	}
	if err != nil {
		return err
	}
	return redirect(c, h.url("dlq.bulk", job.ID))
}

// bulkToken identifies the items a confirmation showed: the action and their ids.
func bulkToken(action string, ids []string) string {
	sorted := slices.Sorted(slices.Values(ids))
	sum := sha256.Sum256([]byte(action + "\n" + strings.Join(sorted, "\n")))
	return hex.EncodeToString(sum[:16])
}

// confirm renders the confirmation of a bulk action from the list's form: the items it acts
// on (ids, from Preview), or why it cannot start (perr, 422); changed: the items are not
// those the person confirmed (409).
func (h *BulkHandler) confirm(c echo.Context, r bulk.Request, form url.Values, ids []string, perr error, changed bool) error {
	l := localizer(c)
	vm := pages.BulkConfirmVM{Action: r.Action, PostURL: h.url("dlq.bulk.start"), CSRF: csrfToken(c), Notes: r.Notes,
		ByFilter: r.Filter != nil, Token: bulkToken(r.Action, ids), Nonce: models.NewID(), Changed: changed,
		Group: r.Filter != nil && r.Filter.GroupID != ""}
	if r.Edit != nil {
		vm.Edit = l.T("bulk.confirm.edit", "Field", r.Edit.Field, "Value", fmt.Sprint(r.Edit.Value))
	}
	back := url.Values{}
	for k, vs := range form {
		switch k {
		case "_csrf", "confirm", "notes", "token", "nonce":
			continue
		}
		for _, v := range vs {
			vm.Fields = append(vm.Fields, pages.HiddenField{Name: k, Value: v})
		}
		if k != "scope" && k != "action" && k != "ids" {
			back[k] = vs
		}
	}
	sort.Slice(vm.Fields, func(i, j int) bool { return vm.Fields[i].Name < vm.Fields[j].Name })
	vm.BackURL = h.url("dlq")
	if vm.Group {
		vm.BackURL, back = h.url("dlq.group", r.Filter.GroupID), nil
	}
	if len(back) > 0 {
		vm.BackURL += "?" + back.Encode()
	}
	if me := invalid(perr); me != nil {
		vm.Problems = bulkProblems(l, r, me)
		return h.renderConfirm(c, http.StatusUnprocessableEntity, r, vm)
	}
	// A filter's items are its pending ones: only the named ones are read. Selected items
	// are read to count those still pending.
	shown := ids[:min(len(ids), maxConfirmItems)]
	read := shown
	if r.Filter == nil || r.Action == bulk.Retry {
		read = ids // a retry counts beforehand the items it will be refused
	}
	briefs, err := h.briefs.DeadLetterBriefs(c.Request().Context(), principal(c).OrganizationID, read)
	if err != nil {
		return err
	}
	if r.Filter != nil {
		vm.Count = len(ids)
	} else {
		for _, id := range ids {
			if briefs[id].Status == models.DLQPending {
				vm.Count++
			}
		}
	}
	if vm.Count == 0 {
		vm.Problems = []string{l.T("bulk.confirm.nonepending")}
		return h.renderConfirm(c, http.StatusUnprocessableEntity, r, vm)
	}
	if left := len(ids) - vm.Count; left > 0 {
		vm.LeftAlone = l.N("bulk.confirm.leftalone", left)
	}
	if r.Action == bulk.Retry {
		rolled := 0
		for _, id := range ids {
			if b := briefs[id]; b.RolledBack && b.Status == models.DLQPending {
				rolled++
			}
		}
		if rolled > 0 {
			vm.Refusals = l.N("bulk.confirm.rolledback", rolled)
		}
	}
	for _, id := range shown {
		b := briefs[id]
		vm.Items = append(vm.Items, pages.BulkConfirmItem{URL: h.url("dlq.item", id), Label: cmp.Or(b.Subject, shortID(id)), Status: b.Status})
	}
	if more := len(ids) - len(shown); more > 0 {
		vm.More = l.N("bulk.confirm.more", more)
	}
	status := http.StatusOK
	if changed {
		status = http.StatusConflict
	}
	return h.renderConfirm(c, status, r, vm)
}

func (h *BulkHandler) renderConfirm(c echo.Context, status int, r bulk.Request, vm pages.BulkConfirmVM) error {
	l := localizer(c)
	return render(c, status, pages.BulkConfirm(h.page(c, l.T("bulk.title."+cmp.Or(r.Action, "retry"))+" · "+l.T("nav.dlq"), "dlq"), vm))
}

// bulkProblems says in whole sentences why a bulk action from the list cannot start.
func bulkProblems(l *i18n.Localizer, r bulk.Request, me *apperr.Error) []string {
	if me.Fields["ids"] != "" && len(r.IDs) == 0 && r.Filter == nil {
		return []string{l.T("bulk.confirm.none")}
	}
	var out []string
	unknown := 0
	for _, k := range slices.Sorted(maps.Keys(me.Fields)) {
		v := me.Fields[k]
		switch {
		case strings.HasPrefix(k, "ids["):
			unknown++
		case k == "filter" && strings.HasPrefix(v, "matches no pending item"):
			out = append(out, l.T("bulk.confirm.nomatch"))
		case k == "filter":
			out = append(out, l.T("bulk.confirm.toomany", "Max", l.Number(bulk.MaxItems, 0)))
		default:
			out = append(out, k+": "+l.Text(v))
		}
	}
	if unknown > 0 {
		out = append(out, l.N("bulk.confirm.unknown", unknown))
	}
	if len(out) == 0 {
		out = append(out, l.Text(me.Message))
	}
	return out
}

// Show: GET /dlq/bulk/{id}, the progress page (it refreshes itself while the job runs): the
// counts, and a page of the items (cursor, status as in the API).
func (h *BulkHandler) Show(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "bulk job"); err != nil {
		return err
	}
	l, p, ctx := localizer(c), principal(c), c.Request().Context()
	sum, err := h.svc.Summary(ctx, p.OrganizationID, id)
	if err != nil {
		return err
	}
	job := sum.Job
	vm := pages.BulkVM{ID: job.ID, Action: job.Action, Status: job.Status, Total: job.Total, Processed: job.Processed,
		Succeeded: job.Succeeded, Failed: job.Failed, RefreshURL: h.url("dlq.bulk", job.ID), ListURL: h.url("dlq"),
		CreatedAt: rfc(job.CreatedAt), CreatedAtText: displayTime(l, job.CreatedAt), CSRF: csrfToken(c)}
	vm.Live = job.Status == models.BulkQueued || job.Status == models.BulkRunning
	if vm.Live && p.Can(models.RoleAdmin) {
		vm.CancelURL = h.url("dlq.bulk.cancel", job.ID)
	}
	if job.Total > 0 {
		vm.Percent = job.Processed * 100 / job.Total
	}
	if n := sum.Counts[bulk.ItemWaiting]; n > 0 {
		vm.Waiting = l.N("bulk.waiting", n)
	}
	q, err := bulkItemQuery(c.QueryParams())
	if err != nil {
		return err
	}
	q.Limit = shownItems
	if c.QueryParam("limit") != "" {
		return apperr.Invalid("bulk.items.invalid", map[string]string{"limit": "is not a setting of this page"})
	}
	page, err := h.svc.Items(ctx, p.OrganizationID, id, q)
	if err != nil {
		return err
	}
	// A retry job is over when every retry it started is: the page follows them, then says
	// how they ended (counted in one query, not item by item).
	if job.Action == bulk.Retry || job.Action == bulk.RetryFull {
		out, err := h.svc.Outcomes(ctx, p.OrganizationID, id)
		if err != nil {
			return err
		}
		vm.Live = vm.Live || out[models.DLQProcessing] > 0
		if !vm.Live && job.Status == models.BulkDone {
			vm.Summary = l.T("bulk.summary", "Fixed", out[models.DLQResolved], "Back", out[models.DLQPending], "Refused", sum.Counts[bulk.ItemFailed])
		}
	}
	ids := make([]string, len(page.Items))
	for i, it := range page.Items {
		ids[i] = it.DeadLetterID
	}
	briefs, err := h.briefs.DeadLetterBriefs(ctx, p.OrganizationID, ids)
	if err != nil {
		return err
	}
	for _, it := range page.Items {
		b := briefs[it.DeadLetterID]
		iv := pages.BulkItemVM{URL: h.url("dlq.item", it.DeadLetterID), Label: cmp.Or(b.Subject, shortID(it.DeadLetterID)),
			Status: it.Status, Message: l.Text(deref(it.Message)), ItemStatus: b.Status}
		if it.ExecutionID != nil {
			iv.ExecutionURL = h.url("execution", *it.ExecutionID)
		}
		vm.Items = append(vm.Items, iv)
	}
	// Pages: the first, and the next; the status filter stays.
	base := url.Values{}
	if q.Status != "" {
		base.Set("status", q.Status)
	}
	if q.After >= 0 {
		vm.FirstURL = h.url("dlq.bulk", job.ID)
		if len(base) > 0 {
			vm.FirstURL += "?" + base.Encode()
		}
		vm.Live = false // a later page stays put while one reads it
	}
	if page.Next >= 0 {
		next := url.Values{"cursor": {bulkCursor(page.Next)}}
		if q.Status != "" {
			next.Set("status", q.Status)
		}
		vm.NextURL = h.url("dlq.bulk", job.ID) + "?" + next.Encode()
	}
	for _, st := range bulk.ItemStatuses {
		if n := sum.Counts[st]; n > 0 {
			f := pages.BulkFilter{Status: st, Count: n, Current: q.Status == st}
			f.URL = h.url("dlq.bulk", job.ID) + "?" + url.Values{"status": {st}}.Encode()
			vm.Filters = append(vm.Filters, f)
		}
	}
	if q.Status != "" {
		vm.AllURL = h.url("dlq.bulk", job.ID)
	}
	return render(c, http.StatusOK, pages.Bulk(h.page(c, l.T("bulk.title."+job.Action), "dlq"), vm))
}

// maxConfirmItems bounds the items the confirmation names; it counts the rest.
const maxConfirmItems = 20

// bulkRule refuses an accountant's bulk resolve or skip when the organization keeps closing
// items to its admins (every item would be refused, for the same reason).
func (h *BulkHandler) bulkRule(c echo.Context, r bulk.Request) error {
	p := principal(c)
	if (r.Action != bulk.Resolve && r.Action != bulk.Skip) || p.Can(models.RoleAdmin) {
		return nil
	}
	rules, err := h.rules.Rules(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return err
	}
	if !rules.AccountantsMayFix {
		return errAdminOnly
	}
	return nil
}

// bulkNote refuses an accountant's bulk resolve or skip without a note (as for one item).
func bulkNote(p *auth.Principal, r bulk.Request) error {
	closes := r.Action == bulk.Resolve || r.Action == bulk.Skip
	if closes && needsNote(p, action{Settle: r.Action, Notes: r.Notes}) {
		return apperr.Invalid("Say why in a note: whoever looks at this item later will read it.",
			map[string]string{"resolutionNotes": "A note is required to skip or close an item."})
	}
	return nil
}

// Cancel: POST /dlq/bulk/{id}/cancel from the progress page.
func (h *BulkHandler) Cancel(c echo.Context) error {
	if err := h.cancel(c); err != nil && apperr.ErrorCode(err) != apperr.ECONFLICT {
		return err
	}
	return redirect(c, h.url("dlq.bulk", c.Param("id")))
}

// prefixFields puts prefix before the field names of an EINVALID error.
func prefixFields(err error, prefix string) error {
	me := invalid(err)
	if me == nil {
		return err
	}
	fields := make(map[string]string, len(me.Fields))
	for k, v := range me.Fields {
		fields[prefix+k] = v
	}
	return &apperr.Error{Code: me.Code, Message: me.Message, Fields: fields}
}
