package providertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// Authenticator is implemented by a provider under test that can stand in for the customer
// completing (ok) or failing a payment's authentication: the Fake itself, or a test wrapper
// around the Stripe adapter that calls the simulator's authenticate control. Run checks the
// authentication flows only for such a provider.
type Authenticator interface {
	Authenticate(ctx context.Context, id string, ok bool) error
}

// eventually waits for cond, polling, up to a bound: for effects that a provider makes after
// its answer (a refund that fails later).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runFlows checks the payment flows: customer authentication, off-session declines, manual
// capture, cancel and refunds (provider.Operations), with Stripe's test payment methods.
func runFlows(t *testing.T, scope string, newProvider func(t *testing.T) provider.Provider) {
	ctx := context.Background()
	key := func(t *testing.T, n string) string { return provider.IdempotencyKey(scope, t.Name()+"/"+n) }
	customer := func(t *testing.T) string { return "cus_" + provider.IdempotencyKey(scope, t.Name())[10:30] }
	ops := func(t *testing.T, p provider.Provider) provider.Operations {
		o, ok := p.(provider.Operations)
		if !ok {
			t.Fatalf("%T does not implement provider.Operations", p)
		}
		return o
	}
	create := func(t *testing.T, p provider.Provider, req provider.CreateRequest) provider.Payment {
		t.Helper()
		req.Currency, req.Customer, req.IdempotencyKey = "usd", customer(t), key(t, req.PaymentMethod+string(req.CaptureMethod))
		got, err := p.Create(ctx, req)
		if err != nil {
			t.Fatalf("Create(%s): %v", req.PaymentMethod, err)
		}
		return got
	}

	for _, pm := range []string{PMThreeDSecure2Required, PMAuthenticationRequired} {
		t.Run("on-session "+pm+" requires action", func(t *testing.T) {
			p := newProvider(t)
			req := provider.CreateRequest{Amount: 2000, Currency: "usd", Customer: customer(t), PaymentMethod: pm, IdempotencyKey: key(t, "1")}
			got, err := p.Create(ctx, req)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if got.Status != provider.StatusRequiresAction || got.ClientSecret == "" || got.NextAction == nil ||
				got.NextAction.Type != "use_stripe_sdk" || got.Decline != nil {
				t.Fatalf("Create = %+v, next action %+v; want requires_action with a client secret and use_stripe_sdk", got, got.NextAction)
			}
			again, err := p.Create(ctx, req)
			if err != nil || again.ID != got.ID || again.Status != provider.StatusRequiresAction || again.ClientSecret != got.ClientSecret {
				t.Fatalf("a repeat = %+v, %v; want the same payment waiting", again, err)
			}
			read, err := p.Get(ctx, got.ID)
			if err != nil || read.Status != provider.StatusRequiresAction || read.NextAction == nil || read.ClientSecret != got.ClientSecret {
				t.Fatalf("Get = %+v, %v", read, err)
			}
		})
		t.Run("off-session "+pm+" declines with authentication_required", func(t *testing.T) {
			p := newProvider(t)
			got, err := p.Create(ctx, provider.CreateRequest{Amount: 900, Currency: "usd", Customer: customer(t), PaymentMethod: pm,
				OffSession: true, IdempotencyKey: key(t, "1")})
			var de *provider.DeclineError
			if !errors.As(err, &de) || got.Status != provider.StatusDeclined || got.Decline == nil ||
				got.Decline.Code != "authentication_required" || got.ClientSecret != "" {
				t.Fatalf("Create = %+v (decline %+v), %v; want a decline with authentication_required", got, got.Decline, err)
			}
			read, err := p.Get(ctx, got.ID)
			if err != nil || read.Status != provider.StatusDeclined || read.Decline == nil || read.Decline.Code != "authentication_required" {
				t.Fatalf("Get = %+v (decline %+v), %v", read, read.Decline, err)
			}
		})
	}

	t.Run("with a return URL the next action is a redirect", func(t *testing.T) {
		p := newProvider(t)
		got := create(t, p, provider.CreateRequest{Amount: 2000, PaymentMethod: PMThreeDSecure2Required, ReturnURL: "https://shop.example/back"})
		if got.Status != provider.StatusRequiresAction || got.NextAction == nil || got.NextAction.Type != "redirect_to_url" ||
			got.NextAction.RedirectURL == "" {
			t.Fatalf("Create = %+v, next action %+v", got, got.NextAction)
		}
	})

	t.Run("authentication completed charges; failed declines", func(t *testing.T) {
		p := newProvider(t)
		a, ok := p.(Authenticator)
		if !ok {
			t.Skipf("%T cannot stand in for the customer", p)
		}
		done := create(t, p, provider.CreateRequest{Amount: 2000, PaymentMethod: PMThreeDSecure2Required})
		if err := a.Authenticate(ctx, done.ID, true); err != nil {
			t.Fatal(err)
		}
		if got, err := p.Get(ctx, done.ID); err != nil || got.Status != provider.StatusSucceeded || got.ClientSecret != "" || got.NextAction != nil {
			t.Fatalf("after authentication: %+v, %v; want succeeded", got, err)
		}
		held := create(t, p, provider.CreateRequest{Amount: 2000, PaymentMethod: PMAuthenticationRequired, CaptureMethod: provider.CaptureManual})
		if err := a.Authenticate(ctx, held.ID, true); err != nil {
			t.Fatal(err)
		}
		if got, err := p.Get(ctx, held.ID); err != nil || got.Status != provider.StatusRequiresCapture || got.AmountCapturable != 2000 {
			t.Fatalf("after authentication of a manual capture: %+v, %v; want requires_capture", got, err)
		}
		failed := create(t, p, provider.CreateRequest{Amount: 2000, PaymentMethod: PMAuthenticationRequired})
		if err := a.Authenticate(ctx, failed.ID, false); err != nil {
			t.Fatal(err)
		}
		got, err := p.Get(ctx, failed.ID)
		if err != nil || got.Status != provider.StatusDeclined || got.Decline == nil || got.Decline.Code != "payment_intent_authentication_failure" {
			t.Fatalf("after a failed authentication: %+v (decline %+v), %v", got, got.Decline, err)
		}
		if err := a.Authenticate(ctx, done.ID, true); err == nil {
			t.Fatal("a payment that needs no authentication was authenticated")
		}
	})

	t.Run("manual capture: held, captured in part, the repeat replayed", func(t *testing.T) {
		p := newProvider(t)
		o := ops(t, p)
		held := create(t, p, provider.CreateRequest{Amount: 1000, PaymentMethod: "pm_card_visa", CaptureMethod: provider.CaptureManual})
		if held.Status != provider.StatusRequiresCapture || held.AmountCapturable != 1000 || held.CaptureMethod != provider.CaptureManual ||
			held.AmountReceived != 0 {
			t.Fatalf("Create = %+v; want requires_capture with 1000 capturable", held)
		}
		if want := held.Created.Add(7 * 24 * time.Hour); held.CaptureBefore.Sub(want).Abs() > time.Minute {
			t.Fatalf("CaptureBefore = %s, want about %s (7 days after the authorization)", held.CaptureBefore, want)
		}
		if _, err := o.Capture(ctx, provider.CaptureRequest{ID: held.ID, AmountToCapture: 1001, IdempotencyKey: key(t, "too much")}); err == nil {
			t.Fatal("a capture of more than the authorization was accepted")
		}
		req := provider.CaptureRequest{ID: held.ID, AmountToCapture: 600, IdempotencyKey: key(t, "capture")}
		got, err := o.Capture(ctx, req)
		if err != nil || got.Status != provider.StatusSucceeded || got.AmountReceived != 600 || got.AmountCapturable != 0 {
			t.Fatalf("Capture = %+v, %v; want succeeded with 600 received", got, err)
		}
		again, err := o.Capture(ctx, req)
		if err != nil || again.ID != got.ID || again.Status != provider.StatusSucceeded || again.AmountReceived != 600 {
			t.Fatalf("a repeated capture = %+v, %v; want the first answer", again, err)
		}
		req.AmountToCapture = 500
		if _, err := o.Capture(ctx, req); !errors.Is(err, provider.ErrIdempotencyMismatch) {
			t.Fatalf("the capture key with another amount: %v, want ErrIdempotencyMismatch", err)
		}
		if _, err := o.Capture(ctx, provider.CaptureRequest{ID: held.ID, IdempotencyKey: key(t, "second")}); !errors.Is(err, provider.ErrUnexpectedState) {
			t.Fatalf("a second capture: %v, want ErrUnexpectedState", err)
		}
		// What was released is not refundable: refunds are bounded by what was captured.
		if _, err := o.Refund(ctx, provider.RefundRequest{Payment: held.ID, Amount: 601, IdempotencyKey: key(t, "refund")}); !errors.Is(err, provider.ErrRefundTooLarge) {
			t.Fatalf("a refund of more than was captured: %v, want ErrRefundTooLarge", err)
		}
	})

	t.Run("cancel releases an authorization, once", func(t *testing.T) {
		p := newProvider(t)
		o := ops(t, p)
		held := create(t, p, provider.CreateRequest{Amount: 1000, PaymentMethod: "pm_card_visa", CaptureMethod: provider.CaptureManual})
		req := provider.CancelRequest{ID: held.ID, Reason: provider.CancelRequestedByCustomer, IdempotencyKey: key(t, "cancel")}
		got, err := o.Cancel(ctx, req)
		if err != nil || got.Status != provider.StatusCanceled || got.CancellationReason != "requested_by_customer" || got.AmountCapturable != 0 {
			t.Fatalf("Cancel = %+v, %v", got, err)
		}
		if again, err := o.Cancel(ctx, req); err != nil || again.Status != provider.StatusCanceled {
			t.Fatalf("a repeated cancel = %+v, %v; want the first answer", again, err)
		}
		if _, err := o.Capture(ctx, provider.CaptureRequest{ID: held.ID, IdempotencyKey: key(t, "capture")}); !errors.Is(err, provider.ErrUnexpectedState) {
			t.Fatalf("a capture after the cancel: %v, want ErrUnexpectedState", err)
		}
		if read, err := p.Get(ctx, held.ID); err != nil || read.Status != provider.StatusCanceled {
			t.Fatalf("Get = %+v, %v", read, err)
		}
	})

	t.Run("cancel a payment waiting for the customer; a succeeded one cannot be", func(t *testing.T) {
		p := newProvider(t)
		o := ops(t, p)
		waiting := create(t, p, provider.CreateRequest{Amount: 1000, PaymentMethod: PMThreeDSecure2Required})
		got, err := o.Cancel(ctx, provider.CancelRequest{ID: waiting.ID, Reason: provider.CancelAbandoned, IdempotencyKey: key(t, "waiting")})
		if err != nil || got.Status != provider.StatusCanceled || got.ClientSecret != "" || got.NextAction != nil {
			t.Fatalf("Cancel = %+v, %v", got, err)
		}
		paid := create(t, p, provider.CreateRequest{Amount: 1000, PaymentMethod: "pm_card_visa"})
		if _, err := o.Cancel(ctx, provider.CancelRequest{ID: paid.ID, IdempotencyKey: key(t, "paid")}); !errors.Is(err, provider.ErrUnexpectedState) {
			t.Fatalf("Cancel of a succeeded payment: %v, want ErrUnexpectedState", err)
		}
		if _, err := o.Cancel(ctx, provider.CancelRequest{ID: paid.ID}); !errors.Is(err, provider.ErrMissingIdempotencyKey) {
			t.Fatalf("a keyless cancel: %v", err)
		}
	})

	t.Run("refunds: partial, replayed, the rest, then nothing remains", func(t *testing.T) {
		p := newProvider(t)
		o := ops(t, p)
		paid := create(t, p, provider.CreateRequest{Amount: 2000, PaymentMethod: "pm_card_visa"})
		req := provider.RefundRequest{Payment: paid.ID, Amount: 500, Reason: provider.RefundRequestedByCustomer,
			Metadata: map[string]string{"twice_refund_id": "rf_1"}, IdempotencyKey: key(t, "r1")}
		first, err := o.Refund(ctx, req)
		if err != nil || first.ID == "" || first.Payment != paid.ID || first.Amount != 500 || first.Currency != "usd" ||
			first.Status != provider.RefundSucceeded || first.Reason != provider.RefundRequestedByCustomer ||
			first.Metadata["twice_refund_id"] != "rf_1" || first.Created.IsZero() {
			t.Fatalf("Refund = %+v, %v", first, err)
		}
		again, err := o.Refund(ctx, req)
		if err != nil || again.ID != first.ID {
			t.Fatalf("a repeated refund = %+v, %v; want %s again", again, err, first.ID)
		}
		req.Amount = 501
		if _, err := o.Refund(ctx, req); !errors.Is(err, provider.ErrIdempotencyMismatch) {
			t.Fatalf("the refund key with another amount: %v, want ErrIdempotencyMismatch", err)
		}
		if _, err := o.Refund(ctx, provider.RefundRequest{Payment: paid.ID, Amount: 1501, IdempotencyKey: key(t, "over")}); !errors.Is(err, provider.ErrRefundTooLarge) {
			t.Fatalf("an over-refund: %v, want ErrRefundTooLarge", err)
		}
		if got, err := p.Get(ctx, paid.ID); err != nil || got.Status != provider.StatusSucceeded || got.AmountRefunded != 500 {
			t.Fatalf("partly refunded: %+v, %v; want succeeded with 500 refunded", got, err)
		}
		rest, err := o.Refund(ctx, provider.RefundRequest{Payment: paid.ID, IdempotencyKey: key(t, "rest")})
		if err != nil || rest.Amount != 1500 || rest.Status != provider.RefundSucceeded {
			t.Fatalf("refund of the rest = %+v, %v", rest, err)
		}
		if got, err := p.Get(ctx, paid.ID); err != nil || got.Status != provider.StatusRefunded || got.AmountRefunded != 2000 {
			t.Fatalf("refunded in full: %+v, %v", got, err)
		}
		if _, err := o.Refund(ctx, provider.RefundRequest{Payment: paid.ID, Amount: 1, IdempotencyKey: key(t, "more")}); !errors.Is(err, provider.ErrRefundTooLarge) {
			t.Fatalf("a refund of a refunded payment: %v, want ErrRefundTooLarge", err)
		}
		var listed []provider.Refund
		for r, err := range o.Refunds(ctx, provider.RefundListParams{Payment: paid.ID}) {
			if err != nil {
				t.Fatal(err)
			}
			listed = append(listed, r)
		}
		if len(listed) != 2 || listed[0].ID != rest.ID || listed[1].ID != first.ID || listed[1].Amount != 500 {
			t.Fatalf("Refunds = %+v; want %s then %s (newest first)", listed, rest.ID, first.ID)
		}
		other := create(t, p, provider.CreateRequest{Amount: 100, PaymentMethod: "pm_card_mastercard"})
		for r, err := range o.Refunds(ctx, provider.RefundListParams{Payment: other.ID}) {
			t.Fatalf("a payment without refunds lists %+v, %v", r, err)
		}
	})

	t.Run("a refund of a payment that was not captured is refused", func(t *testing.T) {
		p := newProvider(t)
		o := ops(t, p)
		held := create(t, p, provider.CreateRequest{Amount: 1000, PaymentMethod: "pm_card_visa", CaptureMethod: provider.CaptureManual})
		if _, err := o.Refund(ctx, provider.RefundRequest{Payment: held.ID, IdempotencyKey: key(t, "r")}); !errors.Is(err, provider.ErrUnexpectedState) {
			t.Fatalf("a refund of an authorization: %v, want ErrUnexpectedState", err)
		}
		if _, err := o.Refund(ctx, provider.RefundRequest{Payment: held.ID}); !errors.Is(err, provider.ErrMissingIdempotencyKey) {
			t.Fatalf("a keyless refund: %v", err)
		}
	})

	t.Run("a refund of "+PMRefundFail+" fails later and gives the amount back", func(t *testing.T) {
		p := newProvider(t)
		o := ops(t, p)
		paid := create(t, p, provider.CreateRequest{Amount: 2000, PaymentMethod: PMRefundFail})
		if paid.Status != provider.StatusSucceeded {
			t.Fatalf("Create = %+v; the charge succeeds", paid)
		}
		r, err := o.Refund(ctx, provider.RefundRequest{Payment: paid.ID, Amount: 700, IdempotencyKey: key(t, "r")})
		if err != nil || (r.Status != provider.RefundSucceeded && r.Status != provider.RefundPending) {
			t.Fatalf("Refund = %+v, %v; want it accepted", r, err)
		}
		var failed provider.Refund
		eventually(t, "the refund to fail", func() bool {
			for got, err := range o.Refunds(ctx, provider.RefundListParams{Payment: paid.ID}) {
				if err != nil {
					t.Fatal(err)
				}
				if got.ID == r.ID {
					failed = got
				}
			}
			return failed.Status == provider.RefundFailed
		})
		if failed.FailureReason == "" || failed.Amount != 700 {
			t.Fatalf("failed refund = %+v; want its amount and a failure reason", failed)
		}
		if got, err := p.Get(ctx, paid.ID); err != nil || got.Status != provider.StatusSucceeded || got.AmountRefunded != 0 {
			t.Fatalf("after the failure: %+v, %v; want succeeded with nothing refunded", got, err)
		}
		// The amount is refundable again.
		if again, err := o.Refund(ctx, provider.RefundRequest{Payment: paid.ID, Amount: 2000, IdempotencyKey: key(t, "again")}); err != nil || again.Amount != 2000 {
			t.Fatalf("a refund of the restored amount = %+v, %v", again, err)
		}
	})
}
