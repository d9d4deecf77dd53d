// Package secrets keeps secret values encrypted at rest: AES-256-GCM under a versioned key
// ring, each ciphertext bound to the identity of the row it belongs to.
//
// The contract:
//
//   - A ring holds one or more 32-byte keys, each with an id. The first is the active key:
//     Seal always uses it. Open accepts any key of the ring, so keys can be rotated by
//     putting a new key first and keeping the old ones until everything is re-sealed.
//   - An envelope is the text "enc:v1:<key id>:<base64url(nonce | ciphertext)>". It is
//     bound to an associated-data string (the row's identity, e.g.
//     "step_executions:<id>:output"): opening it with any other aad fails.
//   - SealJSON replaces every value under a secret-looking key (any depth, any JSON type)
//     by the envelope of that value's JSON, and the value of every secret-looking query
//     parameter inside a string (a URL's "?api_key=…") by a text envelope
//     ("enc:t1:<key id>:…"); OpenJSON reverses both. Numbers are kept digit
//     for digit; the output is compact JSON with sorted keys.
//
// The package imports nothing from Lifeline.
package secrets

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Prefix starts every envelope.
const Prefix = "enc:v1:"

// Key is one key of a ring.
type Key struct {
	ID   string
	aead cipher.AEAD
}

// Ring is a versioned key ring. It is immutable and safe for concurrent use.
type Ring struct {
	keys []Key // keys[0] is active
	byID map[string]cipher.AEAD
}

// ErrNotSealed is returned by Open for text that is not an envelope.
var ErrNotSealed = errors.New("secrets: not an envelope")

// ParseRing parses "id:base64key[,id:base64key…]" (standard or URL base64, 32-byte keys);
// the first key is the active one. Key ids are letters, digits, '-' and '_'.
func ParseRing(spec string) (*Ring, error) {
	r := &Ring{byID: map[string]cipher.AEAD{}}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, b64, ok := strings.Cut(part, ":")
		if !ok || !validID(id) {
			return nil, fmt.Errorf("secrets: key %q: want id:base64key with an id of letters, digits, - or _", clip(part))
		}
		raw, err := decodeKey(b64)
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("secrets: key %q: want 32 bytes in base64 (openssl rand -base64 32)", id)
		}
		if _, dup := r.byID[id]; dup {
			return nil, fmt.Errorf("secrets: key id %q appears twice", id)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		r.keys = append(r.keys, Key{ID: id, aead: aead})
		r.byID[id] = aead
	}
	if len(r.keys) == 0 {
		return nil, errors.New("secrets: no key given")
	}
	return r, nil
}

// NewKeySpec returns "id:base64key" for a new random key.
func NewKeySpec(id string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return id + ":" + base64.StdEncoding.EncodeToString(b), nil
}

// LoadOrCreate reads a ring from the file at path (the same format as ParseRing), creating
// the file with one new key (mode 0600) when it does not exist. It reports whether it
// created the file.
func LoadOrCreate(path string) (*Ring, bool, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		r, err := ParseRing(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		return r, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	spec, err := NewKeySpec("k1")
	if err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // another process created it first
		return LoadOrCreate(path)
	}
	if err != nil {
		return nil, false, err
	}
	if _, err := f.WriteString(spec + "\n"); err != nil {
		f.Close()
		return nil, false, err
	}
	if err := f.Close(); err != nil {
		return nil, false, err
	}
	r, err := ParseRing(spec)
	return r, true, err
}

// ActiveKeyID is the id of the key Seal uses.
func (r *Ring) ActiveKeyID() string { return r.keys[0].ID }

// Seal encrypts plain under the active key, bound to aad.
func (r *Ring) Seal(plain []byte, aad string) (string, error) { return r.seal(Prefix, plain, aad) }

func (r *Ring) seal(prefix string, plain []byte, aad string) (string, error) {
	k := r.keys[0]
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	sealed := k.aead.Seal(nonce, nonce, plain, []byte(aad))
	return prefix + k.ID + ":" + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// IsSealed reports whether s is an envelope.
func IsSealed(s string) bool { return strings.HasPrefix(s, Prefix) }

// Open decrypts an envelope bound to aad. ErrNotSealed for text that is not an envelope;
// another error when the key is unknown, the aad differs or the envelope was altered.
func (r *Ring) Open(envelope, aad string) ([]byte, error) { return r.open(Prefix, envelope, aad) }

func (r *Ring) open(prefix, envelope, aad string) ([]byte, error) {
	id, data, err := split(prefix, envelope)
	if err != nil {
		return nil, err
	}
	aead, ok := r.byID[id]
	if !ok {
		return nil, fmt.Errorf("secrets: key %q is not in the key ring (LIFELINE_ENCRYPTION_KEYS)", id)
	}
	if len(data) < aead.NonceSize() {
		return nil, errors.New("secrets: envelope too short")
	}
	plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(aad))
	if err != nil {
		return nil, errors.New("secrets: envelope does not open (altered, or it belongs to another row)")
	}
	return plain, nil
}

// Reseal opens an envelope and, when it was sealed under a key other than the active one,
// seals it again under the active key (rotation). It reports whether it changed.
func (r *Ring) Reseal(envelope, aad string) (string, bool, error) {
	id, _, err := split(Prefix, envelope)
	if err != nil {
		return "", false, err
	}
	if id == r.keys[0].ID {
		return envelope, false, nil
	}
	plain, err := r.Open(envelope, aad)
	if err != nil {
		return "", false, err
	}
	out, err := r.Seal(plain, aad)
	return out, err == nil, err
}

// SealJSON returns raw with the value under every key for which isSecret is true (any
// depth) replaced by the envelope of that value's JSON. Values already sealed stay as they
// are. Empty raw is returned as it is; raw that is not one JSON value is an error.
func (r *Ring) SealJSON(raw []byte, aad string, isSecret func(key string) bool) ([]byte, error) {
	return r.SealJSONFound(raw, aad, isSecret, nil)
}

// SealJSONFound is SealJSON that also seals, inside every string (any depth, under any
// key), the fragments find reports ([start, end) byte ranges, in order, not overlapping):
// each becomes a fragment envelope "enc:s1:<key id>:<base64url>." bound to aad. find
// finds secrets by their value (services/redact.Masker.Find); nil finds nothing.
func (r *Ring) SealJSONFound(raw []byte, aad string, isSecret func(key string) bool, find func(string) [][]int) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return raw, nil
	}
	v, err := decode(raw)
	if err != nil {
		return nil, err
	}
	v, err = r.sealValue(v, aad, sealRules{isSecret, find})
	if err != nil {
		return nil, err
	}
	return encode(v)
}

// sealRules say what to seal: the values under the keys isSecret matches, and the fragments
// of strings find reports (nil: none).
type sealRules struct {
	isSecret func(string) bool
	find     func(string) [][]int
}

func (r *Ring) sealValue(v any, aad string, rules sealRules) (any, error) {
	isSecret := rules.isSecret
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if s, ok := val.(string); ok && IsSealed(s) {
				out[k] = s
				continue
			}
			if isSecret(k) {
				b, err := encode(val)
				if err != nil {
					return nil, err
				}
				env, err := r.Seal(b, aad)
				if err != nil {
					return nil, err
				}
				out[k] = env
				continue
			}
			sv, err := r.sealValue(val, aad, rules)
			if err != nil {
				return nil, err
			}
			out[k] = sv
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			sv, err := r.sealValue(val, aad, rules)
			if err != nil {
				return nil, err
			}
			out[i] = sv
		}
		return out, nil
	case string:
		q, err := r.sealQuery(x, aad, isSecret)
		if err != nil || rules.find == nil {
			return q, err
		}
		return r.sealFound(q, aad, rules.find)
	}
	return v, nil
}

// sealFound replaces the fragments of s that find reports by fragment envelopes.
func (r *Ring) sealFound(s, aad string, find func(string) [][]int) (string, error) {
	if IsSealed(s) {
		return s, nil
	}
	found := find(s)
	if len(found) == 0 {
		return s, nil
	}
	var b strings.Builder
	last := 0
	for _, f := range found {
		if f[0] < last || f[1] > len(s) || f[0] >= f[1] {
			continue
		}
		env, err := r.seal(fragmentPrefix, []byte(s[f[0]:f[1]]), aad)
		if err != nil {
			return "", err
		}
		b.WriteString(s[last:f[0]])
		b.WriteString(env)
		b.WriteByte('.')
		last = f[1]
	}
	b.WriteString(s[last:])
	return b.String(), nil
}

// queryParam finds "name=value" pairs of URL queries inside a string.
var queryParam = regexp.MustCompile(`([?&;])([^=&;#\s?]{1,100})=([^&;#\s"'<>]*)`)

// sealQuery seals, in place, the values of secret-looking query parameters inside s
// (a URL with "?api_key=…"): each becomes a text envelope ("enc:t1:…").
func (r *Ring) sealQuery(s, aad string, isSecret func(string) bool) (string, error) {
	if !strings.Contains(s, "=") || !strings.ContainsAny(s, "?&;") {
		return s, nil
	}
	var err error
	out := queryParam.ReplaceAllStringFunc(s, func(m string) string {
		p := queryParam.FindStringSubmatch(m)
		name := p[2]
		if u, uerr := url.QueryUnescape(name); uerr == nil {
			name = u
		}
		if err != nil || p[3] == "" || strings.HasPrefix(p[3], textPrefix) || !isSecret(name) {
			return m
		}
		env, serr := r.seal(textPrefix, []byte(p[3]), aad)
		if serr != nil {
			err = serr
			return m
		}
		return p[1] + p[2] + "=" + env
	})
	return out, err
}

// textPrefix starts an envelope of a fragment of text (a query parameter's value) inside a
// string; Prefix starts an envelope of a whole JSON value.
const textPrefix = "enc:t1:"

// fragmentPrefix starts the envelope of a secret found inside a string; a '.' (never in
// base64url) ends it, so the text after it may be anything.
const fragmentPrefix = "enc:s1:"

// textEnvelope finds text and fragment envelopes inside a string.
var textEnvelope = regexp.MustCompile(`enc:s1:[A-Za-z0-9_-]{1,32}:[A-Za-z0-9_-]+\.|enc:t1:[A-Za-z0-9_-]{1,32}:[A-Za-z0-9_-]+`)

// openText replaces every text and fragment envelope inside s by its text.
func (r *Ring) openText(s, aad string) (string, error) {
	if !strings.Contains(s, textPrefix) && !strings.Contains(s, fragmentPrefix) {
		return s, nil
	}
	var err error
	out := textEnvelope.ReplaceAllStringFunc(s, func(m string) string {
		prefix := textPrefix
		if strings.HasPrefix(m, fragmentPrefix) {
			prefix, m = fragmentPrefix, strings.TrimSuffix(m, ".")
		}
		plain, oerr := r.open(prefix, m, aad)
		if oerr != nil {
			err = oerr
			return m
		}
		return string(plain)
	})
	return out, err
}

// OpenJSON reverses SealJSON: every envelope string (any depth) is replaced by the JSON
// value it holds. Raw without envelopes comes back equal (re-encoded compactly).
func (r *Ring) OpenJSON(raw []byte, aad string) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 || !bytes.Contains(raw, []byte("enc:")) {
		return raw, nil
	}
	v, err := decode(raw)
	if err != nil {
		return nil, err
	}
	v, err = r.openValue(v, aad)
	if err != nil {
		return nil, err
	}
	return encode(v)
}

func (r *Ring) openValue(v any, aad string) (any, error) {
	switch x := v.(type) {
	case string:
		if !IsSealed(x) {
			return r.openText(x, aad)
		}
		b, err := r.Open(x, aad)
		if err != nil {
			return nil, err
		}
		return decode(b)
	case map[string]any:
		for k, val := range x {
			ov, err := r.openValue(val, aad)
			if err != nil {
				return nil, err
			}
			x[k] = ov
		}
		return x, nil
	case []any:
		for i, val := range x {
			ov, err := r.openValue(val, aad)
			if err != nil {
				return nil, err
			}
			x[i] = ov
		}
		return x, nil
	}
	return v, nil
}

func split(prefix, envelope string) (string, []byte, error) {
	rest, ok := strings.CutPrefix(envelope, prefix)
	if !ok {
		return "", nil, ErrNotSealed
	}
	id, b64, ok := strings.Cut(rest, ":")
	if !ok {
		return "", nil, ErrNotSealed
	}
	data, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil {
		return "", nil, errors.New("secrets: envelope is not base64")
	}
	return id, data, nil
}

func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("secrets: not JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("secrets: data after the JSON value")
	}
	return v, nil
}

func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func decodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

func validID(id string) bool {
	if id == "" || len(id) > 32 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 8 {
		return s[:8] + "…"
	}
	return s
}

// JSONSealer seals the values under the keys IsSecret matches, with Ring: the shape the
// engine and the models layer take (Seal and Open of raw JSON bound to an aad).
type JSONSealer struct {
	Ring     *Ring
	IsSecret func(key string) bool
}

// Seal is Ring.SealJSON with IsSecret.
func (s JSONSealer) Seal(raw []byte, aad string) ([]byte, error) {
	return s.Ring.SealJSON(raw, aad, s.IsSecret)
}

// Open is Ring.OpenJSON.
func (s JSONSealer) Open(raw []byte, aad string) ([]byte, error) { return s.Ring.OpenJSON(raw, aad) }

// SealFound is Ring.SealJSONFound with IsSecret: it also seals the fragments of strings
// find reports (secrets found by their value).
func (s JSONSealer) SealFound(raw []byte, aad string, find func(string) [][]int) ([]byte, error) {
	return s.Ring.SealJSONFound(raw, aad, s.IsSecret, find)
}

// ResealJSON seals every envelope inside raw (whole values, query parameters and fragments
// of strings, any depth) again under the active key, leaving everything else as it is:
// what was sealed stays sealed, whatever rule sealed it. Envelopes already under the active
// key are kept. Raw without envelopes comes back unchanged.
func (r *Ring) ResealJSON(raw []byte, aad string) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 || !bytes.Contains(raw, []byte("enc:")) {
		return raw, nil
	}
	v, err := decode(raw)
	if err != nil {
		return nil, err
	}
	v, err = r.resealValue(v, aad)
	if err != nil {
		return nil, err
	}
	return encode(v)
}

func (r *Ring) resealValue(v any, aad string) (any, error) {
	switch x := v.(type) {
	case string:
		if IsSealed(x) {
			out, _, err := r.Reseal(x, aad)
			return out, err
		}
		if !strings.Contains(x, textPrefix) && !strings.Contains(x, fragmentPrefix) {
			return x, nil
		}
		var err error
		out := textEnvelope.ReplaceAllStringFunc(x, func(m string) string {
			prefix, end := textPrefix, ""
			if strings.HasPrefix(m, fragmentPrefix) {
				prefix, m, end = fragmentPrefix, strings.TrimSuffix(m, "."), "."
			}
			if id, _, serr := split(prefix, m); serr == nil && id == r.keys[0].ID {
				return m + end // under the active key already
			}
			plain, oerr := r.open(prefix, m, aad)
			if oerr != nil {
				err = oerr
				return m + end
			}
			env, serr := r.seal(prefix, plain, aad)
			if serr != nil {
				err = serr
				return m + end
			}
			return env + end
		})
		return out, err
	case map[string]any:
		for k, val := range x {
			rv, err := r.resealValue(val, aad)
			if err != nil {
				return nil, err
			}
			x[k] = rv
		}
		return x, nil
	case []any:
		for i, val := range x {
			rv, err := r.resealValue(val, aad)
			if err != nil {
				return nil, err
			}
			x[i] = rv
		}
		return x, nil
	}
	return v, nil
}

// Reseal is Ring.ResealJSON: every envelope sealed again under the active key, nothing
// opened into clear.
func (s JSONSealer) Reseal(raw []byte, aad string) ([]byte, error) {
	return s.Ring.ResealJSON(raw, aad)
}
