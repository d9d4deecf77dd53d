package engine

import (
	"sync"
	"time"
)

// breakerCacheTTL is how long this process trusts a closed breaker's state without reading it.
const breakerCacheTTL = time.Second

// breakerCache remembers the closed breakers this process read, for breakerCacheTTL: a
// closed breaker then costs the step path no database work.
type breakerCache struct {
	mu sync.Mutex
	m  map[string]cachedBreaker
}

type cachedBreaker struct {
	id string
	at time.Time
	// forgotten: a transition of this breaker is being committed; until at+breakerCacheTTL
	// its state is read from the database every time and not cached (a read racing the
	// commit would see the old, closed state).
	forgotten bool
}

func (c *breakerCache) closed(key string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[key]
	if !ok || b.forgotten || time.Since(b.at) > breakerCacheTTL {
		return "", false
	}
	return b.id, true
}

func (c *breakerCache) set(key, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.m[key]; ok && b.forgotten && time.Since(b.at) <= breakerCacheTTL {
		return
	}
	if c.m == nil || len(c.m) > 10_000 {
		c.m = map[string]cachedBreaker{}
	}
	c.m[key] = cachedBreaker{id: id, at: time.Now()}
}

// forget drops a breaker's cached state when a transaction changes it, and keeps it out of
// the cache for breakerCacheTTL: long enough for that transaction to commit.
func (c *breakerCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedBreaker{}
	}
	c.m[key] = cachedBreaker{at: time.Now(), forgotten: true}
}
