package modeltest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Office is a PostgreSQL database that stands for an office's own database (its ERP, its
// accounting system) in tests of database connections and database_operation
// compensations. It is a fresh, empty database on the TEST_DATABASE_URL server, owned by a
// fresh role that is not a superuser, and it is reached through a loopback TCP forwarder
// on a port of its own: by host and port it is not the server Lifeline's own databases are
// on, which connections may never reach. Both are dropped when the test ends.
type Office struct {
	// DSN connects to the database through the forwarder as its role, with its password
	// (the test server's trust authentication ignores it).
	DSN string
	// Role and Password are the role's; Database the database's name.
	Role, Password, Database string
	// Addr is the forwarder's address ("127.0.0.1:port"); Server the test server's
	// ("127.0.0.1:port" of TEST_DATABASE_URL).
	Addr, Server string
	// Conn is a connection as the role, straight to the server: to create the tables a test
	// needs (the role owns them) and to check them.
	Conn *pgx.Conn

	base string
}

var officeSeq atomic.Int64

// OfficeDatabase creates an Office, or skips the test without TEST_DATABASE_URL (fails
// under CI=true).
func OfficeDatabase(t testing.TB) *Office {
	t.Helper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("TEST_DATABASE_URL is not set: under CI the PostgreSQL tests must run (use `make test`)")
		}
		t.Skip("PostgreSQL: TEST_DATABASE_URL not set; `make test` starts a throwaway server")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o := &Office{Role: fmt.Sprintf("office_%d_%d", os.Getpid(), officeSeq.Add(1)), Password: "office-Pa55word", Server: u.Host, base: base}
	o.Database = o.Role + "_db"
	if err := adminExec(ctx, base, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", o.Role, o.Password)); err != nil {
		t.Fatalf("office role: %v", err)
	}
	if err := adminExec(ctx, base, fmt.Sprintf("CREATE DATABASE %s OWNER %s", o.Database, o.Role)); err != nil {
		t.Fatalf("office database: %v", err)
	}
	t.Cleanup(func() {
		_ = o.Conn.Close(context.Background())
		_ = adminExec(context.Background(), base, "DROP DATABASE IF EXISTS "+o.Database+" WITH (FORCE)")
		_ = adminExec(context.Background(), base, "DROP ROLE IF EXISTS "+o.Role)
	})
	o.Addr = Forward(t, u.Host)
	o.DSN = o.DSNAs(o.Role, o.Password)
	direct := *u
	direct.User, direct.Path = url.UserPassword(o.Role, o.Password), "/"+o.Database
	if o.Conn, err = pgx.Connect(ctx, direct.String()); err != nil {
		t.Fatalf("connect as the office role: %v", err)
	}
	return o
}

// DSNAs is a DSN of the office database through the forwarder as another role.
func (o *Office) DSNAs(role, password string) string {
	u, _ := url.Parse(o.base)
	u.Host, u.Path = o.Addr, "/"+o.Database
	u.User = url.UserPassword(role, password)
	return u.String()
}

// Superuser is the test server's user (TEST_DATABASE_URL's, a superuser).
func (o *Office) Superuser() string {
	u, _ := url.Parse(o.base)
	return u.User.Username()
}

// AdminExec runs sql in the office database as the test server's superuser (to create
// roles and grant them rights).
func (o *Office) AdminExec(sql string) error {
	return adminExec(context.Background(), withDB(o.base, o.Database), sql)
}

// Forward starts a TCP forwarder on a free loopback port that passes every connection on
// to target ("host:port"), and returns its address. It stops, closing every connection,
// when the test ends.
func Forward(t testing.TB, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if conns == nil { // stopped
			_ = c.Close()
			return false
		}
		conns = append(conns, c)
		return true
	}
	conns = []net.Conn{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return // closed at the end of the test
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			if !track(in) || !track(out) {
				_ = in.Close()
				_ = out.Close()
				continue
			}
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				_ = dst.Close()
				_ = src.Close()
			}
			go pipe(out, in)
			go pipe(in, out)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
