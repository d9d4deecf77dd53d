package deadlines

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/services/deadline"
	"lifeline/services/notify"
)

// Notifier records a reminder's deliveries in the caller's transaction (notify.Service).
type Notifier interface {
	EmitDeadline(tx *gorm.DB, r notify.DeadlineReminder) error
}

var _ Notifier = (*notify.Service)(nil)

// RemindEvery is how often the reminders' pass runs (services/jobs): a reminder goes out
// within this long of the working day its threshold is reached on.
const RemindEvery = 15 * time.Minute

// threshold returns the reminder due with left working days to a due date when at-risk work
// is within working days: the least of within, 1 and 0 that is at least left (so a pass that
// missed a day still sends the threshold it missed, once), and false when none is (more than
// within days left, or overdue).
func threshold(left, within int) (int, bool) {
	best, ok := 0, false
	for _, t := range []int{within, 1, 0} {
		if t >= left && left >= 0 && (!ok || t < best) {
			best, ok = t, true
		}
	}
	return best, ok
}

// Remind runs one pass of the deadline reminders over every organization, on the database
// clock's day: for each obligation and due date with open work (executions not done) and
// as many working days left as a threshold (the organization's at-risk days, 1 and 0), it
// records the reminder sent (once per organization, obligation, due date and threshold:
// models.RecordDeadlineReminder) and, in the same transaction, one message to the admins
// and the executions' accountants. It returns how many reminders it recorded. Running it
// again, or in two processes at once, sends nothing twice.
func (s *Service) Remind(ctx context.Context) (int, error) {
	now, err := s.DB.Now(ctx)
	if err != nil {
		return 0, err
	}
	today := deadline.Day(now)
	rows, err := s.DB.DueSoon(ctx, today.Format(time.DateOnly), deadline.AddWorkingDays(today, models.RiskDaysMax).Format(time.DateOnly))
	if err != nil {
		return 0, err
	}
	rules := map[string]models.DeadlineRules{}
	sent := 0
	for _, r := range rows {
		due, ok := day(r.DueOn)
		if !ok {
			continue
		}
		rl, seen := rules[r.OrganizationID]
		if !seen {
			if rl, err = s.DB.DeadlineRules(ctx, r.OrganizationID); err != nil {
				return sent, err
			}
			rules[r.OrganizationID] = rl
		}
		t, ok := threshold(deadline.WorkingDaysLeft(today, due), rl.RiskWorkingDays)
		if !ok {
			continue
		}
		recorded := false
		err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
			won, err := models.RecordDeadlineReminder(tx, models.DeadlineReminder{OrganizationID: r.OrganizationID, Obligation: r.Obligation,
				DueOn: r.DueOn, DaysLeft: t, Clients: r.Clients, SentAt: now})
			if err != nil || !won {
				return err
			}
			recorded = true
			if s.Notify == nil {
				return nil
			}
			periods, users, err := models.DueAudience(tx, r.OrganizationID, r.Obligation, r.DueOn)
			if err != nil {
				return err
			}
			link := ""
			if s.Link != nil {
				link = s.Link(r.Obligation, r.DueOn)
			}
			return s.Notify.EmitDeadline(tx, notify.DeadlineReminder{OrganizationID: r.OrganizationID, Obligation: r.Obligation, Due: due,
				DaysLeft: t, Periods: periods, Clients: r.Clients, Open: r.Open, Users: users, Link: link, At: now})
		})
		if err != nil {
			return sent, fmt.Errorf("deadline reminder %s %s: %w", r.Obligation, r.DueOn, err)
		}
		if recorded {
			sent++
		}
	}
	return sent, nil
}
