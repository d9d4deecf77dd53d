// Package metrics is Lifeline's Prometheus metrics: its own registry (never the global one:
// tests build many servers in one process), the engine's Observer that counts attempts,
// retries, moves to the DLQ and replays, the notifications' deliveries, River's job latency
// (a worker middleware) and, read when scraped, the pending dead letters by organization,
// the circuit breakers' states and River's queue depth. HTTP requests are measured by
// echo-contrib's echoprometheus on the same registry, labelled by route template.
//
// Every label value comes from a bounded set: workflow and step ids (configuration), error
// types, replay modes, channels, outcomes, River's queues, kinds and states, organizations.
// Never an execution id, a client key, a user id or a raw URL path.
//
// The counters are the process's own: they start at 0 when the process starts, as
// Prometheus counters do, and Prometheus's rate() and increase() read a reset as one.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo-contrib/echoprometheus"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"lifeline/models"
	"lifeline/services/engine"
)

// Source is what the gauges read when scraped (models.DB).
type Source interface {
	PendingByOrg(ctx context.Context) ([]models.OrgPending, error)
	BreakerGauges(ctx context.Context) ([]models.BreakerGauge, error)
	QueueDepths(ctx context.Context) ([]models.QueueDepth, error)
}

var _ Source = (*models.DB)(nil)

// Metric names (seed 002's counters by exactly those names).
const (
	NameAttempts   = "workflow_step_attempts_total"
	NameRetries    = "workflow_step_retries_total"
	NameDLQMoves   = "workflow_dlq_moves_total"
	NameReplays    = "workflow_dlq_replays_total"
	NameDuration   = "lifeline_step_duration_seconds"
	NamePending    = "lifeline_dlq_pending"
	NameBreaker    = "lifeline_breaker_state"
	NameDeliveries = "lifeline_notification_deliveries_total"
	NameQueueDepth = "lifeline_river_queue_depth"
	NameJobWait    = "lifeline_river_job_wait_seconds"
	NameJobRun     = "lifeline_river_job_run_seconds"
)

// scrapeTimeout bounds the queries of one scrape.
const scrapeTimeout = 5 * time.Second

// Metrics holds the registry and the metrics Lifeline records in it.
type Metrics struct {
	reg        *prometheus.Registry
	attempts   *prometheus.CounterVec
	retries    *prometheus.CounterVec
	dlqMoves   *prometheus.CounterVec
	replays    *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	deliveries *prometheus.CounterVec
	jobWait    *prometheus.HistogramVec
	jobRun     *prometheus.HistogramVec
	http       echo.MiddlewareFunc
}

var _ engine.Observer = (*Metrics)(nil)

// New registers Lifeline's metrics, the Go runtime's and the process's in a registry of
// their own. The gauges read src when scraped; log says when a read failed.
func New(src Source, log *slog.Logger) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{reg: reg}
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameAttempts,
		Help: "Step attempts that ran and were recorded, by workflow id, outcome (succeeded, failed) and error type."},
		[]string{"workflow", "outcome", "error_type"})
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameRetries,
		Help: "Retries scheduled after a failed attempt, by workflow id and error type."}, []string{"workflow", "error_type"})
	m.dlqMoves = prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameDLQMoves,
		Help: "Executions moved to the dead-letter queue, by workflow id and error type."}, []string{"workflow", "error_type"})
	m.replays = prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameReplays,
		Help: "Dead letters replayed, by workflow id and mode."}, []string{"workflow", "mode"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameDuration,
		Help:    "How long steps ran (their request), by step type and outcome.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}}, []string{"step_type", "outcome"})
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameDeliveries,
		Help: "Notification deliveries recorded, by channel and outcome (sent; failed, for good; pending, to be tried again)."}, []string{"channel", "outcome"})
	m.jobWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameJobWait,
		Help:    "How long River's jobs waited after they fell due before a worker took them, by queue and kind.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}, []string{"queue", "kind"})
	m.jobRun = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameJobRun,
		Help:    "How long River's jobs ran, by queue, kind and outcome (ok, error).",
		Buckets: prometheus.DefBuckets}, []string{"queue", "kind", "outcome"})
	reg.MustRegister(m.attempts, m.retries, m.dlqMoves, m.replays, m.duration, m.deliveries, m.jobWait, m.jobRun,
		&gauges{src: src, log: log}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.http = echoprometheus.NewMiddlewareWithConfig(echoprometheus.MiddlewareConfig{
		Registerer: reg,
		Subsystem:  "lifeline_http",
		// The route template (c.Path(), "/dlq/:id"), never the raw path: an unknown path is
		// one series, not one per URL.
		DoNotUseRequestPathFor404: true,
		// The Host header is the client's to choose: not a label.
		LabelFuncs: map[string]echoprometheus.LabelValueFunc{"host": func(echo.Context, error) string { return "" }},
	})
	return m
}

// Registry is where the metrics are registered (for tests and for more collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// HTTP is the Echo middleware that measures requests (echoprometheus: lifeline_http_requests_total,
// lifeline_http_request_duration_seconds, … by code, method and route template).
func (m *Metrics) HTTP() echo.MiddlewareFunc { return m.http }

// Attempt implements engine.Observer: end counts the attempt, its retry and its duration.
func (m *Metrics) Attempt(ctx context.Context, a engine.AttemptInfo) (context.Context, func(engine.AttemptEnd)) {
	return ctx, func(end engine.AttemptEnd) {
		if !end.Recorded() {
			return
		}
		outcome, errType := "succeeded", ""
		if end.Outcome != engine.OutcomeSucceeded {
			outcome, errType = "failed", end.ErrorType
		}
		m.attempts.WithLabelValues(a.WorkflowID, outcome, errType).Inc()
		if end.Outcome == engine.OutcomeRetrying {
			m.retries.WithLabelValues(a.WorkflowID, end.ErrorType).Inc()
		}
		if end.Took > 0 {
			m.duration.WithLabelValues(a.StepType, outcome).Observe(end.Took.Seconds())
		}
	}
}

// DeadLettered implements engine.Observer.
func (m *Metrics) DeadLettered(workflowID, _, errorType string) {
	m.dlqMoves.WithLabelValues(workflowID, errorType).Inc()
}

// Replayed implements engine.Observer.
func (m *Metrics) Replayed(workflowID, mode string) {
	m.replays.WithLabelValues(workflowID, mode).Inc()
}

// Delivered counts a notification delivery's recorded outcome (notify.Config.Delivered).
func (m *Metrics) Delivered(channel, outcome string) {
	m.deliveries.WithLabelValues(channel, outcome).Inc()
}

// River returns the River worker middleware that measures jobs' wait and run times.
func (m *Metrics) River() rivertype.Middleware { return &riverTimes{m: m} }

type riverTimes struct {
	river.MiddlewareDefaults
	m *Metrics
}

func (r *riverTimes) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	if job.AttemptedAt != nil {
		// From when it fell due (or was inserted, if later) to when a worker took it.
		due := job.ScheduledAt
		if job.CreatedAt.After(due) {
			due = job.CreatedAt
		}
		r.m.jobWait.WithLabelValues(job.Queue, job.Kind).Observe(max(job.AttemptedAt.Sub(due), 0).Seconds())
	}
	began := time.Now()
	err := doInner(ctx)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	r.m.jobRun.WithLabelValues(job.Queue, job.Kind, outcome).Observe(time.Since(began).Seconds())
	return err
}

// gauges reads the pending dead letters, the breakers and River's queue depth when scraped.
type gauges struct {
	src Source
	log *slog.Logger
}

var (
	descPending = prometheus.NewDesc(NamePending, "Dead letters waiting for someone (pending), by organization id.",
		[]string{"organization"}, nil)
	descBreaker = prometheus.NewDesc(NameBreaker, "Circuit breakers' states: 0 closed, 1 half-open, 2 open; by organization, workflow and step, or host.",
		[]string{"organization", "workflow", "step", "host"}, nil)
	descDepth = prometheus.NewDesc(NameQueueDepth, "River's unfinished jobs by queue and state.",
		[]string{"queue", "state"}, nil)
)

// breakerValue is the gauge's value of a breaker's state.
var breakerValue = map[string]float64{"closed": 0, "half_open": 1, "open": 2}

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPending
	ch <- descBreaker
	ch <- descDepth
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if rows, err := g.src.PendingByOrg(ctx); err != nil {
		g.failed(ch, descPending, err)
	} else {
		for _, r := range rows {
			ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(r.Pending), r.OrganizationID)
		}
	}
	if rows, err := g.src.BreakerGauges(ctx); err != nil {
		g.failed(ch, descBreaker, err)
	} else {
		for _, r := range rows {
			v, ok := breakerValue[r.State]
			if !ok {
				continue
			}
			ch <- prometheus.MustNewConstMetric(descBreaker, prometheus.GaugeValue, v, r.OrganizationID, deref(r.WorkflowID), deref(r.StepID), deref(r.Host))
		}
	}
	if rows, err := g.src.QueueDepths(ctx); err != nil {
		g.failed(ch, descDepth, err)
	} else {
		for _, r := range rows {
			ch <- prometheus.MustNewConstMetric(descDepth, prometheus.GaugeValue, float64(r.Jobs), r.Queue, r.State)
		}
	}
}

// failed reports a gauge that could not be read: the scrape says so (and the log once).
func (g *gauges) failed(ch chan<- prometheus.Metric, d *prometheus.Desc, err error) {
	if g.log != nil {
		g.log.Warn("metrics: a gauge could not be read", "err", err)
	}
	ch <- prometheus.NewInvalidMetric(d, err)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
