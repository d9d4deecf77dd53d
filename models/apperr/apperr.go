// Package apperr is Lifeline's one error type: a code a handler maps to an HTTP status in one
// place, and a message safe to show to the user. It imports nothing of ours, so any layer
// (definitions, services, the persistence layer) can return it.
package apperr

import (
	"errors"
	"fmt"
)

// Error codes a user may see. Handlers map them to HTTP statuses in one place.
const (
	ECONFLICT     = "conflict"
	EINVALID      = "invalid"
	ENOTFOUND     = "not_found"
	EFORBIDDEN    = "forbidden"
	EUNAUTHORIZED = "unauthorized"
	EINTERNAL     = "internal"
	// EPERIODCLOSED: the action would post into a period the office has closed (a conflict:
	// it may succeed once the period is reopened or the input moved to an open one).
	EPERIODCLOSED = "period_closed"
)

// Error is an error with a code and a message safe to show to the user. Fields holds
// field-level messages for EINVALID (keyed by the field's path, e.g. "steps[1].id").
type Error struct {
	Code    string
	Message string
	Fields  map[string]string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf returns an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns an EINVALID error with field messages.
func Invalid(message string, fields map[string]string) *Error {
	return &Error{Code: EINVALID, Message: message, Fields: fields}
}

// NotFound returns an ENOTFOUND error for a kind of thing ("workflow", "execution").
func NotFound(what string) *Error { return Errorf(ENOTFOUND, "%s not found", what) }

// ErrorCode returns the code of an *Error in err's chain, or EINTERNAL.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}
