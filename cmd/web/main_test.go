package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/definition"
	"lifeline/services/steps"
)

func TestSubcommands(t *testing.T) {
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
			if out, err := runCmd("migrate"); err != nil || out != "migrations applied" {
				t.Fatalf("migrate: %q %v", out, err)
			}
			org, err := runCmd("create-org", "--name", "Biuro Rachunkowe Nowak")
			if err != nil || !regexp.MustCompile(`^[0-9a-f-]{36}$`).MatchString(org) {
				t.Fatalf("create-org: %q %v", org, err)
			}
			if out, err := runCmd("create-user", "--org", org, "--email", "anna@nowak.pl", "--password", "długie-hasło-1", "--role", "accountant"); err != nil || out == "" {
				t.Fatalf("create-user: %q %v", out, err)
			}
			tok, err := runCmd("create-token", "--org", org, "--role", "viewer", "--name", "raporty")
			if err != nil || !strings.HasPrefix(tok, "llt_") {
				t.Fatalf("create-token: %q %v", tok, err)
			}
			if _, err := runCmd("create-user", "--org", org, "--email", "x", "--password", "short", "--role", "boss"); err == nil ||
				!strings.Contains(err.Error(), "email") || !strings.Contains(err.Error(), "role") || !strings.Contains(err.Error(), "password") {
				t.Fatalf("invalid user accepted or unclear: %v", err)
			}
			if _, err := runCmd("create-token", "--org", "00000000-0000-0000-0000-000000000000", "--role", "admin"); err == nil {
				t.Fatal("token for a missing organization")
			}
			if _, err := runCmd("frobnicate"); err == nil {
				t.Fatal("unknown command accepted")
			}
		})
	}
}

func TestConfig(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{"defaults", nil, true},
		{"demo allows loopback", map[string]string{"LIFELINE_DEMO": "true"}, true},
		{"bad allow list", map[string]string{"LIFELINE_OUTBOUND_ALLOW": "10.0.0.0/33"}, false},
		{"bad database allow list", map[string]string{"LIFELINE_DBCONN_ALLOW": "10.0.0.0/8,nope"}, false},
		{"database allow list", map[string]string{"LIFELINE_DBCONN_ALLOW": "10.0.0.0/8, 192.168.5.7", "LIFELINE_OUTBOUND_ALLOW": "172.16.0.0/12"}, true},
		{"postgres", map[string]string{"DATABASE_URL": "postgres://lifeline:pw@db.internal:6432,db2.internal/lifeline", "LIFELINE_ADDR": "127.0.0.1:9090"}, true},
		{"postgres socket", map[string]string{"DATABASE_URL": "postgres:///lifeline?host=/var/run/postgresql&port=5433"}, true},
		{"bad bool", map[string]string{"LIFELINE_DEMO": "maybe"}, false},
		{"bad workers", map[string]string{"LIFELINE_WORKERS": "0"}, false},
		{"bad addr", map[string]string{"LIFELINE_ADDR": "8080"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadConfig(func(k string) string { return c.env[k] })
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
			if c.name == "defaults" && (cfg.Addr != ":8080" || cfg.BaseURL != "http://localhost:8080" || cfg.Demo || len(cfg.OutboundAllow) != 0) {
				t.Fatalf("defaults %+v", cfg)
			}
			if c.name == "demo allows loopback" && (len(cfg.OutboundAllow) != 1 || cfg.SandboxBase() != "http://127.0.0.1:8080/sandbox" || len(cfg.DBConnAllow) != 0) {
				t.Fatalf("demo %+v", cfg)
			}
			// Database connections have an allow list of their own, and never reach Lifeline's
			// own database server or listen address.
			want := map[string]string{
				"defaults":             "[]|[:8080]",
				"demo allows loopback": "[]|[:8080]",
				"database allow list":  "[10.0.0.0/8 192.168.5.7/32]|[:8080]",
				"postgres":             "[]|[127.0.0.1:9090 db.internal:6432 db2.internal:5432]",
				"postgres socket":      "[]|[:8080 :5433]",
			}[c.name]
			if got := fmt.Sprintf("%v|%v", cfg.DBConnAllow, cfg.OwnServers); c.ok && want != "" && got != want {
				t.Errorf("database connections: %s, want %s", got, want)
			}
		})
	}
}

// A step may run for up to 10 minutes; the shared HTTP client must not cut it shorter.
func TestHTTPStepClientAllowsLongestStepTimeout(t *testing.T) {
	cfg, err := loadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	st, ok := stepRegistry(cfg).Get("http")
	if !ok {
		t.Fatal("no http step type")
	}
	max := time.Duration(definition.MaxStepTimeoutMs) * time.Millisecond
	if got := st.(*steps.HTTP).Client.Timeout; got != 0 && got < max {
		t.Fatalf("http client timeout %s is shorter than the longest step timeout %s", got, max)
	}
}
