package models_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// The SQLite driver keeps prepared statements by their SQL (third_party/go-sqlite). A
// statement reused must behave as a freshly prepared one: new arguments, nothing left of
// the last run's bindings or error, two runs of the same SQL open at once, statements of
// several parts, and a run cancelled half-way.
func TestSQLiteStatementCache(t *testing.T) {
	t.Parallel()
	db := modeltest.New(t, models.SQLite)
	ctx := context.Background()
	conn := db.SQL
	mustExec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mustExec(`CREATE TABLE cache_probe (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, note TEXT)`)
	const insert = `INSERT INTO cache_probe (id, name, note) VALUES (?, ?, ?)`
	for i := 1; i <= 50; i++ {
		note := any(fmt.Sprintf("note %d", i))
		if i%2 == 0 {
			note = nil // a NULL after a text binding of the same statement
		}
		res, err := conn.ExecContext(ctx, insert, i, fmt.Sprintf("name-%02d", i), note)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("insert %d affected %d rows", i, n)
		}
		if id, _ := res.LastInsertId(); id != int64(i) {
			t.Fatalf("insert %d: last id %d", i, id)
		}
	}
	// The same statement fails on a duplicate, then works again with new values.
	if _, err := conn.ExecContext(ctx, insert, 51, "name-01", "dup"); err == nil || !strings.Contains(err.Error(), "UNIQUE") {
		t.Fatalf("duplicate insert: %v", err)
	}
	mustExec(insert, 51, "name-51", "after the error")

	const byID = `SELECT name, note FROM cache_probe WHERE id = ?`
	for _, c := range []struct {
		id   int
		name string
		note *string
	}{{1, "name-01", ptr("note 1")}, {2, "name-02", nil}, {51, "name-51", ptr("after the error")}, {3, "name-03", ptr("note 3")}} {
		var name string
		var note *string
		if err := conn.QueryRowContext(ctx, byID, c.id).Scan(&name, &note); err != nil {
			t.Fatal(err)
		}
		if name != c.name || (note == nil) != (c.note == nil) || (note != nil && *note != *c.note) {
			t.Fatalf("id %d: %q %v, want %q %v", c.id, name, note, c.name, c.note)
		}
	}

	// Two runs of the same SQL open at once in one transaction: each reads its own rows.
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	const between = `SELECT id FROM cache_probe WHERE id BETWEEN ? AND ? ORDER BY id`
	outer, err := tx.QueryContext(ctx, between, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	var pairs []string
	for outer.Next() {
		var a int
		if err := outer.Scan(&a); err != nil {
			t.Fatal(err)
		}
		inner, err := tx.QueryContext(ctx, between, 10*a, 10*a+1)
		if err != nil {
			t.Fatal(err)
		}
		for inner.Next() {
			var b int
			if err := inner.Scan(&b); err != nil {
				t.Fatal(err)
			}
			pairs = append(pairs, fmt.Sprintf("%d:%d", a, b))
		}
		if err := inner.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := outer.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(pairs, " "); got != "1:10 1:11 2:20 2:21 3:30 3:31" {
		t.Fatalf("nested runs of one statement read %q", got)
	}

	// A statement of several parts runs every part, every time.
	const twoParts = `UPDATE cache_probe SET note = 'x' WHERE id = 4; UPDATE cache_probe SET note = 'y' WHERE id = 5`
	for range 2 {
		mustExec(twoParts)
	}
	var notes string
	if err := conn.QueryRowContext(ctx, `SELECT group_concat(note, ',') FROM cache_probe WHERE id IN (4, 5)`).Scan(&notes); err != nil || notes != "x,y" {
		t.Fatalf("two-part statement left %q %v", notes, err)
	}

	// A query cancelled half-way, then the same query again reads everything.
	const all = `SELECT id FROM cache_probe ORDER BY id`
	cctx, cancel := context.WithCancel(ctx)
	rows, err := conn.QueryContext(cctx, all)
	if err != nil {
		t.Fatal(err)
	}
	rows.Next()
	cancel()
	for rows.Next() {
	}
	if err := rows.Close(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	var n int
	rows, err = conn.QueryContext(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil || n != 51 {
		t.Fatalf("after a cancelled run: %d rows, %v", n, err)
	}
	_ = rows.Close()
}
