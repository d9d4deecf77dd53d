// Package telemetry is Lifeline's OpenTelemetry tracing, off unless an OTLP endpoint is
// configured (OTEL_EXPORTER_OTLP_ENDPOINT): spans for HTTP requests (otelhttp around the
// Echo handler, named by route template), for each step attempt (the engine's Observer) and
// for River's jobs (otelriver), exported over OTLP/HTTP in batches.
//
// A step attempt's span says which workflow, step and attempt it is, the step's type, the
// execution's correlation id, the outcome and the error type: never the step's input or
// output, nor the error's message (which may quote them).
package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"lifeline/services/engine"
)

// Config says where spans go.
type Config struct {
	// Endpoint is OTEL_EXPORTER_OTLP_ENDPOINT, the collector's OTLP/HTTP base URL
	// ("http://collector:4318"); spans are posted to its /v1/traces. Empty: no tracing.
	Endpoint string
	// ServiceName names this service in the traces (OTEL_SERVICE_NAME; default "lifeline").
	ServiceName string
	// Sampler decides which traces are kept (default: all, or the parent's decision).
	Sampler sdktrace.Sampler
}

// Tracing makes and exports spans. A nil *Tracing traces nothing: each method returns what
// it was given, at no cost.
type Tracing struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	props  propagation.TextMapPropagator
}

var _ engine.Observer = (*Tracing)(nil)

// Start returns the tracing cfg asks for: nil when cfg.Endpoint is empty. Call Shutdown to
// export what is left.
func Start(ctx context.Context, cfg Config) (*Tracing, error) {
	if strings.TrimSpace(cfg.Endpoint) == "" {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(strings.TrimRight(cfg.Endpoint, "/")+"/v1/traces"))
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = "lifeline"
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name)))}
	if cfg.Sampler != nil {
		opts = append(opts, sdktrace.WithSampler(cfg.Sampler))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return &Tracing{tp: tp, tracer: tp.Tracer("lifeline"),
		props: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}, nil
}

// Shutdown exports the spans still buffered and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// ForceFlush exports the spans buffered so far.
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// Handler wraps the app's handler in a span per request (nil Tracing: h itself). Route
// names it by route template.
func (t *Tracing) Handler(h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	return otelhttp.NewHandler(h, "http", otelhttp.WithTracerProvider(t.tp), otelhttp.WithPropagators(t.props),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
}

// Route is the Echo middleware that names a request's span by its route template
// ("GET /dlq/:id") once Echo has routed it, never by the raw path (nil Tracing: none).
func (t *Tracing) Route() []echo.MiddlewareFunc {
	if t == nil {
		return nil
	}
	return []echo.MiddlewareFunc{func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if route := c.Path(); route != "" {
				span := trace.SpanFromContext(c.Request().Context())
				span.SetName(c.Request().Method + " " + route)
				span.SetAttributes(semconv.HTTPRouteKey.String(route))
			}
			return next(c)
		}
	}}
}

// River returns the River middleware that makes a span of each job worked and inserted
// (nil Tracing: none). Its spans carry jobs' kinds, queues and ids, not their arguments.
func (t *Tracing) River() []rivertype.Middleware {
	if t == nil {
		return nil
	}
	return []rivertype.Middleware{otelriver.NewMiddleware(&otelriver.MiddlewareConfig{TracerProvider: t.tp,
		MeterProvider: metricnoop.NewMeterProvider(), EnableWorkSpanJobKindSuffix: true})}
}

// Span attributes of a step attempt.
const (
	AttrWorkflow    = "lifeline.workflow.id"
	AttrStep        = "lifeline.step.id"
	AttrStepType    = "lifeline.step.type"
	AttrAttempt     = "lifeline.attempt"
	AttrCorrelation = "lifeline.correlation_id"
	AttrOutcome     = "lifeline.outcome"
	AttrErrorType   = "error.type"
)

// Attempt implements engine.Observer: a span "step.attempt" around the attempt.
func (t *Tracing) Attempt(ctx context.Context, a engine.AttemptInfo) (context.Context, func(engine.AttemptEnd)) {
	if t == nil {
		return ctx, func(engine.AttemptEnd) {}
	}
	ctx, span := t.tracer.Start(ctx, "step.attempt", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String(AttrWorkflow, a.WorkflowID), attribute.String(AttrStep, a.StepID), attribute.String(AttrStepType, a.StepType),
		attribute.Int(AttrAttempt, a.Attempt), attribute.String(AttrCorrelation, a.CorrelationID)))
	return ctx, func(end engine.AttemptEnd) {
		span.SetAttributes(attribute.String(AttrOutcome, string(end.Outcome)))
		switch {
		case end.Err != nil:
			span.SetStatus(codes.Error, "the attempt could not be recorded")
		case end.ErrorType != "":
			span.SetAttributes(attribute.String(AttrErrorType, end.ErrorType))
			span.SetStatus(codes.Error, "step failed: "+end.ErrorType)
		}
		span.End()
	}
}

// DeadLettered implements engine.Observer (the attempt's span says it: outcome dlq).
func (t *Tracing) DeadLettered(string, string, string) {}

// Replayed implements engine.Observer (the request's span covers it).
func (t *Tracing) Replayed(string, string) {}
