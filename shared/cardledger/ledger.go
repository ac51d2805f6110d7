package cardledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/runtwice/twice/shared/store"
)

// Counting says which attempts a cap counts.
type Counting int

// The two ways the networks count.
const (
	CountReattempts Counting = iota + 1 // every reattempt, whatever its result (Visa)
	CountDeclines                       // every decline, the original charge's included (Mastercard)
)

// Cap is one network excessive-attempt rule: at most Max counted attempts on the card in any
// window of length Per.
type Cap struct {
	Limit  string // the recovery planner's limit name: visa_30d, mastercard_24h, mastercard_30d
	Max    int
	Per    time.Duration
	Counts Counting
}

const day = 24 * time.Hour

// Caps returns a card network's caps (Stripe's card brand names). Mastercard's 35 in 30 days
// is per card and amount; counting every amount is the conservative reading. A network without
// published rules has none.
func Caps(network string) []Cap {
	switch network {
	case "visa":
		return []Cap{{Limit: "visa_30d", Max: 20, Per: 30 * day, Counts: CountReattempts}}
	case "mastercard":
		return []Cap{
			{Limit: "mastercard_24h", Max: 10, Per: 24 * time.Hour, Counts: CountDeclines},
			{Limit: "mastercard_30d", Max: 35, Per: 30 * day, Counts: CountDeclines},
		}
	}
	return nil
}

// Horizon is how long the ledger keeps an attempt: the longest cap window.
const Horizon = 30 * day

// MaxEntries bounds one card's item (DynamoDB items stop at 400 KB); the oldest go first. No
// cap counts more than 35, so the newest 200 always decide.
const MaxEntries = 200

// Results of an entry.
const (
	ResultPending   = "pending" // reserved before the provider call; counts as a decline
	ResultDeclined  = "declined"
	ResultSucceeded = "succeeded"
	ResultFailed    = "failed" // no answer from the issuer (a provider fault): not a decline
)

// Entry is one charge attempt on the card.
type Entry struct {
	// Key is the attempt's provider idempotency key: a repeated step records the same entry.
	Key       string    `json:"key"`
	At        time.Time `json:"at"`
	Result    string    `json:"outcome"`
	Reattempt bool      `json:"reattempt,omitempty"` // a retry of a declined charge (Visa counts these)
	PaymentID string    `json:"payment_id"`
	// Recovery names the recovery that made it (its key subject); "" for an original charge.
	Recovery string `json:"recovery,omitempty"`
}

// counted reports whether e counts towards a cap that counts this way.
func (e Entry) counted(c Counting) bool {
	if c == CountReattempts {
		return e.Reattempt
	}
	return e.Result == ResultDeclined || e.Result == ResultPending
}

// Card is one card's ledger.
type Card struct {
	Fingerprint string  `json:"fingerprint"`
	Brand       string  `json:"brand"`
	Entries     []Entry `json:"entries"`
	version     int64   // the stored version; 0: not stored yet
}

// ErrCapped is what an Update callback returns to commit nothing because a cap forbids the
// attempt; Update returns it unchanged.
var ErrCapped = errors.New("cardledger: a network cap forbids another attempt on this card now")

// ErrNoFingerprint is returned for an empty fingerprint: nothing can be counted.
var ErrNoFingerprint = errors.New("cardledger: no card fingerprint")

// maxField caps the outside strings a card stores (fingerprints, brands).
const maxField = 64

func capped(s string) string {
	if len(s) > maxField {
		return s[:maxField]
	}
	return s
}

func pk(fingerprint string) string { return "card#" + capped(fingerprint) }

// Get reads a card's ledger; a card never charged has an empty one.
func Get(ctx context.Context, st store.Store, table, fingerprint string) (Card, error) {
	if fingerprint == "" {
		return Card{}, ErrNoFingerprint
	}
	it, err := st.Get(ctx, table, pk(fingerprint), "")
	if errors.Is(err, store.ErrNotFound) {
		return Card{Fingerprint: capped(fingerprint)}, nil
	}
	if err != nil {
		return Card{}, err
	}
	var c Card
	if err := json.Unmarshal(it.Doc, &c); err != nil {
		return Card{}, fmt.Errorf("cardledger: stored card %s: %w", it.PK, err)
	}
	c.version = it.Version
	return c, nil
}

// Record adds e, or updates the entry with its key (a repeated step; a pending entry learning
// its result), and forgets entries older than Horizon before now.
func (c *Card) Record(e Entry, now time.Time) {
	e.At = e.At.UTC()
	found := false
	for i := range c.Entries {
		if c.Entries[i].Key == e.Key {
			if e.Result != ResultPending {
				c.Entries[i].Result = e.Result
			}
			found = true
			break
		}
	}
	if !found {
		c.Entries = append(c.Entries, e)
	}
	sort.SliceStable(c.Entries, func(i, j int) bool { return c.Entries[i].At.Before(c.Entries[j].At) })
	cut := now.Add(-Horizon)
	kept := c.Entries[:0]
	for _, x := range c.Entries {
		if x.At.After(cut) {
			kept = append(kept, x)
		}
	}
	c.Entries = kept
	if n := len(c.Entries); n > MaxEntries {
		c.Entries = c.Entries[n-MaxEntries:]
	}
}

// Has reports whether an attempt with the key is recorded.
func (c Card) Has(key string) bool {
	for _, e := range c.Entries {
		if e.Key == key {
			return true
		}
	}
	return false
}

// Allowance is how many more attempts the card may take now, and when the next one is
// allowed.
type Allowance struct {
	// Capped is false for a network without caps (Left and NextAt then mean nothing).
	Capped bool
	// Left is the number of attempts the tightest cap still allows now (0: none).
	Left int
	// NextAt is the first moment at or after now when one more attempt is allowed (now when
	// Left > 0).
	NextAt time.Time
	// Limit names the cap that leaves the fewest (or that blocks, when Left is 0).
	Limit string
}

// Allowance computes what the card's network caps allow at now. A Mastercard attempt is
// allowed while the counted declines leave room for it to decline too; a Visa attempt while
// the reattempts, it included, stay within 20.
func (c Card) Allowance(now time.Time) Allowance {
	a := Allowance{NextAt: now}
	for _, cp := range Caps(c.Brand) {
		var in []time.Time
		for _, e := range c.Entries {
			if e.counted(cp.Counts) && e.At.After(now.Add(-cp.Per)) {
				in = append(in, e.At)
			}
		}
		left := max(cp.Max-len(in), 0)
		if !a.Capped || left < a.Left {
			a.Left, a.Limit = left, cp.Limit
		}
		a.Capped = true
		if left == 0 {
			sort.Slice(in, func(i, j int) bool { return in[i].Before(in[j]) })
			// One attempt more needs len(in)-(Max-1) of them out of the window.
			next := in[len(in)-cp.Max].Add(cp.Per)
			if u := next.Truncate(time.Second); u.Before(next) {
				next = u.Add(time.Second)
			}
			if next.After(a.NextAt) {
				a.NextAt, a.Limit = next, cp.Limit
			}
		}
	}
	return a
}

// write is the card's put, conditioned on the version it was read at.
func (c Card) write(table string) (store.Write, error) {
	doc, err := json.Marshal(c)
	if err != nil {
		return store.Write{}, err
	}
	it := store.Item{PK: pk(c.Fingerprint), Doc: doc, Version: c.version + 1}
	if n := len(c.Entries); n > 0 {
		it.ExpiresAt = c.Entries[n-1].At.Add(Horizon + day).Unix() // the TTL forgets a card unused for a month
	}
	cond := store.Cond{Kind: store.VersionIs, Version: c.version}
	if c.version == 0 {
		cond = store.Cond{Kind: store.NotExists}
	}
	return store.Write{Table: table, Put: &it, Cond: cond}, nil
}

// updateTries bounds the re-reads of a card that another writer changed meanwhile; each waits
// a little longer, with full jitter, so that racing writers spread out.
const updateTries = 64

// backoff waits random(0, min(50ms, 1ms*2^try)) or until ctx ends.
func backoff(ctx context.Context, rng *rand.Rand, try int) error {
	ceiling := min(time.Millisecond<<min(try, 6), 50*time.Millisecond)
	t := time.NewTimer(time.Duration(rng.Int64N(int64(ceiling))))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Update reads the card, lets fn change it and name other writes of the same attempt, and
// commits the card and those writes in one transaction, conditioned on the card being as read.
// A concurrent change of the card re-reads and runs fn again. fn returning an error commits
// nothing and Update returns it (ErrCapped: a cap forbids the attempt). If one of fn's writes
// fails its condition, the *store.ConditionError is returned with its Index counting fn's
// writes from 0.
func Update(ctx context.Context, st store.Store, table, fingerprint, brand string, fn func(*Card) ([]store.Write, error)) error {
	if fingerprint == "" {
		return ErrNoFingerprint
	}
	var rng *rand.Rand // made on the first conflict only: the common path draws nothing
	for try := 0; ; try++ {
		c, err := Get(ctx, st, table, fingerprint)
		if err != nil {
			return err
		}
		if brand != "" {
			c.Brand = capped(brand)
		}
		before := c.version
		extra, err := fn(&c)
		if err != nil {
			return err
		}
		c.version = before
		w, err := c.write(table)
		if err != nil {
			return err
		}
		err = st.Transact(ctx, append([]store.Write{w}, extra...)...)
		var ce *store.ConditionError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ce) && ce.Index > 0:
			return &store.ConditionError{Index: ce.Index - 1, Old: ce.Old}
		case errors.As(err, &ce) || errors.Is(err, store.ErrConflict):
			if try+1 < updateTries {
				// The card moved on (or a concurrent transaction touched it): read again.
				if rng == nil {
					rng = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(try)))
				}
				if err := backoff(ctx, rng, try); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("cardledger: card %s kept changing: %w", capped(fingerprint), store.ErrConflict)
		}
		return err
	}
}
