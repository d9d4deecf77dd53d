// Package dbconn keeps the database connections an organization's admins configure by name,
// and runs statements through them: the database_operation compensation's one
// parameterized statement, and the "Test connection" button.
//
// The contract:
//
//   - A connection has a name (1–100 letters, digits, '_' or '-', unique in the
//     organization), a driver ("postgres", the only one) and a DSN: a PostgreSQL URL
//     (postgres://user:password@host:5432/db) or key=value settings, at most 2,000
//     characters, naming its host and user, with only the settings host, port, dbname, user,
//     password, sslmode, connect_timeout and application_name (no setting that reads a file
//     of this server), and a key table (below; DefaultKeyTable unless given). Create and
//     Update answer apperr.Invalid with messages on "name", "driver", "dsn", "description"
//     and "keyTable"; Update with an empty DSN, or no key table, keeps the stored one.
//   - The DSN is stored sealed (models.DB.Sealer, bound to the row) and never leaves this
//     package: Connection carries it masked ("postgres://user:•••@host:5432/db"), and error
//     messages never contain the password.
//   - A connection never reaches Lifeline's own servers (Config.Own): its database server
//     (the hosts and ports of DATABASE_URL) and its listen address (LIFELINE_ADDR). An own
//     server's port counts on every address its host resolves to and, when that is an
//     address of this machine, on every address of this machine: all of 127.0.0.0/8, ::1,
//     0.0.0.0, ::, IPv4-mapped forms, and every interface's address (net.InterfaceAddrs).
//     Create and Update refuse a DSN whose hosts resolve to one (apperr.Invalid on "dsn");
//     and since a name can resolve elsewhere later, every dial checks again, on the very
//     address it then connects to (it resolves the name itself and dials the address it
//     checked, so DNS rebinding cannot slip past): OWN_SERVER, before any connection is
//     made. An own server's host that has never resolved refuses every dial
//     (OWN_SERVER_UNKNOWN); addresses it resolved to once stay refused.
//   - Every connection to a database server is dialled through the SSRF guard of HTTP steps
//     (services/outbound) with an allow list of its own: the address is checked at dial
//     time, after DNS resolution; loopback and private addresses only inside Config.Allow
//     (LIFELINE_DBCONN_ALLOW, not LIFELINE_OUTBOUND_ALLOW), link-local and cloud metadata
//     addresses never. A refused address fails before any connection is made
//     (DESTINATION_DENIED).
//   - A privileged role is refused, right after connecting, by Test and by Exec before its
//     statement (PRIVILEGED_ROLE, permanent, saying why): a superuser or a member of a
//     superuser role, a role that can read pg_authid, a member of pg_read_all_data,
//     pg_write_all_data, pg_read_server_files, pg_write_server_files or
//     pg_execute_server_program, a role with BYPASSRLS, or with CREATEROLE (before
//     PostgreSQL 16 it can grant itself any of those roles). One query checks it all.
//   - Exec runs exactly one statement with its values bound as parameters ($1, $2…), never
//     spliced into the SQL, through the extended protocol (which refuses several statements
//     in one string, even with no values), in a transaction with SET LOCAL
//     statement_timeout, committed when the statement succeeds.
//   - Exec runs a statement exactly once per idempotency key (the compensation key): the
//     key is recorded in the connection's key table, in the target database, in the
//     statement's own transaction before the statement runs, so the two commit together or
//     not at all, and a run that finds its key committed does not run the statement again
//     (Result.Replayed, with the rows the committed run affected). The key table (columns
//     key TEXT PRIMARY KEY, executed_at TIMESTAMPTZ, rows_affected BIGINT) is created on
//     first use where the role may; where it may not, Exec refuses before the statement
//     with KEY_TABLE (permanent), saying which table to create and what to grant. Changing
//     a connection's key table forgets the keys recorded in the old one.
//   - Exec's errors are *Error, typed for services/classify (validation for SQL and data
//     errors, transient for connection, serialization and deadlock failures, timeout for
//     the statement timeout…), except an unknown connection name, which is
//     apperr.NotFound("database connection").
//   - Database errors are not a channel: an *Error's message (what the engine stores and
//     pages show) is the SQLSTATE and its condition name from PostgreSQL's Appendix A
//     ("22P02 invalid_text_representation"), never the server's message text, which can
//     quote data; failures to connect are fixed phrases naming the host and port as the DSN
//     gives them, never an address a name resolved to. The full text is neither stored nor
//     logged.
//   - Test connects and checks the role within TestTimeout, and records when and with which
//     error (nil for success) on the connection.
//   - A connection is opened for each call and closed before it returns; the package starts
//     no goroutine.
//   - Create, Update and Delete write the audit events connection.created,
//     connection.updated and connection.deleted in their transaction (with the DSN masked).
package dbconn

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/audit"
	"lifeline/services/classify"
	"lifeline/services/outbound"
)

// Limits and defaults.
const (
	// Driver is the only driver: PostgreSQL.
	Driver = "postgres"
	// MaxDSNLength is the longest DSN, in bytes.
	MaxDSNLength = 2000
	// MaxDescriptionLength is the longest description, in characters.
	MaxDescriptionLength = 500
	// DefaultTimeout is Exec's statement timeout when none is given; MaxTimeout the longest.
	DefaultTimeout = 10 * time.Second
	MaxTimeout     = 60 * time.Second
	// TestTimeout bounds a connection test: connecting and SELECT 1.
	TestTimeout = 5 * time.Second
	// connectTimeout bounds connecting for Exec (unless the DSN's connect_timeout is shorter).
	connectTimeout = 10 * time.Second
)

// Config configures a Service.
type Config struct {
	// Allow lists the networks outside the public internet that database servers may be
	// reached at (LIFELINE_DBCONN_ALLOW, e.g. 10.0.0.0/8; not LIFELINE_OUTBOUND_ALLOW, which
	// is for HTTP). Empty: public addresses only. It cannot open link-local or cloud metadata
	// addresses, nor an Own server.
	Allow []netip.Prefix
	// Own are Lifeline's own servers as "host:port": its database server (DATABASE_URL's
	// hosts and ports) and its listen address (LIFELINE_ADDR; an empty host is every address
	// of this machine). A connection never reaches one: see the package documentation.
	Own []string
	// Now is the clock of created_at, updated_at and last_tested_at (time.Now when nil).
	Now func() time.Time
}

// Service manages the connections and runs statements through them.
type Service struct {
	db   *models.DB
	now  func() time.Time
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	own  *own
}

// New returns the service.
func New(db *models.DB, cfg Config) *Service {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Service{db: db, now: func() time.Time { return now().UTC() }, dial: guardedDial(cfg.Allow),
		own: &own{servers: slices.Clone(cfg.Own), seen: map[string][]netip.AddrPort{}}}
}

// guardedDial returns the dialer of outbound's SSRF-safe client: outbound documents the
// client's Transport as an *http.Transport whose dialer checks each address it connects to,
// so database connections obey the same rules as HTTP steps. Should that ever change, every
// dial fails (closed, not open).
func guardedDial(allow []netip.Prefix) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if tr, ok := outbound.NewClient(outbound.Options{Allow: allow}).Transport.(*http.Transport); ok && tr.DialContext != nil {
		return tr.DialContext
	}
	return func(context.Context, string, string) (net.Conn, error) {
		return nil, fmt.Errorf("%w: no guarded dialer", outbound.ErrDenied)
	}
}

// Connection is a connection as pages and the API show it: the DSN masked.
type Connection struct {
	ID          string
	Name        string
	Driver      string
	MaskedDSN   string
	Description string
	// KeyTable is the table in the connection's database where database_operation
	// compensations record their idempotency keys ("schema.table" or "table").
	KeyTable  string
	CreatedBy string // the user's or API token's id; "" for the system
	CreatedAt time.Time
	UpdatedAt time.Time
	// LastTestedAt is when the connection was last tested (nil: never); LastTestError that
	// test's error ("" when it succeeded).
	LastTestedAt  *time.Time
	LastTestError string
}

func view(c *models.DBConnection) *Connection {
	out := &Connection{ID: c.ID, Name: c.Name, Driver: c.Driver, MaskedDSN: MaskDSN(c.DSN), Description: c.Description,
		KeyTable: orText(c.KeyTable, DefaultKeyTable), CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC(), LastTestedAt: c.LastTestedAt}
	if c.CreatedBy != nil {
		out.CreatedBy = *c.CreatedBy
	}
	if c.LastTestError != nil {
		out.LastTestError = *c.LastTestError
	}
	if out.LastTestedAt != nil {
		t := out.LastTestedAt.UTC()
		out.LastTestedAt = &t
	}
	return out
}

// Input is what Create and Update take.
type Input struct {
	Name   string
	Driver string // "" is Driver
	// DSN is the connection string; on Update "" keeps the stored one.
	DSN         string
	Description string
	// KeyTable names the key table of database_operation compensations: a table name of
	// lowercase letters, digits and '_', optionally schema-qualified ("ledger.keys"). Nil
	// keeps the stored one (DefaultKeyTable on Create); "" is DefaultKeyTable.
	KeyTable *string
}

// List returns the organization's connections by name.
func (s *Service) List(ctx context.Context, orgID string) ([]Connection, error) {
	cs, err := s.db.DBConnections(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Connection, len(cs))
	for i := range cs {
		out[i] = *view(&cs[i])
	}
	return out, nil
}

// Get returns the organization's connection id, or ENOTFOUND (also for an id that is not a
// UUID, or another organization's).
func (s *Service) Get(ctx context.Context, orgID, id string) (*Connection, error) {
	c, err := s.get(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	return view(c), nil
}

func (s *Service) get(ctx context.Context, orgID, id string) (*models.DBConnection, error) {
	if u, err := uuid.Parse(id); err != nil || u.String() != id {
		return nil, apperr.NotFound("database connection")
	}
	return s.db.GetDBConnection(ctx, orgID, id)
}

// Create adds a connection to the organization: EINVALID with field messages when the input
// is not valid (a name the organization already uses, a DSN that reaches Lifeline's own
// servers included). Audit connection.created.
func (s *Service) Create(ctx context.Context, orgID string, actor audit.Actor, in Input) (*Connection, error) {
	if fields := s.validate(ctx, &in, true); len(fields) > 0 {
		return nil, apperr.Invalid("The connection has errors.", fields)
	}
	now := s.now()
	c := models.DBConnection{ID: models.NewID(), OrganizationID: orgID, Name: in.Name, Driver: in.Driver, DSN: in.DSN,
		Description: in.Description, KeyTable: DefaultKeyTable, CreatedAt: now, UpdatedAt: now}
	if in.KeyTable != nil {
		c.KeyTable = *in.KeyTable
	}
	if actor.ID != "" {
		id := actor.ID
		c.CreatedBy = &id
	}
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		if err := nameFree(tx, orgID, in.Name, ""); err != nil {
			return err
		}
		if err := s.db.CreateDBConnection(tx, &c); err != nil {
			return err
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "connection.created", EntityType: "db_connection",
			EntityID: c.ID, At: now, Details: map[string]any{"name": c.Name, "driver": c.Driver, "dsn": MaskDSN(c.DSN), "description": c.Description,
				"keyTable": c.KeyTable}})
	})
	if err != nil {
		return nil, err
	}
	return view(&c), nil
}

// Update changes the organization's connection id (ENOTFOUND for another's): EINVALID with
// field messages when the input is not valid (as Create). An empty DSN keeps the stored one;
// a new DSN forgets the last test. Audit connection.updated, with what changed (the DSN masked).
func (s *Service) Update(ctx context.Context, orgID, id string, actor audit.Actor, in Input) (*Connection, error) {
	c, err := s.get(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	if fields := s.validate(ctx, &in, false); len(fields) > 0 {
		return nil, apperr.Invalid("The connection has errors.", fields)
	}
	before := *c
	c.Name, c.Driver, c.Description, c.UpdatedAt = in.Name, in.Driver, in.Description, s.now()
	c.KeyTable = orText(c.KeyTable, DefaultKeyTable)
	if in.KeyTable != nil {
		c.KeyTable = *in.KeyTable
	}
	if in.DSN != "" && in.DSN != c.DSN {
		c.DSN, c.LastTestedAt, c.LastTestError = in.DSN, nil, nil
	}
	changed := map[string]any{}
	if before.Name != c.Name {
		changed["name"] = map[string]any{"from": before.Name, "to": c.Name}
	}
	if before.Driver != c.Driver {
		changed["driver"] = map[string]any{"from": before.Driver, "to": c.Driver}
	}
	if before.DSN != c.DSN {
		changed["dsn"] = map[string]any{"from": MaskDSN(before.DSN), "to": MaskDSN(c.DSN)}
	}
	if before.Description != c.Description {
		changed["description"] = map[string]any{"from": before.Description, "to": c.Description}
	}
	if orText(before.KeyTable, DefaultKeyTable) != c.KeyTable {
		changed["keyTable"] = map[string]any{"from": orText(before.KeyTable, DefaultKeyTable), "to": c.KeyTable}
	}
	err = s.db.Tx(ctx, func(tx *gorm.DB) error {
		if err := nameFree(tx, orgID, c.Name, c.ID); err != nil {
			return err
		}
		if err := s.db.UpdateDBConnection(tx, c); err != nil {
			return err
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "connection.updated", EntityType: "db_connection",
			EntityID: c.ID, At: c.UpdatedAt, Details: map[string]any{"name": c.Name, "changed": changed}})
	})
	if err != nil {
		return nil, err
	}
	return view(c), nil
}

// Delete removes the organization's connection id (ENOTFOUND for another's). Audit
// connection.deleted.
func (s *Service) Delete(ctx context.Context, orgID, id string, actor audit.Actor) error {
	c, err := s.get(ctx, orgID, id)
	if err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *gorm.DB) error {
		if err := s.db.DeleteDBConnection(tx, orgID, id); err != nil {
			return err
		}
		return audit.Record(tx, audit.Entry{OrganizationID: orgID, Actor: actor, Action: "connection.deleted", EntityType: "db_connection",
			EntityID: id, At: s.now(), Details: map[string]any{"name": c.Name, "dsn": MaskDSN(c.DSN)}})
	})
}

// nameFree is EINVALID on "name" when another connection of the organization (not id) has
// the name. The unique constraint decides races.
func nameFree(tx *gorm.DB, orgID, name, id string) error {
	var n int64
	if err := tx.Model(&models.DBConnection{}).Where("organization_id = ? AND name = ? AND id <> ?", orgID, name, orEmptyID(id)).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return apperr.Invalid("The connection has errors.", map[string]string{"name": models.DBConnectionNameTaken})
	}
	return nil
}

// orEmptyID is an id no row has, for comparisons with a UUID column.
func orEmptyID(id string) string {
	if id == "" {
		return "00000000-0000-0000-0000-000000000000"
	}
	return id
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)

// validate is the pure validation below, then a DSN's hosts resolved and checked against
// Lifeline's own servers (msgDSNOwn on "dsn").
func (s *Service) validate(ctx context.Context, in *Input, requireDSN bool) map[string]string {
	fields := validate(in, requireDSN)
	if in.DSN != "" && fields["dsn"] == "" {
		if cfg, _ := parseDSN(in.DSN); cfg != nil && s.savedReachesOwn(ctx, &cfg.Config) {
			fields["dsn"] = msgDSNOwn
		}
	}
	return fields
}

// validate normalizes in (trimmed name, DSN and description; the default driver) and
// returns its field messages, English, for views/i18n/locales/formats.
func validate(in *Input, requireDSN bool) map[string]string {
	fields := map[string]string{}
	in.Name = strings.TrimSpace(in.Name)
	switch {
	case in.Name == "":
		fields["name"] = "is required"
	case !validName.MatchString(in.Name):
		fields["name"] = "must be 1-100 letters, digits, '_' or '-'"
	}
	if in.Driver = strings.TrimSpace(in.Driver); in.Driver == "" {
		in.Driver = Driver
	}
	if in.Driver != Driver {
		fields["driver"] = "must be one of " + Driver
	}
	in.DSN = strings.TrimSpace(in.DSN)
	if in.DSN != "" || requireDSN {
		if _, msg := parseDSN(in.DSN); msg != "" {
			fields["dsn"] = msg
		}
	}
	if in.KeyTable != nil {
		k := strings.TrimSpace(*in.KeyTable)
		if k == "" {
			k = DefaultKeyTable
		}
		in.KeyTable = &k
		if _, ok := parseKeyTable(k); !ok {
			fields["keyTable"] = msgKeyTable
		}
	}
	in.Description = strings.TrimSpace(in.Description)
	switch {
	case utf8.RuneCountInString(in.Description) > MaxDescriptionLength:
		fields["description"] = fmt.Sprintf("must be at most %d characters", MaxDescriptionLength)
	case !utf8.ValidString(in.Description) || strings.IndexFunc(in.Description, func(r rune) bool {
		return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t'
	}) >= 0:
		fields["description"] = "must not contain control characters other than line breaks and tabs"
	}
	return fields
}

// config returns the driver's configuration of a stored DSN, dialling through the guard.
func (s *Service) config(c *models.DBConnection, connect time.Duration) (*pgx.ConnConfig, error) {
	cfg, msg := parseDSN(c.DSN)
	if msg != "" {
		return nil, &Error{Type: classify.Permanent, Code: "DSN", Message: fmt.Sprintf("database connection %q: the DSN %s", c.Name, msg)}
	}
	cfg.DialFunc = s.dialFunc
	if cfg.ConnectTimeout <= 0 || cfg.ConnectTimeout > connect {
		cfg.ConnectTimeout = connect
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "lifeline"
	}
	return cfg, nil
}

// Test connects to the organization's connection id and checks its role (a privileged one
// is refused: checkRole), within TestTimeout, and records the outcome on the connection. It
// returns the connection as recorded, and for a failed test also the failure (an *Error,
// its message as Error says: no text of the server's, no resolved address). ENOTFOUND for
// another organization's id.
func (s *Service) Test(ctx context.Context, orgID, id string) (*Connection, error) {
	c, err := s.get(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	testErr := s.test(ctx, c)
	at := s.now()
	var msg *string
	if testErr != nil {
		m := testErr.Message
		msg = &m
	}
	if err := s.db.RecordDBConnectionTest(ctx, orgID, id, at, msg); err != nil {
		return nil, err
	}
	c.LastTestedAt, c.LastTestError = &at, msg
	if testErr != nil {
		return view(c), testErr
	}
	return view(c), nil
}

func (s *Service) test(ctx context.Context, c *models.DBConnection) *Error {
	cfg, err := s.config(c, TestTimeout)
	if err != nil {
		return classified(ctx, err, "", false)
	}
	tctx, cancel := context.WithTimeout(ctx, TestTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(tctx, cfg)
	if err != nil {
		return classified(tctx, err, where(cfg), false)
	}
	defer closeConn(conn)
	if err := checkRole(tctx, conn, cfg.User); err != nil {
		return classified(tctx, err, where(cfg), !conn.IsClosed())
	}
	return nil
}

// Statement is what Exec runs.
type Statement struct {
	// Connection is the name of the organization's connection.
	Connection string
	// SQL is one statement, its values as parameters ($1, $2…).
	SQL string
	// Args are the values of the parameters.
	Args []any
	// Timeout is the statement_timeout of its transaction: DefaultTimeout when not positive,
	// at most MaxTimeout.
	Timeout time.Duration
	// Key is the statement's idempotency key (the compensation key: at most MaxKeyLength
	// bytes): the statement runs at most once per key in the connection's database.
	Key string
}

// Result is what Exec did.
type Result struct {
	// RowsAffected is the number of rows the statement affected; for a replay, the number
	// the run that committed recorded.
	RowsAffected int64
	// Replayed says the key was recorded already: an earlier run committed the statement,
	// which was not run again.
	Replayed bool
}

// Exec runs st.SQL with st.Args bound as its parameters ($1, $2…) through the
// organization's connection st.Connection, in a transaction whose statement_timeout is
// st.Timeout, exactly once per st.Key: in that transaction it first records the key in the
// connection's key table (KeyTable, in the target database; created there on first use),
// then runs the statement and records the rows it affected, and commits the three
// together. A key recorded already is a replay: the statement is not run again, and Result
// has the rows the committed run affected, with Replayed. A run of the same key in flight
// is waited for (within the timeout): when it commits, this one is a replay; when it rolls
// back, this one runs the statement.
//
// Errors: apperr.NotFound("database connection") for an unknown name; otherwise an *Error
// (classify.Classified): validation for an empty statement (EMPTY_STATEMENT), an empty or
// too long key (KEY), for several statements in one string or a syntax error, an unknown
// table or column, bad data or a violated constraint (SQLSTATE_42601, …), for a number of
// values other than the statement's parameters (PARAMETERS), a value the driver cannot send
// as its parameter's type (ARGUMENTS) or a statement that ends the transaction
// (TRANSACTION); timeout for the statement timeout (SQLSTATE_57014) or a connection that
// does not answer in time (ETIMEDOUT); transient for a refused or broken connection or a
// host that does not resolve (CONNECT, CONNECTION, ENOTFOUND, OWN_SERVER_UNKNOWN),
// serialization failures and deadlocks (SQLSTATE_40001, SQLSTATE_40P01); permanent for
// Lifeline's own servers (OWN_SERVER), an address the SSRF rules refuse
// (DESTINATION_DENIED) and a privileged role (PRIVILEGED_ROLE), all three before the
// statement is sent, and for a key table the role cannot create or use (KEY_TABLE, saying
// what to create or grant: before the statement is run); authorization for a rejected
// login or privilege (SQLSTATE_28P01, SQLSTATE_42501). Nothing is committed when it fails
// (but a key table it created).
func (s *Service) Exec(ctx context.Context, orgID string, st Statement) (Result, error) {
	if strings.Trim(st.SQL, " \t\r\n;") == "" {
		return Result{}, &Error{Type: classify.Validation, Code: "EMPTY_STATEMENT", Message: "the statement is empty"}
	}
	if st.Key == "" || len(st.Key) > MaxKeyLength {
		return Result{}, &Error{Type: classify.Validation, Code: "KEY",
			Message: fmt.Sprintf("the statement's idempotency key must be 1-%d bytes", MaxKeyLength)}
	}
	timeout := st.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	timeout = min(timeout, MaxTimeout)
	c, err := s.db.DBConnectionByName(ctx, orgID, st.Connection)
	if err != nil {
		return Result{}, err
	}
	table, ok := parseKeyTable(c.KeyTable)
	if !ok {
		return Result{}, keyTableError(fmt.Sprintf("database connection %q: the key table %s", c.Name, msgKeyTable))
	}
	cfg, err := s.config(c, connectTimeout)
	if err != nil {
		return Result{}, err
	}
	// The server ends the statement at its timeout; this deadline only guards against a
	// server or network that stops answering altogether.
	ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout+2*timeout+5*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return Result{}, classified(ctx, err, where(cfg), false)
	}
	defer closeConn(conn)
	res, err := runOnce(ctx, conn, cfg.User, table, st, timeout)
	if err != nil {
		return Result{}, classified(ctx, err, where(cfg), !conn.IsClosed())
	}
	return res, nil
}

// runOnce checks the role, makes sure of the key table and runs st once per key (see Exec)
// on conn; its errors are for classified.
func runOnce(ctx context.Context, conn *pgx.Conn, user string, table keyTable, st Statement, timeout time.Duration) (Result, error) {
	if err := checkRole(ctx, conn, user); err != nil {
		return Result{}, err
	}
	if err := ensureKeyTable(ctx, conn, table, user); err != nil {
		return Result{}, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after Commit: nothing to do
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d", timeout.Milliseconds())); err != nil {
		return Result{}, err
	}
	// Prepared under its own text, the statement is parsed by the extended protocol, which
	// refuses several statements; Exec then runs that prepared statement even with no values
	// (pgx would otherwise send a statement without values by the simple protocol). Checked
	// before the key is claimed: a statement that cannot run waits for no one.
	sd, err := conn.Prepare(ctx, st.SQL, st.SQL)
	if err != nil {
		return Result{}, err
	}
	if len(sd.ParamOIDs) != len(st.Args) {
		return Result{}, &Error{Type: classify.Validation, Code: "PARAMETERS",
			Message: fmt.Sprintf("the statement has %d parameters but %d values were given", len(sd.ParamOIDs), len(st.Args))}
	}
	claimed, err := claimKey(ctx, tx, table, st.Key)
	if err != nil {
		return Result{}, err
	}
	if !claimed {
		n, err := recordedRows(ctx, tx, table, st.Key)
		return Result{RowsAffected: n, Replayed: err == nil}, err
	}
	tag, err := tx.Exec(ctx, st.SQL, st.Args...)
	if err != nil {
		return Result{}, err
	}
	// COMMIT or ROLLBACK as the statement would part the key from the statement's effect.
	if conn.PgConn().TxStatus() != 'T' {
		return Result{}, &Error{Type: classify.Validation, Code: "TRANSACTION",
			Message: "the statement ended the transaction; it must run inside the one that records its idempotency key"}
	}
	if err := recordRows(ctx, tx, table, st.Key, tag.RowsAffected()); err != nil {
		return Result{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Result{}, err
	}
	return Result{RowsAffected: tag.RowsAffected()}, nil
}

// where names a config's database servers as its DSN does: "db.example.com:5432", or the
// hosts and ports of a DSN with several, joined by ", ".
func where(cfg *pgx.ConnConfig) string {
	var out []string
	for i, h := range hosts(&cfg.Config) {
		port := cfg.Port
		if i > 0 {
			port = cfg.Fallbacks[i-1].Port
		}
		if hp := net.JoinHostPort(h, fmt.Sprint(port)); !slices.Contains(out, hp) {
			out = append(out, hp)
		}
	}
	return strings.Join(out, ", ")
}

// closeConn closes a connection, waiting at most a second for the server to hear it.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
