package idempotency

import (
	"container/list"
	"sync"
	"time"
)

// newCache returns a cache of up to n completed records (Keeper.CacheSize), nil for n <= 0.
//
// It is correct because a completed record never changes: it is only ever replaced once it has
// expired, and a cached entry expires with it (the record's own expires_at, read on the
// Keeper's clock). Only completed (final) records are cached; in-progress and pending keys are
// always read from the store, since they change.
//
// The trade-off: a cached replay is served without reading the store, so a record removed or
// edited out of band (by hand, or by restoring a backup) keeps replaying from this process until
// its expiry or eviction; each process (each Lambda execution environment) has its own cache,
// so it helps the repeats that reach the same environment, and it costs memory: up to n
// responses, bodies included. A repeat with a different request is still refused from the
// cache (Mismatch), as the fingerprint is cached with the response.
func newCache(n int) *cache {
	if n <= 0 {
		return nil
	}
	return &cache{max: n, items: make(map[string]*list.Element, n), lru: list.New()}
}

type cacheEntry struct {
	pk        string
	fp        Fingerprint
	resp      *Response
	expiresAt int64 // unix seconds, the record's expires_at; alive while now <= expiresAt
}

// cache is a bounded LRU of completed records.
type cache struct {
	mu    sync.Mutex
	max   int
	items map[string]*list.Element
	lru   *list.List
}

func (c *cache) get(pk string, now time.Time) (*cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[pk]
	if !ok {
		return nil, false
	}
	e := el.Value.(*cacheEntry)
	if e.expiresAt != 0 && e.expiresAt < now.Unix() {
		c.lru.Remove(el)
		delete(c.items, pk)
		return nil, false
	}
	c.lru.MoveToFront(el)
	return e, true
}

func (c *cache) put(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[e.pk]; ok {
		el.Value = e
		c.lru.MoveToFront(el)
		return
	}
	c.items[e.pk] = c.lru.PushFront(e)
	for c.lru.Len() > c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.items, old.Value.(*cacheEntry).pk)
	}
}

// Len is the number of cached records, for tests.
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
