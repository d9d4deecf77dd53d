// Package models is Lifeline's persistence layer: the GORM structs, opening the database
// (embedded SQLite by default, PostgreSQL when the URL says so), migrations, and the
// queries services use. Every tenant query takes an organization id.
package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"lifeline/migrations"
)

// Dialects.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// DB is an open database: GORM for our tables, and the pool River shares.
type DB struct {
	Gorm    *gorm.DB
	SQL     *sql.DB
	Dialect string
	// Pool is set on PostgreSQL only; River's pgx driver uses it.
	Pool *pgxpool.Pool
	// Now returns the database clock. Tests may replace it.
	Now func(ctx context.Context) (time.Time, error)
	// TestClock is nil in production. On a test database whose clock a test moves
	// (modeltest.Clock) it is that clock as this process reads it without a query: River
	// reads it on SQLite, which has no clock of its own that a test could shift.
	TestClock func() time.Time
	// Sealer, when set, keeps secret values of workflow definitions encrypted at rest;
	// the queries here return them decrypted.
	Sealer Sealer
}

// DefaultSQLitePath is where the embedded database lives when DATABASE_URL is unset.
const DefaultSQLitePath = "./data/lifeline.db"

// WithPool returns a PostgreSQL url with its connection pool sized to n (the pgx parameter
// pool_max_conns), unless the url sizes it already; other urls are returned as they are.
func WithPool(url string, n int) string {
	if n <= 0 || strings.Contains(url, "pool_max_conns") || !(strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")) {
		return url
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "pool_max_conns=" + strconv.Itoa(n)
}

// Open connects to url: "postgres://…" or "postgresql://…" for PostgreSQL; "sqlite://PATH",
// "file:PATH", a plain path, or "" (DefaultSQLitePath) for embedded SQLite in WAL mode.
func Open(ctx context.Context, url string) (*DB, error) {
	gcfg := &gorm.Config{
		Logger:                                   logger.Discard,
		NowFunc:                                  func() time.Time { return time.Now().UTC() },
		DisableForeignKeyConstraintWhenMigrating: true,
		SkipDefaultTransaction:                   true,
	}
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		pcfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
		}
		if !strings.Contains(url, "pool_max_conns") && pcfg.MaxConns < 20 {
			// pgx defaults to max(4, cores); River's workers and the engine need more.
			pcfg.MaxConns = 20
		}
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return nil, fmt.Errorf("connect to postgres: %w", err)
		}
		if err := pool.Ping(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("connect to postgres: %w", err)
		}
		sqlDB := stdlib.OpenDBFromPool(pool)
		g, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), gcfg)
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("open gorm: %w", err)
		}
		db := &DB{Gorm: g, SQL: sqlDB, Dialect: Postgres, Pool: pool}
		db.Now = db.pgNow
		return db, nil
	}

	path := strings.TrimPrefix(strings.TrimPrefix(url, "sqlite://"), "file:")
	if path == "" {
		path = DefaultSQLitePath
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create database folder: %w", err)
		}
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	// No gorm PrepareStmt: with one connection it can deadlock (a transaction waits for a
	// statement another goroutine is preparing, which waits for the connection). The driver
	// keeps prepared statements itself instead (third_party/go-sqlite: a statement cache).
	g, err := gorm.Open(sqlite.Open(dsn), gcfg)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	sqlDB, err := g.DB()
	if err != nil {
		return nil, err
	}
	// SQLite allows one writer; River and GORM share a single connection (River's advice).
	// Never touch the database outside a transaction while holding one.
	sqlDB.SetMaxOpenConns(1)
	db := &DB{Gorm: g, SQL: sqlDB, Dialect: SQLite}
	db.Now = func(context.Context) (time.Time, error) { return time.Now().UTC(), nil }
	return db, nil
}

func (db *DB) pgNow(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := db.Pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", err)
	}
	return t.UTC(), nil
}

// Close closes the connections.
func (db *DB) Close() error {
	err := db.SQL.Close()
	if db.Pool != nil {
		db.Pool.Close()
	}
	return err
}

// Migrate applies Lifeline's migrations and River's.
func (db *DB) Migrate(ctx context.Context) error {
	sub, err := fs.Sub(migrations.FS, db.Dialect)
	if err != nil {
		return err
	}
	gd := goose.DialectPostgres
	if db.Dialect == SQLite {
		gd = goose.DialectSQLite3
	}
	p, err := goose.NewProvider(gd, db.SQL, sub, goose.WithLogger(goose.NopLogger()))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if db.Dialect == Postgres {
		m, err := rivermigrate.New(riverpgxv5.New(db.Pool), nil)
		if err != nil {
			return err
		}
		if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return fmt.Errorf("river migrations: %w", err)
		}
		return db.Gorm.WithContext(ctx).Exec(attemptJobIndex[Postgres]).Error
	}
	m, err := rivermigrate.New(riversqlite.New(db.SQL), nil)
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	return db.Gorm.WithContext(ctx).Exec(attemptJobIndex[SQLite]).Error
}

// attemptJobIndex finds the River jobs of an attempt (the reconciler looks for attempts with
// no live job). It is created after River's own migrations, which create river_job.
var attemptJobIndex = map[string]string{
	Postgres: "CREATE INDEX IF NOT EXISTS lifeline_river_job_attempt ON river_job ((args->>'attempt_id')) WHERE kind = 'run_attempt'",
	SQLite:   "CREATE INDEX IF NOT EXISTS lifeline_river_job_attempt ON river_job (json_extract(args, '$.attempt_id')) WHERE kind = 'run_attempt'",
}

// Tx runs fn in a transaction; fn's error rolls it back.
func (db *DB) Tx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return db.Gorm.WithContext(ctx).Transaction(fn)
}

// QueryRow runs query, whose arguments are positional ($1, $2, … on both databases), on
// tx's connection (in its transaction, if it has one) and returns its first row, as
// database/sql's QueryRowContext does: sql.ErrNoRows from Scan when there is none. It skips
// GORM's building of the statement (a named argument's parse, the SQL written out again for a
// logger), which on the step path's hottest statements cost more than running them.
func QueryRow(tx *gorm.DB, query string, args ...any) *sql.Row {
	return tx.Statement.ConnPool.QueryRowContext(tx.Statement.Context, query, args...)
}

// Conn returns a GORM handle bound to ctx.
func (db *DB) Conn(ctx context.Context) *gorm.DB { return db.Gorm.WithContext(ctx) }

// NewID returns a new random UUID string.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// IsNotFound reports whether err is GORM's record-not-found.
func IsNotFound(err error) bool { return errors.Is(err, gorm.ErrRecordNotFound) }

// IsUniqueViolation reports whether err is a unique constraint's refusal, on either database.
func IsUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "unique") || strings.Contains(s, "duplicate key")
}
