package classify

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxReason bounds the service's own words in a Reason.
const maxReason = 300

// Reason is what a person can act on: the message the service gave, then the status, e.g.
// "NIP must have 10 digits (400 Bad Request)". The message comes from the first of the
// fields error, message, detail, title of a JSON body that is a sentence (else the first
// that is a word, a code like "validation") (also one level down, as in
// {"error": {"message": …}}), else from the first line of a text body; a body that is HTML
// or empty gives the status alone. The URL is left out: it is in the trace.
func (e *HTTPError) Reason() string {
	status := strconv.Itoa(e.StatusCode)
	if text := http.StatusText(e.StatusCode); text != "" {
		status += " " + text
	}
	msg := serviceMessage(e.Body)
	if msg == "" {
		return status
	}
	return msg + " (" + status + ")"
}

func serviceMessage(body string) string {
	body = strings.TrimSpace(body)
	if body == "" {
		return ""
	}
	var doc any
	if json.Unmarshal([]byte(body), &doc) == nil {
		msg, fields := fromJSON(doc, 0), fieldMessages(doc)
		switch {
		case fields == "":
			return clip(msg)
		case msg == "" || !strings.ContainsRune(msg, ' ') || strings.Contains(fields, msg):
			// "validation", "BAD_REQUEST": a code, not a sentence; or the sentence is a field's
			return clip(fields)
		}
		return clip(msg + ": " + fields)
	}
	if body[0] == '<' { // an HTML error page says nothing a person can act on
		return ""
	}
	line, _, _ := strings.Cut(body, "\n")
	return clip(strings.TrimSpace(line))
}

// fromJSON finds the message in a decoded JSON body.
func fromJSON(doc any, depth int) string {
	obj, ok := doc.(map[string]any)
	if !ok || depth > 1 {
		if s, ok := doc.(string); ok && depth == 0 {
			return strings.TrimSpace(s)
		}
		return ""
	}
	// The first sentence of these; else the first word (a code like "validation").
	code := ""
	for _, k := range []string{"error", "message", "detail", "title", "error_description", "errorMessage"} {
		var s string
		switch v := obj[k].(type) {
		case string:
			s = strings.TrimSpace(v)
		case map[string]any:
			s = fromJSON(v, depth+1)
		}
		if strings.ContainsRune(s, ' ') {
			return s
		}
		if code == "" {
			code = s
		}
	}
	if code != "" {
		return code
	}
	// {"errors": [{"message": …}]} (GraphQL, JSON:API)
	if list, ok := obj["errors"].([]any); ok && len(list) > 0 {
		return fromJSON(list[0], depth+1)
	}
	return ""
}

// fieldMessages reads per-field messages ({"fields": {"nip": "must have 10 digits"}}, also
// under "errors") as "nip: must have 10 digits; …", in key order.
func fieldMessages(doc any) string {
	obj, _ := doc.(map[string]any)
	for _, k := range []string{"fields", "errors"} {
		m, ok := obj[k].(map[string]any)
		if !ok || len(m) == 0 {
			continue
		}
		keys := make([]string, 0, len(m))
		for f := range m {
			keys = append(keys, f)
		}
		sort.Strings(keys)
		var parts []string
		for _, f := range keys {
			switch v := m[f].(type) {
			case string:
				parts = append(parts, f+": "+v)
			case []any:
				if len(v) > 0 {
					if s, ok := v[0].(string); ok {
						parts = append(parts, f+": "+s)
					}
				}
			}
		}
		return strings.Join(parts, "; ")
	}
	return ""
}

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= maxReason {
		return s
	}
	cut := maxReason
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
