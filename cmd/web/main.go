// Command web is Lifeline: it serves the app and runs the background work, and has
// subcommands to migrate and to create organizations, users and API tokens.
//
//	web [serve]                                   serve on LIFELINE_ADDR (default :8080)
//	web migrate                                   apply migrations and exit
//	web create-org --name NAME                    print the new organization's id (and, on
//	                                              stderr, the commands that come next)
//	web create-user --org ID --email E --password P --role ROLE   print the user's id (and, on
//	                                              stderr, where to log in and how to get a token)
//	web create-token --org ID --role ROLE [--name NAME] [--expires 90d|720h|never]   print the token
//	web revoke-token --token TOKEN | --org ID --id TOKEN_ID
//	web reseal                                    re-encrypt secrets at rest under the first key
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/auth"
	"lifeline/services/definition"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/outbound"
	"lifeline/services/steps"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "lifeline:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	// PostgreSQL's pool, unless DATABASE_URL sets pool_max_conns (WithPool leaves SQLite alone).
	workers := cfg.Workers
	if workers == 0 {
		workers = jobs.DefaultWorkers(models.Postgres)
	}
	db, err := models.Open(ctx, models.WithPool(cfg.DatabaseURL, jobs.PoolSize(workers)))
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	as := &auth.Service{DB: db}
	switch cmd {
	case "serve":
		return serve(ctx, cfg, db, stdout)
	case "migrate":
		fmt.Fprintln(stdout, "migrations applied")
		return nil
	case "create-org":
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		fs.SetOutput(stderr)
		name := fs.String("name", "", "organization name")
		if err := fs.Parse(args); err != nil {
			return err
		}
		org, err := as.CreateOrg(ctx, *name)
		if err != nil {
			return userError(err)
		}
		fmt.Fprintln(stdout, org.ID)
		fmt.Fprintf(stderr, "Organization %q created; its id is %s.\nNext, a user who can log in:\n  %s create-user --org %s --email EMAIL --password PASSWORD --role owner\nor an API token:\n  %s create-token --org %s --role admin\n",
			org.Name, org.ID, commandName(), org.ID, commandName(), org.ID)
		return nil
	case "create-user":
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		fs.SetOutput(stderr)
		org := fs.String("org", "", "organization id")
		email := fs.String("email", "", "email")
		password := fs.String("password", "", "password (at least 8 characters)")
		role := fs.String("role", "", "owner, admin, accountant or viewer")
		if err := fs.Parse(args); err != nil {
			return err
		}
		u, err := as.CreateUser(ctx, *org, *email, *password, *role)
		if err != nil {
			return userError(err)
		}
		fmt.Fprintln(stdout, u.ID)
		fmt.Fprintf(stderr, "User %s (%s) added to organization %s; they log in at %s/login.\nAn API token for this organization:\n  %s create-token --org %s --role admin\n",
			u.Email, *role, *org, cfg.BaseURL, commandName(), *org)
		return nil
	case "create-token":
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		fs.SetOutput(stderr)
		org := fs.String("org", "", "organization id")
		role := fs.String("role", "", "owner, admin, accountant or viewer")
		name := fs.String("name", "", "a name to recognise the token by")
		expires := fs.String("expires", "90d", "validity: days (30d), a Go duration (720h), or never")
		if err := fs.Parse(args); err != nil {
			return err
		}
		ttl, err := parseExpiry(*expires)
		if err != nil {
			return err
		}
		tok, _, err := as.IssueToken(ctx, auth.TokenRequest{OrganizationID: *org, Role: *role, Name: *name, TTL: ttl, Actor: audit.System})
		if err != nil {
			return userError(err)
		}
		fmt.Fprintln(stdout, tok)
		return nil
	case "reseal":
		log := newLogger(stderr, cfg.LogLevel)
		sealer, err := keyRing(cfg, log)
		if err != nil {
			return err
		}
		db.Sealer = sealer
		queue, err := jobs.NewQueue(db, jobs.Config{}, log) // reseal queues nothing; the engine needs one
		if err != nil {
			return err
		}
		n, err := engine.New(db, stepRegistry(cfg), log, engine.Config{Queue: queue, RedactKeys: cfg.RedactKeys, Sealer: sealer}).Reseal(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "re-encrypted %d values under the first key of LIFELINE_ENCRYPTION_KEYS\n", n)
		return nil
	case "revoke-token":
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		fs.SetOutput(stderr)
		org := fs.String("org", "", "organization id (with --id)")
		id := fs.String("id", "", "token id (with --org)")
		plain := fs.String("token", "", "the token itself (instead of --org and --id)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		var t *models.APIToken
		switch {
		case *plain != "":
			t, err = as.RevokePlainToken(ctx, *plain)
		case *org != "" && *id != "":
			t, err = as.RevokeToken(ctx, *org, *id, audit.System)
		default:
			return errors.New("revoke-token needs --token TOKEN, or --org ORG_ID --id TOKEN_ID")
		}
		if err != nil {
			return userError(err)
		}
		fmt.Fprintf(stdout, "revoked %s (%s)\n", t.ID, t.Name)
		return nil
	}
	return fmt.Errorf("unknown command %q (serve, migrate, create-org, create-user, create-token, revoke-token, reseal)", cmd)
}

// commandName is how the user ran this program, for the commands it suggests: "go run
// ./cmd/web" from a build cache, else the program's file name ("lifeline").
func commandName() string {
	if strings.Contains(os.Args[0], "go-build") {
		return "go run ./cmd/web"
	}
	return filepath.Base(os.Args[0])
}

// parseExpiry reads a token's validity: "30d", a Go duration ("720h"), or "never" (0).
func parseExpiry(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "never" || v == "0" {
		return 0, nil
	}
	if d, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("--expires %q: want days like 30d, a duration like 720h, or never", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--expires %q: want days like 30d, a duration like 720h, or never", v)
	}
	return d, nil
}

// userError spells out field errors for the command line.
func userError(err error) error {
	var me *apperr.Error
	if errors.As(err, &me) {
		msg := me.Message
		for k, v := range me.Fields {
			msg += fmt.Sprintf("\n  %s: %s", k, v)
		}
		return errors.New(msg)
	}
	return err
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv}))
}

// stepRegistry returns the built-in step types. Their HTTP client's own ceiling is the
// longest timeout a step may ask for, so each step's timeoutMs is what governs.
func stepRegistry(cfg Config) *steps.Registry {
	return steps.Builtins(outbound.NewClient(outbound.Options{Allow: cfg.OutboundAllow,
		Timeout: time.Duration(definition.MaxStepTimeoutMs) * time.Millisecond}))
}
