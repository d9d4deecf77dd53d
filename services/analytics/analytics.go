// Package analytics computes the error analytics of an organization (issue 24): failures over
// time by error type, dead-letter arrivals and closures, errors by workflow, step, error type
// and code, host and problem group, time to resolution, the recovery rates, the retries that
// paid, breaker openings, and recommendations with the figure behind each.
//
// The figures are computed in Go from the facts models.AnalyticsFacts reads, already summed
// over the range by the database (from the daily rollups a periodic job refreshes, or, for a
// client, from the history itself), so they are the same on both databases. Definitions:
//
//   - A failure is a finished attempt with an error type (it was retried, failed for good or
//     went to the DLQ); days are UTC calendar days.
//   - Time to resolution is a closed dead letter's time from its arrival to its closing, in
//     whole seconds, counted in the rollups' buckets: exact under 10 minutes, floored to
//     the minute under a day and to the hour beyond (the rollups keep a histogram per day,
//     not every item). Its median and p90 are nearest-rank percentiles: the value at rank
//     ceil(p/100 · n) of the n times sorted ascending (no interpolation: every figure is a
//     time some item took, to that precision).
//   - A dead letter's closing counts on the day it closed, once per closing, even if it is
//     reopened later (the refresh keeps a ledger of closings).
//   - Recommendations judge only samples of at least their minimum (StepErrorRateMinAttempts
//     and the others), and say the figure and its sample ("7,2 % (36 z 500)").
//   - The recovery rate is, of the dead letters closed in the range, the share closed by a
//     manual replay that succeeded (the others were resolved by hand, skipped or expired).
//   - The automatic recovery rate is, of the executions that had a failed attempt and ended
//     in the range (a dead letter counts on the day it arrived), the share that succeeded
//     without reaching the DLQ.
//   - Retries that paid: per attempt number, the attempts made and those after which the
//     step succeeded.
//   - A step's error rate is its failed attempts over its finished attempts.
package analytics

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"lifeline/models"
)

// Store is what the service reads (models.DB).
type Store interface {
	AnalyticsFacts(ctx context.Context, orgID string, s models.AnalyticsScope) (*models.AnalyticsFacts, error)
	BreakerTransitions(ctx context.Context, orgID string, from, until time.Time, limit int) ([]models.BreakerTransition, error)
	Workflows(ctx context.Context, orgID string) ([]models.Workflow, error)
	GroupTitles(ctx context.Context, orgID string, ids []string) (map[string]string, error)
}

// Service answers the analytics of an organization.
type Service struct {
	Store Store
	// Now is the database clock (models.DB.Now).
	Now func(ctx context.Context) (time.Time, error)
}

// New returns the service over db.
func New(db *models.DB) *Service { return &Service{Store: db, Now: db.Now} }

var _ Store = (*models.DB)(nil)

// Query is a validated request: days From..To (inclusive, UTC) and the filters.
type Query struct {
	From, To   time.Time
	WorkflowID string
	StepID     string
	ErrorType  string
	Client     string
}

// Days is the number of days the query spans.
func (q Query) Days() int { return int(q.To.Sub(q.From)/(24*time.Hour)) + 1 }

// MaxDays bounds a query's span.
const MaxDays = 400

// Today is the database clock's UTC day.
func (s *Service) Today(ctx context.Context) (time.Time, error) {
	now, err := s.Now(ctx)
	if err != nil {
		return time.Time{}, err
	}
	now = now.UTC()
	return time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC), nil
}

// Report computes the figures of q for the organization.
func (s *Service) Report(ctx context.Context, orgID string, q Query) (*Report, error) {
	scope := models.AnalyticsScope{From: models.AnalyticsDay(q.From), To: models.AnalyticsDay(q.To), WorkflowID: q.WorkflowID,
		StepID: q.StepID, ErrorType: q.ErrorType, Client: q.Client,
		// The span of equal length before, for the top reasons' trend.
		PrevFrom: models.AnalyticsDay(q.From.AddDate(0, 0, -q.Days())), PrevTo: models.AnalyticsDay(q.From.AddDate(0, 0, -1))}
	facts, err := s.Store.AnalyticsFacts(ctx, orgID, scope)
	if err != nil {
		return nil, err
	}
	now, err := s.Now(ctx)
	if err != nil {
		return nil, err
	}
	until := q.To.AddDate(0, 0, 1)
	if now.Before(until) {
		until = now
	}
	trans, err := s.Store.BreakerTransitions(ctx, orgID, q.From, until, 100000)
	if err != nil {
		return nil, err
	}
	wfs, err := s.Store.Workflows(ctx, orgID)
	if err != nil {
		return nil, err
	}
	groups := make([]string, 0, len(facts.Groups))
	for _, g := range facts.Groups {
		groups = append(groups, g.GroupID)
	}
	titles, err := s.Store.GroupTitles(ctx, orgID, groups)
	if err != nil {
		return nil, err
	}
	r := Compute(Input{Query: q, Facts: facts, Breakers: trans, Workflows: catalog(wfs), GroupTitles: titles, Until: until})
	return r, nil
}

// Workflow is what the figures name of a workflow: its name, and each step's title and host.
type Workflow struct {
	Name  string
	Steps map[string]Step
}

// Step is a step's title and the host its url names ("" when none, or templated).
type Step struct {
	Title string
	Host  string
}

// catalog reads the names, step titles and hosts of the workflows' current definitions.
func catalog(wfs []models.Workflow) map[string]Workflow {
	out := make(map[string]Workflow, len(wfs))
	for _, w := range wfs {
		var def struct {
			Steps []struct {
				ID     string         `json:"id"`
				Name   string         `json:"name"`
				Config map[string]any `json:"config"`
			} `json:"steps"`
		}
		_ = json.Unmarshal(w.Definition, &def) // a definition that does not decode names no steps
		steps := map[string]Step{}
		for _, s := range def.Steps {
			st := Step{Title: cmp.Or(s.Name, s.ID)}
			if raw, ok := s.Config["url"].(string); ok && !strings.Contains(raw, "{{") {
				if u, err := url.Parse(raw); err == nil {
					st.Host = strings.ToLower(u.Host)
				}
			}
			steps[s.ID] = st
		}
		out[w.ID] = Workflow{Name: w.Name, Steps: steps}
	}
	return out
}

// Input is everything Compute needs.
type Input struct {
	Query       Query
	Facts       *models.AnalyticsFacts
	Breakers    []models.BreakerTransition
	Workflows   map[string]Workflow
	GroupTitles map[string]string
	// Until is where the range ends for breakers still open (the day after To, or now).
	Until time.Time
}

// Report is the figures of a range. Its JSON is GET /api/v1/analytics's answer (texts of
// recommendations are added by the handler in the request's language).
type Report struct {
	From  string     `json:"from"`
	To    string     `json:"to"`
	AsOf  *time.Time `json:"asOf"`
	Total int        `json:"totalFailures"`
	// Failures: per day of the range, the failures by error type.
	Failures []DayFailures `json:"failures"`
	// DLQ: per day of the range, the dead letters that arrived and that were closed.
	DLQ              []DayDLQ         `json:"dlq"`
	ByWorkflow       []Count          `json:"byWorkflow"`
	ByStep           []Count          `json:"byStep"`
	ByErrorType      []Count          `json:"byErrorType"`
	ByCode           []Count          `json:"byCode"`
	ByHost           []Count          `json:"byHost"`
	ByGroup          []GroupCount     `json:"byGroup"`
	TimeToResolution TimeToResolution `json:"timeToResolution"`
	// RecoveryRate is Recovery.ByReplay / Recovery.Closed (nil when nothing closed).
	RecoveryRate *float64 `json:"recoveryRate"`
	Recovery     Recovery `json:"recovery"`
	// AutoRecoveryRate is AutoRecovery.Recovered / AutoRecovery.WithFailure (nil: none).
	AutoRecoveryRate *float64        `json:"autoRecoveryRate"`
	AutoRecovery     AutoRecovery    `json:"autoRecovery"`
	RetriesThatPaid  []AttemptPaid   `json:"retriesThatPaid"`
	BreakerOpenings  []BreakerOpened `json:"breakerOpenings"`
	Recommendations  []Advice        `json:"recommendations"`
	// Previous is the span of equal length before From, for "are we getting better?".
	Previous *Previous `json:"previous,omitempty"`
}

// Previous is the totals of the span of equal length before a report's.
type Previous struct {
	From         string   `json:"from"`
	To           string   `json:"to"`
	Total        int      `json:"totalFailures"`
	Closed       int      `json:"closed"`
	ByReplay     int      `json:"byReplay"`
	RecoveryRate *float64 `json:"recoveryRate"`
}

// DayFailures is one day's failures, by error type.
type DayFailures struct {
	Day         string         `json:"day"`
	Total       int            `json:"total"`
	ByErrorType map[string]int `json:"byErrorType"`
}

// DayDLQ is one day's dead-letter arrivals and closures.
type DayDLQ struct {
	Day      string `json:"day"`
	Arrivals int    `json:"arrivals"`
	Closures int    `json:"closures"`
}

// Count is the failures of one key (a workflow id, "workflowId/stepId", an error type, a
// code, a host), with its label, and, where attempts are known, the attempts and the rate.
type Count struct {
	Key       string   `json:"key"`
	Label     string   `json:"label"`
	Failures  int      `json:"failures"`
	Attempts  int      `json:"attempts,omitempty"`
	ErrorRate *float64 `json:"errorRate,omitempty"`
}

// GroupCount is a problem group's dead-letter arrivals in the range and in the span before
// (Trend: Arrivals − Previous).
type GroupCount struct {
	GroupID  string `json:"groupId"`
	Title    string `json:"title"`
	Arrivals int    `json:"arrivals"`
	Previous int    `json:"previous"`
	Trend    int    `json:"trend"`
}

// Durations are nearest-rank percentiles of times to resolution, in seconds (nil: none).
type Durations struct {
	Key    string `json:"key,omitempty"`
	Label  string `json:"label,omitempty"`
	Count  int    `json:"count"`
	Median *int64 `json:"median"`
	P90    *int64 `json:"p90"`
}

// TimeToResolution is the overall figure and its breakdowns.
type TimeToResolution struct {
	Durations
	ByWorkflow []Durations `json:"byWorkflow"`
	ByHow      []Durations `json:"byHow"`
}

// Recovery counts the dead letters closed, by how.
type Recovery struct {
	Closed   int `json:"closed"`
	ByReplay int `json:"byReplay"`
	Resolved int `json:"resolved"`
	Skipped  int `json:"skipped"`
	Expired  int `json:"expired"`
}

// AutoRecovery counts the executions with a failed attempt that ended, and those that
// succeeded without the DLQ.
type AutoRecovery struct {
	WithFailure int `json:"withFailure"`
	Recovered   int `json:"recovered"`
}

// AttemptPaid is an attempt number's attempts and successes (Rate: Succeeded / Attempts).
type AttemptPaid struct {
	Attempt   int      `json:"attempt"`
	Attempts  int      `json:"attempts"`
	Succeeded int      `json:"succeeded"`
	Rate      *float64 `json:"rate"`
}

// BreakerOpened is a breaker's openings in the range and how long it was open in it.
type BreakerOpened struct {
	BreakerID   string `json:"breakerId"`
	WorkflowID  string `json:"workflowId,omitempty"`
	StepID      string `json:"stepId,omitempty"`
	Host        string `json:"host,omitempty"`
	Label       string `json:"label"`
	Openings    int    `json:"openings"`
	SecondsOpen int64  `json:"secondsOpen"`
}

// Advice is a recommendation: its code, the figure behind it, what it is about and the
// values its text names (Params); Text is filled by the caller in the reader's language.
type Advice struct {
	Code    string         `json:"code"`
	Text    string         `json:"text"`
	Figure  float64        `json:"figure"`
	Subject string         `json:"subject,omitempty"`
	Params  map[string]any `json:"-"`
}

// Recommendation codes.
const (
	AdviceStepErrorRate      = "step_error_rate"
	AdviceRecoveryRate       = "low_recovery_rate"
	AdviceSlowResolution     = "slow_resolution"
	AdviceRateLimit          = "rate_limit_share"
	AdviceRetryNeverPays     = "retry_never_pays"
	AdviceValidationRetried  = "validation_retried"
	StepErrorRateThreshold   = 0.05
	RecoveryRateThreshold    = 0.80
	SlowResolutionSeconds    = 3600
	RateLimitShareThreshold  = 0.20
	RateLimitErrorType       = "rate_limit"
	ValidationErrorType      = "validation"
	RetryNeverPaysMinAttempt = 2

	// The smallest samples a rule judges: below them a rate says more about chance than
	// about the office (2 failures of 3 attempts is not a 67 % error rate worth acting on).
	StepErrorRateMinAttempts = 20 // finished attempts of the step
	RecoveryRateMinClosed    = 10 // dead letters closed in the range
	SlowResolutionMinClosed  = 10 // closures whose times make the median
	RateLimitMinFailures     = 20 // failures at the service
	RetryNeverPaysMinTries   = 10 // tries of the attempt number that never succeeded
)

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted (ascending): the
// value at rank ceil(p/100 · n); nil for no values.
func Percentile(sorted []int64, p int) *int64 {
	n := len(sorted)
	if n == 0 {
		return nil
	}
	rank := (p*n + 99) / 100 // ceil(p·n/100) in integers
	rank = max(1, min(rank, n))
	v := sorted[rank-1]
	return &v
}

func ratio(a, b int) *float64 {
	if b == 0 {
		return nil
	}
	r := float64(a) / float64(b)
	return &r
}

// Bucket is a histogram's Count times to resolution of Seconds each.
type Bucket struct {
	Seconds int64
	Count   int
}

// WeightedPercentile is the nearest-rank p-th percentile (0 < p ≤ 100) of the times a
// histogram holds (in any order; buckets of one duration may repeat): the value at rank
// ceil(p/100 · n) of its n times sorted ascending; nil for none. It sorts hist.
func WeightedPercentile(hist []Bucket, p int) *int64 {
	n := 0
	for _, b := range hist {
		n += b.Count
	}
	if n == 0 {
		return nil
	}
	slices.SortFunc(hist, func(a, b Bucket) int { return cmp.Compare(a.Seconds, b.Seconds) })
	rank := max(1, min((p*n+99)/100, n))
	seen := 0
	for _, b := range hist {
		seen += b.Count
		if seen >= rank {
			v := b.Seconds
			return &v
		}
	}
	return nil // not reached: seen ends at n ≥ rank
}

// durations is the median and p90 of a histogram.
func durations(hist []Bucket) Durations {
	n := 0
	for _, b := range hist {
		n += b.Count
	}
	return Durations{Count: n, Median: WeightedPercentile(hist, 50), P90: WeightedPercentile(hist, 90)}
}

// Compute computes the report of in.
func Compute(in Input) *Report {
	q, f := in.Query, in.Facts
	r := &Report{From: models.AnalyticsDay(q.From), To: models.AnalyticsDay(q.To), AsOf: f.AsOf}
	wfName := func(id string) string {
		if w, ok := in.Workflows[id]; ok {
			return w.Name
		}
		return id
	}
	step := func(wf, id string) Step {
		if s, ok := in.Workflows[wf].Steps[id]; ok {
			return s
		}
		return Step{Title: id}
	}

	// Days of the range, in order.
	days := []string{}
	for d := q.From; !d.After(q.To); d = d.AddDate(0, 0, 1) {
		days = append(days, models.AnalyticsDay(d))
	}
	failDay := map[string]*DayFailures{}
	dlqDay := map[string]*DayDLQ{}
	r.Failures = make([]DayFailures, len(days))
	r.DLQ = make([]DayDLQ, len(days))
	for i, d := range days {
		r.Failures[i] = DayFailures{Day: d, ByErrorType: map[string]int{}}
		r.DLQ[i] = DayDLQ{Day: d}
		failDay[d], dlqDay[d] = &r.Failures[i], &r.DLQ[i]
	}

	byWF, byStep, byType, byCode, byHost := map[string]*agg{}, map[string]*agg{}, map[string]*agg{}, map[string]*agg{}, map[string]*agg{}
	rateLimitByService := map[string]*agg{} // failures: rate-limit ones; attempts: all failures
	bump := func(m map[string]*agg, k string, failures, attempts int) {
		a, ok := m[k]
		if !ok {
			a = &agg{}
			m[k] = a
		}
		a.failures += failures
		a.attempts += attempts
	}
	for _, d := range f.FailuresByDay {
		if day, ok := failDay[d.Day]; ok && d.ErrorType != "" {
			day.Total += d.Failures
			day.ByErrorType[d.ErrorType] += d.Failures
		}
	}
	paid := map[int]*AttemptPaid{}
	perStepAttempt := map[stepAttempt]*AttemptPaid{}
	validationRetried := map[string]int{}
	for _, a := range f.Attempts {
		stepKey := a.WorkflowID + "/" + a.StepID
		failed := 0
		if a.ErrorType != "" {
			failed = a.Attempts
		}
		bump(byWF, a.WorkflowID, failed, a.Attempts)
		bump(byStep, stepKey, failed, a.Attempts)
		host := step(a.WorkflowID, a.StepID).Host
		if host != "" {
			bump(byHost, host, failed, a.Attempts)
		}
		if failed > 0 {
			r.Total += failed
			bump(byType, a.ErrorType, failed, 0)
			if a.ErrorCode != "" {
				bump(byCode, a.ErrorCode, failed, 0)
			}
			service := cmp.Or(host, stepKey)
			rl := 0
			if a.ErrorType == RateLimitErrorType {
				rl = failed
			}
			bump(rateLimitByService, service, rl, failed)
			if a.ErrorType == ValidationErrorType {
				validationRetried[stepKey] += a.Retried
			}
		}
		p, ok := paid[a.Attempt]
		if !ok {
			p = &AttemptPaid{Attempt: a.Attempt}
			paid[a.Attempt] = p
		}
		p.Attempts += a.Attempts
		p.Succeeded += a.Succeeded
		k := stepAttempt{a.WorkflowID, a.StepID, a.Attempt}
		sp, ok := perStepAttempt[k]
		if !ok {
			sp = &AttemptPaid{Attempt: a.Attempt}
			perStepAttempt[k] = sp
		}
		sp.Attempts += a.Attempts
		sp.Succeeded += a.Succeeded
	}
	counts := func(m map[string]*agg, label func(string) string, withRate bool) []Count {
		out := make([]Count, 0, len(m))
		for k, a := range m {
			if a.failures == 0 {
				continue
			}
			c := Count{Key: k, Label: label(k), Failures: a.failures}
			if withRate {
				c.Attempts, c.ErrorRate = a.attempts, ratio(a.failures, a.attempts)
			}
			out = append(out, c)
		}
		slices.SortFunc(out, func(a, b Count) int { return cmp.Or(b.Failures-a.Failures, strings.Compare(a.Key, b.Key)) })
		return out
	}
	same := func(k string) string { return k }
	stepLabel := func(k string) string {
		wf, id, _ := strings.Cut(k, "/")
		return wfName(wf) + " · " + step(wf, id).Title
	}
	r.ByWorkflow = counts(byWF, wfName, true)
	r.ByStep = counts(byStep, stepLabel, true)
	r.ByErrorType = counts(byType, same, false)
	r.ByCode = counts(byCode, same, false)
	r.ByHost = counts(byHost, same, true)
	for _, n := range slices.Sorted(maps.Keys(paid)) {
		p := paid[n]
		p.Rate = ratio(p.Succeeded, p.Attempts)
		r.RetriesThatPaid = append(r.RetriesThatPaid, *p)
	}

	// Dead letters: arrivals, closures, groups, times to resolution.
	wfArrivals := map[string]int{}
	for _, d := range f.DLQ {
		if dd, ok := dlqDay[d.Day]; ok {
			dd.Arrivals += d.Arrivals
			dd.Closures += d.Closures
		}
		wfArrivals[d.WorkflowID] += d.Arrivals
		switch d.How {
		case models.ClosedByReplay:
			r.Recovery.ByReplay += d.Closures
		case models.ClosedResolved:
			r.Recovery.Resolved += d.Closures
		case models.ClosedSkipped:
			r.Recovery.Skipped += d.Closures
		case models.ClosedExpired:
			r.Recovery.Expired += d.Closures
		}
		r.Recovery.Closed += d.Closures
	}
	groupPrev := map[string]int{}
	for _, g := range f.PreviousGroups {
		groupPrev[g.GroupID] += g.Arrivals
	}
	for _, g := range f.Groups {
		if g.Arrivals > 0 {
			r.ByGroup = append(r.ByGroup, GroupCount{GroupID: g.GroupID, Title: cmp.Or(in.GroupTitles[g.GroupID], g.GroupID), Arrivals: g.Arrivals,
				Previous: groupPrev[g.GroupID], Trend: g.Arrivals - groupPrev[g.GroupID]})
		}
	}
	slices.SortFunc(r.ByGroup, func(a, b GroupCount) int { return cmp.Or(b.Arrivals-a.Arrivals, strings.Compare(a.GroupID, b.GroupID)) })
	var all []Bucket
	byWFSecs, byHowSecs := map[string][]Bucket{}, map[string][]Bucket{}
	for _, x := range f.Resolution {
		b := Bucket{Seconds: x.Seconds, Count: x.Closures}
		all = append(all, b)
		byWFSecs[x.WorkflowID] = append(byWFSecs[x.WorkflowID], b)
		byHowSecs[x.How] = append(byHowSecs[x.How], b)
	}
	r.TimeToResolution.Durations = durations(all)
	for _, wf := range slices.Sorted(maps.Keys(byWFSecs)) {
		d := durations(byWFSecs[wf])
		d.Key, d.Label = wf, wfName(wf)
		r.TimeToResolution.ByWorkflow = append(r.TimeToResolution.ByWorkflow, d)
	}
	for _, how := range models.ClosedHows {
		if secs, ok := byHowSecs[how]; ok {
			d := durations(secs)
			d.Key, d.Label = how, how
			r.TimeToResolution.ByHow = append(r.TimeToResolution.ByHow, d)
		}
	}
	r.RecoveryRate = ratio(r.Recovery.ByReplay, r.Recovery.Closed)
	if p := f.Previous; p != nil {
		r.Previous = &Previous{From: models.AnalyticsDay(q.From.AddDate(0, 0, -q.Days())), To: models.AnalyticsDay(q.From.AddDate(0, 0, -1)),
			Total: p.Failures, Closed: p.Closed, ByReplay: p.ByReplay, RecoveryRate: ratio(p.ByReplay, p.Closed)}
	}

	// Automatic recovery: the executions that ended without a dead letter, and the dead
	// letters (each an execution that did not recover by itself).
	for _, x := range f.Recovery {
		r.AutoRecovery.WithFailure += x.Ended
		r.AutoRecovery.Recovered += x.Recovered
	}
	for _, n := range wfArrivals {
		r.AutoRecovery.WithFailure += n
	}
	r.AutoRecoveryRate = ratio(r.AutoRecovery.Recovered, r.AutoRecovery.WithFailure)

	r.BreakerOpenings = breakerOpenings(in, wfName, step)
	r.Recommendations = recommend(r, byStep, rateLimitByService, perStepAttemptList(perStepAttempt), validationRetried, stepLabel)
	return r
}

// agg is a key's failures and attempts.
type agg struct{ failures, attempts int }

// stepAttempt keys an attempt number of a workflow's step.
type stepAttempt struct {
	wf, step string
	attempt  int
}

// stepAttempts is a step's attempts by attempt number.
type stepAttempts struct {
	wf, step string
	attempts []AttemptPaid // ascending attempt numbers
}

func perStepAttemptList(m map[stepAttempt]*AttemptPaid) []stepAttempts {
	byStep := map[[2]string][]AttemptPaid{}
	for k, v := range m {
		key := [2]string{k.wf, k.step}
		byStep[key] = append(byStep[key], *v)
	}
	keys := slices.SortedFunc(maps.Keys(byStep), func(a, b [2]string) int { return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1])) })
	out := make([]stepAttempts, 0, len(keys))
	for _, k := range keys {
		as := byStep[k]
		slices.SortFunc(as, func(a, b AttemptPaid) int { return a.Attempt - b.Attempt })
		out = append(out, stepAttempts{wf: k[0], step: k[1], attempts: as})
	}
	return out
}

// breakerOpenings counts each breaker's openings in the range and the time it spent open in
// it: from each circuit.opened to the breaker's next transition (half-open or closed), or
// to in.Until, clipped to the range.
func breakerOpenings(in Input, wfName func(string) string, step func(wf, id string) Step) []BreakerOpened {
	from, until := in.Query.From, in.Until
	type state struct {
		out      *BreakerOpened
		openedAt *time.Time
	}
	byID := map[string]*state{}
	var order []string
	get := func(t models.BreakerTransition) *state {
		s, ok := byID[t.BreakerID]
		if !ok {
			b := &BreakerOpened{BreakerID: t.BreakerID}
			if t.WorkflowID != nil {
				b.WorkflowID = *t.WorkflowID
			}
			if t.StepID != nil {
				b.StepID = *t.StepID
			}
			if t.Host != nil {
				b.Host = *t.Host
				b.Label = *t.Host
			} else {
				b.Label = wfName(b.WorkflowID) + " · " + step(b.WorkflowID, b.StepID).Title
			}
			s = &state{out: b}
			byID[t.BreakerID] = s
			order = append(order, t.BreakerID)
		}
		return s
	}
	clip := func(a, b time.Time) int64 {
		a, b = maxTime(a, from), minTime(b, until)
		if !b.After(a) {
			return 0
		}
		return int64(b.Sub(a) / time.Second)
	}
	for _, t := range in.Breakers {
		if in.Query.WorkflowID != "" && (t.WorkflowID == nil || *t.WorkflowID != in.Query.WorkflowID) {
			continue
		}
		if in.Query.StepID != "" && (t.StepID == nil || *t.StepID != in.Query.StepID) {
			continue
		}
		s := get(t)
		switch t.Action {
		case "circuit.opened":
			if s.openedAt != nil { // opened again (forced) while open: one stretch goes on
				continue
			}
			at := t.At
			s.openedAt = &at
			if !at.Before(from) && at.Before(until) {
				s.out.Openings++
			}
		default:
			if s.openedAt != nil {
				s.out.SecondsOpen += clip(*s.openedAt, t.At)
				s.openedAt = nil
			}
		}
	}
	var out []BreakerOpened
	for _, id := range order {
		s := byID[id]
		if s.openedAt != nil {
			s.out.SecondsOpen += clip(*s.openedAt, until)
		}
		if s.out.Openings > 0 || s.out.SecondsOpen > 0 {
			out = append(out, *s.out)
		}
	}
	slices.SortFunc(out, func(a, b BreakerOpened) int {
		return cmp.Or(b.Openings-a.Openings, cmp.Compare(b.SecondsOpen, a.SecondsOpen), strings.Compare(a.BreakerID, b.BreakerID))
	})
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// recommend applies the rules, each firing strictly over (or under) its threshold and only on
// a sample of at least its minimum (…Min… above), in a fixed order: step error rates (highest first), the recovery rate, the median time to
// resolution, rate-limit shares (highest first), retries that never pay, validation errors
// retried.
func recommend(r *Report, byStep, rateLimit map[string]*agg, steps []stepAttempts, validationRetried map[string]int,
	stepLabel func(string) string) []Advice {
	out := []Advice{}
	var rates []Advice
	for k, a := range byStep {
		if a.attempts < StepErrorRateMinAttempts {
			continue
		}
		rate := float64(a.failures) / float64(a.attempts)
		if rate > StepErrorRateThreshold {
			rates = append(rates, Advice{Code: AdviceStepErrorRate, Figure: rate, Subject: k,
				Params: map[string]any{"Step": stepLabel(k), "Failures": a.failures, "Attempts": a.attempts}})
		}
	}
	byFigure := func(a, b Advice) int {
		return cmp.Or(cmp.Compare(b.Figure, a.Figure), strings.Compare(a.Subject, b.Subject))
	}
	slices.SortFunc(rates, byFigure)
	out = append(out, rates...)
	if r.RecoveryRate != nil && *r.RecoveryRate < RecoveryRateThreshold && r.Recovery.Closed >= RecoveryRateMinClosed {
		out = append(out, Advice{Code: AdviceRecoveryRate, Figure: *r.RecoveryRate,
			Params: map[string]any{"Closed": r.Recovery.Closed, "ByReplay": r.Recovery.ByReplay}})
	}
	if m := r.TimeToResolution.Median; m != nil && *m > SlowResolutionSeconds && r.TimeToResolution.Count >= SlowResolutionMinClosed {
		out = append(out, Advice{Code: AdviceSlowResolution, Figure: float64(*m), Params: map[string]any{"Count": r.TimeToResolution.Count}})
	}
	var limits []Advice
	for svc, a := range rateLimit {
		if a.attempts < RateLimitMinFailures || a.failures == 0 {
			continue
		}
		share := float64(a.failures) / float64(a.attempts)
		if share > RateLimitShareThreshold {
			name := svc
			if strings.Contains(svc, "/") {
				name = stepLabel(svc)
			}
			limits = append(limits, Advice{Code: AdviceRateLimit, Figure: share, Subject: svc,
				Params: map[string]any{"Service": name, "RateLimited": a.failures, "Failures": a.attempts}})
		}
	}
	slices.SortFunc(limits, byFigure)
	out = append(out, limits...)
	for _, s := range steps {
		// The first attempt number from which no attempt of the step ever succeeded, when
		// it is a retry that was made: every retry from it on was wasted.
		never := 0
		for i := len(s.attempts) - 1; i >= 0; i-- {
			a := s.attempts[i]
			if a.Succeeded > 0 {
				break
			}
			if a.Attempt >= RetryNeverPaysMinAttempt && a.Attempts >= RetryNeverPaysMinTries {
				never = i + 1
			}
		}
		if never == 0 {
			continue
		}
		a := s.attempts[never-1]
		retry := a.Attempt - 1
		out = append(out, Advice{Code: AdviceRetryNeverPays, Figure: float64(a.Attempts), Subject: s.wf + "/" + s.step,
			Params: map[string]any{"Step": stepLabel(s.wf + "/" + s.step), "Retry": retry, "Tries": a.Attempts, "MaxRetries": retry - 1}})
	}
	for _, k := range slices.Sorted(maps.Keys(validationRetried)) {
		if n := validationRetried[k]; n > 0 {
			out = append(out, Advice{Code: AdviceValidationRetried, Figure: float64(n), Subject: k, Params: map[string]any{"Step": stepLabel(k), "Count": n}})
		}
	}
	return out
}

// RefreshEvery is how often the periodic job (services/jobs) recomputes the rollups; the
// figures are as fresh as its last run, and the page says when that was.
const RefreshEvery = 5 * time.Minute

// Refresher is what the periodic refresh needs (models.DB).
type Refresher interface {
	OrganizationIDs(ctx context.Context) ([]string, error)
	RefreshAnalytics(ctx context.Context, orgID string) (time.Time, error)
}

var _ Refresher = (*models.DB)(nil)

// Refresh recomputes every organization's recent rollups (models.DB.RefreshAnalytics), one
// transaction per organization; it returns the first error after trying them all.
func Refresh(ctx context.Context, r Refresher) error {
	orgs, err := r.OrganizationIDs(ctx)
	if err != nil {
		return err
	}
	var first error
	for _, org := range orgs {
		if _, err := r.RefreshAnalytics(ctx, org); err != nil && first == nil {
			first = fmt.Errorf("refresh analytics of %s: %w", org, err)
		}
	}
	return first
}
