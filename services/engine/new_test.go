package engine

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"lifeline/models"
	"lifeline/models/modeltest"
	"lifeline/services/steps"
)

// TestNewWithoutQueuePanics: an engine built without a queue fails at construction, saying
// what is missing, not with a nil dereference at its first job.
func TestNewWithoutQueuePanics(t *testing.T) {
	t.Parallel()
	db := modeltest.New(t, models.SQLite)
	defer func() {
		r := recover()
		if msg, _ := r.(string); !strings.Contains(msg, "Config.Queue") {
			t.Fatalf("New without a queue: recovered %v, want a panic naming Config.Queue", r)
		}
	}()
	New(db, steps.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)), Config{})
}
