package models_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/services/analytics"
)

// BenchmarkAnalytics measures the error analytics (issue 24) on PostgreSQL at 1,000,000 dead
// letters and 10,000,000 attempts in one organization over 90 days (seeded in SQL here: each
// execution has ten attempts over three steps and one dead letter, most of them closed), after
// one refresh of the daily rollups (reported as refresh-s: the first, of all the history;
// refresh-incr-s: the next, of the recent days only, as the periodic job runs): the report of the last 30 and 90
// days, of one workflow, and of one client (read live from the history). It reports the
// median and the 95th percentile in milliseconds (target: 300 ms). It needs
// TEST_DATABASE_URL and is not run by -short; BENCH_ANALYTICS_ITEMS sets another number of
// dead letters (attempts are ten times as many), BENCH_ANALYTICS_DB keeps the seeded database.
func BenchmarkAnalytics(b *testing.B) {
	if os.Getenv("TEST_DATABASE_URL") == "" || testing.Short() {
		b.Skip("PostgreSQL: TEST_DATABASE_URL not set")
	}
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_ANALYTICS_ITEMS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	db, seeded := benchDB(b, "BENCH_ANALYTICS_DB")
	var org string
	var wfs []string
	if seeded {
		org, wfs = seededOrg(b, db, "Biuro Analityczne")
	} else {
		org, wfs = seedAnalytics(b, db, n)
		if os.Getenv("BENCH_ANALYTICS_SEED_ONLY") != "" {
			b.Skip("seeded only (BENCH_ANALYTICS_SEED_ONLY)")
		}
	}
	t0 := time.Now()
	if _, err := db.RefreshAnalytics(ctx, org); err != nil {
		b.Fatal(err)
	}
	refresh := time.Since(t0).Seconds()
	// The periodic job's steady state: the next run rebuilds only the days since the day
	// before the last one.
	t0 = time.Now()
	if _, err := db.RefreshAnalytics(ctx, org); err != nil {
		b.Fatal(err)
	}
	incremental := time.Since(t0).Seconds()
	for _, t := range []string{"analytics_attempts_daily", "analytics_dlq_daily", "analytics_groups_daily", "analytics_ttr_daily",
		"analytics_ttr_steps_daily", "analytics_recovery_daily", "analytics_dlq_closures"} {
		if err := db.Conn(ctx).Exec("ANALYZE " + t).Error; err != nil {
			b.Fatal(err)
		}
	}
	svc := analytics.New(db)
	today, err := svc.Today(ctx)
	if err != nil {
		b.Fatal(err)
	}
	days := func(d int) analytics.Query { return analytics.Query{From: today.AddDate(0, 0, 1-d), To: today} }
	for _, c := range []struct {
		name string
		q    analytics.Query
	}{
		{"30-days", days(30)},
		{"90-days", days(90)},
		{"workflow", func() analytics.Query { q := days(30); q.WorkflowID = wfs[0]; return q }()},
		{"client", func() analytics.Query { q := days(90); q.Client = "NIP0000001234"; return q }()},
	} {
		b.Run(c.name, func(b *testing.B) {
			p50, p95 := percentiles(b, 3, 30, func(int) error { _, err := svc.Report(ctx, org, c.q); return err })
			b.ReportMetric(p50, "p50-ms")
			b.ReportMetric(p95, "p95-ms")
			b.ReportMetric(refresh, "refresh-s")
			b.ReportMetric(incremental, "refresh-incr-s")
		})
	}
}

// seedAnalytics writes n executions of four workflows over the last 90 days, each with ten
// finished attempts over three steps (failures of rotating error types, retried; the last
// attempt of a step succeeds, or goes to the DLQ) and one dead letter in one of 200 groups:
// 60 % resolved (half by a replay that succeeded), 10 % skipped, 10 % expired, 20 % pending,
// for 5,000 clients.
func seedAnalytics(b *testing.B, db *models.DB, n int) (string, []string) {
	ctx := context.Background()
	org := models.NewID()
	wfs := []string{models.NewID(), models.NewID(), models.NewID(), models.NewID()}
	exec := func(sql string, args ...any) {
		b.Helper()
		t0 := time.Now()
		if err := db.Conn(ctx).Exec(sql, args...).Error; err != nil {
			b.Fatalf("%v\n%s", err, sql)
		}
		b.Logf("seed: %.1f s", time.Since(t0).Seconds())
	}
	exec("INSERT INTO organizations (id, name) VALUES (?, 'Biuro Analityczne')", org)
	for i, wf := range wfs {
		exec(`INSERT INTO workflows (id, organization_id, name, version, definition, unknown_errors, webhook_token, webhook_secret)
VALUES (?, ?, ?, 1, ?, 'retry', ?, 's')`, wf, org, fmt.Sprintf("Proces %d", i+1),
			`{"steps": [{"id": "s0", "type": "http", "config": {"url": "https://api`+strconv.Itoa(i)+`.example/a"}}, {"id": "s1", "type": "transform"}, {"id": "s2", "type": "http", "config": {"url": "https://mail.example/send"}}]}`, models.NewID())
	}
	const types = "ARRAY['transient','timeout','rate_limit','external_service','validation','authorization','permanent','internal','unknown']"
	exec(`INSERT INTO dlq_groups (id, organization_id, fingerprint, version, workflow_id, step_id, error_type, title, first_seen_at, last_seen_at, created_at, updated_at)
SELECT md5('g' || g)::uuid, ?, 'fp' || g, 1, (ARRAY[?, ?, ?, ?]::uuid[])[1 + g % 4], 's' || (g % 3), (`+types+`)[1 + g % 9], 'Problem ' || g, now(), now(), now(), now()
FROM generate_series(0, 199) g`, org, wfs[0], wfs[1], wfs[2], wfs[3])
	exec(`INSERT INTO workflow_executions (id, organization_id, workflow_id, workflow_version, status, input, trigger_type, correlation_id, client,
  created_at, updated_at, started_at, finished_at)
SELECT md5('e' || i)::uuid, ?, (ARRAY[?, ?, ?, ?]::uuid[])[1 + i % 4], 1, CASE WHEN i % 10 < 3 THEN 'SUCCEEDED' ELSE 'DLQ_PENDING' END, '{}', 'api',
  md5('c' || i), 'NIP' || lpad((i % 5000)::text, 10, '0'), t, t, t, t + interval '10 minutes'
FROM generate_series(0, ? - 1) i, LATERAL (SELECT now() - interval '90 days' + (i::float8 / ?) * interval '90 days' AS t) x`,
		org, wfs[0], wfs[1], wfs[2], wfs[3], n, n)
	exec(`INSERT INTO workflow_execution_errors (id, organization_id, execution_id, step_id, error_type, error_code, error_message, status, created_at, updated_at)
SELECT md5('x' || i)::uuid, ?, md5('e' || i)::uuid, 's2', (`+types+`)[1 + i % 9], 'HTTP_' || (500 + i % 4), 'x', 'dead_letter', now(), now()
FROM generate_series(0, ? - 1) i`, org, n)
	exec(`INSERT INTO dead_letter_queue (id, organization_id, error_id, workflow_id, execution_id, original_input, step_states, failed_step_id, status,
  expires_at, created_at, updated_at, error_type, reason, group_id, client, resolved_at, replay_execution_id)
SELECT md5('d' || i)::uuid, ?, md5('x' || i)::uuid, e.workflow_id, e.id, '{}', '[]', 's2',
  CASE WHEN i % 10 < 6 THEN 'resolved' WHEN i % 10 = 6 THEN 'skipped' WHEN i % 10 = 7 THEN 'expired' ELSE 'pending' END,
  e.finished_at + interval '30 days', e.finished_at, e.finished_at + (i % 7200) * interval '1 second' + (i % 3) * interval '1 hour',
  (`+types+`)[1 + (i % 200) % 9], 'x', md5('g' || (i % 200))::uuid, e.client,
  CASE WHEN i % 10 < 7 THEN e.finished_at + (i % 7200) * interval '1 second' + (i % 3) * interval '1 hour' END,
  CASE WHEN i % 10 < 3 THEN e.id END
FROM generate_series(0, ? - 1) i JOIN workflow_executions e ON e.id = md5('e' || i)::uuid`, org, n)
	exec(`INSERT INTO step_executions (id, organization_id, execution_id, step_id, step_index, attempt, status, idempotency_key, input,
  error_type, error_code, scheduled_at, started_at, finished_at, created_at, updated_at)
SELECT gen_random_uuid(), ?, e.id, 's' || (j / 4), j / 4, j % 4 + 1,
  CASE WHEN j % 4 = 3 OR j >= 8 THEN (CASE WHEN e.status = 'DLQ_PENDING' AND j = 9 THEN 'DLQ' ELSE 'SUCCEEDED' END) ELSE 'RETRYING' END,
  md5(e.id::text || j), '{}',
  CASE WHEN (j % 4 = 3 OR j >= 8) AND NOT (e.status = 'DLQ_PENDING' AND j = 9) THEN NULL ELSE (`+types+`)[1 + (i + j) % 9] END,
  NULL, e.started_at, e.started_at, e.started_at + j * interval '1 minute', e.started_at, e.started_at
FROM generate_series(0, ? - 1) i JOIN workflow_executions e ON e.id = md5('e' || i)::uuid, generate_series(0, 9) j`, org, n)
	for _, t := range []string{"workflow_executions", "step_executions", "dead_letter_queue", "workflow_execution_errors", "audit_log"} {
		exec("ANALYZE " + t)
	}
	return org, wfs
}
