package analytics_test

import (
	"slices"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/services/analytics"
)

// TestRecommendationThresholds: each rule fires over (or under) its threshold and not at it.
func TestRecommendationThresholds(t *testing.T) {
	t.Parallel()
	day := "2026-11-17"
	q := analytics.Query{From: base, To: base}
	attempts := func(step string, failed, ok int, errType string) []models.AnalyticsAttempts {
		return []models.AnalyticsAttempts{
			{Day: day, WorkflowID: "wf", StepID: step, Attempt: 1, ErrorType: errType, Attempts: failed},
			{Day: day, WorkflowID: "wf", StepID: step, Attempt: 1, Attempts: ok, Succeeded: ok},
		}
	}
	closures := func(replay, byHand int, secs ...int64) []models.AnalyticsDLQ {
		return []models.AnalyticsDLQ{
			{Day: day, WorkflowID: "wf", StepID: "s", How: models.ClosedByReplay, Closures: replay, Seconds: secs[:replay]},
			{Day: day, WorkflowID: "wf", StepID: "s", How: models.ClosedResolved, Closures: byHand, Seconds: secs[replay:]},
		}
	}
	cases := []struct {
		name  string
		facts models.AnalyticsFacts
		code  string
		fires bool
	}{
		{"error rate 5 %", models.AnalyticsFacts{Attempts: attempts("s", 5, 95, "timeout")}, analytics.AdviceStepErrorRate, false},
		{"error rate 5.1 %", models.AnalyticsFacts{Attempts: attempts("s", 51, 949, "timeout")}, analytics.AdviceStepErrorRate, true},
		{"recovery 80 %", models.AnalyticsFacts{DLQ: closures(4, 1, 1, 1, 1, 1, 1)}, analytics.AdviceRecoveryRate, false},
		{"recovery 75 %", models.AnalyticsFacts{DLQ: closures(3, 1, 1, 1, 1, 1)}, analytics.AdviceRecoveryRate, true},
		{"median 1 h", models.AnalyticsFacts{DLQ: closures(1, 2, 10, 3600, 9000)}, analytics.AdviceSlowResolution, false},
		{"median 1 h 1 s", models.AnalyticsFacts{DLQ: closures(1, 2, 10, 3601, 9000)}, analytics.AdviceSlowResolution, true},
		{"rate limit 20 %", models.AnalyticsFacts{Attempts: append(attempts("s", 1, 0, "rate_limit"), attempts("s", 4, 0, "timeout")...)}, analytics.AdviceRateLimit, false},
		{"rate limit 25 %", models.AnalyticsFacts{Attempts: append(attempts("s", 1, 0, "rate_limit"), attempts("s", 3, 0, "timeout")...)}, analytics.AdviceRateLimit, true},
		{"a retry that succeeded once", models.AnalyticsFacts{Attempts: []models.AnalyticsAttempts{
			{Day: day, WorkflowID: "wf", StepID: "s", Attempt: 1, ErrorType: "timeout", Attempts: 10},
			{Day: day, WorkflowID: "wf", StepID: "s", Attempt: 2, Attempts: 1, Succeeded: 1},
			{Day: day, WorkflowID: "wf", StepID: "s", Attempt: 2, ErrorType: "timeout", Attempts: 9}}}, analytics.AdviceRetryNeverPays, false},
		{"a retry that never succeeded", models.AnalyticsFacts{Attempts: []models.AnalyticsAttempts{
			{Day: day, WorkflowID: "wf", StepID: "s", Attempt: 1, Attempts: 1, Succeeded: 1},
			{Day: day, WorkflowID: "wf", StepID: "s", Attempt: 2, ErrorType: "timeout", Attempts: 9}}}, analytics.AdviceRetryNeverPays, true},
		{"validation not retried", models.AnalyticsFacts{Attempts: attempts("s", 1, 0, "validation")}, analytics.AdviceValidationRetried, false},
		{"validation retried", models.AnalyticsFacts{Attempts: []models.AnalyticsAttempts{
			{Day: day, WorkflowID: "wf", StepID: "s", Attempt: 1, ErrorType: "validation", Attempts: 1, Retried: 1}}}, analytics.AdviceValidationRetried, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := analytics.Compute(analytics.Input{Query: q, Facts: &c.facts, Until: base.Add(24 * time.Hour)})
			fired := slices.ContainsFunc(r.Recommendations, func(a analytics.Advice) bool { return a.Code == c.code })
			if fired != c.fires {
				t.Errorf("%s fired %v, want %v (%+v)", c.code, fired, c.fires, r.Recommendations)
			}
		})
	}
}

// TestPercentile: nearest rank, ceil(p/100 · n).
func TestPercentile(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		vals   []int64
		p      int
		want   int64
		absent bool
	}{
		{nil, 50, 0, true},
		{[]int64{7}, 50, 7, false},
		{[]int64{7}, 90, 7, false},
		{[]int64{1, 2}, 50, 1, false},
		{[]int64{1, 2, 3}, 50, 2, false},
		{[]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9, false},
		{[]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 90, 10, false},
		{[]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 50, 5, false},
	} {
		got := analytics.Percentile(c.vals, c.p)
		if (got == nil) != c.absent || (got != nil && *got != c.want) {
			t.Errorf("p%d of %v = %v, want %d", c.p, c.vals, got, c.want)
		}
	}
}
