package stripeprovider

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"time"

	"github.com/runtwice/twice/shared/provider"
	"github.com/stripe/stripe-go/v82"
)

// DefaultTimeout bounds one HTTP exchange with Stripe. A payment request has a caller waiting
// behind API Gateway's 29 s limit; the retry policy may make up to three exchanges.
const DefaultTimeout = 8 * time.Second

// ListPageSize is the page size of List, Stripe's maximum.
const ListPageSize = 100

// MaxIdleConnsPerHost is how many idle connections to the provider a Client keeps when its
// HTTPClient gives no transport: one transport for the process, Go's default with this many
// where Go's keeps 2. A Lambda instance makes one call at a time, but a process that makes
// calls side by side (the local stack, a worker) would otherwise close most connections after
// one call and open a new one for the next, a TLS handshake each against Stripe: under the
// local bench the stack opened a connection to the simulator for most of its 700 calls a
// second.
const MaxIdleConnsPerHost = 64

var transport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return t
}()

// ErrNoAPIKey: New was given a Client without an API key.
var ErrNoAPIKey = errors.New("stripeprovider: no API key")

// Client is the Stripe implementation of provider.Provider, on stripe-go's PaymentIntents API.
// It makes exactly one HTTP exchange per call (stripe-go's own retries are off) and maps every
// failure to the typed errors of package provider; package retry decides about repeats. Build
// it with New, which builds the HTTP client and stripe-go's backends once.
type Client struct {
	APIKey string
	// BaseURL is the API origin without /v1: https://api.stripe.com (the default), the local
	// simulator, or stripe-mock.
	BaseURL string
	// HTTPClient is copied, never modified; its Transport is wrapped to observe every
	// exchange. When nil, a client with Timeout is used; when it has no Transport, the
	// process's shared one (MaxIdleConnsPerHost).
	HTTPClient *http.Client
	// Timeout applies when HTTPClient is nil or has no timeout of its own. Default DefaultTimeout.
	Timeout time.Duration
	// Observer, when set, receives every HTTP exchange (the attempt log).
	Observer Observer
	// Now is the clock for Call timing and Retry-After dates. Default time.Now.
	Now func() time.Time

	sc *stripe.Client
}

var _ provider.Provider = (*Client)(nil)

// New returns c ready to call Stripe. It makes no network call.
func New(c Client) (*Client, error) {
	if c.APIKey == "" {
		return nil, ErrNoAPIKey
	}
	baseURL := c.BaseURL
	if baseURL == "" {
		baseURL = stripe.APIURL
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	hc := &http.Client{}
	if c.HTTPClient != nil {
		*hc = *c.HTTPClient
	}
	if hc.Timeout <= 0 {
		hc.Timeout = timeout
	}
	next := hc.Transport
	if next == nil {
		next = transport
	}
	out := &c
	hc.Transport = &capture{next: next, observer: c.Observer, now: out.now}

	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient:        hc,
		URL:               stripe.String(baseURL),
		MaxNetworkRetries: stripe.Int64(0), // package retry decides, with a budget
		EnableTelemetry:   stripe.Bool(false),
		LeveledLogger:     quietLogger{}, // our own slog lines and the attempt log say what matters
	})
	out.sc = stripe.NewClient(c.APIKey, stripe.WithBackends(backends))
	return out, nil
}

func (c *Client) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// Create creates and confirms a PaymentIntent for a card payment method in one call. A decline
// returns the declined Payment and a *provider.DeclineError holding it.
func (c *Client) Create(ctx context.Context, req provider.CreateRequest) (provider.Payment, error) {
	if req.IdempotencyKey == "" {
		return provider.Payment{}, provider.ErrMissingIdempotencyKey
	}
	params := &stripe.PaymentIntentCreateParams{
		Amount:   stripe.Int64(req.Amount),
		Currency: stripe.String(req.Currency),
		Confirm:  stripe.Bool(true),
		// A card-only intent needs no return_url when confirmed server-side.
		PaymentMethodTypes: []*string{stripe.String("card")},
		Metadata:           req.Metadata,
	}
	setString(&params.Customer, req.Customer)
	setString(&params.PaymentMethod, req.PaymentMethod)
	setString(&params.Description, req.Description)
	if req.OffSession {
		params.OffSession = stripe.Bool(true)
	}
	// Only set when asked for: an automatic create sends exactly what it always sent, so a key
	// first used before these fields existed still matches its parameters on a repeat.
	if req.CaptureMethod == provider.CaptureManual {
		params.CaptureMethod = stripe.String(string(stripe.PaymentIntentCaptureMethodManual))
		// The authorization's expiry (capture_before) is on the charge.
		params.AddExpand("latest_charge")
	}
	setString(&params.ReturnURL, req.ReturnURL)
	params.IdempotencyKey = stripe.String(req.IdempotencyKey)

	ctx, ex := withExchange(ctx)
	pi, err := c.sc.V1PaymentIntents.Create(ctx, params)
	return c.result("create", req.IdempotencyKey, pi, err, ex)
}

// Get retrieves a PaymentIntent. A declined payment is a Payment with StatusDeclined, not an
// error; a missing one is a *provider.PermanentError matching provider.ErrNotFound.
func (c *Client) Get(ctx context.Context, id string) (provider.Payment, error) {
	ctx, ex := withExchange(ctx)
	// The latest charge tells a refund (whole or partial) apart from a success.
	params := &stripe.PaymentIntentRetrieveParams{}
	params.AddExpand("latest_charge")
	pi, err := c.sc.V1PaymentIntents.Retrieve(ctx, id, params)
	return c.result("get", "", pi, err, ex)
}

// PaymentMethodCard retrieves a PaymentMethod (GET /v1/payment_methods/{id}) and returns its
// card: brand, last4 and the fingerprint that is the same for every PaymentMethod of one
// card number. A PaymentMethod of another type, or a card without a fingerprint, is
// provider.ErrNotCard.
func (c *Client) PaymentMethodCard(ctx context.Context, paymentMethod string) (provider.Card, error) {
	if paymentMethod == "" {
		return provider.Card{}, &provider.PermanentError{Op: "payment_method", StatusCode: http.StatusNotFound,
			Code: "resource_missing", Err: errors.New("stripeprovider: no payment method id")}
	}
	ctx, ex := withExchange(ctx)
	pm, err := c.sc.V1PaymentMethods.Retrieve(ctx, paymentMethod, &stripe.PaymentMethodRetrieveParams{})
	if err != nil {
		return provider.Card{}, c.mapError("payment_method", "", err, ex)
	}
	card := toCard(pm)
	if card == nil {
		return provider.Card{}, provider.ErrNotCard
	}
	return *card, nil
}

// Confirm confirms an existing PaymentIntent, with a new payment method when given.
func (c *Client) Confirm(ctx context.Context, req provider.ConfirmRequest) (provider.Payment, error) {
	if req.IdempotencyKey == "" {
		return provider.Payment{}, provider.ErrMissingIdempotencyKey
	}
	params := &stripe.PaymentIntentConfirmParams{}
	setString(&params.PaymentMethod, req.PaymentMethod)
	if req.OffSession {
		params.OffSession = stripe.Bool(true)
	}
	params.IdempotencyKey = stripe.String(req.IdempotencyKey)

	ctx, ex := withExchange(ctx)
	pi, err := c.sc.V1PaymentIntents.Confirm(ctx, req.ID, params)
	return c.result("confirm", req.IdempotencyKey, pi, err, ex)
}

// List pages through PaymentIntents newest first, ListPageSize at a time, with created[gte] and
// created[lte] (whole seconds, inclusive) and customer. Items carry no advice codes: Stripe's
// list gives last_payment_error without the raw fields this adapter reads them from.
func (c *Client) List(ctx context.Context, p provider.ListParams) iter.Seq2[provider.Payment, error] {
	return func(yield func(provider.Payment, error) bool) {
		params := &stripe.PaymentIntentListParams{}
		params.Limit = stripe.Int64(ListPageSize)
		params.AddExpand("data.latest_charge")
		setString(&params.StartingAfter, p.StartingAfter)
		setString(&params.Customer, p.Customer)
		if !p.CreatedFrom.IsZero() || !p.CreatedTo.IsZero() {
			r := &stripe.RangeQueryParams{}
			if !p.CreatedFrom.IsZero() {
				r.GreaterThanOrEqual = p.CreatedFrom.Unix()
			}
			if !p.CreatedTo.IsZero() {
				r.LesserThanOrEqual = p.CreatedTo.Unix()
			}
			params.CreatedRange = r
		}
		ctx, ex := withExchange(ctx)
		for pi, err := range c.sc.V1PaymentIntents.List(ctx, params) {
			if err != nil {
				yield(provider.Payment{}, c.mapError("list", "", err, ex))
				return
			}
			if !yield(toPayment(pi, nil), nil) {
				return
			}
		}
	}
}

func (c *Client) result(op, key string, pi *stripe.PaymentIntent, err error, ex *exchange) (provider.Payment, error) {
	if err != nil {
		err = c.mapError(op, key, err, ex)
		var d *provider.DeclineError
		if errors.As(err, &d) {
			return d.Payment, err
		}
		return provider.Payment{}, err
	}
	var raw []byte
	if pi.LastResponse != nil {
		raw = pi.LastResponse.RawJSON
	}
	return toPayment(pi, raw), nil
}

func setString(dst **string, v string) {
	if v != "" {
		*dst = stripe.String(v)
	}
}

// quietLogger drops stripe-go's own log lines.
type quietLogger struct{}

func (quietLogger) Debugf(string, ...any) {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Warnf(string, ...any)  {}

var _ provider.Searcher = (*Client)(nil)

// KeyHorizon implements provider.Searcher: Stripe keeps an idempotency key at least 24 hours.
func (c *Client) KeyHorizon() time.Duration { return provider.StripeKeyHorizon }

// SearchMetadata finds PaymentIntents by one metadata value with the Search API
// (GET /v1/payment_intents/search, query metadata['key']:'value'), at most
// provider.MaxSearchResults. Search results, like list items, carry no advice codes.
func (c *Client) SearchMetadata(ctx context.Context, key, value string) ([]provider.Payment, error) {
	if err := provider.CheckSearchValue(key); err != nil {
		return nil, err
	}
	if err := provider.CheckSearchValue(value); err != nil {
		return nil, err
	}
	params := &stripe.PaymentIntentSearchParams{}
	params.Query = "metadata['" + key + "']:'" + value + "'"
	params.Limit = stripe.Int64(provider.MaxSearchResults)
	ctx, ex := withExchange(ctx)
	var out []provider.Payment
	for pi, err := range c.sc.V1PaymentIntents.Search(ctx, params) {
		if err != nil {
			return nil, c.mapError("search", "", err, ex)
		}
		out = append(out, toPayment(pi, nil))
		if len(out) == provider.MaxSearchResults {
			break
		}
	}
	return out, nil
}
