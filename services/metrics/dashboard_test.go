package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"lifeline/services/metrics"
)

// TestDashboardNames: the Grafana dashboard (deploy/grafana/lifeline.json) queries only
// metrics Lifeline exports, and shows each of them.
func TestDashboardNames(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/grafana/lifeline.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{"lifeline_http_requests_total": true, "lifeline_http_request_duration_seconds": true}
	for _, n := range []string{metrics.NameAttempts, metrics.NameRetries, metrics.NameDLQMoves, metrics.NameReplays, metrics.NameDuration,
		metrics.NamePending, metrics.NameBreaker, metrics.NameDeliveries, metrics.NameQueueDepth, metrics.NameJobWait, metrics.NameJobRun} {
		ours[n] = true
	}
	shown := map[string]bool{}
	name := regexp.MustCompile(`\b(?:workflow|lifeline)_[a-z_]+`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				n = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")
				if !ours[n] {
					t.Errorf("panel %q queries %s, which Lifeline does not export", p.Title, n)
				}
				shown[n] = true
			}
		}
	}
	for n := range ours {
		if !shown[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
}
