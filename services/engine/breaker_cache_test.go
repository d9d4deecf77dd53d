package engine

import (
	"testing"
	"time"
)

// The closed-breaker cache: a transition being committed keeps the breaker out of the cache
// for a TTL, so a read racing that commit (it sees the old, closed state) is not cached.
func TestBreakerCache(t *testing.T) {
	var c breakerCache
	if _, ok := c.closed("org k"); ok {
		t.Fatal("an empty cache answered")
	}
	c.set("org k", "b1")
	if id, ok := c.closed("org k"); !ok || id != "b1" {
		t.Fatalf("cached: %q %v", id, ok)
	}
	if _, ok := c.closed("other k"); ok {
		t.Fatal("another organization's key answered")
	}
	c.forget("org k")
	if _, ok := c.closed("org k"); ok {
		t.Fatal("answered after forget")
	}
	c.set("org k", "b1") // a read that raced the transition's commit
	if _, ok := c.closed("org k"); ok {
		t.Fatal("cached the state read while a transition was being committed")
	}
	// Once the TTL has passed, the state read is cached again.
	c.m["org k"] = cachedBreaker{at: time.Now().Add(-2 * breakerCacheTTL), forgotten: true}
	c.set("org k", "b1")
	if id, ok := c.closed("org k"); !ok || id != "b1" {
		t.Fatalf("not cached after the TTL: %q %v", id, ok)
	}
	// A cached state expires after the TTL.
	c.m["org k"] = cachedBreaker{id: "b1", at: time.Now().Add(-2 * breakerCacheTTL)}
	if _, ok := c.closed("org k"); ok {
		t.Fatal("answered past the TTL")
	}
}
