package handlers_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alexedwards/argon2id"

	"lifeline/handlers"
	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/auth"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/outbound"
	"lifeline/services/redact"
	"lifeline/services/secrets"
	"lifeline/services/steps"
	"lifeline/services/workflows"
)

var fastHash = &argon2id.Params{Memory: 8 * 1024, Iterations: 1, Parallelism: 1, SaltLength: 16, KeyLength: 32}

type app struct {
	t   testing.TB
	db  *models.DB
	srv *httptest.Server
	eng *engine.Engine
	as  *auth.Service
	wfs *workflows.Service
	// ext is a loopback "external service": 400 for /bad, 200 otherwise.
	ext *httptest.Server
}

type tenant struct {
	org, token, viewerToken, wfID, execID, dlqID, webhookToken, webhookSecret string
	email, password                                                           string
}

func newApp(t testing.TB, db *models.DB, opts ...appOption) *app {
	return newAppWith(t, db, io.Discard, opts...)
}

// appOption changes the app's dependencies before it starts; listen is the address it will
// listen on ("127.0.0.1:port"). It runs before the engine is made (d.Engine is nil): the
// engine is given the Notify and Databases it leaves.
type appOption func(d *handlers.Deps, listen string)

// newAppDeps is newAppWith with more of the app's dependencies set by more (nil: none).
func newAppDeps(t testing.TB, db *models.DB, logw io.Writer, more func(*handlers.Deps)) *app {
	return newAppWith(t, db, logw, func(d *handlers.Deps, _ string) {
		if more != nil {
			more(d)
		}
	})
}

// newAppWith builds the app with its log written to logw and secrets sealed at rest under
// a fresh key ring, as `lifeline serve` runs.
func newAppWith(t testing.TB, db *models.DB, logw io.Writer, opts ...appOption) *app {
	t.Helper()
	log := slog.New(slog.NewJSONHandler(logw, nil))
	reg := steps.Builtins(outbound.NewClient(outbound.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
	spec, err := secrets.NewKeySpec("test")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := secrets.ParseRing(spec)
	if err != nil {
		t.Fatal(err)
	}
	sealer := secrets.JSONSealer{Ring: ring, IsSecret: redact.New(nil).Match}
	db.Sealer = sealer
	a := &app{t: t, db: db, as: &auth.Service{DB: db, Params: fastHash}, wfs: &workflows.Service{DB: db, Steps: reg}}
	a.ext = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/bad") {
			http.Error(w, `{"error":"invalid"}`, http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(a.ext.Close)
	// Tests log in often from one address: the login limits get their own tests.
	deps := handlers.Deps{DB: db, Workflows: a.wfs, Auth: a.as, Log: log, BaseURL: "http://lifeline.test",
		LoginThrottle: &auth.Throttle{PerAddress: 10000, PerAccountNetwork: 10000, PerAccount: 10000}}
	a.srv = httptest.NewUnstartedServer(nil)
	for _, o := range opts {
		o(&deps, a.srv.Listener.Addr().String())
	}
	jcfg := jobs.Config{FetchPollInterval: 50 * time.Millisecond, BulkRate: 1000}
	queue, err := jobs.NewQueue(db, jcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ecfg := engine.Config{Queue: queue, Sealer: sealer}
	if deps.Notify != nil {
		ecfg.Notifier = deps.Notify
	}
	if deps.Databases != nil {
		ecfg.Databases = deps.Databases
	}
	a.eng = engine.New(db, reg, log, ecfg)
	runner, err := jobs.New(db, a.eng, queue, jcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = runner.Stop(ctx)
	})
	deps.Engine, deps.Bulk = a.eng, runner.Bulk()
	a.srv.Config.Handler = handlers.New(deps)
	a.srv.Start()
	t.Cleanup(a.srv.Close)
	return a
}

func (a *app) definition(path string) string {
	return fmt.Sprintf(`{"name": "VAT %s", "settings": {"retryPolicy": {"maxRetries": 0}}, "steps": [{"id": "submit", "type": "http", "config": {"method": "POST", "url": "%s%s", "body": {"nip": "{{ input.nip }}"}}}]}`, path, a.ext.URL, path)
}

// tenant creates an organization with users, tokens, a workflow, a finished execution and a dead letter.
func (a *app) tenant(name string) *tenant {
	a.t.Helper()
	ctx := context.Background()
	org, err := a.as.CreateOrg(ctx, name)
	if err != nil {
		a.t.Fatal(err)
	}
	tn := &tenant{org: org.ID, email: strings.ToLower(strings.ReplaceAll(name, " ", "")) + "@example.com", password: "correct horse battery"}
	if _, err := a.as.CreateUser(ctx, org.ID, tn.email, tn.password, models.RoleAdmin); err != nil {
		a.t.Fatal(err)
	}
	if tn.token, _, err = a.as.CreateToken(ctx, org.ID, models.RoleAdmin, "ci"); err != nil {
		a.t.Fatal(err)
	}
	if tn.viewerToken, _, err = a.as.CreateToken(ctx, org.ID, models.RoleViewer, "read-only"); err != nil {
		a.t.Fatal(err)
	}
	wf, err := a.wfs.Create(ctx, org.ID, audit.System, []byte(a.definition("/bad")))
	if err != nil {
		a.t.Fatal(err)
	}
	tn.wfID, tn.webhookToken, tn.webhookSecret = wf.ID, wf.WebhookToken, wf.WebhookSecret
	ex, _, err := a.eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID, Input: []byte(`{"nip": "1"}`)})
	if err != nil {
		a.t.Fatal(err)
	}
	tn.execID = ex.ID
	deadline := time.Now().Add(15 * time.Second)
	for {
		var dl models.DeadLetter
		if err := a.db.Conn(ctx).Where("execution_id = ?", ex.ID).First(&dl).Error; err == nil {
			tn.dlqID = dl.ID
			break
		}
		if time.Now().After(deadline) {
			a.t.Fatal("no dead letter for the failing execution")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return tn
}

var actorSystem = audit.System

type resp struct {
	status int
	body   string
	header http.Header
}

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("not JSON (%d): %s", r.status, r.body)
	}
	return m
}

func do(t testing.TB, c *http.Client, method, u string, body string, hdr map[string]string) resp {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	checkContract(t, req, body, res.StatusCode, res.Header, b)
	return resp{status: res.StatusCode, body: string(b), header: res.Header}
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

var csrfInput = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// browser is a logged-in cookie client with the page's CSRF token.
func (a *app) browser(tn *tenant) (*http.Client, string) {
	a.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r := do(a.t, c, "GET", a.srv.URL+"/login", "", nil)
	m := csrfInput.FindStringSubmatch(r.body)
	if m == nil {
		a.t.Fatalf("no CSRF field on the login page: %s", r.body)
	}
	form := url.Values{"email": {tn.email}, "password": {tn.password}, "_csrf": {m[1]}}
	r = do(a.t, c, "POST", a.srv.URL+"/login", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	// An accountant lands on Today, the others on the workflows.
	if loc := r.header.Get("Location"); r.status != http.StatusSeeOther || (loc != "/workflows" && loc != "/today") {
		a.t.Fatalf("login: %d %s %s", r.status, loc, r.body)
	}
	// Login gives the session a new CSRF token: pages carry it.
	r = do(a.t, c, "GET", a.srv.URL+"/workflows", "", nil)
	if m = csrfInput.FindStringSubmatch(r.body); m == nil {
		a.t.Fatalf("no CSRF field on the workflows page: %.300s", r.body)
	}
	return c, m[1]
}

func TestLoginAndPages(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Kowalski")
		// Not logged in: pages send to the login page, the API answers 401 JSON.
		anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		if r := do(t, anon, "GET", a.srv.URL+"/executions", "", nil); r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login?next=") {
			t.Fatalf("anonymous page: %d %s", r.status, r.header.Get("Location"))
		}
		if r := do(t, anon, "GET", a.srv.URL+"/api/v1/executions", "", nil); r.status != 401 || r.json(t)["error"] == nil {
			t.Fatalf("anonymous API: %d %s", r.status, r.body)
		}
		// Wrong password: 401 and a message, no session.
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: anon.CheckRedirect}
		tok := csrfInput.FindStringSubmatch(do(t, c, "GET", a.srv.URL+"/login", "", nil).body)[1]
		r := do(t, c, "POST", a.srv.URL+"/login", url.Values{"email": {tn.email}, "password": {"nope"}, "_csrf": {tok}}.Encode(),
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		if r.status != 401 || !strings.Contains(r.body, "not correct") {
			t.Fatalf("bad password: %d", r.status)
		}
		b, _ := a.browser(tn)
		for _, p := range []string{"/workflows", "/workflows/" + tn.wfID, "/executions", "/executions/" + tn.execID, "/dlq", "/dlq/" + tn.dlqID} {
			r := do(t, b, "GET", a.srv.URL+p, "", nil)
			if r.status != 200 || !strings.Contains(r.body, "Biuro Kowalski") {
				t.Errorf("GET %s: %d", p, r.status)
			}
		}
		// The list says why an execution failed, without opening it.
		if r := do(t, b, "GET", a.srv.URL+"/executions?status=DLQ_PENDING", "", nil); !strings.Contains(r.body, "400 Bad Request") {
			t.Errorf("executions list lacks the error message")
		}
		// The execution page shows the failed step, its error type and message.
		r = do(t, b, "GET", a.srv.URL+"/executions/"+tn.execID, "", nil)
		for _, want := range []string{`data-testid="failure"`, "validation", "400 Bad Request", "submit"} {
			if !strings.Contains(r.body, want) {
				t.Errorf("execution page lacks %q", want)
			}
		}
		// An htmx refresh gets only the fragment.
		r = do(t, b, "GET", a.srv.URL+"/executions/"+tn.execID, "", map[string]string{"HX-Request": "true"})
		if r.status != 200 || strings.Contains(r.body, "<html") || !strings.Contains(r.body, `id="execution-body"`) {
			t.Errorf("htmx fragment: %d %.100s", r.status, r.body)
		}
	})
}

func TestCSRF(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro CSRF")
		b, tok := a.browser(tn)
		form := "input=%7B%7D"
		ct := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
		before := count(t, db, "workflow_executions")
		// No token: refused, nothing started.
		if r := do(t, b, "POST", a.srv.URL+"/workflows/"+tn.wfID+"/executions", form, ct); r.status != http.StatusForbidden && r.status != http.StatusBadRequest {
			t.Fatalf("no token: %d", r.status)
		}
		// A cross-site request is refused even with a token.
		h := map[string]string{"Content-Type": ct["Content-Type"], "X-CSRF-Token": tok, "Sec-Fetch-Site": "cross-site"}
		if r := do(t, b, "POST", a.srv.URL+"/workflows/"+tn.wfID+"/executions", form, h); r.status != http.StatusForbidden {
			t.Fatalf("cross-site: %d", r.status)
		}
		if n := count(t, db, "workflow_executions"); n != before {
			t.Fatalf("a refused request started an execution (%d → %d)", before, n)
		}
		// With the token (htmx sends it as a header): started, HX-Redirect to the execution.
		h = map[string]string{"Content-Type": ct["Content-Type"], "X-CSRF-Token": tok, "HX-Request": "true"}
		r := do(t, b, "POST", a.srv.URL+"/workflows/"+tn.wfID+"/executions", `input={"nip":"5260250274"}`, h)
		if r.status != http.StatusNoContent || !strings.HasPrefix(r.header.Get("HX-Redirect"), "/executions/") {
			t.Fatalf("with token: %d %q %s", r.status, r.header.Get("HX-Redirect"), r.body)
		}
		// Bad JSON input: 422 with the field message, re-rendered form, nothing started.
		before = count(t, db, "workflow_executions")
		r = do(t, b, "POST", a.srv.URL+"/workflows/"+tn.wfID+"/executions", `input=[1,2]`, h)
		if r.status != 422 || !strings.Contains(r.body, "must be a JSON object") || !strings.Contains(r.body, `data-testid="field-error"`) {
			t.Fatalf("bad input: %d %s", r.status, r.body)
		}
		if n := count(t, db, "workflow_executions"); n != before {
			t.Fatal("invalid input started an execution")
		}
	})
}

func count(t testing.TB, db *models.DB, table string) int64 {
	var n int64
	if err := db.Conn(context.Background()).Table(table).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCrossOrganizationIs404(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		mine := a.tenant("Biuro A")
		other := a.tenant("Biuro B")
		b, tok := a.browser(mine)
		pages := []string{"/workflows/" + other.wfID, "/executions/" + other.execID, "/dlq/" + other.dlqID}
		for _, p := range pages {
			if r := do(t, b, "GET", a.srv.URL+p, "", nil); r.status != 404 {
				t.Errorf("page GET %s: %d", p, r.status)
			}
		}
		if r := do(t, b, "POST", a.srv.URL+"/workflows/"+other.wfID+"/executions", "input=%7B%7D",
			map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-CSRF-Token": tok}); r.status != 404 {
			t.Errorf("page start in other org: %d", r.status)
		}
		api := []struct{ method, path, body string }{
			{"GET", "/api/v1/workflows/" + other.wfID, ""},
			{"PUT", "/api/v1/workflows/" + other.wfID, a.definition("/ok")},
			{"POST", "/api/v1/workflows/" + other.wfID + "/executions", `{"input": {}}`},
			{"GET", "/api/v1/executions/" + other.execID, ""},
			{"GET", "/api/v1/dlq/" + other.dlqID, ""},
		}
		for _, c := range api {
			r := do(t, http.DefaultClient, c.method, a.srv.URL+c.path, c.body, bearer(mine.token))
			if r.status != 404 || r.json(t)["error"].(map[string]any)["code"] != "not_found" {
				t.Errorf("API %s %s: %d %s", c.method, c.path, r.status, r.body)
			}
		}
		// Lists never show the other organization's rows.
		for _, p := range []string{"/api/v1/workflows", "/api/v1/executions", "/api/v1/dlq"} {
			r := do(t, http.DefaultClient, "GET", a.srv.URL+p, "", bearer(mine.token))
			if r.status != 200 || strings.Contains(r.body, other.wfID) || !strings.Contains(r.body, mine.wfID) {
				t.Errorf("list %s leaks or misses: %d", p, r.status)
			}
		}
		// A filter naming the other organization's workflow finds nothing.
		r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions?workflowId="+other.wfID, "", bearer(mine.token))
		if items := r.json(t)["items"].([]any); len(items) != 0 {
			t.Errorf("filter by foreign workflow returned %d items", len(items))
		}
		// Malformed ids are 404 too, not 500.
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/not-a-uuid", "", bearer(mine.token)); r.status != 404 {
			t.Errorf("malformed id: %d", r.status)
		}
	})
}

func TestAPIStartIdempotencyAndRoles(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro API")
		// Create a workflow through the API.
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", a.definition("/ok"), bearer(tn.token))
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		wfID := r.json(t)["id"].(string)
		start := func(key, body string) resp {
			h := bearer(tn.token)
			if key != "" {
				h["Idempotency-Key"] = key
			}
			return do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wfID+"/executions", body, h)
		}
		first := start("k-1", `{"input": {"nip": "5260250274"}}`)
		if first.status != 201 {
			t.Fatalf("start: %d %s", first.status, first.body)
		}
		id := first.json(t)["id"]
		again := start("k-1", `{"input": {"nip": "5260250274"}}`)
		if again.status != 200 || again.json(t)["id"] != id || again.header.Get("Idempotency-Replayed") != "true" {
			t.Fatalf("replay: %d %s", again.status, again.body)
		}
		conflict := start("k-1", `{"input": {"nip": "0000000000"}}`)
		if conflict.status != 422 || conflict.json(t)["error"].(map[string]any)["fields"].(map[string]any)["Idempotency-Key"] == nil {
			t.Fatalf("same key, other body: %d %s", conflict.status, conflict.body)
		}
		if other := start("k-2", `{"input": {"nip": "5260250274"}}`); other.status != 201 || other.json(t)["id"] == id {
			t.Fatalf("new key: %d", other.status)
		}
		// The execution finishes and the API shows steps and attempts.
		deadline := time.Now().Add(15 * time.Second)
		for {
			r = do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/executions/"+id.(string), "", bearer(tn.token))
			if r.json(t)["status"] == "SUCCEEDED" || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		ex := r.json(t)
		steps := ex["steps"].([]any)
		att := steps[0].(map[string]any)["attempts"].([]any)[0].(map[string]any)
		if ex["status"] != "SUCCEEDED" || att["attempt"].(float64) != 1 || att["status"] != "SUCCEEDED" || att["startedAt"] == nil {
			t.Fatalf("execution: %s", r.body)
		}
		// Bad input and bad definitions: 422 with field messages, nothing written.
		before := count(t, db, "workflows")
		bad := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows",
			`{"name": "x", "steps": [{"id": "a", "type": "ftp", "config": {}}, {"id": "a", "type": "transform", "config": {"output": "{{ steps.zzz.output }}"}}], "settings": {"retryPolicy": {"maxRetries": 11}}}`, bearer(tn.token))
		fields, _ := bad.json(t)["error"].(map[string]any)["fields"].(map[string]any)
		for _, f := range []string{"steps[0].type", "steps[1].id", "steps[1].config.output", "settings.retryPolicy.maxRetries"} {
			if fields[f] == nil {
				t.Errorf("bad definition: no message for %s in %s", f, bad.body)
			}
		}
		if bad.status != 422 || count(t, db, "workflows") != before {
			t.Errorf("bad definition: %d, or something was written", bad.status)
		}
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", `{"name": `, bearer(tn.token)); r.status != 422 {
			t.Errorf("malformed JSON: %d", r.status)
		}
		if r := start("", `{"input": "text"}`); r.status != 422 {
			t.Errorf("non-object input: %d", r.status)
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq?status=lost", "", bearer(tn.token)); r.status != 422 {
			t.Errorf("bad filter: %d", r.status)
		}
		// A viewer token reads but cannot start or create.
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/dlq/"+tn.dlqID, "", bearer(tn.viewerToken)); r.status != 200 ||
			r.json(t)["originalInput"] == nil || r.json(t)["stepStates"] == nil {
			t.Errorf("viewer read DLQ item: %d %s", r.status, r.body)
		}
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows/"+wfID+"/executions", `{}`, bearer(tn.viewerToken)); r.status != 403 {
			t.Errorf("viewer start: %d", r.status)
		}
		if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/workflows", a.definition("/ok"), bearer(tn.viewerToken)); r.status != 403 {
			t.Errorf("viewer create: %d", r.status)
		}
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/workflows", "", bearer("llt_forged")); r.status != 401 {
			t.Errorf("forged token: %d", r.status)
		}
	})
}

func TestWebhookSignature(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Hook")
		body := []byte(`{"nip": "5260250274", "period": "2026-10"}`)
		u := a.srv.URL + "/hooks/" + tn.webhookToken
		before := count(t, db, "workflow_executions")
		now := time.Now()
		good := signed(t, tn.webhookSecret, "msg_1", now, body)
		wrong := signed(t, "whsec_"+base64.StdEncoding.EncodeToString([]byte("another secret")), "msg_1", now, body)
		otherID := signed(t, tn.webhookSecret, "msg_1", now, body)
		otherID["Webhook-Id"] = "msg_2" // the signature covers the id
		garbage := signed(t, tn.webhookSecret, "msg_1", now, body)
		garbage["Webhook-Signature"] = "v1,zz"
		notUnix := signed(t, tn.webhookSecret, "msg_1", now, body)
		notUnix["Webhook-Timestamp"] = now.Format(time.RFC3339)
		legacy := map[string]string{"X-Lifeline-Signature": legacySign(tn.webhookSecret, body)}
		for name, c := range map[string]struct {
			h    map[string]string
			want string
		}{
			"missing":          {nil, "Missing webhook-id"},
			"legacy header":    {legacy, "Missing webhook-id"},
			"wrong secret":     {wrong, "does not match"},
			"id not signed":    {otherID, "does not match"},
			"garbage":          {garbage, "does not match"},
			"timestamp format": {notUnix, "Unix time"},
		} {
			r := do(t, http.DefaultClient, "POST", u, string(body), c.h)
			if r.status != 401 || !strings.Contains(r.body, c.want) {
				t.Errorf("%s: %d %s, want 401 with %q", name, r.status, r.body, c.want)
			}
		}
		if count(t, db, "workflow_executions") != before {
			t.Fatal("a badly signed webhook started an execution")
		}
		r := do(t, http.DefaultClient, "POST", u, string(body), good)
		if r.status != 202 || r.json(t)["executionId"] == nil {
			t.Fatalf("signed webhook: %d %s", r.status, r.body)
		}
		var ex models.Execution
		db.Conn(context.Background()).First(&ex, "id = ?", r.json(t)["executionId"])
		if ex.TriggerType != "webhook" || ex.OrganizationID != tn.org || !bytes.Contains(ex.Input, []byte("5260250274")) {
			t.Errorf("execution %+v", ex)
		}
		for _, tok := range []string{"unknown", "0000000000000000000000000000000000000000", "%00", "x%0Dy"} {
			if r := do(t, http.DefaultClient, "POST", a.srv.URL+"/hooks/"+tok, string(body), good); r.status != 404 {
				t.Errorf("unknown hook %q: %d", tok, r.status)
			}
		}
	})
}

// signed returns the Standard Webhooks headers of a delivery, from handlers.Sign.
func signed(t *testing.T, secret, id string, at time.Time, body []byte) map[string]string {
	t.Helper()
	h, err := handlers.Sign(secret, id, at, body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k := range h {
		out[k] = h.Get(k)
	}
	return out
}

// legacySign is the signature scheme before Standard Webhooks (X-Lifeline-Signature).
func legacySign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// What PostgreSQL used to refuse with a 500 (NUL, numbers out of range, non-canonical ids,
// forged cursors) and what used to be accepted at save and fail later (trailing data,
// template names other than input/steps/execution, CR/LF in headers, non-http(s) URLs)
// gets the same clear 4xx on both databases, with the field named.
func TestBadInputIsTheSame4xxOnBothDatabases(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		a := newApp(t, db)
		tn := a.tenant("Biuro Input")
		api := func(method, path, body string) resp {
			return do(t, http.DefaultClient, method, a.srv.URL+path, body, bearer(tn.token))
		}
		// Ids: only the canonical form names a row; other spellings of the same uuid are 404.
		for _, c := range []struct{ path, id string }{{"/api/v1/executions/", tn.execID}, {"/api/v1/workflows/", tn.wfID}, {"/api/v1/dlq/", tn.dlqID}} {
			if r := api("GET", c.path+c.id, ""); r.status != 200 {
				t.Fatalf("GET %s%s: %d", c.path, c.id, r.status)
			}
			for _, form := range []string{"urn:uuid:" + c.id, "{" + c.id + "}", strings.ToUpper(c.id), strings.ReplaceAll(c.id, "-", "")} {
				if r := api("GET", c.path+url.PathEscape(form), ""); r.status != 404 || r.json(t)["error"].(map[string]any)["code"] != "not_found" {
					t.Errorf("GET %s%s: %d %s, want 404", c.path, form, r.status, r.body)
				}
			}
		}
		// Forged cursors: 422 on the cursor field.
		b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
		for _, cur := range []string{"!!!", b64("2026-01-01T00:00:00Z|urn:uuid:" + tn.execID), b64("2026-01-01T00:00:00Z|x"), b64("when|" + tn.execID),
			b64("9999-12-31T23:59:59-23:59|" + tn.execID), b64("2026-01-01T00:00:00Z|\x00"), strings.Repeat("A", 5000)} {
			for _, p := range []string{"/api/v1/executions", "/api/v1/dlq"} {
				r := api("GET", p+"?cursor="+url.QueryEscape(cur), "")
				if f := fieldsOf(t, r); r.status != 422 || f["cursor"] == nil {
					t.Errorf("GET %s?cursor=%.40s: %d %s, want 422 on cursor", p, cur, r.status, r.body)
				}
			}
		}
		if r := api("GET", "/api/v1/executions?cursor="+b64("2026-01-01T00:00:00Z|"+tn.execID), ""); r.status != 200 {
			t.Errorf("a well-formed cursor: %d %s", r.status, r.body)
		}
		// Definitions: 422 with the field, nothing written.
		step := `{"id": "a", "type": "http", "config": {"url": "https://x.example/a"}}`
		before := count(t, db, "workflows")
		for _, c := range []struct{ name, body, field, want string }{
			{"NUL in name", `{"name": "VAT\u0000", "steps": [` + step + `]}`, "name", "NUL"},
			{"NUL in step name", `{"name": "x", "steps": [{"id": "a", "name": "\u0000", "type": "delay", "config": {"ms": 1}}]}`, "steps[0].name", "NUL"},
			{"NUL in config", `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": {"a": "\u0000"}}}]}`, "steps[0].config.output.a", "NUL"},
			{"huge number", `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": 1e1000000}}]}`, "steps[0].config.output", "out of range"},
			{"trailing data", `{"name": "x", "steps": [` + step + `]} {"name": "y"}`, "definition", "has data after the JSON object"},
			{"env template", `{"name": "x", "steps": [{"id": "a", "type": "transform", "config": {"output": "{{ env.HOME }}"}}]}`, "steps[0].config.output", "unknown name env"},
			{"CRLF header", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "https://x.example", "headers": {"X-A": "1\r\nX-B: 2"}}}]}`, "steps[0].config.headers.X-A", "control characters"},
			{"file URL", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "file:///etc/passwd"}}]}`, "steps[0].config.url", "http or https"},
			{"gopher URL", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "gopher://x.example/"}}]}`, "steps[0].config.url", "http or https"},
			{"scheme after a placeholder", `{"name": "x", "steps": [{"id": "a", "type": "http", "config": {"url": "{{ '' }}file:///etc/passwd"}}]}`, "steps[0].config.url", "http:// or https://"},
		} {
			for _, m := range []struct{ method, path string }{{"POST", "/api/v1/workflows"}, {"PUT", "/api/v1/workflows/" + tn.wfID}} {
				r := api(m.method, m.path, c.body)
				msg, _ := fieldsOf(t, r)[c.field].(string)
				if r.status != 422 || !strings.Contains(msg, c.want) {
					t.Errorf("%s %s %s: %d %s, want 422 with %s containing %q", c.name, m.method, m.path, r.status, r.body, c.field, c.want)
				}
			}
		}
		if n := count(t, db, "workflows"); n != before {
			t.Errorf("refused definitions wrote %d workflows", n-before)
		}
		// The start body: one JSON object, nothing after it.
		execs := count(t, db, "workflow_executions")
		for _, body := range []string{`{"input": {}} {"input": {}}`, `{"input": {}}]`, `{"input": {}}x`} {
			r := api("POST", "/api/v1/workflows/"+tn.wfID+"/executions", body)
			msg, _ := fieldsOf(t, r)["body"].(string)
			if r.status != 422 || msg != "has data after the JSON object" {
				t.Errorf("start body %q: %d %s", body, r.status, r.body)
			}
		}
		if n := count(t, db, "workflow_executions"); n != execs {
			t.Errorf("refused start bodies started %d executions", n-execs)
		}
	})
}

func fieldsOf(t *testing.T, r resp) map[string]any {
	t.Helper()
	e, _ := r.json(t)["error"].(map[string]any)
	f, _ := e["fields"].(map[string]any)
	return f
}
