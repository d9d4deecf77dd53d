package dbconn

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"lifeline/services/classify"
	"lifeline/services/outbound"
)

// Error is a failure of a statement or of a connection test. It is a classify.Classified:
// its type decides whether the compensation is retried. Its message is the database's or the
// driver's own, never with the connection's password; Unwrap gives the cause (a
// *pgconn.PgError, a dial error…).
type Error struct {
	Type classify.Type
	// Code is "SQLSTATE_<code>" for an error the database answered (SQLSTATE_57014 for the
	// statement timeout), or one of DESTINATION_DENIED, ETIMEDOUT, CONNECT, CONNECTION,
	// ARGUMENTS, PARAMETERS, EMPTY_STATEMENT, DSN.
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

// classified turns an error of connecting or running into an *Error whose message hides
// password. alive tells whether the connection still works after err (an argument the driver
// could not encode leaves it working; a broken network does not).
func classified(ctx context.Context, err error, password string, alive bool) *Error {
	var de *Error
	if errors.As(err, &de) {
		return de
	}
	msg := hide(err.Error(), password)
	var pe *pgconn.PgError
	var ne net.Error
	switch {
	case errors.As(err, &pe):
		return &Error{Type: sqlstateType(pe.Code), Code: "SQLSTATE_" + pe.Code, Message: msg, Err: err}
	case errors.Is(err, outbound.ErrDenied):
		return &Error{Type: classify.Permanent, Code: "DESTINATION_DENIED", Err: err,
			Message: msg + " (the database server's address is private, loopback, link-local or a cloud metadata address; see LIFELINE_OUTBOUND_ALLOW)"}
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded || pgconn.Timeout(err) || (errors.As(err, &ne) && ne.Timeout()):
		return &Error{Type: classify.Timeout, Code: "ETIMEDOUT", Message: msg, Err: err}
	case errors.Is(err, context.Canceled):
		return &Error{Type: classify.Internal, Code: "CANCELED", Message: msg, Err: err}
	}
	var ce *pgconn.ConnectError
	switch {
	case errors.As(err, &ce):
		return &Error{Type: classify.Transient, Code: "CONNECT", Message: msg, Err: err}
	case alive && strings.Contains(msg, "encode"):
		return &Error{Type: classify.Validation, Code: "ARGUMENTS", Message: msg, Err: err}
	}
	return &Error{Type: classify.Transient, Code: "CONNECTION", Message: msg, Err: err}
}
