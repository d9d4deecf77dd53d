package handlers

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/clients"
	"lifeline/services/deadline"
	"lifeline/services/money"
	"lifeline/views/pages"
)

// todayReader is what the Today page needs.
type todayReader interface {
	Today(ctx context.Context, orgID, userID string, now time.Time) (*clients.Today, error)
}

var _ todayReader = (*clients.Service)(nil)

// TodayHandler serves /today, the accountant's landing page: the obligations at risk with
// the working days left, the money failures hold up by client, the top problems and what she
// asked admins for; one screen (issue 23). Every member reads it.
type TodayHandler struct {
	*chrome
	today todayReader
	Now   func() time.Time
}

func newTodayHandler(ch *chrome, t todayReader) *TodayHandler {
	return &TodayHandler{chrome: ch, today: t, Now: time.Now}
}

// Page renders the Today page.
func (h *TodayHandler) Page(c echo.Context) error {
	p, l := principal(c), localizer(c)
	now := h.Now()
	t, err := h.today.Today(c.Request().Context(), p.OrganizationID, p.UserID, now)
	if err != nil {
		return err
	}
	vm := pages.TodayVM{Date: l.T("today.date", "Weekday", l.T("weekday.long."+t.Day.Weekday().String()), "Day", t.Day.Day(),
		"Month", l.T(fmt.Sprintf("month.genitive.%d", int(t.Day.Month()))), "Year", t.Day.Year()),
		RiskDays: l.N("deadlines.days.within", t.RiskWorkingDays), DLQURL: h.url("dlq"), ProblemsURL: h.url("dlq.problems")}
	for _, g := range t.Due {
		due, _ := time.Parse(time.DateOnly, g.DueOn)
		row := pages.TodayDue{Obligation: g.Obligation, Period: g.Period, Due: dayText(l, due), DueISO: g.DueOn,
			Left: daysLeftText(l, t.Day, due), Urgency: deadline.UrgencyOf(t.Day, &due, t.RiskWorkingDays).String(),
			Clients: l.N("today.clients", g.Clients), Open: g.Open, Failed: g.Failed,
			URL: h.url("dlq") + "?obligation=" + url.QueryEscape(g.Obligation) + "&period=" + url.QueryEscape(g.Period)}
		for _, s := range g.Stuck {
			row.Stuck = append(row.Stuck, money.Format(s.Minor, s.Currency, l.Lang()))
		}
		vm.Due = append(vm.Due, row)
	}
	for _, m := range t.Money {
		vm.Money = append(vm.Money, pages.TodayMoney{Client: m.Client, URL: h.clientURL(m.Client),
			Amount: money.Format(m.Minor, m.Currency, l.Lang()), Failures: l.N("today.failures", m.Count)})
	}
	for _, g := range t.Problems {
		vm.Problems = append(vm.Problems, pages.TodayProblem{Title: l.Text(g.Title), URL: h.url("dlq.group", g.ID), Workflow: g.WorkflowName,
			Pending: l.N("today.pending", g.Counts.Pending+g.Counts.Processing)})
	}
	for _, r := range t.Requests {
		vm.Requests = append(vm.Requests, pages.TodayRequest{Title: cmp.Or(deref(r.Subject), shortID(r.DeadLetterID)), URL: h.url("dlq.item", r.DeadLetterID),
			What: l.T("today.request." + r.Kind), Status: l.TOr("today.request.status."+r.Kind+"."+r.Status, r.Status), Done: requestDone(r), At: l.Relative(r.At, now)})
	}
	return render(c, http.StatusOK, pages.Today(h.page(c, "today.title", "today"), vm))
}

// requestDone reports whether an admin has acted on a request (the item is no longer
// pending, or the change was decided).
func requestDone(r models.MyRequest) bool {
	if r.Kind == "change" {
		return r.Status != models.ChangePending
	}
	return r.Status != models.DLQPending
}
