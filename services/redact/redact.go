// Package redact hides secrets in decoded JSON values and raw JSON before
// they are stored or shown (step inputs and outputs, request headers, audit
// entries).
//
// The contract:
//
//   - A key matches when, lower-cased with '-' turned into '_', it contains
//     any configured key (normalised the same way) as a substring. So with
//     [DefaultKeys], "X-Api-Key", "bankIBAN", "db_password", "access_token"
//     and "Client-Secret" all match.
//   - The whole value under a matching key is replaced by the string
//     [Placeholder], whatever its type (object, array, number, null…). In an
//     http.Header or map[string][]string it becomes []string{Placeholder}.
//   - Keys are inspected, and in string values the query parameters of URLs
//     ("?api_key=…"), which are masked by the same key rules (see [Redactor.Text]);
//     a secret elsewhere inside a free-text string is not found by key:
//     [Masker] masks known secret values wherever they appear.
//   - A value sealed at rest (an envelope, "enc:v1:…", or a fragment of text sealed inside
//     a string, "enc:t1:…" or "enc:s1:….") is shown as [Placeholder], whatever key holds
//     it: a secret found by its value is sealed where it was found.
//   - Inputs are never modified: [Redactor.Value] returns a deep copy of
//     map[string]any, []any, map[string]string, map[string][]string and
//     http.Header; other values (strings, numbers, json.Number…) are returned
//     as they are.
//   - [Redactor.JSON] re-encodes valid JSON compactly, with object keys
//     sorted, numbers kept digit for digit and no HTML escaping; input that is
//     not exactly one valid JSON value is returned unchanged.
//
// A Redactor is immutable and safe for concurrent use; its zero value
// uses DefaultKeys. The package imports nothing from Lifeline.
package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
)

// Placeholder replaces every redacted value.
const Placeholder = "[REDACTED]"

// DefaultKeys are the key fragments used when none are configured. Substring
// matching also covers access_token, refresh_token, client_secret,
// x-api-key, db_password and the like; "webhookurl" covers a workflow's
// slackWebhookUrl and teamsWebhookUrl (a webhook's URL is its credential; see AlwaysKeys).
var DefaultKeys = []string{"password", "secret", "token", "authorization", "api_key", "apikey", "iban", "webhookurl", "webhook_url"}

// Redactor replaces values under secret-looking keys with [Placeholder].
type Redactor struct {
	keys []string // normalised, non-empty; nil means DefaultKeys
}

// AlwaysKeys are secret whatever keys are configured: a webhook's URL is its credential
// (a workflow's slackWebhookUrl and teamsWebhookUrl).
var AlwaysKeys = []string{"webhookurl", "webhook_url"}

// New returns a Redactor matching keys. Keys are trimmed and normalised;
// empty entries are dropped (an empty key would match every key). If nothing
// is left, DefaultKeys are used. AlwaysKeys are always added.
func New(keys []string) *Redactor {
	var norm []string
	for _, k := range keys {
		if k = normalize(strings.TrimSpace(k)); k != "" {
			norm = append(norm, k)
		}
	}
	if norm == nil {
		norm = append([]string(nil), DefaultKeys...)
	}
	for _, k := range AlwaysKeys {
		if !slices.Contains(norm, k) {
			norm = append(norm, k)
		}
	}
	return &Redactor{keys: norm}
}

// ParseKeys splits the comma-separated environment form ("password, token,
// x-secret") into trimmed, non-empty keys. It returns nil for an empty or
// blank string, which [New] turns into DefaultKeys.
func ParseKeys(s string) []string {
	var keys []string
	for k := range strings.SplitSeq(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

func normalize(k string) string {
	return strings.ReplaceAll(strings.ToLower(k), "-", "_")
}

// Match reports whether key is secret-looking.
func (r *Redactor) Match(key string) bool {
	keys := r.keys
	if keys == nil {
		keys = DefaultKeys
	}
	k := normalize(key)
	for _, s := range keys {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// Value returns a deep copy of v with the values under matching keys
// replaced, at any depth (objects inside arrays included).
func (r *Redactor) Value(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if r.Match(k) {
				out[k] = Placeholder
			} else {
				out[k] = r.Value(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = r.Value(e)
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(v))
		for k, e := range v {
			if r.Match(k) {
				e = Placeholder
			}
			out[k] = e
		}
		return out
	case http.Header:
		return http.Header(r.multi(v))
	case map[string][]string:
		return r.multi(v)
	case string:
		return r.Text(Envelopes(v))
	default:
		return v
	}
}

func (r *Redactor) multi(v map[string][]string) map[string][]string {
	if v == nil {
		return nil
	}
	out := make(map[string][]string, len(v))
	for k, e := range v {
		if r.Match(k) {
			out[k] = []string{Placeholder}
		} else {
			out[k] = append([]string(nil), e...)
		}
	}
	return out
}

// JSON redacts raw JSON. It returns compact JSON with object keys sorted, or
// raw itself when raw is not exactly one valid JSON value.
func (r *Redactor) JSON(raw []byte) []byte {
	v, err := decodeOne(raw)
	if err != nil {
		return raw
	}
	out, err := encodeCompact(r.Value(v))
	if err != nil {
		return raw
	}
	return out
}

// decodeOne decodes exactly one JSON value, numbers as json.Number.
func decodeOne(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

// encodeCompact encodes v compactly, keys sorted, without HTML escaping.
func encodeCompact(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Restore returns edited with every [Placeholder] replaced by the value at the same path
// in original (when there is one): an operator who edits a redacted document and leaves a
// masked secret as it was keeps the secret's stored value. A placeholder with no original
// value stays as it is; neither argument is modified.
func Restore(edited, original any) any { return RestoreAsShown(edited, original, nil) }

// RestoreAsShown is Restore that also keeps the original of a string the operator left as
// it was shown (shown: the document as the editor was filled, at the same paths), secrets
// masked inside it included ("the password is [REDACTED]" sent back as it was shown keeps
// the stored text, secret and all).
func RestoreAsShown(edited, original, shown any) any {
	switch x := edited.(type) {
	case string:
		if x == Placeholder && original != nil {
			return original
		}
		if s, ok := shown.(string); ok && s == x && strings.Contains(x, Placeholder) {
			if o, ok := original.(string); ok {
				return o
			}
		}
		return x
	case map[string]any:
		orig, _ := original.(map[string]any)
		sh, _ := shown.(map[string]any)
		out := make(map[string]any, len(x))
		for k, v := range x {
			out[k] = RestoreAsShown(v, orig[k], sh[k])
		}
		return out
	case []any:
		orig, _ := original.([]any)
		sh, _ := shown.([]any)
		out := make([]any, len(x))
		for i, v := range x {
			var o, w any
			if i < len(orig) {
				o = orig[i]
			}
			if i < len(sh) {
				w = sh[i]
			}
			out[i] = RestoreAsShown(v, o, w)
		}
		return out
	}
	return edited
}
