package models_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestGroupArrivals24h: a group's arrivals per hour are counted in SQL, by the hour of the
// last 24 (the newest hour last), on both databases: items older than a day, and another
// group's, are not counted; another organization asking for the group gets ENOTFOUND.
func TestGroupArrivals24h(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org, other := mkOrg(t, db, "Biuro Godziny"), mkOrg(t, db, "Biuro Obok")
		wf := mkWorkflow(t, db, org, "Import")
		now, err := db.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		group := func() string {
			g := models.Group{ID: models.NewID(), OrganizationID: org, Fingerprint: models.NewID()[:20], Version: 1, WorkflowID: wf,
				StepID: "send", ErrorType: "validation", Title: "NIP … ma … cyfr", State: models.GroupOpen,
				FirstSeenAt: now, LastSeenAt: now, CreatedAt: now, UpdatedAt: now}
			if err := db.Conn(ctx).Create(&g).Error; err != nil {
				t.Fatal(err)
			}
			return g.ID
		}
		g1, g2 := group(), group()
		item := func(g string, ago time.Duration) {
			at := now.Add(-ago)
			ex := mkExecution(t, db, org, wf, at)
			e := models.ExecutionError{ID: models.NewID(), OrganizationID: org, ExecutionID: ex, StepID: "send", ErrorType: "validation",
				ErrorMessage: "NIP", Status: models.ErrDeadLetter, CreatedAt: at, UpdatedAt: at}
			if err := db.Conn(ctx).Create(&e).Error; err != nil {
				t.Fatal(err)
			}
			dl := models.DeadLetter{ID: models.NewID(), OrganizationID: org, ErrorID: e.ID, WorkflowID: wf, ExecutionID: ex, GroupID: &g,
				OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: "send", Status: models.DLQPending,
				ErrorType: "validation", Reason: "NIP", ExpiresAt: at.Add(30 * 24 * time.Hour), CreatedAt: at, UpdatedAt: at}
			if err := db.Conn(ctx).Create(&dl).Error; err != nil {
				t.Fatal(err)
			}
		}
		item(g1, 10*time.Minute)
		item(g1, 90*time.Minute)
		item(g1, 100*time.Minute)
		item(g1, 23*time.Hour+30*time.Minute)
		item(g1, 25*time.Hour) // older than a day
		item(g2, 10*time.Minute)
		// The engine's transitions keep a group's counts (services/engine); the items above
		// were written without them, so the counts are set as those would have set them.
		if err := db.Conn(ctx).Model(&models.Group{}).Where("id = ?", g1).
			Updates(map[string]any{"pending_count": 5, "open_count": 5}).Error; err != nil {
			t.Fatal(err)
		}
		g, err := db.GetGroup(ctx, org, g1)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]int, 24)
		want[23], want[22], want[0] = 1, 2, 1
		if !slices.Equal(g.Arrivals24h, want) {
			t.Errorf("arrivals %v, want %v", g.Arrivals24h, want)
		}
		if g.Counts.Pending != 5 {
			t.Errorf("pending %d, want 5", g.Counts.Pending)
		}
		if _, err := db.GetGroup(ctx, other, g1); err == nil {
			t.Error("another organization reads the group")
		}
	})
}
