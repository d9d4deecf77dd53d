package modeltest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lifeline/models"
)

// A MovableClock is the clock of one test database, which the test moves instead of waiting:
// schedules (retries, breaker windows, leases, retention) fall due when the test advances it.
//
// What it shifts:
//   - On PostgreSQL, the database's own clock: now(), transaction_timestamp(),
//     statement_timestamp() and clock_timestamp() as every session of the test database
//     calls them unqualified (ours and River's SQL, db.Now, other processes on the same
//     URL), and column defaults of now() (bound when the template was migrated). The shift
//     lives in the database (one row), so every process sees the same moved clock, as
//     every process sees the same real one.
//   - On SQLite, whose clock is the process's: db.Now (the engine's clock) and River's
//     clock (db.TestClock), in this process only.
//   - On both, GORM's automatic created/updated times of db.
//
// What it does not shift: the SQL keywords CURRENT_TIMESTAMP, LOCALTIMESTAMP and
// CURRENT_DATE, SQLite's datetime('now') and column defaults of CURRENT_TIMESTAMP, and
// time.Now in Go code (timeouts, tickers, real waits, caches). Lifeline's schedules read the
// database clock, so they follow it; a schedule that does not is a bug this clock shows.
//
// Time only goes forward in a test that moves it: Advance by a positive duration. Moving it
// back is allowed (Set) but nothing in the engine expects its clock to run backwards.
type MovableClock struct {
	t      testing.TB
	db     *models.DB
	offset atomic.Int64 // nanoseconds ahead of the real clock (PostgreSQL: whole microseconds)
}

var (
	clocksMu sync.Mutex
	clocks   = map[*models.DB]*MovableClock{}
)

// Clock returns the movable clock of db, a database made by this package (New, Each, or
// opened on a URL from URL). On SQLite, a database not made by New gets its clock here, and
// River reads it only in runners made after this call: call Clock before jobs.New.
func Clock(t testing.TB, db *models.DB) *MovableClock {
	t.Helper()
	clocksMu.Lock()
	c := clocks[db]
	clocksMu.Unlock()
	if c != nil {
		return c
	}
	if db.Dialect == models.Postgres {
		var n int
		if err := db.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_catalog.pg_namespace WHERE nspname = '"+clockSchema+"'").Scan(&n); err != nil {
			t.Fatalf("movable clock: %v", err)
		}
		if n == 0 {
			t.Fatalf("movable clock: the database has no %s schema (not made by modeltest, or a benchmark's)", clockSchema)
		}
	}
	return install(t, db)
}

// install attaches a clock to db (at the real time) and registers it until t ends.
func install(t testing.TB, db *models.DB) *MovableClock {
	c := &MovableClock{t: t, db: db}
	db.Gorm.Config.NowFunc = c.Now
	db.TestClock = c.Now
	if db.Dialect == models.SQLite {
		db.Now = func(context.Context) (time.Time, error) { return c.Now(), nil }
	}
	clocksMu.Lock()
	clocks[db] = c
	clocksMu.Unlock()
	t.Cleanup(func() {
		clocksMu.Lock()
		delete(clocks, db)
		clocksMu.Unlock()
	})
	return c
}

// Now is the moved clock as this process reads it, in UTC, without a query: the real time
// plus the shift this clock made. (On PostgreSQL, db.Now reads the same from the database.)
func (c *MovableClock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load())).UTC()
}

// Offset is how far ahead of the real clock the clock is.
func (c *MovableClock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Advance moves the clock forward by d: whatever was due within d is due now.
func (c *MovableClock) Advance(d time.Duration) {
	c.t.Helper()
	c.shift(c.Offset() + d)
}

// Set moves the clock so that it reads at now.
func (c *MovableClock) Set(at time.Time) {
	c.t.Helper()
	c.shift(time.Until(at))
}

func (c *MovableClock) shift(offset time.Duration) {
	c.t.Helper()
	if c.db.Dialect == models.Postgres {
		offset = offset.Truncate(time.Microsecond) // PostgreSQL's precision
		if _, err := c.db.Pool.Exec(context.Background(),
			"UPDATE "+clockSchema+".shift SET by = $1::bigint * interval '1 microsecond'", offset.Microseconds()); err != nil {
			c.t.Fatalf("move the clock: %v", err)
		}
	}
	c.offset.Store(int64(offset))
}

// clockSchema holds the movable clock of a PostgreSQL test database: the shift (one row) and
// functions of the names of pg_catalog's clock functions that add it. Each test database's
// search_path lists the schema before pg_catalog, so unqualified calls find these.
const clockSchema = "lifeline_test_clock"

// clockSearchPath puts clockSchema before pg_catalog (and after public, where tables are
// created, so no table lands in clockSchema).
const clockSearchPath = `"$user", public, ` + clockSchema + `, pg_catalog`

// clockSQL creates clockSchema in a template database, before its migrations.
const clockSQL = `
CREATE SCHEMA ` + clockSchema + `;
CREATE TABLE ` + clockSchema + `.shift (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), by INTERVAL NOT NULL);
INSERT INTO ` + clockSchema + `.shift VALUES (TRUE, INTERVAL '0');
CREATE FUNCTION ` + clockSchema + `.shift_by() RETURNS INTERVAL LANGUAGE sql STABLE PARALLEL SAFE
  AS 'SELECT by FROM ` + clockSchema + `.shift';
CREATE FUNCTION ` + clockSchema + `.now() RETURNS TIMESTAMPTZ LANGUAGE sql STABLE PARALLEL SAFE
  AS 'SELECT pg_catalog.now() + ` + clockSchema + `.shift_by()';
CREATE FUNCTION ` + clockSchema + `.transaction_timestamp() RETURNS TIMESTAMPTZ LANGUAGE sql STABLE PARALLEL SAFE
  AS 'SELECT pg_catalog.transaction_timestamp() + ` + clockSchema + `.shift_by()';
CREATE FUNCTION ` + clockSchema + `.statement_timestamp() RETURNS TIMESTAMPTZ LANGUAGE sql STABLE PARALLEL SAFE
  AS 'SELECT pg_catalog.statement_timestamp() + ` + clockSchema + `.shift_by()';
CREATE FUNCTION ` + clockSchema + `.clock_timestamp() RETURNS TIMESTAMPTZ LANGUAGE sql VOLATILE PARALLEL SAFE
  AS 'SELECT pg_catalog.clock_timestamp() + ` + clockSchema + `.shift_by()';
`
