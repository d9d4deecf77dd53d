package main

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"lifeline/models"
	"lifeline/services/notify/email"
	"lifeline/services/outbound"
	"lifeline/services/redact"
	"lifeline/services/secrets"
)

// Config is everything Lifeline reads from its environment. This is the only place that
// reads it.
type Config struct {
	DatabaseURL   string
	Addr          string
	BaseURL       string
	OutboundAllow []netip.Prefix
	// DBConnAllow is LIFELINE_DBCONN_ALLOW: the networks outside the public internet that
	// the admins' database connections may reach (empty: public addresses only). It is not
	// OutboundAllow: an address HTTP steps may call is no database a tenant may query.
	DBConnAllow []netip.Prefix
	// OwnServers are Lifeline's own servers as "host:port", which database connections never
	// reach: the hosts and ports of DATABASE_URL when it is PostgreSQL (a Unix socket counts
	// as its port on every address of this machine) and LIFELINE_ADDR.
	OwnServers []string
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the client.
	TrustedProxies   []netip.Prefix
	Demo             bool
	DemoTrafficEvery time.Duration
	RedactKeys       []string
	Workers          int
	LogLevel         string
	ShutdownTimeout  time.Duration
	LeaseGrace       time.Duration
	// EncryptionKeys is LIFELINE_ENCRYPTION_KEYS ("id:base64key,…", the first active);
	// empty means the key file in DataDir.
	EncryptionKeys string
	// DataDir holds the embedded database and the generated encryption key.
	DataDir string
	// SMTP is LIFELINE_SMTP_URL (smtp://user:pass@host:587?tls=starttls) with
	// LIFELINE_SMTP_FROM; nil: no email (the demo starts a local sink, DemoSMTPSink).
	SMTP *email.Config
	// MetricsToken is LIFELINE_METRICS_TOKEN: when set, /metrics is served on Addr to
	// requests with "Authorization: Bearer <token>" (and required on MetricsAddr too).
	MetricsToken string
	// MetricsAddr is LIFELINE_METRICS_ADDR: when set, /metrics is served on this separate
	// listener (without a token unless MetricsToken is set), and not on Addr. Neither set:
	// no metrics are kept.
	MetricsAddr string
	// OTLPEndpoint is OTEL_EXPORTER_OTLP_ENDPOINT, the OTLP/HTTP collector traces are sent to
	// (empty: no tracing), and ServiceName OTEL_SERVICE_NAME (default "lifeline").
	OTLPEndpoint string
	ServiceName  string
}

// MetricsOn reports whether metrics are kept and served (a token or a separate address).
func (c Config) MetricsOn() bool { return c.MetricsToken != "" || c.MetricsAddr != "" }

// DemoSMTPSink is where the demo's local SMTP sink listens when LIFELINE_SMTP_URL is unset.
const DemoSMTPSink = "127.0.0.1:2525"

func loadConfig(getenv func(string) string) (Config, error) {
	c := Config{
		DatabaseURL: getenv("DATABASE_URL"),
		Addr:        or(getenv("LIFELINE_ADDR"), ":8080"),
		LogLevel:    or(getenv("LIFELINE_LOG_LEVEL"), "info"),
		RedactKeys:  redact.ParseKeys(getenv("LIFELINE_REDACT_KEYS")),
	}
	var err error
	if c.OutboundAllow, err = outbound.ParseAllow(getenv("LIFELINE_OUTBOUND_ALLOW")); err != nil {
		return c, fmt.Errorf("LIFELINE_OUTBOUND_ALLOW: %w", err)
	}
	if c.DBConnAllow, err = outbound.ParseAllow(getenv("LIFELINE_DBCONN_ALLOW")); err != nil {
		return c, fmt.Errorf("LIFELINE_DBCONN_ALLOW: %w", err)
	}
	if c.TrustedProxies, err = parsePrefixes(getenv("LIFELINE_TRUSTED_PROXIES")); err != nil {
		return c, fmt.Errorf("LIFELINE_TRUSTED_PROXIES: %w", err)
	}
	if c.Demo, err = parseBool(getenv("LIFELINE_DEMO"), false); err != nil {
		return c, fmt.Errorf("LIFELINE_DEMO: %w", err)
	}
	if c.DemoTrafficEvery, err = parseDuration(getenv("LIFELINE_DEMO_TRAFFIC_EVERY"), 3*time.Second); err != nil {
		return c, fmt.Errorf("LIFELINE_DEMO_TRAFFIC_EVERY: %w", err)
	}
	if c.ShutdownTimeout, err = parseDuration(getenv("LIFELINE_SHUTDOWN_TIMEOUT"), 30*time.Second); err != nil {
		return c, fmt.Errorf("LIFELINE_SHUTDOWN_TIMEOUT: %w", err)
	}
	if c.LeaseGrace, err = parseDuration(getenv("LIFELINE_LEASE_GRACE"), 30*time.Second); err != nil {
		return c, fmt.Errorf("LIFELINE_LEASE_GRACE: %w", err)
	}
	if w := getenv("LIFELINE_WORKERS"); w != "" { // unset: 0, the queue's default for the database
		if c.Workers, err = strconv.Atoi(w); err != nil || c.Workers < 1 || c.Workers > 1000 {
			return c, fmt.Errorf("LIFELINE_WORKERS: must be a number from 1 to 1000")
		}
	}
	c.EncryptionKeys = strings.TrimSpace(getenv("LIFELINE_ENCRYPTION_KEYS"))
	if c.EncryptionKeys != "" {
		if _, err := secrets.ParseRing(c.EncryptionKeys); err != nil {
			return c, fmt.Errorf("LIFELINE_ENCRYPTION_KEYS: %w", err)
		}
	}
	c.DataDir = dataDir(c.DatabaseURL)
	if v := strings.TrimSpace(getenv("LIFELINE_SMTP_URL")); v != "" {
		sc, err := email.ParseURL(v)
		if err != nil {
			return c, fmt.Errorf("LIFELINE_SMTP_URL: %w", err)
		}
		sc.From = or(getenv("LIFELINE_SMTP_FROM"), "Lifeline <lifeline@localhost>")
		if err := email.ParseFrom(sc.From); err != nil {
			return c, fmt.Errorf("LIFELINE_SMTP_FROM: %w", err)
		}
		c.SMTP = &sc
	}
	c.MetricsToken = strings.TrimSpace(getenv("LIFELINE_METRICS_TOKEN"))
	if c.MetricsToken != "" && len(c.MetricsToken) < 16 {
		return c, fmt.Errorf("LIFELINE_METRICS_TOKEN: must be at least 16 characters")
	}
	if c.MetricsAddr = strings.TrimSpace(getenv("LIFELINE_METRICS_ADDR")); c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return c, fmt.Errorf("LIFELINE_METRICS_ADDR %q: %w", c.MetricsAddr, err)
		}
	}
	if c.OTLPEndpoint = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); c.OTLPEndpoint != "" {
		if u, err := url.Parse(c.OTLPEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %q: want an http(s) URL like http://collector:4318", c.OTLPEndpoint)
		}
	}
	c.ServiceName = or(getenv("OTEL_SERVICE_NAME"), "lifeline")
	_, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return c, fmt.Errorf("LIFELINE_ADDR %q: %w", c.Addr, err)
	}
	c.BaseURL = strings.TrimRight(or(getenv("LIFELINE_BASE_URL"), "http://localhost:"+port), "/")
	if c.OwnServers, err = ownServers(c.DatabaseURL, c.Addr); err != nil {
		return c, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if c.Demo {
		// The demo's steps call the built-in sandbox on this server's loopback address.
		c.OutboundAllow = append(c.OutboundAllow, netip.MustParsePrefix("127.0.0.1/32"))
	}
	return c, nil
}

// ownServers lists the database servers of databaseURL when it is PostgreSQL, read as the
// driver reads it (PGHOST, PGPORT and the like fill what it leaves out), and the listen
// address addr: where a database connection must never go.
func ownServers(databaseURL, addr string) ([]string, error) {
	out := []string{addr}
	if !isPostgres(databaseURL) {
		return out, nil
	}
	pc, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, err
	}
	cc := pc.ConnConfig.Config
	add := func(host string, port uint16) {
		if strings.HasPrefix(host, "/") { // a Unix socket: the server is on this machine
			host = ""
		}
		if hp := net.JoinHostPort(host, strconv.Itoa(int(port))); !slices.Contains(out, hp) {
			out = append(out, hp)
		}
	}
	add(cc.Host, cc.Port)
	for _, f := range cc.Fallbacks {
		add(f.Host, f.Port)
	}
	return out, nil
}

func isPostgres(databaseURL string) bool {
	return strings.HasPrefix(databaseURL, "postgres://") || strings.HasPrefix(databaseURL, "postgresql://")
}

// parsePrefixes reads comma-separated CIDRs (a bare address is its /32 or /128).
func parsePrefixes(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			a, err := netip.ParseAddr(part)
			if err != nil {
				return nil, fmt.Errorf("%q is not an address or CIDR", part)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR like 10.0.0.0/8", part)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// dataDir is the folder of the embedded SQLite database, or ./data for PostgreSQL.
func dataDir(databaseURL string) string {
	if isPostgres(databaseURL) {
		return filepath.Dir(models.DefaultSQLitePath)
	}
	p := strings.TrimPrefix(strings.TrimPrefix(databaseURL, "sqlite://"), "file:")
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	if p == "" {
		p = models.DefaultSQLitePath
	}
	return filepath.Dir(p)
}

// SandboxBase is where the demo's workflows reach the sandbox.
func (c Config) SandboxBase() string {
	_, port, _ := net.SplitHostPort(c.Addr)
	return "http://127.0.0.1:" + port + "/sandbox"
}

func or(v, def string) string {
	if strings.TrimSpace(v) == "" {
		return def
	}
	return strings.TrimSpace(v)
}

func parseBool(v string, def bool) (bool, error) {
	if strings.TrimSpace(v) == "" {
		return def, nil
	}
	return strconv.ParseBool(strings.TrimSpace(v))
}

func parseDuration(v string, def time.Duration) (time.Duration, error) {
	if strings.TrimSpace(v) == "" {
		return def, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err == nil && d <= 0 {
		err = fmt.Errorf("must be positive")
	}
	return d, err
}
