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

// TestGroupSamples: a group's samples are its newest pending or processing items, at most
// per of each group, newest first, on both databases; closed items, and the groups of
// another organization, give none.
func TestGroupSamples(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		org, other := mkOrg(t, db, "Biuro Próbek"), mkOrg(t, db, "Biuro Obok")
		wf, otherWF := mkWorkflow(t, db, org, "Import"), mkWorkflow(t, db, other, "Import")
		now, err := db.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		group := func(org, wf string) string {
			g := models.Group{ID: models.NewID(), OrganizationID: org, Fingerprint: models.NewID()[:20], Version: 1, WorkflowID: wf,
				StepID: "send", ErrorType: "validation", Title: "NIP", State: models.GroupOpen,
				FirstSeenAt: now, LastSeenAt: now, CreatedAt: now, UpdatedAt: now}
			if err := db.Conn(ctx).Create(&g).Error; err != nil {
				t.Fatal(err)
			}
			return g.ID
		}
		item := func(org, wf, g, status string, ago time.Duration) string {
			at := now.Add(-ago)
			ex := mkExecution(t, db, org, wf, at)
			e := models.ExecutionError{ID: models.NewID(), OrganizationID: org, ExecutionID: ex, StepID: "send", ErrorType: "validation",
				ErrorMessage: "NIP", Status: models.ErrDeadLetter, CreatedAt: at, UpdatedAt: at}
			if err := db.Conn(ctx).Create(&e).Error; err != nil {
				t.Fatal(err)
			}
			dl := models.DeadLetter{ID: models.NewID(), OrganizationID: org, ErrorID: e.ID, WorkflowID: wf, ExecutionID: ex, GroupID: &g,
				OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: "send", Status: status,
				ErrorType: "validation", Reason: "NIP", ExpiresAt: at.Add(30 * 24 * time.Hour), CreatedAt: at, UpdatedAt: at}
			if err := db.Conn(ctx).Create(&dl).Error; err != nil {
				t.Fatal(err)
			}
			return dl.ID
		}
		g1, g2, g3 := group(org, wf), group(org, wf), group(other, otherWF)
		item(org, wf, g1, models.DLQResolved, time.Minute) // closed: not a sample
		p1 := item(org, wf, g1, models.DLQProcessing, 2*time.Minute)
		p2 := item(org, wf, g1, models.DLQPending, 3*time.Minute)
		item(org, wf, g1, models.DLQPending, 4*time.Minute) // beyond per
		q1 := item(org, wf, g2, models.DLQPending, 5*time.Minute)
		item(org, wf, g2, models.DLQSkipped, time.Second)
		item(other, otherWF, g3, models.DLQPending, time.Minute)
		got, err := db.GroupSamples(ctx, org, []string{g1, g2, g3}, 2)
		if err != nil {
			t.Fatal(err)
		}
		ids := func(ss []models.GroupSample) []string {
			var out []string
			for _, s := range ss {
				out = append(out, s.ID)
			}
			return out
		}
		if !slices.Equal(ids(got[g1]), []string{p1, p2}) || !slices.Equal(ids(got[g2]), []string{q1}) || len(got[g3]) != 0 {
			t.Fatalf("samples %v %v %v, want [%s %s] [%s] []", ids(got[g1]), ids(got[g2]), ids(got[g3]), p1, p2, q1)
		}
	})
}
