package handlers

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/definition"
	"lifeline/services/engine"
	"lifeline/services/redact"
	"lifeline/services/retry"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

func dlqRow(lk links, l *i18n.Localizer, r *models.DLQRow) pages.DLQRow {
	return pages.DLQRow{ID: r.ID, URL: lk.url("dlq.item", r.ID), ExecutionURL: lk.url("execution", r.ExecutionID),
		WorkflowName: r.WorkflowName, WorkflowURL: lk.url("workflow", r.WorkflowID), FailedStep: r.FailedStepID,
		ErrorType: r.DeadLetter.ErrorType, ErrorMessage: l.Text(cmp.Or(r.Reason, r.ErrorMessage)), Status: r.Status,
		CreatedAt: rfc(r.CreatedAt), CreatedAtText: displayTime(l, r.CreatedAt), ExpiresAt: rfc(r.ExpiresAt), ExpiresAtText: relativeTime(l, r.ExpiresAt)}
}

// Show: GET /dlq/{id}, the item with its error context, timeline and actions.
func (h *DLQActionsHandler) Show(c echo.Context) error {
	vm, err := h.itemVM(c, pages.RecoveryForm{})
	if err != nil {
		return err
	}
	if done := c.QueryParam("done"); oneOf(done, []string{"retry", "resume", "full", "edit", "skip_step", "resolve", "skip", "requested", "rejected", "reopened"}) {
		vm.Done = done
		if !oneOf(done, []string{"resolve", "skip", "requested", "rejected", "reopened"}) {
			// A replay: the page follows it, and then says how it ended.
			vm.RefreshURL += "?done=" + done
			switch vm.Row.Status {
			case models.DLQPending:
				vm.Done, vm.DoneFailed = "failedagain", true
			case models.DLQResolved:
				vm.Done = "succeeded"
			}
		}
	}
	return h.renderItem(c, http.StatusOK, vm)
}

func (h *DLQActionsHandler) renderItem(c echo.Context, status int, vm *pages.DLQItemVM) error {
	return render(c, status, pages.DLQItem(h.page(c, vm.Title+" · "+localizer(c).T("nav.dlq"), "dlq"), *vm))
}

// itemVM builds the item page; form is what was submitted (errors, preview), if anything.
func (h *DLQActionsHandler) itemVM(c echo.Context, form pages.RecoveryForm) (*pages.DLQItemVM, error) {
	id := c.Param("id")
	if err := checkID(id, "dead letter"); err != nil {
		return nil, err
	}
	ctx, p, l := c.Request().Context(), principal(c), localizer(c)
	r, err := h.dlq.GetDLQ(ctx, p.OrganizationID, id)
	if err != nil {
		return nil, err
	}
	ex, err := h.dlq.Execution(ctx, p.OrganizationID, r.ExecutionID)
	if err != nil {
		return nil, err
	}
	def := h.definition(c, ex.WorkflowID, ex.WorkflowVersion)
	vm := &pages.DLQItemVM{Row: dlqRow(h.links, l, r), Title: shortID(ex.ID), ErrorCode: deref(r.ErrorCode), StackTrace: deref(r.StackTrace),
		OriginalInputJSON: prettyJSON(r.OriginalInput), StepStatesJSON: prettyJSON(r.StepStates), ManualRetries: r.ManualRetryCount,
		ListURL: h.url("dlq"), RefreshURL: h.url("dlq.item", r.ID), ResolutionNotes: deref(r.ResolutionNotes)}
	if r.Subject != nil {
		vm.Title = *r.Subject
	}
	if r.GroupID != nil && h.groupTitle != nil && h.url("dlq.group", *r.GroupID) != "" {
		title, err := h.groupTitle(ctx, p.OrganizationID, *r.GroupID)
		if err != nil {
			return nil, err
		}
		vm.GroupURL, vm.GroupTitle, vm.CSRF = h.url("dlq.group", *r.GroupID), l.Text(title), csrfToken(c)
		if r.Status == models.DLQPending && p.Can(models.RoleAccountant) {
			vm.SplitURL = h.url("dlq.split", r.ID)
		}
	}
	vm.ResolvedAt, vm.ResolvedAtText = displayTimePtr(l, r.ResolvedAt)
	failedName := r.FailedStepID
	if def != nil {
		if i := def.Index(r.FailedStepID); i >= 0 {
			failedName = def.Steps[i].Title()
		}
	}
	vm.Row.FailedStep = failedName
	var states []engine.StepState
	_ = json.Unmarshal(r.StepStates, &states)
	// A rollback since undid some of them: they say so, as on the execution's page.
	var undone map[string]bool
	if ex.RollbackStatus != nil {
		comps, err := h.dlq.Compensations(ctx, p.OrganizationID, ex.ID)
		if err != nil {
			return nil, err
		}
		undone = undoneSteps(comps)
	}
	for i, st := range states {
		sv := pages.DLQStepVM{Index: i + 1, ID: st.StepID, Name: cmp.Or(st.Name, st.StepID), Status: st.Status, Attempts: st.Attempts,
			Failed: st.StepID == r.FailedStepID, InputJSON: prettyJSON(st.Input), OutputJSON: prettyJSON(st.Output)}
		if undone[st.StepID] && st.Status == models.StepSucceeded {
			sv.Status = statusCompensated
		}
		if st.Error != nil {
			sv.Error = l.Text(st.Error.Message)
		}
		if st.Breaker != nil {
			sv.Breaker = l.N("recovery.breaker", st.Breaker.Failures, "State", l.TOr("recovery.breaker.state."+st.Breaker.State, st.Breaker.State))
		}
		vm.Steps = append(vm.Steps, sv)
	}
	if err := h.history(c, vm, r.ID); err != nil {
		return nil, err
	}
	// An item whose replay went through is not flagged: its run proved its values work, and
	// a client's NIP counted over other runs would read as this item's cause.
	if h.flags != nil && h.poison != nil && vm.Closed != "dlq.closed.succeeded" {
		checked, err := h.poison.Item(ctx, p.OrganizationID, r.ID)
		if err != nil {
			return nil, err
		}
		if vm.Poison, err = h.flags.flags(c, checked, h.url("dlq.item", r.ID)); err != nil {
			return nil, err
		}
	}
	if r.Status == models.DLQProcessing {
		vm.Processing = true
		replay := r.ExecutionID
		if r.ReplayExecutionID != nil {
			vm.ReplayURL = h.url("execution", *r.ReplayExecutionID)
			replay = *r.ReplayExecutionID
		}
		if h.running != nil { // the current attempt, as the execution's page shows it
			if vm.Running, err = h.running(c, replay); err != nil {
				return nil, err
			}
		}
	}
	if vm.Closed == "dlq.closed.succeeded" && r.ReplayExecutionID != nil {
		vm.SucceededURL = h.url("execution", *r.ReplayExecutionID)
	}
	if r.Status != models.DLQPending || !p.Can(models.RoleAccountant) {
		return vm, h.fixVM(c, vm, r)
	}
	rec := h.recoveryVM(c, &r.DeadLetter, deref(r.ErrorCode), ex, def, failedName, form)
	vm.Recovery = rec
	if deref(r.ErrorCode) == engine.CodeQuarantined && h.flags != nil && h.poison != nil {
		// Not the service's refusal of the data (it never saw them): the value was held. Its
		// flag above says whether it still is.
		rec.Quarantine = "released"
		for _, f := range vm.Poison {
			if f.Held {
				rec.Quarantine = "held"
			}
		}
		if rec.Quarantine == "released" {
			rec.FixData, rec.DataRefused = false, false
		}
	}
	if err := h.fixVM(c, vm, r); err != nil {
		return nil, err
	}
	return vm, nil
}

// historyLimit bounds an item's history: each retry adds an entry or two, and the retries
// of one item are few; the audit log has the rest.
const historyLimit = 100

// history fills the item's history (its audit entries, oldest first) and says how it was
// closed and by whom: the newest closing entry.
func (h *DLQActionsHandler) history(c echo.Context, vm *pages.DLQItemVM, id string) error {
	p, l := principal(c), localizer(c)
	rows, err := h.historyRows(c, id)
	if err != nil {
		return err
	}
	// Steps by name, as the timeline shows them, not by id.
	names := map[string]string{}
	for _, st := range vm.Steps {
		names[st.ID] = st.Name
	}
	for i := range rows {
		v := auditRow(h.links, l, rows[i])
		if d := detailsOf(rows[i].Details); names[d.str("stepId")] != "" {
			d["stepId"] = names[d.str("stepId")]
			v.Note = auditNote(l, d)
		}
		vm.History = append(vm.History, v)
		switch rows[i].Action {
		case "dlq.resolved", "dlq.skipped", "dlq.expired":
			vm.Closed, vm.ClosedBy = "dlq.closed."+strings.TrimPrefix(rows[i].Action, "dlq."), v.Actor
			if detailString(rows[i].Details, "resolution") == "replay_succeeded" {
				vm.Closed = "dlq.closed.succeeded"
			}
			if rows[i].ActorType == audit.ActorSystem {
				vm.ClosedBy = ""
			}
		case "dlq.retry", "dlq.reopened":
			vm.Closed, vm.ClosedBy = "", ""
		}
	}
	if p.Can(models.RoleAdmin) {
		vm.HistoryURL = h.url("audit") + "?" + url.Values{"entityType": {"dead_letter_queue"}, "entityId": {id}}.Encode()
	}
	return nil
}

// historyRows are a dead letter's audit entries, oldest first (at most historyLimit, the
// newest).
func (h *DLQActionsHandler) historyRows(c echo.Context, id string) ([]models.AuditRow, error) {
	rows, _, err := h.audit.List(c.Request().Context(), principal(c).OrganizationID,
		models.AuditFilter{EntityType: "dead_letter_queue", EntityID: id, Limit: historyLimit})
	if err != nil {
		return nil, err
	}
	slices.Reverse(rows)
	return rows, nil
}

// recoveryVM is the actions panel of a pending dead letter (the item page's and the failed
// execution's).
// code is the failure's error code.
func (h *DLQActionsHandler) recoveryVM(c echo.Context, dl *models.DeadLetter, code string, ex *models.Execution, def *definition.Definition,
	failedName string, form pages.RecoveryForm) *pages.RecoveryVM {
	p := principal(c)
	rec := &pages.RecoveryVM{Action: h.url("dlq.actions", dl.ID), CSRF: csrfToken(c), CanAdmin: p.Can(models.RoleAdmin), NoteRequired: !p.Can(models.RoleAdmin),
		FixData:        dl.ErrorType == "validation" || dl.ErrorType == "permanent",
		DataRefused:    dl.ErrorType == "validation",
		Credentials:    dl.ErrorType == "authorization",
		FailedStepName: failedName, Version: ex.WorkflowVersion, LatestVersion: ex.WorkflowVersion, Form: form,
		JSONForm: jsonFormVM(localizer(c))}
	if rec.Credentials && p.Can(models.RoleAdmin) {
		rec.CredentialsURL = h.url("credentials")
	}
	if wf, err := h.wfs.Get(c.Request().Context(), p.OrganizationID, ex.WorkflowID); err == nil {
		rec.LatestVersion = wf.Version
	}
	if def != nil {
		selected := cmp.Or(form.FromStepID, dl.FailedStepID)
		for i, st := range def.Steps {
			rec.ResumeSteps = append(rec.ResumeSteps, pages.Option{Value: st.ID, Label: fmt.Sprintf("%d. %s", i+1, st.Title()), Selected: st.ID == selected})
			if st.ID == dl.FailedStepID {
				break
			}
		}
	}
	if ex.RollbackStatus != nil {
		rec.RolledBack = *ex.RollbackStatus
	} else if p.Can(models.RoleAdmin) && def != nil && compensable(def, dl.FailedStepID) {
		rec.RollbackURL = h.url("execution.rollback", ex.ID)
	}
	if rec.Form.Input == "" {
		rec.Form.Input = prettyJSON(ex.Input)
	}
	h.fixPanel(c, rec, dl)
	h.periodPanel(c, rec, dl, code)
	h.clientValuesPanel(c, rec, dl, ex)
	return rec
}

// compensable reports whether a step before the failed one declares a compensation: a
// rollback would have something to undo.
func compensable(def *definition.Definition, failedStepID string) bool {
	for _, st := range def.Steps {
		if st.ID == failedStepID {
			return false
		}
		if st.Undoes() {
			return true
		}
	}
	return false
}

// definition returns a workflow version's definition, or nil when it cannot be read.
func (h *DLQActionsHandler) definition(c echo.Context, workflowID string, version int) *definition.Definition {
	raw, err := h.wfs.Version(c.Request().Context(), principal(c).OrganizationID, workflowID, version)
	if err != nil {
		return nil
	}
	var d definition.Definition
	if json.Unmarshal(raw, &d) != nil {
		return nil
	}
	return &d
}

// Submit: POST /dlq/{id}/actions, the forms of the item page. Success goes back to the item
// (a replay then shows live); a refused request shows the page again with the form's
// errors (422) or the conflict (409).
func (h *DLQActionsHandler) Submit(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "dead letter"); err != nil {
		return err
	}
	l := localizer(c)
	form := pages.RecoveryForm{Action: c.FormValue("action"), Input: c.FormValue("input"), Output: c.FormValue("output"),
		Notes: c.FormValue("notes"), RetryPolicy: c.FormValue("retryPolicy"), FromStepID: c.FormValue("fromStepId"), Errors: map[string]string{}}
	a := action{Notes: form.Notes}
	switch form.Action {
	case "retry":
		a.Mode = engine.ReplayFromFailed
		if strings.TrimSpace(form.RetryPolicy) != "" {
			var spec retry.Spec
			dec := json.NewDecoder(strings.NewReader(form.RetryPolicy))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&spec); err != nil {
				form.Errors["retryPolicy"] = l.T("recovery.policy.invalid", "Error", l.Text(strings.TrimPrefix(err.Error(), "json: ")))
				return h.refuse(c, http.StatusUnprocessableEntity, form)
			}
			a.RetryPolicy = &spec
		}
	case "resume":
		a.Mode, a.FromStepID = engine.ReplayFromStep, form.FromStepID
	case "full":
		a.Mode, a.LatestVersion = engine.ReplayFull, c.FormValue("version") == "latest"
	case "edit":
		a.Mode, a.Input = engine.ReplayFromFailed, json.RawMessage(form.Input)
		if c.FormValue("mode") == "full" { // a rolled-back execution: a new run with the edited input
			a.Mode = engine.ReplayFull
		}
		if strings.TrimSpace(form.Input) == "" {
			form.Errors["modifiedInput"] = l.T("replay.input.required")
			return h.refuse(c, http.StatusUnprocessableEntity, form)
		}
		if c.FormValue("preview") != "" {
			return h.preview(c, form)
		}
	case "skip_step":
		a.Mode, a.Output = engine.ReplaySkipFailed, json.RawMessage(form.Output)
		if strings.TrimSpace(form.Output) == "" { // no output given: an empty object
			a.Output = json.RawMessage(`{}`)
		}
	case "resolve":
		a.Settle = models.DLQResolved
	case "skip":
		a.Settle = models.DLQSkipped
	default:
		form.FormError = l.T("recovery.unknownaction")
		return h.refuse(c, http.StatusUnprocessableEntity, form)
	}
	o, err := h.run(c, id, a, "")
	var me *apperr.Error
	if errors.As(err, &me) && (me.Code == apperr.EINVALID || me.Code == apperr.ECONFLICT || me.Code == apperr.EPERIODCLOSED || me == errAdminOnly) {
		msg, fields := translated(l, me.Message, me.Fields)
		for k, v := range fields {
			if strings.HasPrefix(k, "retryPolicy.") { // one message under the policy's field
				form.Errors["retryPolicy"] = strings.TrimSpace(form.Errors["retryPolicy"] + " " + strings.TrimPrefix(k, "retryPolicy.") + ": " + v)
				continue
			}
			form.Errors[k] = v
		}
		form.FormError = msg
		status := http.StatusUnprocessableEntity
		switch me.Code {
		case apperr.ECONFLICT, apperr.EPERIODCLOSED:
			status = http.StatusConflict
		case apperr.EFORBIDDEN:
			status = http.StatusForbidden
		}
		return h.refuse(c, status, form)
	}
	if err != nil {
		return err
	}
	if o.change != nil {
		return redirect(c, h.url("dlq.item", id)+"?done=requested")
	}
	return redirect(c, h.url("dlq.item", id)+"?done="+form.Action)
}

// refuse shows the item page again with the submitted form and its errors.
func (h *DLQActionsHandler) refuse(c echo.Context, status int, form pages.RecoveryForm) error {
	if form.FormError == "" && len(form.Errors) > 0 {
		form.FormError = localizer(c).T("form.check")
	}
	vm, err := h.itemVM(c, form)
	if err != nil {
		return err
	}
	if vm.Recovery == nil { // no longer pending (or not allowed): say why at the top
		vm.Notice = form.FormError
	}
	return h.renderItem(c, status, vm)
}

// preview shows the edited input's differences from the stored one (both masked) before it
// is submitted.
func (h *DLQActionsHandler) preview(c echo.Context, form pages.RecoveryForm) error {
	ctx, p := c.Request().Context(), principal(c)
	r, err := h.dlq.GetDLQ(ctx, p.OrganizationID, c.Param("id"))
	if err != nil {
		return err
	}
	ex, err := h.dlq.Execution(ctx, p.OrganizationID, r.ExecutionID)
	if err != nil {
		return err
	}
	var before, after any
	_ = json.Unmarshal(ex.Input, &before)
	if err := json.Unmarshal([]byte(form.Input), &after); err != nil {
		form.Errors["modifiedInput"] = localizer(c).Text("is not valid JSON: " + strings.TrimPrefix(err.Error(), "json: "))
		return h.refuse(c, http.StatusUnprocessableEntity, form)
	}
	if _, ok := after.(map[string]any); !ok {
		form.Errors["modifiedInput"] = localizer(c).T("input.notobject.field")
		return h.refuse(c, http.StatusUnprocessableEntity, form)
	}
	form.Previewed, form.Diff = true, jsonDiff(before, after, "")
	return h.refuse(c, http.StatusOK, form)
}

// jsonDiff lists the paths where after differs from before: "+" added, "-" removed, "~" changed.
func jsonDiff(before, after any, path string) []pages.DiffLine {
	bm, bok := before.(map[string]any)
	am, aok := after.(map[string]any)
	if bok && aok {
		keys := map[string]bool{}
		for k := range bm {
			keys[k] = true
		}
		for k := range am {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var out []pages.DiffLine
		for _, k := range sorted {
			p := k
			if path != "" {
				p = path + "." + k
			}
			bv, inB := bm[k]
			av, inA := am[k]
			switch {
			case !inB:
				out = append(out, pages.DiffLine{Op: "+", Path: p, After: compact(av)})
			case !inA:
				out = append(out, pages.DiffLine{Op: "-", Path: p, Before: compact(bv)})
			default:
				out = append(out, jsonDiff(bv, av, p)...)
			}
		}
		return out
	}
	if a, b := compact(before), compact(after); a != b {
		if s, ok := after.(string); ok && s == redact.Placeholder {
			return nil // a masked value left as it was keeps its stored value
		}
		return []pages.DiffLine{{Op: "~", Path: cmp.Or(path, "(input)"), Before: a, After: b}}
	}
	return nil
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// APIGet: GET /api/v1/dlq/{id}, the item with its error context and its history.
func (h *DLQActionsHandler) APIGet(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "dead letter"); err != nil {
		return err
	}
	r, err := h.dlq.GetDLQ(c.Request().Context(), principal(c).OrganizationID, id)
	if err != nil {
		return err
	}
	rows, err := h.historyRows(c, id)
	if err != nil {
		return err
	}
	out := apiDLQ(r, true)
	l := localizer(c)
	out.History = make([]apiHistoryEntry, 0, len(rows))
	for _, row := range rows {
		v := auditRow(h.links, l, row)
		out.History = append(out.History, apiHistoryEntry{Event: row.Action, Label: v.Label, ActorType: row.ActorType, Actor: v.Actor,
			At: rfc(row.CreatedAt), Note: v.Note})
	}
	return c.JSON(http.StatusOK, out)
}

// apiHistoryEntry is one event of a dead letter's history in the API: its audit event, with
// the label, who and the note in the request's language.
type apiHistoryEntry struct {
	Event     string `json:"event"`
	Label     string `json:"label"`
	ActorType string `json:"actorType"`
	Actor     string `json:"actor"`
	At        string `json:"at"`
	Note      string `json:"note,omitempty"`
}
