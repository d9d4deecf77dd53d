package openapi_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"lifeline/handlers/openapi"
)

// TestDocumentIsValid: the document converts to JSON, is OpenAPI 3.1, and kin-openapi
// finds nothing wrong with it (references resolve, schemas are well formed, parameters
// match their paths).
func TestDocumentIsValid(t *testing.T) {
	b, err := openapi.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["openapi"] != "3.1.0" {
		t.Fatalf("openapi: %v, want 3.1.0", raw["openapi"])
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatal("kin-openapi does not read it as 3.1")
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
}
