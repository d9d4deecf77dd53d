package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/steps"
)

// TestDefinitionCacheIsPerOrganization: a definition read once for its organization is not
// handed to another organization that names the same workflow id.
func TestDefinitionCacheIsPerOrganization(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		e := New(db, steps.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)), Config{Queue: &jobLog{}})
		own, other := models.Organization{ID: models.NewID(), Name: "A"}, models.Organization{ID: models.NewID(), Name: "B"}
		now := time.Now().UTC()
		def := models.JSON(`{"name": "W", "steps": [{"id": "t", "type": "transform", "config": {"output": 1}}]}`)
		wf := models.Workflow{ID: models.NewID(), OrganizationID: own.ID, Name: "W", Version: 1, Definition: def,
			UnknownErrors: "retry", WebhookToken: models.NewID(), WebhookSecret: "x", CreatedAt: now, UpdatedAt: now}
		for _, row := range []any{&own, &other, &wf, &models.WorkflowVersion{ID: models.NewID(), OrganizationID: own.ID, WorkflowID: wf.ID, Version: 1, Definition: def, CreatedAt: now}} {
			if err := db.Conn(ctx).Create(row).Error; err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.definitionFor(ctx, own.ID, wf.ID, 1); err != nil {
			t.Fatal(err)
		}
		if d, err := e.definitionFor(ctx, other.ID, wf.ID, 1); err == nil || d != nil {
			t.Fatalf("another organization read the cached definition: %v %v", d, err)
		}
	})
}
