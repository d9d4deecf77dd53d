// Package modeltest gives tests real, migrated, isolated databases: a fresh SQLite file per
// test, and a fresh PostgreSQL database per test (cloned from a migrated template) on the
// server named by TEST_DATABASE_URL.
//
// Each test database has a clock the test can move (Clock) instead of waiting for a
// schedule; a benchmark's databases have the real clock only.
//
// Without TEST_DATABASE_URL the PostgreSQL half of a test is skipped with a message, except
// under CI=true, where it fails: `make test` always provides a server.
package modeltest

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"lifeline/models"
)

// Dialects lists the databases every storage test runs on.
var Dialects = []string{models.SQLite, models.Postgres}

// Each runs fn as a parallel subtest per dialect, each with its own fresh database.
func Each(t *testing.T, fn func(t *testing.T, db *models.DB)) {
	t.Helper()
	for _, d := range Dialects {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			fn(t, New(t, d))
		})
	}
}

// New returns a migrated database of the dialect, closed and removed when t ends.
func New(t testing.TB, dialect string) *models.DB {
	t.Helper()
	url := URL(t, dialect)
	db, err := models.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("open %s: %v", dialect, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if !isBenchmark(t) {
		install(t, db)
	}
	return db
}

// isBenchmark reports whether t is a benchmark's. Benchmarks get databases with the real
// clock only, as in production: their figures measure production's SQL.
func isBenchmark(t testing.TB) bool {
	_, ok := t.(*testing.B)
	return ok
}

// URL returns the DATABASE_URL of a fresh migrated database of the dialect (for tests that
// start a separate process on it).
func URL(t testing.TB, dialect string) string {
	t.Helper()
	switch dialect {
	case models.SQLite:
		return sqliteURL(t)
	case models.Postgres:
		return postgresURL(t)
	}
	t.Fatalf("unknown dialect %q", dialect)
	return ""
}

var (
	sqliteOnce sync.Once
	sqliteTpl  string
	sqliteErr  error
)

func sqliteURL(t testing.TB) string {
	sqliteOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lifeline-sqlite-tpl")
		if err != nil {
			sqliteErr = err
			return
		}
		sqliteTpl = filepath.Join(dir, "template.db")
		db, err := models.Open(context.Background(), sqliteTpl)
		if err != nil {
			sqliteErr = err
			return
		}
		defer db.Close()
		if err := db.Migrate(context.Background()); err != nil {
			sqliteErr = err
			return
		}
		_, sqliteErr = db.SQL.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	})
	if sqliteErr != nil {
		t.Fatalf("sqlite template: %v", sqliteErr)
	}
	path := filepath.Join(t.TempDir(), "lifeline.db")
	if err := copyFile(sqliteTpl, path); err != nil {
		t.Fatalf("copy sqlite template: %v", err)
	}
	return path
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// pgTemplate is a migrated template database on the server of TEST_DATABASE_URL, made once
// per test binary and cloned for each test.
type pgTemplate struct {
	once sync.Once
	name string
	err  error
}

var (
	// pgTpl has a movable clock (clockSchema), installed before the migrations so that
	// column defaults of now() read it too; pgPlainTpl has none (benchmarks).
	pgTpl, pgPlainTpl pgTemplate
	pgSeq             atomic.Int64
)

func postgresURL(t testing.TB) string {
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("TEST_DATABASE_URL is not set: under CI the PostgreSQL tests must run (use `make test`)")
		}
		t.Skip("PostgreSQL: TEST_DATABASE_URL not set; `make test` starts a throwaway server")
	}
	ctx := context.Background()
	clocked := !isBenchmark(t)
	tpl := &pgTpl
	if !clocked {
		tpl = &pgPlainTpl
	}
	tpl.once.Do(func() {
		tpl.name = fmt.Sprintf("lifeline_tpl_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
		if !clocked {
			tpl.name += "_plain"
		}
		tpl.err = makeTemplate(ctx, base, tpl.name, clocked)
	})
	if tpl.err != nil {
		t.Fatalf("postgres template: %v", tpl.err)
	}
	name := fmt.Sprintf("%s_t%d", tpl.name, pgSeq.Add(1))
	var err error
	for i := 0; i < 20; i++ { // the template must have no other session while it is copied
		if err = adminExec(ctx, base, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tpl.name)); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err == nil && clocked {
		// A database's settings are not copied from its template.
		err = adminExec(ctx, base, fmt.Sprintf("ALTER DATABASE %s SET search_path = %s", name, clockSearchPath))
	}
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		if os.Getenv("LIFELINE_TEST_KEEP_DB") != "" { // to look at a benchmark's data afterwards
			t.Logf("kept database %s", name)
			return
		}
		_ = adminExec(context.Background(), base, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return withDB(base, name)
}

// makeTemplate creates and migrates the template database name; clocked, with the movable
// clock installed first and in its search_path.
func makeTemplate(ctx context.Context, base, name string, clocked bool) error {
	if err := adminExec(ctx, base, "CREATE DATABASE "+name); err != nil {
		return err
	}
	if clocked {
		if err := adminExec(ctx, withDB(base, name), clockSQL); err != nil {
			return fmt.Errorf("movable clock: %w", err)
		}
		if err := adminExec(ctx, base, fmt.Sprintf("ALTER DATABASE %s SET search_path = %s", name, clockSearchPath)); err != nil {
			return fmt.Errorf("movable clock: %w", err)
		}
	}
	db, err := models.Open(ctx, withDB(base, name))
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Migrate(ctx)
}

func withDB(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	u.Path = "/" + name
	return u.String()
}

var adminMu sync.Mutex

func adminExec(ctx context.Context, base, sql string) error {
	adminMu.Lock()
	defer adminMu.Unlock()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	if err != nil && strings.Contains(err.Error(), "already exists") {
		return nil
	}
	return err
}
