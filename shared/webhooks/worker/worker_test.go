package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/webhooks"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// outboxMessages lists the follow-on messages the worker committed.
func outboxMessages(t *testing.T, s store.Store) []string {
	t.Helper()
	var ids []string
	for _, id := range []string{"recovery#pay_1#r1", "recovery#pay_2#r1"} {
		it, err := s.Get(context.Background(), outbox.Table, id, "")
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		m, err := outbox.Decode(it)
		if err != nil || m.Kind != payments.KindStartRecovery {
			t.Fatalf("outbox %s: %+v, %v", id, m, err)
		}
		ids = append(ids, m.ID)
	}
	return ids
}

func newWorker(t *testing.T) (*Worker, store.Store) {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &Worker{Applier: &payments.Applier{Store: s, Now: func() time.Time { return t0 }, Log: slog.New(slog.DiscardHandler),
		Classify: func(d provider.Decline) string { return "class-" + d.Code },
		Steer:    recovery.SteerMessages, Replan: recovery.ReplanMessages}}, s
}

// seed stores a pending payment as the API would have.
func seed(t *testing.T, s store.Store, id string) {
	t.Helper()
	p := payments.Payment{ID: id, Scope: "local", Status: provider.StatusPending, Amount: 2000, Currency: "usd",
		Customer: "cus_9", CreatedAt: t0.Add(-time.Hour), Version: payments.VersionAt(t0.Add(-time.Hour), provider.StatusPending)}
	w, _ := p.Put()
	if err := s.Transact(context.Background(), w); err != nil {
		t.Fatal(err)
	}
}

// stripeEvent builds a Stripe event body for payment pay (PaymentIntent pi).
func stripeEvent(id, typ string, created time.Time, pi, pay string, meta map[string]string) webhooks.Delivery {
	if meta == nil {
		meta = map[string]string{"twice_payment_id": pay}
	}
	obj := map[string]any{"id": pi, "object": "payment_intent", "amount": 2000, "currency": "usd", "customer": "cus_9", "metadata": meta}
	switch typ {
	case "payment_intent.payment_failed":
		obj["status"] = "requires_payment_method"
		obj["last_payment_error"] = map[string]any{"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds"}
	case "payment_intent.succeeded":
		obj["status"] = "succeeded"
	case "payment_intent.processing":
		obj["status"] = "processing"
	case "charge.refunded":
		obj = map[string]any{"id": "ch_" + pi, "object": "charge", "payment_intent": pi, "amount": 2000, "amount_refunded": 2000, "refunded": true, "metadata": map[string]string{}}
	}
	body, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "created": created.Unix(), "data": map[string]any{"object": obj}})
	return webhooks.Delivery{Provider: webhooks.ProviderStripe, EventID: id, Body: body, ReceivedAt: created}
}

func status(t *testing.T, s store.Store, id string) payments.Payment {
	t.Helper()
	p, err := payments.Get(context.Background(), s, id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFiveDeliveriesApplyOnce(t *testing.T) {
	w, s := newWorker(t)
	seed(t, s, "pay_1")
	d := stripeEvent("evt_1", "payment_intent.payment_failed", t0, "pi_1", "pay_1", nil)
	var got []payments.Effect
	for range 5 {
		o, err := w.Apply(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, o)
	}
	if fmt.Sprint(got) != "[applied duplicate duplicate duplicate duplicate]" {
		t.Fatalf("outcomes %v", got)
	}
	p := status(t, s, "pay_1")
	if p.Status != provider.StatusDeclined || p.Decline == nil || p.Decline.Code != "insufficient_funds" || p.DeclineClass != "class-insufficient_funds" {
		t.Fatalf("payment %+v", p)
	}
	// Recovery starts from one outbox message, committed with the state (and the first
	// delivery's dedupe records), whatever the redeliveries.
	if got := outboxMessages(t, s); fmt.Sprint(got) != "[recovery#pay_1#r1]" {
		t.Fatalf("outbox %v, want one recovery start", got)
	}
}

func TestShuffledDeliveriesEndAtTheNewestState(t *testing.T) {
	// A payment's history: processing, then succeeded a second later, then refunded; each sent
	// twice, and once more as a second Event object for the same change.
	history := []webhooks.Delivery{
		stripeEvent("evt_p", "payment_intent.processing", t0, "pi_2", "pay_2", nil),
		stripeEvent("evt_s", "payment_intent.succeeded", t0.Add(time.Second), "pi_2", "pay_2", nil),
		stripeEvent("evt_s2", "payment_intent.succeeded", t0.Add(time.Second), "pi_2", "pay_2", nil),
		stripeEvent("evt_r", "charge.refunded", t0.Add(2*time.Second), "pi_2", "pay_2", nil),
	}
	for seedN := range uint64(20) {
		t.Run(fmt.Sprint("shuffle", seedN), func(t *testing.T) {
			w, s := newWorker(t)
			seed(t, s, "pay_2")
			// The alias lets charge.refunded (no metadata) find the payment even if it comes first.
			if err := s.Transact(context.Background(), payments.AliasWrite("pi_2", "pay_2")); err != nil {
				t.Fatal(err)
			}
			deliveries := append(append([]webhooks.Delivery{}, history...), history...)
			rand.New(rand.NewPCG(seedN, 1)).Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })
			applied := map[string]int{}
			for _, d := range deliveries {
				o, err := w.Apply(context.Background(), d)
				if err != nil {
					t.Fatal(err)
				}
				if o == payments.Applied {
					applied[d.EventID]++
				}
			}
			for id, n := range applied {
				if n > 1 {
					t.Fatalf("%s applied %d times", id, n)
				}
			}
			if applied["evt_s"]+applied["evt_s2"] > 1 {
				t.Fatal("one change applied twice through two event objects")
			}
			if p := status(t, s, "pay_2"); p.Status != provider.StatusRefunded {
				t.Fatalf("final state %s, want refunded (order %v)", p.Status, ids(deliveries))
			}
		})
	}
}

func ids(ds []webhooks.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.EventID)
	}
	return out
}

func TestOlderEventIsIgnored(t *testing.T) {
	w, s := newWorker(t)
	seed(t, s, "pay_3")
	if o, _ := w.Apply(context.Background(), stripeEvent("evt_new", "payment_intent.succeeded", t0.Add(time.Second), "pi_3", "pay_3", nil)); o != payments.Applied {
		t.Fatal(o)
	}
	o, err := w.Apply(context.Background(), stripeEvent("evt_old", "payment_intent.processing", t0, "pi_3", "pay_3", nil))
	if err != nil || o != payments.Stale {
		t.Fatalf("%v %v", o, err)
	}
	if p := status(t, s, "pay_3"); p.Status != provider.StatusSucceeded {
		t.Fatalf("status %s", p.Status)
	}
	// The stale event is still deduped: its redelivery stops at the first check.
	if o, _ := w.Apply(context.Background(), stripeEvent("evt_old", "payment_intent.processing", t0, "pi_3", "pay_3", nil)); o != payments.Duplicate {
		t.Fatal(o)
	}
}

// failingStore fails the next n transactions the way a crash before commit would: nothing is
// written.
type failingStore struct {
	store.Store
	n int
}

func (f *failingStore) Transact(ctx context.Context, ws ...store.Write) error {
	if f.n > 0 {
		f.n--
		return errors.New("process killed before commit")
	}
	return f.Store.Transact(ctx, ws...)
}

func TestCrashBetweenDedupeAndApplyLosesNothing(t *testing.T) {
	w, s := newWorker(t)
	seed(t, s, "pay_4")
	w.Applier.Store = &failingStore{Store: s, n: 1}
	d := stripeEvent("evt_4", "payment_intent.succeeded", t0, "pi_4", "pay_4", nil)
	if err := w.Handle(context.Background(), message("m0", d)); err == nil {
		t.Fatal("a failed commit was acknowledged")
	}
	if _, err := s.Get(context.Background(), payments.EventsTable, "event#"+"stripe/evt_4", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("dedupe record committed without the state change: %v", err)
	}
	// Redelivery applies it once.
	if o, err := w.Apply(context.Background(), d); err != nil || o != payments.Applied {
		t.Fatalf("%v %v", o, err)
	}
	if o, _ := w.Apply(context.Background(), d); o != payments.Duplicate {
		t.Fatal(o)
	}
	if p := status(t, s, "pay_4"); p.Status != provider.StatusSucceeded {
		t.Fatal(p.Status)
	}
}

func message(id string, d webhooks.Delivery) queue.Message {
	b, _ := json.Marshal(d)
	return queue.Message{ID: id, Body: b, ReceiveCount: 1}
}

// Each message stands alone: a payment not stored yet and a body that is not JSON fail their
// own message; the good one is applied.
func TestEachMessageFailsAlone(t *testing.T) {
	w, s := newWorker(t)
	seed(t, s, "pay_5")
	msgs := []queue.Message{
		message("m0", stripeEvent("evt_ok", "payment_intent.succeeded", t0, "pi_5", "pay_5", nil)),
		message("m1", stripeEvent("evt_missing", "payment_intent.succeeded", t0, "pi_x", "pay_not_stored", nil)),
		{ID: "poison", Body: []byte("{not json")},
	}
	var failed []string
	for _, m := range msgs {
		if err := w.Handle(context.Background(), m); err != nil {
			failed = append(failed, m.ID)
		}
	}
	if fmt.Sprint(failed) != "[m1 poison]" {
		t.Fatalf("failures %v", failed)
	}
	if err := w.Handle(context.Background(), msgs[1]); !errors.Is(err, payments.ErrPaymentNotYet) {
		t.Fatalf("payment not stored yet: %v", err)
	}
	if p := status(t, s, "pay_5"); p.Status != provider.StatusSucceeded {
		t.Fatal("the good message was not applied")
	}
}

func TestEventsForPaymentsWeDoNotHaveYet(t *testing.T) {
	w, s := newWorker(t)
	// The API's request reached the provider but never committed: the event creates the payment.
	meta := map[string]string{"twice_payment_id": "pay_6", "twice_scope": "local"}
	if o, err := w.Apply(context.Background(), stripeEvent("evt_6", "payment_intent.succeeded", t0, "pi_6", "pay_6", meta)); err != nil || o != payments.Applied {
		t.Fatalf("%v %v", o, err)
	}
	if p := status(t, s, "pay_6"); p.Status != provider.StatusSucceeded || p.Scope != "local" || p.Amount != 2000 {
		t.Fatalf("%+v", p)
	}
	// A PaymentIntent not made through twice is recorded, not applied.
	if o, err := w.Apply(context.Background(), stripeEvent("evt_7", "payment_intent.succeeded", t0, "pi_7", "", map[string]string{})); err != nil || o != payments.Recorded {
		t.Fatalf("%v %v", o, err)
	}
}

// FuzzHandle feeds arbitrary queue message bodies: the worker never panics, and a body it cannot
// apply is that message's error, never one that fails the batch (sqsbatch.FailBatch).
func FuzzHandle(f *testing.F) {
	good, _ := json.Marshal(stripeEvent("evt_f", "payment_intent.succeeded", t0, "pi_f", "", map[string]string{}))
	for _, s := range []string{string(good), "", "{}", `{"provider":"stripe","body":"e30="}`, `{"provider":"nope"}`, "[1]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		w, _ := newWorker(t)
		err := w.Handle(context.Background(), queue.Message{ID: "m", Body: []byte(body)})
		var fb interface{ FailsBatch() bool }
		if errors.As(err, &fb) {
			t.Fatalf("batch error %v", err)
		}
	})
}

// A decline applied from a webhook keeps the card brand (Stripe sends the declined card in
// last_payment_error.payment_method), so the recovery plan applies that network's caps; an event
// without one keeps the brand the API's own write knew.
func TestWebhookDeclineKeepsTheCardBrand(t *testing.T) {
	cases := map[string]struct {
		eventBrand, storedBrand, want string
	}{
		"brand in the event":      {eventBrand: "mastercard", want: "mastercard"},
		"brand only from the API": {storedBrand: "visa", want: "visa"},
		"event wins":              {eventBrand: "amex", storedBrand: "visa", want: "amex"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w, s := newWorker(t)
			seed(t, s, "pay_1")
			p := status(t, s, "pay_1")
			if tc.storedBrand != "" {
				p.Decline = &provider.Decline{Code: "insufficient_funds", Network: tc.storedBrand}
				p.Version++
				pw, _ := p.Put()
				if err := s.Put(context.Background(), pw.Table, *pw.Put, store.Cond{}); err != nil {
					t.Fatal(err)
				}
			}
			d := stripeEvent("evt_b", "payment_intent.payment_failed", t0.Add(time.Second), "pi_1", "pay_1", nil)
			if tc.eventBrand != "" {
				var ev map[string]any
				_ = json.Unmarshal(d.Body, &ev)
				obj := ev["data"].(map[string]any)["object"].(map[string]any)
				obj["last_payment_error"].(map[string]any)["payment_method"] = map[string]any{"card": map[string]any{"brand": tc.eventBrand}}
				d.Body, _ = json.Marshal(ev)
			}
			if _, err := w.Apply(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			if got := status(t, s, "pay_1"); got.Decline == nil || got.Decline.Network != tc.want {
				t.Fatalf("decline %+v, want network %s", got.Decline, tc.want)
			}
		})
	}
}

// TestSuccessEndsADeclineWhateverItsVersion: a PaymentIntent that succeeded never declines
// again, so its success is applied over a decline stored with a later version (a writer whose
// clock ran ahead of the provider's); a decline older than the success stays ignored.
func TestSuccessEndsADeclineWhateverItsVersion(t *testing.T) {
	w, s := newWorker(t)
	seed(t, s, "pay_1")
	if o, err := w.Apply(context.Background(), stripeEvent("evt_f", "payment_intent.payment_failed", t0.Add(time.Hour), "pi_1", "pay_1", nil)); err != nil || o != payments.Applied {
		t.Fatalf("decline: %v %v", o, err)
	}
	o, err := w.Apply(context.Background(), stripeEvent("evt_s", "payment_intent.succeeded", t0, "pi_1", "pay_1", nil))
	if err != nil || o != payments.Applied {
		t.Fatalf("success: %v %v", o, err)
	}
	if p := status(t, s, "pay_1"); p.Status != provider.StatusSucceeded || p.Decline != nil {
		t.Fatalf("status %s decline %+v, want succeeded", p.Status, p.Decline)
	}
	if o, err := w.Apply(context.Background(), stripeEvent("evt_f0", "payment_intent.payment_failed", t0.Add(-time.Minute), "pi_1", "pay_1", nil)); err != nil || o != payments.Stale {
		t.Fatalf("older decline: %v %v", o, err)
	}
	if p := status(t, s, "pay_1"); p.Status != provider.StatusSucceeded {
		t.Fatalf("status %s after an older decline", p.Status)
	}
}
