package idempotency

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/runtwice/twice/shared/store"
)

// TestPropertyOneEffectPerKey drives random interleavings of callers that acquire, crash,
// release and complete, with clock jumps past lock expiry, and checks the two promises: no key
// ever has two committed effects, and every replay returns the first stored response.
func TestPropertyOneEffectPerKey(t *testing.T) {
	for name, mk := range storeMakers {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			iteration := 0
			rapid.Check(t, func(rt *rapid.T) {
				iteration++
				m := &lifecycleModel{s: s, scope: fmt.Sprintf("it%d", iteration), clock: newClock(),
					leases: map[int]*Lease{}, leaseKey: map[int]string{}, committed: map[string]string{}, pending: map[string]bool{}}
				k, err := NewKeeper(Keeper{Store: s, Now: m.clock.Now, Log: quiet})
				if err != nil {
					rt.Fatal(err)
				}
				m.k = k
				rt.Repeat(map[string]func(*rapid.T){
					"acquire":  m.acquire,
					"complete": m.complete,
					"release":  m.release,
					"pend":     m.pend,
					"crash":    m.crash,
					"advance":  m.advance,
					"":         m.check,
				})
			})
		})
	}
}

type lifecycleModel struct {
	s         store.Store
	k         *Keeper
	scope     string
	clock     *fakeClock
	attempt   int
	leases    map[int]*Lease    // caller -> lease it believes it holds
	leaseKey  map[int]string    // caller -> key of that lease
	committed map[string]string // key -> body of the one committed response
	pending   map[string]bool   // keys left pending (an unknown outcome), never to run afresh
}

var modelKeys = []string{"a", "b", "c"}

func (m *lifecycleModel) acquire(t *rapid.T) {
	caller := rapid.IntRange(0, 4).Draw(t, "caller")
	key := rapid.SampledFrom(modelKeys).Draw(t, "key")
	out, err := m.k.Acquire(context.Background(), m.scope, key, FingerprintBytes([]byte(key)))
	if err != nil {
		t.Fatal(err)
	}
	switch out.Kind {
	case New:
		if body, done := m.committed[key]; done {
			t.Fatalf("key %s acquired anew although it completed with %s within retention", key, body)
		}
		if m.pending[key] {
			t.Fatalf("pending key %s acquired anew: it would run again from scratch", key)
		}
		m.leases[caller], m.leaseKey[caller] = out.Lease, key
	case Pending:
		if !m.pending[key] {
			t.Fatalf("key %s reported pending, never pended", key)
		}
		if string(out.Request) != `{"key":"`+key+`"}` {
			t.Fatalf("pending key %s lost its request: %q", key, out.Request)
		}
		if out.Resolving {
			return
		}
		l, err := m.k.Resume(context.Background(), out)
		if errors.Is(err, ErrLeaseLost) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		m.leases[caller], m.leaseKey[caller] = l, key
	case Replay:
		want, done := m.committed[key]
		if !done {
			t.Fatalf("replay of %s, which never completed", key)
		}
		if string(out.Response.Body) != want {
			t.Fatalf("replay of %s returned %s, first response was %s", key, out.Response.Body, want)
		}
	case InProgress:
		if _, done := m.committed[key]; done {
			t.Fatalf("completed key %s reported in progress", key)
		}
		if m.pending[key] {
			t.Fatalf("pending key %s reported in progress", key)
		}
	case Mismatch:
		t.Fatalf("mismatch on an identical request")
	}
}

func (m *lifecycleModel) complete(t *rapid.T) {
	caller := rapid.IntRange(0, 4).Draw(t, "caller")
	l, ok := m.leases[caller]
	if !ok {
		t.Skip("caller holds no lease")
	}
	key := m.leaseKey[caller]
	m.attempt++
	body := fmt.Sprintf(`"attempt-%d"`, m.attempt)
	// The effect is a distinct item per attempt, so a second committed effect for a key would
	// show up as a second item in its partition.
	effect := store.Write{Table: "effects", Put: &store.Item{PK: m.scope + "/" + key, SK: fmt.Sprint(m.attempt), Doc: []byte(body)}}
	err := m.k.Complete(context.Background(), l, Response{Status: 201, Body: []byte(body)}, effect)
	delete(m.leases, caller)
	switch {
	case err == nil:
		if prev, done := m.committed[key]; done {
			t.Fatalf("key %s committed twice: %s then %s", key, prev, body)
		}
		m.committed[key] = body
		delete(m.pending, key)
	case errors.Is(err, ErrLeaseLost):
	default:
		t.Fatal(err)
	}
}

func (m *lifecycleModel) release(t *rapid.T) {
	caller := rapid.IntRange(0, 4).Draw(t, "caller")
	l, ok := m.leases[caller]
	if !ok {
		t.Skip("caller holds no lease")
	}
	delete(m.leases, caller)
	if err := m.k.Release(context.Background(), l); err != nil && !errors.Is(err, ErrLeaseLost) {
		t.Fatal(err)
	}
}

// pend leaves the lease's key pending, as an unknown outcome does.
func (m *lifecycleModel) pend(t *rapid.T) {
	caller := rapid.IntRange(0, 4).Draw(t, "caller")
	l, ok := m.leases[caller]
	if !ok {
		t.Skip("caller holds no lease")
	}
	key := m.leaseKey[caller]
	delete(m.leases, caller)
	err := m.k.Pend(context.Background(), l, Response{Status: 202, Body: []byte(`"pending"`)}, []byte(`{"key":"`+key+`"}`))
	switch {
	case err == nil:
		if _, done := m.committed[key]; done {
			t.Fatalf("completed key %s pended", key)
		}
		m.pending[key] = true
	case errors.Is(err, ErrLeaseLost):
	default:
		t.Fatal(err)
	}
}

// crash forgets a lease without releasing it, as a killed process would.
func (m *lifecycleModel) crash(t *rapid.T) {
	caller := rapid.IntRange(0, 4).Draw(t, "caller")
	delete(m.leases, caller)
}

func (m *lifecycleModel) advance(t *rapid.T) {
	// Up to a minute: often past the 30 s lock, never near the 7-day retention.
	m.clock.Advance(time.Duration(rapid.IntRange(0, 60).Draw(t, "seconds")) * time.Second)
}

func (m *lifecycleModel) check(t *rapid.T) {
	for _, key := range modelKeys {
		p, err := m.s.Query(context.Background(), store.Query{Table: "effects", PK: m.scope + "/" + key})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) > 1 {
			t.Fatalf("key %s has %d committed effects", key, len(p.Items))
		}
		if want, done := m.committed[key]; done && (len(p.Items) != 1 || string(p.Items[0].Doc) != want) {
			t.Fatalf("key %s: effect %v, committed response %s", key, p.Items, want)
		}
	}
}
