package handlers

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"lifeline/models/apperr"
	"net/http"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// MaxBody bounds request bodies of the API and webhooks.
const MaxBody = 1 << 20

// readBody reads a request body of at most MaxBody bytes (EINVALID beyond).
func readBody(c echo.Context) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(c.Request().Body, MaxBody+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBody {
		return nil, apperr.Invalid("request.toolarge", map[string]string{"body": "input.toolarge.field"})
	}
	return b, nil
}

// readObject reads a JSON body that must be exactly one JSON object, and returns it. Every
// API route that takes a JSON body takes an object, so an empty body, null, an array, a
// string, a number, malformed JSON or data after the object is EINVALID (422) on the field
// "body", and the route changes nothing. So is a NUL character (\u0000) in any of its
// strings or keys, which PostgreSQL cannot store: EINVALID on the field's path.
func readObject(c echo.Context) (json.RawMessage, error) {
	body, err := readBody(c)
	if err != nil {
		return nil, err
	}
	body = bytes.TrimSpace(body)
	if err := startsObject(body); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var obj json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return nil, apperr.Invalid("request.object", map[string]string{"body": strings.TrimPrefix(err.Error(), "json: ")})
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, apperr.Invalid("request.object", map[string]string{"body": "input.trailing"})
	}
	if bytes.Contains(obj, []byte(`\u0000`)) { // maybe: a NUL, or an escaped backslash before "u0000"
		var doc any
		if err := json.Unmarshal(obj, &doc); err == nil {
			if path, ok := nulAt(doc, ""); ok {
				return nil, apperr.Invalid("request.nul", map[string]string{cmp.Or(path, "body"): "request.nul.field"})
			}
		}
	}
	return obj, nil
}

// nulAt finds a NUL character in v's strings and keys, and returns where ("a.b[2]").
func nulAt(v any, path string) (string, bool) {
	switch v := v.(type) {
	case string:
		return path, strings.ContainsRune(v, 0)
	case []any:
		for i, x := range v {
			if p, ok := nulAt(x, fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, true
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if strings.ContainsRune(k, 0) {
				return path, true
			}
			if p, ok := nulAt(v[k], p); ok {
				return p, true
			}
		}
	}
	return "", false
}

// startsObject refuses a body that cannot be a JSON object: empty, null, an array, a
// string or a number (EINVALID on "body").
func startsObject(body []byte) error {
	if body = bytes.TrimSpace(body); len(body) == 0 || body[0] != '{' {
		return apperr.Invalid("request.object", map[string]string{"body": "request.object.field"})
	}
	return nil
}

// decodeBody decodes a JSON body that must be exactly one JSON object (readObject) into v,
// refusing unknown fields and values of the wrong type (EINVALID on "body").
func decodeBody(c echo.Context, v any) error {
	obj, err := readObject(c)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apperr.Invalid("request.shape", map[string]string{"body": strings.TrimPrefix(err.Error(), "json: ")})
	}
	return nil
}

// formText refuses a form whose fields are not text that every database can store: a NUL
// character, or bytes that are not UTF-8 (PostgreSQL refuses both) → EINVALID (422) naming
// each such field, before the handler runs. It guards the signed-in pages' forms; the login
// form is outside it (its values are never stored, and an email with a NUL is the same 401
// as any unknown one).
func formText(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ct := c.Request().Header.Get(echo.HeaderContentType)
		if c.Request().Method == http.MethodGet || !strings.HasPrefix(ct, echo.MIMEApplicationForm) && !strings.HasPrefix(ct, echo.MIMEMultipartForm) {
			return next(c)
		}
		form, err := c.FormParams()
		if err != nil {
			return next(c) // the handler reads the form and reports it
		}
		fields := map[string]string{}
		for k, vals := range form {
			bad := !storable(k)
			for _, v := range vals {
				bad = bad || !storable(v)
			}
			if bad {
				fields[cmp.Or(strings.ToValidUTF8(strings.ReplaceAll(k, "\x00", ""), "\uFFFD"), "?")] = "request.text.field"
			}
		}
		if len(fields) > 0 {
			return apperr.Invalid("request.text", fields)
		}
		return next(c)
	}
}

// storable reports whether s is UTF-8 without NUL characters.
func storable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
