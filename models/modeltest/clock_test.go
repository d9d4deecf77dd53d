package modeltest_test

import (
	"context"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// TestMovableClock: advancing a test database's clock moves db.Now, GORM's times and, on
// PostgreSQL, now() and clock_timestamp() in every session, other connections included, and
// the column defaults of now(); the real clock is untouched.
func TestMovableClock(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		ctx := context.Background()
		clock := modeltest.Clock(t, db)
		if again := modeltest.Clock(t, db); again != clock {
			t.Fatal("a second Clock of one database is another clock")
		}
		const day = 24 * time.Hour
		near := func(what string, got, want time.Time) {
			t.Helper()
			if d := got.Sub(want); d < -2*time.Second || d > 2*time.Second {
				t.Errorf("%s reads %v, want about %v", what, got, want)
			}
		}
		now, err := db.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		near("db.Now before moving", now, time.Now())

		clock.Advance(31 * day)
		want := time.Now().Add(31 * day)
		near("clock.Now", clock.Now(), want)
		if now, err = db.Now(ctx); err != nil {
			t.Fatal(err)
		}
		near("db.Now", now, want)
		near("GORM's now", db.Gorm.NowFunc(), want)
		if db.TestClock == nil {
			t.Fatal("db.TestClock is not set (River on SQLite reads it)")
		}
		near("db.TestClock", db.TestClock(), want)

		if db.Dialect == models.Postgres {
			// Another database/sql connection (its own session) sees the same moved clock.
			var sqlNow, clockTS, stmtTS time.Time
			if err := db.SQL.QueryRowContext(ctx, "SELECT now(), clock_timestamp(), statement_timestamp()").Scan(&sqlNow, &clockTS, &stmtTS); err != nil {
				t.Fatal(err)
			}
			near("now()", sqlNow, want)
			near("clock_timestamp()", clockTS, want)
			near("statement_timestamp()", stmtTS, want)
			var real time.Time
			if err := db.SQL.QueryRowContext(ctx, "SELECT pg_catalog.now()").Scan(&real); err != nil {
				t.Fatal(err)
			}
			near("pg_catalog.now()", real, time.Now())
			// Column defaults of now() were bound to the moved clock when the template was migrated.
			var defaults int
			if err := db.SQL.QueryRowContext(ctx, `SELECT count(*) FROM pg_depend d JOIN pg_proc p ON p.oid = d.refobjid
  WHERE d.classid = 'pg_attrdef'::regclass AND p.proname = 'now' AND p.pronamespace = 'lifeline_test_clock'::regnamespace`).Scan(&defaults); err != nil {
				t.Fatal(err)
			}
			if defaults == 0 {
				t.Error("no column default reads the moved clock")
			}
		}

		at := time.Date(2031, 1, 31, 12, 0, 0, 0, time.UTC)
		clock.Set(at)
		if now, err = db.Now(ctx); err != nil {
			t.Fatal(err)
		}
		near("db.Now after Set", now, at)
	})
}
