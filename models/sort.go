package models

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"lifeline/models/apperr"
)

// keyKind is the type of a sort key's value, as a cursor carries it.
type keyKind int

const (
	keyTime keyKind = iota
	keyInt
	keyText
	// keyBig is a whole number of any sign and size (an amount in minor units, -1 for none).
	keyBig
)

// sortKey is one column (or expression) of a list's order.
type sortKey struct {
	expr string // qualified, as ORDER BY and the keyset compare it
	kind keyKind
}

// listSort is a named order of a list: its keys, then the row's id, all in one direction,
// so that the keyset of a page is one row-value comparison and one range of an index whose
// columns are (organization_id, keys…, id) (migration 00022; PostgreSQL scans it either way).
type listSort struct {
	name string
	keys []sortKey
	desc bool
}

// orderBy is the ORDER BY clause of s over table.
func (s listSort) orderBy(table string) string {
	dir := " ASC"
	if s.desc {
		dir = " DESC"
	}
	var b strings.Builder
	for _, k := range s.keys {
		b.WriteString(k.expr + dir + ", ")
	}
	b.WriteString(table + ".id" + dir)
	return b.String()
}

// after narrows q to the rows after the cursor in s's order: a row-value comparison of the
// keys and the id (PostgreSQL and SQLite 3.15+ both compare row values).
func (s listSort) after(q *gorm.DB, table string, vals []any, id string) *gorm.DB {
	cols := make([]string, 0, len(s.keys)+1)
	marks := make([]string, 0, len(s.keys)+1)
	for _, k := range s.keys {
		cols = append(cols, k.expr)
		marks = append(marks, "?")
	}
	cols, marks = append(cols, table+".id"), append(marks, "?")
	op := ">"
	if s.desc {
		op = "<"
	}
	return q.Where("("+strings.Join(cols, ", ")+") "+op+" ("+strings.Join(marks, ", ")+")", append(vals, id)...)
}

// sortCursor is what a cursor of a sorted page holds: the sort's name (a cursor of another
// order is refused), the last row's key values and its id.
type sortCursor struct {
	Sort string `json:"s"`
	Vals []any  `json:"v"`
	ID   string `json:"id"`
}

// maxSortCursor bounds a sorted page's cursor (a subject holds up to 300 characters).
const maxSortCursor = 1600

// encode makes the cursor of the page after the row with key values vals and id.
func (s listSort) encode(vals []any, id string) string {
	out := make([]any, len(vals))
	for i, v := range vals {
		if t, ok := v.(time.Time); ok {
			v = t.UTC().Format(time.RFC3339Nano)
		}
		out[i] = v
	}
	b, _ := json.Marshal(sortCursor{Sort: s.name, Vals: out, ID: id})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decode reads a cursor made by encode for this sort: the key values (typed as the query
// compares them) and the id. "" is the first page (nil, ""). Anything encode could not have
// made for s is an apperr.EINVALID error on the "cursor" field.
func (s listSort) decode(c string) ([]any, string, error) {
	if c == "" {
		return nil, "", nil
	}
	bad := func(why string) ([]any, string, error) {
		return nil, "", apperr.Invalid("The page cursor is not valid.",
			map[string]string{"cursor": why + "; use the \"next\" value of the previous page, or leave it out for the first page"})
	}
	if len(c) > maxSortCursor {
		return bad("is too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return bad("is not a cursor this server made")
	}
	var sc sortCursor
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&sc) != nil || sc.Sort != s.name || len(sc.Vals) != len(s.keys) {
		return bad("is not a cursor this server made for this order")
	}
	if u, err := uuid.Parse(sc.ID); err != nil || len(sc.ID) != 36 || u.String() != sc.ID {
		return bad("has an invalid id")
	}
	vals := make([]any, len(s.keys))
	for i, k := range s.keys {
		v, err := k.value(sc.Vals[i])
		if err != nil {
			return bad(err.Error())
		}
		vals[i] = v
	}
	return vals, sc.ID, nil
}

// value reads a cursor's key value as k's type.
func (k sortKey) value(v any) (any, error) {
	switch k.kind {
	case keyTime:
		s, ok := v.(string)
		t, err := time.Parse(time.RFC3339Nano, s)
		if t = t.UTC(); !ok || err != nil || t.Year() < 1 || t.Year() > 9999 {
			return nil, fmt.Errorf("has an invalid time")
		}
		return t, nil
	case keyInt:
		n, ok := v.(json.Number)
		i, err := n.Int64()
		if !ok || err != nil || i < 0 || i > 1<<31-1 {
			return nil, fmt.Errorf("has an invalid number")
		}
		return int(i), nil
	case keyBig:
		n, ok := v.(json.Number)
		i, err := n.Int64()
		if !ok || err != nil {
			return nil, fmt.Errorf("has an invalid number")
		}
		return i, nil
	default:
		s, ok := v.(string)
		if !ok || len(s) > 1200 {
			return nil, fmt.Errorf("has an invalid text")
		}
		return s, nil
	}
}

// findSort is the sort of sorts named name ("" is the first, the list's default).
func findSort(sorts []listSort, name string) (listSort, error) {
	if name == "" {
		return sorts[0], nil
	}
	for _, s := range sorts {
		if s.name == name {
			return s, nil
		}
	}
	names := make([]string, len(sorts))
	for i, s := range sorts {
		names[i] = s.name
	}
	return listSort{}, apperr.Invalid("The order is not valid.",
		map[string]string{"sort": "must be one of " + strings.Join(names, ", ")})
}

// sortNames are the names of sorts, the default first.
func sortNames(sorts []listSort) []string {
	out := make([]string, len(sorts))
	for i, s := range sorts {
		out[i] = s.name
	}
	return out
}
