package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/models/modeltest"
)

// routeInput is what a client sends a route besides its path.
type routeInput struct {
	// query are the query keys it reads (list filters, confirmations, redirects).
	query []string
	// form are the fields of its form and an ordinary value of each; forms, more such
	// forms (another action of the same route).
	form  map[string]string
	forms []map[string]string
	// json is an ordinary JSON object it takes ("" when it takes no JSON body); jsons, more.
	json  string
	jsons []string
	// signed: the JSON body is a webhook delivery, signed with the workflow's secret.
	signed bool
	// fresh: every request gets a new row for its :id ("dlq": a pending dead letter;
	// "open", "closed": a breaker in that state), so that hostile values reach what an
	// action stores instead of a conflict with the first request's outcome.
	fresh string
	// skip says why the route is not fuzzed ("" when it is).
	skip string
}

// routeInputs names every route of the server (newFullApp: every optional part on) with
// its input. TestHostileInputEveryRoute fails for a route the server has and this table
// does not name, so that no new route goes unfuzzed, and for an entry the server no longer
// has. Routes without an entry's fields are still requested once.
func routeInputs(tn *tenant, connDSN string) map[string]routeInput {
	listExec := []string{"status", "workflowId", "q", "limit", "cursor", "sort", "client", "period", "obligation", "dueBefore"}
	listDLQ := []string{"workflowId", "status", "errorType", "stepId", "groupId", "from", "to", "q", "limit", "cursor", "sort", "client", "period", "obligation", "dueBefore"}
	listAudit := []string{"event", "actor", "entityType", "entityId", "from", "to", "cursor"}
	analyticsKeys := []string{"range", "from", "to", "workflowId", "stepId", "errorType", "client"}
	conn := map[string]string{"name": "ledger", "driver": "postgres", "dsn": connDSN, "description": "Księgi"}
	settings := map[string]string{"enabled": "true", "channels": "email", "recipients": "role:admin", "slackWebhookUrl": "", "teamsWebhookUrl": "",
		"notifyOnFirstFailure": "true", "notifyOnRetryExhausted": "true", "notifyOnDLQ": "true", "notifyOnBreakerOpen": "", "digestThresholdPerMinute": "10"}
	wfSettings := map[string]string{"useDefaults": ""}
	for k, v := range settings {
		if k != "digestThresholdPerMinute" {
			wfSettings[k] = v
		}
	}
	apiConn := fmt.Sprintf(`{"name": "ledger", "driver": "postgres", "dsn": %q, "description": "Księgi"}`, connDSN)
	sandbox := routeInput{skip: "the demo's stand-ins of external services, not Lifeline's own routes (services/sandbox has their tests)"}
	r := map[string]routeInput{
		"GET /static*":                   {skip: "embedded files"},
		"GET /healthz":                   {},
		"GET /readyz":                    {},
		"POST /logout":                   {skip: "takes no input; it would end the session the other requests use"},
		"GET /login":                     {query: []string{"next"}},
		"POST /login":                    {form: map[string]string{"email": tn.email, "password": "not the password", "next": "/workflows"}},
		"POST /hooks/:token":             {json: `{"nip": "5260250274", "period": "2026-10"}`, signed: true},
		"POST /settings/language":        {form: map[string]string{"lang": "pl", "next": "/workflows"}},
		"GET /":                          {},
		"GET /workflows":                 {},
		"GET /today":                     {},
		"GET /clients/:key":              {},
		"POST /workflows":                {form: map[string]string{"definition": `{"name": "x", "steps": [{"id": "a", "type": "delay", "config": {"ms": 1}}]}`}},
		"GET /workflows/:id":             {},
		"POST /workflows/:id/executions": {form: map[string]string{"input": `{"nip": "1"}`}},
		"POST /workflows/:id/money":      {form: map[string]string{"movesMoney": "true"}},
		"GET /executions":                {query: listExec},
		"GET /executions/:id":            {},
		"GET /waiting":                   {query: []string{"done"}},
		"GET /interventions/:id":         {query: []string{"link"}},
		"POST /interventions/:id/answer": {form: map[string]string{"answer": "approved", "note": "zgodne", "option": "cost", "values.amount": "12,50", "link": "abc"}},
		"POST /executions/:id/cancel":    {form: map[string]string{"note": "klient wycofał"}},
		"GET /dlq":                       {query: listDLQ},
		"GET /dlq/:id":                   {query: []string{"done"}},
		"GET /dlq/problems":              {},
		"GET /dlq/items":                 {query: listDLQ},
		"GET /dlq/groups/:id":            {query: []string{"cursor", "done"}},
		"POST /dlq/groups/:id/mute":      {form: map[string]string{"until": "2030-01-01T00:00:00Z", "at": ""}},
		"POST /dlq/groups/:id/ask":       {form: map[string]string{"note": "Proszę zamknąć"}},
		"POST /dlq/:id/split":            {fresh: "dlq"},
		"POST /dlq/:id/actions": {fresh: "dlq", form: map[string]string{"action": "resolve", "notes": "naprawione ręcznie"},
			forms: []map[string]string{{"action": "edit", "input": `{"nip": "2"}`, "output": "{}", "notes": "n", "retryPolicy": "", "fromStepId": "", "version": "", "mode": "", "preview": "1"}}},
		"POST /dlq/:id/ask":                            {form: map[string]string{"note": "proszę o pomoc"}},
		"POST /dlq/:id/changes/:cid/approve":           {form: map[string]string{"notes": "ok"}},
		"POST /dlq/:id/changes/:cid/reject":            {form: map[string]string{"notes": "nie"}},
		"POST /dlq/:id/reopen":                         {form: map[string]string{"notes": "jeszcze raz"}},
		"GET /settings/rules":                          {query: []string{"done"}},
		"POST /settings/rules":                         {form: map[string]string{"accountantsMayFix": "true"}},
		"GET /settings/escalation":                     {query: []string{"done"}},
		"POST /settings/escalation":                    {form: map[string]string{"levels[0].after": "4", "levels[0].unit": "hours", "levels[0].to": "role:admin"}},
		"POST /executions/:id/rollback":                {},
		"POST /compensations/:id/actions":              {form: map[string]string{"action": "retry", "execution": tn.execID}},
		"POST /dlq/bulk":                               {form: map[string]string{"action": "retry", "ids": tn.dlqID, "scope": "", "confirm": "", "token": "", "nonce": "", "notes": "", "workflowId": "", "q": "", "groupId": "", "field": "", "value": ""}},
		"GET /dlq/bulk/:id":                            {query: []string{"cursor", "status"}},
		"POST /dlq/bulk/:id/cancel":                    {},
		"GET /profile":                                 {},
		"POST /profile":                                {form: map[string]string{"language": "pl", "timeZone": "Europe/Warsaw"}},
		"GET /breakers":                                {query: []string{"done", "state", "workflowId"}},
		"GET /analytics":                               {query: analyticsKeys},
		"GET /analytics/export.csv":                    {query: append([]string{"table"}, analyticsKeys...)},
		"POST /breakers/:id/reset":                     {fresh: "open", form: map[string]string{"reason": "naprawione", "state": "", "workflowId": ""}},
		"POST /breakers/:id/open":                      {fresh: "closed", form: map[string]string{"reason": "awaria", "state": "", "workflowId": ""}},
		"POST /settings/organization":                  {form: map[string]string{"language": "pl", "timeZone": "Europe/Warsaw"}},
		"GET /audit":                                   {query: listAudit},
		"GET /audit/export.csv":                        {query: listAudit},
		"GET /settings/tokens":                         {},
		"POST /settings/tokens":                        {form: map[string]string{"name": "ci", "role": "viewer", "expires": "90"}},
		"POST /settings/tokens/:id/revoke":             {},
		"GET /settings/connections":                    {query: []string{"done", "name", "tested"}},
		"POST /settings/connections":                   {form: conn},
		"GET /settings/connections/:id":                {},
		"POST /settings/connections/:id":               {form: conn},
		"POST /settings/connections/:id/delete":        {},
		"POST /settings/connections/:id/test":          {},
		"GET /settings/credentials":                    {query: []string{"done", "name"}},
		"POST /settings/credentials":                   {form: map[string]string{"name": "ksefToken", "value": "ksef-token-2026"}},
		"POST /settings/credentials/:id/delete":        {},
		"GET /settings/periods":                        {query: []string{"done", "period", "id"}},
		"POST /settings/periods":                       {form: map[string]string{"period": "2026-09", "client": "5260250274", "note": "JPK wysłany"}},
		"POST /settings/periods/:id/reopen":            {},
		"GET /settings/health":                         {},
		"POST /settings/health/quarantine/:id/release": {},
		"GET /settings/quarantine":                     {query: []string{"done"}},
		"POST /settings/quarantine":                    {form: map[string]string{"value": "FV/2026/10/9", "note": "zdublowana pozycja", "back": "/dlq/items"}},
		"POST /settings/quarantine/:id/release":        {form: map[string]string{"back": "/dlq/items"}},
		"GET /settings/notifications":                  {query: []string{"done"}},
		"POST /settings/notifications":                 {form: settings},
		"POST /settings/notifications/test":            {form: map[string]string{"channel": "email"}},
		"GET /notifications/deliveries":                {query: []string{"done", "executionId", "channel", "status", "after"}},
		"POST /notifications/deliveries/:id/resend":    {form: map[string]string{"executionId": "", "channel": "", "status": ""}},
		"GET /notifications":                           {},
		"GET /notifications/bell":                      {},
		"POST /notifications/read-all":                 {},
		"POST /notifications/:id/read":                 {},
		"GET /notifications/:id/open":                  {query: []string{"to"}},
		"GET /notifications/:id/failures":              {},
		"GET /workflows/:id/notifications/edit":        {},
		"POST /workflows/:id/notifications/edit":       {form: wfSettings},
		"GET /workflows/:id/notifications":             {},
		"GET /demo/inbox":                              {},

		"GET /api/v1/openapi.json":              {},
		"GET /api/v1/workflows":                 {},
		"POST /api/v1/workflows":                {json: `{"name": "x", "steps": [{"id": "a", "type": "delay", "config": {"ms": 1}}]}`},
		"GET /api/v1/workflows/:id":             {},
		"PUT /api/v1/workflows/:id":             {json: `{"name": "x", "steps": [{"id": "a", "type": "delay", "config": {"ms": 1}}]}`},
		"POST /api/v1/workflows/:id/executions": {json: `{"input": {"nip": "1"}}`},
		"GET /api/v1/executions":                {query: listExec},
		"GET /api/v1/executions/:id":            {},
		"GET /api/v1/interventions":             {query: []string{"status", "mine"}},
		"GET /api/v1/interventions/:id":         {},
		"POST /api/v1/interventions/:id/answer": {json: `{"answer": "approved", "note": "zgodne", "option": "cost", "values": {"amount": "12.50"}}`},
		"POST /api/v1/executions/:id/cancel":    {json: `{"note": "klient wycofał"}`},
		"GET /api/v1/dlq":                       {query: listDLQ},
		"GET /api/v1/deadlines":                 {query: []string{"from", "to"}},
		"GET /api/v1/dlq/:id":                   {},
		"GET /api/v1/clients/:key":              {},
		"GET /api/v1/dlq/groups":                {query: []string{"status", "workflowId", "errorType", "q", "limit", "cursor"}},
		"GET /api/v1/dlq/groups/:id":            {},
		"POST /api/v1/dlq/groups/:id/actions":   {json: `{"action": "mute", "resolutionNotes": "", "muteUntil": "2030-01-01T00:00:00Z"}`},
		"POST /api/v1/dlq/:id/split":            {fresh: "dlq"},
		"POST /api/v1/dlq/:id/actions": {fresh: "dlq", json: `{"action": "resolve", "resolutionNotes": "naprawione ręcznie"}`,
			jsons: []string{`{"action": "retry_modified", "modifiedInput": {"nip": "2"}, "resolutionNotes": "n", "fromStepId": "submit", "retryPolicy": {"maxRetries": 1}}`}},
		"POST /api/v1/executions/:id/retry":                {json: `{"retryType": "from_failed", "modifiedInput": {"nip": "2"}, "skipSteps": [], "fromStepId": "submit", "retryPolicy": {"maxRetries": 1}, "latestVersion": false, "output": {}}`},
		"POST /api/v1/dlq/:id/ask":                         {json: `{"note": "proszę o pomoc"}`},
		"GET /api/v1/dlq/:id/changes":                      {},
		"GET /api/v1/dlq/:id/poison":                       {},
		"GET /api/v1/quarantine":                           {},
		"POST /api/v1/quarantine":                          {json: `{"value": "FV/2026/10/9", "note": "zdublowana pozycja"}`},
		"POST /api/v1/quarantine/:id/release":              {},
		"POST /api/v1/dlq/:id/changes/:cid/approve":        {json: `{"notes": "ok"}`},
		"POST /api/v1/dlq/:id/changes/:cid/reject":         {json: `{"notes": "nie"}`},
		"POST /api/v1/dlq/:id/reopen":                      {json: `{"notes": "jeszcze raz"}`},
		"GET /api/v1/organization/settings":                {},
		"PATCH /api/v1/organization/settings":              {json: `{"accountantsMayFix": true}`},
		"GET /api/v1/organization/escalation":              {},
		"PUT /api/v1/organization/escalation":              {json: `{"levels": [{"afterMs": 14400000, "to": ["role:admin"]}]}`},
		"POST /api/v1/executions/:id/rollback":             {},
		"POST /api/v1/dlq/:id/rollback":                    {},
		"POST /api/v1/compensations/:id/actions":           {json: `{"action": "retry"}`},
		"GET /api/v1/breakers":                             {query: []string{"state", "workflowId"}},
		"GET /api/v1/analytics":                            {query: analyticsKeys},
		"POST /api/v1/breakers/:id/reset":                  {fresh: "open", json: `{"reason": "naprawione"}`},
		"POST /api/v1/breakers/:id/open":                   {fresh: "closed", json: `{"reason": "awaria"}`},
		"GET /api/v1/connections":                          {},
		"GET /api/v1/health/quarantine":                    {},
		"POST /api/v1/health/quarantine/:id/release":       {},
		"POST /api/v1/connections":                         {json: apiConn},
		"GET /api/v1/connections/:id":                      {},
		"PUT /api/v1/connections/:id":                      {json: apiConn},
		"DELETE /api/v1/connections/:id":                   {},
		"GET /api/v1/periods/closed":                       {},
		"POST /api/v1/periods/closed":                      {json: `{"period": "2026-09", "client": null, "note": "JPK wysłany"}`},
		"DELETE /api/v1/periods/closed/:id":                {},
		"POST /api/v1/connections/:id/test":                {},
		"GET /api/v1/notifications/settings":               {},
		"PUT /api/v1/notifications/settings":               {json: `{"enabled": true, "channels": ["email", "app"], "recipients": ["role:admin"], "slackWebhookUrl": "", "teamsWebhookUrl": "", "notifyOnFirstFailure": false, "notifyOnRetryExhausted": true, "notifyOnDLQ": true, "notifyOnBreakerOpen": false, "digestThresholdPerMinute": 10}`},
		"POST /api/v1/notifications/test":                  {json: `{"channel": "app"}`},
		"GET /api/v1/notifications/deliveries":             {query: []string{"executionId", "limit"}},
		"POST /api/v1/notifications/deliveries/:id/resend": {},
		"GET /api/v1/notifications":                        {query: []string{"limit"}},
		"POST /api/v1/notifications/read-all":              {},
		"POST /api/v1/notifications/:id/read":              {},
		"POST /api/v1/dlq/bulk":                            {json: `{"action": "retry", "ids": ["` + tn.dlqID + `"], "resolutionNotes": "", "filter": {"status": "pending"}}`},
		"GET /api/v1/dlq/bulk/:id":                         {query: []string{"items", "limit", "cursor", "status"}},
		"POST /api/v1/dlq/bulk/:id/cancel":                 {},
	}
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "CONNECT", "TRACE", "PROPFIND", "REPORT"} {
		r[m+" /sandbox/*"] = sandbox
	}
	return r
}

// hostileText are values for query keys and form fields: control characters, invalid
// UTF-8, over-long, SQL and HTML metacharacters, other scripts, numbers and dates out of
// range, JSON where text is expected, and empty.
var hostileText = []string{"", " ", "\x00", "a\x00b", "\xff", "\xc3\x28", "\x1b[31m", strings.Repeat("x", 5000), strings.Repeat("ł", 300),
	"' OR 1=1 --", `"; DROP TABLE users; --`, "%", "_", `\`, "ąęśćżź 😀 \u202e\u200b", "-1", "0", "99999999999999999999", "1e400",
	"2026-02-30", "9999-12-31", "null", "[]", `{"a": 1}`, "00000000-0000-0000-0000-000000000000", "../../etc/passwd",
	"<script>alert(1)</script>", "\r\nX-Injected: 1", "true"}

// hostileJSON are values for the fields of a JSON body: every type where another is
// expected, NUL and lone surrogates in strings, numbers out of range, over-long.
var hostileJSON = []string{`null`, `true`, `0`, `-1`, `1e400`, `99999999999999999999999`, `""`, `"\u0000"`, `"a\u0000b"`, `"\ud800"`,
	`"` + strings.Repeat("x", 5000) + `"`, `"' OR 1=1 --"`, `[]`, `["a", "b"]`, `[null]`, `{}`, `{"$gt": ""}`, `"ąę😀"`, "\"\xff\xfe\"",
	`"2026-02-30"`, `"00000000-0000-0000-0000-000000000000"`}

// hostileBodies are whole bodies: not an object, malformed, nested deep, trailing data.
var hostileBodies = []string{"", "null", "[]", `"x"`, "1", "{", `{} {}`, `{"a": 1}`, strings.Repeat("[", 3000) + strings.Repeat("]", 3000),
	`{"a": ` + strings.Repeat("{\"b\": ", 2000) + "1" + strings.Repeat("}", 2000) + "}", "\xff\xfe", "{\"\x00\": 1}"}

// randomText returns n random strings (bytes of any value, up to 64), from the seed.
func randomText(r *rand.Rand, n int) []string {
	var out []string
	for range n {
		b := make([]byte, r.IntN(65))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		out = append(out, string(b))
	}
	return out
}

// Issue 19: hostile values at every list filter of every list route (pages and API), at
// every form field and at every JSON body of every PUT and POST, as an admin, on SQLite and
// PostgreSQL: never a 5xx, and the server answers afterwards. The routes come from the
// router, so a route missing from routeInputs fails the test. Random values come from a
// seed that is logged (set LIFELINE_FUZZ_SEED to repeat a run).
func TestHostileInputEveryRoute(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LIFELINE_FUZZ_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("LIFELINE_FUZZ_SEED=%d", seed)
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		rnd := rand.New(rand.NewPCG(seed, 19))
		a := newFullApp(t, db)
		tn := a.tenant("Biuro Fuzz")
		browser, csrf := a.browser(tn)
		r := do(t, http.DefaultClient, "POST", a.srv.URL+"/api/v1/connections", fmt.Sprintf(`{"name": "fuzz", "driver": "postgres", "dsn": %q}`, connDSN), bearer(tn.token))
		connID, _ := r.json(t)["id"].(string)
		if connID == "" {
			t.Fatalf("connection: %d %s", r.status, r.body)
		}
		inputs := routeInputs(tn, connDSN)
		routes := routesOf(t, a)
		seen := map[string]bool{}
		for _, rt := range routes {
			seen[rt] = true
			if _, ok := inputs[rt]; !ok {
				t.Errorf("route %s is not in routeInputs: say what it reads (query keys, form fields, a JSON object) or why it is not fuzzed", rt)
			}
		}
		for rt := range inputs {
			if !seen[rt] {
				t.Errorf("routeInputs names %s, which the server no longer has", rt)
			}
		}
		texts := append(append([]string(nil), hostileText...), randomText(rnd, 6)...)
		fill := strings.NewReplacer(":token", tn.webhookToken)
		path := func(p string) string {
			p = fill.Replace(p)
			switch {
			case strings.Contains(p, "connections/:id"):
				return strings.Replace(p, ":id", connID, 1)
			case strings.HasPrefix(p, "/workflows/:id"), strings.HasPrefix(p, "/api/v1/workflows/:id"):
				return strings.Replace(p, ":id", tn.wfID, 1)
			case strings.HasPrefix(p, "/executions/:id"), strings.HasPrefix(p, "/api/v1/executions/:id"):
				return strings.Replace(p, ":id", tn.execID, 1)
			case strings.HasPrefix(p, "/dlq/:id"), strings.HasPrefix(p, "/api/v1/dlq/:id"):
				return strings.Replace(p, ":id", tn.dlqID, 1)
			}
			return strings.Replace(p, ":id", models.NewID(), 1)
		}
		ctx := context.Background()
		n := 0
		fresh := func(kind string) string {
			t.Helper()
			n++
			now := time.Now().UTC()
			if kind == "dlq" { // a pending dead letter of the tenant's workflow
				step := "submit"
				ex := models.Execution{ID: models.NewID(), OrganizationID: tn.org, WorkflowID: tn.wfID, WorkflowVersion: 1, Status: models.ExecDLQPending,
					Input: models.JSON(`{"nip": "1"}`), TriggerType: "api", CorrelationID: models.NewID(), CreatedAt: now, UpdatedAt: now, CurrentStepID: &step}
				e := models.ExecutionError{ID: models.NewID(), OrganizationID: tn.org, ExecutionID: ex.ID, StepID: step, ErrorType: "validation",
					ErrorMessage: "400 Bad Request", Status: models.ErrDeadLetter, CreatedAt: now, UpdatedAt: now}
				dl := models.DeadLetter{ID: models.NewID(), OrganizationID: tn.org, ErrorID: e.ID, WorkflowID: tn.wfID, ExecutionID: ex.ID,
					OriginalInput: models.JSON(`{"nip": "1"}`), StepStates: models.JSON(`[]`), FailedStepID: step, Status: models.DLQPending,
					ErrorType: "validation", Reason: "400 Bad Request", ExpiresAt: now.Add(24 * time.Hour), CreatedAt: now, UpdatedAt: now}
				for _, row := range []any{&ex, &e, &dl} {
					if err := db.Conn(ctx).Create(row).Error; err != nil {
						t.Fatal(err)
					}
				}
				return dl.ID
			}
			host := fmt.Sprintf("fuzz%d.example", n) // a breaker in state kind
			b := models.CircuitBreaker{ID: models.NewID(), OrganizationID: tn.org, ScopeKey: "host:" + host, Host: &host, State: kind,
				FailureThreshold: 5, ResetTimeoutMs: 60_000, HalfOpenRequests: 3, CreatedAt: now, UpdatedAt: now}
			if kind != "closed" {
				b.OpenedAt, b.LastFailureAt = &now, &now
			}
			if err := db.Conn(ctx).Create(&b).Error; err != nil {
				t.Fatal(err)
			}
			return b.ID
		}
		requests := 0
		send := func(method, p, body string, h map[string]string, api bool) {
			t.Helper()
			requests++
			c := browser
			if api {
				c = http.DefaultClient
			}
			if r := do(t, c, method, a.srv.URL+p, body, h); r.status >= 500 {
				t.Errorf("%s %.200s %.200q answered %d: %.300s", method, p, body, r.status, r.body)
			}
		}
		names := make([]string, 0, len(inputs))
		for rt := range inputs {
			names = append(names, rt)
		}
		// Deleting comes last: the connection stays for the routes that use it.
		sort.Slice(names, func(i, j int) bool {
			di, dj := strings.Contains(strings.ToLower(names[i]), "delete"), strings.Contains(strings.ToLower(names[j]), "delete")
			if di != dj {
				return dj
			}
			return names[i] < names[j]
		})
		for _, rt := range names {
			in := inputs[rt]
			if in.skip != "" {
				continue
			}
			method, tmpl, _ := strings.Cut(rt, " ")
			p := path(tmpl)
			at := func() string { // the path of one request: a fresh row's where the route wants one
				if in.fresh == "" {
					return p
				}
				return strings.Replace(fill.Replace(tmpl), ":id", fresh(in.fresh), 1)
			}
			api := strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/hooks/")
			hdr := func() map[string]string {
				switch {
				case strings.HasPrefix(p, "/hooks/"):
					return map[string]string{}
				case api:
					return bearer(tn.token)
				case method == "GET":
					return nil
				}
				return map[string]string{"X-CSRF-Token": csrf, "Content-Type": "application/x-www-form-urlencoded"}
			}
			// The route as it is, and with a hostile id where it takes one.
			send(method, p, "", hdr(), api)
			if strings.Contains(tmpl, ":id") {
				for _, id := range []string{"%00", "%ff", "'%20OR%201=1", strings.Repeat("a", 3000), models.NewID()} {
					send(method, strings.Replace(fill.Replace(tmpl), ":id", id, 1), in.json, hdr(), api)
				}
			}
			// Query keys: each alone with each value, all at once, twice with two values, as an array.
			for _, key := range in.query {
				for _, v := range texts {
					send(method, p+"?"+url.Values{key: {v}}.Encode(), "", hdr(), api)
				}
				send(method, p+"?"+key+"=a&"+key+"=b&"+url.QueryEscape(key+"[]")+"=c", "", hdr(), api)
			}
			for _, v := range texts[:8] {
				all := url.Values{}
				for _, key := range in.query {
					all.Set(key, v)
				}
				if len(all) > 0 {
					send(method, p+"?"+all.Encode(), "", hdr(), api)
				}
			}
			// Form fields: an ordinary form with one field hostile, or sent twice.
			forms := in.forms
			if in.form != nil {
				forms = append([]map[string]string{in.form}, forms...)
			}
			for _, form := range forms {
				for field := range form {
					for _, v := range texts {
						f := url.Values{}
						for k, ok := range form {
							f.Set(k, ok)
						}
						f.Set(field, v)
						send(method, at(), f.Encode(), hdr(), api)
					}
					f := url.Values{}
					for k, ok := range form {
						f.Set(k, ok)
					}
					f.Add(field, "second")
					send(method, at(), f.Encode(), hdr(), api)
				}
			}
			// JSON: hostile bodies, then an ordinary object with one field hostile or left out.
			objects := in.jsons
			if in.json != "" {
				objects = append([]string{in.json}, objects...)
			}
			if len(objects) == 0 {
				continue
			}
			bodies := append([]string(nil), hostileBodies...)
			for _, sample := range objects {
				var obj map[string]json.RawMessage
				if err := json.Unmarshal([]byte(sample), &obj); err != nil {
					t.Fatalf("%s: the ordinary body is not an object: %v", rt, err)
				}
				for field := range obj {
					for _, v := range append(append([]string(nil), hostileJSON...), quoteAll(texts[:10])...) {
						bodies = append(bodies, withField(obj, field, v))
					}
					bodies = append(bodies, withField(obj, field, ""))
				}
				bodies = append(bodies, withField(obj, "unknownField", `1`))
			}
			for _, b := range bodies {
				h := hdr()
				if in.signed {
					for k, v := range signed(t, tn.webhookSecret, fmt.Sprintf("msg_%d", requests), time.Now(), []byte(b)) {
						h[k] = v
					}
				}
				send(method, at(), b, h, api)
			}
		}
		t.Logf("%d requests", requests)
		if r := do(t, http.DefaultClient, "GET", a.srv.URL+"/api/v1/workflows/"+tn.wfID, "", bearer(tn.token)); r.status != http.StatusOK {
			t.Fatalf("after the fuzzing the server answers %d: %s", r.status, r.body)
		}
	})
}

// withField is obj with field set to the JSON value v ("" leaves the field out).
func withField(obj map[string]json.RawMessage, field, v string) string {
	var b strings.Builder
	b.WriteByte('{')
	first := true
	keys := make([]string, 0, len(obj)+1)
	for k := range obj {
		keys = append(keys, k)
	}
	if _, ok := obj[field]; !ok {
		keys = append(keys, field)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := string(obj[k])
		if k == field {
			if v == "" {
				continue
			}
			val = v
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.WriteString(val)
	}
	b.WriteByte('}')
	return b.String()
}

// quoteAll are texts as JSON strings (invalid UTF-8 replaced, as a client would send it).
func quoteAll(texts []string) []string {
	out := make([]string, 0, len(texts))
	for _, s := range texts {
		b, _ := json.Marshal(s)
		out = append(out, string(b))
	}
	return out
}
