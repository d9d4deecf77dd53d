package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/audit"
	"lifeline/services/engine"
	"lifeline/services/jobs"
	"lifeline/services/outbound"
	"lifeline/services/steps"
	"lifeline/services/telemetry"
	"lifeline/services/workflows"
)

// receiver is an OTLP/HTTP collector on loopback: it keeps every request's bytes and the
// spans decoded from them.
type receiver struct {
	mu    sync.Mutex
	raw   [][]byte
	spans []*tracepb.Span
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a protobuf POST to /v1/traces", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.raw = append(rc.raw, body)
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			rc.spans = append(rc.spans, ss.GetSpans()...)
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (rc *receiver) exported() ([]*tracepb.Span, string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var all strings.Builder
	for _, b := range rc.raw {
		all.Write(b)
	}
	return append([]*tracepb.Span(nil), rc.spans...), all.String()
}

func attrs(s *tracepb.Span) map[string]string {
	out := map[string]string{}
	for _, kv := range s.GetAttributes() {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			out[kv.GetKey()] = v.GetStringValue()
		default:
			out[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		}
	}
	return out
}

const (
	inputMarker  = "INPUT-MARKER-4f1c9e"
	outputMarker = "OUTPUT-MARKER-b27d05"
)

// TestTracesCarryStepsNotValues: with an OTLP endpoint, step attempts are exported as spans
// with the workflow, step, attempt, error type and correlation id, inside River's job span,
// and requests as spans named by route template; no input or output value is in the bytes
// exported.
func TestTracesCarryStepsNotValues(t *testing.T) {
	t.Parallel()
	modeltest.Each(t, func(t *testing.T, db *models.DB) {
		rc := &receiver{}
		collector := httptest.NewServer(rc)
		defer collector.Close()
		ctx := context.Background()
		tr, err := telemetry.Start(ctx, telemetry.Config{Endpoint: collector.URL})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Shutdown(ctx)

		// The step's service echoes what it got (the input's marker) and adds its own output.
		svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			if strings.HasSuffix(r.URL.Path, "/fail") {
				w.WriteHeader(http.StatusUnprocessableEntity)
			}
			fmt.Fprintf(w, `{"echo": %q, "note": %q}`, body, outputMarker)
		}))
		defer svc.Close()

		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		reg := steps.Builtins(outbound.NewClient(outbound.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
		jcfg := jobs.Config{FetchPollInterval: 50 * time.Millisecond, TestOnly: true, Middleware: tr.River()}
		queue, err := jobs.NewQueue(db, jcfg, log)
		if err != nil {
			t.Fatal(err)
		}
		eng := engine.New(db, reg, log, engine.Config{Queue: queue, Observer: tr})
		runner, err := jobs.New(db, eng, queue, jcfg, log)
		if err != nil {
			t.Fatal(err)
		}
		if err := runner.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_ = runner.Stop(sctx)
		}()
		org := models.Organization{ID: models.NewID(), Name: "Biuro"}
		if err := db.Conn(ctx).Create(&org).Error; err != nil {
			t.Fatal(err)
		}
		wf, err := (&workflows.Service{DB: db, Steps: reg}).Create(ctx, org.ID, audit.System, []byte(fmt.Sprintf(`{"name": "VAT",
		  "settings": {"retryPolicy": {"maxRetries": 0}},
		  "steps": [{"id": "fetch", "type": "http", "config": {"method": "POST", "url": %q, "body": {"nip": "{{ input.nip }}"}}},
		            {"id": "submit", "type": "http", "config": {"method": "POST", "url": %q, "body": {"got": "{{ steps.fetch.output.note }}"}}}]}`,
			svc.URL+"/ok", svc.URL+"/fail")))
		if err != nil {
			t.Fatal(err)
		}
		ex, _, err := eng.Start(ctx, engine.StartRequest{OrganizationID: org.ID, WorkflowID: wf.ID, Trigger: engine.TriggerAPI,
			Input: []byte(`{"nip": "` + inputMarker + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			var got models.Execution
			if err := db.Conn(ctx).First(&got, "id = ?", ex.ID).Error; err != nil {
				t.Fatal(err)
			}
			if got.Status == models.ExecDLQPending {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("execution is %s, want DLQ_PENDING", got.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var errType string
		if err := db.Conn(ctx).Model(&models.StepAttempt{}).Where("execution_id = ? AND step_id = 'submit'", ex.ID).
			Pluck("error_type", &errType).Error; err != nil || errType == "" {
			t.Fatalf("submit's error type %q: %v", errType, err)
		}

		// A request through Echo wrapped as the app is: its span is named by its route.
		e := echo.New()
		e.Use(tr.Route()...)
		e.GET("/dlq/:id", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
		app := httptest.NewServer(tr.Handler(e))
		defer app.Close()
		if res, err := http.Get(app.URL + "/dlq/" + ex.ID); err != nil {
			t.Fatal(err)
		} else {
			res.Body.Close()
		}

		// The execution's state commits before its attempt's span and River's job span end:
		// flush until both steps' spans and their job's are out (or 10 s, then check anyway).
		var spans []*tracepb.Span
		var raw string
		for until := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if err := tr.ForceFlush(ctx); err != nil {
				t.Fatal(err)
			}
			spans, raw = rc.exported()
			ended := map[string]bool{}
			for _, s := range spans {
				ended[s.GetName()+"/"+attrs(s)[telemetry.AttrStep]] = true
			}
			jobs := 0
			for _, s := range spans {
				if strings.HasPrefix(s.GetName(), "river.work") {
					jobs++
				}
			}
			if (ended["step.attempt/fetch"] && ended["step.attempt/submit"] && jobs > 0 && ended["GET /dlq/:id/"]) || time.Now().After(until) {
				break
			}
		}
		byID := map[string]*tracepb.Span{}
		for _, s := range spans {
			byID[string(s.GetSpanId())] = s
		}
		steps := map[string]map[string]string{}
		for _, s := range spans {
			if s.GetName() != "step.attempt" {
				continue
			}
			a := attrs(s)
			steps[a[telemetry.AttrStep]] = a
			parent := byID[string(s.GetParentSpanId())]
			if parent == nil || !strings.HasPrefix(parent.GetName(), "river.work") {
				t.Errorf("step %s's span is not inside River's job span (parent %v)", a[telemetry.AttrStep], parent.GetName())
			}
		}
		for _, step := range []string{"fetch", "submit"} {
			a := steps[step]
			if a == nil {
				t.Fatalf("no span of step %s among %d spans", step, len(spans))
			}
			if a[telemetry.AttrWorkflow] != wf.ID || a[telemetry.AttrAttempt] != "1" || a[telemetry.AttrCorrelation] != ex.CorrelationID ||
				a[telemetry.AttrStepType] != "http" {
				t.Errorf("step %s's span: %v", step, a)
			}
		}
		if steps["submit"][telemetry.AttrErrorType] != errType || steps["submit"][telemetry.AttrOutcome] != string(engine.OutcomeDLQ) {
			t.Errorf("the failed step's span: %v, want error type %s and outcome dlq", steps["submit"], errType)
		}
		if _, ok := steps["fetch"][telemetry.AttrErrorType]; ok {
			t.Errorf("the step that succeeded has an error type: %v", steps["fetch"])
		}
		var routed bool
		for _, s := range spans {
			if s.GetName() == "GET /dlq/:id" && attrs(s)["http.route"] == "/dlq/:id" {
				routed = true
			}
		}
		if !routed {
			t.Error("no request span named by its route template")
		}
		for _, marker := range []string{inputMarker, outputMarker} {
			if strings.Contains(raw, marker) {
				t.Errorf("the exported traces carry a step's value (%s)", marker)
			}
		}
		if !strings.Contains(raw, ex.CorrelationID) {
			t.Error("the check for values is blind: the exported bytes lack even the correlation id")
		}
	})
}

// TestTracingOff: without an endpoint there is no tracing, and what it would wrap is left
// as it is.
func TestTracingOff(t *testing.T) {
	tr, err := telemetry.Start(context.Background(), telemetry.Config{})
	if err != nil || tr != nil {
		t.Fatalf("Start without an endpoint: %v, %v", tr, err)
	}
	h := http.NotFoundHandler()
	if got := tr.Handler(h); fmt.Sprintf("%p", got) != fmt.Sprintf("%p", h) {
		t.Error("the handler is wrapped without tracing")
	}
	if tr.River() != nil || tr.Route() != nil {
		t.Error("middlewares without tracing")
	}
}
