package demo_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"

	"lifeline/models"
	"lifeline/services/checkdigit"
	"lifeline/services/deadline"
	"lifeline/services/definition"
	"lifeline/services/demo"
	stepreg "lifeline/services/steps"
)

const base = "http://127.0.0.1:8080/sandbox"

func decode(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	if !json.Valid(raw) {
		t.Fatalf("invalid JSON: %s", raw)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not a JSON object: %v", err)
	}
	return m
}

func definitions(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, raw := range demo.Definitions(base) {
		out = append(out, decode(t, raw))
	}
	return out
}

func steps(def map[string]any) []map[string]any {
	var out []map[string]any
	for _, s := range def["steps"].([]any) {
		out = append(out, s.(map[string]any))
	}
	return out
}

func onlyKeys(t *testing.T, where string, m map[string]any, allowed ...string) {
	t.Helper()
	for k := range m {
		if !slices.Contains(allowed, k) {
			t.Errorf("%s: key %q not allowed (allowed: %v)", where, k, allowed)
		}
	}
}

func inRange(t *testing.T, where string, v any, lo, hi float64) {
	t.Helper()
	f, ok := v.(float64)
	if !ok || f < lo || f > hi {
		t.Errorf("%s = %v, want a number in [%v, %v]", where, v, lo, hi)
	}
}

func errorTypes(t *testing.T, where string, v any) {
	t.Helper()
	known := []string{"transient", "permanent", "timeout", "validation", "authorization", "rate_limit", "external_service", "internal", "unknown"}
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		t.Errorf("%s = %v, want a non-empty list", where, v)
		return
	}
	for _, e := range list {
		if s, _ := e.(string); !slices.Contains(known, s) {
			t.Errorf("%s: unknown error type %v", where, e)
		}
	}
}

func checkPolicy(t *testing.T, where string, p map[string]any) {
	t.Helper()
	onlyKeys(t, where, p, "maxRetries", "initialDelayMs", "maxDelayMs", "backoffMultiplier", "jitterRatio",
		"backoffType", "customScheduleMs", "retryOnErrors", "noRetryOnErrors")
	ranges := map[string][2]float64{
		"maxRetries":        {0, 10},
		"initialDelayMs":    {1000, 300000},
		"maxDelayMs":        {5000, 3600000},
		"backoffMultiplier": {1, 5},
		"jitterRatio":       {0, 0.5},
	}
	for k, r := range ranges {
		if v, ok := p[k]; ok {
			inRange(t, where+"."+k, v, r[0], r[1])
		}
	}
	if lo, ok := p["initialDelayMs"].(float64); ok {
		if hi, ok := p["maxDelayMs"].(float64); ok && hi < lo {
			t.Errorf("%s: maxDelayMs %v below initialDelayMs %v", where, hi, lo)
		}
	}
	if sched, ok := p["customScheduleMs"].([]any); ok && len(sched) > 10 {
		t.Errorf("%s: customScheduleMs has %d entries, at most 10", where, len(sched))
	}
	if v, ok := p["maxRetries"].(float64); ok && v != float64(int(v)) {
		t.Errorf("%s.maxRetries = %v, want an integer", where, v)
	}
	if bt, ok := p["backoffType"]; ok {
		if !slices.Contains([]any{"exponential", "fixed", "linear", "fibonacci", "custom"}, bt) {
			t.Errorf("%s.backoffType = %v", where, bt)
		}
		if bt == "custom" {
			sched, _ := p["customScheduleMs"].([]any)
			if len(sched) == 0 {
				t.Errorf("%s: custom backoff without customScheduleMs", where)
			}
			for i, d := range sched {
				inRange(t, fmt.Sprintf("%s.customScheduleMs[%d]", where, i), d, 1000, 3600000)
			}
		}
	}
	if _, ok := p["customScheduleMs"]; ok && p["backoffType"] != "custom" {
		t.Errorf("%s: customScheduleMs without backoffType custom", where)
	}
	for _, k := range []string{"retryOnErrors", "noRetryOnErrors"} {
		if v, ok := p[k]; ok {
			errorTypes(t, where+"."+k, v)
		}
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	names := demo.Names()
	want := []string{"Import wyciągu bankowego i księgowanie", "Miesięczna deklaracja VAT (JPK_V7)", "Eksport listy płac", "Pobranie faktur zakupowych z KSeF"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("Names() = %q, want %q", names, want)
	}
	defs := definitions(t)
	if len(defs) != len(names) {
		t.Fatalf("%d definitions for %d names", len(defs), len(names))
	}
	for i, d := range defs {
		if d["name"] != names[i] {
			t.Errorf("definition %d is %q, want %q", i, d["name"], names[i])
		}
	}
	names[0] = "changed"
	if demo.Names()[0] == "changed" {
		t.Error("Names shares its slice")
	}
}

func TestDefinitionsFormat(t *testing.T) {
	t.Parallel()
	for _, def := range definitions(t) {
		name, _ := def["name"].(string)
		t.Run(name, func(t *testing.T) {
			onlyKeys(t, "workflow", def, "name", "description", "settings", "steps")
			if name == "" || def["description"] == "" {
				t.Error("missing name or description")
			}
			if s, ok := def["settings"]; ok {
				settings := s.(map[string]any)
				onlyKeys(t, "settings", settings, "retryPolicy", "unknownErrors", "subject", "circuitBreaker", "rollbackOnFailure", "onFailure", "movesMoney",
					"client", "period", "amount", "obligation")
				if u, ok := settings["unknownErrors"]; ok && u != "retry" {
					t.Errorf("settings.unknownErrors = %v", u)
				}
				if p, ok := settings["retryPolicy"]; ok {
					checkPolicy(t, "settings.retryPolicy", p.(map[string]any))
				}
			}
			list := steps(def)
			if len(list) == 0 {
				t.Fatal("no steps")
			}
			seen := map[string]bool{}
			for i, s := range list {
				id, _ := s["id"].(string)
				where := fmt.Sprintf("step %d (%s)", i, id)
				onlyKeys(t, where, s, "id", "name", "type", "config", "retryPolicy", "timeoutMs", "circuitBreaker", "compensation", "handler", "fallbackStepId", "postsToPeriod")
				if !regexp.MustCompile(`^[a-z][a-z0-9_]*$`).MatchString(id) {
					t.Errorf("%s: id %q is not a plain identifier", where, id)
				}
				if seen[id] {
					t.Errorf("%s: duplicate id", where)
				}
				seen[id] = true
				if s["name"] == "" || s["name"] == nil {
					t.Errorf("%s: no name", where)
				}
				if p, ok := s["retryPolicy"]; ok {
					checkPolicy(t, where+".retryPolicy", p.(map[string]any))
				}
				if v, ok := s["timeoutMs"]; ok {
					inRange(t, where+".timeoutMs", v, 100, 600000)
				}
				cfg, ok := s["config"].(map[string]any)
				if !ok {
					t.Fatalf("%s: no config object", where)
				}
				switch s["type"] {
				case "http":
					onlyKeys(t, where+".config", cfg, "method", "url", "headers", "body", "timeoutMs")
					if cfg["method"] != "POST" {
						t.Errorf("%s: method %v", where, cfg["method"])
					}
					if u, _ := cfg["url"].(string); !strings.HasPrefix(u, base+"/") {
						t.Errorf("%s: url %q is not under %s", where, u, base)
					}
					if v, ok := cfg["timeoutMs"]; ok {
						inRange(t, where+".config.timeoutMs", v, 100, 600000)
						if st, ok := s["timeoutMs"].(float64); ok && v.(float64) > st {
							t.Errorf("%s: request timeout %v over step timeout %v", where, v, st)
						}
					}
				case "transform":
					onlyKeys(t, where+".config", cfg, "output")
					if cfg["output"] == nil {
						t.Errorf("%s: no output", where)
					}
				case "delay":
					onlyKeys(t, where+".config", cfg, "ms")
					inRange(t, where+".config.ms", cfg["ms"], 1, 60000)
				case "ask":
					onlyKeys(t, where+".config", cfg, "kind", "title", "message", "assignees", "timeoutMs", "timeoutBeforeDue", "fourEyes", "onlyAbove")
					if cfg["title"] == "" || (cfg["timeoutMs"] == nil && cfg["timeoutBeforeDue"] == nil) {
						t.Errorf("%s: an ask needs a title and a timeout", where)
					}
				default:
					t.Errorf("%s: unknown type %v", where, s["type"])
				}
			}
		})
	}
}

// The three workflows show the three ways of configuring retries.
func TestDefinitionsShowRetryConfiguration(t *testing.T) {
	t.Parallel()
	defs := definitions(t)
	if p := defs[1]["settings"].(map[string]any)["retryPolicy"]; p == nil {
		t.Error("VAT workflow has no workflow-level retry policy")
	}
	var fixed, delay bool
	for _, s := range steps(defs[2]) {
		if p, ok := s["retryPolicy"].(map[string]any); ok && p["backoffType"] == "fixed" {
			fixed = true
		}
		delay = delay || s["type"] == "delay"
	}
	if !fixed || !delay {
		t.Errorf("payroll workflow: fixed step policy %v, delay step %v", fixed, delay)
	}
	var kinds []string
	var fallback map[string]any
	for _, s := range steps(defs[0]) {
		if s["handler"] == true {
			if s["id"] == steps(defs[0])[0]["fallbackStepId"] {
				fallback = s
			}
			continue
		}
		kinds = append(kinds, s["type"].(string))
	}
	if !reflect.DeepEqual(kinds, []string{"http", "http", "http", "http", "transform"}) {
		t.Errorf("bank import step types %v", kinds)
	}
	// While the bank's API is down (its breaker open) the statement comes from the e-mailed file.
	if fallback == nil || !strings.HasSuffix(fallback["config"].(map[string]any)["url"].(string), "/bank/statements/from-file") {
		t.Errorf("the bank import has no fallback importing the e-mailed file: %v", fallback)
	}
	// The bank import rolls back: its first three steps undo themselves (the fourth, a
	// report mail, fails at times and so shows 3, 2, 1 being compensated).
	if defs[0]["settings"].(map[string]any)["rollbackOnFailure"] != true {
		t.Error("the bank import does not roll back on failure")
	}
	for _, s := range steps(defs[0])[:3] {
		if c, ok := s["compensation"].(map[string]any); !ok || c["compensationType"] != "api_call" {
			t.Errorf("bank import step %v has no api_call compensation", s["id"])
		}
	}
}

var placeholder = regexp.MustCompile(`\{\{(.*?)\}\}`)

// collectStrings collects every string inside v.
func collectStrings(v any, out *[]string) {
	switch v := v.(type) {
	case string:
		*out = append(*out, v)
	case map[string]any:
		for _, x := range v {
			collectStrings(x, out)
		}
	case []any:
		for _, x := range v {
			collectStrings(x, out)
		}
	}
}

type refs struct {
	roots []string // identifiers at the root of member chains, or bare
	steps []string // ids in steps.<id>
}

func (r *refs) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.MemberNode:
		if id, ok := n.Node.(*ast.IdentifierNode); ok && id.Value == "steps" {
			if s, ok := n.Property.(*ast.StringNode); ok {
				r.steps = append(r.steps, s.Value)
			} else {
				r.steps = append(r.steps, "<dynamic>")
			}
		}
	case *ast.IdentifierNode:
		r.roots = append(r.roots, n.Value)
	}
}

func TestTemplatesReferenceOnlyEarlierSteps(t *testing.T) {
	t.Parallel()
	builtins := []string{"round"}
	for _, def := range definitions(t) {
		earlier := map[string]bool{}
		for _, s := range steps(def) {
			id := s["id"].(string)
			var strs []string
			collectStrings(s["config"], &strs)
			for _, str := range strs {
				if strings.Count(str, "{{") != len(placeholder.FindAllString(str, -1)) {
					t.Errorf("%s/%s: unbalanced placeholder in %q", def["name"], id, str)
				}
				for _, m := range placeholder.FindAllStringSubmatch(str, -1) {
					tree, err := parser.Parse(strings.TrimSpace(m[1]))
					if err != nil {
						t.Errorf("%s/%s: %q: %v", def["name"], id, m[1], err)
						continue
					}
					var r refs
					ast.Walk(&tree.Node, &r)
					roots := []string{"input", "steps", "execution", "credentials"}
					if s["handler"] == true { // a handler also reads the failure it was handed
						roots = append(roots, "error", "failedStep", "mapped")
					}
					for _, root := range r.roots {
						if !slices.Contains(roots, root) && !slices.Contains(builtins, root) {
							t.Errorf("%s/%s: %q uses %q", def["name"], id, m[1], root)
						}
					}
					for _, ref := range r.steps {
						if !earlier[ref] {
							t.Errorf("%s/%s: %q references step %q, which is not an earlier step", def["name"], id, m[1], ref)
						}
					}
				}
			}
			earlier[id] = true
		}
	}
}

// fakeOutputs are shaped like the sandbox answers, keyed by URL path.
func fakeOutput(path string) map[string]any {
	switch path {
	case "/bank/statements/import":
		return map[string]any{"statementId": "WB-202610-3F9A21", "transactions": 124.0, "totalCredits": 151234.56, "totalDebits": 98123.4, "currency": "PLN"}
	case "/invoices/match":
		return map[string]any{"matched": 111.0, "unmatched": 13.0, "matchRate": 0.8952}
	case "/ledger/postings":
		return map[string]any{"postingId": "PK-1A2B3C4D", "entries": 222.0}
	case "/vat/jpk-v7/validate":
		return map[string]any{"valid": true, "vatDue": 18234.12}
	case "/vat/jpk-v7/submit":
		return map[string]any{"referenceNumber": "a1b2c3d4e5f60718293a4b5c6d7e8f90", "status": "accepted", "upo": "UPO-202610-ABCDE12345"}
	case "/payroll/export":
		return map[string]any{"fileId": "LP-202610-0A1B2C", "rows": 7.0}
	case "/mail/send":
		return map[string]any{"messageId": "<abc@sandbox.biuro-demo.pl>"}
	}
	return nil
}

func eval(t *testing.T, src string, env map[string]any) any {
	t.Helper()
	prog, err := expr.Compile(src, expr.Env(env))
	if err != nil {
		t.Fatalf("compile %q: %v", src, err)
	}
	out, err := expr.Run(prog, env)
	if err != nil {
		t.Fatalf("run %q: %v", src, err)
	}
	return out
}

// render applies the engine's template rules: a string that is exactly one
// placeholder keeps the JSON type of its value; other strings interpolate.
func render(t *testing.T, v any, env map[string]any) any {
	t.Helper()
	switch v := v.(type) {
	case string:
		loc := placeholder.FindAllStringSubmatchIndex(v, -1)
		if len(loc) == 1 && loc[0][0] == 0 && loc[0][1] == len(v) {
			return eval(t, v[loc[0][2]:loc[0][3]], env)
		}
		return placeholder.ReplaceAllStringFunc(v, func(s string) string {
			return fmt.Sprint(eval(t, placeholder.FindStringSubmatch(s)[1], env))
		})
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			out[k] = render(t, x, env)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = render(t, x, env)
		}
		return out
	}
	return v
}

// run renders every step in order against input, with fake outputs, and
// returns the rendered configs by step id.
func run(t *testing.T, def map[string]any, input map[string]any) map[string]map[string]any {
	t.Helper()
	done := map[string]any{}
	env := map[string]any{"input": input, "steps": done, "execution": map[string]any{"id": "exec-1"},
		"credentials": map[string]any{demo.CredentialKSeF: "a-token-of-the-office"}}
	rendered := map[string]map[string]any{}
	for _, s := range steps(def) {
		if s["handler"] == true {
			continue // runs only when a failure is handed to it
		}
		id := s["id"].(string)
		cfg := render(t, s["config"], env).(map[string]any)
		rendered[id] = cfg
		var out any = map[string]any{}
		switch s["type"] {
		case "http":
			u, err := url.Parse(cfg["url"].(string))
			if err != nil {
				t.Fatalf("%s: url: %v", id, err)
			}
			out = fakeOutput(strings.TrimPrefix(u.Path, "/sandbox"))
		case "transform":
			out = cfg["output"]
		}
		done[id] = map[string]any{"output": out}
	}
	return rendered
}

func TestTemplatesRender(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(7, 7))
	for _, def := range definitions(t) {
		name := def["name"].(string)
		t.Run(name, func(t *testing.T) {
			input := demo.Input(name, rnd)
			rendered := run(t, def, input)
			for _, s := range steps(def) {
				if s["type"] != "http" || s["handler"] == true {
					continue
				}
				id := s["id"].(string)
				// Nothing but the step's data tells the sandbox what to do.
				if u, _ := url.Parse(rendered[id]["url"].(string)); u.RawQuery != "" {
					t.Errorf("%s: url %q has a query", id, u)
				}
				if body, ok := rendered[id]["body"].(map[string]any); ok {
					if nip, ok := body["clientNip"]; ok && nip != input["clientNip"] {
						t.Errorf("%s: clientNip %v", id, nip)
					}
				}
			}
		})
	}

	// Single placeholders keep their type; mixed strings interpolate.
	defs := definitions(t)
	r := run(t, defs[0], demo.Input(demo.BankImport, rand.New(rand.NewPCG(1, 1))))
	if got := r["match_invoices"]["body"].(map[string]any)["transactions"]; got != 124.0 {
		t.Errorf("transactions rendered as %#v, want 124.0", got)
	}
	sum := r["summary"]["output"].(map[string]any)
	if sum["matchPercent"] != 89.5 || sum["balance"] != 53111.16 || sum["postingId"] != "PK-1A2B3C4D" {
		t.Errorf("summary = %v", sum)
	}
	p := run(t, defs[2], demo.Input(demo.Payroll, rand.New(rand.NewPCG(1, 1))))
	if _, ok := p["export_payroll"]["body"].(map[string]any)["employees"].([]any); !ok {
		t.Errorf("employees rendered as %T", p["export_payroll"]["body"].(map[string]any)["employees"])
	}
	if subj := p["notify_accountant"]["body"].(map[string]any)["subject"].(string); !strings.Contains(subj, "LP-202610-0A1B2C") {
		t.Errorf("subject %q", subj)
	}
}

func TestDefinitionsBase(t *testing.T) {
	t.Parallel()
	a := demo.Definitions("http://localhost:9999/sandbox/")
	b := demo.Definitions("http://localhost:9999/sandbox")
	for i := range a {
		if string(a[i]) != string(b[i]) {
			t.Error("trailing slash changes the definitions")
		}
		if !strings.Contains(string(a[i]), `"http://localhost:9999/sandbox/`) {
			t.Errorf("base not used: %s", a[i])
		}
		if strings.Contains(string(a[i]), `\u0026`) || strings.Contains(string(a[i]), `\u003c`) {
			t.Errorf("HTML escaping in %s", a[i])
		}
	}
}

func TestInputDeterministic(t *testing.T) {
	t.Parallel()
	for _, name := range demo.Names() {
		a := demo.Input(name, rand.New(rand.NewPCG(42, 1)))
		b := demo.Input(name, rand.New(rand.NewPCG(42, 1)))
		c := demo.Input(name, rand.New(rand.NewPCG(43, 1)))
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: same seed, different input:\n%v\n%v", name, a, b)
		}
		if reflect.DeepEqual(a, c) {
			t.Errorf("%s: different seeds, same input", name)
		}
	}
	if in := demo.Input("Nieznany workflow", rand.New(rand.NewPCG(1, 1))); in != nil {
		t.Errorf("unknown workflow: %v, want nil", in)
	}
}

func validIBAN(s string) bool {
	if len(s) != 28 || !strings.HasPrefix(s, "PL") || strings.Trim(s[2:], "0123456789") != "" {
		return false
	}
	mod := 0
	for _, c := range s[4:] + "2521" + s[2:4] {
		mod = (mod*10 + int(c-'0')) % 97
	}
	return mod == 1
}

func TestInputRealistic(t *testing.T) {
	t.Parallel()
	period := regexp.MustCompile(`^2026-(0[1-9]|1[0-2])$`)
	email := regexp.MustCompile(`^[a-z.]+@[a-z0-9.-]+\.pl$`)
	rnd := rand.New(rand.NewPCG(5, 5))
	for _, name := range demo.Names() {
		for range 200 {
			in := demo.Input(name, rnd)
			if nip, _ := in["clientNip"].(string); len(nip) < 9 || len(nip) > 10 || strings.Trim(nip, "0123456789") != "" {
				t.Fatalf("%s: bad NIP %v (valid or a typo: TestInputTypos)", name, in["clientNip"])
			}
			if p, _ := in["period"].(string); !period.MatchString(p) {
				t.Fatalf("%s: bad period %v", name, in["period"])
			}
			if n, _ := in["clientName"].(string); n == "" {
				t.Fatalf("%s: no client name", name)
			}
			switch name {
			case demo.BankImport:
				if acc, _ := in["account"].(string); !validIBAN(acc) {
					t.Fatalf("bad IBAN %v", in["account"])
				}
			case demo.VAT:
				s, p := in["salesTotal"].(float64), in["purchaseTotal"].(float64)
				if s <= 0 || p <= 0 || p >= s || math.Round(s*100)/100 != s || math.Round(p*100)/100 != p {
					t.Fatalf("totals %v / %v", s, p)
				}
				if e, _ := in["clientEmail"].(string); !email.MatchString(e) {
					t.Fatalf("bad email %q", e)
				}
			case demo.Payroll:
				emps, _ := in["employees"].([]any)
				if len(emps) < 1 {
					t.Fatalf("no employees")
				}
				for _, e := range emps {
					e := e.(map[string]any)
					if g, _ := e["grossSalary"].(float64); g < 4806 || e["name"] == "" {
						t.Fatalf("employee %v", e)
					}
				}
				if e, _ := in["accountantEmail"].(string); !email.MatchString(e) {
					t.Fatalf("bad email %q", e)
				}
			}
			// The input survives a JSON round trip (it is stored as JSON).
			if _, err := json.Marshal(in); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestInputTypos: an input carries no script of its failures; one client always has one NIP
// and one account; about ShareTypo of the inputs have the NIP typed wrong (a digit left out,
// or two swapped), which the check digit catches, and the rest a valid one.
func TestInputTypos(t *testing.T) {
	t.Parallel()
	for _, name := range demo.Names() {
		rnd := rand.New(rand.NewPCG(2026, 10))
		nips := map[string]string{}
		typos := 0
		const draws = 2000
		for range draws {
			in := demo.Input(name, rnd)
			if _, ok := in["scenario"]; ok {
				t.Fatalf("%s: the input scripts its failures: %v", name, in["scenario"])
			}
			client, nip := in["clientName"].(string), in["clientNip"].(string)
			if !checkdigit.NIP(nip) {
				typos++
				continue
			}
			if was, ok := nips[client]; ok && was != nip {
				t.Fatalf("%s: %s has two NIPs, %s and %s", name, client, was, nip)
			}
			nips[client] = nip
		}
		if got := float64(typos) / draws; got < demo.ShareTypo-0.03 || got > demo.ShareTypo+0.03 {
			t.Errorf("%s: typo share %.3f, want about %.2f", name, got, demo.ShareTypo)
		}
		// A typo is near the right NIP: the accountant can see which it was meant to be.
		rnd = rand.New(rand.NewPCG(1, 2))
		for range 500 {
			in := demo.Input(name, rnd)
			client, nip := in["clientName"].(string), in["clientNip"].(string)
			if right := nips[client]; !checkdigit.NIP(nip) && !nearTypo(nip, right) {
				t.Fatalf("%s: %q is not a typo of %s's NIP %q", name, nip, client, right)
			}
		}
	}
}

// nearTypo reports whether got is want with one digit left out or two neighbours swapped.
func nearTypo(got, want string) bool {
	if len(got) == len(want)-1 {
		for i := range want {
			if want[:i]+want[i+1:] == got {
				return true
			}
		}
		return false
	}
	for i := 0; i+1 < len(want); i++ {
		b := []byte(want)
		b[i], b[i+1] = b[i+1], b[i]
		if string(b) == got {
			return true
		}
	}
	return false
}

func TestDefinitionsSnapshotIsStable(t *testing.T) {
	t.Parallel()
	a, b := demo.Definitions(base), demo.Definitions(base)
	for i := range a {
		if string(a[i]) != string(b[i]) {
			t.Errorf("definition %d differs between calls", i)
		}
	}
	if !strings.Contains(string(a[0]), `"url":"`+base+`/bank/statements/import"`) {
		t.Errorf("import URL: %s", a[0])
	}
}

func TestEmployeeNamesAgree(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(8, 8))
	for range 100 {
		for _, e := range demo.Input(demo.Payroll, rnd)["employees"].([]any) {
			name := e.(map[string]any)["name"].(string)
			first, last, _ := strings.Cut(name, " ")
			if strings.HasSuffix(first, "a") && strings.HasSuffix(last, "ki") {
				t.Fatalf("%q: feminine first name with masculine surname", name)
			}
		}
	}
}

// TestDemoSaysWhatWorkIsAbout: every demo workflow names its client and period; the VAT
// return is the JPK_V7M with the VAT to pay, payroll the salaries it pays; their amounts
// render to exact decimals for every input drawn, so no demo start is refused.
func TestDemoSaysWhatWorkIsAbout(t *testing.T) {
	t.Parallel()
	reg := stepreg.Builtins(nil)
	rnd := rand.New(rand.NewPCG(5, 5))
	for i, raw := range demo.Definitions(base) {
		def, err := definition.Parse(raw, reg)
		if err != nil {
			t.Fatal(err)
		}
		a := def.Settings.About
		if a.Client == "" || a.Period == "" {
			t.Errorf("%s: no client or period", def.Name)
		}
		switch def.Name {
		case demo.VAT:
			if a.Obligation != "JPK_V7M" || a.Amount == "" {
				t.Errorf("VAT: %+v", a)
			}
		case demo.Payroll:
			if a.Amount == "" {
				t.Errorf("payroll: no amount")
			}
		}
		for range 200 {
			in := demo.Input(def.Name, rnd)
			var v any
			if err := json.Unmarshal(models.MustJSON(in), &v); err != nil {
				t.Fatal(err)
			}
			f, errs := a.Render(v, deadline.Settings{})
			if errs != nil {
				t.Fatalf("definition %d, input %v: %v", i, in, errs)
			}
			if a.Amount != "" && (f.AmountMinor == nil || *f.AmountMinor <= 0) {
				t.Fatalf("%s: amount %v from %v", def.Name, f.AmountMinor, in)
			}
		}
	}
	for _, s := range demo.Morning() {
		if s.Workflow == demo.VAT && s.Input["vatDue"] != 6516.68 {
			t.Errorf("the morning's VAT due: %v", s.Input["vatDue"])
		}
	}
}
