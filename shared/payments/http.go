package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/problem"
	"github.com/runtwice/twice/shared/store"
)

// MaxBody is the largest POST /payments body accepted.
const MaxBody = 64 << 10

// Handler serves POST /payments, GET /payments/{id} and POST /payments/{id}/capture and
// /cancel. scope names the caller of a request
// (the API Gateway authorizer's principal; "local" locally): keys and payments never cross
// scopes.
func (s *Service) Handler(scope func(*http.Request) string) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.HandleFunc(rt.pattern, s.serve(rt, scope))
	}
	return mux
}

// Routes lists the ServeMux patterns Handler serves: what API Gateway's route table and the
// API document must each cover.
func Routes() []string {
	var out []string
	for _, r := range (&Service{}).routes() {
		out = append(out, r.pattern)
	}
	return out
}

type route struct {
	pattern string
	maxBody int64 // the largest body the route reads
	fn      func(r *http.Request, scope string) (reply, error)
}

// reply is what a route answers: a response, or a key's stored one (replayed).
type reply struct {
	resp     idempotency.Response
	replayed bool
}

// routes is the one table Handler and Routes read.
func (s *Service) routes() []route {
	return []route{
		// Recovery of a decline and resolution of an unknown outcome are outbox messages
		// committed with the answer; nothing runs after the commit.
		{"POST /payments", MaxBody, s.serveCreate},
		{"GET /payments/{id}", 0, s.serveGet},
		{"POST /payments/{id}/refunds", MaxRefundBody, s.serveRefund},
		{"POST /payments/{id}/capture", MaxBody, s.serveCapture},
		{"POST /payments/{id}/cancel", MaxBody, s.serveCancel},
	}
}

// serve is the outermost handler of every route and the one place the payments surface writes
// an answer: the route's response, or the problem its error maps to (problemOf), logged when it
// is a fault of ours.
func (s *Service) serve(rt route, scope func(*http.Request) string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sc := scope(r)
		if s.Exchanges != nil {
			// Every request and its answer go to the attempt log, under the payment it concerns.
			var file func(operation, scope, paymentID string)
			w, r, file = s.Exchanges.Begin(w, r)
			defer func() { file(APIOperation(r), sc, PaymentOfRequest(r, sc, r.Header.Get(idempotency.HeaderKey))) }()
		}
		if rt.maxBody > 0 {
			r.Body = http.MaxBytesReader(w, r.Body, rt.maxBody)
		}
		a, err := rt.fn(r, sc)
		if err != nil {
			p := problemOf(err)
			switch {
			case p.Status == http.StatusInternalServerError:
				s.log().ErrorContext(r.Context(), "payments request failed", "route", rt.pattern, "error", err)
			case errors.Is(err, store.ErrThrottled):
				s.log().WarnContext(r.Context(), "payments request throttled by the store; answered 503", "route", rt.pattern, "error", err)
			}
			problem.Write(w, p)
			return
		}
		h := w.Header()
		for _, k := range slices.Sorted(maps.Keys(a.resp.Header)) {
			h.Set(k, a.resp.Header[k])
		}
		if a.replayed {
			h.Set(idempotency.HeaderReplayed, "true")
		}
		h.Set("Content-Length", strconv.Itoa(len(a.resp.Body)))
		w.WriteHeader(a.resp.Status)
		_, _ = w.Write(a.resp.Body)
	}
}

// Errors the routes return for problemOf to map, wrapped around their cause (if any), which goes
// to the log and never to the caller.
var (
	errNoPayment   = errors.New("payments: no payment has this id in the caller's scope")
	errReadPayment = errors.New("payments: read payment")
	errUnreadable  = errors.New("payments: request body unreadable")
	errBadPayment  = errors.New("payments: payment request refused")
	errBadRefund   = errors.New("payments: refund request refused")
	errEncode      = errors.New("payments: encode response")
)

// problemOf maps an error of a route to its problem, the payments surface's one mapping of
// errors to answers (the codes' statuses are problem's table); anything it does not know is
// internal, and none of its text reaches the caller.
func problemOf(err error) problem.Problem {
	var (
		keys       *idempotency.KeyCountError
		tooLarge   *http.MaxBytesError
		inProgress *idempotency.InProgressError
		mismatch   *idempotency.MismatchError
	)
	switch {
	case errors.As(err, &keys):
		return problem.New(problem.KeyInvalid, "Send one Idempotency-Key header; this request has "+strconv.Itoa(keys.N)+".")
	case errors.Is(err, idempotency.ErrKeyMissing):
		return problem.New(problem.KeyMissing, "This request needs an Idempotency-Key header.")
	case errors.Is(err, idempotency.ErrKeyInvalid):
		return problem.New(problem.KeyInvalid, "The Idempotency-Key header must be 1-255 visible ASCII characters.")
	case errors.As(err, &tooLarge):
		return problem.New(problem.BodyTooLarge, "The request body is larger than "+strconv.FormatInt(tooLarge.Limit, 10)+" bytes.")
	case errors.Is(err, errUnreadable):
		return problem.New(problem.MalformedRequest, "The request body could not be read.")
	case errors.Is(err, errBadPayment):
		return RequestProblem(err)
	case errors.Is(err, errBadRefund):
		return RefundRequestProblem(err)
	case errors.Is(err, errNoPayment):
		return problem.New(problem.NotFound, "No payment has this id.")
	case errors.Is(err, errReadPayment):
		return problem.New(problem.Internal, "The payment could not be read; retry.")
	case errors.Is(err, errEncode):
		return problem.New(problem.Internal, "The response could not be encoded.")
	case errors.As(err, &inProgress):
		p := problem.New(problem.KeyInProgress, "A request with this Idempotency-Key is still being processed.")
		p.RetryAfter = int(inProgress.RetryAfter.Seconds() + 0.999)
		return p
	case errors.Is(err, idempotency.ErrLeaseLost):
		p := problem.New(problem.KeyInProgress, "Another request with this Idempotency-Key took over; retry to get its result.")
		p.RetryAfter = 1
		return p
	case errors.As(err, &mismatch):
		return problem.New(problem.KeyReused, "This Idempotency-Key was used with a different request body.").WithFields(mismatch.Fields)
	case errors.Is(err, store.ErrThrottled):
		// Nothing was written by the throttled call; a key it left in progress is taken over
		// when its lock expires, and the provider key is the same, so a retry charges at most once.
		p := problem.New(problem.Unavailable, "The payment store is busy; retry with the same Idempotency-Key after the Retry-After delay.")
		p.RetryAfter = 1
		return p
	}
	return problem.New(problem.Internal, "The request could not be recorded; it is safe to retry with the same Idempotency-Key.")
}

// readRequest reads what every write route carries, the Idempotency-Key header and then the
// body (capped by serve).
func readRequest(r *http.Request) (key string, body []byte, err error) {
	if key, err = idempotency.KeyOf(r.Header); err != nil {
		return "", nil, err
	}
	if body, err = io.ReadAll(r.Body); err != nil {
		if tooLarge := new(http.MaxBytesError); !errors.As(err, &tooLarge) {
			err = fmt.Errorf("%w: %w", errUnreadable, err)
		}
		return "", nil, err
	}
	return key, body, nil
}

// payment reads the payment a route names, in the caller's scope; a route reads it before the
// key is touched, so an unknown payment leaves the key free.
func (s *Service) payment(ctx context.Context, id, scope string) (Payment, error) {
	p, err := Get(ctx, s.Store, id)
	switch {
	case errors.Is(err, ErrNotFound) || (err == nil && p.Scope != scope):
		return p, errNoPayment
	case err != nil:
		return p, fmt.Errorf("%w %s: %w", errReadPayment, id, err)
	}
	return p, nil
}

// outcome is the answer of a request run under its key (Keeper.Run): the operation's response,
// the stored one replayed, or the error a held key (409) or another body under it (422) is.
func outcome(key string, out idempotency.Outcome, err error) (reply, error) {
	switch {
	case err != nil:
		return reply{}, err
	case out.Kind == idempotency.InProgress:
		return reply{}, &idempotency.InProgressError{Key: key, RetryAfter: out.RetryAfter}
	case out.Kind == idempotency.Mismatch:
		return reply{}, &idempotency.MismatchError{Key: key, Fields: out.Fields}
	}
	return reply{resp: *out.Response, replayed: out.Kind != idempotency.New}, nil
}

func (s *Service) serveGet(r *http.Request, scope string) (reply, error) {
	p, err := s.payment(r.Context(), r.PathValue("id"), scope)
	if err != nil {
		return reply{}, err
	}
	v := p.View()
	if err := s.addRefunds(r.Context(), &v, p); err != nil {
		return reply{}, fmt.Errorf("%w %s: refunds: %w", errReadPayment, p.ID, err)
	}
	if err := s.addRecovery(r.Context(), &v, p); err != nil {
		return reply{}, fmt.Errorf("%w %s: recovery: %w", errReadPayment, p.ID, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return reply{}, fmt.Errorf("%w: %w", errEncode, err)
	}
	return reply{resp: idempotency.Response{Status: http.StatusOK, Header: map[string]string{"Content-Type": "application/json"}, Body: b}}, nil
}

// serveCreate is POST /payments in a straight line: the key and the body are read once, the
// body parsed and fingerprinted once, and create runs under the key (Keeper.Run). An invalid
// request is answered before the key is touched, so the key stays free for a corrected one.
func (s *Service) serveCreate(r *http.Request, scope string) (reply, error) {
	key, body, err := readRequest(r)
	if err != nil {
		return reply{}, err
	}
	req, err := ParseCreateRequest(body)
	if err != nil {
		return reply{}, fmt.Errorf("%w: %w", errBadPayment, err)
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
	return outcome(key, out, err)
}

// RequestProblem is the answer to a payment request that cannot be processed as sent: the
// problem names the fields ("fields", and "reasons" with a sentence each) or says why the body
// is malformed, in words written for the caller.
func RequestProblem(err error) problem.Problem {
	var invalid *InvalidError
	var malformed *MalformedError
	switch {
	case errors.As(err, &invalid):
		p := problem.New(problem.InvalidRequest, "The request body is not a valid payment request.").WithFields(invalid.Names())
		p.Extra["reasons"] = invalid.Fields
		return p
	case errors.As(err, &malformed):
		return problem.New(problem.MalformedRequest, "The request body is not a valid payment request: "+malformed.Reason+".")
	}
	return problem.New(problem.MalformedRequest, "The request body is not a valid payment request.")
}

// Response is the HTTP answer of a payment request, what its key stores and replays: the
// status of what create, capture, cancel or refund decided, or the problem it is (whose status
// is its code's).
//
//	Created 201, Declined 402, Accepted 202 (the payment as it stands, Location)
//	Busy provider-busy with Retry-After, Unreachable provider-unreachable, Internal internal
//	(safe to retry with the key)
//	Rejected provider-rejected with the provider's code
//	Operated 200 (a capture or cancel: the payment after it)
//	Conflict payment-state, naming the payment's status (no Retry-After: the key is done)
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
		p := problem.New(problem.ProviderBusy, "The payment provider is busy; retry with the same Idempotency-Key after the Retry-After delay.")
		p.RetryAfter = int(max(a.RetryAfter, time.Second).Round(time.Second).Seconds())
		return problemResponse(p), nil
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

// problemResponse is p as a key stores it, Retry-After included.
func problemResponse(p problem.Problem) idempotency.Response {
	body, _ := json.Marshal(p)
	h := map[string]string{"Content-Type": problem.ContentType}
	if p.RetryAfter > 0 {
		h["Retry-After"] = strconv.Itoa(p.RetryAfter)
	}
	return idempotency.Response{Status: p.Status, Header: h, Body: body}
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
