package bulk

import (
	"regexp"
	"strings"
)

// pathRE is an input field's path: object keys separated by dots.
var pathRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,99}(\.[A-Za-z_][A-Za-z0-9_-]{0,99}){0,7}$`)

// ValidPath reports whether p is a field path an edit_retry takes ("clientNip", "client.nip").
func ValidPath(p string) bool { return pathRE.MatchString(p) }

// Masked reports whether a key on the path p is a secret's (the redactor's keys): its value
// is never shown, so it is not set for many items at once.
func Masked(r Redactor, p string) bool {
	for k := range strings.SplitSeq(p, ".") {
		if r.Match(k) {
			return true
		}
	}
	return false
}

// GetPath returns the value at the path p of a decoded JSON document, and whether it is there.
func GetPath(doc any, p string) (any, bool) {
	cur := doc
	for k := range strings.SplitSeq(p, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// SetPath sets the value at the path p of a decoded JSON document where that field already
// is, and reports whether it was there (a field is changed, never added).
func SetPath(doc any, p string, v any) bool {
	keys := strings.Split(p, ".")
	cur := doc
	for i, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m[k]; !ok {
			return false
		}
		if i == len(keys)-1 {
			m[k] = v
			return true
		}
		cur = m[k]
	}
	return false
}
