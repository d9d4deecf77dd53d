package pages

import (
	"context"

	"lifeline/views/i18n"
)

// ConnectionsVM feeds Connections (the admins' database connections page).
type ConnectionsVM struct {
	Rows []ConnectionRow
	// Form is the "New connection" form (open when it has errors or there is no connection).
	Form ConnectionForm
	// Done confirms what just happened: "created", "updated", "deleted" or "" (nothing);
	// DoneName names the connection.
	Done, DoneName string
	// CSRF is the token of the rows' forms.
	CSRF string
}

// ConnectionRow is one connection. DSN is masked: it never holds the password.
type ConnectionRow struct {
	ID, Name, Driver, DSN, Description string
	// KeyTable is where its compensations record their idempotency keys.
	KeyTable                    string
	Test                        ConnectionTest
	EditURL, DeleteURL, TestURL string
	// Tested marks the row whose test just ran (without htmx): scrolled to and announced.
	Tested bool
}

// ConnectionTest is the outcome of a connection's last test (the row's cell, and the
// fragment the Test button swaps in).
type ConnectionTest struct {
	ConnectionID string
	Status       string // "" (never tested), "ok" or "failed"
	At, AtText   string // ISO and display time of the test
	AtRelative   string // "3 minutes ago"
	Error        string // the driver's or the database's error, the password masked
	// Live marks a result that just arrived, announced to screen readers.
	Live bool
}

// ConnectionForm creates or edits a connection. The DSN is never put back in the form: on
// edit an empty DSN keeps the stored one (shown masked as StoredDSN).
type ConnectionForm struct {
	Action      string
	Edit        bool
	Name        string
	Driver      string
	Description string
	// KeyTable is the idempotency table's name (the default on a new connection).
	KeyTable  string
	StoredDSN string // the stored DSN, masked (edit)
	// Retype says the DSN that was sent is not shown again and must be typed again.
	Retype    bool
	Drivers   []Option
	Errors    map[string]string
	FormError string
	CancelURL string
}

// ConnectionEditVM feeds ConnectionEdit.
type ConnectionEditVM struct {
	Name    string
	Form    ConnectionForm
	BackURL string
	Row     ConnectionRow // the last test and the Test and Delete actions
	CSRF    string
}

// dsnPlaceholder is the DSN field's placeholder: an example, or on edit that empty keeps it.
func dsnPlaceholder(ctx context.Context, f ConnectionForm) string {
	if f.Edit {
		return i18n.T(ctx, "connections.dsn.placeholder.keep")
	}
	return "postgres://user:password@host:5432/database"
}
