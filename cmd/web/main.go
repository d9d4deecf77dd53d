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
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/riverqueue/river"

	"lifeline/handlers"
	"lifeline/models"
	"lifeline/services/definition"
	"lifeline/services/auth"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/outbound"
	"lifeline/services/sandbox"
	"lifeline/services/steps"
	"lifeline/services/workflows"
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

func serve(ctx context.Context, cfg Config, db *models.DB, stdout io.Writer) error {
	log := newLogger(stdout, cfg.LogLevel)
	reg := stepRegistry(cfg)
	eng := engine.New(db, reg, log, engine.Config{LeaseGrace: cfg.LeaseGrace, RedactKeys: cfg.RedactKeys})
	wfs := &workflows.Service{DB: db, Steps: reg}
	as := &auth.Service{DB: db}

	jcfg := jobs.Config{Workers: cfg.Workers}
	var sandboxHandler http.Handler
	var demoInfo *demoSeed
	if cfg.Demo {
		var err error
		if demoInfo, err = seedDemo(ctx, db, as, wfs, cfg.SandboxBase()); err != nil {
			return fmt.Errorf("demo data: %w", err)
		}
		sandboxHandler = sandbox.New(sandbox.Options{})
		jcfg.Periodic = append(jcfg.Periodic, jobs.DemoTraffic(demoInfo.OrgID, cfg.DemoTrafficEvery))
	}
	// Registered even without the demo: demo jobs left in the queue by an earlier demo run
	// must still find their worker.
	jcfg.Register = func(w *river.Workers) { river.AddWorker(w, &jobs.DemoTrafficWorker{DB: db, Engine: eng}) }
	runner, err := jobs.New(db, eng, jcfg, log)
	if err != nil {
		return err
	}
	e := handlers.New(handlers.Deps{DB: db, Engine: eng, Workflows: wfs, Auth: as, Log: log, BaseURL: cfg.BaseURL,
		Sandbox: sandboxHandler, Ready: func(ctx context.Context) error { return db.SQL.PingContext(ctx) }})
	srv := &http.Server{Addr: cfg.Addr, Handler: e, ReadHeaderTimeout: 10 * time.Second}

	errc := make(chan error, 1)
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
		close(errc)
	}()
	// Start the queue once the server listens: demo steps call the sandbox on this server.
	if err := runner.Start(ctx); err != nil {
		return err
	}
	log.Info("lifeline serving", "addr", cfg.Addr, "url", cfg.BaseURL, "database", db.Dialect, "demo", cfg.Demo)
	if demoInfo != nil {
		demoInfo.print(stdout, cfg.BaseURL)
		if err := demoInfo.kickoff(ctx, eng); err != nil {
			log.Warn("demo kickoff", "err", err)
		}
	}

	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
		}
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing or releasing in-flight attempts", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := runner.Stop(sctx); err != nil {
		log.Warn("queue stop", "err", err)
	}
	log.Info("stopped")
	return nil
}
