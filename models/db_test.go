package models_test

import (
	"context"
	"strings"
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
		// The role CHECK constraint holds on both dialects: with a real user and organization,
		// only the role can make the insert fail.
		user := models.User{ID: models.NewID(), Email: "anna@biuro.example", Name: "anna", PasswordHash: "x"}
		if err := db.Conn(ctx).Create(&user).Error; err != nil {
			t.Fatal(err)
		}
		bad := models.Membership{ID: models.NewID(), OrganizationID: org.ID, UserID: user.ID, Role: "god"}
		err := db.Conn(ctx).Create(&bad).Error
		if err == nil {
			t.Fatal("role outside the CHECK list was accepted")
		}
		if msg := strings.ToLower(err.Error()); !strings.Contains(msg, "check") || strings.Contains(msg, "foreign") {
			t.Fatalf("refused for another reason than the role CHECK: %v", err)
		}
		good := models.Membership{ID: models.NewID(), OrganizationID: org.ID, UserID: user.ID, Role: models.RoleViewer}
		if err := db.Conn(ctx).Create(&good).Error; err != nil {
			t.Fatalf("a valid role was refused: %v", err)
		}
		now, err := db.Now(ctx)
		if err != nil || time.Since(now) > time.Minute || now.Location() != time.UTC {
			t.Fatalf("db clock %v %v", now, err)
		}
	})
}

func TestWithPool(t *testing.T) {
	cases := []struct{ in, want string }{
		{"postgres://u@h/db", "postgres://u@h/db?pool_max_conns=30"},
		{"postgresql://u@h/db?sslmode=disable", "postgresql://u@h/db?sslmode=disable&pool_max_conns=30"},
		{"postgres://u@h/db?pool_max_conns=5", "postgres://u@h/db?pool_max_conns=5"},
		{"sqlite:///tmp/x.db", "sqlite:///tmp/x.db"},
		{"", ""},
	}
	for _, c := range cases {
		if got := models.WithPool(c.in, 30); got != c.want {
			t.Errorf("WithPool(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
