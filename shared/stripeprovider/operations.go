package stripeprovider

import (
	"context"
	"errors"
	"iter"
	"net/http"

	"github.com/runtwice/twice/shared/provider"
	"github.com/stripe/stripe-go/v82"
)

var _ provider.Operations = (*Client)(nil)

// Capture captures a requires_capture PaymentIntent (POST /v1/payment_intents/{id}/capture),
// amount_to_capture when given. The answer expands latest_charge, so AmountRefunded and the
// charge id are current.
func (c *Client) Capture(ctx context.Context, req provider.CaptureRequest) (provider.Payment, error) {
	if req.IdempotencyKey == "" {
		return provider.Payment{}, provider.ErrMissingIdempotencyKey
	}
	params := &stripe.PaymentIntentCaptureParams{}
	if req.AmountToCapture > 0 {
		params.AmountToCapture = stripe.Int64(req.AmountToCapture)
	}
	params.AddExpand("latest_charge")
	params.IdempotencyKey = stripe.String(req.IdempotencyKey)
	ctx, ex := withExchange(ctx)
	pi, err := c.sc.V1PaymentIntents.Capture(ctx, req.ID, params)
	return c.result("capture", req.IdempotencyKey, pi, err, ex)
}

// Cancel cancels a PaymentIntent (POST /v1/payment_intents/{id}/cancel) with
// cancellation_reason when given.
func (c *Client) Cancel(ctx context.Context, req provider.CancelRequest) (provider.Payment, error) {
	if req.IdempotencyKey == "" {
		return provider.Payment{}, provider.ErrMissingIdempotencyKey
	}
	params := &stripe.PaymentIntentCancelParams{}
	setString(&params.CancellationReason, string(req.Reason))
	params.AddExpand("latest_charge")
	params.IdempotencyKey = stripe.String(req.IdempotencyKey)
	ctx, ex := withExchange(ctx)
	pi, err := c.sc.V1PaymentIntents.Cancel(ctx, req.ID, params)
	return c.result("cancel", req.IdempotencyKey, pi, err, ex)
}

// Refund creates a Refund of a PaymentIntent (POST /v1/refunds with payment_intent), amount
// when given, else all that remains.
func (c *Client) Refund(ctx context.Context, req provider.RefundRequest) (provider.Refund, error) {
	if req.IdempotencyKey == "" {
		return provider.Refund{}, provider.ErrMissingIdempotencyKey
	}
	if req.Payment == "" {
		return provider.Refund{}, &provider.PermanentError{Op: "refund", StatusCode: http.StatusBadRequest,
			Code: "parameter_missing", Err: errors.New("stripeprovider: no payment to refund")}
	}
	params := &stripe.RefundCreateParams{PaymentIntent: stripe.String(req.Payment), Metadata: req.Metadata}
	if req.Amount > 0 {
		params.Amount = stripe.Int64(req.Amount)
	}
	setString(&params.Reason, string(req.Reason))
	params.IdempotencyKey = stripe.String(req.IdempotencyKey)
	ctx, ex := withExchange(ctx)
	r, err := c.sc.V1Refunds.Create(ctx, params)
	if err != nil {
		return provider.Refund{}, c.mapError("refund", req.IdempotencyKey, err, ex)
	}
	out := toRefund(r)
	if out.Payment == "" {
		out.Payment = req.Payment
	}
	return out, nil
}

// Refunds lists a PaymentIntent's Refunds (GET /v1/refunds?payment_intent=), newest first,
// ListPageSize at a time.
func (c *Client) Refunds(ctx context.Context, p provider.RefundListParams) iter.Seq2[provider.Refund, error] {
	return func(yield func(provider.Refund, error) bool) {
		if p.Payment == "" {
			yield(provider.Refund{}, &provider.PermanentError{Op: "refunds", StatusCode: http.StatusBadRequest,
				Code: "parameter_missing", Err: errors.New("stripeprovider: no payment to list refunds of")})
			return
		}
		params := &stripe.RefundListParams{PaymentIntent: stripe.String(p.Payment)}
		params.Limit = stripe.Int64(ListPageSize)
		setString(&params.StartingAfter, p.StartingAfter)
		ctx, ex := withExchange(ctx)
		for r, err := range c.sc.V1Refunds.List(ctx, params) {
			if err != nil {
				yield(provider.Refund{}, c.mapError("refunds", "", err, ex))
				return
			}
			out := toRefund(r)
			if out.Payment == "" {
				out.Payment = p.Payment
			}
			if !yield(out, nil) {
				return
			}
		}
	}
}
