package payments

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/provider"
)

// Capture and cancel: POST /payments/{id}/capture and /cancel. Each runs under the caller's
// Idempotency-Key with the semantics of POST /payments (a completed answer replays byte for
// byte, a key in flight is 409, another body or another payment under the key 422), in a key
// space of its own per operation (opScope), and sends the provider a key derived from ours
// (provider.CaptureKey, provider.CancelKey), so a repeat after a crash captures once.

// The operations on an existing payment.
const (
	opCapture = "capture"
	opCancel  = "cancel"
)

// CaptureRequest is the body of POST /payments/{id}/capture.
type CaptureRequest struct {
	// AmountToCapture is what to take, at most the amount held; absent: all of it.
	AmountToCapture int64 `json:"amount_to_capture,omitempty"`
}

// CancelRequest is the body of POST /payments/{id}/cancel.
type CancelRequest struct {
	// Reason is the provider's: duplicate, fraudulent, requested_by_customer or abandoned.
	Reason string `json:"reason,omitempty"`
}

var cancelReasons = []provider.CancelReason{provider.CancelDuplicate, provider.CancelFraudulent,
	provider.CancelRequestedByCustomer, provider.CancelAbandoned}

// ParseCaptureRequest decodes and checks a capture body; an empty body, or one without
// amount_to_capture, captures all. An explicit 0 is refused rather than read as "all": the
// document says minimum 1, and a caller who computed 0 to capture has a bug we should not
// turn into taking the whole hold.
func ParseCaptureRequest(body []byte) (CaptureRequest, error) {
	var raw struct {
		AmountToCapture *int64 `json:"amount_to_capture"`
	}
	if err := decodeStrict(body, &raw); err != nil {
		return CaptureRequest{}, err
	}
	if raw.AmountToCapture == nil {
		return CaptureRequest{}, nil
	}
	req := CaptureRequest{AmountToCapture: *raw.AmountToCapture}
	if req.AmountToCapture < 1 || req.AmountToCapture > maxAmount {
		return CaptureRequest{}, &InvalidError{Fields: map[string]string{"amount_to_capture": fmt.Sprintf(
			"must be a whole number of minor units from 1 to %d; leave it out to capture all that is held", maxAmount)}}
	}
	return req, nil
}

// ParseCancelRequest decodes and checks a cancel body; an empty body gives no reason.
func ParseCancelRequest(body []byte) (CancelRequest, error) {
	var req CancelRequest
	if err := decodeStrict(body, &req); err != nil {
		return req, err
	}
	ok := req.Reason == ""
	for _, r := range cancelReasons {
		ok = ok || req.Reason == string(r)
	}
	if !ok {
		return req, &InvalidError{Fields: map[string]string{"reason": "must be one of duplicate, fraudulent, requested_by_customer, abandoned"}}
	}
	return req, nil
}

// decodeStrict decodes a small JSON object body as ParseCreateRequest does: unknown fields,
// names given twice, wrong types and trailing data are malformed. An empty body is {}.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if name, dup := duplicateName(body); dup {
		return &MalformedError{Reason: capReason(fmt.Sprintf("field %q appears more than once", name))}
	}
	if !bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) {
		return &MalformedError{Reason: "the body must be a JSON object"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &MalformedError{Reason: capReason(describeDecodeError(err))}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &MalformedError{Reason: "unexpected data after the JSON object"}
	}
	return nil
}

// opScope is the idempotency scope of an operation on payments: a key space per operation
// and caller, so one key string used for a create and a capture names two requests, as the
// provider keys do. Real scopes start "jwt:" or "iam:", or are "local", so no caller's own
// scope is ever one of these.
func opScope(op, scope string) string { return op + ":" + scope }

// opFingerprint is the fingerprint of an operation: the payment it acts on and the body as
// parsed, so one key used on two payments is a mismatch naming "payment".
func opFingerprint(paymentID string, req any) idempotency.Fingerprint {
	b, _ := json.Marshal(req)
	var fields map[string]any
	_ = json.Unmarshal(b, &fields)
	if fields == nil {
		fields = map[string]any{}
	}
	fields["payment"] = paymentID
	b, _ = json.Marshal(fields)
	fp, err := idempotency.FingerprintJSON(b)
	if err != nil {
		fp = idempotency.FingerprintBytes(b)
	}
	return fp
}

func (s *Service) serveCapture(r *http.Request, scope string) (reply, error) {
	key, body, err := readRequest(r)
	if err != nil {
		return reply{}, err
	}
	req, err := ParseCaptureRequest(body)
	if err != nil {
		return reply{}, fmt.Errorf("%w: %w", errBadPayment, err)
	}
	p, err := s.payment(r.Context(), r.PathValue("id"), scope)
	if err != nil {
		return reply{}, err
	}
	if req.AmountToCapture > p.Amount {
		return reply{}, fmt.Errorf("%w: %w", errBadPayment, &InvalidError{Fields: map[string]string{"amount_to_capture": fmt.Sprintf("must be at most the payment's amount, %d", p.Amount)}})
	}
	out, err := s.Keeper.Run(r.Context(), opScope(opCapture, scope), key, opFingerprint(p.ID, req), func(ctx context.Context, _ *idempotency.Lease) (idempotency.Result, error) {
		return s.operate(ctx, p, opCapture, func(ops provider.Operations, p Payment) (provider.Payment, error) {
			return ops.Capture(ctx, provider.CaptureRequest{ID: p.ProviderPaymentID, AmountToCapture: req.AmountToCapture,
				IdempotencyKey: provider.CaptureKey(scope, key)})
		})
	})
	return outcome(key, out, err)
}

func (s *Service) serveCancel(r *http.Request, scope string) (reply, error) {
	key, body, err := readRequest(r)
	if err != nil {
		return reply{}, err
	}
	req, err := ParseCancelRequest(body)
	if err != nil {
		return reply{}, fmt.Errorf("%w: %w", errBadPayment, err)
	}
	p, err := s.payment(r.Context(), r.PathValue("id"), scope)
	if err != nil {
		return reply{}, err
	}
	out, err := s.Keeper.Run(r.Context(), opScope(opCancel, scope), key, opFingerprint(p.ID, req), func(ctx context.Context, _ *idempotency.Lease) (idempotency.Result, error) {
		return s.operate(ctx, p, opCancel, func(ops provider.Operations, p Payment) (provider.Payment, error) {
			return ops.Cancel(ctx, provider.CancelRequest{ID: p.ProviderPaymentID, Reason: provider.CancelReason(req.Reason),
				IdempotencyKey: provider.CancelKey(scope, key)})
		})
	})
	return outcome(key, out, err)
}

// operate runs one provider operation on p and answers it like a create: 200 with the payment
// as the provider left it (stored with the key, the payment written if newer, the change
// published); the payment's state not allowing it 409 (stored: the answer to this request);
// another refusal 422 (stored); a busy, unreachable or unknown outcome frees the key, since a
// repeat sends the same provider key and cannot act twice.
func (s *Service) operate(ctx context.Context, p Payment, op string, call func(provider.Operations, Payment) (provider.Payment, error)) (idempotency.Result, error) {
	// Read again under the key: what a webhook wrote since is kept, not overwritten.
	p, err := Get(ctx, s.Store, p.ID)
	if err != nil {
		return idempotency.Result{}, err
	}
	if p.ProviderPaymentID == "" {
		res := noPayment(Answer{Kind: Conflict, Payment: p})
		res.Final = false // the create's outcome is still being resolved: try again later
		return res, nil
	}
	ops, ok := s.Provider.(provider.Operations)
	if !ok {
		return noPayment(Answer{Kind: Internal}), nil
	}
	pp, err := call(ops, p)
	var unknown *provider.UnknownOutcomeError
	var throttled *provider.ThrottledError
	var transient *provider.TransientError
	var permanent *provider.PermanentError
	switch {
	case err == nil:
		s.log().InfoContext(ctx, "payment "+op+" done", "payment_id", p.ID, "status", pp.Status)
		p.Observe(pp, s.Classify, s.now())
		return s.final(ctx, p, Operated, "")
	case errors.Is(err, provider.ErrUnexpectedState):
		res := noPayment(Answer{Kind: Conflict, Payment: p, ProviderCode: op})
		res.Final = true
		return res, nil
	case errors.As(err, &unknown):
		s.log().WarnContext(ctx, "payment "+op+" outcome unknown; the key is free for a repeat", "payment_id", p.ID, "error", err)
		return noPayment(Answer{Kind: Unreachable}), nil
	case errors.As(err, &throttled):
		return s.unavailable(max(throttled.RetryAfter, time.Second))
	case errors.As(err, &transient):
		return s.unavailable(time.Second)
	case errors.Is(err, provider.ErrIdempotencyMismatch):
		s.log().ErrorContext(ctx, "provider idempotency mismatch", "payment_id", p.ID, "op", op, "error", err)
		return noPayment(Answer{Kind: Internal}), nil
	case errors.As(err, &permanent):
		res := noPayment(Answer{Kind: Rejected, ProviderCode: permanent.Code})
		res.Final = true
		return res, nil
	default:
		s.log().ErrorContext(ctx, "payment "+op+" failed", "payment_id", p.ID, "error", err)
		return noPayment(Answer{Kind: Unreachable}), nil
	}
}
