package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/problem"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
)

// ResolveJob asks for a payment with an unknown outcome to be resolved in the background by
// repeating the provider call with the same provider key.
type ResolveJob struct {
	Scope     string `json:"scope"`
	Key       string `json:"key"`
	PaymentID string `json:"payment_id"`
	Body      []byte `json:"body"` // the original request, so the repeat has the same fingerprint
}

// Resolver queues resolve jobs (SQS in AWS, the local queue locally).
type Resolver interface {
	EnqueueResolve(ctx context.Context, job ResolveJob) error
}

// DeclineHandler is told about a declined payment once its record is committed, to start
// recovery. It must be idempotent: a crash can make it run again for the same payment.
type DeclineHandler interface {
	Declined(ctx context.Context, p Payment) error
}

// Service creates and reads payments.
type Service struct {
	Store    store.Store
	Keeper   *idempotency.Keeper
	Provider provider.Provider
	Resolver Resolver
	// Classify names a decline's class ("hard", "soft_limit", ...) for the API's decline_class.
	Classify func(provider.Decline) string
	// OnDecline, if set, starts recovery for a declined payment.
	OnDecline DeclineHandler
	Now       func() time.Time
	Log       *slog.Logger
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// Create runs one payment request under its idempotency key. It is the operation both the HTTP
// handler and the background resolver run, so the response a resolved payment stores is exactly
// the one the first request would have stored.
func (s *Service) Create(ctx context.Context, scope, key string, req CreateRequest) (idempotency.Result, error) {
	now := s.now().UTC()
	id := PaymentID(scope, key)
	meta := map[string]string{"twice_payment_id": id, "twice_scope": scope}
	for k, v := range req.Metadata {
		meta[k] = v
	}
	if req.Invoice != "" {
		meta["twice_invoice"] = req.Invoice
	}
	p := Payment{ID: id, Scope: scope, IdempotencyKey: key, ProviderKey: provider.IdempotencyKey(scope, key),
		Amount: req.Amount, Currency: req.Currency, Customer: req.Customer, PaymentMethod: req.PaymentMethod,
		Invoice: req.Invoice, Description: req.Description, Metadata: req.Metadata, CreatedAt: now, UpdatedAt: now}
	pp, err := s.Provider.Create(ctx, provider.CreateRequest{Amount: req.Amount, Currency: req.Currency,
		Customer: req.Customer, PaymentMethod: req.PaymentMethod, Description: req.Description,
		Metadata: meta, IdempotencyKey: p.ProviderKey})
	var decline *provider.DeclineError
	var unknown *provider.UnknownOutcomeError
	var throttled *provider.ThrottledError
	var transient *provider.TransientError
	var permanent *provider.PermanentError
	switch {
	case err == nil:
		s.apply(&p, pp)
		return s.final(p, http.StatusCreated)
	case errors.As(err, &decline):
		s.apply(&p, decline.Payment)
		return s.final(p, http.StatusPaymentRequired)
	case errors.As(err, &unknown):
		// Nothing final: record the payment as pending, release the key, and resolve in the
		// background with the same provider key.
		p.Status = StatusPending
		p.Version = VersionAt(now, StatusPending)
		s.log().WarnContext(ctx, "payment outcome unknown; resolving in background", "payment_id", id, "error", err)
		return s.notFinal(ctx, p)
	case errors.As(err, &throttled):
		return s.unavailable(max(throttled.RetryAfter, time.Second))
	case errors.As(err, &transient):
		return s.unavailable(time.Second)
	case errors.Is(err, provider.ErrIdempotencyMismatch):
		// Our provider key is derived from (scope, key) and the fingerprint guards the body, so
		// this means a bug of ours: never store it, shout.
		s.log().ErrorContext(ctx, "provider idempotency mismatch", "payment_id", id, "error", err)
		return retryable(http.StatusInternalServerError, "The payment could not be processed; it is safe to retry with the same Idempotency-Key."), nil
	case errors.As(err, &permanent):
		res := problemResult(http.StatusUnprocessableEntity, "The payment provider rejected this payment request.",
			map[string]any{"provider_code": permanent.Code})
		res.Final = true
		return res, nil
	default:
		s.log().ErrorContext(ctx, "payment provider call failed", "payment_id", id, "error", err)
		return retryable(http.StatusBadGateway, "The payment provider could not be reached; it is safe to retry with the same Idempotency-Key."), nil
	}
}

func (s *Service) apply(p *Payment, pp provider.Payment) {
	p.ProviderPaymentID = pp.ID
	// The provider's creation time is the same on every retry, so a resolved payment keeps the
	// time its first try created it.
	if !pp.Created.IsZero() {
		p.CreatedAt = pp.Created.UTC()
	}
	p.Status = statusOf(pp.Status)
	p.Decline = pp.Decline
	if p.Status == StatusDeclined && pp.Decline != nil && s.Classify != nil {
		p.DeclineClass = s.Classify(*pp.Decline)
	}
	p.Version = VersionAt(s.now(), p.Status)
}

// final returns the stored response and the payment write. The payment is written only if newer
// than what is stored: a webhook may have moved it on while the provider call returned.
func (s *Service) final(p Payment, status int) (idempotency.Result, error) {
	w, err := p.Put()
	if err != nil {
		return idempotency.Result{}, err
	}
	body, err := json.Marshal(p.View())
	if err != nil {
		return idempotency.Result{}, err
	}
	res := idempotency.Result{Response: jsonResponse(status, body, p.ID), IfNewer: []store.Write{w}, Final: true}
	if p.ProviderPaymentID != "" {
		res.Effects = append(res.Effects, AliasWrite(p.ProviderPaymentID, p.ID))
	}
	return res, nil
}

func (s *Service) notFinal(ctx context.Context, p Payment) (idempotency.Result, error) {
	res, err := s.final(p, http.StatusAccepted)
	if err != nil {
		return res, err
	}
	res.Final = false
	if s.Resolver != nil {
		job := ResolveJob{Scope: p.Scope, Key: p.IdempotencyKey, PaymentID: p.ID}
		if body, err := json.Marshal(CreateRequest{Amount: p.Amount, Currency: p.Currency, Customer: p.Customer,
			PaymentMethod: p.PaymentMethod, Invoice: p.Invoice, Description: p.Description, Metadata: p.Metadata}); err == nil {
			job.Body = body
		}
		if err := s.Resolver.EnqueueResolve(ctx, job); err != nil {
			// The pending payment is still recorded; a client retry or reconciliation resolves it.
			s.log().ErrorContext(ctx, "could not queue resolve job", "payment_id", p.ID, "error", err)
		}
	}
	return res, nil
}

func (s *Service) unavailable(retryAfter time.Duration) (idempotency.Result, error) {
	res := retryable(http.StatusServiceUnavailable, "The payment provider is busy; retry with the same Idempotency-Key after the Retry-After delay.")
	res.Response.Header["Retry-After"] = strconv.Itoa(int(retryAfter.Round(time.Second).Seconds()))
	return res, nil
}

func retryable(status int, detail string) idempotency.Result {
	return problemResult(status, detail, nil)
}

func problemResult(status int, detail string, extra map[string]any) idempotency.Result {
	p := problem.New(status, detail)
	p.Extra = extra
	body, _ := json.Marshal(p)
	return idempotency.Result{Response: idempotency.Response{Status: status,
		Header: map[string]string{"Content-Type": problem.ContentType}, Body: body}}
}

func jsonResponse(status int, body []byte, id string) idempotency.Response {
	return idempotency.Response{Status: status, Body: body, Header: map[string]string{
		"Content-Type": "application/json", "Location": "/payments/" + id}}
}

// ErrStillUnknown means a resolve job found the outcome still unknown; the queue retries it.
var ErrStillUnknown = errors.New("payments: outcome still unknown")

// ErrBusy means another request holds the key; the queue retries the job.
var ErrBusy = errors.New("payments: key in progress")

// Resolve repeats a pending payment's provider call under its idempotency key, so the stored
// response becomes the resolved outcome. A client retry may have resolved it first: then the key
// replays and there is nothing to do.
func (s *Service) Resolve(ctx context.Context, job ResolveJob) error {
	req, err := ParseCreateRequest(job.Body)
	if err != nil {
		return fmt.Errorf("payments: resolve %s: %w", job.PaymentID, err)
	}
	fp, err := idempotency.FingerprintJSON(job.Body)
	if err != nil {
		return err
	}
	out, err := s.Keeper.Do(ctx, job.Scope, job.Key, fp, func(ctx context.Context) (idempotency.Result, error) {
		return s.Create(ctx, job.Scope, job.Key, req)
	})
	if err != nil {
		return err
	}
	switch out.Kind {
	case idempotency.New:
		if out.Response.Status == http.StatusAccepted || out.Response.Status >= 500 {
			return ErrStillUnknown
		}
		s.log().InfoContext(ctx, "payment resolved", "payment_id", job.PaymentID, "status", out.Response.Status)
		s.afterCommit(ctx, job.PaymentID, out.Response.Status)
		return nil
	case idempotency.InProgress:
		return ErrBusy
	case idempotency.Mismatch:
		return fmt.Errorf("payments: resolve %s: fingerprint mismatch on fields %v", job.PaymentID, out.Fields)
	}
	return nil // Replay: resolved already
}

// afterCommit runs what follows a committed outcome: recovery for a decline.
func (s *Service) afterCommit(ctx context.Context, paymentID string, status int) {
	if status != http.StatusPaymentRequired || s.OnDecline == nil {
		return
	}
	p, err := Get(ctx, s.Store, paymentID)
	if err != nil {
		s.log().ErrorContext(ctx, "declined payment not readable for recovery", "payment_id", paymentID, "error", err)
		return
	}
	if err := s.OnDecline.Declined(ctx, p); err != nil {
		// The payment_failed webhook and reconciliation start recovery too; log and go on.
		s.log().ErrorContext(ctx, "could not start recovery", "payment_id", paymentID, "error", err)
	}
}
