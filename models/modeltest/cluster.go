package modeltest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"lifeline/models"
)

// Cluster is a PostgreSQL server of one test's own, which the test may stop and start (an
// outage). It runs from a temporary folder on a free loopback port, as the postgres user
// when the test runs as root (PostgreSQL refuses root), and is removed when the test ends.
type Cluster struct {
	t      testing.TB
	bindir string
	dir    string
	port   int
	runAs  []string
}

// OwnPostgres initializes and starts a Cluster with a migrated database, or skips the test
// where no PostgreSQL server is installed (fails under CI=true).
func OwnPostgres(t testing.TB) *Cluster {
	t.Helper()
	bindir := postgresBindir()
	if bindir == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no PostgreSQL server installed (initdb not found): under CI this test must run")
		}
		t.Skip("no PostgreSQL server installed (initdb not found)")
	}
	dir, err := os.MkdirTemp("", "lifeline-cluster")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, bindir: bindir, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			u, err = user.Lookup("nobody")
		}
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.runAs = []string{"runuser", "-u", u.Username, "--"}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	t.Cleanup(func() {
		_ = c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
		_ = os.RemoveAll(dir)
	})
	if err := c.run("initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale"); err != nil {
		t.Fatal(err)
	}
	c.Start()
	db, err := models.Open(context.Background(), c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// URL is the cluster's DATABASE_URL.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Stop shuts the server down as `pg_ctl stop -m fast` does: connections are cut, open
// transactions roll back.
func (c *Cluster) Stop() {
	c.t.Helper()
	if err := c.run("pg_ctl", "-D", c.data(), "-m", "fast", "-w", "stop"); err != nil {
		c.t.Fatal(err)
	}
}

// Start starts the server and waits until it accepts connections.
func (c *Cluster) Start() {
	c.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200", c.port, c.dir)
	if err := c.run("pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "60", "-o", opts, "start"); err != nil {
		c.t.Fatal(err)
	}
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) run(name string, args ...string) error {
	argv := append(append([]string{}, c.runAs...), filepath.Join(c.bindir, name))
	argv = append(argv, args...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return nil
}

// postgresBindir finds the folder of initdb and pg_ctl: pg_config's, else the newest
// /usr/lib/postgresql/*/bin (Debian).
func postgresBindir() string {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi < vj
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	return ""
}
