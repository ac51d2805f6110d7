package payments

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/runtwice/twice/shared/problem"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/queue"
)

// TestRequiresActionAnswersWithTheClientSecretOnce: a payment waiting for the customer is 201
// requires_action with client_secret and next_action; the replay is the same bytes; GET shows
// the status and the next action but never the secret, and neither does the event feed.
func TestRequiresActionAnswersWithTheClientSecretOnce(t *testing.T) {
	f := newFixture(t)
	first := f.do(t, "POST", "/payments", "k-3ds", body("pm_3ds"))
	var v View
	if err := json.Unmarshal(first.Body.Bytes(), &v); err != nil || first.Code != http.StatusCreated {
		t.Fatalf("%d %s", first.Code, first.Body)
	}
	if v.Status != provider.StatusRequiresAction || v.ClientSecret == nil || !strings.HasSuffix(*v.ClientSecret, "_secret_s3cr3t") ||
		v.NextAction == nil || v.NextAction.Type != "use_stripe_sdk" {
		t.Fatalf("answer %s", first.Body)
	}
	again := f.do(t, "POST", "/payments", "k-3ds", body("pm_3ds"))
	if again.Body.String() != first.Body.String() || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %s", again.Code, again.Body)
	}
	get := f.do(t, "GET", "/payments/"+v.ID, "", "")
	if get.Code != http.StatusOK || strings.Contains(get.Body.String(), "secret") ||
		!strings.Contains(get.Body.String(), `"status":"requires_action"`) || !strings.Contains(get.Body.String(), `"next_action":{"type":"use_stripe_sdk"}`) {
		t.Fatalf("GET %d %s", get.Code, get.Body)
	}
	f.drain(t)
	for id, c := range f.changes {
		if c.Payment.ClientSecret != nil {
			t.Fatalf("change %s carries the client secret", id)
		}
	}
	if len(f.declines.ids) != 0 || len(f.jobs.list) != 0 {
		t.Fatalf("follow-ons for a payment waiting on its customer: %v %v", f.declines.ids, f.jobs.list)
	}
}

// TestOffSessionDeclinesInsteadOfWaiting: the same card off-session is a decline (402) that
// starts recovery, which classifies it.
func TestOffSessionDeclinesInsteadOfWaiting(t *testing.T) {
	f := newFixture(t)
	b := `{"amount":1500,"currency":"usd","customer":"cus_1","payment_method":"pm_3ds","off_session":true}`
	a := f.do(t, "POST", "/payments", "k-off", b)
	if a.Code != http.StatusPaymentRequired || !strings.Contains(a.Body.String(), `"decline_code":"authentication_required"`) ||
		strings.Contains(a.Body.String(), "client_secret") {
		t.Fatalf("%d %s", a.Code, a.Body)
	}
	f.drain(t)
	if len(f.declines.ids) != 1 {
		t.Fatalf("recovery starts %v", f.declines.ids)
	}
}

// TestManualCaptureHolds: capture_method manual is requires_capture with the hold in the answer.
func TestManualCaptureHolds(t *testing.T) {
	f := newFixture(t)
	b := `{"amount":1500,"currency":"usd","customer":"cus_1","payment_method":"pm_hold","capture_method":"manual"}`
	a := f.do(t, "POST", "/payments", "k-hold", b)
	var v View
	if err := json.Unmarshal(a.Body.Bytes(), &v); err != nil || a.Code != http.StatusCreated {
		t.Fatalf("%d %s", a.Code, a.Body)
	}
	if v.Status != provider.StatusRequiresCapture || v.CaptureMethod != CaptureManual || v.AmountCapturable != 1500 ||
		v.CaptureBefore == nil || *v.CaptureBefore != "2026-12-06T10:00:00Z" {
		t.Fatalf("answer %s", a.Body)
	}
}

// TestDefaultsAreTheSameRequest: spelling out a default is the same request under one key.
func TestDefaultsAreTheSameRequest(t *testing.T) {
	f := newFixture(t)
	if a := f.do(t, "POST", "/payments", "k-def", body("pm_card_visa")); a.Code != http.StatusCreated {
		t.Fatalf("%d %s", a.Code, a.Body)
	}
	spelled := `{"amount":1500,"currency":"usd","customer":"cus_1","payment_method":"pm_card_visa","off_session":false,"capture_method":"automatic","metadata":{}}`
	if a := f.do(t, "POST", "/payments", "k-def", spelled); a.Code != http.StatusCreated || a.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("%d %s", a.Code, a.Body)
	}
	changed := `{"amount":1500,"currency":"usd","customer":"cus_1","payment_method":"pm_card_visa","off_session":true}`
	if a := f.do(t, "POST", "/payments", "k-def", changed); a.Code != http.StatusUnprocessableEntity || !strings.Contains(a.Body.String(), "off_session") {
		t.Fatalf("%d %s", a.Code, a.Body)
	}
}

// Capture and Cancel make scriptedProvider a provider.Operations over the payments it made.
func (p *scriptedProvider) Capture(_ context.Context, req provider.CaptureRequest) (provider.Payment, error) {
	return p.operate(req.ID, req.IdempotencyKey, "capture", provider.StatusRequiresCapture, func(pay *provider.Payment) {
		pay.Status, pay.AmountReceived, pay.AmountCapturable = provider.StatusSucceeded, pay.AmountCapturable, 0
		if req.AmountToCapture > 0 {
			pay.AmountReceived = req.AmountToCapture
		}
	})
}

func (p *scriptedProvider) Cancel(_ context.Context, req provider.CancelRequest) (provider.Payment, error) {
	return p.operate(req.ID, req.IdempotencyKey, "cancel", "", func(pay *provider.Payment) {
		pay.Status, pay.AmountCapturable, pay.CancellationReason = provider.StatusCanceled, 0, string(req.Reason)
	})
}

func (p *scriptedProvider) Refund(context.Context, provider.RefundRequest) (provider.Refund, error) {
	return provider.Refund{}, errors.New("not scripted")
}

func (p *scriptedProvider) Refunds(context.Context, provider.RefundListParams) iter.Seq2[provider.Refund, error] {
	return func(func(provider.Refund, error) bool) {}
}

// operate applies change to the payment id once per key (a repeat returns the first answer),
// if its status allows it (from: that status only; "": anything not final).
func (p *scriptedProvider) operate(id, key, op string, from provider.Status, change func(*provider.Payment)) (provider.Payment, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[key]++
	for i := range p.made {
		pay := &p.made[i]
		if pay.ID != id {
			continue
		}
		if p.calls[key] > 1 && pay.Status != from {
			return *pay, nil // the key's first answer
		}
		if (from != "" && pay.Status != from) || (from == "" && pay.Status.Final()) {
			return provider.Payment{}, &provider.PermanentError{Op: op, StatusCode: 400, Code: "payment_intent_unexpected_state"}
		}
		change(pay)
		return *pay, nil
	}
	return provider.Payment{}, &provider.PermanentError{Op: op, StatusCode: 404, Code: "resource_missing"}
}

// TestCaptureAndCancel: each needs a key, replays its answer, refuses the key on another
// payment, answers a state that does not allow it with a stored 409, and moves the payment.
func TestCaptureAndCancel(t *testing.T) {
	f := newFixture(t)
	hold := func(key string) View {
		b := `{"amount":1500,"currency":"usd","customer":"cus_1","payment_method":"pm_hold","capture_method":"manual"}`
		a := f.do(t, "POST", "/payments", key, b)
		var v View
		if err := json.Unmarshal(a.Body.Bytes(), &v); err != nil || a.Code != http.StatusCreated {
			t.Fatalf("%d %s", a.Code, a.Body)
		}
		return v
	}
	one, two := hold("h-1"), hold("h-2")

	checkProblem(t, f.do(t, "POST", "/payments/"+one.ID+"/capture", "", ""), 400, problem.KeyMissing, nil)
	checkProblem(t, f.do(t, "POST", "/payments/pay_nope/capture", "c-1", ""), 404, problem.NotFound, nil)
	checkProblem(t, f.do(t, "POST", "/payments/"+one.ID+"/capture", "c-1", `{"amount_to_capture":"x"}`), 400, problem.MalformedRequest, nil)
	checkProblem(t, f.do(t, "POST", "/payments/"+one.ID+"/capture", "c-1", `{"amount_to_capture":1501}`), 400, problem.InvalidRequest, []string{"amount_to_capture"})
	// 0 is not "all": the document's minimum is 1, and leaving the field out is how to say all.
	checkProblem(t, f.do(t, "POST", "/payments/"+one.ID+"/capture", "c-1", `{"amount_to_capture":0}`), 400, problem.InvalidRequest, []string{"amount_to_capture"})
	checkProblem(t, f.do(t, "POST", "/payments/"+one.ID+"/cancel", "x-1", `{"reason":"bored"}`), 400, problem.InvalidRequest, []string{"reason"})

	// The same key string as the create is another request: its own key space.
	cap1 := f.do(t, "POST", "/payments/"+one.ID+"/capture", "h-1", `{"amount_to_capture":1000}`)
	var v View
	if err := json.Unmarshal(cap1.Body.Bytes(), &v); err != nil || cap1.Code != http.StatusOK {
		t.Fatalf("capture %d %s", cap1.Code, cap1.Body)
	}
	if v.Status != provider.StatusSucceeded || v.AmountReceived != 1000 || v.AmountCapturable != 0 || v.CaptureBefore != nil {
		t.Fatalf("captured %s", cap1.Body)
	}
	again := f.do(t, "POST", "/payments/"+one.ID+"/capture", "h-1", `{"amount_to_capture":1000}`)
	if again.Code != http.StatusOK || again.Body.String() != cap1.Body.String() || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %s", again.Code, again.Body)
	}
	checkProblem(t, f.do(t, "POST", "/payments/"+two.ID+"/capture", "h-1", `{"amount_to_capture":1000}`), 422, problem.KeyReused, []string{"payment"})
	if n := f.prov.calls[provider.CaptureKey("local", "h-1")]; n != 1 {
		t.Fatalf("%d provider captures under the key, want 1", n)
	}

	// A cancel of the captured payment: the payment's state refuses it, and that is the answer.
	late := f.do(t, "POST", "/payments/"+one.ID+"/cancel", "x-1", "")
	checkProblem(t, late, 409, problem.PaymentState, nil)
	if l2 := f.do(t, "POST", "/payments/"+one.ID+"/cancel", "x-1", ""); l2.Body.String() != late.Body.String() || l2.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("409 replay %d %s", l2.Code, l2.Body)
	}

	c := f.do(t, "POST", "/payments/"+two.ID+"/cancel", "x-2", `{"reason":"requested_by_customer"}`)
	if c.Code != http.StatusOK || !strings.Contains(c.Body.String(), `"status":"canceled"`) ||
		!strings.Contains(c.Body.String(), `"cancellation_reason":"requested_by_customer"`) {
		t.Fatalf("cancel %d %s", c.Code, c.Body)
	}
	if g := f.do(t, "GET", "/payments/"+two.ID, "", ""); !strings.Contains(g.Body.String(), `"status":"canceled"`) {
		t.Fatalf("GET after cancel %s", g.Body)
	}
}

// TestAutoCancelOfAPaymentLeftWaiting: the outbox message queues the auto-cancel job; the job
// cancels at the provider under the auto-cancel key once, records the cancel, and a repeat of
// it (or a job for a payment that moved on) does nothing.
func TestAutoCancelOfAPaymentLeftWaiting(t *testing.T) {
	f := newFixture(t)
	a := f.do(t, "POST", "/payments", "k-wait", body("pm_3ds"))
	var v View
	if err := json.Unmarshal(a.Body.Bytes(), &v); err != nil || v.Status != provider.StatusRequiresAction {
		t.Fatalf("%d %s", a.Code, a.Body)
	}
	p, err := Get(context.Background(), f.svc.Store, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	m, err := AutoCancelMessage(p, ReasonCustomerWindow, created)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Store.Transact(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	f.drain(t)
	if len(f.jobs.list) != 1 || f.jobs.list[0].Cancel != ReasonCustomerWindow || f.jobs.list[0].PaymentID != v.ID {
		t.Fatalf("jobs %+v", f.jobs.list)
	}
	for range 2 {
		b, _ := json.Marshal(f.jobs.list[0])
		if err := f.svc.ResolveMessage(context.Background(), queue.Message{ID: "m-cancel", Body: b}); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.prov.calls[provider.AutoCancelKey(v.ID, ReasonCustomerWindow)]; n != 1 {
		t.Fatalf("%d provider cancels, want 1", n)
	}
	got := f.do(t, "GET", "/payments/"+v.ID, "", "")
	if !strings.Contains(got.Body.String(), `"status":"canceled"`) || !strings.Contains(got.Body.String(), `"cancellation_reason":"abandoned"`) ||
		strings.Contains(got.Body.String(), "next_action") {
		t.Fatalf("GET %s", got.Body)
	}
}

// FuzzParseOperationRequests: capture and cancel bodies are refused with a classified error
// or accepted within their bounds, never a panic.
func FuzzParseOperationRequests(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"amount_to_capture":1500}`, `{"amount_to_capture":-1}`, `{"amount_to_capture":1e400}`,
		`{"amount_to_capture":0}`, `{"AMOUNT_TO_CAPTURE":-0}`, `{"amount_to_capture":null}`,
		`{"reason":"abandoned"}`, `{"reason":"x"}`, `{"reason":1}`, `{"a":1,"a":2}`, `[]`, `{} {}`, ` null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		classified := func(err error) {
			var invalid *InvalidError
			if !errors.As(err, &invalid) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("unclassified error %v", err)
			}
		}
		if c, err := ParseCaptureRequest(b); err != nil {
			classified(err)
		} else if c.AmountToCapture < 0 || c.AmountToCapture > maxAmount {
			t.Fatalf("accepted amount_to_capture %d", c.AmountToCapture)
		} else if c.AmountToCapture == 0 && givesCaptureAmount(b) {
			t.Fatalf("accepted an explicit amount_to_capture as all: %q", b)
		}
		if c, err := ParseCancelRequest(b); err != nil {
			classified(err)
		} else if c.Reason != "" && !slices.Contains(cancelReasons, provider.CancelReason(c.Reason)) {
			t.Fatalf("accepted reason %q", c.Reason)
		}
	})
}

// givesCaptureAmount reports whether a body names amount_to_capture with a value other than
// null (encoding/json matches field names case-insensitively, so this does too).
func givesCaptureAmount(b []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	for k, v := range m {
		if strings.EqualFold(k, "amount_to_capture") && string(bytes.TrimSpace(v)) != "null" {
			return true
		}
	}
	return false
}

func TestParseCaptureRequest(t *testing.T) {
	cases := map[string]struct {
		body string
		want int64
		bad  bool
	}{
		"empty body: all":        {body: ``},
		"no field: all":          {body: `{}`},
		"null: all":              {body: `{"amount_to_capture":null}`},
		"a part":                 {body: `{"amount_to_capture":1}`, want: 1},
		"zero is refused":        {body: `{"amount_to_capture":0}`, bad: true},
		"minus zero is refused":  {body: `{"amount_to_capture":-0}`, bad: true},
		"negative is refused":    {body: `{"amount_to_capture":-5}`, bad: true},
		"over the cap":           {body: `{"amount_to_capture":100000000}`, bad: true},
		"any case of the name 0": {body: `{"Amount_To_Capture":0}`, bad: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCaptureRequest([]byte(c.body))
			var invalid *InvalidError
			switch {
			case c.bad && (!errors.As(err, &invalid) || invalid.Fields["amount_to_capture"] == ""):
				t.Fatalf("err %v, want an invalid amount_to_capture", err)
			case c.bad && !strings.Contains(invalid.Fields["amount_to_capture"], "leave it out to capture all"):
				t.Fatalf("reason %q does not say how to capture all", invalid.Fields["amount_to_capture"])
			case !c.bad && (err != nil || got.AmountToCapture != c.want):
				t.Fatalf("got %+v, %v; want %d", got, err, c.want)
			}
		})
	}
}
