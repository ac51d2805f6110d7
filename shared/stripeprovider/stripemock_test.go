package stripeprovider

import (
	"context"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// stripeMockURL returns the stripe-mock origin the test script started, or skips (fails in CI).
func stripeMockURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("TWICE_TEST_STRIPE_MOCK")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("TWICE_TEST_STRIPE_MOCK is unset; the test script must start stripe-mock")
		}
		t.Skip("TWICE_TEST_STRIPE_MOCK unset: start stripe-mock v0.203.0 and export its http origin")
	}
	return u
}

// recorder keeps every Call, for tests.
type recorder struct {
	mu    sync.Mutex
	calls []Call
}

func (r *recorder) Observe(_ context.Context, c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

func (r *recorder) all() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// stripe-mock validates every request against Stripe's OpenAPI spec and answers 400 for a
// parameter Stripe would reject, so a 2xx here means the request shape is one Stripe accepts.
func TestRequestShapesAgainstStripeMock(t *testing.T) {
	base := stripeMockURL(t)
	rec := &recorder{}
	c, err := New(Client{APIKey: "sk_test_mock", BaseURL: base, Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := provider.IdempotencyKey("local", "order-1")

	tests := map[string]struct {
		call      func() error
		wantPath  string
		wantForm  map[string]string // request body (or query for GET) fields
		wantKey   string
		wantNoKey bool
	}{
		"create with confirm": {
			call: func() error {
				_, err := c.Create(ctx, provider.CreateRequest{
					Amount: 1999, Currency: "usd", Customer: "cus_123", PaymentMethod: "pm_card_visa",
					Description: "order 1", Metadata: map[string]string{"invoice": "in_1"}, OffSession: true,
					IdempotencyKey: key,
				})
				return err
			},
			wantPath: "/v1/payment_intents",
			wantForm: map[string]string{"amount": "1999", "currency": "usd", "confirm": "true",
				"customer": "cus_123", "payment_method": "pm_card_visa", "payment_method_types[0]": "card",
				"description": "order 1", "metadata[invoice]": "in_1", "off_session": "true"},
			wantKey: key,
		},
		"create for manual capture, authenticating by redirect": {
			call: func() error {
				_, err := c.Create(ctx, provider.CreateRequest{Amount: 1999, Currency: "usd", PaymentMethod: "pm_card_visa",
					CaptureMethod: provider.CaptureManual, ReturnURL: "https://shop.example/back", IdempotencyKey: key})
				return err
			},
			wantPath: "/v1/payment_intents",
			wantForm: map[string]string{"capture_method": "manual", "return_url": "https://shop.example/back",
				"expand[0]": "latest_charge", "confirm": "true"},
			wantKey: key,
		},
		"capture part of an authorization": {
			call: func() error {
				p, err := c.Capture(ctx, provider.CaptureRequest{ID: "pi_123", AmountToCapture: 600, IdempotencyKey: provider.CaptureKey("local", "cap-1")})
				if err == nil && p.ID == "" {
					t.Error("stripe-mock's PaymentIntent mapped to no id")
				}
				return err
			},
			wantPath: "/v1/payment_intents/pi_123/capture",
			wantForm: map[string]string{"amount_to_capture": "600", "expand[0]": "latest_charge"},
			wantKey:  provider.CaptureKey("local", "cap-1"),
		},
		"cancel with a reason": {
			call: func() error {
				_, err := c.Cancel(ctx, provider.CancelRequest{ID: "pi_123", Reason: provider.CancelAbandoned, IdempotencyKey: provider.CancelKey("local", "cxl-1")})
				return err
			},
			wantPath: "/v1/payment_intents/pi_123/cancel",
			wantForm: map[string]string{"cancellation_reason": "abandoned", "expand[0]": "latest_charge"},
			wantKey:  provider.CancelKey("local", "cxl-1"),
		},
		"refund part of a payment": {
			call: func() error {
				r, err := c.Refund(ctx, provider.RefundRequest{Payment: "pi_123", Amount: 500, Reason: provider.RefundRequestedByCustomer,
					Metadata: map[string]string{"twice_refund_id": "rf_1"}, IdempotencyKey: provider.RefundKey("local", "ref-1")})
				if err == nil && (r.ID == "" || r.Status == "") {
					t.Errorf("refund = %+v: stripe-mock's Refund has an id and a status", r)
				}
				return err
			},
			wantPath: "/v1/refunds",
			wantForm: map[string]string{"payment_intent": "pi_123", "amount": "500", "reason": "requested_by_customer",
				"metadata[twice_refund_id]": "rf_1"},
			wantKey: provider.RefundKey("local", "ref-1"),
		},
		"list a payment's refunds": {
			call: func() error {
				for _, err := range c.Refunds(ctx, provider.RefundListParams{Payment: "pi_123"}) {
					if err != nil {
						return err
					}
				}
				return nil
			},
			wantPath:  "/v1/refunds",
			wantForm:  map[string]string{"payment_intent": "pi_123", "limit": "100"},
			wantNoKey: true,
		},
		"get": {
			call:      func() error { _, err := c.Get(ctx, "pi_123"); return err },
			wantPath:  "/v1/payment_intents/pi_123",
			wantNoKey: true,
		},
		"confirm with a new payment method": {
			call: func() error {
				_, err := c.Confirm(ctx, provider.ConfirmRequest{ID: "pi_123", PaymentMethod: "pm_card_mastercard",
					OffSession: true, IdempotencyKey: provider.AttemptKey("in_1", 2)})
				return err
			},
			wantPath: "/v1/payment_intents/pi_123/confirm",
			wantForm: map[string]string{"payment_method": "pm_card_mastercard", "off_session": "true"},
			wantKey:  provider.AttemptKey("in_1", 2),
		},
		"retrieve a payment method's card": {
			call: func() error {
				card, err := c.PaymentMethodCard(ctx, "pm_123")
				if err == nil && (card.Fingerprint == "" || card.Brand == "") {
					t.Errorf("card = %+v: stripe-mock's PaymentMethod has a fingerprint and a brand", card)
				}
				return err
			},
			wantPath:  "/v1/payment_methods/pm_123",
			wantNoKey: true,
		},
		"list a window for a customer": {
			call: func() error {
				from := time.Unix(1_790_000_000, 0)
				for _, err := range c.List(ctx, provider.ListParams{CreatedFrom: from, CreatedTo: from.Add(25 * time.Hour), Customer: "cus_123"}) {
					if err != nil {
						return err
					}
				}
				return nil
			},
			wantPath: "/v1/payment_intents",
			wantForm: map[string]string{"limit": "100", "customer": "cus_123", "expand[0]": "data.latest_charge",
				"created[gte]": "1790000000", "created[lte]": "1790090000"},
			wantNoKey: true,
		},
		"list undelivered events since a checkpoint": {
			call: func() error {
				from := time.Unix(1_790_000_000, 0)
				for _, err := range c.Events(ctx, provider.EventQuery{CreatedFrom: from, CreatedTo: from.Add(time.Hour), Undelivered: true,
					Types: []string{"charge.refunded", "charge.dispute.*"}}) {
					if err != nil {
						return err
					}
				}
				return nil
			},
			wantPath: "/v1/events",
			wantForm: map[string]string{"limit": "100", "delivery_success": "false", "types[0]": "charge.refunded",
				"types[1]": "charge.dispute.*", "created[gte]": "1790000000", "created[lte]": "1790003600"},
			wantNoKey: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := len(rec.all())
			if err := tc.call(); err != nil {
				t.Fatalf("stripe-mock rejected the request: %v", err)
			}
			calls := rec.all()[before:]
			if len(calls) == 0 {
				t.Fatal("no HTTP call observed")
			}
			got := calls[0]
			if got.Path != tc.wantPath || got.StatusCode != 200 {
				t.Fatalf("call = %s %s -> %d, want %s -> 200", got.Method, got.Path, got.StatusCode, tc.wantPath)
			}
			form := got.Query
			if len(got.RequestBody) > 0 {
				form = string(got.RequestBody)
			}
			values, err := url.ParseQuery(form)
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.wantForm {
				if values.Get(k) != want {
					t.Errorf("%s = %q, want %q (sent %s)", k, values.Get(k), want, form)
				}
			}
			if tc.wantKey != "" && got.IdempotencyKey != tc.wantKey {
				t.Errorf("Idempotency-Key = %q, want %q", got.IdempotencyKey, tc.wantKey)
			}
			if tc.wantNoKey && got.IdempotencyKey != "" {
				t.Errorf("a read sent Idempotency-Key %q", got.IdempotencyKey)
			}
			if strings.Contains(string(got.RequestBody)+got.Query, "sk_test_mock") {
				t.Error("the API key leaked into the observed call")
			}
		})
	}
}
