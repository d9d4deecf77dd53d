package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// create-org and create-user print the id alone on stdout (for scripts) and, on stderr,
// what the next command needs: the organization's id in ready-to-run commands.
func TestCreateCommandsSayWhatComesNext(t *testing.T) {
	t.Parallel()
	for _, dialect := range modeltest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			url := modeltest.URL(t, dialect)
			if dialect == models.SQLite {
				url = filepath.Join(t.TempDir(), "cli.db")
			}
			env := func(k string) string {
				if k == "DATABASE_URL" {
					return url
				}
				return ""
			}
			runCmd := func(args ...string) (string, string) {
				var out, errb bytes.Buffer
				if err := run(context.Background(), args, env, &out, &errb); err != nil {
					t.Fatalf("%v: %v", args, err)
				}
				return strings.TrimSpace(out.String()), errb.String()
			}
			org, hint := runCmd("create-org", "--name", "Biuro Rachunkowe Nowak")
			for _, want := range []string{"create-user --org " + org + " ", "create-token --org " + org + " --role admin"} {
				if !strings.Contains(hint, want) {
					t.Errorf("create-org says %q, want it to contain %q", hint, want)
				}
			}
			user, hint := runCmd("create-user", "--org", org, "--email", "anna@nowak.pl", "--password", "długie-hasło-1", "--role", "owner")
			if user == "" || strings.Contains(user, "\n") {
				t.Errorf("create-user stdout %q: the id alone", user)
			}
			for _, want := range []string{"anna@nowak.pl", "/login", "create-token --org " + org + " --role admin"} {
				if !strings.Contains(hint, want) {
					t.Errorf("create-user says %q, want it to contain %q", hint, want)
				}
			}
		})
	}
}
