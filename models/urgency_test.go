package models_test

import (
	"context"
	"slices"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestDLQUrgencyOrder: the urgency order puts the soonest due date first (overdue, today, at
// risk and later follow from it), the largest amount first within a date, then the newest,
// and work with no due date last with the closed items (a resolved item due 25 Nov, 7, is no
// longer urgent), across pages (TestListDLQSorted pages it with every order).
func TestDLQUrgencyOrder(t *testing.T) {
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newSortFixture(t, db)
		got := allDLQPages(t, db, f.org, models.DLQFilter{Sort: models.DLQUrgency, Limit: 3})
		var want []string
		for _, i := range []int{6, 2, 0, 3, 7, 4, 1, 8, 5} {
			want = append(want, f.dls[i].ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("urgency:\n got %v\nwant %v", got, want)
		}
	})
}

// TestDeadlineReminderOnce: a reminder of an organization, obligation, due date and
// threshold is recorded once; a second record loses; another threshold or organization is
// its own.
func TestDeadlineReminderOnce(t *testing.T) {
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org, other := mkOrg(t, db, "Biuro Przypomnień"), mkOrg(t, db, "Inne Biuro")
		r := models.DeadlineReminder{OrganizationID: org, Obligation: "JPK_V7M", DueOn: "2026-11-25", DaysLeft: 1, Clients: 3}
		for i, c := range []struct {
			r    models.DeadlineReminder
			want bool
		}{{r, true}, {r, false}, {func() models.DeadlineReminder { x := r; x.DaysLeft = 0; return x }(), true},
			{func() models.DeadlineReminder { x := r; x.OrganizationID = other; return x }(), true}} {
			won, err := models.RecordDeadlineReminder(db.Conn(ctx), c.r)
			if err != nil || won != c.want {
				t.Errorf("record %d: won %v, %v; want %v", i, won, err, c.want)
			}
		}
	})
}
