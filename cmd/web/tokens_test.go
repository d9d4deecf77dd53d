package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/auth"
)

// Point 12: create-token --expires (days, a Go duration, never; 90 days by default) and
// revoke-token (by value, or by organization and id), on both databases.
func TestTokenSubcommands(t *testing.T) {
	t.Parallel()
	for _, dialect := range modeltest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			url := modeltest.URL(t, dialect)
			if dialect == models.SQLite {
				url = filepath.Join(t.TempDir(), "cli.db") // a fresh file: the command migrates it
			}
			env := func(k string) string {
				if k == "DATABASE_URL" {
					return url
				}
				return ""
			}
			runCmd := func(args ...string) (string, error) {
				var out, errb bytes.Buffer
				err := run(context.Background(), args, env, &out, &errb)
				return strings.TrimSpace(out.String()), err
			}
			org, err := runCmd("create-org", "--name", "Biuro CLI")
			if err != nil {
				t.Fatal(err)
			}
			forever, err := runCmd("create-token", "--org", org, "--role", "viewer", "--expires", "never", "--name", "forever")
			if err != nil {
				t.Fatal(err)
			}
			month, err := runCmd("create-token", "--org", org, "--role", "viewer", "--expires", "30d", "--name", "month")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := runCmd("create-token", "--org", org, "--role", "viewer", "--expires", "36h", "--name", "hours"); err != nil {
				t.Fatal(err)
			}
			if _, err := runCmd("create-token", "--org", org, "--role", "viewer", "--name", "default"); err != nil {
				t.Fatal(err)
			}
			for _, bad := range []string{"soon", "-5d", "0d", "-1h", "30x"} {
				if _, err := runCmd("create-token", "--org", org, "--role", "viewer", "--expires", bad); err == nil || !strings.Contains(err.Error(), "--expires") {
					t.Errorf("--expires %q: %v", bad, err)
				}
			}
			db, err := models.Open(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ctx := context.Background()
			byName := func(name string) models.APIToken {
				var m models.APIToken
				if err := db.Conn(ctx).First(&m, "name = ?", name).Error; err != nil {
					t.Fatalf("token %q: %v", name, err)
				}
				return m
			}
			for name, want := range map[string]time.Duration{"month": 30 * 24 * time.Hour, "hours": 36 * time.Hour, "default": auth.DefaultTokenTTL} {
				m := byName(name)
				if m.ExpiresAt == nil || m.ExpiresAt.Sub(m.CreatedAt).Round(time.Second) != want {
					t.Errorf("token %q expires %v after creation, want %v", name, m.ExpiresAt, want)
				}
			}
			if m := byName("forever"); m.ExpiresAt != nil {
				t.Errorf("--expires never: expires %v", m.ExpiresAt)
			}

			as := &auth.Service{DB: db}
			// Revoke by value, and by organization and id.
			if out, err := runCmd("revoke-token", "--token", forever); err != nil || !strings.HasPrefix(out, "revoked ") {
				t.Fatalf("revoke --token: %q %v", out, err)
			}
			if _, err := as.TokenPrincipal(ctx, forever); apperr.ErrorCode(err) != apperr.EUNAUTHORIZED || !strings.Contains(err.Error(), "revoked") {
				t.Fatalf("revoked token still works: %v", err)
			}
			m := byName("month")
			if _, err := runCmd("revoke-token", "--org", "00000000-0000-0000-0000-000000000000", "--id", m.ID); err == nil {
				t.Fatal("revoked a token through another organization")
			}
			if _, err := as.TokenPrincipal(ctx, month); err != nil {
				t.Fatalf("a failed revoke touched the token: %v", err)
			}
			if out, err := runCmd("revoke-token", "--org", org, "--id", m.ID); err != nil || !strings.Contains(out, m.ID) {
				t.Fatalf("revoke --org --id: %q %v", out, err)
			}
			if _, err := as.TokenPrincipal(ctx, month); apperr.ErrorCode(err) != apperr.EUNAUTHORIZED {
				t.Fatalf("revoked token still works: %v", err)
			}
			var revoked int64
			db.Conn(ctx).Model(&models.AuditEntry{}).Where("organization_id = ? AND action = ?", org, "token.revoked").Count(&revoked)
			if revoked != 2 {
				t.Fatalf("%d token.revoked audit events, want 2", revoked)
			}
			if _, err := runCmd("revoke-token", "--token", "llt_unknown"); err == nil {
				t.Fatal("revoked an unknown token")
			}
			if _, err := runCmd("revoke-token"); err == nil {
				t.Fatal("revoke-token without arguments")
			}
		})
	}
}
