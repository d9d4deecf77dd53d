package handlers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/fixrules"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// Who may fix what (issue 21): the organization's rule, "ask an admin", an input change
// waiting for an admin's approval, and reopening an item closed by hand.

// rulesStore reads and saves the organization's rules (fixrules.Service).
type rulesStore interface {
	Rules(ctx context.Context, orgID string) (fixrules.Rules, error)
	SaveRules(ctx context.Context, orgID string, actor audit.Actor, r fixrules.Rules) (fixrules.Rules, error)
}

var _ rulesStore = (*fixrules.Service)(nil)

// rulesReader reads the organization's rules (fixrules.Service).
type rulesReader interface {
	Rules(ctx context.Context, orgID string) (fixrules.Rules, error)
}

// adminOnly reports whether the organization keeps closing (resolve, skip) and correcting
// items to its admins and the principal is not one: a list then offers neither and says
// who can. Without rules (nil), accountants may.
func adminOnly(c echo.Context, rules rulesReader) (bool, error) {
	p := principal(c)
	if rules == nil || p.Can(models.RoleAdmin) {
		return false, nil
	}
	r, err := rules.Rules(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return false, err
	}
	return !r.AccountantsMayFix, nil
}

// RulesHandler serves the organization's rules: its settings page and the API.
type RulesHandler struct {
	*chrome
	rules rulesStore
}

func newRulesHandler(ch *chrome, rules rulesStore) *RulesHandler {
	return &RulesHandler{chrome: ch, rules: rules}
}

// Show: GET /settings/rules (admins).
func (h *RulesHandler) Show(c echo.Context) error {
	r, err := h.rules.Rules(c.Request().Context(), principal(c).OrganizationID)
	if err != nil {
		return err
	}
	vm := h.vm(c, r)
	vm.Saved = c.QueryParam("done") == "saved"
	return h.render(c, http.StatusOK, vm)
}

func (h *RulesHandler) vm(c echo.Context, r fixrules.Rules) pages.RulesVM {
	return pages.RulesVM{Action: h.url("organization.rules.save"), CSRF: csrfToken(c), AccountantsMayFix: r.AccountantsMayFix,
		BulkRate: strconv.Itoa(r.BulkRate), BulkRateMin: models.BulkRateMin, BulkRateMax: models.BulkRateMax,
		ZUSDay: strconv.Itoa(r.ZUSDay), RiskWorkingDays: strconv.Itoa(r.RiskWorkingDays), RiskDaysMax: models.RiskDaysMax}
}

func (h *RulesHandler) render(c echo.Context, status int, vm pages.RulesVM) error {
	l := localizer(c)
	return render(c, status, pages.Rules(h.page(c, l.T("rules.title"), "rules"), vm))
}

// Save: POST /settings/rules (admins), the form's checkbox, bulk rate, ZUS day and at-risk
// working days (each number left out: kept). A number out of range is the form again with
// its message (422), nothing stored.
func (h *RulesHandler) Save(c echo.Context) error {
	p, ctx := principal(c), c.Request().Context()
	v := c.FormValue("accountantsMayFix")
	if v != "" && v != "true" {
		return apperr.Invalid("rules.invalid", map[string]string{"accountantsMayFix": "must be true or false"})
	}
	cur, err := h.rules.Rules(ctx, p.OrganizationID)
	if err != nil {
		return err
	}
	next := cur
	next.AccountantsMayFix = v == "true"
	// The numbers as typed; each left out is kept.
	typed := map[string]string{}
	errs := map[string]string{}
	for _, f := range []struct {
		name  string
		into  *int
		valid func(int) string
	}{{"bulkRate", &next.BulkRate, fixrules.ValidBulkRate}, {"zusDay", &next.ZUSDay, fixrules.ValidZUSDay},
		{"riskWorkingDays", &next.RiskWorkingDays, fixrules.ValidRiskDays}} {
		raw, sent := c.Request().PostForm[f.name]
		if !sent {
			continue
		}
		typed[f.name] = strings.TrimSpace(strings.Join(raw, ""))
		n, err := strconv.Atoi(typed[f.name])
		if msg := f.valid(n); err != nil || msg != "" {
			errs[f.name] = localizer(c).Text(f.valid(-1))
			continue
		}
		*f.into = n
	}
	if len(errs) > 0 {
		vm := h.vm(c, next)
		for name, raw := range typed {
			switch name {
			case "bulkRate":
				vm.BulkRate = raw
			case "zusDay":
				vm.ZUSDay = raw
			case "riskWorkingDays":
				vm.RiskWorkingDays = raw
			}
		}
		vm.Error, vm.Errors = localizer(c).T("rules.invalid"), errs
		return h.render(c, http.StatusUnprocessableEntity, vm)
	}
	if _, err := h.rules.SaveRules(ctx, p.OrganizationID, actorOf(p), next); err != nil {
		return err
	}
	return redirect(c, h.url("organization.rules")+"?done=saved")
}

// APIGet: GET /api/v1/organization/settings (admins).
func (h *RulesHandler) APIGet(c echo.Context) error {
	r, err := h.rules.Rules(c.Request().Context(), principal(c).OrganizationID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// APIPatch: PATCH /api/v1/organization/settings {"accountantsMayFix": bool, "bulkRate",
// "zusDay" (15 or 20), "riskWorkingDays" (0-30)} (admins); 422
// with a message per field on an unknown key or a value of the wrong type.
func (h *RulesHandler) APIPatch(c echo.Context) error {
	p := principal(c)
	raw, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	cur, err := h.rules.Rules(ctx, p.OrganizationID)
	if err != nil {
		return err
	}
	next, err := fixrules.ParsePatch(cur, raw)
	if err != nil {
		return err
	}
	if next, err = h.rules.SaveRules(ctx, p.OrganizationID, actorOf(p), next); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, next)
}

// fixVM fills what the item page says of who may fix what besides the actions panel
// (recoveryVM): the input change waiting (or last rejected); for admins, the reopen form of
// an item closed by hand.
func (h *DLQActionsHandler) fixVM(c echo.Context, vm *pages.DLQItemVM, r *models.DLQRow) error {
	p, l, ctx := principal(c), localizer(c), c.Request().Context()
	changes, err := h.chg.InputChanges(ctx, p.OrganizationID, r.ID)
	if err != nil {
		return err
	}
	if len(changes) > 0 && r.Status == models.DLQPending && (changes[0].Status == models.ChangePending || changes[0].Status == models.ChangeRejected) {
		vm.Change = h.changeVM(c, l, &changes[0])
		if vm.Recovery != nil && changes[0].Status == models.ChangePending {
			vm.Recovery.Waiting = true
		}
	}
	if p.Can(models.RoleAdmin) && (vm.Closed == "dlq.closed.resolved" || vm.Closed == "dlq.closed.skipped") && r.ExpiresAt.After(time.Now()) /* display only: ReopenDeadLetter decides */ {
		vm.ReopenURL, vm.CSRF = h.url("dlq.reopen", r.ID), csrfToken(c)
	}
	return nil
}

// fixPanel fills the actions panel's rules: whether the principal may edit, skip and close
// (else it says who can), "ask an admin" for accountants, and whether an edited input waits
// for an admin's approval (a workflow that moves money).
func (h *DLQActionsHandler) fixPanel(c echo.Context, rec *pages.RecoveryVM, dl *models.DeadLetter) {
	p := principal(c)
	may, err := h.mayFix(c)
	if err != nil {
		h.log.Warn("item page: the organization's rules", "err", err) // shown as refused; the action itself checks again
	}
	rec.MayFix = may
	if !p.Can(models.RoleAdmin) && p.UserID != "" {
		rec.Ask = &pages.AskVM{URL: h.url("dlq.ask", dl.ID), CSRF: csrfToken(c)}
		rec.NeedsApproval = h.movesMoney(c, dl.WorkflowID)
	}
}

// changeVM shows an input-change request: who asked and when, the diff (masked), the
// decision; for admins the approve and reject forms of a pending one.
func (h *DLQActionsHandler) changeVM(c echo.Context, l *i18n.Localizer, ch *models.InputChangeRequest) *pages.ChangeVM {
	var before, after any
	_ = json.Unmarshal(ch.InputBefore, &before)
	_ = json.Unmarshal(ch.InputAfter, &after)
	v := &pages.ChangeVM{ID: ch.ID, Status: ch.Status, RequestedBy: ch.RequestedName, Notes: deref(ch.Notes), Diff: jsonDiff(before, after, ""),
		DecidedBy: ch.DecidedName, DecisionNotes: deref(ch.DecisionNotes)}
	v.RequestedAt, v.RequestedAtText = rfc(ch.CreatedAt), displayTime(l, ch.CreatedAt)
	v.DecidedAt, v.DecidedAtText = displayTimePtr(l, ch.DecidedAt)
	if ch.Status == models.ChangePending && principal(c).Can(models.RoleAdmin) {
		v.ApproveURL, v.RejectURL, v.CSRF = h.url("dlq.change.approve", ch.DeadLetterID, ch.ID), h.url("dlq.change.reject", ch.DeadLetterID, ch.ID), csrfToken(c)
	}
	return v
}

// Ask: POST /dlq/{id}/ask (accountants), "ask an admin" with an optional note: the item page
// again, saying it was sent, or when the open ask was made.
func (h *DLQActionsHandler) Ask(c echo.Context) error {
	asked, err := h.ask(c, c.FormValue("note"))
	if me := invalid(err); me != nil {
		form := pages.RecoveryForm{Action: "ask", Errors: map[string]string{}}
		form.FormError, form.Errors = translated(localizer(c), me.Message, me.Fields)
		return h.refuse(c, http.StatusUnprocessableEntity, form)
	}
	if apperr.ErrorCode(err) == apperr.ECONFLICT {
		return h.refuse(c, http.StatusConflict, pages.RecoveryForm{FormError: localizer(c).Text(err.(*apperr.Error).Message)})
	}
	if err != nil {
		return err
	}
	vm, err := h.itemVM(c, pages.RecoveryForm{})
	if err != nil {
		return err
	}
	vm.AskNotice = askNotice(localizer(c), asked)
	return h.renderItem(c, http.StatusOK, vm)
}

func askNotice(l *i18n.Localizer, a fixrules.Asked) string {
	if a.Already {
		return l.T("ask.already", "At", displayTime(l, a.At))
	}
	return l.T("ask.sent")
}

// ask sends the principal's ask about the item.
func (h *DLQActionsHandler) ask(c echo.Context, note string) (fixrules.Asked, error) {
	id := c.Param("id")
	if err := checkID(id, "dead letter"); err != nil {
		return fixrules.Asked{}, err
	}
	p, ctx := principal(c), c.Request().Context()
	r, err := h.dlq.GetDLQ(ctx, p.OrganizationID, id)
	if err != nil {
		return fixrules.Asked{}, err
	}
	title := shortID(r.ExecutionID)
	if r.Subject != nil {
		title = *r.Subject
	}
	return h.rules.AskAdmin(ctx, fixrules.Ask{OrganizationID: p.OrganizationID, DeadLetterID: id, Note: note, Actor: actorOf(p),
		Title: title, Link: h.url("dlq.item", id)})
}

// APIAsk: POST /api/v1/dlq/{id}/ask {"note"} (accountants): 201 {"asked": true, "at"}, or
// 200 {"asked": false, "already": true, "at"} while an earlier ask is open.
func (h *DLQActionsHandler) APIAsk(c echo.Context) error {
	var req struct {
		Note string `json:"note"`
	}
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	a, err := h.ask(c, req.Note)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if a.Already {
		status = http.StatusOK
	}
	return c.JSON(status, map[string]any{"asked": !a.Already, "already": a.Already, "at": rfc(a.At)})
}

// decision is an approve or reject of a request, from a form or the API.
func (h *DLQActionsHandler) decision(c echo.Context, notes string) (engine.Decision, error) {
	if err := checkID(c.Param("id"), "dead letter"); err != nil {
		return engine.Decision{}, err
	}
	if err := checkID(c.Param("cid"), "input change request"); err != nil {
		return engine.Decision{}, err
	}
	p := principal(c)
	// The request must be the item's: its id in the URL is not enough.
	changes, err := h.chg.InputChanges(c.Request().Context(), p.OrganizationID, c.Param("id"))
	if err != nil {
		return engine.Decision{}, err
	}
	for _, ch := range changes {
		if ch.ID == c.Param("cid") {
			return engine.Decision{OrganizationID: p.OrganizationID, RequestID: ch.ID, Notes: notes, Actor: actorOf(p), ActorName: p.Email}, nil
		}
	}
	return engine.Decision{}, apperr.NotFound("input change request")
}

// Approve: POST /dlq/{id}/changes/{cid}/approve (admins): the replay runs; the item page
// follows it.
func (h *DLQActionsHandler) Approve(c echo.Context) error {
	d, err := h.decision(c, c.FormValue("notes"))
	if err != nil {
		return err
	}
	if _, err := h.chg.ApproveInputChange(c.Request().Context(), d); err != nil {
		return h.refuseDecision(c, err)
	}
	return redirect(c, h.url("dlq.item", c.Param("id"))+"?done=edit")
}

// Reject: POST /dlq/{id}/changes/{cid}/reject (admins), with a note: the item stays pending.
func (h *DLQActionsHandler) Reject(c echo.Context) error {
	d, err := h.decision(c, c.FormValue("notes"))
	if err != nil {
		return err
	}
	if _, err := h.chg.RejectInputChange(c.Request().Context(), d); err != nil {
		return h.refuseDecision(c, err)
	}
	return redirect(c, h.url("dlq.item", c.Param("id"))+"?done=rejected")
}

// refuseDecision shows the item page with why a decision (or a reopen) was refused: 422
// (a note), 409 (decided already), or the error.
func (h *DLQActionsHandler) refuseDecision(c echo.Context, err error) error {
	me, ok := err.(*apperr.Error)
	if !ok || (me.Code != apperr.EINVALID && me.Code != apperr.ECONFLICT) {
		return err
	}
	status := http.StatusConflict
	if me.Code == apperr.EINVALID {
		status = http.StatusUnprocessableEntity
	}
	vm, verr := h.itemVM(c, pages.RecoveryForm{})
	if verr != nil {
		return verr
	}
	msg, fields := translated(localizer(c), me.Message, me.Fields)
	vm.Notice = strings.TrimSpace(msg + " " + fields["notes"])
	return h.renderItem(c, status, vm)
}

// apiChange is an input-change request in the API.
type apiChange struct {
	ID            string         `json:"id"`
	DeadLetterID  string         `json:"deadLetterId"`
	ExecutionID   string         `json:"executionId"`
	Status        string         `json:"status"`
	Mode          string         `json:"mode"`
	RequestedBy   string         `json:"requestedBy"`
	RequestedAt   string         `json:"requestedAt"`
	Notes         string         `json:"notes,omitempty"`
	Diff          []apiDiffEntry `json:"diff"`
	DecidedBy     string         `json:"decidedBy,omitempty"`
	DecidedAt     string         `json:"decidedAt,omitempty"`
	DecisionNotes string         `json:"decisionNotes,omitempty"`
}

type apiDiffEntry struct {
	Op     string `json:"op"`
	Path   string `json:"path"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
}

// APIChanges: GET /api/v1/dlq/{id}/changes, the item's input-change requests, newest first
// (inputs masked, as a diff).
func (h *DLQActionsHandler) APIChanges(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "dead letter"); err != nil {
		return err
	}
	changes, err := h.chg.InputChanges(c.Request().Context(), principal(c).OrganizationID, id)
	if err != nil {
		return err
	}
	out := make([]apiChange, 0, len(changes))
	for _, ch := range changes {
		var before, after any
		_ = json.Unmarshal(ch.InputBefore, &before)
		_ = json.Unmarshal(ch.InputAfter, &after)
		a := apiChange{ID: ch.ID, DeadLetterID: ch.DeadLetterID, ExecutionID: ch.ExecutionID, Status: ch.Status, Mode: ch.Mode,
			RequestedBy: ch.RequestedName, RequestedAt: rfc(ch.CreatedAt), Notes: deref(ch.Notes), Diff: []apiDiffEntry{},
			DecidedBy: ch.DecidedName, DecisionNotes: deref(ch.DecisionNotes)}
		if ch.DecidedAt != nil {
			a.DecidedAt = rfc(*ch.DecidedAt)
		}
		for _, d := range jsonDiff(before, after, "") {
			a.Diff = append(a.Diff, apiDiffEntry{Op: d.Op, Path: d.Path, Before: d.Before, After: d.After})
		}
		out = append(out, a)
	}
	return c.JSON(http.StatusOK, map[string]any{"data": out})
}

// apiDecision reads an API decision on an input change: the body's {"notes"} and the ids
// in the path.
func (h *DLQActionsHandler) apiDecision(c echo.Context) (engine.Decision, error) {
	var req struct {
		Notes string `json:"notes"`
	}
	if err := decodeBody(c, &req); err != nil {
		return engine.Decision{}, err
	}
	return h.decision(c, req.Notes)
}

// APIApprove: POST /api/v1/dlq/{id}/changes/{cid}/approve {"notes"} (admins): 202 and the
// replay runs; 409 when the request was decided (or cancelled) already.
func (h *DLQActionsHandler) APIApprove(c echo.Context) error {
	d, err := h.apiDecision(c)
	if err != nil {
		return err
	}
	res, err := h.chg.ApproveInputChange(c.Request().Context(), d)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, h.url("api.execution", res.ExecutionID))
	return c.JSON(http.StatusAccepted, apiResult{DeadLetterID: res.DeadLetterID, ExecutionID: res.ExecutionID, Action: "approve",
		Status: models.DLQProcessing, RequestID: d.RequestID})
}

// APIReject: POST /api/v1/dlq/{id}/changes/{cid}/reject {"notes"} (admins, notes required).
func (h *DLQActionsHandler) APIReject(c echo.Context) error {
	d, err := h.apiDecision(c)
	if err != nil {
		return err
	}
	ch, err := h.chg.RejectInputChange(c.Request().Context(), d)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"id": ch.ID, "status": ch.Status})
}

// reopen reopens the item of the request with notes.
func (h *DLQActionsHandler) reopen(c echo.Context, notes string) error {
	id := c.Param("id")
	if err := checkID(id, "dead letter"); err != nil {
		return err
	}
	p := principal(c)
	return h.chg.Reopen(c.Request().Context(), engine.ReopenRequest{OrganizationID: p.OrganizationID, DeadLetterID: id, Notes: notes, Actor: actorOf(p)})
}

// Reopen: POST /dlq/{id}/reopen (admins), with a note: the item is pending again.
func (h *DLQActionsHandler) Reopen(c echo.Context) error {
	if err := h.reopen(c, c.FormValue("notes")); err != nil {
		return h.refuseDecision(c, err)
	}
	return redirect(c, h.url("dlq.item", c.Param("id"))+"?done=reopened")
}

// APIReopen: POST /api/v1/dlq/{id}/reopen {"notes"} (admins): 200 {"status": "pending"}; 409
// when it is open already, expired, or was closed by a successful replay.
func (h *DLQActionsHandler) APIReopen(c echo.Context) error {
	var req struct {
		Notes string `json:"notes"`
	}
	if err := decodeBody(c, &req); err != nil {
		return err
	}
	if err := h.reopen(c, req.Notes); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"deadLetterId": c.Param("id"), "status": models.DLQPending})
}
