package models

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"

	"gorm.io/gorm"
)

// The counters of open work (issue 23's performance line, migration 00042): the Today page,
// the deadlines API and the at-risk banner read them instead of every open item.
//
// Contract. Three tables hold insert-only deltas (folded = 0), written by database triggers in
// the transaction that moves an execution or a dead letter into or out of what is open
// (execNotDone with a due date; dlqOpen with a due date, or with a client and an amount), or
// changes its obligation, period, due date, client, currency or amount: whatever the writer
// (a transition, a backfill, a tool). No writer updates a counter row, so a bulk of one
// client's failures inserts rows and waits on none. FoldOpenWork sums the deltas into folded
// rows (with the reconciler); a reader sums folded rows and deltas, in one statement, so it
// is exact at any time. The distinct clients of a key are the one figure a delta cannot
// carry (whether a client's count crosses zero depends on the rows of other transactions):
// the fold writes them, and a reader adds what the deltas not yet folded change of them
// (openWorkUnion). OpenWorkDrift recounts the items and RepairOpenWork sets the counters to
// the recount (maintenance, hourly).

// Sources of the open work counted.
const (
	srcExecutions  = "e" // executions not succeeded (execNotDone) with a due date
	srcDeadLetters = "d" // dead letters pending or being processed (dlqOpen)
)

// clientsAdjustment is, over the rows of one client of a key in open_work_clients, 1 when
// the client counts now and not in the folded rows, -1 the other way round: what the deltas
// not yet folded change of the key's clients.
const clientsAdjustment = "(CASE WHEN SUM(items) > 0 THEN 1 ELSE 0 END) - " +
	"(CASE WHEN SUM(CASE WHEN folded = 1 THEN items ELSE 0 END) > 0 THEN 1 ELSE 0 END)"

// openWorkUnion returns the rows of the organization's open work of src where cond (over
// obligation, period and due_on, with condArgs) holds, as a subquery of columns obligation,
// period, due_on, currency, items, failed, priced, amount_minor and clients to sum by key:
// open_work's rows, and per client touched by a delta not yet folded its clientsAdjustment.
// clients are per period, or per obligation and due date across periods (perDue: the
// adjustments' period is then ”). Executions count clients that are not ”; dead letters
// count ” as one (as the queries they replace did).
func openWorkUnion(orgID, src string, perDue bool, cond string, condArgs ...any) (string, []any) {
	clients, period, key := "clients", "period", "obligation, period, due_on, client"
	if perDue {
		clients, period, key = "due_clients", "''", "obligation, due_on, client"
	}
	named := ""
	if src == srcExecutions {
		named = " AND client <> ''"
	}
	q := `SELECT obligation, period, due_on, currency, items, failed, priced, amount_minor, ` + clients + ` AS clients
  FROM open_work WHERE organization_id = ? AND src = ? AND ` + cond + `
UNION ALL
SELECT obligation, ` + period + `, due_on, '', 0, 0, 0, 0, ` + clientsAdjustment + `
  FROM open_work_clients WHERE organization_id = ? AND src = ? AND ` + cond + named + `
  AND (obligation, due_on, client) IN (SELECT obligation, due_on, client FROM open_work_clients
    WHERE organization_id = ? AND src = ? AND folded = 0 AND ` + cond + `)
  GROUP BY ` + key
	args := []any{orgID, src}
	args = append(args, condArgs...)
	for range 2 {
		args = append(args, orgID, src)
		args = append(args, condArgs...)
	}
	return q, args
}

// openWorkLock serializes the fold and the repair of one organization's counters (on
// SQLite a writing transaction is alone anyway).
func (db *DB) openWorkLock(tx *gorm.DB, orgID string) error {
	if db.Dialect != Postgres {
		return nil
	}
	return tx.Exec("SELECT pg_advisory_xact_lock(hashtext('open_work'), hashtext(?))", orgID).Error
}

// foldTable sums the organization's deltas of table into its folded rows, per key (columns),
// of the columns sums: the deltas and the folded rows of their keys are marked (2 and 3),
// summed into new folded rows (a key whose sums are all 0 keeps none) and deleted. A delta
// committed meanwhile stays one. It runs in the caller's transaction; between marking and
// summing, before(tx) may read the marked rows (the clients' crossings).
func foldTable(tx *gorm.DB, orgID, table, keys, sums string, before func(*gorm.DB, string) error) error {
	r := tx.Exec("UPDATE "+table+" SET folded = 2 WHERE organization_id = ? AND folded = 0", orgID)
	if r.Error != nil || r.RowsAffected == 0 {
		return r.Error
	}
	if err := tx.Exec("UPDATE "+table+" SET folded = 3 WHERE organization_id = ? AND folded = 1 AND ("+keys+") IN "+
		"(SELECT "+keys+" FROM "+table+" WHERE organization_id = ? AND folded = 2)", orgID, orgID).Error; err != nil {
		return err
	}
	if before != nil {
		if err := before(tx, orgID); err != nil {
			return err
		}
	}
	var sel, nonzero []string
	for _, c := range strings.Split(sums, ", ") {
		sel = append(sel, "SUM("+c+")")
		nonzero = append(nonzero, "SUM("+c+") <> 0")
	}
	if err := tx.Exec("INSERT INTO "+table+" (organization_id, "+keys+", "+sums+", folded) SELECT organization_id, "+keys+", "+
		strings.Join(sel, ", ")+", 1 FROM "+table+" WHERE organization_id = ? AND folded IN (2, 3) GROUP BY organization_id, "+keys+
		" HAVING "+strings.Join(nonzero, " OR "), orgID).Error; err != nil {
		return err
	}
	return tx.Exec("DELETE FROM "+table+" WHERE organization_id = ? AND folded IN (2, 3)", orgID).Error
}

// foldCrossings writes, as deltas of open_work, what the marked rows of open_work_clients
// (foldTable) change of the clients per period and per obligation and due date: a client
// whose count goes from 0 to more is one more, and the other way round one less.
func foldCrossings(tx *gorm.DB, orgID string) error {
	for _, level := range []struct{ column, period, key string }{
		{"clients", "period", "obligation, period, due_on"},
		{"due_clients", "''", "obligation, due_on"},
	} {
		crossing := strings.ReplaceAll(clientsAdjustment, "folded = 1", "folded = 3")
		if err := tx.Exec(`INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, `+level.column+`)
SELECT organization_id, src, obligation, `+level.period+`, due_on, '', SUM(d) FROM (
  SELECT organization_id, src, `+level.key+`, client, `+crossing+` AS d FROM open_work_clients
  WHERE organization_id = ? AND folded IN (2, 3) AND (src = 'd' OR client <> '')
  GROUP BY organization_id, src, `+level.key+`, client) x
GROUP BY organization_id, src, `+level.key+` HAVING SUM(d) <> 0`, orgID).Error; err != nil {
			return err
		}
	}
	return nil
}

// FoldOpenWork sums the organization's deltas of open work into folded rows (the counters
// read the same before and after: a reader sums both), in one transaction. The reconciler
// runs it so that readers have few deltas to add.
func (db *DB) FoldOpenWork(ctx context.Context, orgID string) error {
	return db.Tx(ctx, func(tx *gorm.DB) error {
		if err := db.openWorkLock(tx, orgID); err != nil {
			return err
		}
		if err := foldTable(tx, orgID, "open_work_clients", "src, obligation, period, due_on, client", "items", foldCrossings); err != nil {
			return fmt.Errorf("fold open work per client: %w", err)
		}
		if err := foldTable(tx, orgID, "open_work", "src, obligation, period, due_on, currency",
			"items, failed, priced, amount_minor, clients, due_clients", nil); err != nil {
			return fmt.Errorf("fold open work: %w", err)
		}
		if err := foldTable(tx, orgID, "open_client_money", "client, currency", "items, amount_minor", nil); err != nil {
			return fmt.Errorf("fold open money per client: %w", err)
		}
		return nil
	})
}

// OrgsWithOpenWorkDeltas returns the organizations whose open work has deltas to fold.
func (db *DB) OrgsWithOpenWorkDeltas(ctx context.Context) ([]string, error) {
	var orgs []string
	err := db.Conn(ctx).Raw(`SELECT organization_id FROM open_work WHERE folded = 0
UNION SELECT organization_id FROM open_work_clients WHERE folded = 0
UNION SELECT organization_id FROM open_client_money WHERE folded = 0`).Scan(&orgs).Error
	sort.Strings(orgs)
	return orgs, err
}

// openWorkRecount are the statements that count the organization's open work from its
// executions and dead letters into folded rows (migration 00042 runs them for every
// organization): the tables' contract, said once more as a recount.
var openWorkRecount = []string{
	`INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, items, failed, priced, amount_minor, folded)
SELECT organization_id, 'e', COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(currency, ''), COUNT(*),
       SUM(CASE WHEN status = '` + ExecDLQPending + `' THEN 1 ELSE 0 END), COUNT(amount_minor), COALESCE(SUM(amount_minor), 0), 1
FROM workflow_executions WHERE organization_id = ? AND due_on IS NOT NULL AND ` + execNotDone + `
GROUP BY organization_id, COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(currency, '')`,
	`INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, items, failed, priced, amount_minor, folded)
SELECT organization_id, 'd', COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(currency, ''), COUNT(*),
       0, COUNT(amount_minor), COALESCE(SUM(amount_minor), 0), 1
FROM dead_letter_queue WHERE organization_id = ? AND due_on IS NOT NULL AND ` + dlqOpen + `
GROUP BY organization_id, COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(currency, '')`,
	`INSERT INTO open_work_clients (organization_id, src, obligation, period, due_on, client, items, folded)
SELECT organization_id, 'e', COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(client, ''), COUNT(*), 1
FROM workflow_executions WHERE organization_id = ? AND due_on IS NOT NULL AND ` + execNotDone + `
GROUP BY organization_id, COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(client, '')`,
	`INSERT INTO open_work_clients (organization_id, src, obligation, period, due_on, client, items, folded)
SELECT organization_id, 'd', COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(client, ''), COUNT(*), 1
FROM dead_letter_queue WHERE organization_id = ? AND due_on IS NOT NULL AND ` + dlqOpen + `
GROUP BY organization_id, COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(client, '')`,
	`INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, clients, folded)
SELECT organization_id, src, obligation, period, due_on, '', COUNT(*), 1
FROM open_work_clients WHERE organization_id = ? AND folded = 1 AND (src = 'd' OR client <> '')
GROUP BY organization_id, src, obligation, period, due_on`,
	`INSERT INTO open_work (organization_id, src, obligation, period, due_on, currency, due_clients, folded)
SELECT organization_id, src, obligation, '', due_on, '', COUNT(DISTINCT client), 1
FROM open_work_clients WHERE organization_id = ? AND folded = 1 AND (src = 'd' OR client <> '')
GROUP BY organization_id, src, obligation, due_on`,
	`INSERT INTO open_client_money (organization_id, client, currency, items, amount_minor, folded)
SELECT organization_id, client, COALESCE(currency, ''), COUNT(*), SUM(amount_minor), 1
FROM dead_letter_queue WHERE organization_id = ? AND client IS NOT NULL AND amount_minor IS NOT NULL AND ` + dlqOpen + `
GROUP BY organization_id, client, COALESCE(currency, '')`,
}

// snapshotTx runs fn in a transaction that reads one snapshot throughout (REPEATABLE READ on
// PostgreSQL; SQLite's transactions are serializable): a recount and the counters it is
// compared with, or replaces, are of the same moment, and a delta committed after it stays.
func (db *DB) snapshotTx(ctx context.Context, readOnly bool, fn func(tx *gorm.DB) error) error {
	opts := &sql.TxOptions{ReadOnly: readOnly}
	if db.Dialect == Postgres {
		opts.Isolation = sql.LevelRepeatableRead
	}
	return db.Gorm.WithContext(ctx).Transaction(fn, opts)
}

// RepairOpenWork sets the organization's counters of open work to a recount of its
// executions and dead letters (the repair of a drift: OpenWorkDrift), in one transaction.
// On PostgreSQL its snapshot is taken before it waits for a fold of the organization, which
// then makes it fail to serialize: it tries again, up to three times.
func (db *DB) RepairOpenWork(ctx context.Context, orgID string) error {
	var err error
	for range 3 {
		if err = db.repairOpenWork(ctx, orgID); !Busy(err) {
			break
		}
	}
	return err
}

func (db *DB) repairOpenWork(ctx context.Context, orgID string) error {
	return db.snapshotTx(ctx, false, func(tx *gorm.DB) error {
		if err := db.openWorkLock(tx, orgID); err != nil {
			return err
		}
		for _, t := range []string{"open_work", "open_work_clients", "open_client_money"} {
			if err := tx.Exec("DELETE FROM "+t+" WHERE organization_id = ?", orgID).Error; err != nil {
				return fmt.Errorf("repair open work: %w", err)
			}
		}
		for _, s := range openWorkRecount {
			if err := tx.Exec(s, orgID).Error; err != nil {
				return fmt.Errorf("repair open work: %w", err)
			}
		}
		return nil
	})
}

// openWorkFigure is one counted figure of a key, as a drift compares them.
type openWorkFigure struct {
	Key   string
	Value string
}

// OpenWorkDrift recounts the organization's open work from its executions and dead letters
// and returns every figure the counters read otherwise ("key: counted ≠ recounted"; none
// when they agree), read in one snapshot. It reads every open item: maintenance runs it
// hourly.
func (db *DB) OpenWorkDrift(ctx context.Context, orgID string) ([]string, error) {
	var drift []string
	err := db.snapshotTx(ctx, true, func(tx *gorm.DB) error {
		kept, err := openWorkFigures(tx, orgID, false)
		if err != nil {
			return err
		}
		recounted, err := openWorkFigures(tx, orgID, true)
		if err != nil {
			return err
		}
		for k, v := range recounted {
			if kept[k] != v {
				drift = append(drift, fmt.Sprintf("%s: counted %q, recounted %q", k, kept[k], v))
			}
		}
		for k, v := range kept {
			if _, ok := recounted[k]; !ok {
				drift = append(drift, fmt.Sprintf("%s: counted %q, recounted none", k, v))
			}
		}
		return nil
	})
	sort.Strings(drift)
	return drift, err
}

// openWorkFigures reads every figure the counters give of the organization (recount false:
// as readers sum them) or recounts it from the items (true), keyed by source and key.
func openWorkFigures(tx *gorm.DB, orgID string, recount bool) (map[string]string, error) {
	var queries []struct {
		q    string
		args []any
	}
	add := func(q string, args ...any) {
		queries = append(queries, struct {
			q    string
			args []any
		}{q, args})
	}
	nz := func(cols ...string) string { // HAVING: a key some figure of which is not 0
		var s []string
		for _, c := range cols {
			s = append(s, "SUM("+c+") <> 0")
		}
		return " HAVING " + strings.Join(s, " OR ")
	}
	money := "CAST(SUM(items) AS TEXT) || '/' || CAST(SUM(failed) AS TEXT) || '/' || CAST(SUM(priced) AS TEXT) || '/' || CAST(SUM(amount_minor) AS TEXT)"
	for _, src := range []string{srcExecutions, srcDeadLetters} {
		for _, perDue := range []bool{false, true} {
			if recount {
				table, open, failed := "workflow_executions", execNotDone, "SUM(CASE WHEN status = '"+ExecDLQPending+"' THEN 1 ELSE 0 END)"
				distinct := "COUNT(DISTINCT client)"
				if src == srcDeadLetters {
					table, open, failed, distinct = "dead_letter_queue", dlqOpen, "0", "COUNT(DISTINCT COALESCE(client, ''))"
				}
				key, period := "COALESCE(obligation, ''), COALESCE(period, ''), due_on", "COALESCE(period, '')"
				if perDue {
					key, period = "COALESCE(obligation, ''), due_on", "''"
				}
				add(`SELECT CAST(? AS TEXT) || '|' || COALESCE(obligation, '') || '|' || `+period+` || '|' || due_on AS key, CAST(`+distinct+` AS TEXT) AS value
FROM `+table+` WHERE organization_id = ? AND due_on IS NOT NULL AND `+open+` GROUP BY `+key+` HAVING `+distinct+` > 0`,
					fmt.Sprintf("clients %s %v", src, perDue), orgID)
				if !perDue {
					add(`SELECT CAST(? AS TEXT) || '|' || COALESCE(obligation, '') || '|' || COALESCE(period, '') || '|' || due_on || '|' || COALESCE(currency, '') AS key,
  CAST(COUNT(*) AS TEXT) || '/' || CAST(`+failed+` AS TEXT) || '/' || CAST(COUNT(amount_minor) AS TEXT) || '/' || CAST(COALESCE(SUM(amount_minor), 0) AS TEXT) AS value
FROM `+table+` WHERE organization_id = ? AND due_on IS NOT NULL AND `+open+`
GROUP BY COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(currency, '')`, "work "+src, orgID)
					add(`SELECT CAST(? AS TEXT) || '|' || COALESCE(obligation, '') || '|' || COALESCE(period, '') || '|' || due_on || '|' || COALESCE(client, '') AS key,
  CAST(COUNT(*) AS TEXT) AS value FROM `+table+` WHERE organization_id = ? AND due_on IS NOT NULL AND `+open+`
GROUP BY COALESCE(obligation, ''), COALESCE(period, ''), due_on, COALESCE(client, '')`, "client "+src, orgID)
				}
				continue
			}
			u, args := openWorkUnion(orgID, src, perDue, "1 = 1")
			add(`SELECT CAST(? AS TEXT) || '|' || obligation || '|' || period || '|' || due_on AS key, CAST(SUM(clients) AS TEXT) AS value FROM (`+u+`) w
GROUP BY obligation, period, due_on HAVING SUM(clients) <> 0`, append([]any{fmt.Sprintf("clients %s %v", src, perDue)}, args...)...)
			if !perDue {
				add(`SELECT CAST(? AS TEXT) || '|' || obligation || '|' || period || '|' || due_on || '|' || currency AS key, `+money+` AS value
FROM open_work WHERE organization_id = ? AND src = ? GROUP BY obligation, period, due_on, currency`+nz("items", "failed", "priced", "amount_minor"),
					"work "+src, orgID, src)
				add(`SELECT CAST(? AS TEXT) || '|' || obligation || '|' || period || '|' || due_on || '|' || client AS key, CAST(SUM(items) AS TEXT) AS value
FROM open_work_clients WHERE organization_id = ? AND src = ? GROUP BY obligation, period, due_on, client`+nz("items"), "client "+src, orgID, src)
			}
		}
	}
	if recount {
		add(`SELECT 'money|' || client || '|' || COALESCE(currency, '') AS key, CAST(COUNT(*) AS TEXT) || '/' || CAST(SUM(amount_minor) AS TEXT) AS value
FROM dead_letter_queue WHERE organization_id = ? AND client IS NOT NULL AND amount_minor IS NOT NULL AND `+dlqOpen+`
GROUP BY client, COALESCE(currency, '')`, orgID)
	} else {
		add(`SELECT 'money|' || client || '|' || currency AS key, CAST(SUM(items) AS TEXT) || '/' || CAST(SUM(amount_minor) AS TEXT) AS value
FROM open_client_money WHERE organization_id = ? GROUP BY client, currency`+nz("items", "amount_minor"), orgID)
	}
	out := map[string]string{}
	for _, q := range queries {
		var rows []openWorkFigure
		if err := tx.Raw(q.q, q.args...).Scan(&rows).Error; err != nil {
			return nil, fmt.Errorf("open work figures: %w", err)
		}
		for _, r := range rows {
			out[r.Key] = r.Value
		}
	}
	return out, nil
}
