package engine

import (
	"bytes"
	"log/slog"
	"testing"
)

// lazyWith logs what With logs: the attributes on every record, before the record's own,
// through groups and further attributes; a disabled level logs nothing.
func TestLazyWithLogsWhatWithLogs(t *testing.T) {
	opts := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	var want, got bytes.Buffer
	logs := []*slog.Logger{
		slog.New(slog.NewTextHandler(&want, opts)).With("execution_id", "e1", "attempt", 2),
		lazyWith(slog.New(slog.NewTextHandler(&got, opts)), "execution_id", "e1", "attempt", 2),
	}
	for _, l := range logs {
		l.Debug("not logged at info", "x", 1)
		l.Info("step succeeded", "took", "5ms")
		l.With("more", true).WithGroup("g").Warn("handed back", "err", "boom")
	}
	if got.String() != want.String() || want.Len() == 0 {
		t.Fatalf("lazyWith logged\n%s\nWith logged\n%s", got.String(), want.String())
	}
}
