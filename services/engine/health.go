package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"lifeline/models"
)

// Health knows whether the database answers. Whoever meets an unreachable database says so
// (Failed); the log says it once, not once per attempt per retry. While it is down, Watch
// asks the database every 250 ms; when it answers again the log says so once and the engine
// recovers at once (maintenance.recover) instead of waiting for leases and the reconciler.
type Health struct {
	db    *models.DB
	log   *slog.Logger
	every time.Duration

	mu    sync.Mutex
	down  bool
	since time.Time
	wake  chan struct{} // the database was found unreachable: start checking
	back  chan struct{} // the database answers again: recover
	onUp  func(context.Context)
}

func newHealth(db *models.DB, log *slog.Logger) *Health {
	return &Health{db: db, log: log, every: 250 * time.Millisecond, wake: make(chan struct{}, 1), back: make(chan struct{}, 1)}
}

// ErrUnreachable is Ready's answer while the database is known to be unreachable (the log
// has said so already).
var ErrUnreachable = errors.New("the database is unreachable")

// Ready answers /readyz: an error while the database is unreachable, nil when it answers.
func (h *Health) Ready(ctx context.Context) error {
	if h.Down() {
		return ErrUnreachable
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return h.Check(ctx)
}

// Down reports whether the database is known to be unreachable.
func (h *Health) Down() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down
}

// Failed notes err if it says the database is unreachable, and reports whether it did.
func (h *Health) Failed(err error) bool {
	if !models.Unavailable(err) {
		return false
	}
	h.mu.Lock()
	first := !h.down
	if first {
		h.down, h.since = true, time.Now()
	}
	h.mu.Unlock()
	if first {
		h.log.Error("the database is unreachable; finished steps keep their results and commit when it is back", "err", err)
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// Check asks the database now, and notes the answer. On SQLite it asks for the write lock,
// since a database that answers reads may still refuse writes.
func (h *Health) Check(ctx context.Context) error {
	if err := h.probe(ctx); err != nil {
		h.Failed(err)
		return err
	}
	h.up(ctx)
	return nil
}

// probe asks for the database's write lock (SQLite) or a connection that answers
// (PostgreSQL), and lets it go.
func (h *Health) probe(ctx context.Context) error {
	if h.db.Dialect != models.SQLite {
		return h.db.Conn(ctx).Exec("SELECT 1").Error
	}
	c, err := h.db.SQL.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	_, err = c.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	return err
}

// up notes that the database answered; Watch then runs the recovery.
func (h *Health) up(context.Context) {
	h.mu.Lock()
	was, since := h.down, h.since
	h.down = false
	h.mu.Unlock()
	if was {
		h.log.Info("the database is reachable again", "unreachable_for", time.Since(since).Round(time.Millisecond).String())
		select {
		case h.back <- struct{}{}:
		default:
		}
	}
}

// Watch checks the database every 250 ms while it is known to be down, and recovers when
// it is back, until ctx ends.
func (h *Health) Watch(ctx context.Context) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.back:
			if h.onUp != nil {
				h.onUp(ctx)
			}
			continue
		case <-h.wake:
		case <-t.C:
		}
		if !h.Down() {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = h.Check(cctx)
		cancel()
	}
}
