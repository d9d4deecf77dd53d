package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"unicode/utf8"

	sqlite "github.com/glebarez/go-sqlite"
	"github.com/jackc/pgx/v5/pgconn"
)

// Column limits of what an attempt stores (see migrations): PostgreSQL refuses a longer
// value, so it is cut first.
const (
	maxErrorCode    = 50
	maxErrorMessage = 8000
	maxTrace        = 64 << 10
)

// cleanText makes s storable in a text column of at most max characters (0: no limit):
// NUL bytes are removed (PostgreSQL text cannot hold them), invalid UTF-8 is replaced, and
// the result is cut to max characters.
func cleanText(s string, max int) string {
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if max > 0 && utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

// cleanJSON makes raw storable in a JSON column on both databases: NUL characters are
// removed from strings and keys, and numbers that do not fit a float64 (which JSONB may
// also refuse, like 1e1000000) are kept as strings, digit for digit. Raw that is not valid
// JSON is stored as a JSON string of its text. Empty raw stays empty.
func cleanJSON(raw []byte) []byte {
	if len(bytes.TrimSpace(raw)) == 0 {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		b, _ := json.Marshal(cleanText(string(raw), 0))
		return b
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cleanValue(v)); err != nil {
		b, _ := json.Marshal(cleanText(string(raw), 0))
		return b
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

func cleanValue(v any) any {
	switch x := v.(type) {
	case string:
		return cleanText(x, 0)
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err != nil {
			return string(x)
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[cleanText(k, 0)] = cleanValue(val)
		}
		return out
	case []any:
		for i := range x {
			x[i] = cleanValue(x[i])
		}
		return x
	}
	return v
}

// permanentStoreError reports whether a failed commit will fail the same way when tried
// again: the database refused the data (PostgreSQL classes 22 data exception, 23 integrity,
// 42 syntax or undefined object, 54 limit exceeded; SQLite constraint, too big, mismatch or
// a generic SQL error). Connection loss, timeouts, serialization failures, busy and locked
// databases are transient.
func permanentStoreError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case strings.HasPrefix(pg.Code, "22"), strings.HasPrefix(pg.Code, "23"),
			strings.HasPrefix(pg.Code, "42"), strings.HasPrefix(pg.Code, "54"):
			return true
		}
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case 1, 18, 19, 20, 25: // ERROR, TOOBIG, CONSTRAINT, MISMATCH, RANGE
			return true
		}
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return false
	}
	// pgx reports a value it cannot encode (an invalid JSON, say) before sending it.
	s := err.Error()
	return strings.Contains(s, "cannot encode") || strings.Contains(s, "unable to encode")
}
