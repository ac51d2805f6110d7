package recoverytest

import (
	"context"
	"errors"
	"iter"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// Script says how a payment method behaves: it declines with Code the first Declines
// effective charges (forever when Declines < 0), then succeeds.
type Script struct {
	Code     string
	Declines int
	Brand    string // visa when empty
	Card     string // the card's fingerprint; "fp_" + the payment method when empty
}

type outcome struct {
	p   provider.Payment
	err error
}

// Provider confirms payments by script and, like Stripe, answers a repeated idempotency key
// with the outcome it stored for the first request: a repeat is never a second charge. It
// counts requests per key and effective charges per payment method.
type Provider struct {
	now func() time.Time

	mu        sync.Mutex
	scripts   map[string]Script
	stored    map[string]outcome
	calls     map[string]int       // requests per idempotency key
	at        map[string]time.Time // time of the effective charge per key
	effects   map[string]int       // effective charges per payment method
	hang      map[string]bool      // keys whose first request hangs after its effect, until cancelled
	hung      chan string
	cardReads int
}

var _ provider.Provider = (*Provider)(nil)

// NewProvider returns a Provider that stamps each effective charge with now.
func NewProvider(now func() time.Time) *Provider {
	return &Provider{now: now, scripts: map[string]Script{}, stored: map[string]outcome{},
		calls: map[string]int{}, at: map[string]time.Time{}, effects: map[string]int{}, hang: map[string]bool{},
		hung: make(chan string, 1)}
}

// SetNow changes the clock that stamps charges, for a provider that outlives a process.
func (s *Provider) SetNow(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetScript sets how the payment method pm behaves; a method without a script succeeds.
func (s *Provider) SetScript(pm string, sc Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts[pm] = sc
}

// HangAfterCharge makes the first request with key charge and then hang until its context
// is cancelled, as when the process dies before the answer arrives; Hung names the key then.
func (s *Provider) HangAfterCharge(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hang[key] = true
}

// Hung receives the key of a request that charged and is now hanging.
func (s *Provider) Hung() <-chan string { return s.hung }

// CardReads counts PaymentMethodCard calls.
func (s *Provider) CardReads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cardReads
}

func (s *Provider) Confirm(ctx context.Context, req provider.ConfirmRequest) (provider.Payment, error) {
	s.mu.Lock()
	s.calls[req.IdempotencyKey]++
	if o, ok := s.stored[req.IdempotencyKey]; ok {
		s.mu.Unlock()
		return o.p, o.err
	}
	if req.IdempotencyKey == "" || !req.OffSession {
		s.mu.Unlock()
		return provider.Payment{}, &provider.PermanentError{Op: "confirm", StatusCode: 400, Code: "parameter_missing", Err: errors.New("recovery charges are keyed and off-session")}
	}
	sc := s.scripts[req.PaymentMethod]
	n := s.effects[req.PaymentMethod]
	s.effects[req.PaymentMethod]++
	s.at[req.IdempotencyKey] = s.now()
	p := provider.Payment{ID: req.ID, Status: provider.StatusSucceeded, PaymentMethod: req.PaymentMethod, Amount: 1000, Currency: "usd"}
	o := outcome{p: p}
	if sc.Declines < 0 || n < sc.Declines {
		p.Status = provider.StatusDeclined
		card := sc.card(req.PaymentMethod)
		p.Decline = &provider.Decline{Code: sc.Code, ErrorCode: "card_declined", Network: card.Brand}
		p.Card = &card
		o = outcome{p: p, err: &provider.DeclineError{Payment: p}}
	}
	s.stored[req.IdempotencyKey] = o
	hang := s.hang[req.IdempotencyKey]
	delete(s.hang, req.IdempotencyKey)
	s.mu.Unlock()
	if hang {
		// The charge happened; the answer is lost because the process dies.
		s.hung <- req.IdempotencyKey
		<-ctx.Done()
		return provider.Payment{}, &provider.UnknownOutcomeError{Op: "confirm", IdempotencyKey: req.IdempotencyKey, Err: ctx.Err()}
	}
	return o.p, o.err
}

func (s *Provider) Create(context.Context, provider.CreateRequest) (provider.Payment, error) {
	return provider.Payment{}, errors.New("recovery never creates")
}

func (s *Provider) Get(context.Context, string) (provider.Payment, error) {
	return provider.Payment{}, errors.New("recovery never reads")
}

// PaymentMethodCard names the card a payment method's declines name.
func (s *Provider) PaymentMethodCard(_ context.Context, pm string) (provider.Card, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cardReads++
	return s.scripts[pm].card(pm), nil
}

func (s *Provider) List(context.Context, provider.ListParams) iter.Seq2[provider.Payment, error] {
	return func(yield func(provider.Payment, error) bool) { yield(provider.Payment{}, errors.New("not listed")) }
}

// Snapshot copies the requests per idempotency key, the time of each key's effective charge
// and the effective charges per payment method.
func (s *Provider) Snapshot() (calls map[string]int, at map[string]time.Time, effects map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls, at, effects = map[string]int{}, map[string]time.Time{}, map[string]int{}
	for k, v := range s.calls {
		calls[k] = v
	}
	for k, v := range s.at {
		at[k] = v
	}
	for k, v := range s.effects {
		effects[k] = v
	}
	return calls, at, effects
}

// card is the card the script names for payment method pm.
func (sc Script) card(pm string) provider.Card {
	brand, fp := sc.Brand, sc.Card
	if brand == "" {
		brand = "visa"
	}
	if fp == "" {
		fp = "fp_" + pm
	}
	return provider.Card{Fingerprint: fp, Brand: brand, Last4: "4242"}
}

// FailingProvider fails the first len(Errs) confirms with Errs in order, then confirms
// through the scripted Provider.
type FailingProvider struct {
	*Provider
	mu   sync.Mutex
	Errs []error
}

func (f *FailingProvider) Confirm(ctx context.Context, req provider.ConfirmRequest) (provider.Payment, error) {
	f.mu.Lock()
	if len(f.Errs) > 0 {
		err := f.Errs[0]
		f.Errs = f.Errs[1:]
		f.mu.Unlock()
		return provider.Payment{}, err
	}
	f.mu.Unlock()
	return f.Provider.Confirm(ctx, req)
}
