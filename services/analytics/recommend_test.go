package analytics_test

import (
	"slices"
	"testing"
	"time"

	"lifeline/models"
	"lifeline/services/analytics"
)

// TestRecommendationThresholds: each rule fires over (or under) its threshold and not at it,
// and only on its minimum sample (StepErrorRateMinAttempts, RecoveryRateMinClosed, …).
func TestRecommendationThresholds(t *testing.T) {
	t.Parallel()
	q := analytics.Query{From: base, To: base}
	attempts := func(step string, failed, ok int, errType string) []models.AnalyticsAttempts {
		return []models.AnalyticsAttempts{
			{WorkflowID: "wf", StepID: step, Attempt: 1, ErrorType: errType, Attempts: failed},
			{WorkflowID: "wf", StepID: step, Attempt: 1, Attempts: ok, Succeeded: ok},
		}
	}
	// closures: replay items closed by a replay, then byHand by hand, taking secs in turn.
	closures := func(replay, byHand int, secs ...int64) models.AnalyticsFacts {
		f := models.AnalyticsFacts{DLQ: []models.AnalyticsDLQ{
			{Day: "2026-11-17", WorkflowID: "wf", How: models.ClosedByReplay, Closures: replay},
			{Day: "2026-11-17", WorkflowID: "wf", How: models.ClosedResolved, Closures: byHand},
		}}
		for i, s := range secs {
			how := models.ClosedByReplay
			if i >= replay {
				how = models.ClosedResolved
			}
			f.Resolution = append(f.Resolution, models.AnalyticsResolution{WorkflowID: "wf", How: how, Seconds: s, Closures: 1})
		}
		return f
	}
	ones := func(n int, v int64) []int64 { return slices.Repeat([]int64{v}, n) }
	retry := func(tries, succeeded int) models.AnalyticsFacts {
		return models.AnalyticsFacts{Attempts: []models.AnalyticsAttempts{
			{WorkflowID: "wf", StepID: "s", Attempt: 1, Attempts: 30, Succeeded: 30 - tries},
			{WorkflowID: "wf", StepID: "s", Attempt: 1, ErrorType: "timeout", Attempts: tries},
			{WorkflowID: "wf", StepID: "s", Attempt: 2, Attempts: succeeded, Succeeded: succeeded},
			{WorkflowID: "wf", StepID: "s", Attempt: 2, ErrorType: "timeout", Attempts: tries - succeeded}}}
	}
	cases := []struct {
		name  string
		facts models.AnalyticsFacts
		code  string
		fires bool
	}{
		{"error rate 5 %", models.AnalyticsFacts{Attempts: attempts("s", 5, 95, "timeout")}, analytics.AdviceStepErrorRate, false},
		{"error rate 5.1 %", models.AnalyticsFacts{Attempts: attempts("s", 51, 949, "timeout")}, analytics.AdviceStepErrorRate, true},
		{"error rate 10 % of 20 attempts", models.AnalyticsFacts{Attempts: attempts("s", 2, 18, "timeout")}, analytics.AdviceStepErrorRate, true},
		{"error rate 10.5 % of 19 attempts", models.AnalyticsFacts{Attempts: attempts("s", 2, 17, "timeout")}, analytics.AdviceStepErrorRate, false},
		{"recovery 80 % of 10", closures(8, 2), analytics.AdviceRecoveryRate, false},
		{"recovery 70 % of 10", closures(7, 3), analytics.AdviceRecoveryRate, true},
		{"recovery 67 % of 9", closures(6, 3), analytics.AdviceRecoveryRate, false},
		{"median 1 h of 10", closures(8, 2, append(ones(5, 10), ones(5, 3600)...)...), analytics.AdviceSlowResolution, false},
		{"median 1 h 1 s of 10", closures(8, 2, append(ones(4, 10), ones(6, 3601)...)...), analytics.AdviceSlowResolution, true},
		{"median 2 h of 9", closures(8, 1, ones(9, 7200)...), analytics.AdviceSlowResolution, false},
		{"rate limit 20 % of 20", models.AnalyticsFacts{Attempts: append(attempts("s", 4, 0, "rate_limit"), attempts("s", 16, 0, "timeout")...)}, analytics.AdviceRateLimit, false},
		{"rate limit 25 % of 20", models.AnalyticsFacts{Attempts: append(attempts("s", 5, 0, "rate_limit"), attempts("s", 15, 0, "timeout")...)}, analytics.AdviceRateLimit, true},
		{"rate limit 53 % of 19", models.AnalyticsFacts{Attempts: append(attempts("s", 10, 0, "rate_limit"), attempts("s", 9, 0, "timeout")...)}, analytics.AdviceRateLimit, false},
		{"a retry that succeeded once in 10", retry(10, 1), analytics.AdviceRetryNeverPays, false},
		{"a retry that never succeeded in 10", retry(10, 0), analytics.AdviceRetryNeverPays, true},
		{"a retry that never succeeded in 9", retry(9, 0), analytics.AdviceRetryNeverPays, false},
		{"validation not retried", models.AnalyticsFacts{Attempts: attempts("s", 1, 0, "validation")}, analytics.AdviceValidationRetried, false},
		{"validation retried", models.AnalyticsFacts{Attempts: []models.AnalyticsAttempts{
			{WorkflowID: "wf", StepID: "s", Attempt: 1, ErrorType: "validation", Attempts: 1, Retried: 1}}}, analytics.AdviceValidationRetried, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := analytics.Compute(analytics.Input{Query: q, Facts: &c.facts, Until: base.Add(24 * time.Hour)})
			fired := slices.ContainsFunc(r.Recommendations, func(a analytics.Advice) bool { return a.Code == c.code })
			if fired != c.fires {
				t.Errorf("%s fired %v, want %v (%+v)", c.code, fired, c.fires, r.Recommendations)
			}
			if c.code == analytics.AdviceRetryNeverPays && c.fires {
				// The 2nd attempt is the 1st retry: it never paid in 10 tries, so no retries.
				if a := r.Recommendations[len(r.Recommendations)-1]; a.Params["Retry"] != 1 || a.Params["MaxRetries"] != 0 || a.Figure != 10 {
					t.Errorf("retry never pays %+v", a)
				}
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
		// The same times as a histogram, in reverse and with each duration split in two
		// buckets, have the same percentile.
		var hist []analytics.Bucket
		for _, v := range slices.Backward(c.vals) {
			hist = append(hist, analytics.Bucket{Seconds: v, Count: 1}, analytics.Bucket{Seconds: v, Count: 0})
		}
		got = analytics.WeightedPercentile(hist, c.p)
		if (got == nil) != c.absent || (got != nil && *got != c.want) {
			t.Errorf("weighted p%d of %v = %v, want %d", c.p, c.vals, got, c.want)
		}
	}
}
