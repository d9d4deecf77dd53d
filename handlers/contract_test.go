package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"lifeline/handlers/openapi"
	"lifeline/models"
	"lifeline/models/modeltest"
)

// apiContract is the API's OpenAPI document (handlers/openapi), loaded once, with a router
// that finds a request's operation in it.
type apiContract struct {
	doc    *openapi3.T
	router routers.Router
}

var loadContract = sync.OnceValues(func() (*apiContract, error) {
	b, err := openapi.JSON()
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	r, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &apiContract{doc: doc, router: r}, nil
})

// checkContract holds an /api/v1 or /hooks exchange to the OpenAPI document; do calls it for every
// request, so every API response the handlers' tests receive is checked:
//   - the response: its status must be one the operation lists (not only "default"), and
//     its body and headers must match that response's schema;
//   - the request, when the server accepted it (2xx): its path, query, headers and body
//     must match the operation's parameters and request body, so a client that follows
//     the document is not refused, and the server takes nothing the document does not say;
//   - a request the document has no operation for must be refused (4xx) with the error shape.
func checkContract(t testing.TB, req *http.Request, reqBody string, status int, header http.Header, body []byte) {
	t.Helper()
	if !documented(req.URL.Path) {
		return
	}
	ct, err := loadContract()
	if err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	what := req.Method + " " + req.URL.RequestURI()
	route, params, err := ct.router.FindRoute(req)
	if err != nil {
		if status < 400 || status >= 500 {
			t.Errorf("contract: %s answered %d, but the OpenAPI document has no such operation (%v)", what, status, err)
			return
		}
		if err := validateErrorBody(ct.doc, body); err != nil {
			t.Errorf("contract: %s answered %d with a body that is not the error shape: %v\n%s", what, status, err, body)
		}
		return
	}
	op := route.Operation
	if op.Responses.Value(strconv.Itoa(status)) == nil {
		t.Errorf("contract: %s answered %d, a status its operation %s does not list", what, status, op.OperationID)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}
	// A copy of the request to validate, read as the server reads it: its query (readQuery),
	// its body without null members (withoutNulls), as JSON when it does not say (the API
	// reads every body as JSON).
	vreq := req.Clone(context.Background())
	if reqBody != "" && vreq.Header.Get("Content-Type") == "" {
		vreq.Header.Set("Content-Type", "application/json")
	}
	vreq.URL.RawQuery = readQuery(vreq.URL.Query()).Encode()
	var readable bool
	reqBody, readable = withoutNulls(reqBody)
	// JSON that Go cannot hold as values (a number beyond float64, such as 1e400, in a field
	// a route passes through as it is) is valid JSON the server may accept, which kin-openapi
	// cannot decode: its body goes unchecked; its parameters are still checked.
	opts.ExcludeRequestBody = !readable
	vreq.Body = io.NopCloser(strings.NewReader(reqBody))
	vreq.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(reqBody)), nil }
	vreq.ContentLength = int64(len(reqBody))
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: opts}
	if status >= 200 && status < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("contract: %s was accepted (%d), but the request does not match operation %s: %v\nrequest body: %.500s", what, status, op.OperationID, err, reqBody)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header,
		Options: &openapi3filter.Options{MultiError: true, IncludeResponseStatus: true}}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("contract: the response to %s (%d) does not match operation %s: %v\nbody: %.1000s", what, status, op.OperationID, err, body)
	}
}

// readQuery is a query as the lists read it (listQuery, and the document's info says so):
// each value trimmed, an empty one the same as none, a value repeated the same as once.
func readQuery(q url.Values) url.Values {
	out := url.Values{}
	for k, vs := range q {
		for _, v := range vs {
			if v = strings.TrimSpace(v); v != "" && !slices.Contains(out[k], v) {
				out[k] = append(out[k], v)
			}
		}
	}
	return out
}

// withoutNulls is a JSON body as the server reads it (encoding/json): a member that is null
// is the same as one left out (the document's info says so). A body that is not JSON is
// left as it is (and checked as it is).
// ok is false for valid JSON that encoding/json cannot decode into values (a number out of
// float64's range).
func withoutNulls(body string) (_ string, ok bool) {
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return body, !json.Valid([]byte(body))
	}
	var strip func(any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if e == nil {
					delete(x, k)
				} else {
					x[k] = strip(e)
				}
			}
		case []any:
			for i := range x {
				x[i] = strip(x[i])
			}
		}
		return v
	}
	b, _ := json.Marshal(strip(v))
	return string(b), true
}

// validateErrorBody checks body against the document's Error schema.
func validateErrorBody(doc *openapi3.T, body []byte) error {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	return doc.Components.Schemas["Error"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020())
}

// documented reports whether the OpenAPI document describes the routes under path: the
// API, and the inbound webhooks that start workflows.
func documented(path string) bool {
	return strings.HasPrefix(path, "/api/v1/") || strings.HasPrefix(path, "/hooks/")
}

var echoParam = regexp.MustCompile(`:([A-Za-z_][A-Za-z0-9_]*)`)

// TestOpenAPICoversEveryRoute: every route the router serves under /api/v1 and /hooks (with every
// optional part of the server on) is an operation of the OpenAPI document, with the same
// path parameters, and the document has no operation the router does not serve.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newFullApp(t, db)
		ct, err := loadContract()
		if err != nil {
			t.Fatal(err)
		}
		served := map[string]bool{}
		for _, r := range routesOf(t, a) {
			method, path, _ := strings.Cut(r, " ")
			if !documented(path) {
				continue
			}
			path = echoParam.ReplaceAllString(path, "{$1}")
			served[method+" "+path] = true
			item := ct.doc.Paths.Value(path)
			if item == nil || item.GetOperation(method) == nil {
				t.Errorf("%s %s is served but not in the OpenAPI document (handlers/openapi/openapi.yaml)", method, path)
				continue
			}
			op := item.GetOperation(method)
			var names []string
			for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
				if p.Value.In == openapi3.ParameterInPath {
					names = append(names, p.Value.Name)
				}
			}
			var want []string
			for _, m := range echoParam.FindAllStringSubmatch(strings.ReplaceAll(path, "{", ":"), -1) {
				want = append(want, strings.TrimSuffix(m[1], "}"))
			}
			slices.Sort(names)
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Errorf("%s %s: the document's path parameters are %v, the route's %v", method, path, names, want)
			}
		}
		if len(served) < 50 {
			t.Fatalf("only %d API routes found: is the full app built?", len(served))
		}
		for path, item := range ct.doc.Paths.Map() {
			for method := range item.Operations() {
				if !served[method+" "+path] {
					t.Errorf("the OpenAPI document has %s %s, which the router does not serve", method, path)
				}
			}
		}
	})
}

// TestOpenAPIDocumentServed: GET /api/v1/openapi.json answers the document as JSON without
// a token (it describes the API, no organization's data), the same document as the
// repository's, and the API tokens page links it.
func TestOpenAPIDocumentServed(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/openapi.json", "", nil)
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			t.Fatalf("openapi.json: %d %s", r.status, r.header.Get("Content-Type"))
		}
		want, err := openapi.JSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal([]byte(r.body), want) {
			t.Fatal("the served document is not the repository's")
		}
		doc := r.json(t)
		if doc["openapi"] != "3.1.0" {
			t.Fatalf("openapi: %v", doc["openapi"])
		}
		paths, _ := doc["paths"].(map[string]any)
		if _, ok := paths["/api/v1/dlq/{id}/actions"]; !ok {
			t.Fatalf("the served document lacks /api/v1/dlq/{id}/actions: %d paths", len(paths))
		}
		// The API tokens page (where integrators start) links it.
		b, _ := a.browser(a.tenant("Biuro Dokumentacja"))
		page := do(t, b, "GET", a.srv.URL+"/settings/tokens", "", nil)
		if page.status != http.StatusOK || !regexp.MustCompile(`data-testid="api-doc"[^>]*>[^<]*<a href="/api/v1/openapi.json"`).MatchString(page.body) {
			t.Fatalf("the tokens page does not link the document: %d %s", page.status, page.body)
		}
	})
}

// TestOpenAPIQueryAndBodyNames: the document names what the server reads.
//   - Each GET operation's query parameters are the keys the fuzz table (routeInputs) says
//     its route reads, and each key of a route's ordinary JSON body there is a property of
//     the operation's request body.
//   - Each query parameter is read by the server under that name: a value with a control
//     character in it (which every list refuses) is a 422 naming exactly that key.
func TestOpenAPIQueryAndBodyNames(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newFullApp(t, db)
		tn := a.tenant("Biuro Parametry")
		ct, err := loadContract()
		if err != nil {
			t.Fatal(err)
		}
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/dlq/bulk",
			`{"action": "resolve", "ids": ["`+tn.dlqID+`"], "resolutionNotes": "zapłacone w banku"}`, bearer(tn.token))
		if r.status != http.StatusAccepted {
			t.Fatalf("bulk job: %d %s", r.status, r.body)
		}
		ids := map[string]string{"id": r.json(t)["id"].(string)}
		probed := 0
		for route, in := range routeInputs(tn, "postgres://u:p@127.0.0.1:5432/db") {
			method, path, _ := strings.Cut(route, " ")
			if !strings.HasPrefix(path, "/api/v1/") {
				continue
			}
			path = echoParam.ReplaceAllString(path, "{$1}")
			item := ct.doc.Paths.Value(path)
			if item == nil || item.GetOperation(method) == nil {
				continue // TestOpenAPICoversEveryRoute says so
			}
			op := item.GetOperation(method)
			var query []string
			for _, p := range op.Parameters {
				if p.Value.In == openapi3.ParameterInQuery {
					query = append(query, p.Value.Name)
				}
			}
			if method == http.MethodGet {
				want := slices.Clone(in.query)
				slices.Sort(query)
				slices.Sort(want)
				if !slices.Equal(query, want) {
					t.Errorf("%s %s: the document's query parameters are %v, the route reads %v", method, path, query, want)
				}
			}
			if in.json != "" && op.RequestBody != nil {
				var body map[string]any
				if err := json.Unmarshal([]byte(in.json), &body); err != nil {
					t.Fatalf("%s: %v", route, err)
				}
				schema := op.RequestBody.Value.Content.Get("application/json").Schema.Value
				if len(schema.Properties) > 0 {
					for k := range body {
						if schema.Properties[k] == nil {
							t.Errorf("%s %s: the body's %q is not in the document's request body", method, path, k)
						}
					}
				}
			}
			if method != http.MethodGet {
				continue
			}
			for _, name := range query {
				if name == "items" {
					continue // only "true" asks for the items; any other value is no filter
				}
				u := a.srv.URL + strings.ReplaceAll(path, "{id}", ids["id"]) + "?" + url.Values{name: {"x\x01"}}.Encode()
				r := do(t, http.DefaultClient, "GET", u, "", bearer(tn.token))
				var e struct {
					Error struct{ Fields map[string]string } `json:"error"`
				}
				_ = json.Unmarshal([]byte(r.body), &e)
				if _, ok := e.Error.Fields[name]; r.status != http.StatusUnprocessableEntity || !ok || len(e.Error.Fields) != 1 {
					t.Errorf("GET %s?%s=x%%01: %d %s, want a 422 naming %s", path, name, r.status, r.body, name)
				}
				probed++
			}
		}
		if probed < 30 {
			t.Fatalf("only %d query parameters probed", probed)
		}
	})
}
