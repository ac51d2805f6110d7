package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/provider/providertest"
)

// take empties the list of queued jobs.
func (j *jobs) take() []ResolveJob {
	j.mu.Lock()
	defer j.mu.Unlock()
	l := j.list
	j.list = nil
	return l
}

// propWorld is one run: a service on a fresh store, the provider fake (which forgets keys after
// its 24 h horizon, as Stripe does), one fake clock for all of them.
type propWorld struct {
	svc   *Service
	h     http.Handler
	prov  *providertest.Fake
	clock *clock.Fake
	relay *outbox.Relay
	q     *jobs
	armed int

	seen  map[string]bool   // keys a request has been sent with
	final map[string]answer // the first final answer of each key
}

type answer struct {
	status int
	body   string
}

var propKeys = map[string]string{
	"order-1": `{"amount":1500,"currency":"usd","customer":"cus_1","payment_method":"pm_card_visa","metadata":{}}`,
	"order-2": `{"amount":700,"currency":"eur","customer":"cus_2","payment_method":"pm_card_visa_chargeDeclinedInsufficientFunds"}`,
	"order-3": `{"amount":99,"currency":"usd","customer":"cus_3","payment_method":"pm_card_visa","invoice":"in_3","metadata":{"a":"b"}}`,
}

// reformatted is the same request with other spacing and key order: not a different body.
func reformatted(body string) string {
	var m map[string]any
	_ = json.Unmarshal([]byte(body), &m)
	b, _ := json.MarshalIndent(m, "", "  ")
	return string(b)
}

func newPropWorld(t interface{ Fatal(...any) }, dir string, n int) *propWorld {
	s, err := boltstore.Open(filepath.Join(dir, fmt.Sprintf("p%d.db", n)))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	c := clock.NewFake(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	k, err := idempotency.NewKeeper(idempotency.Keeper{Store: s, Now: c.Now, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	w := &propWorld{prov: &providertest.Fake{Now: c.Now}, clock: c, q: &jobs{}, seen: map[string]bool{}, final: map[string]answer{}}
	w.svc = &Service{Store: s, Keeper: k, Provider: w.prov, Resolver: w.q, OnDecline: &declines{}, Now: c.Now, Log: quiet}
	w.h = w.svc.Handler(func(*http.Request) string { return "local" })
	handlers := w.svc.FollowOns()
	handlers[KindPublishChange] = func(context.Context, outbox.Message) error { return nil } // the feed's own tests judge it
	w.relay = &outbox.Relay{Store: s, Handlers: handlers, Now: c.Now, Log: quiet}
	return w
}

func (w *propWorld) post(key, body string) answer {
	r := httptest.NewRequest("POST", "/payments", strings.NewReader(body))
	r.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	w.h.ServeHTTP(rec, r)
	return answer{rec.Code, rec.Body.String()}
}

// TestPropertyNoSecondCharge drives client retries, the background resolver, operator retries of
// resolve jobs and provider timeouts (before and after the charge) with clock jumps of 0-72 h,
// the provider forgetting keys at 24 h, and checks: at most one PaymentIntent per key at every
// moment, exactly one for a charged key at the end, every answer after the first final one
// identical to it, no 422 for the same body, 422 for a different one, and every key known in the
// end.
func TestPropertyNoSecondCharge(t *testing.T) {
	dir := t.TempDir()
	runs := 0
	rapid.Check(t, func(t *rapid.T) {
		runs++
		w := newPropWorld(t, dir, runs)
		start := w.clock.Now()
		defer w.svc.Store.(*boltstore.Store).Close()
		keys := rapid.SampledFrom([]string{"order-1", "order-2", "order-3"})
		t.Repeat(map[string]func(*rapid.T){
			"client retry": func(t *rapid.T) {
				key := keys.Draw(t, "key")
				body := propKeys[key]
				if rapid.Bool().Draw(t, "reformat") {
					body = reformatted(body)
				}
				w.seen[key] = true
				got := w.post(key, body)
				w.observe(t, key, got)
			},
			"different body": func(t *rapid.T) {
				key := keys.Draw(t, "key")
				if !w.seen[key] {
					t.Skip("key never used")
				}
				got := w.post(key, strings.Replace(propKeys[key], `"amount":`, `"amount":1`, 1))
				if got.status != http.StatusUnprocessableEntity || !strings.Contains(got.body, "amount") {
					t.Fatalf("different body under %s: %d %s", key, got.status, got.body)
				}
			},
			"a holder dies after the provider call": func(t *rapid.T) {
				// A process killed between the provider's answer and the commit: the key keeps
				// an in-progress lock, and the provider may hold a charge under its key.
				key := keys.Draw(t, "key")
				if w.seen[key] {
					t.Skip("key already used")
				}
				fp := FingerprintBody([]byte(propKeys[key])) // as the handler fingerprints it
				out, err := w.svc.Keeper.Acquire(context.Background(), "local", key, fp)
				if err != nil || out.Kind != idempotency.New {
					t.Fatalf("acquire %s: %+v %v", key, out, err)
				}
				w.seen[key] = true
				if rapid.Bool().Draw(t, "charged") {
					var req CreateRequest
					if err := json.Unmarshal([]byte(propKeys[key]), &req); err != nil {
						t.Fatal(err)
					}
					id := PaymentID("local", key)
					// Whatever the provider answers, the holder dies before it commits; an armed
					// timeout is used up by this call.
					_, err := w.prov.Create(context.Background(), provider.CreateRequest{Amount: req.Amount, Currency: req.Currency,
						Customer: req.Customer, PaymentMethod: req.PaymentMethod, Metadata: map[string]string{MetaPaymentID: id, MetaScope: "local"},
						IdempotencyKey: provider.IdempotencyKey("local", key)})
					if errors.As(err, new(*provider.UnknownOutcomeError)) {
						w.armed = 0
					}
				}
			},
			"provider times out": func(t *rapid.T) {
				if w.armed > 0 {
					t.Skip("a fault is armed")
				}
				w.armed++
				w.prov.FailNext(1, &provider.UnknownOutcomeError{Op: "create"}, rapid.Bool().Draw(t, "after effect"))
			},
			"resolver": func(t *rapid.T) {
				if _, _, err := w.relay.Drain(context.Background()); err != nil {
					t.Fatal(err)
				}
				for _, j := range w.q.take() {
					_ = w.svc.Resolve(context.Background(), j) // ErrBusy is retried by the queue
				}
			},
			"operator retry": func(t *rapid.T) {
				key := keys.Draw(t, "key")
				_ = w.svc.Resolve(context.Background(), ResolveJob{Scope: "local", Key: key, PaymentID: PaymentID("local", key)})
			},
			"clock jump": func(t *rapid.T) {
				// Callers retry for up to 3 days and keys are kept 7: jumps stay within 5 days
				// in all (plus the 25 h at the end), where a key must never run afresh.
				d := time.Duration(rapid.Int64Range(0, 72*3600).Draw(t, "seconds")) * time.Second
				if w.clock.Now().Add(d).Sub(start) > 5*24*time.Hour {
					t.Skip("past the retry window")
				}
				w.clock.Advance(d)
			},
			"": func(t *rapid.T) { w.check(t) },
		})
		// Let every loop close: use up an armed fault, go past the horizon, resolve everything.
		if w.armed > 0 {
			_, _ = w.prov.Create(context.Background(), provider.CreateRequest{Amount: 1, Currency: "usd", PaymentMethod: "pm_card_visa", IdempotencyKey: "drain"})
		}
		w.clock.Advance(25 * time.Hour)
		for key := range w.seen {
			_ = w.svc.Resolve(context.Background(), ResolveJob{Scope: "local", Key: key, PaymentID: PaymentID("local", key)})
			got := w.post(key, propKeys[key])
			if got.status == http.StatusAccepted {
				t.Fatalf("%s still pending after the horizon and a resolution: %s", key, got.body)
			}
			w.observe(t, key, got)
			charged := !strings.Contains(got.body, `"status":"canceled"`)
			if n := w.prov.CountMetadata(MetaPaymentID, PaymentID("local", key)); (n == 1) != charged {
				t.Fatalf("%s: %d PaymentIntents, answer %s", key, n, got.body)
			}
		}
		w.check(t)
	})
}

func (w *propWorld) observe(t *rapid.T, key string, got answer) {
	switch {
	case got.status == http.StatusUnprocessableEntity:
		t.Fatalf("the same body under %s was refused: %s", key, got.body)
	case got.status == http.StatusAccepted || got.status == http.StatusConflict || got.status >= 500:
		if first, ok := w.final[key]; ok {
			t.Fatalf("%s answered %d after its final answer %d", key, got.status, first.status)
		}
	default:
		if first, ok := w.final[key]; ok && first != got {
			t.Fatalf("%s: replay %d %s differs from the final answer %d %s", key, got.status, got.body, first.status, first.body)
		}
		w.final[key] = got
	}
}

func (w *propWorld) check(t *rapid.T) {
	for key := range propKeys {
		if n := w.prov.CountMetadata(MetaPaymentID, PaymentID("local", key)); n > 1 {
			t.Fatalf("%s charged %d times", key, n)
		}
	}
}
