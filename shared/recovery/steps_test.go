package recovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda/messages"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/recovery/recoverytest"
	"github.com/runtwice/twice/shared/webhooks"
	"github.com/runtwice/twice/shared/webhooks/worker"
)

func newSteps(t testing.TB, prov provider.Provider, clock *clock.Fake) (*recovery.Steps, *boltstore.Store, *recoverytest.DeadLetters) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "twice.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dl := &recoverytest.DeadLetters{}
	steps, err := recovery.NewSteps(recovery.Steps{Provider: prov, Store: st, DeadLetters: dl,
		Now: clock.Now, Rand: rand.New(rand.NewPCG(1, 2)), Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	return steps, st, dl
}

func putPayment(t testing.TB, st *boltstore.Store, p payments.Payment) {
	t.Helper()
	w, err := p.Put()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), w.Table, *w.Put, w.Cond); err != nil {
		t.Fatal(err)
	}
}

func chargeInput(t *testing.T, id string) json.RawMessage {
	t.Helper()
	in, err := json.Marshal(map[string]any{"step": recovery.StepCharge, "state": recovery.State{
		PaymentID: id, Invoice: "inv_" + id, Round: 1,
		Charges: []recovery.Charge{{At: t0, Result: recovery.ResultDeclined, Class: "technical"}},
		Plan:    &recovery.Plan{Retry: true, At: t0, Attempt: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestHandleErrorNames(t *testing.T) {
	declined := func(id string) payments.Payment {
		return payments.Payment{ID: id, Status: provider.StatusDeclined, PaymentMethod: "pm", ProviderPaymentID: "pi_" + id,
			Decline: &provider.Decline{Code: "processing_error"}, CreatedAt: t0, UpdatedAt: t0, Version: payments.VersionAt(t0, provider.StatusDeclined)}
	}
	tests := map[string]struct {
		payment     *payments.Payment
		providerErr error
		in          string // raw input; empty means a charge of pay_1
		wantName    string
	}{
		"malformed JSON":           {in: `{"step":`, wantName: recovery.ErrNameInvalid},
		"unknown step":             {in: `{"step":"refund","state":{"payment_id":"pay_1","round":1}}`, wantName: recovery.ErrNameInvalid},
		"no payment id":            {in: `{"step":"plan","state":{"round":1}}`, wantName: recovery.ErrNameInvalid},
		"round zero":               {in: `{"step":"plan","state":{"payment_id":"pay_1"}}`, wantName: recovery.ErrNameInvalid},
		"unknown payment":          {in: `{"step":"plan","state":{"payment_id":"pay_x","round":1}}`, wantName: recovery.ErrNameInvalid},
		"charge without a plan":    {in: `{"step":"charge","state":{"payment_id":"pay_1","round":1}}`, wantName: recovery.ErrNameInvalid},
		"unknown outcome":          {providerErr: &provider.UnknownOutcomeError{Op: "confirm", Err: errors.New("timeout")}, wantName: recovery.ErrNameTransient},
		"throttled":                {providerErr: &provider.ThrottledError{Op: "confirm", RetryAfter: time.Second, Err: errors.New("429")}, wantName: recovery.ErrNameTransient},
		"provider outage":          {providerErr: &provider.TransientError{Op: "confirm", StatusCode: 503, Err: errors.New("503")}, wantName: recovery.ErrNameTransient},
		"rejected request":         {providerErr: &provider.PermanentError{Op: "confirm", StatusCode: 400, Err: errors.New("400")}, wantName: recovery.ErrNameRejected},
		"idempotency key mismatch": {providerErr: &provider.PermanentError{Op: "confirm", StatusCode: 400, Code: "idempotency_error", Err: errors.New("400")}, wantName: recovery.ErrNameRejected},
		"revoked API key":          {providerErr: &provider.CredentialsError{Op: "confirm", StatusCode: 401, Err: errors.New("401")}, wantName: recovery.ErrNameRejected},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clock := clock.NewFake(t0)
			fp := &recoverytest.FailingProvider{Provider: recoverytest.NewProvider(clock.Now)}
			if tc.providerErr != nil {
				fp.Errs = []error{tc.providerErr}
			}
			steps, st, _ := newSteps(t, fp, clock)
			p := declined("pay_1")
			putPayment(t, st, p)
			in := json.RawMessage(tc.in)
			if tc.in == "" {
				in = chargeInput(t, "pay_1")
			}
			_, err := steps.Handle(context.Background(), in)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errorName(err); got != tc.wantName {
				t.Errorf("error name %q, want %q (%v)", got, tc.wantName, err)
			}
			if tc.providerErr != nil && !errors.Is(err, tc.providerErr) {
				t.Errorf("%v does not wrap the provider's error", err)
			}
		})
	}
}

func TestChargeNeverChargesASettledPayment(t *testing.T) {
	for _, status := range []string{provider.StatusSucceeded, provider.StatusRefunded, provider.StatusCanceled} {
		t.Run(status, func(t *testing.T) {
			clock := clock.NewFake(t0)
			prov := recoverytest.NewProvider(clock.Now)
			steps, st, _ := newSteps(t, prov, clock)
			putPayment(t, st, payments.Payment{ID: "pay_1", Status: status, ProviderPaymentID: "pi_1", PaymentMethod: "pm",
				CreatedAt: t0, Version: payments.VersionAt(t0, status)})
			out, err := steps.Handle(context.Background(), chargeInput(t, "pay_1"))
			if err != nil {
				t.Fatal(err)
			}
			var got recovery.State
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if got.Result != recovery.ResultSettled || got.Plan == nil || got.Plan.Retry {
				t.Errorf("state %s, want settled with no retry", out)
			}
			if calls, _, _ := prov.Snapshot(); len(calls) != 0 {
				t.Errorf("provider called %v", calls)
			}
		})
	}
}

// TestChargeKeepsANewerStoredPayment: a webhook that recorded a newer state first wins.
func TestChargeKeepsANewerStoredPayment(t *testing.T) {
	clock := clock.NewFake(t0)
	prov := recoverytest.NewProvider(clock.Now)
	prov.SetScript("pm", recoverytest.Script{Code: "processing_error", Declines: -1})
	steps, st, _ := newSteps(t, prov, clock)
	newer := payments.VersionAt(t0.Add(time.Hour), provider.StatusDeclined)
	putPayment(t, st, payments.Payment{ID: "pay_1", Status: provider.StatusDeclined, ProviderPaymentID: "pi_1", PaymentMethod: "pm",
		Decline: &provider.Decline{Code: "do_not_honor"}, CreatedAt: t0, Version: newer})
	if _, err := steps.Handle(context.Background(), chargeInput(t, "pay_1")); err != nil {
		t.Fatal(err)
	}
	p, err := payments.Get(context.Background(), st, "pay_1")
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != newer || p.Decline.Code != "do_not_honor" {
		t.Errorf("stored payment version %d decline %+v: the older outcome overwrote the newer one", p.Version, p.Decline)
	}
}

func TestLambdaHandlerReportsErrorNames(t *testing.T) {
	tests := map[string]struct {
		err      error
		wantType string
	}{
		"transient": {&recovery.TransientError{Op: "charge", Err: errors.New("x")}, recovery.ErrNameTransient},
		"invalid":   {&recovery.InvalidError{Err: errors.New("x")}, recovery.ErrNameInvalid},
		"rejected":  {&recovery.RejectedError{Op: "charge", Err: errors.New("x")}, recovery.ErrNameRejected},
		"unnamed":   {errors.New("plain"), ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := recovery.LambdaHandler(func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, tc.err })
			_, err := h(context.Background(), nil)
			var ire messages.InvokeResponse_Error
			if tc.wantType == "" {
				if errors.As(err, &ire) || err != tc.err {
					t.Fatalf("unnamed error became %#v", err)
				}
				return
			}
			if !errors.As(err, &ire) || ire.Type != tc.wantType || ire.Message != tc.err.Error() {
				t.Fatalf("got %#v, want type %s", err, tc.wantType)
			}
		})
	}
	ok := recovery.LambdaHandler(func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`1`), nil })
	if out, err := ok(context.Background(), nil); err != nil || string(out) != "1" {
		t.Errorf("success path: %s, %v", out, err)
	}
}

// TestDefinitionRules checks what asl-validator does not: every Task calls the steps function
// with a step name, retries Lambda's and our transient errors with full jitter and a delay cap,
// and catches everything into a dead-letter state keeping its input.
func TestDefinitionRules(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "statemachines", "payment-recovery.asl.json"))
	if err != nil {
		t.Fatal(err)
	}
	var def struct {
		States map[string]struct {
			Type       string
			Resource   string
			Parameters struct {
				FunctionName string
				Payload      map[string]any
			}
			Retry []struct {
				ErrorEquals     []string
				BackoffRate     float64
				MaxDelaySeconds int
				JitterStrategy  string
			}
			Catch []struct {
				ErrorEquals []string
				ResultPath  string
				Next        string
			}
		}
	}
	if err := json.Unmarshal(raw, &def); err != nil {
		t.Fatal(err)
	}
	steps := map[string]bool{}
	for name, s := range def.States {
		if s.Type != "Task" {
			continue
		}
		// No Task waits in the execution: a wait ends it (the park step) and a timer resumes it.
		if s.Resource != "arn:aws:states:::lambda:invoke" || s.Parameters.FunctionName != "${RecoveryStepsFunctionArn}" || s.Parameters.Payload["state.$"] != "$" {
			t.Errorf("%s: resource %s function %s payload %v", name, s.Resource, s.Parameters.FunctionName, s.Parameters.Payload)
		}
		step, _ := s.Parameters.Payload["step"].(string)
		steps[step] = true
		retried := map[string]bool{}
		for _, r := range s.Retry {
			if r.JitterStrategy != "FULL" || r.BackoffRate != 2 || r.MaxDelaySeconds <= 0 {
				t.Errorf("%s: retrier %+v", name, r)
			}
			for _, e := range r.ErrorEquals {
				retried[e] = true
			}
		}
		// Lambda.Unknown is a function that timed out or crashed; every step is idempotent
		// (reads, a charge under its attempt key, a record opened by its key), so it repeats.
		if s.Parameters.Payload["now.$"] != "$$.State.EnteredTime" {
			t.Errorf("%s does not pass the workflow's time: payload %v", name, s.Parameters.Payload)
		}
		for _, e := range []string{"Lambda.ServiceException", "Lambda.AWSLambdaException", "Lambda.SdkClientException", "Lambda.TooManyRequestsException",
			"Lambda.Unknown", "Lambda.ClientExecutionTimeoutException", recovery.ErrNameTransient} {
			if !retried[e] {
				t.Errorf("%s does not retry %s", name, e)
			}
		}
		catches := s.Catch
		if len(catches) != 1 || catches[0].ErrorEquals[0] != "States.ALL" || catches[0].ResultPath != "$.error" {
			t.Errorf("%s: catch %+v", name, catches)
		} else if next := def.States[catches[0].Next]; next.Type != "Fail" && next.Parameters.Payload["step"] != recovery.StepDeadLetter {
			t.Errorf("%s catches into %s, neither a dead-letter step nor Fail", name, catches[0].Next)
		}
	}
	for _, want := range []string{recovery.StepPlan, recovery.StepCharge, recovery.StepDeadLetter, recovery.StepPark, recovery.StepSteer} {
		if !steps[want] {
			t.Errorf("no Task runs step %s", want)
		}
	}
}

// TestASLValidator runs npm's asl-validator (TWICE_TEST_ASL_VALIDATOR is its binary) on the
// definition, and on a broken copy to show the check can fail.
func TestASLValidator(t *testing.T) {
	bin := os.Getenv("TWICE_TEST_ASL_VALIDATOR")
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("TWICE_TEST_ASL_VALIDATOR is not set")
		}
		t.Skip("TWICE_TEST_ASL_VALIDATOR is not set")
	}
	file := filepath.Join("..", "..", "statemachines", "payment-recovery.asl.json")
	if out, err := exec.Command(bin, "--json-path", file).CombinedOutput(); err != nil {
		t.Fatalf("asl-validator: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(t.TempDir(), "broken.asl.json")
	if err := os.WriteFile(broken, []byte(strings.Replace(string(raw), `"Next": "Decide"`, `"Next": "Nowhere"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "--json-path", broken).CombinedOutput(); err == nil {
		t.Fatalf("asl-validator accepted a Next to a missing state:\n%s", out)
	}
}

func TestNewStepsNeedsItsDependencies(t *testing.T) {
	_, err := recovery.NewSteps(recovery.Steps{})
	if !errors.Is(err, recovery.ErrStepsConfig) {
		t.Fatalf("err %v", err)
	}
}

// detachedProvider is Stripe after a decline: the PaymentIntent's payment method is detached
// and kept on last_payment_error, which Get returns as the payment's PaymentMethod.
type detachedProvider struct {
	*recoverytest.Provider
	pm   string
	gets int
}

func (d *detachedProvider) Get(_ context.Context, id string) (provider.Payment, error) {
	d.gets++
	return provider.Payment{ID: id, Status: provider.StatusDeclined, PaymentMethod: d.pm}, nil
}

// A payment the webhook worker created (the API's commit was lost) carries no payment method;
// the charge reads it back from the provider instead of confirming with none, which Stripe
// rejects.
func TestChargeReadsBackADetachedPaymentMethod(t *testing.T) {
	clock := clock.NewFake(t0)
	prov := &detachedProvider{Provider: recoverytest.NewProvider(clock.Now), pm: "pm_detached"}
	steps, st, dl := newSteps(t, prov, clock)
	putPayment(t, st, payments.Payment{ID: "pay_1", Status: provider.StatusDeclined, ProviderPaymentID: "pi_1",
		Decline: &provider.Decline{Code: "processing_error"}, CreatedAt: t0, Version: payments.VersionAt(t0, provider.StatusDeclined)})
	out, err := steps.Handle(context.Background(), chargeInput(t, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	var res recovery.State
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	_, _, effects := prov.Snapshot()
	if res.Result != recovery.ResultSucceeded || effects["pm_detached"] != 1 || prov.gets != 1 || len(dl.All()) != 0 {
		t.Fatalf("outcome %q, charges %v, gets %d, dead letters %d", res.Result, effects, prov.gets, len(dl.All()))
	}
	p, err := payments.Get(context.Background(), st, "pay_1")
	if err != nil || p.Status != provider.StatusSucceeded || p.PaymentMethod != "pm_detached" {
		t.Fatalf("stored payment %+v %v", p, err)
	}
}

// TestChargeVersionsOnTheSharedClock: a step's time may run ahead of the clock every other
// writer shares (on the local runner with a time factor each execution has its own, faster
// time), but the payment it records is versioned on the shared clock. Were it versioned on the
// execution's time, days ahead, every later event of the provider (whose `created` is on the
// shared clock) would be older than the stored decline and ignored: the next attempt's
// success with it.
func TestChargeVersionsOnTheSharedClock(t *testing.T) {
	clock := clock.NewFake(t0)
	prov := recoverytest.NewProvider(clock.Now)
	prov.SetScript("pm", recoverytest.Script{Code: "card_velocity_exceeded", Declines: 1})
	steps, st, _ := newSteps(t, prov, clock)
	putPayment(t, st, payments.Payment{ID: "pay_1", Status: provider.StatusDeclined, ProviderPaymentID: "pi_1", PaymentMethod: "pm",
		Amount: 1000, Currency: "usd", Decline: &provider.Decline{Code: "card_velocity_exceeded"}, CreatedAt: t0, UpdatedAt: t0,
		Version: payments.VersionAt(t0, provider.StatusDeclined)})
	var in map[string]any
	if err := json.Unmarshal(chargeInput(t, "pay_1"), &in); err != nil {
		t.Fatal(err)
	}
	in["now"] = t0.Add(7 * 24 * time.Hour) // the execution's own time, a week ahead
	raw, _ := json.Marshal(in)
	clock.Advance(time.Second)
	if _, err := steps.Handle(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	p, err := payments.Get(context.Background(), st, "pay_1")
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != provider.StatusDeclined {
		t.Fatalf("status %s after the declined attempt", p.Status)
	}
	if limit := payments.VersionAt(clock.Now(), p.Status); p.Version > limit {
		t.Errorf("payment version %d is ahead of the shared clock's %d (%s)", p.Version, limit, clock.Now())
	}

	// The next attempt succeeds at the provider a minute later; its event carries the
	// provider's time.
	clock.Advance(time.Minute)
	body, _ := json.Marshal(map[string]any{"id": "evt_ok", "object": "event", "type": "payment_intent.succeeded",
		"created": clock.Now().Unix(), "data": map[string]any{"object": map[string]any{"id": "pi_1", "object": "payment_intent",
			"status": "succeeded", "amount": 1000, "currency": "usd", "metadata": map[string]string{payments.MetaPaymentID: "pay_1"}}}})
	w := &worker.Worker{Applier: &payments.Applier{Store: st, Now: clock.Now, Log: discard()}}
	out, err := w.Apply(context.Background(), webhooks.Delivery{Provider: webhooks.ProviderStripe, EventID: "evt_ok", Body: body, ReceivedAt: clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := payments.Get(context.Background(), st, "pay_1"); out != payments.Applied || p.Status != provider.StatusSucceeded {
		t.Fatalf("the provider's success was %s; payment %s (version %d)", out, p.Status, p.Version)
	}
}

// racingProvider is the provider whose report of a later change (a refund's event) is stored
// while the charge's answer is on its way back to the step.
type racingProvider struct {
	*recoverytest.Provider
	before func()
}

func (r *racingProvider) Confirm(ctx context.Context, req provider.ConfirmRequest) (provider.Payment, error) {
	if r.before != nil {
		r.before()
		r.before = nil
	}
	return r.Provider.Confirm(ctx, req)
}

// A step's payment write that loses to a newer version is dropped with the change message that
// announces it: a message never commits without its state, or its version could name another
// writer's state (a refund recorded one above what it read) and the feed would drop that one.
func TestChargeThatLosesTheRaceAnnouncesNothing(t *testing.T) {
	clock := clock.NewFake(t0)
	prov := &racingProvider{Provider: recoverytest.NewProvider(clock.Now)}
	steps, st, _ := newSteps(t, prov, clock)
	putPayment(t, st, payments.Payment{ID: "pay_1", Status: provider.StatusDeclined, ProviderPaymentID: "pi_1", PaymentMethod: "pm",
		Amount: 1000, Currency: "usd", Decline: &provider.Decline{Code: "processing_error"}, CreatedAt: t0, UpdatedAt: t0,
		Version: payments.VersionAt(t0, provider.StatusDeclined)})
	clock.Advance(time.Second)
	newer := payments.Payment{ID: "pay_1", Status: provider.StatusRefunded, ProviderPaymentID: "pi_1", PaymentMethod: "pm",
		Amount: 1000, AmountRefunded: 1000, Currency: "usd", CreatedAt: t0, UpdatedAt: t0,
		Version: payments.VersionAt(clock.Now().Add(time.Hour), provider.StatusRefunded)}
	prov.before = func() { putPayment(t, st, newer) }
	if _, err := steps.Handle(context.Background(), chargeInput(t, "pay_1")); err != nil {
		t.Fatal(err)
	}
	if prov.before != nil {
		t.Fatal("the charge never reached the provider")
	}
	if p, err := payments.Get(context.Background(), st, "pay_1"); err != nil || p.Version != newer.Version {
		t.Fatalf("stored %+v %v: want the newer version to stand", p, err)
	}
	items, err := outbox.Undelivered(context.Background(), st, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if m, err := outbox.Decode(it); err == nil && m.Kind == payments.KindPublishChange {
			t.Errorf("change message %s committed without its payment write", m.ID)
		}
	}
}
