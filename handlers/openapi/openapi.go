// Package openapi holds Lifeline's API contract: the OpenAPI 3.1 document of every route
// under /api/v1, written as YAML (openapi.yaml, the source of truth, kept beside the code
// it describes) and served as JSON at GET /api/v1/openapi.json.
//
// The handlers' tests hold the router to it: a route under /api/v1 that the document lacks,
// or a path in it that the router does not serve, fails TestOpenAPICoversEveryRoute, and
// every /api/v1 response the tests receive is validated against it. The Go client in
// ./client is generated from it (`make generate`; `make verify` fails when it is stale).
package openapi

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// YAML is the document as written.
//
//go:embed openapi.yaml
var YAML []byte

// JSON returns the document as JSON (the same content as YAML; keys sorted). It fails only
// when openapi.yaml is not a YAML mapping with string keys, which the package's test rules out.
func JSON() ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(YAML, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml as JSON: %w", err)
	}
	return b, nil
}
