package redact

import (
	"encoding/json"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// MinValueLength is the shortest secret masked by its value. Shorter values (a PIN, "abc")
// would mask ordinary words and numbers in every text; they are still masked under their
// secret-looking keys.
const MinValueLength = 6

// Masker finds known secret values wherever they appear in text, whatever holds them: a
// template that copied a password into a plain key, upper() or lower() of a token, a
// secret inside a longer string or inside a JSON text (toJSON(input)). A secret matches
// case-insensitively, and in the forms it takes once escaped for JSON (once and twice) or
// for a URL. A nil *Masker masks nothing; a Masker is immutable and safe for concurrent use.
type Masker struct {
	re *regexp.Regexp
}

// NewMasker returns a Masker of values, or nil when no value is at least MinValueLength
// long (after trimming spaces).
func NewMasker(values ...string) *Masker {
	set := map[string]bool{}
	for _, v := range values {
		v = strings.TrimSpace(v)
		if len(v) < MinValueLength || v == Placeholder {
			continue
		}
		for _, f := range forms(v) {
			set[f] = true
		}
	}
	if len(set) == 0 {
		return nil
	}
	all := make([]string, 0, len(set))
	for f := range set {
		all = append(all, f)
	}
	// Longest first: alternation takes the first that matches, so a value that contains
	// another is masked whole.
	sort.Slice(all, func(i, j int) bool {
		if len(all[i]) != len(all[j]) {
			return len(all[i]) > len(all[j])
		}
		return all[i] < all[j]
	})
	for i, f := range all {
		all[i] = regexp.QuoteMeta(f)
	}
	return &Masker{re: regexp.MustCompile(`(?i)(?:` + strings.Join(all, "|") + `)`)}
}

// forms returns v as it may appear in text: as it is, escaped inside a JSON string (once,
// and twice for a JSON text inside a JSON string; with and without HTML escaping), and
// percent-encoded for a URL.
func forms(v string) []string {
	out := []string{v, url.QueryEscape(v), url.PathEscape(v)}
	level := []string{v}
	for range 2 {
		var next []string
		for _, s := range level {
			next = append(next, jsonInner(s, true), jsonInner(s, false))
		}
		out = append(out, next...)
		level = next
	}
	return out
}

// jsonInner is s as it is written inside a JSON string (without the quotes).
func jsonInner(s string, escapeHTML bool) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(s)
	out := strings.TrimSuffix(b.String(), "\n")
	return out[1 : len(out)-1]
}

// Mask replaces every secret in s by Placeholder.
func (m *Masker) Mask(s string) string {
	if m == nil || s == "" {
		return s
	}
	return m.re.ReplaceAllLiteralString(s, Placeholder)
}

// Find returns the byte ranges of the secrets in s ([start, end) pairs, in order, not
// overlapping); nil when there are none.
func (m *Masker) Find(s string) [][]int {
	if m == nil || s == "" {
		return nil
	}
	return m.re.FindAllStringIndex(s, -1)
}

// Value returns a deep copy of v (a decoded JSON value) with every string masked, object
// keys included.
func (m *Masker) Value(v any) any {
	if m == nil {
		return v
	}
	switch x := v.(type) {
	case string:
		return m.Mask(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[m.Mask(k)] = m.Value(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = m.Value(e)
		}
		return out
	case json.Number:
		if m.re.MatchString(string(x)) {
			return Placeholder
		}
	}
	return v
}

// JSON masks the strings of raw JSON (see Value); raw that is not one JSON value is masked
// as text.
func (m *Masker) JSON(raw []byte) []byte {
	if m == nil || len(raw) == 0 || !m.re.Match(raw) {
		return raw
	}
	v, err := decodeOne(raw)
	if err != nil {
		return []byte(m.Mask(string(raw)))
	}
	out, err := encodeCompact(m.Value(v))
	if err != nil {
		return []byte(m.Mask(string(raw)))
	}
	return out
}

// envelope finds values sealed at rest (services/secrets): a whole JSON value sealed as
// "enc:v1:<key>:<base64url>", a query parameter's value as "enc:t1:<key>:<base64url>", a
// secret found inside a text as "enc:s1:<key>:<base64url>." (ended by the dot).
var envelope = regexp.MustCompile(`enc:s1:[A-Za-z0-9_-]{1,32}:[A-Za-z0-9_-]+\.|enc:(?:v1|t1):[A-Za-z0-9_-]{1,32}:[A-Za-z0-9_-]+`)

// Envelopes replaces every sealed value inside s by Placeholder.
func Envelopes(s string) string {
	if !strings.Contains(s, "enc:") {
		return s
	}
	return envelope.ReplaceAllLiteralString(s, Placeholder)
}
