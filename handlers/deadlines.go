package handlers

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/deadline"
	"lifeline/services/deadlines"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// Deadlines (issue 23): the banner of the dead-letter pages, the Problems page's urgency,
// and GET /api/v1/deadlines.

// atRiskReader is what the banner needs (deadlines.Service).
type atRiskReader interface {
	AtRiskFailures(ctx context.Context, orgID string) ([]deadlines.AtRisk, error)
}

// urgencyOrderer orders the Problems page's groups by urgency (deadlines.Service).
type urgencyOrderer interface {
	atRiskReader
	OrderByUrgency(ctx context.Context, orgID string, groups []models.GroupView) (map[string]deadlines.GroupDue, error)
}

// deadlineReader answers the deadlines API (deadlines.Service).
type deadlineReader interface {
	Deadlines(ctx context.Context, orgID string, from, to time.Time) ([]deadlines.Due, error)
}

var _ urgencyOrderer = (*deadlines.Service)(nil)
var _ deadlineReader = (*deadlines.Service)(nil)

// dueDate shows a civil date the banner's way: "śr. 25 lis" / "Wed 25 Nov".
func dueDate(l *i18n.Localizer, d time.Time) string {
	return l.T("deadlines.date", "Weekday", l.T("deadlines.weekday."+strconv.Itoa(int(d.Weekday()))), "Day", d.Day(),
		"Month", l.T("deadlines.month."+strconv.Itoa(int(d.Month()))))
}

// deadlineAlerts are the banner's lines: each obligation, period and due date at risk,
// linking to its items in the list (listURL filtered by obligation and period); an overdue
// one, for admins, with how to correct it.
func deadlineAlerts(c echo.Context, r atRiskReader, listURL string) ([]pages.DeadlineAlert, error) {
	if r == nil {
		return nil, nil
	}
	p, l := principal(c), localizer(c)
	rows, err := r.AtRiskFailures(c.Request().Context(), p.OrganizationID)
	if err != nil {
		return nil, err
	}
	out := make([]pages.DeadlineAlert, 0, len(rows))
	for _, a := range rows {
		q := url.Values{}
		set(q, "obligation", a.Obligation)
		set(q, "period", a.Period)
		period := a.Period
		if period == "" {
			period = "–"
		}
		al := pages.DeadlineAlert{URL: listURL + "?" + q.Encode(), Urgency: a.Urgency.String()}
		if a.Urgency == deadline.Overdue {
			al.Text = l.N("deadlines.banner.overdue", a.Clients, "Obligation", a.Obligation, "Period", period, "Due", dueDate(l, a.Due),
				"Days", l.N("deadlines.days.ago", -a.WorkingDaysLeft))
			if p.Can(models.RoleAdmin) {
				al.Hint = l.T("deadlines.banner.czynnyzal")
			}
		} else {
			al.Text = l.N("deadlines.banner.atrisk", a.Clients, "Obligation", a.Obligation, "Period", period, "Due", dueDate(l, a.Due),
				"Days", l.N("deadlines.days", a.WorkingDaysLeft))
		}
		out = append(out, al)
	}
	return out, nil
}

// groupDueText says a Problems group's nearest due date ("" when none has one).
func groupDueText(l *i18n.Localizer, g deadlines.GroupDue) string {
	if g.Nearest.IsZero() {
		return ""
	}
	left := g.DaysLeft
	if g.Urgency == deadline.Overdue {
		return l.T("deadlines.group.overdue", "Due", dueDate(l, g.Nearest), "Days", l.N("deadlines.days.ago", -left))
	}
	return l.N("deadlines.group.due", g.AtRisk, "Due", dueDate(l, g.Nearest), "Days", l.N("deadlines.days", left))
}

// DeadlinesHandler serves GET /api/v1/deadlines.
type DeadlinesHandler struct {
	svc deadlineReader
}

// maxDeadlineSpan bounds the days one request of the deadlines API spans.
const maxDeadlineSpan = 400

// API: GET /api/v1/deadlines?from=YYYY-MM-DD&to=YYYY-MM-DD (every member): per obligation
// and due date, {"obligation", "dueAt", "urgency", "workingDaysLeft", "open", "atRisk",
// "amount": {"PLN": "184230.50"}, "periods", "clients": {"count", "keys"}}, the soonest first.
// from defaults to 31 days before the database clock's day and to to 93 days after from; a
// date that is not one, to before from, or a span over 400 days is a 422 naming the field.
func (h *DeadlinesHandler) API(c echo.Context) error {
	p, ctx := principal(c), c.Request().Context()
	fields := map[string]string{}
	parse := func(k string) (time.Time, bool) {
		v := c.QueryParam(k)
		if v == "" {
			return time.Time{}, false
		}
		t, err := time.Parse(time.DateOnly, v)
		if err != nil {
			fields[k] = "must be a date (YYYY-MM-DD)"
			return time.Time{}, false
		}
		return t, true
	}
	from, hasFrom := parse("from")
	to, hasTo := parse("to")
	if len(fields) > 0 {
		return apperr.Invalid("The dates are not valid.", fields)
	}
	switch {
	case hasFrom && hasTo && to.Before(from):
		fields["to"] = "must not be before from"
	case hasFrom && hasTo && to.Sub(from) > maxDeadlineSpan*24*time.Hour:
		fields["to"] = "must be at most 400 days after from"
	}
	if len(fields) > 0 {
		return apperr.Invalid("The dates are not valid.", fields)
	}
	out, err := h.svc.Deadlines(ctx, p.OrganizationID, from, to)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"from": from.Format(time.DateOnly), "to": to.Format(time.DateOnly), "deadlines": out})
}
