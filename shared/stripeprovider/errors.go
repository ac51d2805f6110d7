package stripeprovider

import (
	"errors"
	"net/http"

	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/retry"
	"github.com/stripe/stripe-go/v82"
)

// mapError turns what stripe-go returned into the typed errors of package provider. The class
// comes from package retry (the one place that classifies outbound results); this function only
// adds what Stripe's answer says (the declined payment, the error code, Retry-After).
func (c *Client) mapError(op, key string, err error, ex *exchange) error {
	var se *stripe.Error
	if errors.As(err, &se) && se.HTTPStatusCode != 0 {
		var header http.Header
		if se.LastResponse != nil {
			header = se.LastResponse.Header
		}
		return c.statusError(op, key, se.HTTPStatusCode, header, se, err)
	}
	if ex.status != 0 {
		// A response arrived that stripe-go could not decode (an HTML 502 from a proxy).
		return c.statusError(op, key, ex.status, ex.header, nil, err)
	}
	if retry.ClassifyTransport(err) == retry.Transient {
		return &provider.TransientError{Op: op, Err: err}
	}
	return &provider.UnknownOutcomeError{Op: op, IdempotencyKey: key, Err: err}
}

func (c *Client) statusError(op, key string, status int, header http.Header, se *stripe.Error, err error) error {
	switch retry.ClassifyStatus(status) {
	case retry.Decline:
		if se != nil && se.Type == stripe.ErrorTypeCard {
			return &provider.DeclineError{Payment: declinedPayment(se)}
		}
		return &provider.PermanentError{Op: op, StatusCode: status, Code: errorCode(se), Err: err}
	case retry.Throttled:
		wait, _ := retry.ParseRetryAfter(header.Get("Retry-After"), c.now())
		return &provider.ThrottledError{Op: op, RetryAfter: wait, Err: err}
	case retry.Transient:
		if key != "" {
			// A write that failed with a 5xx may have been applied before the failure.
			return &provider.UnknownOutcomeError{Op: op, IdempotencyKey: key, StatusCode: status, Err: err}
		}
		return &provider.TransientError{Op: op, StatusCode: status, Err: err}
	case retry.UnknownOutcome, retry.Success:
		// 409 (the same key in flight) or a 2xx whose body could not be read.
		return &provider.UnknownOutcomeError{Op: op, IdempotencyKey: key, StatusCode: status, Err: err}
	case retry.Credentials:
		return &provider.CredentialsError{Op: op, StatusCode: status, Err: err}
	default:
		return &provider.PermanentError{Op: op, StatusCode: status, Code: errorCode(se), Err: err}
	}
}

func errorCode(se *stripe.Error) string {
	switch {
	case se == nil:
		return ""
	case se.Type == stripe.ErrorTypeIdempotency:
		return string(stripe.ErrorTypeIdempotency)
	case se.Code != "":
		return string(se.Code)
	}
	return string(se.Type)
}

// declinedPayment is the PaymentIntent a card error carries, marked declined with the error's
// decline fields (the error object is the freshest word on this attempt).
func declinedPayment(se *stripe.Error) provider.Payment {
	var raw []byte
	if se.LastResponse != nil {
		raw = se.LastResponse.RawJSON
	}
	var p provider.Payment
	if se.PaymentIntent != nil {
		p = toPayment(se.PaymentIntent, nil)
	}
	p.Status = provider.StatusDeclined
	p.Decline = toDecline(se, adviceFromErrorBody(raw))
	if p.PaymentMethod == "" && se.PaymentMethod != nil {
		p.PaymentMethod = se.PaymentMethod.ID
	}
	if c := toCard(se.PaymentMethod); c != nil {
		p.Card = c
	}
	return p
}
