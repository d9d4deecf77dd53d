package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/escalation"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// Escalation of problems left pending (issue 22): the organization's policy, its settings
// page and the API, and what a group's page says of its escalation.

// escalationStore reads and saves the organization's escalation policy (escalation.Service).
type escalationStore interface {
	Policy(ctx context.Context, orgID string) (escalation.Policy, error)
	Members(ctx context.Context, orgID string) ([]models.RoleMember, error)
	Save(ctx context.Context, orgID string, actor audit.Actor, p escalation.Policy) (escalation.Policy, error)
}

var _ escalationStore = (*escalation.Service)(nil)

// EscalationHandler serves the escalation policy: its settings page and the API.
type EscalationHandler struct {
	*chrome
	svc escalationStore
}

func newEscalationHandler(ch *chrome, svc escalationStore) *EscalationHandler {
	return &EscalationHandler{chrome: ch, svc: svc}
}

// escalationUnits are the form's units of a level's wait.
var escalationUnits = []struct {
	id string
	d  time.Duration
}{{"minutes", time.Minute}, {"hours", time.Hour}, {"days", 24 * time.Hour}}

// Show: GET /settings/escalation (admins).
func (h *EscalationHandler) Show(c echo.Context) error {
	ctx, org := c.Request().Context(), principal(c).OrganizationID
	p, err := h.svc.Policy(ctx, org)
	if err != nil {
		return err
	}
	ms, err := h.svc.Members(ctx, org)
	if err != nil {
		return err
	}
	rows := make([]formLevel, 0, len(p.Levels)+1)
	for _, l := range p.Levels {
		after, unit := waitOf(l.AfterMs)
		rows = append(rows, formLevel{after: after, unit: unit, to: l.To})
	}
	rows = append(rows, formLevel{unit: "hours"})
	vm := h.vm(c, rows, ms)
	vm.Saved = c.QueryParam("done") == "saved"
	return h.render(c, http.StatusOK, vm)
}

// formLevel is a row of the form as typed, with its messages.
type formLevel struct {
	index         string
	after, unit   string
	to            []string
	afterE, toErr string
}

// waitOf shows a wait of ms in the largest unit that holds it whole (minutes otherwise, with
// decimals).
func waitOf(ms int64) (string, string) {
	d := time.Duration(ms) * time.Millisecond
	for i := len(escalationUnits) - 1; i >= 0; i-- {
		u := escalationUnits[i]
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10), u.id
		}
	}
	return strconv.FormatFloat(float64(ms)/float64(time.Minute.Milliseconds()), 'f', -1, 64), "minutes"
}

func (h *EscalationHandler) vm(c echo.Context, rows []formLevel, ms []models.RoleMember) pages.EscalationVM {
	l := localizer(c)
	vm := pages.EscalationVM{Action: h.url("organization.escalation.save"), CSRF: csrfToken(c)}
	for _, u := range escalationUnits {
		vm.Units = append(vm.Units, pages.Option{Value: u.id, Label: l.T("escalation.unit." + u.id)})
	}
	row := func(i int, index string, r formLevel) pages.EscalationRow {
		out := pages.EscalationRow{Index: index, Number: l.T("escalation.level", "N", i+1), After: r.after, Unit: r.unit,
			AfterError: l.Text(r.afterE), ToError: l.Text(r.toErr)}
		for _, role := range escalation.Roles {
			v := "role:" + role
			out.To = append(out.To, pages.EscalationChoice{Value: v, Label: l.T("escalation.role." + role), Checked: contains(r.to, v)})
		}
		for _, m := range ms {
			label := m.Email
			if m.Name != "" {
				label = m.Name + " (" + m.Email + ")"
			}
			out.To = append(out.To, pages.EscalationChoice{Value: m.UserID, Label: label,
				Checked: contains(r.to, m.UserID) || containsFold(r.to, m.Email)})
		}
		return out
	}
	for i, r := range rows {
		vm.Rows = append(vm.Rows, row(i, strconv.Itoa(i), r))
	}
	vm.Template = row(len(rows), "__i__", formLevel{unit: "hours"})
	vm.Template.Number = l.T("escalation.level.new")
	return vm
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func containsFold(list []string, v string) bool {
	for _, x := range list {
		if strings.EqualFold(x, v) {
			return true
		}
	}
	return false
}

func (h *EscalationHandler) render(c echo.Context, status int, vm pages.EscalationVM) error {
	return render(c, status, pages.Escalation(h.page(c, localizer(c).T("escalation.title"), "escalation"), vm))
}

// Save: POST /settings/escalation (admins). Each row is a level (after, unit, to); an empty
// row and a row marked remove are left out. A bad level is the form again with its
// messages (422), nothing stored.
func (h *EscalationHandler) Save(c echo.Context) error {
	ctx, p := c.Request().Context(), principal(c)
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	rows := formLevels(form)
	var levels []escalation.Level
	var kept []int // the row of each level
	for i := range rows {
		r := &rows[i]
		if r.remove || (strings.TrimSpace(r.after) == "" && len(r.to) == 0) {
			continue
		}
		ms, ok := r.ms()
		if !ok {
			r.afterE = "must be a whole number of milliseconds above 0"
		}
		levels = append(levels, escalation.Level{AfterMs: ms, To: r.to})
		kept = append(kept, i)
	}
	bad, levelsErr := false, ""
	for _, r := range rows {
		bad = bad || r.afterE != ""
	}
	if !bad {
		_, err = h.svc.Save(ctx, p.OrganizationID, actorOf(p), escalation.Policy{Levels: levels})
		if err == nil {
			return redirect(c, h.url("organization.escalation")+"?done=saved")
		}
		me := invalid(err)
		if me == nil {
			return err
		}
		for k, msg := range me.Fields {
			if k == "levels" {
				levelsErr = msg
				continue
			}
			var i int
			var field string
			if n, _ := fmt.Sscanf(k, "levels[%d].%s", &i, &field); n == 2 && i < len(kept) {
				r := &rows[kept[i]]
				switch {
				case strings.HasPrefix(field, "afterMs"):
					r.afterE = msg
				case r.toErr == "" || field == "to":
					r.toErr = msg
				}
			}
		}
	}
	ms, err := h.svc.Members(ctx, p.OrganizationID)
	if err != nil {
		return err
	}
	shown := make([]formLevel, 0, len(rows))
	for _, r := range rows {
		if !r.remove {
			shown = append(shown, r.formLevel)
		}
	}
	vm := h.vm(c, shown, ms)
	vm.Error = strings.TrimSpace(localizer(c).T("escalation.invalid") + " " + localizer(c).Text(levelsErr))
	return h.render(c, http.StatusUnprocessableEntity, vm)
}

// postedLevel is a row of the posted form.
type postedLevel struct {
	formLevel
	remove bool
}

// ms is the row's wait in milliseconds; false when it is not a positive number.
func (r postedLevel) ms() (int64, bool) {
	v, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(r.after), ",", "."), 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false
	}
	unit := time.Hour
	for _, u := range escalationUnits {
		if u.id == r.unit {
			unit = u.d
		}
	}
	ms := v * float64(unit.Milliseconds())
	if ms > float64(escalation.MaxAfter.Milliseconds())*2 {
		ms = float64(escalation.MaxAfter.Milliseconds()) * 2 // refused by Validate, without overflow
	}
	return int64(math.Round(ms)), ms >= 1
}

// formLevels reads the posted rows (levels[i].after, .unit, .to, .remove), in the order of
// their indexes (a row JavaScript added has an index of its own, larger than the others).
func formLevels(form map[string][]string) []postedLevel {
	byIndex := map[int]*postedLevel{}
	var order []int
	for k, vs := range form {
		var i int
		var field string
		if n, _ := fmt.Sscanf(k, "levels[%d].%s", &i, &field); n != 2 || i < 0 || i > 100000 {
			continue
		}
		r := byIndex[i]
		if r == nil {
			r = &postedLevel{formLevel: formLevel{index: strconv.Itoa(i)}}
			byIndex[i] = r
			order = append(order, i)
		}
		switch field {
		case "after":
			r.after = strings.Join(vs, "")
		case "unit":
			r.unit = strings.Join(vs, "")
		case "to":
			r.to = append(r.to, vs...)
		case "remove":
			r.remove = strings.Join(vs, "") == "true"
		}
	}
	sort.Ints(order)
	out := make([]postedLevel, 0, len(order))
	for _, i := range order {
		out = append(out, *byIndex[i])
	}
	return out
}

// APIGet: GET /api/v1/organization/escalation (admins): {"levels": [{"afterMs", "to"}]}.
func (h *EscalationHandler) APIGet(c echo.Context) error {
	p, err := h.svc.Policy(c.Request().Context(), principal(c).OrganizationID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

// APIPut: PUT /api/v1/organization/escalation {"levels": [...]} (admins) replaces the policy
// ({"levels": []}: no escalation): 200 with it as stored; 422 with a message per field
// (levels[i].afterMs, levels[i].to, levels[i].to[j]) and nothing stored.
func (h *EscalationHandler) APIPut(c echo.Context) error {
	obj, err := readObject(c)
	if err != nil {
		return err
	}
	pol, err := escalation.ParseBody(obj)
	if err != nil {
		return err
	}
	p := principal(c)
	out, err := h.svc.Save(c.Request().Context(), p.OrganizationID, actorOf(p), pol)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// escalationText says who has an escalated group now and since when ("Eskalowane do:
// administratorzy · od 25 lis 2026, 12:14"): its level's roles in words, its people by name
// (ms: the organization's members; one no longer a member by what was stored).
func escalationText(l *i18n.Localizer, g *models.GroupView, ms []models.RoleMember) string {
	if g.EscalationLevel == 0 || g.EscalatedAt == nil {
		return ""
	}
	var to []string
	if g.EscalatedTo != nil {
		_ = json.Unmarshal([]byte(*g.EscalatedTo), &to)
	}
	return l.T("escalation.group.line", "Who", holdersText(l, to, ms), "Since", displayTime(l, *g.EscalatedAt))
}
