package models_test

import (
	"context"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

func TestMigrateAndRoundTrip(t *testing.T) {
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		// Migrating again is a no-op.
		if err := db.Migrate(ctx); err != nil {
			t.Fatalf("second migrate: %v", err)
		}
		org := models.Organization{ID: models.NewID(), Name: "Biuro"}
		if err := db.Conn(ctx).Create(&org).Error; err != nil {
			t.Fatal(err)
		}
		p := models.RetryPolicy{ID: models.NewID(), OrganizationID: org.ID, MaxRetries: 3, InitialDelayMs: 5000,
			MaxDelayMs: 300000, BackoffMultiplier: 2, RetryOnErrors: models.StringList{"transient", "timeout"},
			NoRetryOnErrors: models.StringList{}, Spec: models.JSON(`{"maxRetries":3}`)}
		if err := db.Conn(ctx).Create(&p).Error; err != nil {
			t.Fatal(err)
		}
		var got models.RetryPolicy
		if err := db.Conn(ctx).First(&got, "id = ?", p.ID).Error; err != nil {
			t.Fatal(err)
		}
		if len(got.RetryOnErrors) != 2 || got.RetryOnErrors[1] != "timeout" || len(got.NoRetryOnErrors) != 0 {
			t.Fatalf("lists: %#v %#v", got.RetryOnErrors, got.NoRetryOnErrors)
		}
		if string(got.Spec) == "" {
			t.Fatal("spec lost")
		}
		// A CHECK constraint holds on both dialects.
		bad := models.Membership{ID: models.NewID(), OrganizationID: org.ID, UserID: models.NewID(), Role: "god"}
		if err := db.Conn(ctx).Create(&bad).Error; err == nil {
			t.Fatal("role outside the CHECK list was accepted")
		}
		now, err := db.Now(ctx)
		if err != nil || time.Since(now) > time.Minute || now.Location() != time.UTC {
			t.Fatalf("db clock %v %v", now, err)
		}
	})
}
