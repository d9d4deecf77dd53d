package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/services/auth"
)

func TestTokenSubcommands(t *testing.T) {
	t.Parallel()
	url := filepath.Join(t.TempDir(), "cli.db")
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
	forever, err := runCmd("create-token", "--org", org, "--role", "viewer", "--expires", "never")
	if err != nil {
		t.Fatal(err)
	}
	month, err := runCmd("create-token", "--org", org, "--role", "viewer", "--expires", "30d", "--name", "month")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd("create-token", "--org", org, "--role", "viewer", "--expires", "soon"); err == nil || !strings.Contains(err.Error(), "--expires") {
		t.Fatalf("bad --expires: %v", err)
	}
	db, err := models.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	as := &auth.Service{DB: db}
	var m models.APIToken
	db.Conn(context.Background()).First(&m, "name = ?", "month")
	if m.ExpiresAt == nil || time.Until(*m.ExpiresAt) < 29*24*time.Hour || time.Until(*m.ExpiresAt) > 31*24*time.Hour {
		t.Fatalf("30d token expires %v", m.ExpiresAt)
	}
	// Revoke by value, and by organization and id.
	if out, err := runCmd("revoke-token", "--token", forever); err != nil || !strings.HasPrefix(out, "revoked ") {
		t.Fatalf("revoke --token: %q %v", out, err)
	}
	if _, err := as.TokenPrincipal(context.Background(), forever); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("revoked token still works: %v", err)
	}
	if out, err := runCmd("revoke-token", "--org", org, "--id", m.ID); err != nil || !strings.Contains(out, m.ID) {
		t.Fatalf("revoke --org --id: %q %v", out, err)
	}
	if _, err := as.TokenPrincipal(context.Background(), month); err == nil {
		t.Fatal("revoked token still works")
	}
	if _, err := runCmd("revoke-token", "--org", "00000000-0000-0000-0000-000000000000", "--id", m.ID); err == nil {
		t.Fatal("revoked another organization's token")
	}
	if _, err := runCmd("revoke-token"); err == nil {
		t.Fatal("revoke-token without arguments")
	}
}
