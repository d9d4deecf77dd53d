package engine

import (
	"math/big"
	"reflect"
	"sort"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// dueFailure makes a dead-lettered execution about a and its dead letter (as deadLetter
// does: joined to its group), the dead letter about what the execution is.
func (f *fixture) dueFailure(a models.About) *models.DeadLetter {
	f.t.Helper()
	ex := &models.Execution{ID: models.NewID(), OrganizationID: f.org, WorkflowID: f.wf, WorkflowVersion: 1, Status: models.ExecDLQPending,
		Input: models.JSON(`{}`), TriggerType: "api", CorrelationID: models.NewID(), About: a, CreatedAt: f.at, UpdatedAt: f.at}
	rec := &models.ExecutionError{ID: models.NewID(), OrganizationID: f.org, ExecutionID: ex.ID, StepID: "send", ErrorType: "validation",
		ErrorMessage: "NIP", Status: models.ErrDeadLetter, CreatedAt: f.at, UpdatedAt: f.at}
	f.create(ex, rec)
	dl := &models.DeadLetter{ID: models.NewID(), OrganizationID: f.org, ErrorID: rec.ID, WorkflowID: f.wf, ExecutionID: ex.ID,
		OriginalInput: models.JSON(`{}`), StepStates: models.JSON(`[]`), FailedStepID: "send", Status: models.DLQPending, ExpiresAt: f.at,
		ErrorType: "validation", Reason: "NIP", About: a, CreatedAt: f.at, UpdatedAt: f.at}
	if _, err := f.in(func(st stateTx) (bool, error) {
		if _, err := st.groups().JoinGroup(dl, "HTTP_400"); err != nil {
			return false, err
		}
		return true, st.tx.Create(dl).Error
	}); err != nil {
		f.t.Fatal(err)
	}
	return dl
}

// about is what an item is about (client "" for none, currency "" for none, amount < 0 for
// none).
func about(client, obligation, period, due string, amount int64, currency string) models.About {
	p := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	a := models.About{Client: p(client), Obligation: p(obligation), Period: p(period), DueOn: p(due), Currency: p(currency)}
	if amount >= 0 {
		a.AmountMinor = &amount
	}
	return a
}

// openWorkAgrees fails t unless the counters of open work read what a recount of the items
// reads, figure by figure (OpenWorkDrift) and through every reader of them (the queries
// they replaced, recounting: oracle*); then it folds the deltas and checks again.
func openWorkAgrees(t *testing.T, f *fixture, when string) {
	t.Helper()
	for _, folded := range []bool{false, true} {
		if folded {
			if err := f.db.FoldOpenWork(f.ctx, f.org); err != nil {
				t.Fatalf("%s: fold: %v", when, err)
			}
		}
		drift, err := f.db.OpenWorkDrift(f.ctx, f.org)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range drift {
			t.Errorf("%s (folded %v): drift %s", when, folded, d)
		}
		for _, c := range []struct {
			name      string
			got, want func() (any, error)
		}{
			{"DueBy", func() (any, error) { return f.db.DueBy(f.ctx, f.org, "2026-12-31", 12) }, func() (any, error) { return oracleDueBy(f, "2026-12-31", 12) }},
			{"StuckByClient", func() (any, error) { return f.db.StuckByClient(f.ctx, f.org, 8) }, func() (any, error) { return oracleStuckByClient(f, 8) }},
			{"AtRiskDeadLetters", func() (any, error) { return f.db.AtRiskDeadLetters(f.ctx, f.org, "2026-11-30") },
				func() (any, error) { return oracleAtRisk(f, "2026-11-30") }},
			{"OpenDeadlines", func() (any, error) { return f.db.OpenDeadlines(f.ctx, f.org, "2026-10-01", "2026-12-31") },
				func() (any, error) { return oracleOpenDeadlines(f, "2026-10-01", "2026-12-31") }},
		} {
			got, err := c.got()
			if err != nil {
				t.Fatalf("%s: %s: %v", when, c.name, err)
			}
			want, err := c.want()
			if err != nil {
				t.Fatalf("%s: recount of %s: %v", when, c.name, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s (folded %v): %s reads\n%+v\nrecounted\n%+v", when, folded, c.name, got, want)
			}
		}
	}
	var deltas int64
	for _, table := range []string{"open_work", "open_work_clients", "open_client_money"} {
		var n int64
		if err := f.db.Conn(f.ctx).Table(table).Where("organization_id = ? AND folded <> 1", f.org).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		deltas += n
	}
	if deltas != 0 {
		t.Errorf("%s: %d deltas left after the fold", when, deltas)
	}
}

// TestOpenWorkCountersKept: the counters of open work (migration 00042) equal a recount of
// the items after every change that moves an execution or a dead letter in or out of open
// work or changes what it is about: arrival, a replay's claim and its failure (back to
// pending, moved to another period by an edited input), a replay's success, skip, resolve
// by hand, expiry, reopen, rollback, split, an execution replayed with an edited input and
// one skipped to its end; each before and after the fold; on both databases. A broken
// counter is found and repaired.
func TestOpenWorkCountersKept(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		f := newFixture(t, db)
		openWorkAgrees(t, f, "nothing")
		var items []*models.DeadLetter
		for i, a := range []models.About{
			about("NIP0000000001", "JPK_V7M", "2026-09", "2026-10-26", 123_45, "PLN"),
			about("NIP0000000001", "JPK_V7M", "2026-09", "2026-10-26", 1_000_00, "PLN"),
			about("NIP0000000002", "JPK_V7M", "2026-09", "2026-10-26", 99, "EUR"),
			about("NIP0000000002", "JPK_V7M", "2026-10", "2026-11-25", 5_000_00, "PLN"),
			about("NIP0000000003", "ZUS", "2026-10", "2026-11-20", -1, ""),
			about("", "ZUS", "2026-10", "2026-11-20", 77, ""),
			about("NIP0000000003", "CIT_ADVANCE", "", "2026-11-20", 1, "PLN"),
			about("NIP0000000004", "", "", "", 42_00, "PLN"), // no due date: money by client only
			about("NIP0000000001", "JPK_V7M", "2026-11", "2026-12-28", 9_999_999_99, "PLN"),
		} {
			items = append(items, f.dueFailure(a))
			if i == 3 {
				openWorkAgrees(t, f, "arrivals")
			}
		}
		// Work not failed: running, and succeeded (not counted).
		run := f.execution(models.ExecRunning, nil)
		done := f.execution(models.ExecSucceeded, nil)
		for _, ex := range []*models.Execution{run, done} {
			if err := db.Conn(f.ctx).Model(ex).Updates(about("NIP0000000005", "JPK_V7M", "2026-09", "2026-10-26", 10, "PLN").Columns()).Error; err != nil {
				t.Fatal(err)
			}
		}
		openWorkAgrees(t, f, "arrivals")

		claim := func(dl *models.DeadLetter, status string) {
			t.Helper()
			if w, err := f.in(func(st stateTx) (bool, error) { return won(st.deadLetters().ClaimDeadLetter(dl, status, nil)) }); err != nil || !w {
				t.Fatalf("claim %s: won %v, %v", status, w, err)
			}
		}
		// A replay claimed (pending → processing) and failing again, its edited input moved
		// to another period and client.
		claim(items[0], models.DLQProcessing)
		openWorkAgrees(t, f, "claimed")
		next := *items[0]
		next.About = about("NIP0000000006", "JPK_V7M", "2026-10", "2026-11-25", 321, "PLN")
		if w, err := f.in(func(st stateTx) (bool, error) { return st.deadLetters().ReturnDeadLetter(items[0].ID, &next) }); err != nil || !w {
			t.Fatalf("return: %v %v", w, err)
		}
		openWorkAgrees(t, f, "returned to pending in another period")
		// A replay that succeeds: processing → resolved; its execution was replayed with an
		// edited input (another client) and ends succeeded.
		claim(items[1], models.DLQProcessing)
		ex1 := &models.Execution{ID: items[1].ExecutionID, OrganizationID: f.org}
		upd := about("NIP0000000007", "JPK_V7M", "2026-09", "2026-10-26", 555, "PLN").Columns()
		upd["status"] = models.ExecRunning
		if _, err := f.in(func(st stateTx) (bool, error) { return won(st.StartReplay(ex1, upd)) }); err != nil {
			t.Fatal(err)
		}
		if _, err := f.in(func(st stateTx) (bool, error) {
			return true, st.deadLetters().RecordAbout(items[1], about("NIP0000000007", "JPK_V7M", "2026-09", "2026-10-26", 555, "PLN"))
		}); err != nil {
			t.Fatal(err)
		}
		openWorkAgrees(t, f, "replaying with an edited input")
		replay := &models.Execution{ID: items[1].ExecutionID, OrganizationID: f.org, Status: models.ExecSucceeded, DeadLetterID: &items[1].ID}
		if err := db.Conn(f.ctx).Model(&models.Execution{}).Where("id = ?", replay.ID).Update("status", models.ExecSucceeded).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := f.in(func(st stateTx) (bool, error) { return true, st.deadLetters().ResolveReplayed(replay) }); err != nil {
			t.Fatal(err)
		}
		openWorkAgrees(t, f, "replayed")
		// Skipped by hand, its execution skipped to its end (succeeded); resolved by hand,
		// its execution failed.
		claim(items[2], models.DLQSkipped)
		if _, err := f.in(func(st stateTx) (bool, error) {
			return won(st.StartReplay(&models.Execution{ID: items[2].ExecutionID, OrganizationID: f.org}, map[string]any{"status": models.ExecSucceeded}))
		}); err != nil {
			t.Fatal(err)
		}
		claim(items[3], models.DLQResolved)
		if w, err := f.in(func(st stateTx) (bool, error) { return st.deadLetters().FailDeadLettered(items[3].ExecutionID) }); err != nil || !w {
			t.Fatalf("fail dead-lettered: %v %v", w, err)
		}
		openWorkAgrees(t, f, "skipped and resolved")
		// Reopened: pending again, its execution dead-lettered again.
		if err := db.Conn(f.ctx).Model(&models.DeadLetter{}).Where("id = ?", items[3].ID).Update("expires_at", time.Now().Add(time.Hour)).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Conn(f.ctx).Model(&models.ExecutionError{}).Where("id = ?", items[3].ErrorID).Update("resolution_type", "manual").Error; err != nil {
			t.Fatal(err)
		}
		if _, err := f.in(func(st stateTx) (bool, error) {
			if err := st.deadLetters().ReopenDeadLetter(items[3]); err != nil {
				return false, err
			}
			return st.deadLetters().ReturnDeadLettered(items[3].ExecutionID)
		}); err != nil {
			t.Fatal(err)
		}
		openWorkAgrees(t, f, "reopened")
		// Expired by retention; a rollback of a dead-lettered execution (its status stays);
		// a split (the group only).
		if _, err := f.in(func(st stateTx) (bool, error) {
			ids, err := st.deadLetters().ExpireDeadLetters([]string{items[4].ID, items[5].ID})
			return len(ids) == 2, err
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.in(func(st stateTx) (bool, error) {
			ex := &models.Execution{ID: items[6].ExecutionID, OrganizationID: f.org}
			if err := st.StartRollback(ex); err != nil {
				return false, err
			}
			return st.FinishRollback(ex.ID, models.RolledBack)
		}); err != nil {
			t.Fatal(err)
		}
		claim(items[8], models.DLQProcessing)
		if _, err := f.in(func(st stateTx) (bool, error) { _, err := st.groups().SplitOut(items[8]); return err == nil, err }); err != nil {
			t.Fatal(err)
		}
		// A full retry replaces an execution: it ends FAILED (still not done).
		if _, err := f.in(func(st stateTx) (bool, error) {
			return won(st.EndReplaced(&models.Execution{ID: items[7].ExecutionID, OrganizationID: f.org}))
		}); err != nil {
			t.Fatal(err)
		}
		// The running execution succeeds.
		if err := db.Conn(f.ctx).Model(run).Update("status", models.ExecSucceeded).Error; err != nil {
			t.Fatal(err)
		}
		openWorkAgrees(t, f, "expired, rolled back, split, replaced, succeeded")

		// The reconciler folds the deltas.
		if err := db.Conn(f.ctx).Model(&models.DeadLetter{}).Where("id = ?", items[8].ID).Update("client", "NIP0000000009").Error; err != nil {
			t.Fatal(err)
		}
		if _, err := f.e.Reconcile(f.ctx); err != nil {
			t.Fatal(err)
		}
		var deltas int64
		if err := db.Conn(f.ctx).Table("open_work_clients").Where("organization_id = ? AND folded = 0", f.org).Count(&deltas).Error; err != nil || deltas != 0 {
			t.Fatalf("after the reconciler: %d deltas, %v", deltas, err)
		}
		// A counter broken behind the triggers' back is found, and repaired by retention.
		if err := db.Conn(f.ctx).Exec("INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, items, folded) "+
			"VALUES (?, 'd', 'JPK_V7M', '2026-10', '2026-11-25', 'PLN', 3, 1)", f.org).Error; err != nil {
			t.Fatal(err)
		}
		if drift, err := db.OpenWorkDrift(f.ctx, f.org); err != nil || len(drift) != 1 {
			t.Fatalf("a broken counter: drift %q, %v", drift, err)
		}
		if res, err := f.e.Retain(f.ctx); err != nil || res.RepairedOpenWork != 1 {
			t.Fatalf("retention repaired %+v, %v", res, err)
		}
		openWorkAgrees(t, f, "repaired")
	})
}

// The queries the counters replaced, as they were (issue 23): the recount readers are
// compared with.

func oracleDueBy(f *fixture, last string, limit int) ([]models.DueGroup, error) {
	var groups []models.DueGroup
	if err := f.db.Conn(f.ctx).Table("workflow_executions").
		Select("obligation, period, due_on, COUNT(DISTINCT client) AS clients, COUNT(*) AS open, "+
			"SUM(CASE WHEN status = ? THEN 1 ELSE 0 END) AS failed", models.ExecDLQPending).
		Where("organization_id = ? AND status <> ? AND due_on IS NOT NULL AND due_on <= ? AND obligation IS NOT NULL", f.org, models.ExecSucceeded, last).
		Group("due_on, obligation, period").Order("due_on, obligation, period").Limit(limit).Scan(&groups).Error; err != nil || len(groups) == 0 {
		return groups, err
	}
	var sums []struct {
		Obligation, Period, DueOn string
		models.CurrencySum
	}
	if err := f.db.Conn(f.ctx).Table("dead_letter_queue").
		Select("obligation, period, due_on, currency, CAST(SUM(amount_minor) AS BIGINT) AS minor, COUNT(*) AS count").
		Where("organization_id = ? AND due_on IS NOT NULL AND status IN ? AND due_on <= ? AND amount_minor IS NOT NULL AND obligation IS NOT NULL",
			f.org, []string{models.DLQPending, models.DLQProcessing}, last).
		Group("due_on, obligation, period, currency").Order("minor DESC, currency").Scan(&sums).Error; err != nil {
		return nil, err
	}
	for _, s := range sums {
		for i, g := range groups {
			if g.Obligation == s.Obligation && g.Period == s.Period && g.DueOn == s.DueOn {
				groups[i].Stuck = append(groups[i].Stuck, s.CurrencySum)
			}
		}
	}
	return groups, nil
}

func oracleStuckByClient(f *fixture, limit int) ([]models.ClientMoney, error) {
	var rows []models.ClientMoney
	err := f.db.Conn(f.ctx).Table("dead_letter_queue").
		Select("client, COALESCE(currency, '') AS currency, CAST(SUM(amount_minor) AS BIGINT) AS minor, COUNT(*) AS count").
		Where("organization_id = ? AND client IS NOT NULL AND amount_minor IS NOT NULL AND status IN ?", f.org, []string{models.DLQPending, models.DLQProcessing}).
		Group("client, currency").Order("minor DESC, client").Limit(limit).Scan(&rows).Error
	return rows, err
}

func oracleAtRisk(f *fixture, horizon string) ([]models.AtRiskDue, error) {
	var out []models.AtRiskDue
	err := f.db.Conn(f.ctx).Table("dead_letter_queue").
		Select("COALESCE(obligation, '') AS obligation, COALESCE(period, '') AS period, due_on, "+
			"COUNT(DISTINCT COALESCE(client, '')) AS clients, COUNT(*) AS items").
		Where("organization_id = ? AND due_on IS NOT NULL AND due_on <= ? AND status IN ?", f.org, horizon, []string{models.DLQPending, models.DLQProcessing}).
		Group("due_on, COALESCE(obligation, ''), COALESCE(period, '')").Order("due_on, obligation, period").Limit(50).Scan(&out).Error
	return out, err
}

func oracleOpenDeadlines(f *fixture, from, to string) ([]models.DueOpen, error) {
	var rows []struct {
		Obligation, DueOn, Client, Period, Currency *string
		AmountMinor                                 *int64
	}
	if err := f.db.Conn(f.ctx).Table("workflow_executions").Select("obligation, due_on, client, period, currency, amount_minor").
		Where("organization_id = ? AND due_on IS NOT NULL AND status <> ? AND due_on >= ? AND due_on <= ?", f.org, models.ExecSucceeded, from, to).
		Scan(&rows).Error; err != nil {
		return nil, err
	}
	d := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	type key struct{ obligation, due string }
	byKey := map[key]*models.DueOpen{}
	clients := map[key]map[string]bool{}
	periods := map[key]map[string]bool{}
	sums := map[key]map[string]*big.Int{}
	var keys []key
	for _, r := range rows {
		k := key{d(r.Obligation), d(r.DueOn)}
		if byKey[k] == nil {
			byKey[k] = &models.DueOpen{Obligation: k.obligation, DueOn: k.due, Amounts: map[string]string{}}
			clients[k], periods[k], sums[k] = map[string]bool{}, map[string]bool{}, map[string]*big.Int{}
			keys = append(keys, k)
		}
		byKey[k].Open++
		if r.Client != nil {
			clients[k][*r.Client] = true
		}
		if r.Period != nil {
			periods[k][*r.Period] = true
		}
		if r.AmountMinor != nil {
			c := d(r.Currency)
			if c == "" {
				c = "PLN"
			}
			if sums[k][c] == nil {
				sums[k][c] = new(big.Int)
			}
			sums[k][c].Add(sums[k][c], big.NewInt(*r.AmountMinor))
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].due != keys[j].due {
			return keys[i].due < keys[j].due
		}
		return keys[i].obligation < keys[j].obligation
	})
	out := make([]models.DueOpen, 0, len(keys))
	for _, k := range keys {
		o := byKey[k]
		o.Clients = len(clients[k])
		for c := range clients[k] {
			o.ClientKeys = append(o.ClientKeys, c)
		}
		sort.Strings(o.ClientKeys)
		if len(o.ClientKeys) > models.MaxDeadlineClients {
			o.ClientKeys = o.ClientKeys[:models.MaxDeadlineClients]
		}
		for p := range periods[k] {
			o.Periods = append(o.Periods, p)
		}
		sort.Strings(o.Periods)
		for c, s := range sums[k] {
			o.Amounts[c] = s.String()
		}
		out = append(out, *o)
	}
	return out, nil
}
