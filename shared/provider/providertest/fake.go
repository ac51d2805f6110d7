package providertest

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runtwice/twice/shared/provider"
)

// TestCardDeclines maps Stripe's test payment methods that decline to their decline code, the
// subset DESIGN.md's local contract names. Any other payment method succeeds.
var TestCardDeclines = map[string]string{
	"pm_card_visa_chargeDeclined":                      "generic_decline",
	"pm_card_visa_chargeDeclinedInsufficientFunds":     "insufficient_funds",
	"pm_card_visa_chargeDeclinedLostCard":              "lost_card",
	"pm_card_visa_chargeDeclinedStolenCard":            "stolen_card",
	"pm_card_visa_chargeDeclinedVelocityLimitExceeded": "card_velocity_exceeded",
	"pm_card_chargeDeclinedExpiredCard":                "expired_card",
	"pm_card_chargeDeclinedIncorrectCvc":               "incorrect_cvc",
	"pm_card_chargeDeclinedProcessingError":            "processing_error",
}

// Stripe's test payment methods of the payment flows (docs.stripe.com/testing). Each succeeds
// unless said otherwise.
const (
	// PMThreeDSecure2Required requires authentication on-session: the payment answers
	// StatusRequiresAction; off-session it is declined with authentication_required.
	PMThreeDSecure2Required = "pm_card_threeDSecure2Required"
	// PMAuthenticationRequired always requires authentication: on-session as above, and
	// off-session declined with authentication_required.
	PMAuthenticationRequired = "pm_card_authenticationRequired"
	// PMRefundFail charges successfully; a refund of it is accepted (succeeded) and fails
	// later, giving the amount back to what is refundable.
	PMRefundFail = "pm_card_refundFail"
)

// AuthorizationWindow is how long an uncaptured card authorization holds (CaptureBefore after
// the authorization), as for most cards at Stripe.
const AuthorizationWindow = 7 * 24 * time.Hour

// requiresAuthentication reports whether pm needs the customer to authenticate.
func requiresAuthentication(pm string) bool {
	return pm == PMThreeDSecure2Required || pm == PMAuthenticationRequired
}

// Fake is an in-memory provider.Provider with the provider's semantics that callers rely on:
// idempotency keys (same key and request: the same payment; different request: a mismatch), test
// cards that decline, and fault injection (a failure before or after the effect). It passes Run,
// so tests of the payments API, recovery and reconciliation can use it in place of Stripe.
// Safe for concurrent use.
type Fake struct {
	// Now stamps Created and ages idempotency keys. Default time.Now.
	Now func() time.Time
	// Horizon is how long a key is remembered (default provider.StripeKeyHorizon): a key older
	// than that is forgotten, as Stripe forgets them, so the same key may create a second
	// payment.
	Horizon time.Duration

	mu       sync.Mutex
	payments map[string]provider.Payment
	order    []string // creation order
	keys     map[string]keyed
	faults   []fault
	calls    int
	// searchFaults fail the next searches.
	searchFaults []error
	// cards are the cards registered with AddCard, by payment method.
	cards map[string]provider.Card
	// refunds by id, and each payment's refund ids in creation order.
	refunds   map[string]provider.Refund
	refundsOf map[string][]string
	// failLater are refunds accepted now that fail at the next read (PMRefundFail).
	failLater []string
	// pms remembers each payment's payment method and request, for what follows it.
	pms map[string]paymentFacts
}

// paymentFacts are what the fake keeps about a payment beyond the Payment itself.
type paymentFacts struct {
	paymentMethod string
	offSession    bool
	returnURL     string
}

// AddCard makes pm stand for card c: PaymentMethodCard answers it, and a decline of pm names
// it. Two payment methods given one fingerprint are one card (a card the customer added
// again). A payment method never added is a card of its own (fingerprint "fp_" + pm, the
// brand its name says, visa by default).
func (f *Fake) AddCard(pm string, c provider.Card) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cards == nil {
		f.cards = map[string]provider.Card{}
	}
	f.cards[pm] = c
}

// cardOf is pm's card; ok is false for an id that is no payment method.
func (f *Fake) cardOf(pm string) (provider.Card, bool) {
	if c, ok := f.cards[pm]; ok {
		return c, true
	}
	if !strings.HasPrefix(pm, "pm_") {
		return provider.Card{}, false
	}
	brand := "visa"
	for _, b := range []string{"mastercard", "amex"} {
		if strings.Contains(pm, b) {
			brand = b
		}
	}
	return provider.Card{Fingerprint: "fp_" + pm, Brand: brand, Last4: "0000"}, true
}

// PaymentMethodCard implements provider.Provider.
func (f *Fake) PaymentMethodCard(_ context.Context, pm string) (provider.Card, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.cardOf(pm)
	if !ok {
		return provider.Card{}, &provider.PermanentError{Op: "payment_method", StatusCode: 404, Code: "resource_missing", Err: provider.ErrNotFound}
	}
	return c, nil
}

// FailSearchNext makes the next n SearchMetadata calls return err.
func (f *Fake) FailSearchNext(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.searchFaults = append(f.searchFaults, err)
	}
}

type keyed struct {
	request string
	id      string
	at      time.Time
	// saved is the answer of a capture, cancel or refund, replayed as it was (a create or
	// confirm replays the payment as it is now).
	saved *savedAnswer
}

type savedAnswer struct {
	payment provider.Payment
	refund  provider.Refund
	err     error
}

type fault struct {
	err         error
	afterEffect bool
}

var (
	_ provider.Provider   = (*Fake)(nil)
	_ provider.Searcher   = (*Fake)(nil)
	_ provider.Operations = (*Fake)(nil)
)

// FailNext makes the next n write calls (Create, Confirm, Capture, Cancel, Refund) return err. With afterEffect the call
// applies its effect first, as a provider does when the connection drops after it charged.
func (f *Fake) FailNext(n int, err error, afterEffect bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.faults = append(f.faults, fault{err: err, afterEffect: afterEffect})
	}
}

// Calls returns how many write calls (Create, Confirm, Capture, Cancel, Refund) reached the
// fake, failed ones included.
func (f *Fake) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Len returns how many payments exist: a duplicate charge shows up here.
func (f *Fake) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.payments)
}

func (f *Fake) init() {
	if f.payments == nil {
		f.payments = map[string]provider.Payment{}
		f.keys = map[string]keyed{}
		f.refunds = map[string]provider.Refund{}
		f.refundsOf = map[string][]string{}
		f.pms = map[string]paymentFacts{}
	}
}

func (f *Fake) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// Create implements provider.Provider.
func (f *Fake) Create(_ context.Context, req provider.CreateRequest) (provider.Payment, error) {
	if req.IdempotencyKey == "" {
		return provider.Payment{}, provider.ErrMissingIdempotencyKey
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.init()
	f.calls++
	fl, failing := f.popFault()
	if failing && !fl.afterEffect {
		return provider.Payment{}, fl.err
	}
	p, err := f.idempotent(req.IdempotencyKey, fmt.Sprintf("create %+v", req), func() provider.Payment {
		p := provider.Payment{
			ID: fmt.Sprintf("pi_fake_%d", len(f.order)+1), Amount: req.Amount, Currency: req.Currency,
			Customer: req.Customer, PaymentMethod: req.PaymentMethod, Description: req.Description,
			Created: f.now().UTC().Truncate(time.Second), Metadata: maps.Clone(req.Metadata),
			CaptureMethod: req.CaptureMethod,
		}
		f.pms[p.ID] = paymentFacts{paymentMethod: req.PaymentMethod, offSession: req.OffSession, returnURL: req.ReturnURL}
		f.charge(&p, req.PaymentMethod, req.OffSession)
		f.order = append(f.order, p.ID)
		return p
	})
	if failing {
		return provider.Payment{}, fl.err
	}
	return p, err
}

// Confirm implements provider.Provider.
func (f *Fake) Confirm(_ context.Context, req provider.ConfirmRequest) (provider.Payment, error) {
	if req.IdempotencyKey == "" {
		return provider.Payment{}, provider.ErrMissingIdempotencyKey
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.init()
	f.calls++
	fl, failing := f.popFault()
	if failing && !fl.afterEffect {
		return provider.Payment{}, fl.err
	}
	if _, ok := f.payments[req.ID]; !ok {
		return provider.Payment{}, &provider.PermanentError{Op: "confirm", StatusCode: 404, Code: "resource_missing", Err: provider.ErrNotFound}
	}
	p, err := f.idempotent(req.IdempotencyKey, fmt.Sprintf("confirm %+v", req), func() provider.Payment {
		p := f.payments[req.ID]
		if p.Status == provider.StatusSucceeded {
			return p
		}
		if req.PaymentMethod != "" {
			p.PaymentMethod = req.PaymentMethod
		}
		facts := f.pms[p.ID]
		facts.paymentMethod, facts.offSession = p.PaymentMethod, req.OffSession
		f.pms[p.ID] = facts
		f.charge(&p, p.PaymentMethod, req.OffSession)
		return p
	})
	if failing {
		return provider.Payment{}, fl.err
	}
	return p, err
}

// idempotent applies effect once per key and answers a repeat from the stored result.
func (f *Fake) idempotent(key, request string, effect func() provider.Payment) (provider.Payment, error) {
	if k, ok := f.keys[key]; ok && f.now().Sub(k.at) < f.KeyHorizon() {
		if k.request != request {
			return provider.Payment{}, &provider.PermanentError{Op: "create", StatusCode: 400, Code: "idempotency_error"}
		}
		return result(f.payments[k.id])
	}
	p := effect()
	f.payments[p.ID] = p
	f.keys[key] = keyed{request: request, id: p.ID, at: f.now()}
	return result(p)
}

func result(p provider.Payment) (provider.Payment, error) {
	if p.Status == provider.StatusDeclined {
		return p, &provider.DeclineError{Payment: p}
	}
	return p, nil
}

// charge attempts p with pm: a decline, a wait for the customer's authentication, an
// authorization (manual capture) or a capture.
func (f *Fake) charge(p *provider.Payment, pm string, offSession bool) {
	p.NextAction, p.ClientSecret = nil, ""
	if requiresAuthentication(pm) && offSession {
		c, _ := f.cardOf(pm)
		p.Status = provider.StatusDeclined
		p.Decline = &provider.Decline{Code: "authentication_required", ErrorCode: "authentication_required", Network: c.Brand,
			Message: "Your card was declined. This transaction requires authentication."}
		p.Card = &c
		return
	}
	if requiresAuthentication(pm) {
		p.Status, p.Decline, p.Card = provider.StatusRequiresAction, nil, nil
		p.ClientSecret = provider.ClientSecret(p.ID + "_secret_fake")
		p.NextAction = &provider.NextAction{Type: "use_stripe_sdk"}
		if u := f.pms[p.ID].returnURL; u != "" {
			p.NextAction = &provider.NextAction{Type: "redirect_to_url", RedirectURL: "https://hooks.stripe.com/3d_secure_2/hosted?payment_intent=" + p.ID}
		}
		return
	}
	if code, ok := TestCardDeclines[pm]; ok {
		p.Status = provider.StatusDeclined
		errCode := "card_declined"
		if code == "expired_card" || code == "incorrect_cvc" || code == "processing_error" {
			errCode = code
		}
		// Like Stripe, a decline names the card: one fingerprint per payment method unless
		// AddCard said otherwise.
		c, _ := f.cardOf(pm)
		p.Decline = &provider.Decline{Code: code, ErrorCode: errCode, Network: c.Brand}
		p.Card = &c
		return
	}
	f.authorized(p)
}

// authorized completes a charge that the issuer approved: captured at once, or held.
func (f *Fake) authorized(p *provider.Payment) {
	p.Decline, p.Card, p.NextAction, p.ClientSecret = nil, nil, nil, ""
	p.LatestCharge = "ch_" + strings.TrimPrefix(p.ID, "pi_")
	if p.CaptureMethod == provider.CaptureManual {
		p.Status, p.AmountCapturable = provider.StatusRequiresCapture, p.Amount
		p.CaptureBefore = f.now().UTC().Truncate(time.Second).Add(AuthorizationWindow)
		return
	}
	p.Status, p.AmountReceived = provider.StatusSucceeded, p.Amount
}

func (f *Fake) popFault() (fault, bool) {
	if len(f.faults) == 0 {
		return fault{}, false
	}
	fl := f.faults[0]
	f.faults = f.faults[1:]
	return fl, true
}

// Get implements provider.Provider.
func (f *Fake) Get(_ context.Context, id string) (provider.Payment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.init()
	f.settle()
	p, ok := f.payments[id]
	if !ok {
		return provider.Payment{}, &provider.PermanentError{Op: "get", StatusCode: 404, Code: "resource_missing", Err: provider.ErrNotFound}
	}
	return p, nil
}

// List implements provider.Provider: newest first, inclusive whole-second bounds.
func (f *Fake) List(_ context.Context, lp provider.ListParams) iter.Seq2[provider.Payment, error] {
	return func(yield func(provider.Payment, error) bool) {
		f.mu.Lock()
		var out []provider.Payment
		started := lp.StartingAfter == ""
		for _, id := range slices.Backward(f.order) {
			if !started {
				started = id == lp.StartingAfter
				continue
			}
			p := f.payments[id]
			if (lp.Customer != "" && p.Customer != lp.Customer) ||
				(!lp.CreatedFrom.IsZero() && p.Created.Unix() < lp.CreatedFrom.Unix()) ||
				(!lp.CreatedTo.IsZero() && p.Created.Unix() > lp.CreatedTo.Unix()) {
				continue
			}
			out = append(out, p)
		}
		f.mu.Unlock()
		for _, p := range out {
			if !yield(p, nil) {
				return
			}
		}
	}
}

// KeyHorizon implements provider.Searcher.
func (f *Fake) KeyHorizon() time.Duration {
	if f.Horizon > 0 {
		return f.Horizon
	}
	return provider.StripeKeyHorizon
}

// ForgetKeys forgets every idempotency key now, as the provider does past its horizon.
func (f *Fake) ForgetKeys() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.keys)
}

// CountMetadata counts the payments whose metadata key has value: a double charge of one
// payment of ours shows up as 2.
func (f *Fake) CountMetadata(key, value string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.payments {
		if p.Metadata[key] == value {
			n++
		}
	}
	return n
}

// SearchMetadata implements provider.Searcher, oldest first.
func (f *Fake) SearchMetadata(_ context.Context, key, value string) ([]provider.Payment, error) {
	if err := provider.CheckSearchValue(key); err != nil {
		return nil, err
	}
	if err := provider.CheckSearchValue(value); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.searchFaults) > 0 {
		err := f.searchFaults[0]
		f.searchFaults = f.searchFaults[1:]
		return nil, err
	}
	var out []provider.Payment
	for _, id := range f.order {
		if p := f.payments[id]; p.Metadata[key] == value && len(out) < provider.MaxSearchResults {
			out = append(out, p)
		}
	}
	return out, nil
}
