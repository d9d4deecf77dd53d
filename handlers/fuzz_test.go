package handlers_test

// Fuzz targets for what users send: API bodies, cursors, ids and definitions. Their seed
// corpora (the nasty cases found so far and ordinary valid input) run in plain `go test`
// on SQLite and on PostgreSQL, each against one server per database built before the
// seeds run. The property is the same everywhere: no answer is a 5xx, and the server still
// answers a plain request afterwards. Run one for longer with e.g.
//
//	./scripts/with-postgres.sh go test ./handlers/ -run '^$' -fuzz FuzzCursor -fuzztime 30s

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"lifeline/models"
	"lifeline/models/apperr"
	"lifeline/models/modeltest"
	"lifeline/services/definition"
	"lifeline/services/steps"
)

// fuzzApp is a server on one database with a tenant (workflow, execution, dead letter).
type fuzzApp struct {
	dialect string
	*app
	tn *tenant
}

// fuzzApps builds one server per database. PostgreSQL is left out, with a message, only
// where modeltest would skip it (no TEST_DATABASE_URL outside CI).
func fuzzApps(f *testing.F) []fuzzApp {
	f.Helper()
	var out []fuzzApp
	for _, d := range modeltest.Dialects {
		if d == models.Postgres && os.Getenv("TEST_DATABASE_URL") == "" && os.Getenv("CI") != "true" {
			f.Logf("PostgreSQL: TEST_DATABASE_URL not set; its half of the seed corpus is skipped")
			continue
		}
		a := newApp(f, modeltest.New(f, d))
		out = append(out, fuzzApp{dialect: d, app: a, tn: a.tenant("Biuro Fuzz " + d)})
	}
	return out
}

// check fails on a 5xx and then asks the server for the tenant's workflow, which must
// still answer 200.
func (fa fuzzApp) check(t *testing.T, what string, r resp) {
	t.Helper()
	if r.status >= 500 {
		t.Fatalf("%s: %s answered %d: %s", fa.dialect, what, r.status, r.body)
	}
	if after := do(t, http.DefaultClient, "GET", fa.srv.URL+"/api/v1/workflows/"+fa.tn.wfID, "", bearer(fa.tn.token)); after.status != 200 {
		t.Fatalf("%s: after %s the server answers %d: %s", fa.dialect, what, after.status, after.body)
	}
}

// definitionSeeds are definitions users could write, valid and not.
var definitionSeeds = []string{
	`{"name": "VAT", "steps": [{"id": "a", "type": "http", "config": {"url": "https://x.example/a", "headers": {"Authorization": "Bearer {{ input.t }}"}}}]}`,
	`{"name": "VAT", "description": "monthly", "settings": {"retryPolicy": {"maxRetries": 2, "backoffType": "fixed"}, "unknownErrors": "no_retry"}, "steps": [{"id": "a", "type": "delay", "config": {"ms": 10}}, {"id": "b", "type": "transform", "config": {"output": {"v": "{{ steps.a.output }}"}}}]}`,
	`{"name": "NUL\u0000", "steps": [{"id": "a", "type": "delay", "config": {"ms": 1}}]}`,
	`{"name": "x", "description": "\u0000", "steps": [{"id": "a", "type": "delay", "config": {"ms": 1}}]}`,
	`{"name": "x", "steps": [{"id": "a", "name": "step\u0000", "type": "delay", "config": {"ms": 1}}]}`,
	`{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": {"k\u0000": "v\u0000"}}}]}`,
	`{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": 1e1000000}}]}`,
	`{"name": "x", "steps": [{"id": "a", "type": "delay", "config": {"ms": -1e1000000}}]}`,
	`{"name": "x", "settings": {"retryPolicy": {"maxRetries": 1e1000000, "backoffMultiplier": 1e400}}, "steps": [{"id": "a", "type": "delay", "config": {"ms": 1}}]}`,
	`{"name": "x", "steps": [{"id": "a", "type": "delay", "config": {"ms": 1}, "timeoutMs": 1e30}]}`,
	`{"name": "x", "steps": [{"id": "a", "type": "delay", "config": {"ms": 1}}]} {"trailing": true}`,
	`{"name": "x", "steps": [{"id": "a", "type": "delay", "config": {"ms": 1}}]}]`,
	`{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": "{{ env.HOME }}"}}]}`,
	`{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": "{{ $env.PATH }}"}}]}`,
	`{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "https://x.example", "headers": {"X-A": "v\r\nX-B: 1"}}}]}`,
	`{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "https://x.example", "headers": {"X\r\nB": "v"}}}]}`,
	`{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "file:///etc/passwd"}}]}`,
	`{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "gopher://127.0.0.1:6379/_INFO"}}]}`,
	`{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "{{ '' }}file:///etc/passwd"}}]}`,
	`{"name": "` + strings.Repeat("ł", 150) + `", "steps": [{"id": "a", "type": "delay", "config": {"ms": 1}}]}`,
	`{"name": "x", "steps": [{"id": "` + strings.Repeat("a", 101) + `", "type": "delay", "config": {"ms": 1}}]}`,
	`{"name": "\ud800\udfff\ufffe", "steps": [{"id": "a", "type": "delay", "config": {"ms": 1}}]}`,
	"{\"name\": \"bad utf-8 \xff\xfe\", \"steps\": [{\"id\": \"a\", \"type\": \"delay\", \"config\": {\"ms\": 1}}]}",
	`{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": ` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}]}`,
	`null`, `[]`, `""`, `{}`, `{"name": `, "",
}

func FuzzAPIWorkflowBody(f *testing.F) {
	for _, s := range definitionSeeds {
		f.Add(s)
	}
	apps := fuzzApps(f)
	f.Fuzz(func(t *testing.T, body string) {
		for _, fa := range apps {
			fa.check(t, "POST /api/v1/workflows", do(t, http.DefaultClient, "POST", fa.srv.URL+"/api/v1/workflows", body, bearer(fa.tn.token)))
			fa.check(t, "PUT /api/v1/workflows/{id}", do(t, http.DefaultClient, "PUT", fa.srv.URL+"/api/v1/workflows/"+fa.tn.wfID, body, bearer(fa.tn.token)))
		}
	})
}

func FuzzAPIStartBody(f *testing.F) {
	for _, s := range []struct{ body, key string }{
		{`{"input": {"nip": "5260250274"}}`, ""},
		{`{"input": {"nip": "5260250274"}}`, "2026-10 kowalski"},
		{`{}`, ""},
		{``, ""},
		{`{"input": {"a": "\u0000"}}`, ""},
		{`{"input": {"k\u0000": 1}}`, "k-nul"},
		{`{"input": {"n": 1e1000000}}`, ""},
		{`{"input": {"n": -1e400}}`, ""},
		{`{"input": {}} {"input": {}}`, ""},
		{`{"input": {}}]`, ""},
		{`{"input": {}, "extra": 1}`, ""},
		{`{"input": []}`, ""},
		{`{"input": null}`, ""},
		{`{"input": "text"}`, ""},
		{`null`, ""},
		{`{"input": ` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`, ""},
		{`{"input": {}}`, "webhook:msg_1"},
		{`{"input": {}}`, strings.Repeat("k", 256)},
		{`{"input": {}}`, "bad \xff key"},
		{"{\"input\": {\"s\": \"\xff\xfe\"}}", ""},
	} {
		f.Add(s.body, s.key)
	}
	apps := fuzzApps(f)
	f.Fuzz(func(t *testing.T, body, key string) {
		for _, fa := range apps {
			h := bearer(fa.tn.token)
			// The client cannot send control characters in a header: drop them.
			if key = strings.Map(func(r rune) rune {
				if r < 0x20 && r != '\t' || r == 0x7f {
					return -1
				}
				return r
			}, key); key != "" {
				h["Idempotency-Key"] = key
			}
			fa.check(t, "POST /api/v1/workflows/{id}/executions", do(t, http.DefaultClient, "POST", fa.srv.URL+"/api/v1/workflows/"+fa.tn.wfID+"/executions", body, h))
		}
	})
}

func FuzzCursor(f *testing.F) {
	id := uuid.NewString()
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, s := range []string{
		"",
		b64("2026-11-22T10:00:00.123456789Z|" + id),
		b64("2026-11-22T10:00:00Z|" + strings.ToUpper(id)),
		b64("2026-11-22T10:00:00Z|urn:uuid:" + id),
		b64("2026-11-22T10:00:00Z|{" + id + "}"),
		b64("2026-11-22T10:00:00Z|" + strings.ReplaceAll(id, "-", "")),
		b64("2026-11-22T10:00:00Z|not-a-uuid"),
		b64("2026-11-22T10:00:00Z|\x00"),
		b64("2026-11-22T10:00:00Z|"),
		b64("0000-01-01T00:00:00Z|" + id),
		b64("9999-12-31T23:59:59-23:59|" + id),
		b64("0001-01-01T00:00:00+23:59|" + id),
		b64("292277026596-12-04T15:30:07Z|" + id),
		b64("yesterday|" + id),
		b64("|"),
		b64("no separator"),
		b64("2026-11-22T10:00:00Z|" + id + "|extra"),
		b64("\xff\xfe|\xff"),
		"!!!not base64!!!",
		"====",
		strings.Repeat("A", 10000),
		base64.StdEncoding.EncodeToString([]byte("2026-11-22T10:00:00Z|" + id)),
	} {
		f.Add(s)
	}
	apps := fuzzApps(f)
	f.Fuzz(func(t *testing.T, cursor string) {
		for _, fa := range apps {
			for _, p := range []string{"/api/v1/executions", "/api/v1/dlq"} {
				r := do(t, http.DefaultClient, "GET", fa.srv.URL+p+"?cursor="+url.QueryEscape(cursor), "", bearer(fa.tn.token))
				fa.check(t, "GET "+p+"?cursor=", r)
				if r.status != 200 && r.status != 422 {
					t.Fatalf("%s: GET %s?cursor=%q answered %d, want 200 or 422: %s", fa.dialect, p, cursor, r.status, r.body)
				}
				r = do(t, http.DefaultClient, "GET", fa.srv.URL+p+"?workflowId="+url.QueryEscape(cursor)+"&status="+url.QueryEscape(cursor), "", bearer(fa.tn.token))
				fa.check(t, "GET "+p+"?workflowId=&status=", r)
			}
		}
	})
}

func FuzzIDs(f *testing.F) {
	id := "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
	for _, s := range []string{
		id,
		"urn:uuid:" + id,
		"{" + id + "}",
		strings.ToUpper(id),
		strings.ReplaceAll(id, "-", ""),
		"not-a-uuid",
		"00000000-0000-0000-0000-00000000000\x00",
		"\x00",
		"' OR 1=1 --",
		"..",
		strings.Repeat("a", 5000),
		"6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4\xff",
	} {
		f.Add(s)
	}
	apps := fuzzApps(f)
	f.Fuzz(func(t *testing.T, id string) {
		for _, fa := range apps {
			// The tenant's own ids must be found; any other string must not be a 5xx.
			for _, real := range []string{fa.tn.execID, fa.tn.wfID, fa.tn.dlqID} {
				if id == real {
					return
				}
			}
			canonical := false
			if u, err := uuid.Parse(id); err == nil && u.String() == id {
				canonical = true
			}
			esc := url.PathEscape(id)
			for _, c := range []struct{ method, path, body string }{
				{"GET", "/api/v1/executions/" + esc, ""},
				{"GET", "/api/v1/workflows/" + esc, ""},
				{"GET", "/api/v1/dlq/" + esc, ""},
				{"PUT", "/api/v1/workflows/" + esc, definitionSeeds[0]},
				{"POST", "/api/v1/workflows/" + esc + "/executions", `{"input": {}}`},
			} {
				r := do(t, http.DefaultClient, c.method, fa.srv.URL+c.path, c.body, bearer(fa.tn.token))
				fa.check(t, c.method+" "+c.path, r)
				if !canonical && id != "" && r.status < 400 {
					t.Fatalf("%s: %s %s with a non-canonical id answered %d: %s", fa.dialect, c.method, c.path, r.status, r.body)
				}
			}
		}
	})
}

// FuzzDefinition: Parse never panics, fails only with EINVALID, and what it accepts is
// stored as canonical JSON that parses again to the same thing.
func FuzzDefinition(f *testing.F) {
	for _, s := range definitionSeeds {
		f.Add(s)
	}
	reg := steps.Builtins(http.DefaultClient)
	f.Fuzz(func(t *testing.T, raw string) {
		done := make(chan string)
		go func() { done <- parseProperty(raw, reg) }()
		select {
		case msg := <-done:
			if msg != "" {
				t.Fatal(msg)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("HANG %q", raw)
		}
	})
}

func parseProperty(raw string, reg *steps.Registry) string {
	d, err := definition.Parse([]byte(raw), reg)
	if err != nil {
		var me *apperr.Error
		if !errors.As(err, &me) || me.Code != apperr.EINVALID || len(me.Fields) == 0 {
			return fmt.Sprintf("Parse(%q) failed with %v, want EINVALID with field messages", raw, err)
		}
		return ""
	}
	canon := d.JSON()
	if strings.Contains(string(canon), `\u0000`) {
		return fmt.Sprintf("Parse(%q) accepted a NUL character", raw)
	}
	again, err := definition.Parse(canon, reg)
	if err != nil {
		return fmt.Sprintf("the canonical JSON of an accepted definition does not parse: %s: %v", canon, err)
	}
	if string(again.JSON()) != string(canon) {
		return fmt.Sprintf("canonical JSON is not stable:\n%s\n%s", canon, again.JSON())
	}
	return ""
}
