package stripesim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/boltgroup"
)

// Defaults for the local stack; none of them is a real credential.
const (
	DefaultAddr          = "127.0.0.1:12111"
	DefaultAPIKey        = "sk_test_twice_local"
	DefaultWebhookSecret = "whsec_twice_local_dev_secret_do_not_use"
	DefaultWebhookURL    = "http://127.0.0.1:3000/webhooks/stripe"
	// DBFile is the simulator's bbolt file inside Config.DataDir.
	DBFile = "providersim.db"
)

// IdempotencyKeyTTL is how long Stripe remembers an idempotency key.
const IdempotencyKeyTTL = 24 * time.Hour

// ErrClosed is returned by Deliver after Close.
var ErrClosed = errors.New("stripesim: closed")

// Config configures a Simulator. Zero values take the documented defaults.
type Config struct {
	// DataDir holds providersim.db; it is created if missing. Required.
	DataDir string
	// APIKeys are the accepted secret keys (default DefaultAPIKey). Idempotency keys
	// are scoped per API key, as Stripe scopes them per account and mode.
	APIKeys []string
	// WebhookURL receives the signed events; empty records events without sending them.
	WebhookURL string
	// WebhookSecret signs events (default DefaultWebhookSecret).
	WebhookSecret string
	// Now is the clock for created times, key expiry, signatures and retry schedules.
	Now func() time.Time
	// Rand drives webhook retry jitter and shuffled replays (default: seeded from the clock).
	Rand *rand.Rand
	// HTTPClient sends webhooks (default: 10 s timeout, and an idle connection kept for each
	// of the SenderConcurrency senders).
	HTTPClient *http.Client
	// Log receives one line per decision that matters (default: discard).
	Log *slog.Logger
	// PollInterval is how often the background sender looks for due deliveries
	// (default 100 ms); new events wake it at once.
	PollInterval time.Duration
	// HoldTimeout bounds how long timeout_after_effect holds a connection (default 60 s).
	HoldTimeout time.Duration
	// RetryBase and RetryMax bound the webhook backoff: attempt n waits a uniformly random
	// time in [0, min(RetryMax, RetryBase*2^n)] (full jitter). Defaults 1 s and 1 min
	// (Stripe waits up to hours; locally a stack that restarts should hear soon).
	RetryBase, RetryMax time.Duration
	// RetryHorizon is how long an undelivered event is retried, like Stripe's 3 days.
	RetryHorizon time.Duration
	// SenderConcurrency is how many outbox entries are sent in parallel (default 8).
	SenderConcurrency int
	// MaxBatchSize caps the writes of one group commit (default 64; shared/boltgroup).
	MaxBatchSize int
	// MaxBatchDelay is the longest a group commit waits for more writers (default
	// boltgroup.DefaultLinger); a lone writer never waits.
	MaxBatchDelay time.Duration
	// NoSync turns fsync off. Every write still reaches the file before its call answers, so
	// the state survives the process being killed (kill -9); only a machine crash can lose the
	// last writes, as a provider the stack cannot see into might. The local stack runs it so.
	NoSync bool
	// RefundFailureDelay is how long after its creation a refund of pm_card_refundFail fails,
	// on the injected clock (default DefaultRefundFailureDelay). RunDue applies it.
	RefundFailureDelay time.Duration
	// ThrottleRate is the share of API requests answered as Stripe answers past an account's
	// rate limit: 429 rate_limit with Retry-After: 1, nothing applied (drawn from Rand; the
	// local stack's -throttle). Armed faults go first.
	ThrottleRate float64
}

// Simulator is a durable Stripe PaymentIntents simulator. It is an http.Handler.
type Simulator struct {
	cfg     Config
	db      *bolt.DB
	commits *boltgroup.Committer // the API's and the sender's writes, grouped under shared fsyncs
	log     *slog.Logger
	mux     *http.ServeMux
	faults  faultSet
	stats   counters

	randMu sync.Mutex
	rnd    *rand.Rand

	kick      chan struct{}
	quit      chan struct{} // closed by Close: releases held connections
	deliverMu sync.Mutex
	stop      context.CancelFunc
	done      chan struct{}
	closed    atomic.Bool
	reqSeq    atomic.Uint64
	bootTag   string
}

var _ http.Handler = (*Simulator)(nil)

// commit runs fn in one of the simulator's group commits: with the other writes waiting, under
// one fsync. fn may run more than once (alone, when its group failed).
func (s *Simulator) commit(ctx context.Context, fn func(*bolt.Tx) error) error {
	return s.commits.Submit(ctx, func(tx *bolt.Tx) (error, error) { return nil, fn(tx) })
}

// CommitStats is what the simulator's group committer has done (shared/boltgroup).
func (s *Simulator) CommitStats() boltgroup.Stats { return s.commits.Stats() }

// DB is the simulator's bbolt database, for process-level housekeeping (the local stack keeps
// its mapped pages out of the resident set).
func (s *Simulator) DB() *bolt.DB { return s.db }

// New opens (or creates) the simulator's state under cfg.DataDir.
func New(cfg Config) (*Simulator, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("stripesim: Config.DataDir is required")
	}
	if len(cfg.APIKeys) == 0 {
		cfg.APIKeys = []string{DefaultAPIKey}
	}
	if cfg.WebhookSecret == "" {
		cfg.WebhookSecret = DefaultWebhookSecret
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		seed := uint64(cfg.Now().UnixNano())
		cfg.Rand = rand.New(rand.NewPCG(seed, seed>>1|1))
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 100 * time.Millisecond
	}
	if cfg.HoldTimeout <= 0 {
		cfg.HoldTimeout = 60 * time.Second
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = time.Minute
	}
	if cfg.RetryHorizon <= 0 {
		cfg.RetryHorizon = 72 * time.Hour
	}
	if cfg.SenderConcurrency <= 0 {
		cfg.SenderConcurrency = 8
	}
	if cfg.HTTPClient == nil {
		// A connection per sender kept between passes: Go's default transport keeps 2 a host,
		// and the other senders' connections were closed after each delivery and opened anew.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = cfg.SenderConcurrency
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second, Transport: t}
	}
	if cfg.MaxBatchSize <= 0 {
		cfg.MaxBatchSize = 64
	}
	if cfg.RefundFailureDelay <= 0 {
		cfg.RefundFailureDelay = DefaultRefundFailureDelay
	}
	if cfg.WebhookURL != "" {
		u, err := url.Parse(cfg.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("stripesim: Config.WebhookURL %q is not an http(s) URL", cfg.WebhookURL)
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("stripesim: data dir: %w", err)
	}
	db, err := bolt.Open(filepath.Join(cfg.DataDir, DBFile), 0o600, &bolt.Options{Timeout: 5 * time.Second, NoSync: cfg.NoSync,
		// As etcd does: the freelist is rebuilt on open instead of written on every commit.
		NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("stripesim: open %s: %w", DBFile, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return initCounts(tx)
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("stripesim: init buckets: %w", err)
	}
	s := &Simulator{
		cfg:     cfg,
		db:      db,
		commits: boltgroup.New(db, boltgroup.Options{Linger: cfg.MaxBatchDelay, MaxGroup: cfg.MaxBatchSize}),
		log:     cfg.Log,
		rnd:     cfg.Rand,
		kick:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		bootTag: encode62(uint64(cfg.Now().UnixNano()), 10),
	}
	s.routes()
	return s, nil
}

func encode62(n uint64, width int) string {
	buf := make([]byte, width)
	for i := width - 1; i >= 0; i-- {
		buf[i] = base62[n%62]
		n /= 62
	}
	return string(buf)
}

// Start runs the webhook sender in the background until ctx ends or Close is called.
// Undelivered events from an earlier run are sent first.
// A second call does nothing.
func (s *Simulator) Start(ctx context.Context) {
	if s.stop != nil || s.closed.Load() {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	s.stop = cancel
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(s.cfg.PollInterval)
		defer t.Stop()
		var lastSweep time.Time
		for {
			if _, err := s.RunDue(); err != nil && !errors.Is(err, ErrClosed) && ctx.Err() == nil {
				s.log.Error("asynchronous changes failed", "err", err)
			}
			if _, err := s.Deliver(ctx); err != nil && !errors.Is(err, ErrClosed) && ctx.Err() == nil {
				s.log.Error("webhook delivery pass failed", "err", err)
			}
			if now := s.now(); now.Sub(lastSweep) >= sweepEvery {
				lastSweep = now
				if n, err := s.SweepIdempotencyKeys(); err != nil {
					s.log.Error("idempotency key sweep failed", "err", err)
				} else if n > 0 {
					s.log.Info("expired idempotency keys removed", "count", n)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-s.kick:
			case <-t.C:
			}
		}
	}()
}

// sweepEvery is how often (on the injected clock) Start removes expired keys.
const sweepEvery = time.Hour

// SweepIdempotencyKeys deletes idempotency records older than IdempotencyKeyTTL and
// returns how many it removed. Start runs it hourly; an expired key is also simply
// overwritten when it is used again.
func (s *Simulator) SweepIdempotencyKeys() (int, error) {
	return s.ExpireIdempotencyKeys(IdempotencyKeyTTL)
}

// ExpireIdempotencyKeys deletes idempotency records at least olderThan old (0: all of them)
// and returns how many it removed (POST /_sim/idempotency/expire).
func (s *Simulator) ExpireIdempotencyKeys(olderThan time.Duration) (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		n = 0
		now := s.now()
		c := bucket(tx, bucketIdem).Cursor()
		for k, v := c.First(); k != nil; {
			var rec idemRecord
			if err := rec.unmarshal(v); err != nil || now.Sub(time.Unix(0, rec.CreatedAt)) < olderThan {
				k, v = c.Next()
				continue
			}
			key := bytes.Clone(k)
			if err := c.Delete(); err != nil {
				return err
			}
			n++
			k, v = c.Seek(key) // Delete unsettles the cursor; seek to the key after the deleted one
		}
		return nil
	})
	return n, err
}

// Close stops the sender and closes the database. Undelivered events stay in the outbox.
func (s *Simulator) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(s.quit)
	if s.stop != nil {
		s.stop()
		<-s.done
	}
	s.deliverMu.Lock() // wait for a Deliver called by a test or control route
	defer s.deliverMu.Unlock()
	s.commits.Close()
	return s.db.Close()
}

// ServeHTTP serves the Stripe subset under /v1/ and the controls under /_sim/.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

func (s *Simulator) now() time.Time { return s.cfg.Now() }

func (s *Simulator) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Simulator) intn(n int) int {
	s.randMu.Lock()
	defer s.randMu.Unlock()
	return s.rnd.IntN(n)
}

func (s *Simulator) int64n(n int64) int64 {
	s.randMu.Lock()
	defer s.randMu.Unlock()
	return s.rnd.Int64N(n)
}

func (s *Simulator) routes() {
	m := http.NewServeMux()
	api := func(h http.HandlerFunc) http.Handler { return s.apiMiddleware(h) }
	m.Handle("POST /v1/payment_intents", api(s.handleCreate))
	m.Handle("GET /v1/payment_intents", api(s.handleList))
	m.Handle("GET /v1/payment_intents/search", api(s.handleSearch))
	m.Handle("GET /v1/payment_intents/{id}", api(s.handleRetrieve))
	m.Handle("POST /v1/payment_intents/{id}/confirm", api(s.handleConfirm))
	m.Handle("GET /v1/payment_methods/{id}", api(s.handlePaymentMethodRetrieve))
	m.Handle("POST /v1/refunds", api(s.handleRefund))
	m.Handle("GET /v1/refunds", api(s.handleRefundList))
	m.Handle("GET /v1/refunds/{id}", api(s.handleRefundRetrieve))
	m.Handle("POST /v1/payment_intents/{id}/cancel", api(s.handleCancel))
	m.Handle("POST /v1/payment_intents/{id}/capture", api(s.handleCapture))
	m.Handle("GET /v1/events", api(s.handleEventList))
	m.Handle("/v1/", api(s.handleUnknownRoute))

	m.HandleFunc("POST /_sim/faults", s.handleArmFault)
	m.HandleFunc("GET /_sim/faults", s.handleListFaults)
	m.HandleFunc("DELETE /_sim/faults", s.handleClearFaults)
	m.HandleFunc("POST /_sim/idempotency/expire", s.handleExpire)
	m.HandleFunc("POST /_sim/webhooks/replay", s.handleReplay)
	m.HandleFunc("POST /_sim/webhooks/pause", s.handlePause(true))
	m.HandleFunc("POST /_sim/webhooks/resume", s.handlePause(false))
	m.HandleFunc("POST /_sim/webhooks/drop", s.handleDrop)
	m.HandleFunc("POST /_sim/webhooks/flush", s.handleFlush)
	m.HandleFunc("GET /_sim/events", s.handleEvents)
	m.HandleFunc("GET /_sim/stats", s.handleStats)
	m.HandleFunc("POST /_sim/cards", s.handleCards)
	m.HandleFunc("POST /_sim/customers/{id}/events", s.handleCustomerEvent)
	m.HandleFunc("POST /_sim/payment_intents", s.handleSimCreate)
	m.HandleFunc("POST /_sim/payment_intents/{id}/mutate", s.handleMutate)
	m.HandleFunc("POST /_sim/payment_intents/{id}/settle", s.handleSettle)
	m.HandleFunc("DELETE /_sim/payment_intents/{id}", s.handleForget)
	m.HandleFunc("POST /_sim/payment_intents/{id}/dispute", s.handleDispute)
	m.HandleFunc("POST /_sim/payment_intents/{id}/authenticate", s.handleAuthenticate)
	s.mux = m
}

// maxBody caps request bodies; Stripe's own limit is far above any PaymentIntent.
const maxBody = 1 << 20

// apiRequest carries what the middleware established about a /v1 request.
type apiRequest struct {
	apiKey    string
	requestID string
}

type ctxKey struct{}

func requestOf(r *http.Request) apiRequest {
	v, _ := r.Context().Value(ctxKey{}).(apiRequest)
	return v
}

// apiMiddleware authenticates like Stripe, assigns a request id and applies armed faults.
func (s *Simulator) apiMiddleware(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.stats.requests.Add(1)
		reqID := "req_" + s.bootTag + encode62(s.reqSeq.Add(1), 8)
		w.Header().Set("Request-Id", reqID)
		key, ok := s.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="Stripe"`)
			writeAPIError(w, http.StatusUnauthorized, apiError{Type: errTypeInvalidRequest,
				Message: "Invalid API Key provided: " + redactKey(key)})
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, apiRequest{apiKey: key, requestID: reqID}))
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		f, armed := s.faults.take(r.URL.Path, r.Method)
		if !armed && s.throttled() {
			f, armed = Fault{Fault: FaultHTTP429, RetryAfterS: 1}, true
		}
		if !armed {
			next(w, r)
			return
		}
		s.stats.faults.Add(1)
		s.log.Info("fault injected", "fault", f.Fault, "path", r.URL.Path, "request_id", reqID)
		switch f.Fault {
		case FaultHTTP500:
			w.Header().Set("Stripe-Should-Retry", "true")
			writeAPIError(w, http.StatusInternalServerError, apiError{Type: errTypeAPI,
				Message: "Sorry, something went wrong. We've already been notified of the problem. (simulated fault)"})
		case FaultHTTP429:
			w.Header().Set("Retry-After", fmt.Sprint(f.RetryAfterS))
			writeAPIError(w, http.StatusTooManyRequests, apiError{Type: errTypeInvalidRequest, Code: "rate_limit",
				Message: "Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits. (simulated fault)"})
		case FaultLatency:
			t := time.NewTimer(time.Duration(f.LatencyMS) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
			next(w, r)
		case FaultTimeoutAfterEffect:
			next(discardWriter{h: http.Header{}}, r)
			s.hold(r.Context())
			abortConnection(w)
		}
	})
}

// hold waits until the client gives up, the hold bound passes or the simulator closes.
func (s *Simulator) hold(ctx context.Context) {
	t := time.NewTimer(s.cfg.HoldTimeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-s.quit:
	}
}

// abortConnection closes the connection without writing a response, so the client
// sees a reset or EOF after the effect happened: an unknown outcome.
func abortConnection(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
		return
	}
	panic(http.ErrAbortHandler) // net/http closes the stream without logging
}

type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}

func (s *Simulator) authenticate(r *http.Request) (string, bool) {
	key := ""
	if user, _, ok := r.BasicAuth(); ok {
		key = user
	} else if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		key = strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))
	}
	for _, k := range s.cfg.APIKeys {
		if key != "" && key == k {
			return key, true
		}
	}
	return key, false
}

func redactKey(k string) string {
	if len(k) <= 4 {
		return "****"
	}
	return strings.Repeat("*", min(len(k)-4, 20)) + k[len(k)-4:]
}

func (s *Simulator) handleUnknownRoute(w http.ResponseWriter, r *http.Request) {
	writeAPIError(w, http.StatusNotFound, apiError{Type: errTypeInvalidRequest,
		Message: fmt.Sprintf("Unrecognized request URL (%s: %s). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.", r.Method, r.URL.Path)})
}

// readForm reads a form body (POST) or the query (GET) the way Stripe does.
func readForm(r *http.Request) (string, error) {
	if r.Method == http.MethodGet {
		return r.URL.RawQuery, nil
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return "", err
	}
	q := string(b)
	if r.URL.RawQuery != "" { // Stripe also reads query parameters on POST.
		if q != "" {
			q += "&"
		}
		q += r.URL.RawQuery
	}
	return q, nil
}

type counters struct {
	requests, created, replayed, idemErrors, declined, faults atomic.Int64
	sent, sendFailures, createReplays                         atomic.Int64
}
