package engine

import (
	"testing"
	"time"

	"lifeline/models"
	"lifeline/services/classify"
	"lifeline/services/steps"
)

// TestAskExpiresAt: timeoutBeforeDue counts working days back from the execution's due
// date; without a due date timeoutMs applies; without either the step fails no_due_date.
func TestAskExpiresAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	due := "2026-11-30" // a Monday
	two := &steps.TimeoutBeforeDue{WorkingDays: 2}
	cases := []struct {
		name string
		due  *string
		c    steps.AskConfig
		want time.Time
		code string
	}{
		{"before due", &due, steps.AskConfig{TimeoutBeforeDue: two, TimeoutMs: 60000}, time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC), ""},
		{"over a weekend", &due, steps.AskConfig{TimeoutBeforeDue: &steps.TimeoutBeforeDue{WorkingDays: 1}}, time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), ""},
		{"on the due date", &due, steps.AskConfig{TimeoutBeforeDue: &steps.TimeoutBeforeDue{}}, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), ""},
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
