package engine

import (
	"testing"
	"time"

	"lifeline/models"
	"lifeline/services/classify"
	"lifeline/services/steps"
)

// TestAskExpiresAt: timeoutBeforeDue counts working days (Polish holidays are not) back from
// the execution's due date to midnight in Poland; once that has passed timeoutMs applies; without a due date timeoutMs applies; without either the step fails no_due_date.
func TestAskExpiresAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	due := "2026-11-30" // a Monday
	two := &steps.TimeoutBeforeDue{WorkingDays: 2}
	warsaw, _ := time.LoadLocation("Europe/Warsaw")
	midnight := func(d int, m time.Month) time.Time { return time.Date(2026, m, d, 0, 0, 0, 0, warsaw) }
	holiday := "2026-11-12" // a Thursday after Independence Day (Wednesday 11 November)
	soon := "2026-11-23"    // a Monday: 2 working days before it (the 19th) has passed
	overdue := "2026-11-16"
	cases := []struct {
		name string
		due  *string
		c    steps.AskConfig
		want time.Time
		code string
	}{
		{"before due", &due, steps.AskConfig{TimeoutBeforeDue: two, TimeoutMs: 60000}, midnight(26, time.November), ""},
		{"over a weekend", &due, steps.AskConfig{TimeoutBeforeDue: &steps.TimeoutBeforeDue{WorkingDays: 1}}, midnight(27, time.November), ""},
		{"on the due date", &due, steps.AskConfig{TimeoutBeforeDue: &steps.TimeoutBeforeDue{}}, midnight(30, time.November), ""},
		{"over a holiday", &holiday, steps.AskConfig{TimeoutBeforeDue: &steps.TimeoutBeforeDue{WorkingDays: 1}}, midnight(10, time.November), ""},
		{"passed: timeoutMs", &soon, steps.AskConfig{TimeoutBeforeDue: two, TimeoutMs: 60000}, now.Add(time.Minute), ""},
		{"passed: timeoutMs, not past the due date", &soon, steps.AskConfig{TimeoutBeforeDue: two, TimeoutMs: 7 * 24 * 3600 * 1000}, midnight(24, time.November), ""},
		{"overdue: timeoutMs", &overdue, steps.AskConfig{TimeoutBeforeDue: two, TimeoutMs: 3600000}, now.Add(time.Hour), ""},
		{"passed, no timeoutMs: at once", &soon, steps.AskConfig{TimeoutBeforeDue: two}, midnight(19, time.November), ""},
		{"no due date: timeoutMs", nil, steps.AskConfig{TimeoutBeforeDue: two, TimeoutMs: 60000}, now.Add(time.Minute), ""},
		{"timeoutMs", &due, steps.AskConfig{TimeoutMs: 3600000}, now.Add(time.Hour), ""},
		{"neither", nil, steps.AskConfig{TimeoutBeforeDue: two}, time.Time{}, CodeNoDueDate},
	}
	for _, c := range cases {
		ex := &models.Execution{}
		ex.DueOn = c.due
		got, err := expiresAt(ex, c.c, now)
		if c.code != "" {
			if classify.Classify(err).Code != c.code {
				t.Errorf("%s: %v, want %s", c.name, err, c.code)
			}
			continue
		}
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%s: %v %v, want %v", c.name, got, err, c.want)
		}
	}
}
