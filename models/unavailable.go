package models

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	sqlite "github.com/glebarez/go-sqlite"
	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable reports whether err says the database could not be reached or could not take
// the statement for now (it is down, restarting, unreachable, or, for SQLite, locked or
// read-only), as opposed to refusing the statement itself. Trying again later may succeed.
func Unavailable(err error) bool {
	// A deadline that passed says nothing about the database: the caller may have been
	// waiting for a connection of its own pool. (net.Error timeouts are the network's.)
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		// 08: connection exception; 57P01-57P03: the server is shutting down or starting up.
		return strings.HasPrefix(pg.Code, "08") || pg.Code == "57P01" || pg.Code == "57P02" || pg.Code == "57P03"
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case 5, 6, 8, 10, 14: // BUSY, LOCKED, READONLY, IOERR, CANTOPEN
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	s := strings.ToLower(err.Error())
	for _, m := range []string{"conn closed", "connection refused", "connection reset", "broken pipe", "unexpected eof",
		"failed to connect", "closed pool", "server closed the connection", "the database system is"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// Busy reports whether err says the database is there but could not take the statement
// now: a serialization failure or deadlock (40001, 40P01), a lock not available (55P03),
// the connection limit or too few resources (53000, 53300), a statement timeout or cancel
// (57014). The same statement may succeed when tried again; the database is not down.
func Busy(err error) bool {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return false
	}
	switch pg.Code {
	case "40001", "40P01", "55P03", "53000", "53300", "57014":
		return true
	}
	return false
}
