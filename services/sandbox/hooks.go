package sandbox

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Hooks stands in for Slack's and Microsoft Teams' incoming webhooks in the demo: POST
// /hooks/slack/{anything} answers 200 "ok" as Slack does, POST /hooks/teams/{anything}
// answers 202 as a Teams Workflows webhook does. It keeps the last maxHooks messages in
// memory, so a newcomer can see what Lifeline sent.
type Hooks struct {
	now  func() time.Time
	mu   sync.Mutex
	msgs []Hook
}

// Hook is one message a webhook received.
type Hook struct {
	At      time.Time
	Channel string // "slack" or "teams"
	Body    json.RawMessage
}

const maxHooks = 200

// serve answers a webhook post and records it; false when path is not a webhook's.
func (k *Hooks) serve(w http.ResponseWriter, r *http.Request, path string) bool {
	rest, ok := strings.CutPrefix(path, "/hooks/")
	if !ok {
		return false
	}
	channel, _, _ := strings.Cut(rest, "/")
	if channel != "slack" && channel != "teams" {
		return false
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method not allowed", nil)
		return true
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil || !json.Valid(raw) {
		http.Error(w, "invalid_payload", http.StatusBadRequest) // Slack's answer to a bad body
		return true
	}
	k.mu.Lock()
	k.msgs = append(k.msgs, Hook{At: k.now().UTC(), Channel: channel, Body: raw})
	if len(k.msgs) > maxHooks {
		k.msgs = k.msgs[len(k.msgs)-maxHooks:]
	}
	k.mu.Unlock()
	if channel == "teams" {
		w.WriteHeader(http.StatusAccepted)
		return true
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "ok")
	return true
}

// Received returns the messages received, newest first.
func (k *Hooks) Received() []Hook {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]Hook, len(k.msgs))
	for i, m := range k.msgs {
		out[len(k.msgs)-1-i] = m
	}
	return out
}
