package demo_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"lifeline/services/classify"
	"lifeline/services/demo"
	"lifeline/services/sandbox"
)

// live runs def's steps in order against the sandbox in office mode, as the engine would
// (one attempt each), and returns the id of the first step that failed with its reason ("" and
// "" when all succeeded).
func live(t *testing.T, h http.Handler, def map[string]any, input map[string]any) (failed, reason string) {
	t.Helper()
	done := map[string]any{}
	env := map[string]any{"input": input, "steps": done, "execution": map[string]any{"id": "exec-1"}}
	for _, s := range steps(def) {
		if s["handler"] == true {
			continue
		}
		id := s["id"].(string)
		cfg := render(t, s["config"], env).(map[string]any)
		var out any = map[string]any{}
		switch s["type"] {
		case "http":
			u, _ := url.Parse(cfg["url"].(string))
			body, _ := json.Marshal(cfg["body"])
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(cfg["method"].(string), u.Path, bytes.NewReader(body)))
			if rec.Code >= 300 {
				he := &classify.HTTPError{Method: "POST", URL: u.String(), StatusCode: rec.Code, Body: rec.Body.String()}
				return id, he.Reason()
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
		case "transform":
			out = cfg["output"]
		}
		done[id] = map[string]any{"output": out}
	}
	return "", ""
}

// TestMorningFailsForItsTrueReasons: the demo's first executions meet the office's services
// (the sandbox in office mode, ten seconds after it started) and each ends as Morning says,
// with a reason that names its true cause; with the input corrected, each goes through.
func TestMorningFailsForItsTrueReasons(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC)
	now := start.Add(10 * time.Second)
	h := sandbox.New(sandbox.Options{Now: func() time.Time { return now }, Office: true})
	defs := map[string]map[string]any{}
	for _, d := range definitions(t) {
		defs[d["name"].(string)] = d
	}
	want := []struct{ client, step, reason string }{
		{"Kowalski Sp. z o.o.", "", ""},
		{"Nowak i Wspólnicy Sp. j.", "import_statement", "ma 9 cyfr, a powinien mieć 10 (400 Bad Request)"},
		{"Piekarnia Zielińscy s.c.", "send_report", "nie jest adresem e-mail (400 Bad Request)"},
		{"Apteka Pod Lipami Kozłowska", "validate_jpk", "ma 9 cyfr, a powinien mieć 10 (400 Bad Request)"},
	}
	morning := demo.Morning()
	if len(morning) != len(want) {
		t.Fatalf("%d starts, want %d", len(morning), len(want))
	}
	for i, s := range morning {
		w := want[i]
		if s.Input["clientName"] != w.client {
			t.Fatalf("start %d is for %v, want %s", i, s.Input["clientName"], w.client)
		}
		step, reason := live(t, h, defs[s.Workflow], s.Input)
		if step != w.step || !strings.Contains(reason, w.reason) {
			t.Errorf("%s: failed at %q with %q, want %q with …%q", w.client, step, reason, w.step, w.reason)
		}
		if w.step == "" {
			continue
		}
		// The cure: the input corrected (the client's NIP, the address) goes through.
		fixed := map[string]any{}
		for k, v := range s.Input {
			fixed[k] = v
		}
		fixed["clientNip"] = rightNIP(t, w.client)
		if e, _ := fixed["clientEmail"].(string); !strings.Contains(e, "@") {
			fixed["clientEmail"] = strings.Replace(e, ".", "@", 1)
		}
		now = start.Add(4*time.Minute + 30*time.Second) // after the tax gateway's break, before the bank's
		if step, reason := live(t, h, defs[s.Workflow], fixed); step != "" {
			t.Errorf("%s corrected: failed at %s: %s", w.client, step, reason)
		}
		now = start.Add(10 * time.Second)
	}
}

// rightNIP is the NIP the demo's inputs give client when nobody mistyped it.
func rightNIP(t *testing.T, client string) string {
	t.Helper()
	for i := range 5000 {
		in := demo.Input(demo.BankImport, rand.New(rand.NewPCG(uint64(i), 3)))
		if in["clientName"] == client && validNIP(in["clientNip"].(string)) {
			return in["clientNip"].(string)
		}
	}
	t.Fatalf("no input for %s", client)
	return ""
}
