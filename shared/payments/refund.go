package payments

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/problem"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
)

// RefundRequest is the body of POST /payments/{id}/refunds. Amount 0 (absent) refunds what
// remains.
type RefundRequest struct {
	Amount int64  `json:"amount,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// MaxRefundBody is the largest refund body accepted: two small fields.
const MaxRefundBody = 4 << 10

// maxRefundReason caps the caller's reason: Stripe's metadata values stop at 500 characters.
const maxRefundReason = 500

// providerReasons are the reasons Stripe takes as a refund's reason; any other text travels as
// metadata (MetaRefundReason).
var providerReasons = map[string]provider.RefundReason{
	string(provider.RefundDuplicate): provider.RefundDuplicate, string(provider.RefundFraudulent): provider.RefundFraudulent,
	string(provider.RefundRequestedByCustomer): provider.RefundRequestedByCustomer,
}

// MetaRefundReason carries a caller's reason that is none of the provider's own words.
const MetaRefundReason = "twice_refund_reason"

// ParseRefundRequest decodes and validates a refund body. An empty body is {} (refund what
// remains). Unknown fields, wrong types, a name twice and trailing data are malformed; values
// out of range are invalid with a reason per field.
func ParseRefundRequest(body []byte) (RefundRequest, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return RefundRequest{}, nil
	}
	if name, dup := duplicateName(body); dup {
		return RefundRequest{}, &MalformedError{Reason: capReason(fmt.Sprintf("field %q appears more than once", name))}
	}
	var raw struct {
		Amount *int64  `json:"amount"`
		Reason *string `json:"reason"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return RefundRequest{}, &MalformedError{Reason: capReason(describeDecodeError(err))}
	}
	if _, err := dec.Token(); err != io.EOF {
		return RefundRequest{}, &MalformedError{Reason: "unexpected data after the JSON object"}
	}
	if !bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) {
		return RefundRequest{}, &MalformedError{Reason: "the body must be a JSON object"}
	}
	var req RefundRequest
	bad := map[string]string{}
	if raw.Amount != nil {
		req.Amount = *raw.Amount
		if req.Amount <= 0 || req.Amount > maxAmount {
			bad["amount"] = fmt.Sprintf("must be a whole number of minor units from 1 to %d; leave it out to refund what remains", maxAmount)
		}
	}
	if raw.Reason != nil {
		req.Reason = *raw.Reason
		if len(req.Reason) > maxRefundReason || !utf8.ValidString(req.Reason) || hasControl(req.Reason) {
			bad["reason"] = fmt.Sprintf("must be text of at most %d bytes without control characters", maxRefundReason)
		}
	}
	if len(bad) > 0 {
		return RefundRequest{}, &InvalidError{Fields: bad}
	}
	return req, nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// fingerprint is the request's identity under its key: the payment it refunds and the parsed
// fields, canonical, so a key sent again for another payment is a mismatch naming "payment".
func (r RefundRequest) fingerprint(paymentID string) idempotency.Fingerprint {
	b, _ := json.Marshal(struct {
		Payment string `json:"payment"`
		RefundRequest
	}{paymentID, r})
	fp, err := idempotency.FingerprintJSON(b)
	if err != nil {
		fp = idempotency.FingerprintBytes(b)
	}
	return fp
}

// RefundView is the API's shape of a refund.
type RefundView struct {
	ID               string  `json:"id"`
	Payment          string  `json:"payment"`
	Amount           int64   `json:"amount"`
	Currency         string  `json:"currency"`
	Status           string  `json:"status"`
	Reason           *string `json:"reason"`
	ProviderRefundID *string `json:"provider_refund_id"`
	// FailureReason says why a failed refund failed, in the provider's words.
	FailureReason *string `json:"failure_reason,omitempty"`
	CreatedAt     string  `json:"created_at"`
}

// View returns the API shape of a refund of paymentID: reserved reads pending (the provider has
// not answered yet) and canceled reads failed (the money did not go back), with the reason.
func (e RefundEntry) View(paymentID string) RefundView {
	v := RefundView{ID: e.ID, Payment: paymentID, Amount: e.Amount, Currency: e.Currency, Status: e.Status,
		Reason: nonEmpty(e.Reason), ProviderRefundID: nonEmpty(e.ProviderRefundID), CreatedAt: e.CreatedAt.UTC().Format(time.RFC3339)}
	switch e.Status {
	case provider.RefundReserved:
		v.Status = provider.RefundPending
	case provider.RefundCanceled:
		v.Status = provider.RefundFailed
		v.FailureReason = nonEmpty(provider.RefundCanceled)
	case provider.RefundFailed:
		v.FailureReason = nonEmpty(e.FailureReason)
	}
	return v
}

// RefundViews is the list GET /payments/{id} shows, oldest first.
func (l RefundLedger) RefundViews() []RefundView {
	out := make([]RefundView, 0, len(l.Refunds))
	for _, e := range l.Refunds {
		out = append(out, e.View(l.PaymentID))
	}
	return out
}

// refund runs one refund request under its key's lease: reserve on the ledger (a checkpoint of
// the key), ask the provider with the key derived from ours, record its answer.
func (s *Service) refund(ctx context.Context, scope, key, paymentID string, req RefundRequest, l *idempotency.Lease) (idempotency.Result, error) {
	ops, ok := s.Provider.(provider.Operations)
	if !ok {
		s.log().ErrorContext(ctx, "payment provider cannot refund", "payment_id", paymentID)
		return noPayment(Answer{Kind: Internal}), nil
	}
	id := RefundID(scope, key)
	checkpoint := func(source string) RefundUpdate {
		return RefundUpdate{PaymentID: paymentID, Now: s.now(), Source: source,
			Commit: func(ctx context.Context, ws []store.Write) error { return s.Keeper.Checkpoint(ctx, l, ws...) }}
	}
	var entry RefundEntry
	var refusal *idempotency.Response
	p, _, err := UpdateRefunds(ctx, s.Store, checkpoint("api"), func(p *Payment, led *RefundLedger) error {
		refusal = nil
		if e, ok := led.Entry(id); ok {
			entry = *e // a retry of this request: its reservation stands
			return ErrNoChange
		}
		if p.Status != provider.StatusSucceeded && p.Status != provider.StatusRefunded {
			r := problemResponse(notRefundable(*p))
			refusal = &r
			return ErrNoChange
		}
		remaining := led.Remaining(Captured(*p))
		amount := req.Amount
		if amount == 0 {
			amount = remaining
		}
		if amount == 0 || amount > remaining {
			r := problemResponse(tooLarge(*p, amount, remaining))
			refusal = &r
			return ErrNoChange
		}
		now := s.now().UTC()
		entry = RefundEntry{ID: id, Key: key, ProviderKey: provider.RefundKey(scope, key), Amount: amount, Currency: p.Currency,
			Status: provider.RefundReserved, Reason: req.Reason, CreatedAt: now, UpdatedAt: now}
		led.Refunds = append(led.Refunds, entry)
		return nil
	})
	if err != nil {
		return idempotency.Result{}, err
	}
	if refusal != nil {
		// Not stored: the answer depends on the payment's state, which may change (a failed
		// refund gives its amount back), so the key stays free.
		s.log().InfoContext(ctx, "refund refused", "payment_id", paymentID, "refund_id", id, "status", refusal.Status)
		return idempotency.Result{Response: *refusal}, nil
	}
	if entry.Status != provider.RefundReserved {
		// The provider already answered an earlier run (its refund events may have too).
		return s.refundAnswer(entry, paymentID, http.StatusCreated)
	}
	// An earlier run under this key may have reached the provider (a resumed pending key, or a
	// lock taken over from a holder that died): its reservation stays until the provider says.
	mayHaveRefunded := l.Request != nil || l.FirstTried.Before(l.AcquiredAt)
	tries := 0
	if mayHaveRefunded {
		tries = l.Tries
	}
	pending := func(err error) (idempotency.Result, error) {
		s.log().WarnContext(ctx, "refund outcome unknown; the amount stays reserved and the key pending", "payment_id", paymentID,
			"refund_id", id, "error", err)
		return s.refundPending(entry, scope, key, paymentID, req, tries)
	}
	created := func(pr provider.Refund) (idempotency.Result, error) {
		_, led, err := UpdateRefunds(ctx, s.Store, checkpoint("api"), func(_ *Payment, led *RefundLedger) error {
			// The answer is this request's refund, whatever metadata the provider echoes.
			pr.Metadata = map[string]string{MetaRefundID: id}
			if !led.Report(pr, s.now()) {
				return ErrNoChange
			}
			return nil
		})
		if err != nil {
			return idempotency.Result{}, err
		}
		if e, ok := led.Entry(id); ok {
			entry = *e
		}
		s.log().InfoContext(ctx, "refund created", "payment_id", paymentID, "refund_id", id, "provider_refund_id", pr.ID,
			"amount", entry.Amount, "status", entry.Status)
		return s.refundAnswer(entry, paymentID, http.StatusCreated)
	}
	if age := s.now().Sub(l.FirstTried); mayHaveRefunded && age >= s.resendWithin() {
		// Past half the provider's key horizon the repeat may no longer be recognised: look
		// for the refund by our id in its metadata first.
		found, err := findRefund(ctx, ops, p.ProviderPaymentID, id)
		switch {
		case err != nil:
			return pending(err)
		case found != nil:
			s.log().InfoContext(ctx, "pending refund found at the provider; adopted", "payment_id", paymentID, "refund_id", id)
			return created(*found)
		case age >= s.keyHorizon()-settleMargin:
			return s.refundNeverMade(ctx, checkpoint("resolver"), entry, paymentID, age)
		}
	}
	meta := map[string]string{MetaPaymentID: paymentID, MetaRefundID: id}
	reason, known := providerReasons[entry.Reason]
	if !known && entry.Reason != "" {
		meta[MetaRefundReason] = entry.Reason
	}
	pr, err := ops.Refund(ctx, provider.RefundRequest{Payment: p.ProviderPaymentID, Amount: entry.Amount, Reason: reason,
		Metadata: meta, IdempotencyKey: entry.ProviderKey})
	var unknown *provider.UnknownOutcomeError
	var throttled *provider.ThrottledError
	var permanent *provider.PermanentError
	switch {
	case err == nil:
		return created(pr)
	case errors.As(err, &unknown) || mayHaveRefunded && !errors.As(err, &permanent):
		return pending(err)
	}
	// The provider did not refund: give the reservation back.
	if _, _, uerr := UpdateRefunds(ctx, s.Store, checkpoint("api"), func(_ *Payment, led *RefundLedger) error {
		if !led.remove(id) {
			return ErrNoChange
		}
		return nil
	}); uerr != nil {
		return idempotency.Result{}, uerr
	}
	switch {
	case errors.As(err, &throttled):
		return s.unavailable(max(throttled.RetryAfter, time.Second))
	case errors.Is(err, provider.ErrIdempotencyMismatch):
		s.log().ErrorContext(ctx, "provider idempotency mismatch on a refund", "payment_id", paymentID, "refund_id", id, "error", err)
		return noPayment(Answer{Kind: Internal}), nil
	case errors.As(err, &permanent):
		s.log().WarnContext(ctx, "refund rejected by the provider; reservation released", "payment_id", paymentID,
			"refund_id", id, "code", permanent.Code)
		res := noPayment(Answer{Kind: Rejected, ProviderCode: permanent.Code})
		res.Final = true
		return res, nil
	case errors.As(err, new(*provider.TransientError)):
		return s.unavailable(time.Second)
	}
	s.log().ErrorContext(ctx, "refund provider call failed", "payment_id", paymentID, "refund_id", id, "error", err)
	return noPayment(Answer{Kind: Unreachable}), nil
}

// refundPending is the interim answer of a refund whose outcome is unknown: 202 with the
// refund as it stands (its amount reserved), kept under the key with the caller's request and,
// in the same transaction, the outbox message that queues its resolution: the resolver repeats
// the refund under the same provider key (Service.ResolveRefund), so a caller that never
// retries still gets its reservation settled and its key completed.
func (s *Service) refundPending(e RefundEntry, scope, key, paymentID string, req RefundRequest, tries int) (idempotency.Result, error) {
	res, err := s.refundAnswer(e, paymentID, http.StatusAccepted)
	if err != nil {
		return res, err
	}
	res.Final, res.Pending = false, true
	if res.Request, err = json.Marshal(req); err != nil {
		return res, err
	}
	job := ResolveJob{Scope: scope, Key: key, PaymentID: paymentID, Refund: e.ID, Attempt: tries + 1}
	w, err := outbox.New(KindResolve, fmt.Sprintf("resolve#%s#%d", e.ID, job.Attempt), job, s.now())
	if err != nil {
		return res, err
	}
	res.Effects = append(res.Effects, w)
	return res, nil
}

// findRefund looks for our refund id among the provider's refunds of a payment (nil: none).
func findRefund(ctx context.Context, ops provider.Operations, providerPaymentID, id string) (*provider.Refund, error) {
	for r, err := range ops.Refunds(ctx, provider.RefundListParams{Payment: providerPaymentID}) {
		if err != nil {
			return nil, err
		}
		if r.Metadata[MetaRefundID] == id {
			return &r, nil
		}
	}
	return nil, nil
}

// RefundNeverMade is the failure reason of a refund whose outcome was unknown and that the
// provider does not hold near the end of its key horizon: it never took effect, and its key is
// never sent again.
const RefundNeverMade = "never_reached_provider"

// refundNeverMade settles a pending refund the provider does not hold near its key horizon as
// failed: its amount is refundable again, a dead-letter record says so (as for any failed
// refund), and the key answers the failed refund from now on; a new key refunds again.
func (s *Service) refundNeverMade(ctx context.Context, u RefundUpdate, e RefundEntry, paymentID string, age time.Duration) (idempotency.Result, error) {
	s.log().WarnContext(ctx, "pending refund never reached the provider; settled as failed", "payment_id", paymentID,
		"refund_id", e.ID, "age", age)
	_, led, err := UpdateRefunds(ctx, s.Store, u, func(_ *Payment, led *RefundLedger) error {
		le, ok := led.Entry(e.ID)
		if !ok || le.Status != provider.RefundReserved {
			return ErrNoChange
		}
		le.Status, le.FailureReason, le.UpdatedAt = provider.RefundFailed, RefundNeverMade, s.now().UTC()
		return nil
	})
	if err != nil {
		return idempotency.Result{}, err
	}
	if le, ok := led.Entry(e.ID); ok {
		e = *le
	}
	return s.refundAnswer(e, paymentID, http.StatusCreated)
}

// keyHorizon is how long the provider remembers an idempotency key.
func (s *Service) keyHorizon() time.Duration {
	if h, ok := s.Provider.(provider.Searcher); ok {
		return h.KeyHorizon()
	}
	return provider.StripeKeyHorizon
}

// refundAnswer is the stored answer of a refund the provider took (or may have taken): the
// refund as it stands.
func (s *Service) refundAnswer(e RefundEntry, paymentID string, status int) (idempotency.Result, error) {
	body, err := json.Marshal(e.View(paymentID))
	if err != nil {
		return idempotency.Result{}, err
	}
	return idempotency.Result{Final: true, Response: idempotency.Response{Status: status, Body: body,
		Header: map[string]string{"Content-Type": "application/json", "Location": "/payments/" + paymentID}}}, nil
}

// notRefundable is the answer to a refund of a payment that has not succeeded.
func notRefundable(p Payment) problem.Problem {
	pr := problem.New(problem.PaymentNotRefundable,
		"Payment "+p.ID+" is "+p.Status+"; only a succeeded payment can be refunded.")
	pr.Extra = map[string]any{"payment_status": p.Status}
	return pr
}

// tooLarge is the answer to a refund of more than remains: it names what remains.
func tooLarge(p Payment, amount, remaining int64) problem.Problem {
	detail := "This refund of " + strconv.FormatInt(amount, 10) + " is more than remains refundable on payment " + p.ID +
		": " + strconv.FormatInt(remaining, 10) + " " + p.Currency + "."
	if amount == 0 {
		detail = "Nothing remains refundable on payment " + p.ID + "."
	}
	pr := problem.New(problem.RefundTooLarge, detail)
	pr.Extra = map[string]any{"remaining": remaining, "currency": p.Currency, "amount_refunded": p.AmountRefunded}
	return pr
}

// RefundRequestProblem is the answer to a refund body that cannot be processed as sent.
func RefundRequestProblem(err error) problem.Problem {
	var invalid *InvalidError
	var malformed *MalformedError
	switch {
	case errors.As(err, &invalid):
		p := problem.New(problem.InvalidRequest, "The request body is not a valid refund request.").WithFields(invalid.Names())
		p.Extra["reasons"] = invalid.Fields
		return p
	case errors.As(err, &malformed):
		return problem.New(problem.MalformedRequest, "The request body is not a valid refund request: "+malformed.Reason+".")
	}
	return problem.New(problem.MalformedRequest, "The request body is not a valid refund request.")
}
