package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/problem"
)

// MaxBody is the largest POST /payments body accepted.
const MaxBody = 64 << 10

// Handler serves POST /payments, GET /payments/{id} and POST /payments/{id}/capture and
// /cancel. scope names the caller of a request
// (the API Gateway authorizer's principal; "local" locally): keys and payments never cross
// scopes.
func (s *Service) Handler(scope func(*http.Request) string) http.Handler {
	mux := http.NewServeMux()
	for _, r := range s.routes(scope) {
		mux.HandleFunc(r.pattern, r.fn)
	}
	return mux
}

// Routes lists the ServeMux patterns Handler serves: what API Gateway's route table and the
// API document must each cover.
func Routes() []string {
	var out []string
	for _, r := range (&Service{}).routes(nil) {
		out = append(out, r.pattern)
	}
	return out
}

type route struct {
	pattern string
	fn      http.HandlerFunc
}

// routes is the one table Handler and Routes read.
func (s *Service) routes(scope func(*http.Request) string) []route {
	return []route{
		// Recovery of a decline and resolution of an unknown outcome are outbox messages
		// committed with the answer; nothing runs after the commit.
		{"POST /payments", func(w http.ResponseWriter, r *http.Request) { s.serveCreate(w, r, scope(r)) }},
		{"GET /payments/{id}", func(w http.ResponseWriter, r *http.Request) { s.serveGet(w, r, scope(r)) }},
		{"POST /payments/{id}/refunds", func(w http.ResponseWriter, r *http.Request) { s.serveRefund(w, r, scope(r)) }},
		{"POST /payments/{id}/capture", func(w http.ResponseWriter, r *http.Request) { s.serveCapture(w, r, scope(r)) }},
		{"POST /payments/{id}/cancel", func(w http.ResponseWriter, r *http.Request) { s.serveCancel(w, r, scope(r)) }},
	}
}

func (s *Service) serveGet(w http.ResponseWriter, r *http.Request, scope string) {
	p, err := Get(r.Context(), s.Store, r.PathValue("id"))
	if errors.Is(err, ErrNotFound) || (err == nil && p.Scope != scope) {
		problem.Write(w, problem.New(problem.NotFound, "No payment has this id."))
		return
	}
	if err != nil {
		s.log().ErrorContext(r.Context(), "read payment", "error", err)
		problem.Write(w, problem.New(problem.Internal, "The payment could not be read; retry."))
		return
	}
	v := p.View()
	if err := s.addRefunds(r.Context(), &v, p); err != nil {
		s.log().ErrorContext(r.Context(), "read payment refunds", "payment_id", p.ID, "error", err)
		problem.Error(w, http.StatusInternalServerError, "The payment could not be read; retry.")
		return
	}
	if err := s.addRecovery(r.Context(), &v, p); err != nil {
		s.log().ErrorContext(r.Context(), "read payment recovery", "payment_id", p.ID, "error", err)
		problem.Error(w, http.StatusInternalServerError, "The payment could not be read; retry.")
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// serveCreate is POST /payments in a straight line: the key and the body are read once, the
// body parsed and fingerprinted once, create runs under the key (Keeper.Run), and the key's
// outcome is written by the one mapping of outcomes to HTTP (Keeper.WriteOutcome). An invalid
// request is answered before the key is touched, so the key stays free for a corrected one.
func (s *Service) serveCreate(w http.ResponseWriter, r *http.Request, scope string) {
	key, body, ok := idempotency.ReadRequest(w, r, MaxBody)
	if !ok {
		return
	}
	req, err := ParseCreateRequest(body)
	if err != nil {
		problem.Write(w, RequestProblem(err))
		return
	}
	fp := FingerprintBody(body)
	out, err := s.Keeper.Run(r.Context(), scope, key, fp, func(ctx context.Context, l *idempotency.Lease) (idempotency.Result, error) {
		run, sent := req, body
		if l.Request != nil {
			// A resumed pending key runs from the bytes its first request sent, as the
			// background resolver does.
			if run, err = ParseCreateRequest(l.Request); err != nil {
				return idempotency.Result{}, fmt.Errorf("payments: stored request of %s: %w", PaymentID(scope, key), err)
			}
			sent = l.Request
		}
		res, err := s.create(ctx, scope, key, run, l)
		if res.Pending {
			res.Request = sent
		}
		return res, err
	})
	s.Keeper.WriteOutcome(w, r, out, err)
}

// RequestProblem is the answer to a payment request that cannot be processed as sent: the
// problem names the fields ("fields", and "reasons" with a sentence each) or says why the body
// is malformed, in words written for the caller. "invalid_fields" repeats "reasons" for
// clients of the first version.
func RequestProblem(err error) problem.Problem {
	var invalid *InvalidError
	var malformed *MalformedError
	switch {
	case errors.As(err, &invalid):
		p := problem.New(problem.InvalidRequest, "The request body is not a valid payment request.").WithFields(invalid.Names())
		p.Extra["reasons"] = invalid.Fields
		p.Extra["invalid_fields"] = invalid.Fields
		return p
	case errors.As(err, &malformed):
		return problem.New(problem.MalformedRequest, "The request body is not a valid payment request: "+malformed.Reason+".")
	}
	return problem.New(problem.MalformedRequest, "The request body is not a valid payment request.")
}

// Response is the HTTP answer of a payment request, what its key stores and replays: the one
// place statuses and problem documents are chosen for what create decided.
//
//	Created 201, Declined 402, Accepted 202 (the payment as it stands, Location)
//	Busy 503 with Retry-After, Unreachable 502, Internal 500 (safe to retry with the key)
//	Rejected 422 with the provider's code
//	Operated 200 (a capture or cancel: the payment after it)
//	Conflict 409 payment-state, naming the payment's status (no Retry-After: the key is done)
func Response(a Answer) (idempotency.Response, error) {
	switch a.Kind {
	case Created, Declined, Accepted, Operated:
		status := map[AnswerKind]int{Created: http.StatusCreated, Declined: http.StatusPaymentRequired, Accepted: http.StatusAccepted,
			Operated: http.StatusOK}[a.Kind]
		v := a.Payment.View()
		if a.ClientSecret != "" {
			v.ClientSecret = nonEmpty(a.ClientSecret.Reveal())
		}
		body, err := json.Marshal(v)
		if err != nil {
			return idempotency.Response{}, err
		}
		return idempotency.Response{Status: status, Body: body, Header: map[string]string{
			"Content-Type": "application/json", "Location": "/payments/" + a.Payment.ID}}, nil
	case Busy:
		resp := problemResponse(problem.New(problem.ProviderBusy,
			"The payment provider is busy; retry with the same Idempotency-Key after the Retry-After delay."))
		resp.Header["Retry-After"] = strconv.Itoa(int(max(a.RetryAfter, time.Second).Round(time.Second).Seconds()))
		return resp, nil
	case Unreachable:
		return problemResponse(problem.New(problem.ProviderUnreachable,
			"The payment provider could not be reached; it is safe to retry with the same Idempotency-Key.")), nil
	case Conflict:
		p := problem.New(problem.PaymentState, "The payment's state does not allow this.")
		p.Extra = map[string]any{"payment_status": a.Payment.Status}
		if a.Payment.ProviderPaymentID == "" {
			p.Detail = "The payment's outcome is still being resolved; retry with the same Idempotency-Key later."
		}
		return problemResponse(p), nil
	case Rejected:
		p := problem.New(problem.ProviderRejected, "The payment provider rejected this payment request.")
		p.Extra = map[string]any{"provider_code": a.ProviderCode}
		return problemResponse(p), nil
	}
	return problemResponse(problem.New(problem.Internal,
		"The payment could not be processed; it is safe to retry with the same Idempotency-Key.")), nil
}

func problemResponse(p problem.Problem) idempotency.Response {
	body, _ := json.Marshal(p)
	return idempotency.Response{Status: p.Status, Header: map[string]string{"Content-Type": problem.ContentType}, Body: body}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		problem.Write(w, problem.New(problem.Internal, "The response could not be encoded."))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// addRecovery adds the payment's recovery and its card's allowance to its view.
func (s *Service) addRecovery(ctx context.Context, v *View, p Payment) error {
	rec, err := GetRecovery(ctx, s.Store, p.ID)
	switch {
	case err == nil:
		v.Recovery = rec.Current(p.Status).View()
	case !errors.Is(err, ErrNotFound):
		return err
	}
	if p.Card != nil {
		c, err := CardViewOf(ctx, s.Store, *p.Card, s.now())
		if err != nil {
			return err
		}
		v.Card = c
	}
	return nil
}
