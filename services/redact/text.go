package redact

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// queryParam finds "name=value" pairs of URL queries in free text, with plain or
// percent-encoded separators ("?", "&", ";", "%3F", "%26") and "=" or "%3D".
var queryParam = regexp.MustCompile(`(?i)(\?|&|;|%3F|%26)([A-Za-z0-9_.\-\[\]%]{1,100}?)(=|%3D)((?:[^&;\s#"'<>\\%]|%(?:[013-9A-F][0-9A-F]|2[0-57-9A-F]))*)`)

// Text masks the values of secret-looking query parameters in free text (URLs inside
// error messages, traces and log lines): "…?api_key=abc&page=2" becomes
// "…?api_key=[REDACTED]&page=2". Parameter names follow the same key rules as Match.
func (r *Redactor) Text(s string) string {
	if !strings.ContainsAny(s, "=%") {
		return s
	}
	return queryParam.ReplaceAllStringFunc(s, func(m string) string {
		p := queryParam.FindStringSubmatch(m)
		name := p[2]
		if u, err := url.QueryUnescape(name); err == nil {
			name = u
		}
		if !r.Match(name) || p[4] == "" || p[4] == Placeholder {
			return m
		}
		return p[1] + p[2] + p[3] + Placeholder
	})
}

// SecretValues returns the secret values in v (a decoded JSON value or rendered step
// config): every leaf under a secret-looking key, the credential part of "Bearer …" and
// "Basic …" values, and the values of secret-looking query parameters inside strings.
// Values shorter than 4 characters are left out (masking them would garble text).
func (r *Redactor) SecretValues(v any) []string {
	set := map[string]bool{}
	var walk func(v any, secret bool)
	add := func(s string) {
		s = strings.TrimSpace(s)
		if len(s) >= 4 && s != Placeholder {
			set[s] = true
		}
	}
	walk = func(v any, secret bool) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(e, secret || r.Match(k))
			}
		case []any:
			for _, e := range x {
				walk(e, secret)
			}
		case map[string]string:
			for k, e := range x {
				walk(e, secret || r.Match(k))
			}
		case map[string][]string:
			for k, e := range x {
				for _, s := range e {
					walk(s, secret || r.Match(k))
				}
			}
		case string:
			if secret {
				add(x)
				if _, cred, ok := strings.Cut(x, " "); ok {
					add(cred)
				}
				return
			}
			for _, p := range queryParam.FindAllStringSubmatch(x, -1) {
				name := p[2]
				if u, err := url.QueryUnescape(name); err == nil {
					name = u
				}
				if r.Match(name) {
					add(p[4])
					if u, err := url.QueryUnescape(p[4]); err == nil {
						add(u)
					}
				}
			}
		case nil:
		default:
			if secret {
				add(fmt.Sprint(x))
			}
		}
	}
	walk(v, false)
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	// Longest first, so a value that contains another is masked whole.
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}
