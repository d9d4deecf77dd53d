package handlers

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/clients"
	"lifeline/services/deadline"
	"lifeline/services/money"
	"lifeline/views/components"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// clientReader is what the client page needs.
type clientReader interface {
	Overview(ctx context.Context, orgID, key string) (*models.ClientOverview, error)
}

var _ clientReader = (*clients.Service)(nil)

// ClientsHandler serves a client's page (/clients/{key}) and its API: the client's open
// failures, the money they hold up and its deadlines with work not done (issue 23). Every
// member reads it; a key no execution of the organization is about is a 404.
type ClientsHandler struct {
	*chrome
	clients clientReader
	// Now is the clock of "days left" and ages.
	Now func() time.Time
}

func newClientsHandler(ch *chrome, c clientReader) *ClientsHandler {
	return &ClientsHandler{chrome: ch, clients: c, Now: time.Now}
}

// key is the client's key from the path (escaped there).
func clientKey(c echo.Context) string {
	k, err := url.PathUnescape(c.Param("key"))
	if err != nil {
		return ""
	}
	return k
}

// clientURL is the page of the client with key.
func (l links) clientURL(key string) string {
	return l.url("client", url.PathEscape(key))
}

// Page renders the client's page.
func (h *ClientsHandler) Page(c echo.Context) error {
	p, l := principal(c), localizer(c)
	o, err := h.clients.Overview(c.Request().Context(), p.OrganizationID, clientKey(c))
	if err != nil {
		return err
	}
	now := h.Now()
	today := deadline.Day(now)
	vm := pages.ClientVM{Client: o.Client, More: o.More,
		DLQURL:        h.url("dlq") + "?client=" + url.QueryEscape(o.Client),
		ExecutionsURL: h.url("executions") + "?client=" + url.QueryEscape(o.Client)}
	for _, s := range o.Stuck {
		vm.Stuck = append(vm.Stuck, money.Format(s.Minor, s.Currency, l.Lang()))
	}
	for _, d := range o.Deadlines {
		due, _ := time.Parse(time.DateOnly, d.DueOn)
		row := pages.ClientDeadlineRow{Obligation: d.Obligation, Period: d.Period, Due: dayText(l, due), DueISO: d.DueOn,
			Left: daysLeftText(l, today, due), Urgency: deadline.UrgencyOf(today, &due, o.RiskWorkingDays).String(), Open: d.Open, Failed: d.Failed,
			ListURL: h.url("dlq") + "?client=" + url.QueryEscape(o.Client) + "&obligation=" + url.QueryEscape(d.Obligation) + "&period=" + url.QueryEscape(d.Period)}
		vm.Deadlines = append(vm.Deadlines, row)
	}
	for i := range o.Failures {
		f := &o.Failures[i]
		row := pages.ClientFailureRow{URL: h.url("dlq.item", f.ID), Subject: deref(f.Subject), Workflow: f.WorkflowName, Reason: l.Text(f.Reason),
			ErrorType: l.TOr("errortype."+f.ErrorType, f.ErrorType), Period: deref(f.Period), Age: l.Relative(f.CreatedAt, now)}
		if f.DueOn != nil {
			due, _ := time.Parse(time.DateOnly, *f.DueOn)
			row.Due, row.Left = dayText(l, due), daysLeftText(l, today, due)
		}
		if f.AmountMinor != nil && f.Currency != nil {
			row.Amount = money.Format(*f.AmountMinor, *f.Currency, l.Lang())
		}
		vm.Failures = append(vm.Failures, row)
	}
	return render(c, http.StatusOK, pages.Client(h.page(c, o.Client, "dlq"), vm))
}

// API: GET /api/v1/clients/{key}.
func (h *ClientsHandler) API(c echo.Context) error {
	p := principal(c)
	o, err := h.clients.Overview(c.Request().Context(), p.OrganizationID, clientKey(c))
	if err != nil {
		return err
	}
	type deadlineOut struct {
		Obligation string `json:"obligation"`
		Period     string `json:"period"`
		DueAt      string `json:"dueAt"`
		Open       int    `json:"open"`
		Failed     int    `json:"failed"`
		Urgency    string `json:"urgency"`
	}
	out := struct {
		Client    string        `json:"client"`
		Stuck     []apiMoney    `json:"stuck"`
		Deadlines []deadlineOut `json:"deadlines"`
		Failures  []apiDLQItem  `json:"failures"`
		More      bool          `json:"more"`
	}{Client: o.Client, Stuck: apiMoneyOf(o.Stuck), Deadlines: []deadlineOut{}, Failures: []apiDLQItem{}, More: o.More}
	today := deadline.Day(h.Now())
	for _, d := range o.Deadlines {
		due, _ := time.Parse(time.DateOnly, d.DueOn)
		out.Deadlines = append(out.Deadlines, deadlineOut{Obligation: d.Obligation, Period: d.Period, DueAt: d.DueOn, Open: d.Open, Failed: d.Failed,
			Urgency: deadline.UrgencyOf(today, &due, o.RiskWorkingDays).String()})
	}
	for i := range o.Failures {
		out.Failures = append(out.Failures, apiDLQ(&o.Failures[i], false))
	}
	return c.JSON(http.StatusOK, out)
}

// apiMoney is a sum in one currency: an exact decimal string, never a JSON number.
type apiMoney struct {
	Currency string `json:"currency"`
	Amount   string `json:"amount"`
	Count    int    `json:"count"`
}

func apiMoneyOf(sums []models.CurrencySum) []apiMoney {
	out := make([]apiMoney, 0, len(sums))
	for _, s := range sums {
		out = append(out, apiMoney{Currency: s.Currency, Amount: money.Decimal(s.Minor, s.Currency), Count: s.Count})
	}
	return out
}

// aboutLine is what a row's work is about, display-ready; urgency against the default
// at-risk days (the organization's own drive its banner and reminders). The client and
// period its title already says are not said twice: the client's link then reads "client".
func aboutLine(lk links, l *i18n.Localizer, a models.About, title string, now time.Time) components.AboutLine {
	out := components.AboutLine{Client: deref(a.Client), Obligation: deref(a.Obligation), Period: deref(a.Period)}
	if out.Client != "" {
		out.ClientURL = lk.clientURL(out.Client)
		if strings.Contains(title, out.Client) {
			out.ClientLabel = l.T("about.client.link")
		}
	}
	if out.Period != "" && strings.Contains(title, out.Period) {
		out.Period = ""
	}
	if a.DueOn != nil {
		if due, err := time.Parse(time.DateOnly, *a.DueOn); err == nil {
			today := deadline.Day(now)
			out.Due, out.DueISO, out.Left = dayText(l, due), *a.DueOn, daysLeftText(l, today, due)
			out.Urgency = deadline.UrgencyOf(today, &due, models.RiskDaysDefault).String()
		}
	}
	if a.AmountMinor != nil && a.Currency != nil {
		out.Amount = money.Format(*a.AmountMinor, *a.Currency, l.Lang())
	}
	return out
}

// dayText shows a civil date with its weekday and year: the banner's date (dueDate) and the
// year, "śr. 25 lis 2026" / "Wed 25 Nov 2026".
func dayText(l *i18n.Localizer, d time.Time) string {
	return dueDate(l, d) + " " + strconv.Itoa(d.Year())
}

// daysLeftText says how far a due date is in working days: "dziś", "za 3 dni robocze", "2 dni
// robocze po terminie".
func daysLeftText(l *i18n.Localizer, today, due time.Time) string {
	switch n := deadline.WorkingDaysLeft(today, due); {
	case due.Equal(today):
		return l.T("about.left.today")
	case due.Before(today):
		return l.N("about.left.overdue", max(-n, 1))
	default:
		return l.N("deadlines.days", n)
	}
}
