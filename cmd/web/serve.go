package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"lifeline/handlers"
	"lifeline/models"
	"lifeline/services/audit"
	"lifeline/services/auth"
	"lifeline/services/dbconn"
	"lifeline/services/deadlines"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/metrics"
	"lifeline/services/notify"
	"lifeline/services/notify/email"
	"lifeline/services/notify/slack"
	"lifeline/services/notify/teams"
	"lifeline/services/outbound"
	"lifeline/services/redact"
	"lifeline/services/sandbox"
	"lifeline/services/secrets"
	"lifeline/services/telemetry"
	"lifeline/services/workflows"
	"lifeline/views/i18n"
)

func serve(ctx context.Context, cfg Config, db *models.DB, stdout io.Writer) error {
	log := newLogger(stdout, cfg.LogLevel)
	reg := stepRegistry(cfg)
	sealer, err := keyRing(cfg, log)
	if err != nil {
		return err
	}
	db.Sealer = sealer
	wfs := &workflows.Service{DB: db, Steps: reg}
	as := &auth.Service{DB: db}

	// Metrics (LIFELINE_METRICS_TOKEN or LIFELINE_METRICS_ADDR) and traces
	// (OTEL_EXPORTER_OTLP_ENDPOINT): each off, and free, unless configured.
	var met *metrics.Metrics
	if cfg.MetricsOn() {
		met = metrics.New(db, log)
	}
	tracing, err := telemetry.Start(ctx, telemetry.Config{Endpoint: cfg.OTLPEndpoint, ServiceName: cfg.ServiceName})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(sctx); err != nil {
			log.Warn("traces not all exported", "err", err)
		}
	}()
	var observers []engine.Observer
	notifyCfg := notify.Config{Log: log}
	jcfg := jobs.Config{Workers: cfg.Workers}
	if met != nil {
		observers = append(observers, met)
		notifyCfg.Delivered = met.Delivered
		jcfg.Middleware = append(jcfg.Middleware, met.River())
	}
	if tracing != nil {
		observers = append(observers, tracing)
		jcfg.Middleware = append(jcfg.Middleware, tracing.River()...)
		log.Info("tracing on: spans are exported over OTLP", "endpoint", cfg.OTLPEndpoint)
	}
	var sandboxHandler http.Handler
	var hooks *sandbox.Hooks // the sandbox's Slack and Teams stand-ins (the demo only)
	var demoInfo *demoSeed
	if cfg.Demo {
		var err error
		if demoInfo, err = seedDemo(ctx, db, as, wfs, cfg.SandboxBase()); err != nil {
			return fmt.Errorf("demo data: %w", err)
		}
		sb := sandbox.New(sandbox.Options{Office: true})
		sandboxHandler, hooks = sb, sb.Hooks()
		jcfg.Periodic = append(jcfg.Periodic, jobs.DemoTraffic(demoInfo.OrgID, cfg.DemoTrafficEvery))
	}
	// Registered even without the demo: demo jobs left in the queue by an earlier demo run
	// must still find their worker.
	notifier, sink, stopNotify, err := notifications(ctx, cfg, db, notifyCfg, demoInfo)
	if err != nil {
		return err
	}
	defer stopNotify()
	// Named database connections: the admins' page and database_operation compensations.
	// They reach the networks of LIFELINE_DBCONN_ALLOW (not the demo's loopback address, nor
	// LIFELINE_OUTBOUND_ALLOW), never Lifeline's own database server or listen address.
	databases := dbconn.New(db, dbconn.Config{Allow: cfg.DBConnAllow, Own: cfg.OwnServers})
	// The queue first (it inserts jobs and needs nothing else), then the engine that queues
	// with it, then the runner whose workers call the engine.
	queue, err := jobs.NewQueue(db, jcfg, log)
	if err != nil {
		return err
	}
	eng := engine.New(db, reg, log, engine.Config{Queue: queue, LeaseGrace: cfg.LeaseGrace, RedactKeys: cfg.RedactKeys,
		Sealer: sealer, Notifier: notifier, Databases: databases, Observer: engine.Observers(observers...)})
	wfs.Checks = append(wfs.Checks, workflows.NotificationsCheck(notifier))
	// Dead letters made before failure groups get theirs (issue 22; idempotent, so every start
	// runs it and finds nothing once it is done).
	if n, err := eng.Groups().Backfill(ctx, 500); err != nil {
		return fmt.Errorf("backfill failure groups: %w", err)
	} else if n > 0 {
		log.Info("dead letters grouped", "items", n)
	}
	registerNotify, dispatch := jobs.NotifyJobs(notifier, 0)
	jcfg.Periodic = append(jcfg.Periodic, dispatch...)
	// Deadline reminders (issue 23): a periodic pass on the database clock, linking to the
	// dead letters of the obligation due by then.
	reminders := &deadlines.Service{DB: db, Notify: notifier, Link: func(obligation, dueOn string) string {
		return cfg.BaseURL + "/dlq/items?" + url.Values{"obligation": {obligation}, "dueBefore": {dueOn}}.Encode()
	}}
	registerDeadlines, remind := jobs.DeadlineJobs(reminders)
	jcfg.Periodic = append(jcfg.Periodic, remind)
	// Error analytics (issue 24): the daily rollups, recomputed by a periodic job.
	registerAnalytics, refreshAnalytics := jobs.AnalyticsJobs(db)
	jcfg.Periodic = append(jcfg.Periodic, refreshAnalytics)
	jcfg.Register = func(w *river.Workers) {
		river.AddWorker(w, &jobs.DemoTrafficWorker{DB: db, Engine: eng})
		registerNotify(w)
		registerDeadlines(w)
		registerAnalytics(w)
	}
	runner, err := jobs.New(db, eng, queue, jcfg, log)
	if err != nil {
		return err
	}
	var inbox handlers.DemoInbox
	if demoInfo != nil {
		inbox = demoInbox{sink: sink, hooks: hooks}
	}
	e := handlers.New(handlers.Deps{DB: db, Engine: eng, Workflows: wfs, Auth: as, Log: log, BaseURL: cfg.BaseURL,
		Sandbox: sandboxHandler, TrustedProxies: cfg.TrustedProxies, Ready: eng.Health().Ready, Bulk: runner.Bulk(), Databases: databases,
		Notify: notifier, DemoInbox: inbox, Metrics: appMetrics(cfg, met), Observe: tracing.Route()})
	srv := &http.Server{Addr: cfg.Addr, Handler: tracing.Handler(e), ReadHeaderTimeout: 10 * time.Second}

	errc := make(chan error, 2)
	var wg sync.WaitGroup
	listen := func(srv *http.Server) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("listen on %s: %w", srv.Addr, err)
			}
		}()
	}
	listen(srv)
	var metricsSrv *http.Server
	if met != nil && cfg.MetricsAddr != "" {
		metricsSrv = &http.Server{Addr: cfg.MetricsAddr, Handler: handlers.MetricsServer(met.Handler(), cfg.MetricsToken),
			ReadHeaderTimeout: 10 * time.Second}
		listen(metricsSrv)
		log.Info("metrics served", "addr", cfg.MetricsAddr, "path", "/metrics")
	}
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
		// The kickoff's work due soon is reminded of now: the periodic pass that runs at start
		// may have run before the kickoff started it, and the next is RemindEvery away. Each
		// reminder is recorded once, whichever pass finds it first.
		if _, err := reminders.Remind(ctx); err != nil {
			log.Warn("demo deadline reminders", "err", err)
		}
	}

	var failed error
	select {
	case failed = <-errc:
	case <-ctx.Done():
	}
	// Graceful stop within one ShutdownTimeout: no new requests or jobs are taken; running
	// requests and step attempts finish and commit; what still runs near the deadline is
	// cancelled and its attempt handed back to run again (same idempotency key).
	log.Info("shutting down: finishing or releasing in-flight attempts", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	httpDone := make(chan struct{})
	go func() {
		defer close(httpDone)
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("http shutdown", "err", err)
			_ = srv.Close()
		}
	}()
	if err := runner.Stop(sctx); err != nil {
		log.Warn("queue stop", "err", err)
	}
	<-httpDone
	if metricsSrv != nil {
		_ = metricsSrv.Shutdown(sctx)
	}
	wg.Wait()
	log.Info("stopped")
	return failed
}

// appMetrics is what the app's handlers measure and serve: nil without metrics; with them,
// /metrics on the app's address only when it has a token and no address of its own.
func appMetrics(cfg Config, met *metrics.Metrics) *handlers.Metrics {
	if met == nil {
		return nil
	}
	hm := &handlers.Metrics{Measure: met.HTTP(), Handler: met.Handler()}
	if cfg.MetricsAddr == "" {
		hm.Token = cfg.MetricsToken
	}
	return hm
}

// keyRing returns the sealer of secret values at rest: LIFELINE_ENCRYPTION_KEYS, or a key
// generated into the data folder on first start and reused after.
func keyRing(cfg Config, log *slog.Logger) (engine.Sealer, error) {
	var ring *secrets.Ring
	var err error
	if cfg.EncryptionKeys != "" {
		ring, err = secrets.ParseRing(cfg.EncryptionKeys)
	} else {
		path := filepath.Join(cfg.DataDir, "encryption.key")
		var created bool
		ring, created, err = secrets.LoadOrCreate(path)
		if created {
			log.Warn("generated an encryption key for secrets at rest; back it up with the database, or set LIFELINE_ENCRYPTION_KEYS", "path", path)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("encryption keys: %w", err)
	}
	return secrets.JSONSealer{Ring: ring, IsSecret: redact.New(cfg.RedactKeys).Match}, nil
}

// notifications builds the notification service with its providers: email by
// LIFELINE_SMTP_URL (in the demo without it, a local SMTP sink on DemoSMTPSink, or any free
// port when that one is taken, that keeps what it receives), Slack and Teams through the
// SSRF-guarded client. For the demo it sets the organization's defaults unless it has its
// own: email and in-app to the demo's admins and accountants, and Slack and Teams messages
// to the sandbox's stand-ins of their webhooks. stop closes the sink; sink is nil outside
// the demo.
func notifications(ctx context.Context, cfg Config, db *models.DB, base notify.Config, demo *demoSeed) (svc *notify.Service, sink *email.Sink, stop func(), err error) {
	stop = func() {}
	log := base.Log
	client := outbound.NewClient(outbound.Options{Allow: cfg.OutboundAllow, Timeout: 15 * time.Second})
	teamsSender := teams.New(client)
	teamsSender.SkipURLCheck = true // validated when saved (notify.ValidateWebhookURL)
	senders := map[notify.Channel]notify.Sender{notify.Slack: slack.New(client), notify.Teams: teamsSender}
	smtpCfg := cfg.SMTP
	if smtpCfg == nil && cfg.Demo {
		if sink, err = email.StartSink(DemoSMTPSink, nil); err != nil {
			sink, err = email.StartSink("127.0.0.1:0", nil) // another demo holds the usual port
		}
		if err != nil {
			log.Warn("demo SMTP sink not started: emails stay undelivered", "addr", DemoSMTPSink, "err", err)
			sink = nil
		} else {
			log.Info("demo SMTP sink: emails are received and kept in memory (see /demo/inbox)", "addr", sink.Addr())
			stop = func() { _ = sink.Close() }
			c := sink.Config("Lifeline Demo <lifeline@demo.lifeline.local>")
			smtpCfg = &c
		}
	}
	if smtpCfg != nil {
		senders[notify.Email] = email.New(*smtpCfg)
	}
	base.Texts, base.BaseURL, base.Allow, base.Senders = i18n.Catalog{}, cfg.BaseURL, cfg.OutboundAllow, senders
	svc = notify.New(db, base)
	if demo != nil {
		row, err := db.GetNotificationSettings(db.Conn(ctx), demo.OrgID)
		if err == nil && row == nil {
			hooks := cfg.SandboxBase() + "/hooks"
			_, err = svc.SaveOrgSettings(ctx, demo.OrgID, audit.System, []byte(`{"channels": ["email", "app", "slack", "teams"],
			  "recipients": ["role:admin", "role:accountant"], "slackWebhookUrl": "`+hooks+`/slack/T0DEMO/B0DEMO/lifeline",
			  "teamsWebhookUrl": "`+hooks+`/teams/lifeline"}`))
		}
		if err != nil {
			stop()
			return nil, nil, nil, fmt.Errorf("demo notification settings: %w", err)
		}
	}
	return svc, sink, stop, nil
}

// demoInbox is what the demo's SMTP sink and the sandbox's webhook stand-ins received.
type demoInbox struct {
	sink  *email.Sink
	hooks *sandbox.Hooks
}

func (d demoInbox) Emails() []email.Received {
	if d.sink == nil {
		return nil
	}
	return d.sink.Messages()
}

func (d demoInbox) Hooks() []sandbox.Hook { return d.hooks.Received() }
