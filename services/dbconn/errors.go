package dbconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"lifeline/services/classify"
	"lifeline/services/outbound"
)

// Error is a failure of a statement or of a connection test. It is a classify.Classified:
// its type decides whether the compensation is retried. Its message is made of fixed
// phrases, the SQLSTATE and its condition name, the host and port the DSN names (as the
// admin typed them) and its user: never the database's own message text (which can carry
// data: an error about a value quotes the value), never an address a name resolved to,
// never the password. Unwrap gives the kind of cause, never the driver's error itself (whose
// text has all of those): a *pgconn.PgError with only its Severity and Code,
// ErrOwnServer, outbound.ErrDenied, context.DeadlineExceeded, context.Canceled,
// syscall.ECONNREFUSED, or nil.
type Error struct {
	Type classify.Type
	// Code is "SQLSTATE_<code>" for an error the database answered (SQLSTATE_57014 for the
	// statement timeout), or one of OWN_SERVER, OWN_SERVER_UNKNOWN, DESTINATION_DENIED,
	// PRIVILEGED_ROLE, ENOTFOUND, ETIMEDOUT, CANCELED, CONNECT, CONNECTION, ARGUMENTS,
	// PARAMETERS, EMPTY_STATEMENT, KEY, KEY_TABLE, TRANSACTION, DSN.
	Code    string
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Message }

// ErrorType is the classification (classify.Classified).
func (e *Error) ErrorType() classify.Type { return e.Type }

// ErrorCode is the code (classify.Classified).
func (e *Error) ErrorCode() string { return e.Code }

func (e *Error) Unwrap() error { return e.Err }

var _ classify.Classified = (*Error)(nil)

// sqlstateType classifies an error the database answered by its SQLSTATE: class 42 (syntax
// error, undefined table or column), 22 (data) and 23 (constraints) are validation, except
// 42501 (insufficient privilege) and class 28 (authentication), which are authorization;
// serialization failures and deadlocks (40001, 40P01), a lock not available, connection
// exceptions (08), insufficient resources (53) and a server shutting down or starting (57P0x)
// are transient; the statement timeout or a cancel (57014) is timeout; an unknown database
// (3D000) is permanent; anything else is external_service.
func sqlstateType(code string) classify.Type {
	switch code {
	case "57014":
		return classify.Timeout
	case "40001", "40P01", "55P03", "57P01", "57P02", "57P03":
		return classify.Transient
	case "42501":
		return classify.Authorization
	case "3D000":
		return classify.Permanent
	}
	if len(code) != 5 {
		return classify.ExternalService
	}
	switch code[:2] {
	case "42", "22", "23":
		return classify.Validation
	case "28":
		return classify.Authorization
	case "08", "53":
		return classify.Transient
	}
	return classify.ExternalService
}

// sqlstateText is how a SQLSTATE is shown: the code and its condition name ("22P02
// invalid_text_representation"), a code PostgreSQL's Appendix A does not list with its
// class ("22ZZZ (class Data Exception)", "ZZ999 (unknown class)"), and a code that is not
// five digits or capital letters as "an invalid SQLSTATE" (nothing the server sent is
// repeated but a well-formed code).
func sqlstateText(code string) string {
	if !validSQLSTATE(code) {
		return "an invalid SQLSTATE"
	}
	if name, ok := sqlstateNames[code]; ok {
		return code + " " + name
	}
	if class, ok := sqlstateClasses[code[:2]]; ok {
		return code + " (class " + class + ")"
	}
	return code + " (unknown class)"
}

func validSQLSTATE(code string) bool {
	if len(code) != 5 {
		return false
	}
	for _, r := range code {
		if (r < '0' || r > '9') && (r < 'A' || r > 'Z') {
			return false
		}
	}
	return true
}

// argIndex finds the value the driver could not encode in its error ("failed to encode
// args[1]: …").
var argIndex = regexp.MustCompile(`args\[(\d+)\]`)

// classified turns an error of connecting or running into an *Error with a message of fixed
// phrases (see Error). where names the database server as the DSN does ("db.example.com:5432").
// alive tells whether the connection still works after err (an argument the driver could
// not encode leaves it working; a broken network does not).
func classified(ctx context.Context, err error, where string, alive bool) *Error {
	var de *Error
	if errors.As(err, &de) {
		return de
	}
	var pe *pgconn.PgError
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &pe):
		code := "INVALID"
		if validSQLSTATE(pe.Code) {
			code = pe.Code
		}
		return &Error{Type: sqlstateType(code), Code: "SQLSTATE_" + code, Message: sqlstateText(pe.Code),
			Err: &pgconn.PgError{Severity: sqlstateSeverity(pe.Severity), Code: code}}
	case errors.Is(err, ErrOwnServer):
		return &Error{Type: classify.Permanent, Code: "OWN_SERVER", Err: ErrOwnServer,
			Message: fmt.Sprintf("the database server %s is Lifeline's own database server or web server; a connection may not reach it", where)}
	case errors.Is(err, errOwnUnknown):
		return &Error{Type: classify.Transient, Code: "OWN_SERVER_UNKNOWN", Err: errOwnUnknown,
			Message: "the address of Lifeline's own database server could not be resolved, so the connection could not be checked against it"}
	case errors.Is(err, outbound.ErrDenied):
		return &Error{Type: classify.Permanent, Code: "DESTINATION_DENIED", Err: outbound.ErrDenied,
			Message: fmt.Sprintf("the database server %s is at an address that is private, loopback, link-local or a cloud metadata address (see LIFELINE_DBCONN_ALLOW)", where)}
	case errors.As(err, &dns) && !dns.IsTimeout:
		return &Error{Type: classify.Transient, Code: "ENOTFOUND", Message: fmt.Sprintf("the database server's host %s could not be resolved", where)}
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded || pgconn.Timeout(err) || (errors.As(err, &ne) && ne.Timeout()):
		return &Error{Type: classify.Timeout, Code: "ETIMEDOUT", Message: fmt.Sprintf("the database server %s did not answer in time", where), Err: context.DeadlineExceeded}
	case errors.Is(err, context.Canceled):
		return &Error{Type: classify.Internal, Code: "CANCELED", Message: "cancelled", Err: context.Canceled}
	}
	var ce *pgconn.ConnectError
	switch {
	case errors.As(err, &ce):
		e := &Error{Type: classify.Transient, Code: "CONNECT", Message: fmt.Sprintf("could not connect to the database server %s", where)}
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			e.Message, e.Err = fmt.Sprintf("the database server %s refused the connection", where), syscall.ECONNREFUSED
		case strings.Contains(err.Error(), "tls error"):
			e.Message = fmt.Sprintf("could not set up TLS with the database server %s", where)
		}
		return e
	case alive && strings.Contains(err.Error(), "encode"):
		msg := "a value cannot be sent as the type of its parameter"
		if m := argIndex.FindStringSubmatch(err.Error()); m != nil {
			if i, err := strconv.Atoi(m[1]); err == nil {
				msg = fmt.Sprintf("value %d cannot be sent as the type of its parameter ($%d)", i+1, i+1)
			}
		}
		return &Error{Type: classify.Validation, Code: "ARGUMENTS", Message: msg}
	}
	return &Error{Type: classify.Transient, Code: "CONNECTION", Message: fmt.Sprintf("the connection to the database server %s failed", where)}
}

// sqlstateSeverity keeps a PostgreSQL severity (ERROR, FATAL, PANIC…), nothing else.
func sqlstateSeverity(s string) string {
	switch s {
	case "ERROR", "FATAL", "PANIC", "WARNING", "NOTICE", "DEBUG", "INFO", "LOG":
		return s
	}
	return "ERROR"
}
