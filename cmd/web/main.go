// Command web is Lifeline: it serves the app and runs the background work, and has
// subcommands to migrate and to create organizations, users and API tokens.
//
//	web [serve]                                   serve on LIFELINE_ADDR (default :8080)
//	web migrate                                   apply migrations and exit
//	web create-org --name NAME                    print the new organization's id
//	web create-user --org ID --email E --password P --role ROLE
//	web create-token --org ID --role ROLE [--name NAME]   print the token
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
	"syscall"
	"time"

	"lifeline/models"
	"lifeline/services/auth"
	"lifeline/services/definition"
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
	db, err := models.Open(ctx, cfg.DatabaseURL)
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
		return nil
	case "create-token":
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		fs.SetOutput(stderr)
		org := fs.String("org", "", "organization id")
		role := fs.String("role", "", "owner, admin, accountant or viewer")
		name := fs.String("name", "", "a name to recognise the token by")
		if err := fs.Parse(args); err != nil {
			return err
		}
		tok, _, err := as.CreateToken(ctx, *org, *role, *name)
		if err != nil {
			return userError(err)
		}
		fmt.Fprintln(stdout, tok)
		return nil
	}
	return fmt.Errorf("unknown command %q (serve, migrate, create-org, create-user, create-token)", cmd)
}

// userError spells out field errors for the command line.
func userError(err error) error {
	var me *models.Error
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
