// Package deadlines says what is due (issue 23): the open work of each obligation and due
// date (the API), what is at risk in the dead-letter queue (the banner), the Problems page's
// groups in urgency order, and the reminders sent as a deadline nears (reminders.go).
//
// "Today" is the database clock's day in Poland (deadline.Day), so every process and test
// agrees on it; at risk means due within the organization's working days (models.DeadlineRules).
package deadlines

import (
	"context"
	"sort"
	"time"

	"lifeline/models"
	"lifeline/services/deadline"
	"lifeline/services/money"
)

// Service reads deadlines and sends their reminders.
type Service struct {
	DB *models.DB
	// Notify records a reminder's deliveries (nil: reminders are recorded as sent, told to
	// no one).
	Notify Notifier
	// Link returns the absolute URL of the list of an obligation's open work due on a day
	// (YYYY-MM-DD), which a reminder links to (nil: none).
	Link func(obligation, dueOn string) string
}

// day is the civil date of a YYYY-MM-DD text.
func day(s string) (time.Time, bool) {
	t, err := time.Parse(time.DateOnly, s)
	return t, err == nil
}

// Today returns the database clock's day in Poland and the organization's at-risk working
// days.
func (s *Service) Today(ctx context.Context, orgID string) (time.Time, int, error) {
	now, err := s.DB.Now(ctx)
	if err != nil {
		return time.Time{}, 0, err
	}
	r, err := s.DB.DeadlineRules(ctx, orgID)
	return deadline.Day(now), r.RiskWorkingDays, err
}

// Due is the open work of one obligation and due date, as the API shows it.
type Due struct {
	Obligation string `json:"obligation"`
	DueAt      string `json:"dueAt"`
	// Urgency: overdue, due_today, at_risk or later; WorkingDaysLeft is negative when overdue.
	Urgency         string `json:"urgency"`
	WorkingDaysLeft int    `json:"workingDaysLeft"`
	// Open counts the executions not done; AtRisk those of them at risk (all of them when
	// the date is within the organization's working days or past, else none).
	Open   int `json:"open"`
	AtRisk int `json:"atRisk"`
	// Amount is the open amount per currency, an exact decimal string ("184230.50").
	Amount  map[string]string `json:"amount"`
	Periods []string          `json:"periods"`
	Clients Clients           `json:"clients"`
}

// Clients counts the distinct clients of a due date and names the first of them.
type Clients struct {
	Count int      `json:"count"`
	Keys  []string `json:"keys"`
}

// Deadlines returns the organization's open work per obligation and due date from from to to
// (civil dates, inclusive; a zero from is 31 days before today, a zero to 93 days after
// from), the soonest first.
func (s *Service) Deadlines(ctx context.Context, orgID string, from, to time.Time) ([]Due, error) {
	today, within, err := s.Today(ctx, orgID)
	if err != nil {
		return nil, err
	}
	if from.IsZero() {
		from = today.AddDate(0, 0, -31)
	}
	if to.IsZero() {
		to = from.AddDate(0, 0, 93)
	}
	rows, err := s.DB.OpenDeadlines(ctx, orgID, from.Format(time.DateOnly), to.Format(time.DateOnly))
	if err != nil {
		return nil, err
	}
	out := make([]Due, 0, len(rows))
	for _, r := range rows {
		d, ok := day(r.DueOn)
		if !ok {
			continue // not a date: nothing a start renders
		}
		u := deadline.UrgencyOf(today, &d, within)
		x := Due{Obligation: r.Obligation, DueAt: r.DueOn, Urgency: u.String(), WorkingDaysLeft: deadline.WorkingDaysLeft(today, d),
			Open: r.Open, Amount: map[string]string{}, Periods: r.Periods, Clients: Clients{Count: r.Clients, Keys: r.ClientKeys}}
		if u <= deadline.AtRisk {
			x.AtRisk = r.Open
		}
		for c, total := range r.Amounts {
			x.Amount[c] = money.DecimalText(total, c)
		}
		if x.Periods == nil {
			x.Periods = []string{}
		}
		if x.Clients.Keys == nil {
			x.Clients.Keys = []string{}
		}
		out = append(out, x)
	}
	return out, nil
}

// AtRisk is one obligation, period and due date with dead letters still to handle that are
// overdue, due today or due within the organization's working days.
type AtRisk struct {
	Obligation, Period string
	Due                time.Time
	Urgency            deadline.Urgency
	// WorkingDaysLeft is negative when overdue.
	WorkingDaysLeft int
	Clients, Items  int
}

// AtRiskFailures returns what the banner of the dead-letter pages says: the obligations,
// periods and due dates whose dead letters still to handle are at risk, the soonest first.
func (s *Service) AtRiskFailures(ctx context.Context, orgID string) ([]AtRisk, error) {
	today, within, err := s.Today(ctx, orgID)
	if err != nil {
		return nil, err
	}
	rows, err := s.DB.AtRiskDeadLetters(ctx, orgID, deadline.AddWorkingDays(today, within).Format(time.DateOnly))
	if err != nil {
		return nil, err
	}
	var out []AtRisk
	for _, r := range rows {
		d, ok := day(r.DueOn)
		if !ok {
			continue
		}
		out = append(out, AtRisk{Obligation: r.Obligation, Period: r.Period, Due: d, Urgency: deadline.UrgencyOf(today, &d, within),
			WorkingDaysLeft: deadline.WorkingDaysLeft(today, d), Clients: r.Clients, Items: r.Items})
	}
	return out, nil
}

// GroupDue is what a failure group's items still to handle say of deadlines.
type GroupDue struct {
	// Nearest is the soonest due date (zero when none has one); Urgency its urgency.
	Nearest time.Time
	Urgency deadline.Urgency
	// DaysLeft is the working days left to Nearest (negative when overdue).
	DaysLeft int
	AtRisk   int
}

// OrderByUrgency sorts the Problems page's groups (models.ProblemGroups' order otherwise
// kept, stable) by the urgency of their nearest due date (overdue, today, at risk, later,
// none), then by the sum of their amounts, the largest first, and returns what each group's
// items say of deadlines. One query for the page.
func (s *Service) OrderByUrgency(ctx context.Context, orgID string, groups []models.GroupView) (map[string]GroupDue, error) {
	today, within, err := s.Today(ctx, orgID)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(groups))
	for i := range groups {
		ids[i] = groups[i].ID
	}
	dues, err := s.DB.GroupsDue(ctx, orgID, ids, deadline.AddWorkingDays(today, within).Format(time.DateOnly))
	if err != nil {
		return nil, err
	}
	out := make(map[string]GroupDue, len(dues))
	for id, g := range dues {
		gd := GroupDue{Urgency: deadline.None, AtRisk: g.AtRisk}
		if d, ok := day(g.NearestDue); ok {
			gd.Nearest, gd.Urgency, gd.DaysLeft = d, deadline.UrgencyOf(today, &d, within), deadline.WorkingDaysLeft(today, d)
		}
		out[id] = gd
	}
	key := func(i int) (deadline.Urgency, time.Time, int64) {
		g, ok := out[groups[i].ID]
		if !ok {
			return deadline.None, time.Time{}, 0
		}
		return g.Urgency, g.Nearest, dues[groups[i].ID].Amount
	}
	sort.SliceStable(groups, func(i, j int) bool {
		ui, di, ai := key(i)
		uj, dj, aj := key(j)
		if ui != uj {
			return ui < uj
		}
		if !di.Equal(dj) {
			return di.Before(dj)
		}
		return ai > aj
	})
	return out, nil
}
