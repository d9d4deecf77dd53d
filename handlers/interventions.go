package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/engine"
	"lifeline/services/executions"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// Requests ask steps make of people (issue 25): "Waiting for you", a request's page with its
// form, the e-mail link, cancelling a waiting execution, and the same in the API.

// asksService is what the pages and the API need of ask requests (engine.Asks).
type asksService interface {
	Answer(ctx context.Context, r engine.AnswerRequest) (*models.Intervention, error)
	Get(ctx context.Context, orgID, id string) (*models.Intervention, error)
	List(ctx context.Context, orgID string, f models.InterventionFilter) ([]models.Intervention, error)
	MayAnswer(ctx context.Context, iv *models.Intervention, userID, role string) (bool, string)
	Cancel(ctx context.Context, r engine.CancelRequest) error
	CheckLink(ctx context.Context, orgID, id, userID, token string) (engine.LinkCheck, error)
}

// waitingCounter counts the open requests a user may answer, for the navigation's badge
// (engine.Asks).
type waitingCounter interface {
	CountOpenFor(ctx context.Context, orgID, userID, role string) (int, error)
}

// askExecutions reads the executions requests belong to (executions.Service).
type askExecutions interface {
	Detail(ctx context.Context, orgID, id string) (*executions.Detail, error)
	Executions(ctx context.Context, orgID string, ids []string) (map[string]*models.Execution, error)
	SucceededAttempts(ctx context.Context, orgID string, ids []string) (map[string][]models.StepAttempt, error)
}

var (
	_ asksService    = engine.Asks{}
	_ waitingCounter = engine.Asks{}
	_ askExecutions  = (*executions.Service)(nil)
)

// waitingLimit bounds the "Waiting for you" list and the API's.
const waitingLimit = 200

// InterventionsHandler serves the requests of ask steps.
type InterventionsHandler struct {
	*chrome
	asks  asksService
	execs askExecutions
	wfs   workflowLister
	// members are the organization's people, to name holders given by id.
	members func(ctx context.Context, orgID string) ([]models.RoleMember, error)
	now     func() time.Time
}

func newInterventionsHandler(ch *chrome, asks asksService, execs askExecutions, wfs workflowLister,
	members func(ctx context.Context, orgID string) ([]models.RoleMember, error)) *InterventionsHandler {
	return &InterventionsHandler{chrome: ch, asks: asks, execs: execs, wfs: wfs, members: members, now: time.Now}
}

// Waiting: GET /waiting, "Czeka na Ciebie": the open requests the user may answer (for a
// viewer, every open request, to read), the soonest to expire first, each with its context
// and a link to its form.
func (h *InterventionsHandler) Waiting(c echo.Context) error {
	p, l := principal(c), localizer(c)
	ctx := c.Request().Context()
	// An admin (or owner), who may answer any request, gets those assigned to them first and
	// the others after, apart.
	admin := p.Can(models.RoleAdmin)
	f := models.InterventionFilter{Status: models.InterventionOpen, Mine: p.Can(models.RoleAccountant), Assigned: admin, UserID: p.UserID,
		Role: p.Role, Limit: waitingLimit}
	rows, err := h.asks.List(ctx, p.OrganizationID, f)
	if err != nil {
		return err
	}
	var others []models.Intervention
	if admin {
		f.Assigned = false
		all, err := h.asks.List(ctx, p.OrganizationID, f)
		if err != nil {
			return err
		}
		assigned := map[string]bool{}
		for _, r := range rows {
			assigned[r.ID] = true
		}
		for _, r := range all {
			if !assigned[r.ID] {
				others = append(others, r)
			}
		}
	}
	vm := pages.WaitingVM{ReadOnly: !p.Can(models.RoleAccountant), RefreshURL: h.url("waiting")}
	cards, err := h.cards(c, l, append(rows, others...)) // one read of their context for both parts
	if err != nil {
		return err
	}
	vm.Items, vm.Others = cards[:len(rows)], cards[len(rows):]
	if d := c.QueryParam("done"); d == "answered" {
		vm.Done = l.T("asks.done.answered")
	}
	return render(c, http.StatusOK, pages.Waiting(h.page(c, "asks.title", "waiting"), vm))
}

// cards are the list's cards of rows, each with its execution's context and the outputs of
// the steps before it.
func (h *InterventionsHandler) cards(c echo.Context, l *i18n.Localizer, rows []models.Intervention) ([]pages.InterventionCard, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	ctx, p := c.Request().Context(), principal(c)
	ids := make([]string, 0, len(rows))
	for _, r := range rows {
		ids = append(ids, r.ExecutionID)
	}
	exs, err := h.execs.Executions(ctx, p.OrganizationID, ids)
	if err != nil {
		return nil, err
	}
	done, err := h.execs.SucceededAttempts(ctx, p.OrganizationID, ids)
	if err != nil {
		return nil, err
	}
	wfs, err := h.wfs.All(ctx, p.OrganizationID)
	if err != nil {
		return nil, err
	}
	names, steps := map[string]string{}, stepsOf(wfs)
	for _, w := range wfs {
		names[w.ID] = w.Name
	}
	ms, err := h.members(ctx, p.OrganizationID)
	if err != nil {
		return nil, err
	}
	now := h.now()
	var out []pages.InterventionCard
	for i := range rows {
		card := h.card(l, &rows[i], exs[rows[i].ExecutionID], names, ms, now)
		if ex := exs[rows[i].ExecutionID]; ex != nil {
			for _, a := range done[ex.ID] {
				if a.StepID == rows[i].StepID {
					continue
				}
				if so, ok := stepOutput(steps.name(ex.WorkflowID, a.StepID), a.Output); ok {
					card.Outputs = append(card.Outputs, so)
				}
			}
		}
		out = append(out, card)
	}
	return out, nil
}

func (h *InterventionsHandler) workflowNames(ctx context.Context, orgID string) (map[string]string, error) {
	wfs, err := h.wfs.All(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(wfs))
	for _, w := range wfs {
		out[w.ID] = w.Name
	}
	return out, nil
}

// card is a request as the list and its page show it.
func (h *InterventionsHandler) card(l *i18n.Localizer, iv *models.Intervention, ex *models.Execution, wfNames map[string]string,
	ms []models.RoleMember, now time.Time) pages.InterventionCard {
	card := pages.InterventionCard{ID: iv.ID, URL: h.url("intervention", iv.ID), Title: iv.Title, Message: iv.Message, Kind: iv.Kind,
		KindText: l.TOr("asks.kind."+iv.Kind, iv.Kind), StepName: iv.StepName, Status: iv.Status,
		StatusText: l.TOr("asks.status."+iv.Status, iv.Status), Holders: holdersText(l, iv.Holders, ms),
		ExpiresAt: rfc(iv.ExpiresAt), ExpiresText: displayTime(l, iv.ExpiresAt), ExecutionURL: h.url("execution", iv.ExecutionID)}
	if iv.Status == models.InterventionOpen {
		card.Left = until(l, iv.ExpiresAt, now)
		card.Urgent = iv.ExpiresAt.Sub(now) < 24*time.Hour
	}
	if iv.EscalationLevel > 0 {
		card.Escalated = l.T("asks.escalated", "N", iv.EscalationLevel)
	}
	card.Outcome = outcomeText(l, iv)
	if ex != nil {
		card.Subject = deref(ex.Subject)
		card.WorkflowName = wfNames[ex.WorkflowID]
		card.About = aboutLine(h.links, l, ex.About, card.Subject, now)
	}
	return card
}

// outcomeText says how a request ended: who answered what and when, that it timed out or
// was cancelled; "" while it is open.
func outcomeText(l *i18n.Localizer, iv *models.Intervention) string {
	at := ""
	if iv.AnsweredAt != nil {
		at = displayTime(l, *iv.AnsweredAt)
	}
	switch iv.Status {
	case models.InterventionAnswered:
		return l.T("asks.outcome.answered", "By", deref(iv.AnsweredByName), "At", at, "Answer", answerText(l, iv))
	case models.InterventionTimedOut:
		return l.T("asks.outcome.timedout", "At", displayTime(l, iv.ExpiresAt), "Answer", answerText(l, iv))
	case models.InterventionCancelled:
		return l.T("asks.outcome.cancelled", "At", displayTime(l, iv.UpdatedAt))
	}
	return ""
}

// answerText says a recorded answer in words: "zatwierdzone", the option's label, or the
// values given.
func answerText(l *i18n.Localizer, iv *models.Intervention) string {
	var a map[string]any
	if len(iv.Answer) == 0 || json.Unmarshal(iv.Answer, &a) != nil {
		return ""
	}
	if s, ok := a["answer"].(string); ok {
		out := l.TOr("asks.answer."+s, s)
		if n, _ := a["note"].(string); n != "" {
			out += " — „" + n + "”"
		}
		return out
	}
	if o, ok := a["option"].(string); ok {
		for _, opt := range askOptions(iv) {
			if opt.ID == o {
				return opt.Label
			}
		}
		return l.TOr("asks.option."+o, o)
	}
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+": "+askValueText(a[k]))
	}
	return strings.Join(parts, ", ")
}

func askValueText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return "—"
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// holdersText names who has a request, or an escalated problem, now: roles in words, people
// by name or e-mail (ms: the organization's members; one no longer a member by what was stored).
func holdersText(l *i18n.Localizer, holders []string, ms []models.RoleMember) string {
	names := make([]string, 0, len(holders))
	for _, t := range holders {
		if role, ok := strings.CutPrefix(t, "role:"); ok {
			names = append(names, l.TOr("escalation.role."+role, role))
			continue
		}
		name := t
		for _, m := range ms {
			if m.UserID == t || strings.EqualFold(m.Email, t) {
				name = m.Email
				if m.Name != "" {
					name = m.Name
				}
			}
		}
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

// read reads the request the URL names (404 for another organization's or an unknown id).
func (h *InterventionsHandler) read(c echo.Context) (*models.Intervention, error) {
	id := c.Param("id")
	if err := checkID(id, "request"); err != nil {
		return nil, err
	}
	return h.asks.Get(c.Request().Context(), principal(c).OrganizationID, id)
}

// Show: GET /interventions/{id}[?link=<token>], a request with its context and its form. A
// link's token is checked, never used: the form carries it and only the answer consumes it;
// a link used already, expired or sent to someone else says so.
func (h *InterventionsHandler) Show(c echo.Context) error {
	iv, err := h.read(c)
	if err != nil {
		return err
	}
	form := answerForm{}
	if tok := c.QueryParam("link"); tok != "" {
		form.link = tok
	}
	return h.show(c, http.StatusOK, iv, form)
}

// answerForm is an answer as posted, with its messages.
type answerForm struct {
	link      string
	note      string
	values    url.Values // values.<field> as typed
	errors    map[string]string
	formError string
	conflict  string
}

// show renders the request's page: its context, its form (when this user may answer it
// now) and the posted form's values and messages.
func (h *InterventionsHandler) show(c echo.Context, status int, iv *models.Intervention, f answerForm) error {
	p, l := principal(c), localizer(c)
	ctx := c.Request().Context()
	ms, err := h.members(ctx, p.OrganizationID)
	if err != nil {
		return err
	}
	names, err := h.workflowNames(ctx, p.OrganizationID)
	if err != nil {
		return err
	}
	d, err := h.execs.Detail(ctx, p.OrganizationID, iv.ExecutionID)
	if err != nil {
		return err
	}
	now := h.now()
	vm := pages.InterventionVM{Card: h.card(l, iv, d.Ex, names, ms, now), BackURL: h.url("waiting"), Conflict: f.conflict}
	vm.Card.WorkflowURL = h.url("workflow", d.Ex.WorkflowID)
	vm.Outputs, vm.FailedError = earlierOutputs(l, d, iv)
	if vm.FailedError != "" && vm.Card.Message != "" && strings.Contains(vm.FailedError, l.Text(vm.Card.Message)) {
		vm.Card.Message = "" // an error resolution's message is the error, which the failure box says
	}
	if f.link != "" {
		check, err := h.asks.CheckLink(ctx, p.OrganizationID, iv.ID, p.UserID, f.link)
		if err != nil {
			return err
		}
		if check != engine.LinkValid {
			vm.LinkNote = l.TOr("asks.link."+string(check), l.T("asks.link.unknown"))
			f.link = ""
		}
	}
	switch {
	case iv.Status != models.InterventionOpen:
		// Its outcome says it (Card.Outcome).
	case !p.Can(models.RoleAccountant):
		vm.CannotAnswer = l.T("asks.viewer")
	default:
		if ok, why := h.asks.MayAnswer(ctx, iv, p.UserID, p.Role); !ok {
			vm.CannotAnswer = l.Text(why)
		} else {
			vm.Form = h.form(c, iv, f)
		}
	}
	return render(c, status, pages.Intervention(h.page(c, iv.Title, "waiting"), vm))
}

// earlierOutputs are the outputs of the steps that succeeded before the request's step
// (their top-level values, masked as the execution's page masks them), and for an error
// resolution the failed step's error.
func earlierOutputs(l *i18n.Localizer, d *executions.Detail, iv *models.Intervention) ([]pages.StepOutput, string) {
	var out []pages.StepOutput
	failed := ""
	for _, sd := range d.Steps {
		if sd.Step.ID == iv.StepID {
			break
		}
		n := len(sd.Attempts)
		if n == 0 {
			continue
		}
		last := sd.Attempts[n-1]
		if last.Status == models.StepFailed || last.Status == models.StepDLQ {
			failed = l.T("asks.failed", "Step", sd.Step.Title(), "Error", l.Text(deref(last.ErrorMessage)))
		}
		if last.Status != models.StepSucceeded || len(last.Output) == 0 {
			continue
		}
		if so, ok := stepOutput(sd.Step.Title(), last.Output); ok {
			out = append(out, so)
		}
	}
	if iv.Kind != models.AskErrorResolution {
		failed = ""
	}
	return out, failed
}

// stepOutput is a step's output as a request shows it: its top-level values that are not
// objects or lists (they say what matters; the execution's page has the rest), by key;
// false when it has none.
func stepOutput(step string, output []byte) (pages.StepOutput, bool) {
	var obj map[string]any
	if json.Unmarshal(output, &obj) != nil || len(obj) == 0 {
		return pages.StepOutput{}, false
	}
	keys := make([]string, 0, len(obj))
	for k, v := range obj {
		switch v.(type) {
		case map[string]any, []any:
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	so := pages.StepOutput{Step: step}
	for _, k := range keys {
		so.Fields = append(so.Fields, pages.KeyValue{Key: k, Value: askValueText(obj[k])})
	}
	return so, len(so.Fields) > 0
}

// askField is a field of an input request's schema.
type askField struct {
	Name     string          `json:"name"`
	Label    string          `json:"label"`
	Type     string          `json:"type"`
	Required bool            `json:"required"`
	Min      json.RawMessage `json:"min"`
	Max      json.RawMessage `json:"max"`
	Pattern  string          `json:"pattern"`
	Options  []string        `json:"options"`
}

// askOption is an option of a decision or an error resolution.
type askOption struct {
	ID          string `json:"id"`
	Label       string `json:"label"`
	Destructive bool   `json:"destructive"`
}

func askFields(iv *models.Intervention) []askField {
	var s struct {
		Fields []askField `json:"fields"`
	}
	_ = json.Unmarshal(iv.Schema, &s)
	return s.Fields
}

func askOptions(iv *models.Intervention) []askOption {
	var opts []askOption
	_ = json.Unmarshal(iv.Options, &opts)
	return opts
}

// rawText is a schema bound as the form's attribute: 10 or "0.01" → "10", "0.01".
func rawText(r json.RawMessage) string {
	r = bytes.TrimSpace(r)
	if len(r) == 0 || string(r) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(r, &s) == nil {
		return s
	}
	return string(r)
}

// form builds the request's form for its kind, with what was typed and its messages.
func (h *InterventionsHandler) form(c echo.Context, iv *models.Intervention, f answerForm) *pages.AnswerForm {
	l := localizer(c)
	af := &pages.AnswerForm{Action: h.url("intervention.answer", iv.ID), CSRF: csrfToken(c), Kind: iv.Kind, LinkToken: f.link,
		Note: f.note, NoteError: f.errors["note"], FormError: f.formError}
	for _, k := range []string{"answer", "option", "values"} {
		if m := f.errors[k]; m != "" {
			af.FormError = strings.TrimSpace(af.FormError + " " + m)
		}
	}
	if iv.Kind == models.AskInput || iv.Kind == models.AskErrorResolution {
		for _, fd := range askFields(iv) {
			key := "values." + fd.Name
			pf := pages.AskField{Name: key, ID: "ask-" + fd.Name, Label: fd.Label, Required: fd.Required, Error: f.errors[key],
				Min: rawText(fd.Min), Max: rawText(fd.Max), Pattern: fd.Pattern}
			if pf.Label == "" {
				pf.Label = fd.Name
			}
			typed, was := f.values[key]
			if was && len(typed) > 0 {
				pf.Value = typed[0]
			}
			switch fd.Type {
			case "number":
				pf.Type = "number"
				pf.Step = "any"
			case "amount":
				pf.Type, pf.InputMode, pf.Hint = "text", "decimal", l.T("asks.field.amount")
				if pf.Pattern == "" {
					pf.Pattern = `-?[0-9 ]+([.,][0-9]{1,2})?`
				}
			case "date":
				pf.Type = "date"
			case "boolean":
				pf.Type = "checkbox"
				pf.Checked = was && len(typed) > 0 && typed[0] != "" && typed[0] != "false"
			case "enum":
				pf.Type = "select"
				for _, o := range fd.Options {
					pf.Options = append(pf.Options, pages.Option{Value: o, Label: o, Selected: o == pf.Value})
				}
			default:
				pf.Type = "text"
			}
			af.Fields = append(af.Fields, pf)
		}
	}
	switch iv.Kind {
	case models.AskDecision:
		for _, o := range askOptions(iv) {
			ao := pages.AskOption{ID: o.ID, Label: o.Label, Destructive: o.Destructive, Default: iv.DefaultOption != nil && *iv.DefaultOption == o.ID}
			if ao.Label == "" {
				ao.Label = o.ID
			}
			if o.Destructive {
				ao.Confirm = l.T("asks.decision.confirm", "Option", ao.Label)
			}
			af.Options = append(af.Options, ao)
		}
	case models.AskErrorResolution:
		af.Options = []pages.AskOption{{ID: "continue", Label: l.T("asks.resolution.continue")},
			{ID: "abort", Label: l.T("asks.resolution.abort"), Destructive: true, Confirm: l.T("asks.resolution.abort.confirm")}}
	case models.AskApproval:
		af.RejectConfirm = l.T("asks.approval.reject.confirm")
	}
	return af
}

// typedValues turns the form's values.<field> into the answer's values, typed as the
// schema says (numbers as numbers, booleans as booleans, amounts as decimal strings "1234.50",
// the rest as text); an empty field is left out. A value that is not its type stays the text
// typed, for the answer's check to name it.
func typedValues(iv *models.Intervention, form url.Values) map[string]any {
	out := map[string]any{}
	for _, fd := range askFields(iv) {
		raw := strings.TrimSpace(form.Get("values." + fd.Name))
		switch fd.Type {
		case "boolean":
			out[fd.Name] = raw != "" && raw != "false"
			continue
		case "number":
			if raw == "" {
				continue
			}
			if n, err := strconv.ParseFloat(strings.ReplaceAll(raw, ",", "."), 64); err == nil {
				out[fd.Name] = n
				continue
			}
		case "amount":
			if raw == "" {
				continue
			}
			out[fd.Name] = amountText(raw)
			continue
		}
		if raw != "" {
			out[fd.Name] = raw
		}
	}
	return out
}

// amountText writes an amount as typed in Polish ("1 234,5") the way the answer stores it
// ("1234.50"); what is not an amount stays as typed.
func amountText(raw string) string {
	s := strings.NewReplacer(" ", "", "\u00a0", "", ",", ".").Replace(raw)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || strings.ContainsAny(s, "eEnN+") {
		return raw
	}
	if i := strings.IndexByte(s, '.'); i >= 0 && len(s)-i-1 > 2 {
		return raw // more than grosze: the check says so
	}
	return strconv.FormatFloat(f, 'f', 2, 64)
}

// AnswerForm: POST /interventions/{id}/answer (accountants and above): the answer of the
// request's form (answer approved|rejected, option, values.<field>, note, link). Recorded:
// back to "Waiting for you" with a flash. Invalid: the page again, 422, with the messages
// and what was typed. Answered already, timed out or cancelled: the page again, 409, saying
// who answered and when. A user four-eyes bars or who does not hold it: 403.
func (h *InterventionsHandler) AnswerForm(c echo.Context) error {
	iv, err := h.read(c)
	if err != nil {
		return err
	}
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	p := principal(c)
	req := engine.AnswerRequest{OrganizationID: p.OrganizationID, ID: iv.ID, Actor: actorOf(p), ActorName: byOf(p), Role: p.Role,
		Answer: form.Get("answer"), Note: form.Get("note"), Option: form.Get("option"), LinkToken: form.Get("link")}
	if iv.Kind == models.AskInput || (iv.Kind == models.AskErrorResolution && req.Option == "continue") {
		req.Values = typedValues(iv, form)
	}
	_, err = h.asks.Answer(c.Request().Context(), req)
	if err == nil {
		return redirect(c, h.url("waiting")+"?done=answered")
	}
	f := answerForm{link: req.LinkToken, note: req.Note, values: form}
	switch apperr.ErrorCode(err) {
	case apperr.EINVALID:
		me := appErr(err)
		l := localizer(c)
		f.formError, f.errors = translated(l, me.Message, me.Fields)
		if len(me.Fields) > 0 {
			// The fields say what to fix; the form's line says so in the reader's language.
			f.formError = l.T("asks.invalid")
		}
		return h.show(c, http.StatusUnprocessableEntity, iv, f)
	case apperr.ECONFLICT:
		now, rerr := h.asks.Get(c.Request().Context(), p.OrganizationID, iv.ID)
		if rerr != nil {
			return rerr
		}
		f.conflict = conflictText(localizer(c), now, err)
		return h.show(c, http.StatusConflict, now, f)
	}
	return err
}

// conflictText says why an answer came too late, in the reader's language: who answered
// and when, when it timed out, or that it was cancelled (else the service's message).
func conflictText(l *i18n.Localizer, iv *models.Intervention, err error) string {
	switch iv.Status {
	case models.InterventionAnswered:
		at := ""
		if iv.AnsweredAt != nil {
			at = displayTime(l, *iv.AnsweredAt)
		}
		return l.T("asks.conflict.answered", "By", deref(iv.AnsweredByName), "At", at)
	case models.InterventionTimedOut:
		return l.T("asks.conflict.timedout", "At", displayTime(l, iv.ExpiresAt))
	case models.InterventionCancelled:
		return l.T("asks.conflict.cancelled")
	}
	if me := appErr(err); me != nil {
		return l.Text(me.Message)
	}
	return l.T("http.internal")
}

// appErr is the *apperr.Error in err's chain, or nil.
func appErr(err error) *apperr.Error {
	var me *apperr.Error
	if errors.As(err, &me) {
		return me
	}
	return nil
}

// Cancel: POST /executions/{id}/cancel (admins) with a note: a waiting execution is
// cancelled (its request too) and ends FAILED; back on its page. Without a note: 422.
func (h *InterventionsHandler) Cancel(c echo.Context) error {
	id := c.Param("id")
	if err := checkID(id, "execution"); err != nil {
		return err
	}
	if err := h.cancel(c, id, c.FormValue("note")); err != nil {
		return err
	}
	return redirect(c, h.url("execution", id))
}

func (h *InterventionsHandler) cancel(c echo.Context, id, note string) error {
	if strings.TrimSpace(note) == "" {
		return apperr.Invalid("asks.cancel.invalid", map[string]string{"note": "asks.cancel.note.required"})
	}
	p := principal(c)
	return h.asks.Cancel(c.Request().Context(), engine.CancelRequest{OrganizationID: p.OrganizationID, ExecutionID: id, Note: note,
		Actor: actorOf(p), ActorName: byOf(p)})
}

// waitingPanel is what a waiting execution's page says of its open request (nil: none).
func (h *InterventionsHandler) waitingPanel(c echo.Context, d *executions.Detail) (*pages.WaitingPanel, error) {
	if d.Ex.Status != models.ExecWaiting {
		return nil, nil
	}
	p, l := principal(c), localizer(c)
	ctx := c.Request().Context()
	rows, err := h.asks.List(ctx, p.OrganizationID, models.InterventionFilter{ExecutionID: d.Ex.ID, Status: models.InterventionOpen, Limit: 1})
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	ms, err := h.members(ctx, p.OrganizationID)
	if err != nil {
		return nil, err
	}
	iv := &rows[0]
	now := h.now()
	wp := &pages.WaitingPanel{Title: iv.Title, Message: iv.Message, KindText: l.TOr("asks.kind."+iv.Kind, iv.Kind),
		Holders: holdersText(l, iv.Holders, ms), ExpiresAt: rfc(iv.ExpiresAt), ExpiresText: displayTime(l, iv.ExpiresAt),
		Left: until(l, iv.ExpiresAt, now), URL: h.url("intervention", iv.ID)}
	if p.Can(models.RoleAdmin) {
		wp.CancelURL, wp.CSRF = h.url("execution.cancel", d.Ex.ID), csrfToken(c)
	}
	return wp, nil
}

// openInterventionID is the id of a waiting execution's open request ("" for any other).
func (h *InterventionsHandler) openInterventionID(ctx context.Context, ex *models.Execution) (string, error) {
	if ex.Status != models.ExecWaiting {
		return "", nil
	}
	rows, err := h.asks.List(ctx, ex.OrganizationID, models.InterventionFilter{ExecutionID: ex.ID, Status: models.InterventionOpen, Limit: 1})
	if err != nil || len(rows) == 0 {
		return "", err
	}
	return rows[0].ID, nil
}

// apiIntervention is a request in the API.
type apiIntervention struct {
	ID             string          `json:"id"`
	ExecutionID    string          `json:"executionId"`
	StepID         string          `json:"stepId"`
	Kind           string          `json:"kind"`
	Title          string          `json:"title"`
	Message        string          `json:"message"`
	Assignees      []string        `json:"assignees"`
	Holders        []string        `json:"holders"`
	Status         string          `json:"status"`
	ExpiresAt      string          `json:"expiresAt"`
	CreatedAt      string          `json:"createdAt"`
	FourEyes       bool            `json:"fourEyes"`
	Schema         json.RawMessage `json:"schema,omitempty"`
	Options        json.RawMessage `json:"options,omitempty"`
	DefaultOption  *string         `json:"defaultOption,omitempty"`
	Answer         json.RawMessage `json:"answer"`
	AnsweredBy     *string         `json:"answeredBy"`
	AnsweredAt     *string         `json:"answeredAt"`
	EscalationLvl  int             `json:"escalationLevel"`
	IdempotencyKey *string         `json:"-"`
}

func apiInterventionOf(iv *models.Intervention) apiIntervention {
	out := apiIntervention{ID: iv.ID, ExecutionID: iv.ExecutionID, StepID: iv.StepID, Kind: iv.Kind, Title: iv.Title, Message: iv.Message,
		Assignees: nonNil(iv.Assignees), Holders: nonNil(iv.Holders), Status: iv.Status, ExpiresAt: rfc(iv.ExpiresAt), CreatedAt: rfc(iv.CreatedAt),
		FourEyes: iv.FourEyes, DefaultOption: iv.DefaultOption, AnsweredBy: iv.AnsweredByName, AnsweredAt: rfcPtr(iv.AnsweredAt),
		EscalationLvl: iv.EscalationLevel, Answer: json.RawMessage("null")}
	if len(bytes.TrimSpace(iv.Schema)) > 0 && string(iv.Schema) != "null" {
		out.Schema = json.RawMessage(iv.Schema)
	}
	if len(bytes.TrimSpace(iv.Options)) > 0 && string(iv.Options) != "null" {
		out.Options = json.RawMessage(iv.Options)
	}
	if len(bytes.TrimSpace(iv.Answer)) > 0 {
		out.Answer = json.RawMessage(iv.Answer)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// APIList: GET /api/v1/interventions?status=open|answered|timed_out|cancelled&mine=true →
// {"items": [...]}, the soonest to expire first; 422 naming a bad status or mine.
func (h *InterventionsHandler) APIList(c echo.Context) error {
	q := newListQuery(c)
	f := models.InterventionFilter{Status: q.oneOf("status", models.InterventionStatuses), Limit: waitingLimit}
	mine := q.oneOf("mine", []string{"true", "false"})
	if err := q.err(); err != nil {
		return err
	}
	p := principal(c)
	if mine == "true" {
		f.Mine, f.UserID, f.Role = true, p.UserID, p.Role
	}
	rows, err := h.asks.List(c.Request().Context(), p.OrganizationID, f)
	if err != nil {
		return err
	}
	items := make([]apiIntervention, 0, len(rows))
	for i := range rows {
		items = append(items, apiInterventionOf(&rows[i]))
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items})
}

// APIGet: GET /api/v1/interventions/{id} (404 for another organization's).
func (h *InterventionsHandler) APIGet(c echo.Context) error {
	iv, err := h.read(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiInterventionOf(iv))
}

// APIAnswer: POST /api/v1/interventions/{id}/answer with {"answer": "approved"|"rejected",
// "note"}, {"values": {...}} or {"option", "note"} and an optional Idempotency-Key → 200 with
// the request as answered; 409 when it was answered (naming who and when), timed out or
// cancelled; 422 with field messages; 403 when the caller may not answer it (four-eyes, not
// a holder; viewers by role). The same Idempotency-Key from the same caller again → 200
// with the answer it recorded.
func (h *InterventionsHandler) APIAnswer(c echo.Context) error {
	var body struct {
		Answer string         `json:"answer"`
		Note   string         `json:"note"`
		Option string         `json:"option"`
		Values map[string]any `json:"values"`
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	id := c.Param("id")
	if err := checkID(id, "request"); err != nil {
		return err
	}
	p := principal(c)
	iv, err := h.asks.Answer(c.Request().Context(), engine.AnswerRequest{OrganizationID: p.OrganizationID, ID: id, Actor: actorOf(p),
		ActorName: byOf(p), Role: p.Role, Answer: body.Answer, Note: body.Note, Option: body.Option, Values: body.Values, IdempotencyKey: key})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiInterventionOf(iv))
}

// APICancel: POST /api/v1/executions/{id}/cancel {"note"} (admins): a waiting execution is
// cancelled and ends FAILED → 200 {"id", "status"}; 409 when it is not waiting; 422 without
// a note.
func (h *InterventionsHandler) APICancel(c echo.Context) error {
	var body struct {
		Note string `json:"note"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	id := c.Param("id")
	if err := checkID(id, "execution"); err != nil {
		return err
	}
	if err := h.cancel(c, id, body.Note); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"id": id, "status": models.ExecFailed})
}
