package attempts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/store"
)

var t0 = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

func openStore(t testing.TB) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "twice.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newLog(t testing.TB, cfg Log, c *clock.Fake) (*Log, store.Store) {
	t.Helper()
	s := openStore(t)
	cfg.Store, cfg.Now = s, c.Now
	l, err := NewLog(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l, s
}

func TestRecordLookup(t *testing.T) {
	c := clock.NewFake(t0)
	l, _ := newLog(t, Log{PageSize: 2}, c)
	ctx := context.Background()
	// Three calls for one payment, a webhook for it, and an unrelated call; recorded out of
	// order to show the lookup orders by StartedAt, not by arrival.
	recs := []Attempt{
		{ID: "a2", StartedAt: t0.Add(2 * time.Second), PaymentID: "pay_1", IdempotencyKey: "k1", Operation: "payment_intents.create", Status: 500},
		{ID: "a1", StartedAt: t0.Add(1 * time.Second), PaymentID: "pay_1", IdempotencyKey: "k1", Operation: "payment_intents.create"},
		{ID: "a3", StartedAt: t0.Add(3*time.Second + 500*time.Millisecond), PaymentID: "pay_1", IdempotencyKey: "k1", Operation: "payment_intents.create", Status: 200},
		{ID: "w1", StartedAt: t0.Add(3 * time.Second), PaymentID: "pay_1", EventID: "evt_1", Direction: Inbound},
		{ID: "x1", StartedAt: t0.Add(4 * time.Second), PaymentID: "pay_2", IdempotencyKey: "k2"},
	}
	for _, a := range recs {
		if err := l.Record(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	tests := map[string]struct {
		by    By
		value string
		want  []string
	}{
		"payment newest first across pages": {ByPaymentID, "pay_1", []string{"a3", "w1", "a2", "a1"}},
		"idempotency key":                   {ByIdempotencyKey, "k1", []string{"a3", "a2", "a1"}},
		"event":                             {ByEventID, "evt_1", []string{"w1"}},
		"nothing recorded":                  {ByEventID, "evt_404", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			cursor, pages := "", 0
			for {
				p, err := l.Lookup(ctx, tc.by, tc.value, cursor)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				if len(p.Attempts) > 2 {
					t.Fatalf("page of %d, page size 2", len(p.Attempts))
				}
				for _, a := range p.Attempts {
					got = append(got, a.ID)
				}
				if cursor = p.Cursor; cursor == "" || pages > 10 {
					break
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}

	a, err := l.Get(ctx, "a2")
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != 500 || !a.StartedAt.Equal(t0.Add(2*time.Second)) || a.Operation != "payment_intents.create" {
		t.Errorf("Get a2 = %+v", a)
	}
	if _, err := l.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get missing: %v", err)
	}
}

func TestRecordStoresRedactedCappedWithTTL(t *testing.T) {
	c := clock.NewFake(t0)
	l, s := newLog(t, Log{BodyCap: 64, Retention: 48 * time.Hour}, c)
	ctx := context.Background()
	body := "card[number]=4242424242424242&card[cvc]=123&" + strings.Repeat("metadata[a]=b&", 20)
	err := l.Record(ctx, Attempt{
		ID:            "a1",
		PaymentID:     "pay_1",
		RequestHeader: map[string]string{"Authorization": "Bearer sk_live_abc", "Content-Type": "application/x-www-form-urlencoded"},
		RequestBody:   body,
		StartedAt:     t0.In(time.FixedZone("X", 3600)),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []store.Key{{PK: "att#a1", SK: "attempt"}, {PK: indexPK(ByPaymentID, "", "pay_1"), SK: "2026-11-29T08:00:00.000000000Z#a1"}} {
		it, err := s.Get(ctx, Table, key.PK, key.SK)
		if err != nil {
			t.Fatalf("%s: %v", key.PK, err)
		}
		if want := t0.Add(48 * time.Hour).Unix(); it.ExpiresAt != want {
			t.Errorf("%s expires %d, want %d", key.PK, it.ExpiresAt, want)
		}
		doc := string(it.Doc)
		for _, secret := range []string{"4242424242424242", "sk_live_abc", "cvc]=123"} {
			if strings.Contains(doc, secret) {
				t.Errorf("%s stored %q: %s", key.PK, secret, doc)
			}
		}
	}
	a, err := l.Get(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.RequestBody) > 64 || !a.RequestTruncated || a.RequestBytes != len(body) {
		t.Errorf("body %d bytes truncated %v of %d", len(a.RequestBody), a.RequestTruncated, a.RequestBytes)
	}
	if !strings.HasPrefix(a.RequestBody, "card[number]=[card+****4242]&card[cvc]=[redacted]&") {
		t.Errorf("body %q", a.RequestBody)
	}

	// Past retention the store may still hold it, but the log no longer answers with it.
	c.Advance(48*time.Hour + time.Second)
	if _, err := l.Get(ctx, "a1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after retention: %v", err)
	}
	p, err := l.Lookup(ctx, ByPaymentID, "pay_1", "")
	if err != nil || len(p.Attempts) != 0 {
		t.Errorf("Lookup after retention: %v %v", p.Attempts, err)
	}
}

func TestRecordIDs(t *testing.T) {
	c := clock.NewFake(t0)
	l, s := newLog(t, Log{}, c)
	ctx := context.Background()
	// The clock stands still: ids must still differ, from the counter.
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() { errs <- l.Record(ctx, Attempt{PaymentID: "pay_1"}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	all, err := NewLog(Log{Store: s, PageSize: 100, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	p, err := all.Lookup(ctx, ByPaymentID, "pay_1", "")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range p.Attempts {
		if !strings.HasPrefix(a.ID, "att_") || seen[a.ID] {
			t.Errorf("id %q (seen before: %v)", a.ID, seen[a.ID])
		}
		seen[a.ID] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct ids, want %d", len(seen), n)
	}

	// Recording an attempt again (a retried Record) stores it once.
	again := Attempt{ID: "att_again", PaymentID: "pay_9", StartedAt: t0}
	for range 2 {
		if err := l.Record(ctx, again); err != nil {
			t.Fatal(err)
		}
	}
	if p, _ := l.Lookup(ctx, ByPaymentID, "pay_9", ""); len(p.Attempts) != 1 {
		t.Errorf("an attempt recorded twice is listed %d times", len(p.Attempts))
	}

	ids := NewIDs(c.Now)
	if a, b := ids(), ids(); a == b {
		t.Errorf("NewIDs repeated %q", a)
	}
}

func TestLookupInvalid(t *testing.T) {
	l, _ := newLog(t, Log{}, clock.NewFake(t0))
	tests := map[string]struct {
		by    By
		value string
	}{
		"unknown by":  {By("customer"), "cus_1"},
		"empty value": {ByPaymentID, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := l.Lookup(context.Background(), tc.by, tc.value, ""); !errors.Is(err, ErrInvalid) {
				t.Errorf("got %v, want ErrInvalid", err)
			}
		})
	}
}

// A key with control characters (a NUL is not a store key) is stored and found with them
// replaced, so an attempt that carries one is still recorded.
func TestControlCharactersInKeys(t *testing.T) {
	l, _ := newLog(t, Log{}, clock.NewFake(t0))
	ctx := context.Background()
	if err := l.Record(ctx, Attempt{Direction: Inbound, PaymentID: "a\x00b"}); err != nil {
		t.Fatal(err)
	}
	page, err := l.Lookup(ctx, ByPaymentID, "a\x00b", "")
	if err != nil || len(page.Attempts) != 1 || page.Attempts[0].PaymentID != "a?b" {
		t.Fatalf("%v %+v", err, page)
	}
}

func TestNewLogConfig(t *testing.T) {
	tests := map[string]struct {
		cfg Log
		ok  bool
	}{
		"defaults":         {Log{}, true},
		"short retention":  {Log{Retention: time.Minute}, false},
		"negative cap":     {Log{BodyCap: -1}, false},
		"cap over max":     {Log{BodyCap: MaxBodyCap + 1}, false},
		"page over 100":    {Log{PageSize: 101}, false},
		"custom retention": {Log{Retention: 90 * 24 * time.Hour}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := NewLog(tc.cfg)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConfig)) {
				t.Errorf("err = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

type failingRecorder struct{ err error }

func (f failingRecorder) Record(context.Context, Attempt) error { return f.err }

func TestBestEffort(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	rec := BestEffort(failingRecorder{errors.New("store down; key sk_live_leak")}, logger)
	rec(context.Background(), Attempt{
		ID: "a1", PaymentID: "pay_1", Provider: "stripe",
		RequestBody:   "card[number]=4242424242424242",
		ResponseBody:  `{"secret_body":"x"}`,
		RequestHeader: map[string]string{"Authorization": "Bearer sk_live_hdr"},
	})
	out := buf.String()
	for _, want := range []string{`"attempt_id":"a1"`, `"payment_id":"pay_1"`, "store down", `"level":"ERROR"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s: %s", want, out)
		}
	}
	for _, never := range []string{"4242", "secret_body", "sk_live_hdr", "sk_live_leak"} {
		if strings.Contains(out, never) {
			t.Errorf("log contains %s: %s", never, out)
		}
	}
	buf.Reset()
	BestEffort(failingRecorder{}, logger)(context.Background(), Attempt{ID: "ok"})
	if buf.Len() != 0 {
		t.Errorf("logged a success: %s", buf.String())
	}
}

// TestLookupMarksReplays: a lookup's summaries carry no headers, so an answer given from an
// idempotency record (Idempotent-Replayed: true) is marked on the summary itself.
func TestLookupMarksReplays(t *testing.T) {
	l, _ := newLog(t, Log{}, clock.NewFake(t0))
	ctx := context.Background()
	for i, replayed := range []bool{false, true} {
		a := Attempt{ID: fmt.Sprintf("att_r%d", i), Direction: Inbound, Provider: "api", Method: "POST", Path: "/payments",
			Status: 201, StartedAt: t0.Add(time.Duration(i) * time.Second), PaymentID: "pay_r", Result: ResultOK,
			ResponseHeader: map[string]string{"content-type": "application/json"}}
		if replayed {
			a.ResponseHeader["idempotent-replayed"] = "true"
		}
		if err := l.Record(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	page, err := l.Lookup(ctx, ByPaymentID, "pay_r", "")
	if err != nil || len(page.Attempts) != 2 {
		t.Fatalf("lookup %+v %v", page, err)
	}
	// Newest first: the replay, then the first answer.
	if !page.Attempts[0].IsReplay() || page.Attempts[1].IsReplay() || page.Attempts[0].ResponseHeader != nil {
		t.Fatalf("replayed: %v, %v", page.Attempts[0].Replayed, page.Attempts[1].Replayed)
	}
}

// TestReplayIsFiledUnderItsKeyAlone: an exchange answered from an idempotency record is one
// summary under the caller's key (in its scope), redacted like every other field, with no
// headers, no bodies, no whole attempt and no other lookup; the key's first exchange is stored
// whole and under every key it has.
func TestReplayIsFiledUnderItsKeyAlone(t *testing.T) {
	l, _ := newLog(t, Log{}, clock.NewFake(t0))
	ctx := context.Background()
	const key = "4000000000000002" // a caller's key that looks like a card number
	for i, replayed := range []bool{false, true} {
		a := Attempt{ID: fmt.Sprintf("att_k%d", i), Direction: Inbound, Provider: "api", Operation: "payments.create",
			Method: "POST", Path: "/payments", Status: 201, StartedAt: t0.Add(time.Duration(i) * time.Second),
			Scope: "merchant-a", IdempotencyKey: key, PaymentID: "pay_k", ProviderPaymentID: "pi_k", Result: ResultOK,
			RequestBody: `{"amount":2000}`, ResponseBody: `{"id":"pay_k"}`, Replayed: replayed,
			RequestHeader: map[string]string{"authorization": "Bearer sk_live_123"}}
		if err := l.Record(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	page, err := l.LookupKey(ctx, "merchant-a", key, "")
	if err != nil || len(page.Attempts) != 2 {
		t.Fatalf("by key: %+v %v", page, err)
	}
	replay := page.Attempts[0]
	if !replay.IsReplay() || replay.ID != "att_k1" || replay.Status != 201 || replay.RequestBody != "" ||
		replay.ResponseBody != "" || replay.RequestHeader != nil || strings.Contains(replay.IdempotencyKey, key) {
		t.Fatalf("the replay's summary: %+v", replay)
	}
	if other, _ := l.LookupKey(ctx, "merchant-b", key, ""); len(other.Attempts) != 0 {
		t.Fatalf("another scope's lookup found %d", len(other.Attempts))
	}
	for _, by := range []By{ByPaymentID, ByProviderPaymentID} {
		v := map[By]string{ByPaymentID: "pay_k", ByProviderPaymentID: "pi_k"}[by]
		if page, err := l.Lookup(ctx, by, v, ""); err != nil || len(page.Attempts) != 1 || page.Attempts[0].ID != "att_k0" {
			t.Fatalf("by %s: %+v %v, want the first exchange alone", by, page, err)
		}
	}
	if _, err := l.Get(ctx, "att_k1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a replay stored whole: %v", err)
	}
	if first, err := l.Get(ctx, "att_k0"); err != nil || first.RequestBody == "" {
		t.Fatalf("the first exchange: %+v %v", first, err)
	}
}
