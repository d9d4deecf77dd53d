package handlers

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"lifeline/models"
	"lifeline/services/analytics"
	"lifeline/views/i18n"
	"lifeline/views/pages"
)

// analyticsReader is what the analytics page and API need (analytics.Service).
type analyticsReader interface {
	Today(ctx context.Context) (time.Time, error)
	Report(ctx context.Context, orgID string, q analytics.Query) (*analytics.Report, error)
}

var _ analyticsReader = (*analytics.Service)(nil)

// AnalyticsHandler serves the error analytics (issue 24): the page (GET /analytics), each of
// its tables as CSV (GET /analytics/export.csv?table=…) and GET /api/v1/analytics, with the
// same query keys: range (7, 30, 90 or custom; default 30 days to today, UTC), from and to
// (YYYY-MM-DD; either makes the range custom; on the page, dates other than the shownFrom
// and shownTo it showed do), workflowId, stepId, errorType, client. A
// value that is not valid is a 422 naming its key. Accountants and admins read their
// organization's figures (which have no per-user breakdowns); viewers are refused.
type AnalyticsHandler struct {
	*chrome
	svc analyticsReader
	wfs workflowLister
}

func newAnalyticsHandler(ch *chrome, svc analyticsReader, wfs workflowLister) *AnalyticsHandler {
	return &AnalyticsHandler{chrome: ch, svc: svc, wfs: wfs}
}

// analyticsRanges are the range key's values.
var analyticsRanges = []string{"7", "30", "90", "custom"}

// analyticsQuery reads and validates the query.
func (h *AnalyticsHandler) analyticsQuery(c echo.Context) (analytics.Query, string, error) {
	l, ctx := localizer(c), c.Request().Context()
	q := queryOf(l, c.QueryParams())
	rng := q.oneOf("range", analyticsRanges)
	from, to := q.date("from"), q.date("to")
	out := analytics.Query{WorkflowID: q.workflowID("workflowId"), StepID: q.stepID("stepId"), ErrorType: q.oneOf("errorType", errorTypes())}
	out.Client, _ = q.text("client", maxParam, "lists.error.text", "Max", maxParam)
	today, err := h.svc.Today(ctx)
	if err != nil {
		return out, "", err
	}
	if rng == "" && (from != "" || to != "") {
		rng = "custom"
	}
	// The page's form sends the dates it showed (shownFrom, shownTo) beside the ones it
	// has now: dates she edited make the range custom, whatever the select still says; the
	// same dates sent back with another range are only what the page showed.
	if sent := c.QueryParams(); rng != "custom" && len(sent["shownFrom"]) > 0 && (from != sent.Get("shownFrom") || to != sent.Get("shownTo")) {
		rng = "custom"
	}
	switch rng {
	case "custom":
		if from == "" {
			q.fail("from", "lists.error.date")
		}
		end := today
		if to != "" {
			end, _ = time.Parse(time.DateOnly, to)
		}
		start, _ := time.Parse(time.DateOnly, from)
		out.From, out.To = start, end
		if from != "" && end.Before(start) {
			q.fail("to", "lists.error.range")
		} else if from != "" && out.Days() > analytics.MaxDays {
			q.fail("from", "analytics.error.span", "Max", analytics.MaxDays)
		}
	default:
		n := 30
		if rng != "" {
			n, _ = strconv.Atoi(rng)
		} else {
			rng = "30"
		}
		out.From, out.To = today.AddDate(0, 0, 1-n), today
	}
	return out, rng, q.err()
}

// API answers GET /api/v1/analytics: analytics.Report as JSON, each recommendation's text
// in the request's language.
func (h *AnalyticsHandler) API(c echo.Context) error {
	q, _, err := h.analyticsQuery(c)
	if err != nil {
		return err
	}
	r, err := h.svc.Report(c.Request().Context(), principal(c).OrganizationID, q)
	if err != nil {
		return err
	}
	l := localizer(c)
	for i := range r.Recommendations {
		r.Recommendations[i].Text = adviceText(l, r.Recommendations[i])
	}
	return c.JSON(http.StatusOK, r)
}

// adviceText says a recommendation in l's language.
func adviceText(l *i18n.Localizer, a analytics.Advice) string {
	args := []any{"Figure", adviceFigure(l, a)}
	for k, v := range a.Params {
		args = append(args, k, v)
	}
	return l.T("analytics.advice."+a.Code, args...)
}

// adviceFigure shows a recommendation's figure: a percentage, a duration or a count.
func adviceFigure(l *i18n.Localizer, a analytics.Advice) string {
	switch a.Code {
	case analytics.AdviceStepErrorRate, analytics.AdviceRecoveryRate, analytics.AdviceRateLimit:
		return percent(l, &a.Figure)
	case analytics.AdviceSlowResolution:
		return duration(l, int64(a.Figure))
	}
	return l.Number(a.Figure, 0)
}

func percent(l *i18n.Localizer, f *float64) string {
	if f == nil {
		return "–"
	}
	return l.Number(*f*100, 1) + " %"
}

// duration shows seconds as the largest units that matter: "2 h 5 min", "45 s". Times to
// resolution are kept to the second only under 10 minutes (the rollups' buckets), so
// from 10 minutes on it shows minutes, not a ":00 s" that would claim more.
func duration(l *i18n.Localizer, s int64) string {
	switch {
	case s < 60:
		return l.T("analytics.dur.s", "S", s)
	case s >= 600 && s < 3600:
		return l.T("analytics.dur.mm", "M", s/60)
	case s < 3600:
		return l.T("analytics.dur.m", "M", s/60, "S", s%60)
	case s < 86400:
		return l.T("analytics.dur.h", "H", s/3600, "M", (s%3600)/60)
	}
	return l.T("analytics.dur.d", "D", s/86400, "H", (s%86400)/3600)
}

func durationPtr(l *i18n.Localizer, s *int64) string {
	if s == nil {
		return "–"
	}
	return duration(l, *s)
}

// maxStepAdvice is how many steps' error rates the page advises on, worst first.
const maxStepAdvice = 5

func countAdvice(as []analytics.Advice, code string) int {
	n := 0
	for _, a := range as {
		if a.Code == code {
			n++
		}
	}
	return n
}

// Page renders the page; a refused filter shows the form with its messages (422).
func (h *AnalyticsHandler) Page(c echo.Context) error {
	p, l, ctx := principal(c), localizer(c), c.Request().Context()
	wfs, err := h.wfs.All(ctx, p.OrganizationID)
	if err != nil {
		return err
	}
	q, rng, qerr := h.analyticsQuery(c)
	raw := queryOf(l, c.QueryParams())
	f := pages.AnalyticsFilter{Action: h.url("analytics"), Range: rng, From: raw.shown("from"), To: raw.shown("to"),
		StepID: raw.shown("stepId"), Client: raw.shown("client")}
	f.Ranges = options(analyticsRanges, rng, func(v string) string { return l.T("analytics.range." + v) })
	f.Workflows = workflowChoices(wfs, raw.shown("workflowId"))
	f.ErrorTypes = options(errorTypes(), raw.shown("errorType"), func(t string) string { return l.TOr("errortype."+t, t) })
	vm := pages.AnalyticsVM{}
	status := http.StatusOK
	if me := invalid(qerr); me != nil {
		status, vm.Error, f.Errors = http.StatusUnprocessableEntity, me.Message, me.Fields
		vm.Filter = f
		return render(c, status, pages.Analytics(h.page(c, "analytics.title", "analytics"), vm))
	} else if qerr != nil {
		return qerr
	}
	if f.From == "" || rng != "custom" { // a range's own dates, not those the form sent back
		f.From, f.To = models.AnalyticsDay(q.From), models.AnalyticsDay(q.To)
	}
	vm.Filter = f
	r, err := h.svc.Report(ctx, p.OrganizationID, q)
	if err != nil {
		return err
	}
	if r.AsOf != nil {
		vm.AsOf = l.T("analytics.asof", "Time", l.Time(*r.AsOf))
	}
	// The worst steps' error rates, then one line for the rest (the steps' table lists them
	// all; the API answers every recommendation).
	moreSteps := 0
	for _, a := range r.Recommendations {
		if a.Code == analytics.AdviceStepErrorRate {
			if moreSteps++; moreSteps > maxStepAdvice {
				continue
			}
		}
		vm.Advice = append(vm.Advice, pages.AnalyticsAdvice{Code: a.Code, Text: adviceText(l, a), Figure: adviceFigure(l, a)})
		if a.Code == analytics.AdviceStepErrorRate && moreSteps == maxStepAdvice {
			if n := countAdvice(r.Recommendations, analytics.AdviceStepErrorRate) - maxStepAdvice; n > 0 {
				vm.Advice = append(vm.Advice, pages.AnalyticsAdvice{Code: "more_steps", Text: l.N("analytics.advice.more_steps", n)})
			}
		}
	}
	vm.Figures = []pages.AnalyticsFigure{
		{ID: "failures", Label: l.T("analytics.fig.failures"), Value: l.Number(float64(r.Total), 0), Note: l.T("analytics.fig.failures.note", "Days", q.Days())},
		{ID: "recovery", Label: l.T("analytics.fig.recovery"), Value: percent(l, r.RecoveryRate),
			Note: l.T("analytics.fig.recovery.note", "ByReplay", r.Recovery.ByReplay, "Closed", r.Recovery.Closed)},
		{ID: "autorecovery", Label: l.T("analytics.fig.autorecovery"), Value: percent(l, r.AutoRecoveryRate),
			Note: l.T("analytics.fig.autorecovery.note", "Recovered", r.AutoRecovery.Recovered, "All", r.AutoRecovery.WithFailure)},
		{ID: "ttr", Label: l.T("analytics.fig.ttr"), Value: durationPtr(l, r.TimeToResolution.Median),
			Note: l.T("analytics.fig.ttr.note", "P90", durationPtr(l, r.TimeToResolution.P90), "Count", r.TimeToResolution.Count)},
	}
	if pr := r.Previous; pr != nil {
		change := l.T("analytics.fig.same")
		if d := r.Total - pr.Total; d > 0 {
			change = "+" + l.Number(float64(d), 0)
		} else if d < 0 {
			change = "−" + l.Number(float64(-d), 0)
		}
		vm.Figures[0].Trend = l.T("analytics.fig.failures.prev", "Days", q.Days(), "Prev", l.Number(float64(pr.Total), 0), "Change", change)
		if pr.Closed > 0 {
			vm.Figures[1].Trend = l.T("analytics.fig.recovery.prev", "Days", q.Days(), "Prev", percent(l, pr.RecoveryRate), "ByReplay", pr.ByReplay, "Closed", pr.Closed)
		}
	}
	tables := h.tables(c, l, r)
	vm.Charts = charts(l, r, tables)
	for _, id := range []string{"workflows", "steps", "types", "codes", "hosts", "groups", "ttr", "breakers"} {
		vm.Tables = append(vm.Tables, tables[id])
	}
	return render(c, status, pages.Analytics(h.page(c, "analytics.title", "analytics"), vm))
}

// Export answers one of the page's tables as CSV (table=<id>), for the same query.
func (h *AnalyticsHandler) Export(c echo.Context) error {
	l, p := localizer(c), principal(c)
	q, _, err := h.analyticsQuery(c)
	if err != nil {
		return err
	}
	r, err := h.svc.Report(c.Request().Context(), p.OrganizationID, q)
	if err != nil {
		return err
	}
	t, ok := h.tables(c, l, r)[c.QueryParam("table")]
	if !ok {
		return invalidField(l, "table")
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	w.Header().Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="analytics-%s-%s-%s.csv"`, t.ID, r.From, r.To))
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "\ufeff")
	cw := csv.NewWriter(w)
	cw.Comma = csvSeparator(l.Lang())
	_ = cw.Write(t.Head)
	for _, row := range t.Rows {
		_ = cw.Write(row)
	}
	cw.Flush()
	return nil
}

// invalidField is a 422 naming key as not one of the page's tables.
func invalidField(l *i18n.Localizer, key string) error {
	q := queryOf(l, nil)
	q.fail(key, "analytics.error.table")
	return q.err()
}

// tables are the page's tables of numbers by id, each with its CSV link.
func (h *AnalyticsHandler) tables(c echo.Context, l *i18n.Localizer, r *analytics.Report) map[string]pages.DataTable {
	query := url.Values{}
	for k, v := range c.QueryParams() {
		if k != "table" {
			query[k] = v
		}
	}
	csvURL := func(id string) string {
		v := url.Values{}
		for k, vals := range query {
			v[k] = vals
		}
		v.Set("table", id)
		return h.url("analytics.export") + "?" + v.Encode()
	}
	num := func(n int) string { return strconv.Itoa(n) }
	out := map[string]pages.DataTable{}
	add := func(id, caption string, head []string, rows [][]string) {
		out[id] = pages.DataTable{ID: id, Caption: caption, Head: head, Rows: rows, CSVURL: csvURL(id), Empty: l.T("analytics.table.empty")}
	}
	types := map[string]bool{}
	for _, d := range r.Failures {
		for t := range d.ByErrorType {
			types[t] = true
		}
	}
	typeList := []string{}
	for _, t := range errorTypes() {
		if types[t] {
			typeList = append(typeList, t)
		}
	}
	head := []string{l.T("analytics.col.day"), l.T("analytics.col.failures")}
	for _, t := range typeList {
		head = append(head, l.TOr("errortype."+t, t))
	}
	var rows [][]string
	for _, d := range r.Failures {
		row := []string{d.Day, num(d.Total)}
		for _, t := range typeList {
			row = append(row, num(d.ByErrorType[t]))
		}
		rows = append(rows, row)
	}
	add("failures", l.T("analytics.chart.failures"), head, rows)
	rows = nil
	for _, d := range r.DLQ {
		rows = append(rows, []string{d.Day, num(d.Arrivals), num(d.Closures)})
	}
	add("dlq", l.T("analytics.chart.dlq"), []string{l.T("analytics.col.day"), l.T("analytics.col.arrivals"), l.T("analytics.col.closures")}, rows)
	rows = nil
	for _, p := range r.RetriesThatPaid {
		rows = append(rows, []string{num(p.Attempt), num(p.Attempts), num(p.Succeeded), percent(l, p.Rate)})
	}
	add("retries", l.T("analytics.chart.retries"), []string{l.T("analytics.col.attempt"), l.T("analytics.col.attempts"), l.T("analytics.col.succeeded"), l.T("analytics.col.rate")}, rows)
	counts := func(id, caption, key string, cs []analytics.Count, withRate bool) {
		var rows [][]string
		head := []string{l.T(key), l.T("analytics.col.failures")}
		if withRate {
			head = append(head, l.T("analytics.col.attempts"), l.T("analytics.col.errorrate"))
		}
		for _, c := range cs {
			label := c.Label
			if id == "types" {
				label = l.TOr("errortype."+c.Key, c.Key)
			}
			row := []string{label, num(c.Failures)}
			if withRate {
				row = append(row, num(c.Attempts), percent(l, c.ErrorRate))
			}
			rows = append(rows, row)
		}
		add(id, l.T(caption), head, rows)
	}
	counts("workflows", "analytics.table.workflows", "analytics.col.workflow", r.ByWorkflow, true)
	counts("steps", "analytics.table.steps", "analytics.col.step", r.ByStep, true)
	counts("types", "analytics.table.types", "analytics.col.type", r.ByErrorType, false)
	counts("codes", "analytics.table.codes", "analytics.col.code", r.ByCode, false)
	counts("hosts", "analytics.table.hosts", "analytics.col.host", r.ByHost, true)
	rows = nil
	for _, g := range r.ByGroup {
		trend := num(g.Trend)
		if g.Trend > 0 {
			trend = "+" + trend
		}
		rows = append(rows, []string{l.Text(g.Title), num(g.Arrivals), num(g.Previous), trend})
	}
	add("groups", l.T("analytics.table.groups"), []string{l.T("analytics.col.group"), l.T("analytics.col.arrivals"), l.T("analytics.col.previous"), l.T("analytics.col.trend")}, rows)
	rows = nil
	ttr := r.TimeToResolution
	if ttr.Count > 0 {
		rows = append(rows, []string{l.T("analytics.ttr.all"), num(ttr.Count), durationPtr(l, ttr.Median), durationPtr(l, ttr.P90)})
	}
	for _, d := range ttr.ByWorkflow {
		rows = append(rows, []string{d.Label, num(d.Count), durationPtr(l, d.Median), durationPtr(l, d.P90)})
	}
	for _, d := range ttr.ByHow {
		rows = append(rows, []string{l.T("analytics.how." + d.Key), num(d.Count), durationPtr(l, d.Median), durationPtr(l, d.P90)})
	}
	add("ttr", l.T("analytics.table.ttr"), []string{"", l.T("analytics.col.closed"), l.T("analytics.col.median"), l.T("analytics.col.p90")}, rows)
	rows = nil
	for _, b := range r.BreakerOpenings {
		rows = append(rows, []string{b.Label, num(b.Openings), duration(l, b.SecondsOpen)})
	}
	add("breakers", l.T("analytics.table.breakers"), []string{l.T("analytics.col.breaker"), l.T("analytics.col.openings"), l.T("analytics.col.open")}, rows)
	return out
}

// charts are the page's charts: failures per day stacked by error type, arrivals against
// closures per day, and the retries that paid by attempt number.
func charts(l *i18n.Localizer, r *analytics.Report, tables map[string]pages.DataTable) []pages.Chart {
	var out []pages.Chart
	ft := tables["failures"]
	fc := pages.Chart{ID: "failures", Title: l.T("analytics.chart.failures"), Stacked: true, Table: ft,
		Desc: l.T("analytics.chart.failures.desc", "Total", r.Total, "From", r.From, "To", r.To)}
	for i, h := range ft.Head[2:] {
		fc.Legend = append(fc.Legend, pages.ChartSeries{Name: h, Class: "series-" + strconv.Itoa(i%10)})
	}
	for _, row := range ft.Rows {
		b := pages.ChartBar{Label: row[0][5:]}
		for _, v := range row[2:] {
			n, _ := strconv.Atoi(v)
			b.Values = append(b.Values, n)
		}
		fc.Bars = append(fc.Bars, b)
	}
	out = append(out, fc)
	arrivals, closures := 0, 0
	dc := pages.Chart{ID: "dlq", Title: l.T("analytics.chart.dlq"), Table: tables["dlq"],
		Legend: []pages.ChartSeries{{Name: l.T("analytics.col.arrivals"), Class: "series-0"}, {Name: l.T("analytics.col.closures"), Class: "series-1"}}}
	for _, d := range r.DLQ {
		arrivals += d.Arrivals
		closures += d.Closures
		dc.Bars = append(dc.Bars, pages.ChartBar{Label: d.Day[5:], Values: []int{d.Arrivals, d.Closures}})
	}
	dc.Desc = l.T("analytics.chart.dlq.desc", "Arrivals", arrivals, "Closures", closures)
	out = append(out, dc)
	rc := pages.Chart{ID: "retries", Title: l.T("analytics.chart.retries"), Table: tables["retries"], Desc: l.T("analytics.chart.retries.desc"),
		Legend: []pages.ChartSeries{{Name: l.T("analytics.col.attempts"), Class: "series-2"}, {Name: l.T("analytics.col.succeeded"), Class: "series-1"}}}
	for _, p := range r.RetriesThatPaid {
		rc.Bars = append(rc.Bars, pages.ChartBar{Label: "#" + strconv.Itoa(p.Attempt), Values: []int{p.Attempts, p.Succeeded}})
	}
	out = append(out, rc)
	return out
}
