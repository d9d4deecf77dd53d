package handlers

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/services/deadline"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// maxListLimit is the largest page a list serves; without "limit" it serves 50.
const maxListLimit = 200

// maxSearch bounds the search text q.
const maxSearch = 200

// maxParam bounds every other value a list reads (ids, names, cursors, dates).
const maxParam = 200

// stepIDPattern is a step id as definitions allow it.
var stepIDPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,99}$`)

// namePattern is a machine name such as an audit entity type ("workflow_execution").
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_.]{0,49}$`)

// listQuery reads and validates the query of a list page or list API before any query
// runs: the keys are the same in the page's form, its links and the API (workflowId,
// status, q, limit, cursor, and a list's own). It is the one place list filters are
// checked, so the pages and the API refuse the same values on SQLite and on PostgreSQL.
//
// Each reader returns the value, or "" / zero and a field message under the key itself
// (in the request's language) when it is not valid: more than one different value, text
// that is not UTF-8 or holds control characters (NUL…), longer than its limit, an id that
// is not a canonical UUID, a value outside its set, a date that does not parse. err
// reports every message at once (EINVALID, a 422).
type listQuery struct {
	l      *i18n.Localizer
	v      map[string][]string
	fields map[string]string
}

func newListQuery(c echo.Context) *listQuery {
	return queryOf(localizer(c), c.QueryParams())
}

// queryOf reads the keys of v (a request's query, a bulk action's filter).
func queryOf(l *i18n.Localizer, v map[string][]string) *listQuery {
	return &listQuery{l: l, v: v, fields: map[string]string{}}
}

// fail records the field message of key (the first one stays).
func (q *listQuery) fail(key, id string, args ...any) {
	if _, ok := q.fields[key]; !ok {
		q.fields[key] = q.l.T(id, args...)
	}
}

// text reads key as text of at most max characters: "" and false (with a message) when it
// has two different values, or a value that is not UTF-8, holds a control character or is
// too long.
func (q *listQuery) text(key string, max int, id string, args ...any) (string, bool) {
	vals := q.v[key]
	if len(vals) == 0 {
		return "", true
	}
	v := strings.TrimSpace(vals[0])
	for _, other := range vals[1:] {
		if strings.TrimSpace(other) != v {
			q.fail(key, "lists.error.one")
			return "", false
		}
	}
	if !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 || utf8.RuneCountInString(v) > max {
		q.fail(key, id, args...)
		return "", false
	}
	return v, true
}

// get reads a value of at most maxParam characters of text.
func (q *listQuery) get(key string) string {
	v, _ := q.text(key, maxParam, "lists.error.text", "Max", maxParam)
	return v
}

// shown is the value of key as a refused form shows it again: valid UTF-8 without
// control characters, at most maxSearch characters.
func (q *listQuery) shown(key string) string {
	vals := q.v[key]
	if len(vals) == 0 {
		return ""
	}
	v := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(vals[0], "\uFFFD"))
	if r := []rune(v); len(r) > maxSearch {
		v = string(r[:maxSearch])
	}
	return strings.TrimSpace(v)
}

// oneOf reads a value that must be one of allowed.
func (q *listQuery) oneOf(key string, allowed []string) string {
	v, ok := q.text(key, maxParam, "lists.error.oneof", "Values", strings.Join(allowed, ", "))
	if ok && v != "" && !oneOf(v, allowed) {
		q.fail(key, "lists.error.oneof", "Values", strings.Join(allowed, ", "))
		return ""
	}
	return v
}

// id reads an id (a UUID in its canonical form); msg is the message id of the refusal.
func (q *listQuery) id(key, msg string) string {
	v, ok := q.text(key, 36, msg)
	if ok && v != "" && !isUUID(v) {
		q.fail(key, msg)
		return ""
	}
	return v
}

// workflowID reads a workflow id.
func (q *listQuery) workflowID(key string) string { return q.id(key, "lists.error.workflow") }

// groupID reads a failure group's id.
func (q *listQuery) groupID(key string) string { return q.id(key, "lists.error.group") }

// stepID reads a step id.
func (q *listQuery) stepID(key string) string {
	v, ok := q.text(key, 100, "lists.error.step")
	if ok && v != "" && !stepIDPattern.MatchString(v) {
		q.fail(key, "lists.error.step")
		return ""
	}
	return v
}

// name reads a machine name (lower-case letters, digits, '_' and '.', at most 50).
func (q *listQuery) name(key string) string {
	v, ok := q.text(key, 50, "lists.error.name")
	if ok && v != "" && !namePattern.MatchString(v) {
		q.fail(key, "lists.error.name")
		return ""
	}
	return v
}

// maxCursor bounds a page's cursor (a sorted list's carries the last row's subject).
const maxCursor = 1600

// cursor reads a page's cursor: text of at most maxCursor characters; whether this server
// made it is the list's query to say.
func (q *listQuery) cursor() string {
	v, _ := q.text("cursor", maxCursor, "lists.error.text", "Max", maxCursor)
	return v
}

// sortColumn is a list's sortable column: its key, its first order and its other one (the
// names of the list's sort parameter).
type sortColumn struct{ key, first, other string }

// sortLinks are the header links of a list's sortable columns, by column key: each keeps
// the list's query (its filters, not its cursor) and chooses the column's first order, or
// its other one when the list is in the first; Aria is the column's aria-sort.
func sortLinks(base string, query url.Values, current string, cols []sortColumn) map[string]pages.SortLink {
	out := make(map[string]pages.SortLink, len(cols))
	for _, c := range cols {
		next, aria := c.first, ""
		switch current {
		case c.first:
			next, aria = c.other, direction(c.first)
		case c.other:
			aria = direction(c.other)
		}
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		q.Del("cursor")
		q.Set("sort", next)
		out[c.key] = pages.SortLink{URL: base + "?" + q.Encode(), Aria: aria}
	}
	return out
}

// countSet counts the values that are not empty (the filters in use).
func countSet(vals ...string) int {
	n := 0
	for _, v := range vals {
		if v != "" {
			n++
		}
	}
	return n
}

// direction is the aria-sort of a sort's column: a "-" sort is descending. Orders are
// named for what the column shows ("age" is youngest first: ascending ages).
func direction(sort string) string {
	if strings.HasPrefix(sort, "-") {
		return "descending"
	}
	return "ascending"
}

// search reads free text: at most maxSearch characters, no control characters.
func (q *listQuery) search(key string) string {
	v, _ := q.text(key, maxSearch, "lists.error.search", "Max", maxSearch)
	return v
}

// limit reads the page size: empty is the default (0), otherwise a whole number from 1 to
// maxListLimit.
func (q *listQuery) limit() int {
	v, ok := q.text("limit", 10, "lists.error.limit", "Max", maxListLimit)
	if !ok || v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxListLimit {
		q.fail("limit", "lists.error.limit", "Max", maxListLimit)
		return 0
	}
	return n
}

// day reads a date (YYYY-MM-DD) as the start of that day in the user's time zone.
func (q *listQuery) day(key string) time.Time {
	v, ok := q.text(key, 10, "lists.error.date")
	if !ok || v == "" {
		return time.Time{}
	}
	t, err := time.ParseInLocation(time.DateOnly, v, q.l.Zone())
	if err != nil {
		q.fail(key, "lists.error.date")
		return time.Time{}
	}
	return t
}

// period reads a period (YYYY-MM, YYYY-Qn or YYYY), written as deadline.Period writes it.
func (q *listQuery) period(key string) string {
	v, ok := q.text(key, 10, "lists.error.period")
	if !ok || v == "" {
		return ""
	}
	p, err := deadline.ParsePeriod(v)
	if err != nil {
		q.fail(key, "lists.error.period")
		return ""
	}
	return p.String()
}

// about reads the filters by what work is about: client, period, obligation, dueBefore.
func (q *listQuery) about() models.AboutFilter {
	return models.AboutFilter{Client: q.get("client"), Period: q.period("period"), Obligation: q.oneOf("obligation", deadline.Obligations),
		DueBefore: q.date("dueBefore")}
}

// date reads a calendar date (YYYY-MM-DD) as it is written.
func (q *listQuery) date(key string) string {
	v, ok := q.text(key, 10, "lists.error.date")
	if !ok || v == "" {
		return ""
	}
	if _, err := time.Parse(time.DateOnly, v); err != nil {
		q.fail(key, "lists.error.date")
		return ""
	}
	return v
}

// days reads the "from" and "to" dates: from the start of "from" to the end of "to";
// rangeMsg is the message id of a "to" before "from".
func (q *listQuery) days(rangeMsg string) (from, to time.Time) {
	from, to = q.day("from"), q.day("to")
	if !to.IsZero() {
		to = to.AddDate(0, 0, 1)
	}
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		q.fail("to", rangeMsg)
	}
	return from, to
}

// err is the EINVALID error with every field message, or nil.
func (q *listQuery) err() error {
	if len(q.fields) == 0 {
		return nil
	}
	return apperr.Invalid(q.l.T("lists.error.filter"), q.fields)
}
