package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/labstack/echo/v4"

	"lifeline/models"
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
		return nil, models.Invalid("request.toolarge", map[string]string{"body": "input.toolarge.field"})
	}
	return b, nil
}

// readObject reads a JSON body that must be exactly one JSON object, and returns it. Every
// API route that takes a JSON body takes an object, so an empty body, null, an array, a
// string, a number, malformed JSON or data after the object is EINVALID (422) on the field
// "body", and the route changes nothing.
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
		return nil, models.Invalid("request.object", map[string]string{"body": strings.TrimPrefix(err.Error(), "json: ")})
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, models.Invalid("request.object", map[string]string{"body": "input.trailing"})
	}
	return obj, nil
}

// startsObject refuses a body that cannot be a JSON object: empty, null, an array, a
// string or a number (EINVALID on "body").
func startsObject(body []byte) error {
	if body = bytes.TrimSpace(body); len(body) == 0 || body[0] != '{' {
		return models.Invalid("request.object", map[string]string{"body": "request.object.field"})
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
		return models.Invalid("request.shape", map[string]string{"body": strings.TrimPrefix(err.Error(), "json: ")})
	}
	return nil
}
