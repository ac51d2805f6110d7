package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/provider/providertest"
	"github.com/runtwice/twice/shared/webhooks"
	"github.com/runtwice/twice/shared/webhooks/worker"
)

// refundProvider is the provider of the refund ledger's property test: providertest.Fake for
// the payment, and refunds modelled here, as Stripe keeps them: one refund per idempotency key,
// never more than the charge's amount held by pending and succeeded refunds, a succeeded refund
// that may fail later (giving its amount back), an event for every change, and faults before or
// after the effect on cue.
type refundProvider struct {
	*providertest.Fake
	now func() time.Time

	mu      sync.Mutex
	amount  int64               // the charge's amount
	refunds []provider.Refund   // creation order
	byKey   map[string]int      // idempotency key -> index in refunds
	events  []webhooks.Delivery // every event, in the order it was sent
	fault   string              // the next Refund call's: before, after, transient
	seq     int
}

func (p *refundProvider) emit(typ string, r provider.Refund) {
	p.seq++
	obj := map[string]any{"id": r.ID, "object": "refund", "amount": r.Amount, "currency": r.Currency, "payment_intent": r.Payment,
		"charge": "ch_" + r.Payment, "status": string(r.Status), "metadata": r.Metadata, "created": r.Created.Unix()}
	if r.FailureReason != "" {
		obj["failure_reason"] = r.FailureReason
	}
	id := fmt.Sprintf("evt_%04d", p.seq)
	body, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "created": p.now().Unix(),
		"data": map[string]any{"object": obj}})
	p.events = append(p.events, webhooks.Delivery{Provider: webhooks.ProviderStripe, EventID: id, Body: body, ReceivedAt: p.now()})
}

func (p *refundProvider) held() int64 {
	var n int64
	for _, r := range p.refunds {
		if r.Status == provider.RefundPending || r.Status == provider.RefundSucceeded {
			n += r.Amount
		}
	}
	return n
}

func (p *refundProvider) Refund(_ context.Context, req provider.RefundRequest) (provider.Refund, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fault := p.fault
	p.fault = ""
	if req.IdempotencyKey == "" {
		return provider.Refund{}, provider.ErrMissingIdempotencyKey
	}
	switch fault {
	case "before":
		return provider.Refund{}, &provider.UnknownOutcomeError{Op: "refund", Err: fmt.Errorf("timeout")}
	case "transient":
		return provider.Refund{}, &provider.TransientError{Op: "refund", StatusCode: 503, Err: fmt.Errorf("unavailable")}
	}
	if i, ok := p.byKey[req.IdempotencyKey]; ok {
		if r := p.refunds[i]; r.Amount != req.Amount {
			return provider.Refund{}, &provider.PermanentError{Op: "refund", StatusCode: 400, Code: "idempotency_error", Err: provider.ErrIdempotencyMismatch}
		}
		return p.refunds[i], nil
	}
	if req.Amount <= 0 || p.held()+req.Amount > p.amount {
		return provider.Refund{}, &provider.PermanentError{Op: "refund", StatusCode: 400, Code: "amount_too_large", Err: provider.ErrRefundTooLarge}
	}
	r := provider.Refund{ID: fmt.Sprintf("re_%03d", len(p.refunds)+1), Payment: req.Payment, Amount: req.Amount, Currency: "usd",
		Status: provider.RefundSucceeded, Reason: req.Reason, Created: p.now().UTC(), Metadata: req.Metadata}
	p.byKey[req.IdempotencyKey] = len(p.refunds)
	p.refunds = append(p.refunds, r)
	p.emit("refund.created", r)
	if fault == "after" {
		return provider.Refund{}, &provider.UnknownOutcomeError{Op: "refund", Err: fmt.Errorf("connection reset after send")}
	}
	return r, nil
}

// fail makes refund i fail, as a closed card does, with Stripe's three events.
func (p *refundProvider) fail(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= len(p.refunds) || p.refunds[i].Status != provider.RefundSucceeded {
		return
	}
	p.refunds[i].Status, p.refunds[i].FailureReason = provider.RefundFailed, "expired_or_canceled_card"
	for _, typ := range []string{"charge.refund.updated", "refund.updated", "refund.failed"} {
		p.emit(typ, p.refunds[i])
	}
}

func (p *refundProvider) Refunds(_ context.Context, lp provider.RefundListParams) iter.Seq2[provider.Refund, error] {
	return func(yield func(provider.Refund, error) bool) {
		p.mu.Lock()
		rs := append([]provider.Refund(nil), p.refunds...)
		p.mu.Unlock()
		for i := len(rs) - 1; i >= 0; i-- {
			if !yield(rs[i], nil) {
				return
			}
		}
	}
}

// TestRefundLedgerAgreesWithTheProvider: any interleaving of refund requests (new keys and
// repeated ones, any amount), provider faults before and after the effect, refunds failing at
// the provider, and refund events delivered in any order, any number of times, keeps what the
// ledger holds within the captured amount and at least what the provider holds; once every
// pending key is repeated and every event delivered, the ledger is the provider's refund for
// refund, and the payment's amount_refunded is the provider's.
func TestRefundLedgerAgreesWithTheProvider(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		clk := clock.NewFake(time.Date(2027, 6, 9, 14, 0, 0, 0, time.UTC))
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "twice.db"))
		if err != nil {
			rt.Fatal(err)
		}
		defer st.Close()
		quiet := slog.New(slog.DiscardHandler)
		keeper, err := idempotency.NewKeeper(idempotency.Keeper{Store: st, Now: clk.Now, Log: quiet})
		if err != nil {
			rt.Fatal(err)
		}
		const captured = 2000
		prov := &refundProvider{Fake: &providertest.Fake{Now: clk.Now}, now: clk.Now, amount: captured, byKey: map[string]int{}}
		svc := &payments.Service{Store: st, Keeper: keeper, Provider: prov, Now: clk.Now, Log: quiet}
		w := &worker.Worker{Applier: &payments.Applier{Store: st, Now: clk.Now, Log: quiet}}
		h := svc.Handler(func(*http.Request) string { return "local" })
		post := func(path, key, body string) *httptest.ResponseRecorder {
			r := httptest.NewRequest("POST", path, strings.NewReader(body))
			r.Header.Set("Idempotency-Key", key)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			return rec
		}
		created := post("/payments", "pay", fmt.Sprintf(`{"amount":%d,"currency":"usd","customer":"cus_p","payment_method":"pm_card_visa"}`, captured))
		var pv payments.View
		if created.Code != http.StatusCreated || json.Unmarshal(created.Body.Bytes(), &pv) != nil {
			rt.Fatalf("create: %d %s", created.Code, created.Body)
		}
		refunds := "/payments/" + pv.ID + "/refunds"
		bodies := map[string]string{} // each key's body, so a repeat sends the same
		pending := map[string]bool{}  // keys answered 202
		send := func(key string) {
			rec := post(refunds, key, bodies[key])
			switch rec.Code {
			case http.StatusCreated, http.StatusUnprocessableEntity, http.StatusConflict, http.StatusServiceUnavailable, http.StatusBadGateway:
				delete(pending, key)
			case http.StatusAccepted:
				pending[key] = true
			default:
				rt.Fatalf("refund %s %s: %d %s", key, bodies[key], rec.Code, rec.Body)
			}
		}
		deliver := func(d webhooks.Delivery) {
			if _, err := w.Apply(ctx, d); err != nil {
				rt.Fatalf("apply %s: %v", d.Body, err)
			}
		}
		check := func() {
			led, err := payments.GetRefunds(ctx, st, pv.ID)
			if err != nil {
				rt.Fatal(err)
			}
			p, err := payments.Get(ctx, st, pv.ID)
			if err != nil {
				rt.Fatal(err)
			}
			prov.mu.Lock()
			atProvider := prov.held()
			prov.mu.Unlock()
			if led.Held() > captured || p.AmountRefunded > captured {
				rt.Fatalf("held %d, refunded %d of %d", led.Held(), p.AmountRefunded, captured)
			}
			if atProvider > led.Held() {
				rt.Fatalf("the provider holds %d refunded, the ledger only %d: a caller could refund more", atProvider, led.Held())
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"refund": func(rt *rapid.T) {
				key := fmt.Sprintf("r%d", rapid.IntRange(0, 7).Draw(rt, "key"))
				if _, ok := bodies[key]; !ok {
					if amount := rapid.IntRange(0, 900).Draw(rt, "amount"); amount == 0 {
						bodies[key] = `{}`
					} else {
						bodies[key] = fmt.Sprintf(`{"amount":%d}`, amount)
					}
				}
				send(key)
				check()
			},
			"fault": func(rt *rapid.T) {
				prov.mu.Lock()
				prov.fault = rapid.SampledFrom([]string{"before", "after", "transient"}).Draw(rt, "fault")
				prov.mu.Unlock()
			},
			"fail": func(rt *rapid.T) {
				prov.fail(rapid.IntRange(0, 7).Draw(rt, "refund"))
				check()
			},
			"deliver": func(rt *rapid.T) {
				prov.mu.Lock()
				events := append([]webhooks.Delivery(nil), prov.events...)
				prov.mu.Unlock()
				if len(events) == 0 {
					return
				}
				deliver(events[rapid.IntRange(0, len(events)-1).Draw(rt, "event")])
				check()
			},
			"tick": func(rt *rapid.T) { clk.Advance(time.Duration(rapid.IntRange(1, 90).Draw(rt, "s")) * time.Second) },
		})

		// Settle: repeat every pending key (no faults now), deliver every event once more.
		prov.mu.Lock()
		prov.fault = ""
		prov.mu.Unlock()
		for key := range pending {
			send(key)
		}
		if len(pending) > 0 {
			rt.Fatalf("keys still pending after a repeat: %v", pending)
		}
		prov.mu.Lock()
		events := append([]webhooks.Delivery(nil), prov.events...)
		want := append([]provider.Refund(nil), prov.refunds...)
		prov.mu.Unlock()
		for _, d := range events {
			deliver(d)
		}
		check()
		led, _ := payments.GetRefunds(ctx, st, pv.ID)
		if len(led.Refunds) != len(want) {
			rt.Fatalf("the ledger holds %d refunds, the provider %d: %+v", len(led.Refunds), len(want), led.Refunds)
		}
		var refunded int64
		for _, r := range want {
			e, ok := led.Entry(r.ID)
			if !ok || e.Status != string(r.Status) || e.Amount != r.Amount {
				rt.Fatalf("provider refund %+v; ledger %+v", r, e)
			}
			if r.Status == provider.RefundSucceeded || r.Status == provider.RefundPending {
				refunded += r.Amount
			}
		}
		p, _ := payments.Get(ctx, st, pv.ID)
		if p.AmountRefunded != refunded || (refunded == captured) != (p.Status == provider.StatusRefunded) {
			rt.Fatalf("payment %s with %d refunded; the provider refunded %d", p.Status, p.AmountRefunded, refunded)
		}
	})
}
