package models_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// BenchmarkDLQList measures the dead-letter list's queries on PostgreSQL at the size of issue
// 8: 1,000,000 dead letters and 10,000,000 attempts in one organization (and 1% of that in
// another), seeded in SQL, then VACUUMed and ANALYZEd; the first organization's dead letters
// are in 10,000 failure groups (issue 22) of skewed sizes. Each sub-benchmark runs its query many times and
// reports the median and the 95th percentile in milliseconds (targets: list and item 50 ms,
// search 200 ms). It runs under `make bench` only: it needs TEST_DATABASE_URL and is not
// run by -short. BENCH_DLQ_ITEMS sets another size (e.g. 100000 for a quick look).
func BenchmarkDLQList(b *testing.B) {
	if os.Getenv("TEST_DATABASE_URL") == "" || testing.Short() {
		b.Skip("PostgreSQL: TEST_DATABASE_URL not set; `make bench` starts a server")
	}
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_DLQ_ITEMS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	// Issue 22: the items in failure groups, 100 items a group on average (10,000 groups at
	// 1,000,000), a few big and many small (seedDLQ).
	groups := max(n/100, 1)
	db, seeded := benchDB(b, "BENCH_DLQ_DB")
	var org string
	var wfs []string
	if seeded {
		org, wfs = seededOrg(b, db, "Biuro Rachunkowe Duże")
	} else {
		var other string
		org, other = mkOrg(b, db, "Biuro Rachunkowe Duże"), mkOrg(b, db, "Biuro Obok")
		wfs = []string{mkWorkflow(b, db, org, "Import wyciągu"), mkWorkflow(b, db, org, "Deklaracja VAT"), mkWorkflow(b, db, org, "Płace")}
		otherWF := mkWorkflow(b, db, other, "Import wyciągu")
		start := time.Now()
		if err := seedDLQ(ctx, db, org, wfs, 0, n, groups); err != nil {
			b.Fatal(err)
		}
		if err := seedDLQ(ctx, db, other, []string{otherWF, otherWF, otherWF}, 1, max(n/100, 100), 0); err != nil {
			b.Fatal(err)
		}
		b.Logf("seeded %d dead letters in %d groups and %d attempts (+1%% in another organization) in %s", n, groups, 10*n,
			time.Since(start).Round(time.Second))
	}
	var big struct {
		ID    string
		Items int
	}
	if err := db.Conn(ctx).Raw("SELECT id, pending_count + processing_count + closed_count AS items FROM dlq_groups WHERE organization_id = ? ORDER BY items DESC LIMIT 1",
		org).Scan(&big).Error; err != nil || big.ID == "" {
		b.Fatal("no big group", err)
	}
	b.Logf("the biggest group has %d items", big.Items)

	// A cursor deep in the list (the page after the dead letter in the middle).
	var mid struct {
		ID        string
		CreatedAt time.Time
	}
	if err := db.Conn(ctx).Raw("SELECT id, created_at FROM dead_letter_queue WHERE organization_id = ? ORDER BY created_at DESC, id DESC OFFSET ? LIMIT 1",
		org, n/2).Scan(&mid).Error; err != nil {
		b.Fatal(err)
	}
	deep := base64.RawURLEncoding.EncodeToString([]byte(mid.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + mid.ID))
	var ids []string
	if err := db.Conn(ctx).Raw("SELECT id FROM dead_letter_queue WHERE organization_id = ? ORDER BY random() LIMIT 200", org).Scan(&ids).Error; err != nil {
		b.Fatal(err)
	}
	var execs []string
	if err := db.Conn(ctx).Raw("SELECT execution_id FROM dead_letter_queue WHERE id IN ?", ids).Scan(&execs).Error; err != nil {
		b.Fatal(err)
	}
	week := time.Now().UTC().AddDate(0, 0, -7).Truncate(24 * time.Hour)
	filters := []models.DLQFilter{
		{Status: models.DLQPending},
		{WorkflowID: wfs[1]},
		{ErrorType: "validation"},
		{StepID: "submit"},
		{From: week, To: week.AddDate(0, 0, 1)},
		{WorkflowID: wfs[0], Status: models.DLQPending, ErrorType: "transient"},
		{Status: models.DLQExpired, ErrorType: "timeout"},
	}
	// The seed is what the queries below look for.
	for _, c := range []struct {
		f        models.DLQFilter
		min, max int
	}{
		{models.DLQFilter{}, 50, 50},
		{models.DLQFilter{Q: clientName(n / 3)}, 1, 50},
		{models.DLQFilter{Q: "NIP"}, 50, 50},
		{models.DLQFilter{Q: "Zzyzx"}, 0, 0},
		{models.DLQFilter{Q: "saldo KONCOWE"}, 50, 50},
		{models.DLQFilter{Q: "Żółć"}, 0, 0},
		{models.DLQFilter{Cursor: deep}, 50, 50},
	} {
		rows, _, err := db.ListDLQ(ctx, org, c.f)
		if err != nil || len(rows) < c.min || len(rows) > c.max {
			b.Fatalf("%+v: %d rows (want %d-%d), %v", c.f, len(rows), c.min, c.max, err)
		}
	}
	// Each order's second page (issue 21): after the first page's last row.
	sortedNext := map[string]string{}
	for _, sort := range models.DLQSorts {
		rows, next, err := db.ListDLQ(ctx, org, models.DLQFilter{Sort: sort})
		if err != nil || len(rows) != 50 || next == "" {
			b.Fatalf("sort %s: %d rows, %v", sort, len(rows), err)
		}
		sortedNext[sort] = next
	}
	list := func(f models.DLQFilter) func(int) error {
		return func(int) error {
			_, _, err := db.ListDLQ(ctx, org, f)
			return err
		}
	}
	for _, c := range []struct {
		name string
		run  func(i int) error
	}{
		// What the list page asks: the counts, the first page, the workflows (filter choices and
		// step names) and the navigation's badge.
		{"list-page", func(i int) error {
			if _, err := db.DLQStatusCounts(ctx, org); err != nil {
				return err
			}
			if _, err := db.CountDLQPending(ctx, org); err != nil {
				return err
			}
			if _, err := db.Workflows(ctx, org); err != nil {
				return err
			}
			return list(models.DLQFilter{})(i)
		}},
		{"list-first-page", list(models.DLQFilter{})},
		{"list-filtered", func(i int) error { return list(filters[i%len(filters)])(i) }},
		{"list-deep-cursor", list(models.DLQFilter{Cursor: deep})},
		{"list-filtered-cursor", list(models.DLQFilter{Status: models.DLQPending, Cursor: deep})},
		// The orders of issue 21 (age, expiry, retries, subject, each way): the first page, the
		// next one, and the first page of the pending ones.
		{"list-sorted", func(i int) error { return list(models.DLQFilter{Sort: models.DLQSorts[i%len(models.DLQSorts)]})(i) }},
		{"list-sorted-cursor", func(i int) error {
			sort := models.DLQSorts[i%len(models.DLQSorts)]
			return list(models.DLQFilter{Sort: sort, Cursor: sortedNext[sort]})(i)
		}},
		{"list-sorted-filtered", func(i int) error {
			return list(models.DLQFilter{Sort: models.DLQSorts[i%len(models.DLQSorts)], Status: models.DLQPending})(i)
		}},
		{"status-counts", func(int) error { _, err := db.DLQStatusCounts(ctx, org); return err }},
		{"pending-badge", func(int) error { _, err := db.CountDLQPending(ctx, org); return err }},
		{"item", func(i int) error { _, err := db.GetDLQ(ctx, org, ids[i%len(ids)]); return err }},
		{"item-attempts", func(i int) error { _, err := db.Attempts(ctx, org, execs[i%len(execs)]); return err }},
		{"search-client", func(i int) error {
			// One client's dead letters: about ten of a million.
			return list(models.DLQFilter{Q: clientName(rand.IntN(n))})(i)
		}},
		{"search-common-word", list(models.DLQFilter{Q: "NIP"})},
		{"search-no-match", list(models.DLQFilter{Q: "Zzyzx"})},
		{"search-with-filter", list(models.DLQFilter{Q: "MT940", Status: models.DLQPending})},
		// A common word in few rows of the other filters: about 200 of a million.
		{"search-rare-combination", list(models.DLQFilter{Q: "NIP", Status: models.DLQExpired, ErrorType: "timeout"})},
		{"search-two-letters", list(models.DLQFilter{Q: "zł"})},
		// Polish letters, typed or not (issue 21): many rows, few, none; and the same words
		// without their diacritics, in capitals.
		{"search-polish-many", list(models.DLQFilter{Q: "Saldo końcowe"})},
		{"search-polish-few", func(i int) error {
			return list(models.DLQFilter{Q: "Woźniak " + fmt.Sprint(rand.IntN(200)) + " ·"})(i)
		}},
		{"search-polish-none", list(models.DLQFilter{Q: "Źdźbło"})},
		{"search-polish-none-2", list(models.DLQFilter{Q: "Żółć"})},
		{"search-folded", list(models.DLQFilter{Q: "KONCOWE"})},
		// The Problems page (issue 22): the groups with most to handle, their counts,
		// subjects and last day's arrivals per hour, what their items say of deadlines and
		// money (issue 23's order), and their newest items; and the groups list's first page.
		{"groups-problems", func(int) error {
			gs, err := db.ProblemGroups(ctx, org, 0)
			if err != nil || len(gs) == 0 {
				return cmpOr(err, "no problem groups")
			}
			ids := make([]string, len(gs))
			for i, g := range gs {
				ids[i] = g.ID
			}
			if _, err := db.GroupsDue(ctx, org, ids, time.Now().AddDate(0, 0, 5).Format(time.DateOnly)); err != nil {
				return err
			}
			_, err = db.GroupSamples(ctx, org, ids, 5)
			return err
		}},
		{"groups-list", func(int) error { _, _, err := db.ListGroups(ctx, org, models.GroupFilter{}); return err }},
		// Its parts: the ranking with the views of the 100 groups; one group's view (its page).
		{"groups-ranked", func(int) error { _, err := db.ProblemGroups(ctx, org, 0); return err }},
		{"group-one", func(i int) error {
			gs, _, err := db.ListGroups(ctx, org, models.GroupFilter{Limit: 1})
			if err != nil || len(gs) == 0 {
				return cmpOr(err, "no group")
			}
			_, err = db.GetGroup(ctx, org, gs[0].ID)
			return err
		}},
		// The biggest group's page: the group, and the first page of its items.
		{"group-big", func(i int) error {
			if _, err := db.GetGroup(ctx, org, big.ID); err != nil {
				return err
			}
			_, _, err := db.ListDLQ(ctx, org, models.DLQFilter{GroupID: big.ID})
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			p50, p95 := percentiles(b, 5, 200, c.run)
			b.ReportMetric(p50, "ms-p50")
			b.ReportMetric(p95, "ms-p95")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchDB is a benchmark's PostgreSQL database: a new one (seeded false), or, when the
// environment variable env names a database a run kept (LIFELINE_TEST_KEEP_DB=1 logs its
// name under -v), that one, migrated to this code's schema, so that a query can be measured
// again without seeding a million rows (seeded true).
func benchDB(b *testing.B, env string) (*models.DB, bool) {
	name := os.Getenv(env)
	if name == "" {
		return modeltest.New(b, models.Postgres), false
	}
	u, err := url.Parse(os.Getenv("TEST_DATABASE_URL"))
	if err != nil {
		b.Fatal(err)
	}
	u.Path = "/" + name
	ctx := context.Background()
	db, err := models.Open(ctx, u.String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	if err := db.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	for _, t := range []string{"workflow_executions", "dead_letter_queue", "dlq_groups"} {
		if err := db.Conn(ctx).Exec("ANALYZE " + t).Error; err != nil {
			b.Fatal(err)
		}
	}
	return db, true
}

// seededOrg is the id of a kept database's organization named name, and its workflows'
// ids in the order they were made.
func seededOrg(b *testing.B, db *models.DB, name string) (string, []string) {
	ctx := context.Background()
	var org string
	if err := db.Conn(ctx).Raw("SELECT id FROM organizations WHERE name = ?", name).Scan(&org).Error; err != nil || org == "" {
		b.Fatalf("no organization %q in the kept database: %v", name, err)
	}
	var wfs []string
	if err := db.Conn(ctx).Raw("SELECT id FROM workflows WHERE organization_id = ? ORDER BY created_at, id", org).Scan(&wfs).Error; err != nil {
		b.Fatal(err)
	}
	return org, wfs
}

// percentiles runs run warm times (the cache and the connections), then runs times, and
// returns the median and the 95th percentile of those in milliseconds, whatever -benchtime
// says (`make bench` runs 1x). The i run gets is its number.
func percentiles(b *testing.B, warm, runs int, run func(i int) error) (p50, p95 float64) {
	for i := range warm {
		if err := run(i); err != nil {
			b.Fatal(err)
		}
	}
	times := make([]time.Duration, 0, runs)
	b.ResetTimer()
	for i := range runs {
		t0 := time.Now()
		if err := run(i); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(times)
	ms := func(q float64) float64 { return float64(times[int(q*float64(len(times)-1))].Microseconds()) / 1000 }
	return ms(0.5), ms(0.95)
}

func cmpOr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

// clientName is the client of the i-th seeded dead letter, as its subject starts.
func clientName(i int) string {
	return fmt.Sprintf("%s %s %d ·", benchPrefixes[i%len(benchPrefixes)], benchSurnames[(i/len(benchPrefixes))%len(benchSurnames)],
		(i/(len(benchPrefixes)*len(benchSurnames)))%200)
}

var (
	benchPrefixes = []string{"Piekarnia", "Apteka", "Kancelaria", "Hurtownia", "Warsztat", "Biuro", "Sklep", "Drukarnia", "Przychodnia",
		"Transport", "Kwiaciarnia", "Studio"}
	benchSurnames = []string{"Kowalski", "Nowak", "Wiśniewski", "Wójcik", "Kowalczyk", "Kamiński", "Lewandowski", "Zieliński", "Szymański",
		"Woźniak", "Dąbrowski", "Kozłowski", "Jankowski", "Mazur", "Kwiatkowski", "Krawczyk", "Piotrowski", "Grabowski", "Nowakowski",
		"Pawłowski", "Michalski", "Nowicki", "Adamczyk", "Dudek", "Zając", "Wieczorek", "Jabłoński", "Król", "Majewski", "Olszewski",
		"Jaworski", "Wróbel", "Malinowski", "Pawlak", "Witkowski", "Walczak", "Stępień", "Górski", "Rutkowski", "Michalak"}
)

// seedDLQ inserts n dead letters of org over the last 30 days (oldest first, ids rising
// with time like UUIDv7), each with its execution, its error record and 10 attempts, in a
// few INSERT … SELECT generate_series statements. The list's indexes are dropped during the
// load and made again after it from their own definitions (faster than growing them row by
// row, and the same indexes); foreign keys are not checked (session_replication_role), as
// every row is made consistent here. space keeps one organization's ids apart from another's.
// With groups > 0, the dead letters are in that many failure groups, each item's group
// chosen at insert (a group per item later would leave a dead version of every row, and
// the list's counts could no longer read their index alone): group floor(groups * u^4) for
// u spread over [0, 1), so the first groups are big (the biggest a tenth of the items) and
// most are small (about a quarter of the average); the groups' counts, arrivals and times
// are then set from their items.
func seedDLQ(ctx context.Context, db *models.DB, org string, wfs []string, space, n, groups int) error {
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	exec := func(sql string, args ...any) error {
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			return fmt.Errorf("%.80s…: %w", sql, err)
		}
		return nil
	}
	for _, s := range []string{"SET maintenance_work_mem = '1GB'", "SET work_mem = '256MB'", "SET synchronous_commit = off"} {
		if err := exec(s); err != nil {
			return err
		}
	}
	_ = exec("SET session_replication_role = replica") // superusers only; otherwise keys are checked
	tables := []string{"workflow_executions", "workflow_execution_errors", "dead_letter_queue", "step_executions"}
	// Indexes that are not constraints: dropped now, made again after the load.
	rows, err := conn.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes i WHERE tablename = ANY($1)
	    AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`, tables)
	if err != nil {
		return err
	}
	var names, defs []string
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			return err
		}
		names, defs = append(names, name), append(defs, def)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, name := range names {
		if err := exec("DROP INDEX " + name); err != nil {
			return err
		}
	}
	// id(kind, i): a uuid that rises with i; kind and space keep tables and organizations apart.
	id := func(kind int, expr string) string {
		return fmt.Sprintf(`(lpad(to_hex(%d), 8, '0') || '-0000-7000-8000-' || lpad(to_hex(%s), 12, '0'))::uuid`, space*16+kind, expr)
	}
	// Times: from 30 days ago to now, rising with i.
	at := `now() - interval '30 days' + (i * (interval '30 days' / $2::int))`
	steps := `(CASE i % 3 WHEN 0 THEN ARRAY['import_statement','match_invoices','post_ledger','notify_client']
	  WHEN 1 THEN ARRAY['prepare','validate','submit','confirm'] ELSE ARRAY['export','send','archive','report'] END)`
	failed := steps + `[1 + (i / 3) % 4]`
	subject := `(ARRAY[` + quoted(benchPrefixes) + `])[1 + i % 12] || ' ' || (ARRAY[` + quoted(benchSurnames) + `])[1 + (i / 12) % 40]
	  || ' ' || ((i / 480) % 200) || ' · 2026-' || lpad((1 + (i / 1000) % 12)::text, 2, '0')`
	reason := `CASE i % 16
	  WHEN 0 THEN 'clientNip: NIP must have 10 digits'
	  WHEN 1 THEN 'service unavailable (503 Service Unavailable)'
	  WHEN 2 THEN 'rate limited (429 Too Many Requests)'
	  WHEN 3 THEN 'not found (404 Not Found)'
	  WHEN 4 THEN 'timeout after 15000 ms'
	  WHEN 5 THEN 'Certyfikat kwalifikowany wygasł ' || (i % 28 + 1) || '.10.2026'
	  WHEN 6 THEN 'Brak odpowiedzi z api.mbank.pl'
	  WHEN 7 THEN 'Niezgodna suma kontrolna pliku MT940 (linia ' || (i % 900) || ')'
	  WHEN 8 THEN 'Konto 201-' || lpad((i % 9999)::text, 4, '0') || ' nie istnieje w planie kont'
	  WHEN 9 THEN 'Faktura FV/' || (i % 5000) || '/2026 nie ma pary w wyciągu'
	  WHEN 10 THEN 'period: must be YYYY-MM'
	  WHEN 11 THEN 'Odrzucono przez e-Deklaracje: kod 408 (błąd podpisu)'
	  WHEN 12 THEN 'connection reset by peer'
	  WHEN 13 THEN 'amount: must be a number'
	  WHEN 14 THEN 'Saldo końcowe nie zgadza się z sumą operacji o ' || (i % 1000) || ',00 zł'
	  ELSE 'internal: LEASE_EXHAUSTED' END`
	// search_text as models.Fold makes it (lower case, Polish letters plain; the seed's text
	// has no other diacritics); the input's one value is "526".
	fold := func(x string) string {
		return `translate(lower(` + x + `), 'ąćęłńóśźżĄĆĘŁŃÓŚŹŻ', 'acelnoszzacelnoszz')`
	}
	errType := `(ARRAY['transient','permanent','timeout','validation','authorization','rate_limit','external_service','internal','unknown'])[1 + i % 9]`
	status := `CASE WHEN i % 100 < 70 THEN 'pending' WHEN i % 100 < 75 THEN 'processing' WHEN i % 100 < 90 THEN 'resolved'
	  WHEN i % 100 < 97 THEN 'skipped' ELSE 'expired' END`
	wf := `(ARRAY[$3::uuid, $4::uuid, $5::uuid])[1 + i % 3]`
	// u: i spread over [0, 1) by a multiplicative hash.
	group := `CASE WHEN $6::int > 0 THEN ` + id(5, `floor($6::int * power(((i::bigint * 2654435761) % 4294967296) / 4294967296.0, 4))::bigint`) + ` END`
	withWF := []any{org, n, wfs[0], wfs[1], wfs[2], groups}
	if groups > 0 {
		if err := exec(`INSERT INTO dlq_groups (id, organization_id, fingerprint, version, workflow_id, step_id, error_type, title, search_text,
		    state, arrivals, first_seen_at, last_seen_at, created_at, updated_at)
		  SELECT `+id(5, "g")+`, $1::uuid, 'bench-' || g, 1, $2::uuid, 'submit', 'validation', 'NIP … ma … cyfr ' || g, 'nip ma cyfr ' || g,
		    'open', 0, now(), now(), now(), now() FROM generate_series(0, $3::int - 1) g`, org, wfs[0], groups); err != nil {
			return err
		}
	}
	for _, sql := range []string{
		`INSERT INTO workflow_executions (id, organization_id, workflow_id, workflow_version, status, input, trigger_type, correlation_id,
		   current_step_id, subject, search_text, started_at, finished_at, created_at, updated_at)
		 SELECT ` + id(1, "i") + `, $1::uuid, ` + wf + `, 1, 'DLQ_PENDING', '{"nip": "526"}', 'api', 'c' || i, ` + failed + `, ` + subject + `,
		   ` + fold(subject+` || chr(10) || '526'`) + `, t, t, t, t FROM generate_series(1, $2::int) i, LATERAL (SELECT ` + at + ` AS t) x`,
		`INSERT INTO workflow_execution_errors (id, organization_id, execution_id, step_id, error_type, error_code, error_message, stack_trace,
		   retry_count, max_retries, status, created_at, updated_at)
		 SELECT ` + id(2, "i") + `, $1::uuid, ` + id(1, "i") + `, ` + failed + `, ` + errType + `, 'E' || (i % 50), ` + reason + `,
		   'goroutine 1 [running]:', i % 4, 3, 'dead_letter', t, t
		 FROM generate_series(1, $2::int) i, LATERAL (SELECT ` + at + ` AS t) x`,
		`INSERT INTO dead_letter_queue (id, organization_id, error_id, workflow_id, execution_id, original_input, step_states, failed_step_id,
		   status, expires_at, subject, error_type, reason, retry_count, search_text, group_id, created_at, updated_at)
		 SELECT ` + id(3, "i") + `, $1::uuid, ` + id(2, "i") + `, ` + wf + `, ` + id(1, "i") + `, '{"nip": "526"}', '[]', ` + failed + `,
		   ` + status + `, t + interval '30 days', ` + subject + `, ` + errType + `, ` + reason + `, i % 4,
		   ` + fold(subject+` || chr(10) || '526' || chr(10) || `+reason) + `, ` + group + `, t, t
		 FROM generate_series(1, $2::int) i, LATERAL (SELECT ` + at + ` AS t) x`,
		// Ten attempts an execution: three of each of the first three steps, one of the last.
		`INSERT INTO step_executions (id, organization_id, execution_id, step_id, step_index, attempt, status, idempotency_key, output,
		   error_type, error_message, scheduled_at, started_at, finished_at, created_at, updated_at)
		 SELECT ` + id(4, "j") + `, $1::uuid, ` + id(1, "i") + `, ` + steps + `[1 + s], s, k - 3 * s + 1,
		   CASE WHEN k = 9 THEN 'DLQ' WHEN k % 3 = 2 THEN 'SUCCEEDED' ELSE 'RETRYING' END, 'wf:' || i || ':step:' || s || ':attempt:' || (k - 3 * s + 1),
		   CASE WHEN k % 3 = 2 THEN '{"ok": true}'::jsonb END,
		   CASE WHEN k % 3 <> 2 THEN 'transient' END, CASE WHEN k % 3 <> 2 THEN 'service unavailable (503 Service Unavailable)' END,
		   t, t, t, t, t
		 FROM generate_series(0, $2::int * 10 - 1) j,
		   LATERAL (SELECT j / 10 + 1 AS i, j % 10 AS k) ik, LATERAL (SELECT least(k / 3, 3) AS s) st,
		   LATERAL (SELECT ` + at + ` AS t) x`,
	} {
		args := withWF
		switch {
		case !strings.Contains(sql, "$3"):
			args = withWF[:2]
		case !strings.Contains(sql, "$6"):
			args = withWF[:5]
		}
		if err := exec(sql, args...); err != nil {
			return err
		}
	}
	for _, def := range defs {
		if err := exec(def); err != nil {
			return err
		}
	}
	if err := exec("RESET session_replication_role"); err != nil {
		return err
	}
	if groups > 0 {
		// The counts the engine's transitions keep (migration 00027's backfill), with each
		// group's arrivals and times.
		if err := exec(`UPDATE dlq_groups g SET pending_count = c.pending, processing_count = c.processing, closed_count = c.closed,
		    open_count = c.pending + c.processing, arrivals = c.n, first_seen_at = c.first, last_seen_at = c.last
		  FROM (SELECT group_id, count(*) AS n, min(created_at) AS first, max(created_at) AS last,
		      count(*) FILTER (WHERE status = 'pending') AS pending, count(*) FILTER (WHERE status = 'processing') AS processing,
		      count(*) FILTER (WHERE status NOT IN ('pending', 'processing')) AS closed
		    FROM dead_letter_queue WHERE organization_id = $1::uuid AND group_id IS NOT NULL GROUP BY group_id) c
		  WHERE c.group_id = g.id`, org); err != nil {
			return err
		}
		tables = append(tables, "dlq_groups")
	}
	// As autovacuum leaves a table that is no longer written: statistics and the visibility map.
	for _, t := range tables {
		if err := exec("VACUUM (ANALYZE) " + t); err != nil {
			return err
		}
	}
	return nil
}

// quoted is a list of SQL string literals (the names are plain letters).
func quoted(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += "'" + s + "'"
	}
	return out
}
