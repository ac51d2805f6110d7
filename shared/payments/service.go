package payments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"time"

	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/store"
)

// ResolveJob asks for a payment with an unknown outcome to be resolved in the background. The
// resolver works from the request bytes stored with the pending key, never from this job.
type ResolveJob struct {
	Scope     string `json:"scope"`
	Key       string `json:"key"`
	PaymentID string `json:"payment_id"`
	// Attempt counts resolutions (1 for the first): the queue delay grows with it.
	Attempt int `json:"attempt,omitempty"`
	// Cancel, when set, makes the job an auto-cancel of a payment that waited too long for
	// its customer, for this reason (AutoCancel), not a resolution.
	Cancel string `json:"cancel,omitempty"`
	// Refund, when set, makes the job the resolution of this refund of the payment (our
	// refund id), whose key is pending (ResolveRefund).
	Refund string `json:"refund,omitempty"`
}

// Exchanges records API exchanges in the attempt log (attempts.API): Begin returns the writer
// the answer goes to, the request to serve (whose provider calls are recorded beside the
// request's own writes) and the func that files the exchange once it is answered.
type Exchanges interface {
	Begin(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request, func(operation, scope, paymentID string))
}

// Resolver queues resolve jobs (SQS in AWS, the local queue locally). The outbox relay calls it.
type Resolver interface {
	EnqueueResolve(ctx context.Context, job ResolveJob) error
}

// DeclineHandler starts recovery for a declined payment. The outbox relay calls it, after the
// payment's record committed with the outbox message; it must be idempotent (a message can be
// delivered twice).
type DeclineHandler interface {
	Declined(ctx context.Context, p Payment) error
}

// Answer is what one run of a payment request decided, before any transport maps it (Response,
// in http.go, makes it what the key stores and answers).
type Answer struct {
	Kind AnswerKind
	// Payment is the payment as it stands, for Created, Declined and Accepted.
	Payment Payment
	// RetryAfter is when to try again, for Busy.
	RetryAfter time.Duration
	// ProviderCode is the provider's reason, for Rejected.
	ProviderCode string
	// ClientSecret, for a Created payment that requires the customer's action, is what the
	// customer's browser completes it with: the one answer that reveals it.
	ClientSecret provider.ClientSecret
}

// AnswerKind is how a payment request ended.
type AnswerKind int

const (
	// Created: the provider created the payment (succeeded, processing, or waiting on the
	// customer or on a capture).
	Created AnswerKind = iota + 1
	// Declined: nothing was charged: the provider declined, or a payment whose outcome was
	// unknown never reached it and settled as canceled.
	Declined
	// Accepted: the outcome is unknown; the key stays pending and resolution goes on.
	Accepted
	// Busy: the provider throttled or failed transiently; the key is free for a retry.
	Busy
	// Unreachable: the provider could not be reached; the key is free for a retry.
	Unreachable
	// Rejected: the provider refused the request as it is; final.
	Rejected
	// Internal: a fault of ours (the provider saw our key with another body); the key is free.
	Internal
	// Operated: a capture or cancel was done; Payment is the payment after it.
	Operated
	// Conflict: the payment's state does not allow the operation (a capture of what is not
	// held, a cancel of a succeeded payment); Payment is the payment as we hold it.
	Conflict
)

// Service creates and reads payments.
type Service struct {
	Store    store.Store
	Keeper   *idempotency.Keeper
	Provider provider.Provider
	// Resolver and OnDecline are the follow-on deliveries the outbox relay makes
	// (FollowOns); the service itself only writes outbox messages.
	Resolver Resolver
	// Classify names a decline's class ("hard", "soft_limit", ...) for the API's decline_class.
	Classify func(provider.Decline) string
	// OnDecline starts recovery for a declined payment.
	OnDecline DeclineHandler
	// Exchanges records each API request and its answer (attempts.API); nil records none.
	Exchanges Exchanges
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

// Create runs one payment request under its idempotency key, as a new key's first try.
func (s *Service) Create(ctx context.Context, scope, key string, req CreateRequest) (idempotency.Result, error) {
	return s.create(ctx, scope, key, req, nil)
}

// create is the operation both the HTTP handler and the background resolver run, so the
// response a resolved payment stores is exactly the one the first request would have stored.
// l is the lease it runs under (nil: a first try now); a resumed pending key's lease says when
// the provider key was first sent, which decides whether re-sending it is still safe.
func (s *Service) create(ctx context.Context, scope, key string, req CreateRequest, l *idempotency.Lease) (idempotency.Result, error) {
	now := s.now().UTC()
	id := PaymentID(scope, key)
	meta := map[string]string{MetaPaymentID: id, MetaScope: scope}
	for k, v := range req.Metadata {
		meta[k] = v
	}
	if req.Invoice != "" {
		meta[MetaInvoice] = req.Invoice
	}
	p := Payment{ID: id, Scope: scope, IdempotencyKey: key, ProviderKey: provider.IdempotencyKey(scope, key),
		Amount: req.Amount, Currency: req.Currency, Customer: req.Customer, PaymentMethod: req.PaymentMethod,
		Invoice: req.Invoice, Description: req.Description, Metadata: req.Metadata, CreatedAt: now, UpdatedAt: now,
		OffSession: req.OffSession, CaptureMethod: req.CaptureMethod}
	tries := 0
	if l != nil && (l.Request != nil || l.FirstTried.Before(l.AcquiredAt)) {
		tries = l.Tries
		// A resumed pending key, or a lock taken over from a holder that died: the provider may
		// have charged under our key, and may have forgotten the key since. Past half its
		// horizon, look for the payment by our own id first.
		if age := now.Sub(l.FirstTried); age >= s.resendWithin() {
			res, err := s.findOrSettle(ctx, p, meta, age, tries)
			return s.stillPending(ctx, p, tries, res, err)
		}
		res, err := s.send(ctx, p, meta, tries)
		return s.stillPending(ctx, p, tries, res, err)
	}
	return s.send(ctx, p, meta, tries)
}

// stillPending keeps a resumed key pending, with its next resolution queued, whatever kept
// this try from a final answer (a busy or unreachable provider): resolution keeps going until
// the outcome is known.
func (s *Service) stillPending(ctx context.Context, p Payment, tries int, res idempotency.Result, err error) (idempotency.Result, error) {
	if err != nil || res.Final || res.Pending {
		return res, err
	}
	return s.pending(ctx, p, tries)
}

// send creates and confirms the payment at the provider with its provider key.
func (s *Service) send(ctx context.Context, p Payment, meta map[string]string, tries int) (idempotency.Result, error) {
	id := p.ID
	pp, err := s.Provider.Create(ctx, provider.CreateRequest{Amount: p.Amount, Currency: p.Currency,
		Customer: p.Customer, PaymentMethod: p.PaymentMethod, Description: p.Description,
		Metadata: meta, OffSession: p.OffSession, CaptureMethod: provider.CaptureMethod(p.CaptureMethod),
		IdempotencyKey: p.ProviderKey})
	var decline *provider.DeclineError
	var unknown *provider.UnknownOutcomeError
	var throttled *provider.ThrottledError
	var transient *provider.TransientError
	var permanent *provider.PermanentError
	switch {
	case err == nil:
		s.apply(&p, pp)
		return s.final(ctx, p, Created, pp.ClientSecret)
	case errors.As(err, &decline):
		s.apply(&p, decline.Payment)
		return s.final(ctx, p, Declined, "")
	case errors.As(err, &unknown):
		s.log().WarnContext(ctx, "payment outcome unknown; the key stays pending", "payment_id", id, "error", err)
		return s.pending(ctx, p, tries)
	case errors.As(err, &throttled):
		return s.unavailable(max(throttled.RetryAfter, time.Second))
	case errors.As(err, &transient):
		return s.unavailable(time.Second)
	case errors.Is(err, provider.ErrIdempotencyMismatch):
		// Our provider key is derived from (scope, key) and the fingerprint guards the body, so
		// this means a bug of ours: never store it, shout.
		s.log().ErrorContext(ctx, "provider idempotency mismatch", "payment_id", id, "error", err)
		return noPayment(Answer{Kind: Internal}), nil
	case errors.As(err, &permanent):
		res := noPayment(Answer{Kind: Rejected, ProviderCode: permanent.Code})
		res.Final = true
		return res, nil
	default:
		s.log().ErrorContext(ctx, "payment provider call failed", "payment_id", id, "error", err)
		return noPayment(Answer{Kind: Unreachable}), nil
	}
}

// resendWithin is how long after the first try a create may be re-sent with the same provider
// key: half the provider's declared key horizon ("well inside" it). A provider that declares
// no horizon is searched every time.
func (s *Service) resendWithin() time.Duration {
	if h, ok := s.Provider.(provider.Searcher); ok {
		return h.KeyHorizon() / 2
	}
	return 0
}

// settleMargin is how long before the key horizon an empty search already settles a payment as
// never made: the search index lags its writes by about a minute, so hours after the create an
// empty answer means no payment exists, and re-sending the key so near its end is no longer
// safe.
const settleMargin = time.Hour

// findOrSettle looks the payment up at the provider by our own id (the metadata every create
// of ours carries) instead of re-sending the create:
//   - found: the payment is adopted as the provider has it (one found is the normal case; more
//     than one is a duplicate charge, which reconciliation reports for a person; the oldest is
//     adopted);
//   - nothing found while the provider still surely remembers the key: re-sending is safe;
//   - nothing found near or past the horizon: the create never took effect. The payment
//     settles as canceled (402, nothing charged), and nothing is ever created again under
//     this key, so no second charge is possible; a new Idempotency-Key makes a new payment.
//   - the search fails: the outcome stays unknown, the key pending.
func (s *Service) findOrSettle(ctx context.Context, p Payment, meta map[string]string, age time.Duration, tries int) (idempotency.Result, error) {
	searcher, ok := s.Provider.(provider.Searcher)
	if !ok {
		s.log().ErrorContext(ctx, "provider cannot search; pending payment left pending", "payment_id", p.ID)
		return s.pending(ctx, p, tries)
	}
	found, err := searcher.SearchMetadata(ctx, MetaPaymentID, p.ID)
	switch {
	case err != nil:
		s.log().WarnContext(ctx, "payment search failed; the key stays pending", "payment_id", p.ID, "error", err)
		return s.pending(ctx, p, tries)
	case len(found) > 0:
		if len(found) > 1 {
			s.log().ErrorContext(ctx, "provider holds more than one payment for one of ours", "payment_id", p.ID, "count", len(found))
		}
		pp := found[0]
		for _, f := range found[1:] {
			if f.Created.Before(pp.Created) {
				pp = f
			}
		}
		s.log().InfoContext(ctx, "pending payment found at the provider; adopted", "payment_id", p.ID, "provider_payment_id", pp.ID)
		s.apply(&p, pp)
		if p.Status == provider.StatusDeclined {
			return s.final(ctx, p, Declined, "")
		}
		// A search result carries no client secret (stripe-go's search does not return
		// it): a payment adopted in requires_action is answered without one, and the
		// customer's page reads it from the provider.
		return s.final(ctx, p, Created, "")
	case age < searcher.KeyHorizon()-settleMargin:
		return s.send(ctx, p, meta, tries)
	default:
		s.log().WarnContext(ctx, "pending payment never reached the provider; settled as canceled", "payment_id", p.ID, "age", age)
		p.Status = provider.StatusCanceled
		p.Version = VersionAt(s.now(), provider.StatusCanceled)
		return s.final(ctx, p, Declined, "")
	}
}

func (s *Service) apply(p *Payment, pp provider.Payment) {
	// The provider's creation time is the same on every retry, so a resolved payment keeps the
	// time its first try created it.
	if !pp.Created.IsZero() {
		p.CreatedAt = pp.Created.UTC()
	}
	p.Observe(pp, s.Classify, s.now())
}

// final returns the stored answer and the writes that record it. The payment is written only
// if that adds to what is stored: a webhook may have moved it on while the provider call
// returned (recordWrites). A payment that waits for its customer is answered with the client
// secret, which goes into the stored answer (so a replay is the same bytes) and nowhere else.
// An answer older than a charge another writer recorded meanwhile is still the key's answer,
// but changes only what the charged record lacks (fillFrom): the payment stays charged.
func (s *Service) final(ctx context.Context, p Payment, kind AnswerKind, secret provider.ClientSecret) (idempotency.Result, error) {
	group, stale, err := s.recordWrites(ctx, p)
	if err != nil {
		return idempotency.Result{}, err
	}
	if p.Status != provider.StatusRequiresAction {
		secret = ""
	}
	resp, err := Response(Answer{Kind: kind, Payment: p, ClientSecret: secret})
	if err != nil {
		return idempotency.Result{}, err
	}
	// The record and its change message commit together or not at all; when another writer
	// moves the payment between the read and the commit, the group is read again.
	res := idempotency.Result{Response: resp, IfNewer: group, Final: true,
		Refresh: func(ctx context.Context) ([]store.Write, error) {
			group, _, err := s.recordWrites(ctx, p)
			return group, err
		}}
	if stale {
		s.log().InfoContext(ctx, "answer older than the payment's charge; the payment stays charged",
			"payment_id", p.ID, "answer_status", p.Status)
		return res, nil
	}
	res.Effects = append(res.Effects, AliasWrites(p)...)
	if p.Status == provider.StatusDeclined {
		rw, err := RecoveryMessage(p.ID, s.now())
		if err != nil {
			return res, err
		}
		res.Effects = append(res.Effects, rw)
	}
	return res, nil
}

// recordWrites is the group that records answer p: the payment's write (paymentWrite) and the
// change message that publishes the payment as written, with the version written. None when
// the store already holds everything p knows. A change message only ever commits with its
// payment write, so each version of a payment is announced once, with what it holds.
func (s *Service) recordWrites(ctx context.Context, p Payment) ([]store.Write, bool, error) {
	r, err := s.paymentWrite(ctx, p)
	if err != nil || r.write.Put == nil {
		return nil, r.stale, err
	}
	if !r.announce {
		return []store.Write{r.write}, r.stale, nil
	}
	cw, err := ChangeMessage(r.payment, s.now())
	if err != nil {
		return nil, r.stale, err
	}
	return []store.Write{r.write, cw}, r.stale, nil
}

// answerRecord is what an answer adds to the stored payment.
type answerRecord struct {
	payment Payment     // the payment as it is to be stored
	write   store.Write // the write that stores it; none when there is nothing to add
	// stale: the answer's view holds no charge and another writer recorded one.
	stale bool
	// announce: the write changes the payment's view, so the feed hears of it. A fill that
	// adds only what the view does not show (the card, the request's key) announces nothing.
	announce bool
}

// paymentWrite returns what answer p adds to the stored payment. A view that holds no charge
// (pending, declined, waiting) may come back after another writer recorded a charge: a
// recovery charged the declined payment while the create's answer was on its way, or the
// provider replays a first create's decline. Its version is from the moment it arrived, so the
// version check alone would let it take the charge back (undoesCharge); such a view only fills
// in what the charged record lacks (stale). A charge is news over anything stored, but what the
// provider reported after it and another writer recorded meanwhile (a refund, a dispute, from
// events that came before our answer) is not in our call's view, and the stored record must
// not lose it (keepLaterFacts). A view older than what is stored fills the stored record too.
// Every write is conditioned on the version read, so a change made after the read fails it.
func (s *Service) paymentWrite(ctx context.Context, p Payment) (answerRecord, error) {
	// Part of the commit of what the provider did: bounded on its own, like the commit.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	defer cancel()
	it, err := s.Store.Get(ctx, Table, p.ID, "")
	if errors.Is(err, store.ErrNotFound) {
		w, err := p.Put()
		w.Cond = store.Cond{Kind: store.NotExists}
		return answerRecord{payment: p, write: w, announce: true}, err
	}
	if err != nil {
		return answerRecord{}, fmt.Errorf("payments: read %s before storing the answer: %w", p.ID, err)
	}
	stored, err := Decode(it)
	if err != nil {
		return answerRecord{}, err
	}
	r := answerRecord{payment: p, stale: undoesCharge(stored.Status, p.Status), announce: true}
	if !r.stale && charged(p.Status) && r.payment.keepLaterFacts(stored) {
		// What is stored carries news our answer lacks: the write takes both, one step above
		// what it read.
		r.payment.Version = max(p.Version, it.Version+1)
	}
	if r.stale || r.payment.Version <= it.Version {
		// A later report was stored first (the provider's event came before our commit and
		// made the record from the event alone), or a charge: it stays, and what only our
		// request and its answer know goes onto it.
		before := stored.View()
		if !stored.fillFrom(p) {
			return answerRecord{stale: r.stale}, nil
		}
		r.payment = stored
		r.payment.Version = it.Version + 1
		r.announce = !reflect.DeepEqual(before, r.payment.View())
	}
	r.write, err = r.payment.Put()
	r.write.Cond = store.Cond{Kind: store.VersionIs, Version: it.Version}
	return r, err
}

// fillFrom copies into p, a payment another writer recorded (a charge from the provider's
// events or recovery's charge, which name no card; a state an event reported before our
// commit), what only our own request and its answer know and p lacks: the card the attempt
// used, the request's details, and an authorization's capture deadline. It reports whether it
// copied anything; the status and everything the provider reported stay.
func (p *Payment) fillFrom(answer Payment) bool {
	changed := false
	fill := func(dst *string, v string) {
		if *dst == "" && v != "" {
			*dst, changed = v, true
		}
	}
	fill(&p.IdempotencyKey, answer.IdempotencyKey)
	fill(&p.ProviderKey, answer.ProviderKey)
	fill(&p.PaymentMethod, answer.PaymentMethod)
	fill(&p.Invoice, answer.Invoice)
	fill(&p.Description, answer.Description)
	fill(&p.Customer, answer.Customer)
	if p.Card == nil && answer.Card != nil {
		p.Card, changed = answer.Card, true
	}
	if len(p.Metadata) == 0 && len(answer.Metadata) > 0 {
		p.Metadata, changed = answer.Metadata, true
	}
	fill(&p.CaptureMethod, answer.CaptureMethod)
	if !p.OffSession && answer.OffSession {
		p.OffSession, changed = true, true
	}
	// The hold's deadline is on the provider's charge, which events do not carry.
	if p.Status == provider.StatusRequiresCapture && answer.Status == provider.StatusRequiresCapture &&
		p.CaptureBefore.IsZero() && !answer.CaptureBefore.IsZero() {
		p.CaptureBefore, changed = answer.CaptureBefore, true
	}
	return changed
}

// keepLaterFacts copies into p, a charge our own call saw, what stored knows that only the
// provider's later reports say: the amount refunded (and so refunded in full), a dispute, the
// latest charge. It reports whether it copied anything.
func (p *Payment) keepLaterFacts(stored Payment) bool {
	changed := false
	if stored.AmountRefunded > p.AmountRefunded {
		p.AmountRefunded, changed = stored.AmountRefunded, true
	}
	if stored.Status == provider.StatusRefunded && p.Status != provider.StatusRefunded {
		p.Status, changed = provider.StatusRefunded, true
	}
	if p.Dispute == nil && stored.Dispute != nil {
		p.Dispute, changed = stored.Dispute, true
	}
	if p.LatestCharge == "" && stored.LatestCharge != "" {
		p.LatestCharge, changed = stored.LatestCharge, true
	}
	return changed
}

// readTimeout bounds paymentWrite's read.
const readTimeout = 10 * time.Second

// pending is the interim answer of an unknown outcome: 202 with the payment as pending, kept
// under the key with the caller's request (idempotency.Result.Pending), and, in the same
// transaction, the outbox message that queues the next resolution.
func (s *Service) pending(ctx context.Context, p Payment, tries int) (idempotency.Result, error) {
	p.Status = provider.StatusPending
	p.Version = VersionAt(s.now(), provider.StatusPending)
	res, err := s.final(ctx, p, Accepted, "")
	if err != nil {
		return res, err
	}
	res.Final, res.Pending = false, true
	job := ResolveJob{Scope: p.Scope, Key: p.IdempotencyKey, PaymentID: p.ID, Attempt: tries + 1}
	w, err := outbox.New(KindResolve, fmt.Sprintf("resolve#%s#%d", p.ID, job.Attempt), job, s.now())
	if err != nil {
		return res, err
	}
	res.Effects = append(res.Effects, w)
	return res, nil
}

func (s *Service) unavailable(retryAfter time.Duration) (idempotency.Result, error) {
	return noPayment(Answer{Kind: Busy, RetryAfter: retryAfter}), nil
}

// noPayment is the result of a request that made no payment: nothing to write, the key free
// unless the caller marks it final.
func noPayment(a Answer) idempotency.Result {
	resp, _ := Response(a) // a problem document always encodes
	return idempotency.Result{Response: resp}
}

// ResolveRefund resumes a pending refund's key and runs the refund again from the request bytes
// the caller sent: the same provider key within half the provider's key horizon, a look-up by
// our refund id in the provider's refunds after that, and near the horizon a refund the
// provider does not hold settles as failed (it never took effect). Still unknown: the key stays
// pending with the next resolution queued in the same commit. A client retry may have resolved
// it first: then the key replays and there is nothing to do.
func (s *Service) ResolveRefund(ctx context.Context, job ResolveJob) error {
	out, err := s.Keeper.Resolve(ctx, job.Scope, job.Key, func(ctx context.Context, l *idempotency.Lease) (idempotency.Result, error) {
		req, err := ParseRefundRequest(l.Request)
		if err != nil {
			return idempotency.Result{}, fmt.Errorf("payments: stored request of refund %s: %w", job.Refund, err)
		}
		return s.refund(ctx, job.Scope, job.Key, job.PaymentID, req, l)
	})
	if err != nil {
		return err
	}
	switch {
	case out.Kind == idempotency.InProgress, out.Kind == idempotency.Pending && !out.Resumed:
		return busy(out)
	case out.Kind == idempotency.Pending:
		s.log().InfoContext(ctx, "refund still unknown; next resolution queued", "payment_id", job.PaymentID, "refund_id", job.Refund)
	case out.Kind == idempotency.Replay && out.Resumed:
		s.log().InfoContext(ctx, "refund resolved", "payment_id", job.PaymentID, "refund_id", job.Refund, "status", out.Response.Status)
	case out.Kind == idempotency.New:
		s.log().WarnContext(ctx, "resolve job for a refund key with no pending record", "payment_id", job.PaymentID, "refund_id", job.Refund)
	}
	return nil
}

// ErrBusy means another caller holds the key, or the provider was unavailable; the queue
// retries the job. A *BusyError (which matches it) says when the holder's lock lapses.
var ErrBusy = errors.New("payments: key in progress")

// BusyError is ErrBusy while another caller holds the key: RetryAfter is the keeper's suggested
// wait (a live holder usually finishes within it), LockExpiresAt when the holder's lock lapses
// and the key can be taken whatever became of the holder (zero: not known).
type BusyError struct {
	RetryAfter    time.Duration
	LockExpiresAt time.Time
}

func (e *BusyError) Error() string {
	if e.LockExpiresAt.IsZero() {
		return ErrBusy.Error()
	}
	return fmt.Sprintf("%v; its lock lapses at %s", ErrBusy, e.LockExpiresAt.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

func busy(out idempotency.Outcome) error {
	return &BusyError{RetryAfter: out.RetryAfter, LockExpiresAt: out.LockExpiresAt}
}

// Resolve resumes a pending payment's key and runs the create again from the request bytes the
// caller sent, under the provider-horizon rule (create). Still unknown: the key stays pending
// and the same commit queued the next resolution, so the job is done. A client retry may have
// resolved it first: then the key replays and there is nothing to do.
func (s *Service) Resolve(ctx context.Context, job ResolveJob) error {
	out, err := s.Keeper.Resolve(ctx, job.Scope, job.Key, func(ctx context.Context, l *idempotency.Lease) (idempotency.Result, error) {
		req, err := ParseCreateRequest(l.Request)
		if err != nil {
			return idempotency.Result{}, fmt.Errorf("payments: stored request of %s: %w", job.PaymentID, err)
		}
		return s.create(ctx, job.Scope, job.Key, req, l)
	})
	if err != nil {
		return err
	}
	switch {
	case out.Kind == idempotency.InProgress, out.Kind == idempotency.Pending && !out.Resumed:
		return busy(out)
	case out.Kind == idempotency.Pending && out.Response.Status >= 500:
		return ErrBusy // the provider was unavailable; the key was put back pending as it was
	case out.Kind == idempotency.Pending:
		s.log().InfoContext(ctx, "payment still unknown; next resolution queued", "payment_id", job.PaymentID)
	case out.Kind == idempotency.Replay && out.Resumed:
		s.log().InfoContext(ctx, "payment resolved", "payment_id", job.PaymentID, "status", out.Response.Status)
	case out.Kind == idempotency.New:
		s.log().WarnContext(ctx, "resolve job for a key with no pending record", "payment_id", job.PaymentID)
	}
	return nil
}
