package recovery_test

// The doubles the step tests share. The tests that run the steps under the real definition
// on the local state-machine runner live with the runner, in infra/asl
// (recovery_machine_test.go, recovery_card_caps_test.go).

import (
	"bytes"
	"context"
	"errors"
	"io"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
)

const functionArn = "arn:aws:lambda:us-east-1:123456789012:function:recovery-steps"

// t0 is a Sunday morning: the first payday after it is Tuesday 1 December.
var t0 = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

func definition(t testing.TB) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "statemachines", "payment-recovery.asl.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Its one placeholder, filled as DefinitionSubstitutions fills it.
	return bytes.ReplaceAll(raw, []byte("${RecoveryStepsFunctionArn}"), []byte(functionArn))
}

// script says how a payment method behaves: it declines with code the first declines
// effective charges (forever when declines < 0), then succeeds.
type script struct {
	code     string
	declines int
	brand    string // visa when empty
	card     string // the card's fingerprint; "fp_" + the payment method when empty
}

type outcome struct {
	p   provider.Payment
	err error
}

// scriptedProvider confirms payments by script and, like Stripe, answers a repeated
// idempotency key with the outcome it stored for the first request: a repeat is never a
// second charge. It counts requests per key and effective charges per payment method.
type scriptedProvider struct {
	now func() time.Time

	mu      sync.Mutex
	scripts map[string]script
	stored  map[string]outcome
	calls   map[string]int       // requests per idempotency key
	at      map[string]time.Time // time of the effective charge per key
	effects map[string]int       // effective charges per payment method
	hang    map[string]bool      // keys whose first request hangs after its effect, until cancelled
	hung    chan string
	// cardReads counts PaymentMethodCard calls.
	cardReads int
}

var _ provider.Provider = (*scriptedProvider)(nil)

func newScriptedProvider(now func() time.Time) *scriptedProvider {
	return &scriptedProvider{now: now, scripts: map[string]script{}, stored: map[string]outcome{},
		calls: map[string]int{}, at: map[string]time.Time{}, effects: map[string]int{}, hang: map[string]bool{},
		hung: make(chan string, 1)}
}

func (s *scriptedProvider) Confirm(ctx context.Context, req provider.ConfirmRequest) (provider.Payment, error) {
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
	if sc.declines < 0 || n < sc.declines {
		p.Status = provider.StatusDeclined
		brand, fp := sc.brand, sc.card
		if brand == "" {
			brand = "visa"
		}
		if fp == "" {
			fp = "fp_" + req.PaymentMethod
		}
		p.Decline = &provider.Decline{Code: sc.code, ErrorCode: "card_declined", Network: brand}
		p.Card = &provider.Card{Fingerprint: fp, Brand: brand, Last4: "4242"}
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

func (s *scriptedProvider) Create(context.Context, provider.CreateRequest) (provider.Payment, error) {
	return provider.Payment{}, errors.New("recovery never creates")
}

func (s *scriptedProvider) Get(context.Context, string) (provider.Payment, error) {
	return provider.Payment{}, errors.New("recovery never reads")
}

// PaymentMethodCard names the card a payment method's declines name.
func (s *scriptedProvider) PaymentMethodCard(_ context.Context, pm string) (provider.Card, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cardReads++
	sc := s.scripts[pm]
	brand, fp := sc.brand, sc.card
	if brand == "" {
		brand = "visa"
	}
	if fp == "" {
		fp = "fp_" + pm
	}
	return provider.Card{Fingerprint: fp, Brand: brand, Last4: "4242"}, nil
}

func (s *scriptedProvider) List(context.Context, provider.ListParams) iter.Seq2[provider.Payment, error] {
	return func(yield func(provider.Payment, error) bool) { yield(provider.Payment{}, errors.New("not listed")) }
}

func (s *scriptedProvider) snapshot() (calls map[string]int, at map[string]time.Time, effects map[string]int) {
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

// sink is the dead-letter sink: one record per key, like the real table's conditional put.
type sink struct {
	mu      sync.Mutex
	records map[string]recovery.DeadLetter
	opens   int
}

func (s *sink) Open(_ context.Context, d recovery.DeadLetter) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opens++
	if _, ok := s.records[d.Key]; !ok {
		s.records[d.Key] = d
	}
	return nil
}

func (s *sink) all() map[string]recovery.DeadLetter {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]recovery.DeadLetter{}
	for k, v := range s.records {
		out[k] = v
	}
	return out
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// errorName is the name Retry and Catch match for an error a step returns: its ErrorName()
// (recovery.LambdaHandler reports it as Lambda's errorType), or "" for an unnamed error.
func errorName(err error) string {
	var named interface{ ErrorName() string }
	if errors.As(err, &named) {
		return named.ErrorName()
	}
	return ""
}
