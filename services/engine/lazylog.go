package engine

import (
	"context"
	"log/slog"
	"sync"
)

// lazyAttrs is a handler that adds its attributes to the handler below only when something
// is logged through it: slog's With formats them at once, which every step paid though a
// step that succeeds logs nothing at the usual levels.
type lazyAttrs struct {
	next  slog.Handler
	attrs []any
	once  sync.Once
	h     slog.Handler
}

// lazyWith is log.With(args...), its attributes formatted at the first record logged.
func lazyWith(log *slog.Logger, args ...any) *slog.Logger {
	return slog.New(&lazyAttrs{next: log.Handler(), attrs: args})
}

func (l *lazyAttrs) handler() slog.Handler {
	l.once.Do(func() { l.h = slog.New(l.next).With(l.attrs...).Handler() })
	return l.h
}

func (l *lazyAttrs) Enabled(ctx context.Context, level slog.Level) bool {
	return l.next.Enabled(ctx, level)
}

func (l *lazyAttrs) Handle(ctx context.Context, r slog.Record) error {
	return l.handler().Handle(ctx, r)
}

func (l *lazyAttrs) WithAttrs(attrs []slog.Attr) slog.Handler { return l.handler().WithAttrs(attrs) }

func (l *lazyAttrs) WithGroup(name string) slog.Handler { return l.handler().WithGroup(name) }
