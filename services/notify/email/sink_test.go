package email

import (
	"testing"
	"time"
)

// TestSinkClosesAtOnce: a sink closed right after it started (before its server may have
// taken the listener) stops, instead of waiting for an Accept that never returns.
func TestSinkClosesAtOnce(t *testing.T) {
	for range 200 {
		s, err := StartSink("127.0.0.1:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("close: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not return")
		}
	}
}
