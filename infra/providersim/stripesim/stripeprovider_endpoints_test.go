package stripesim_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/providersim/stripesim"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/stripeprovider"
)

// objectID is a Stripe object id in a path segment.
var objectID = regexp.MustCompile(`^(pi|pm|evt|ch|cus|re)_[A-Za-z0-9_]+$`)

// TestEndpointsAreEveryCall calls every method of the adapter against the simulator and holds
// Endpoints to what was sent: each call is listed with a permission for every object it
// expands, and each listed endpoint was called. A new method fails here until it is listed
// (and then docs/deploy.md's restricted-key table fails until it is documented).
func TestEndpointsAreEveryCall(t *testing.T) {
	sim, err := stripesim.New(stripesim.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { srv.Close(); sim.Close() })
	rec := &recorder{}
	c, err := stripeprovider.New(stripeprovider.Client{APIKey: stripesim.DefaultAPIKey, BaseURL: srv.URL, Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := map[string]func() error{
		"Create": func() error {
			_, err := c.Create(ctx, provider.CreateRequest{Amount: 100, Currency: "usd", Customer: "cus_ends", PaymentMethod: "pm_card_visa",
				IdempotencyKey: provider.IdempotencyKey("local", "endpoints-1"), Metadata: map[string]string{"twice_payment_id": "pay_ends"}})
			return err
		},
		"Get": func() error {
			p, err := c.Create(ctx, provider.CreateRequest{Amount: 100, Currency: "usd", PaymentMethod: "pm_card_visa",
				IdempotencyKey: provider.IdempotencyKey("local", "endpoints-2")})
			if err != nil {
				return err
			}
			_, err = c.Get(ctx, p.ID)
			return err
		},
		"Confirm": func() error {
			p, err := c.Create(ctx, provider.CreateRequest{Amount: 100, Currency: "usd", PaymentMethod: "pm_card_visa_chargeDeclinedInsufficientFunds",
				IdempotencyKey: provider.IdempotencyKey("local", "endpoints-3")})
			if p.ID == "" {
				return err
			}
			_, err = c.Confirm(ctx, provider.ConfirmRequest{ID: p.ID, PaymentMethod: "pm_card_visa", IdempotencyKey: provider.IdempotencyKey("local", "endpoints-3c")})
			return err
		},
		"PaymentMethodCard": func() error { _, err := c.PaymentMethodCard(ctx, "pm_card_visa"); return err },
		"Capture": func() error {
			p, err := c.Create(ctx, provider.CreateRequest{Amount: 100, Currency: "usd", PaymentMethod: "pm_card_visa",
				CaptureMethod: provider.CaptureManual, IdempotencyKey: provider.IdempotencyKey("local", "endpoints-4")})
			if err != nil {
				return err
			}
			_, err = c.Capture(ctx, provider.CaptureRequest{ID: p.ID, IdempotencyKey: provider.CaptureKey("local", "endpoints-4")})
			return err
		},
		"Cancel": func() error {
			p, err := c.Create(ctx, provider.CreateRequest{Amount: 100, Currency: "usd", PaymentMethod: "pm_card_visa",
				CaptureMethod: provider.CaptureManual, IdempotencyKey: provider.IdempotencyKey("local", "endpoints-5")})
			if err != nil {
				return err
			}
			_, err = c.Cancel(ctx, provider.CancelRequest{ID: p.ID, IdempotencyKey: provider.CancelKey("local", "endpoints-5")})
			return err
		},
		"Refund": func() error {
			p, err := c.Create(ctx, provider.CreateRequest{Amount: 100, Currency: "usd", PaymentMethod: "pm_card_visa",
				IdempotencyKey: provider.IdempotencyKey("local", "endpoints-6")})
			if err != nil {
				return err
			}
			_, err = c.Refund(ctx, provider.RefundRequest{Payment: p.ID, IdempotencyKey: provider.RefundKey("local", "endpoints-6")})
			return err
		},
		"Refunds": func() error {
			p, err := c.Create(ctx, provider.CreateRequest{Amount: 100, Currency: "usd", PaymentMethod: "pm_card_visa",
				IdempotencyKey: provider.IdempotencyKey("local", "endpoints-7")})
			if err != nil {
				return err
			}
			for _, err := range c.Refunds(ctx, provider.RefundListParams{Payment: p.ID}) {
				if err != nil {
					return err
				}
			}
			return nil
		},
		"List": func() error {
			for _, err := range c.List(ctx, provider.ListParams{CreatedFrom: time.Unix(1, 0)}) {
				if err != nil {
					return err
				}
			}
			return nil
		},
		"SearchMetadata": func() error { _, err := c.SearchMetadata(ctx, "twice_payment_id", "pay_ends"); return err },
		"Events": func() error {
			for _, err := range c.Events(ctx, provider.EventQuery{CreatedFrom: time.Unix(1, 0)}) {
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	// Methods that call nothing, or only set the adapter up.
	quiet := map[string]bool{"KeyHorizon": true}
	ty := reflect.TypeFor[*stripeprovider.Client]()
	for i := range ty.NumMethod() {
		if m := ty.Method(i).Name; calls[m] == nil && !quiet[m] {
			t.Errorf("(*Client).%s is not exercised here: call it above (and list what it sends in Endpoints)", m)
		}
	}
	for name, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	listed := map[string]stripeprovider.Endpoint{}
	for _, e := range stripeprovider.Endpoints {
		listed[e.Method+" "+e.Path] = e
	}
	seen := map[string]bool{}
	for _, call := range rec.all() {
		segs := strings.Split(call.Path, "/")
		for i, s := range segs {
			if objectID.MatchString(s) {
				segs[i] = "{id}"
			}
		}
		key := call.Method + " " + strings.Join(segs, "/")
		e, ok := listed[key]
		if !ok {
			t.Errorf("the adapter sent %s (%s), which Endpoints does not list", key, call.Path)
			continue
		}
		seen[key] = true
		q, _ := url.ParseQuery(call.Query)
		for k, vs := range q {
			if !strings.HasPrefix(k, "expand") {
				continue
			}
			for _, v := range vs {
				obj := v[strings.LastIndex(v, ".")+1:] // data.latest_charge -> latest_charge
				perm := map[string]string{"latest_charge": "Charges read", "payment_method": "PaymentMethods read",
					"customer": "Customers read"}[obj]
				if perm == "" || !slices.Contains(e.Permissions, perm) {
					t.Errorf("%s expands %s: its Permissions %v lack %q", key, v, e.Permissions, perm)
				}
			}
		}
	}
	for key := range listed {
		if !seen[key] {
			t.Errorf("Endpoints lists %s, which no call sent", key)
		}
	}
}

// recorder keeps every call the adapter reports to its Observer.
type recorder struct {
	mu    sync.Mutex
	calls []stripeprovider.Call
}

func (r *recorder) Observe(_ context.Context, c stripeprovider.Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

func (r *recorder) all() []stripeprovider.Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]stripeprovider.Call(nil), r.calls...)
}
