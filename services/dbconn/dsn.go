package dbconn

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// allowedKeys are the settings a DSN may give. Everything else is refused, in particular the
// keys that make the driver read files of this server (passfile, servicefile, service,
// sslcert, sslkey, sslrootcert) and pgx's own options (default_query_exec_mode would let
// simple_protocol run several statements in one string).
var allowedKeys = []string{"host", "port", "dbname", "user", "password", "sslmode", "connect_timeout", "application_name"}

// Field messages of a DSN (English; views/i18n/locales/formats translates them).
const (
	msgDSNShape    = "must be a PostgreSQL URL (postgres://user:password@host:5432/database) or key=value settings (host=… user=… dbname=…)"
	msgDSNKey      = `may not set "%s"; allowed: %s`
	msgDSNHost     = "must name the database server's host (not a Unix socket)"
	msgDSNUser     = "must name the user"
	msgDSNTooLong  = "must be at most 2000 characters"
	msgDSNRequired = "is required"
	msgDSNOwn      = "must not reach Lifeline's own database server or web server"
)

// parseDSN parses a PostgreSQL DSN as a URL or key=value settings, with only allowedKeys.
// Settings the DSN leaves out never come from this server's environment or files where
// that would send them to the DSN's host: the host and user must be given, and without a
// password none is sent (not PGPASSWORD, not ~/.pgpass). It returns a field message when the
// DSN cannot be used.
func parseDSN(dsn string) (*pgx.ConnConfig, string) {
	if strings.TrimSpace(dsn) == "" {
		return nil, msgDSNRequired
	}
	if len(dsn) > MaxDSNLength {
		return nil, msgDSNTooLong
	}
	cfg, err := pgx.ParseConfigWithOptions(dsn, pgx.ParseConfigOptions{ParseConfigOptions: pgconn.ParseConfigOptions{ConnStringAllowedKeys: allowedKeys}})
	if err != nil {
		if m := notAllowed.FindStringSubmatch(err.Error()); m != nil {
			return nil, fmt.Sprintf(msgDSNKey, m[1], strings.Join(allowedKeys, ", "))
		}
		return nil, msgDSNShape
	}
	if !has(dsn, "host") {
		return nil, msgDSNHost
	}
	for _, h := range hosts(&cfg.Config) {
		if strings.HasPrefix(h, "/") || h == "" {
			return nil, msgDSNHost
		}
	}
	if !has(dsn, "user") || cfg.User == "" {
		return nil, msgDSNUser
	}
	if !has(dsn, "password") {
		cfg.Password = ""
	}
	return cfg, ""
}

// notAllowed finds the key the driver refused in its error (it names it); "" when the DSN
// was refused for its shape.
var notAllowed = regexp.MustCompile(`connection string key "([^"]+)" is not in ConnStringAllowedKeys`)

// has reports whether the DSN itself sets key (an allowed key): parsing it again without
// that key allowed fails exactly when it does.
func has(dsn, key string) bool {
	others := make([]string, 0, len(allowedKeys))
	for _, k := range allowedKeys {
		if k != key {
			others = append(others, k)
		}
	}
	_, err := pgconn.ParseConfigWithOptions(dsn, pgconn.ParseConfigOptions{ConnStringAllowedKeys: others})
	return err != nil
}

// hosts lists the hosts a config connects to (the first and every fallback).
func hosts(c *pgconn.Config) []string {
	out := []string{c.Host}
	for _, f := range c.Fallbacks {
		out = append(out, f.Host)
	}
	return out
}

// Mask is the text shown for the password.
const Mask = "•••"

var (
	kvPassword    = regexp.MustCompile(`(^|\s)(password\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:[^\s\\]|\\.)*)`)
	queryPassword = regexp.MustCompile(`([?&]password=)[^&#]*`)
)

// MaskDSN returns dsn with its password replaced by Mask wherever it is given (the URL's
// user information, a password query parameter, a password= setting), e.g.
// "postgres://user:•••@host:5432/db". Nothing else is hidden.
func MaskDSN(dsn string) string {
	out := dsn
	if rest, ok := cutScheme(dsn); ok {
		scheme := dsn[:len(dsn)-len(rest)]
		if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
			if user, _, hasPassword := strings.Cut(rest[:i], ":"); hasPassword {
				rest = user + ":" + Mask + rest[i:]
			}
		}
		out = queryPassword.ReplaceAllString(scheme+rest, "${1}"+Mask)
	} else {
		out = kvPassword.ReplaceAllString(dsn, "${1}${2}"+Mask)
	}
	// Whatever form the DSN had, the password it parses to never shows.
	if cfg, err := pgx.ParseConfigWithOptions(dsn, pgx.ParseConfigOptions{ParseConfigOptions: pgconn.ParseConfigOptions{ConnStringAllowedKeys: allowedKeys}}); err == nil && has(dsn, "password") {
		out = hide(out, cfg.Password)
	}
	return out
}

func cutScheme(dsn string) (string, bool) {
	for _, p := range []string{"postgres://", "postgresql://"} {
		if rest, ok := strings.CutPrefix(dsn, p); ok {
			return rest, true
		}
	}
	return "", false
}

// hide replaces password in text by Mask. Passwords of one or two characters are left: they
// would mask random letters of the text, and give nothing away.
func hide(text, password string) string {
	if len(password) < 3 {
		return text
	}
	return strings.ReplaceAll(text, password, Mask)
}
