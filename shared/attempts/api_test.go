package attempts

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestExchange: the handler gets the whole body, the caller the handler's answer, and the
// attempt both, filed under what the handler named.
func TestExchange(t *testing.T) {
	var c collector
	api := API{Record: c.record, Now: tick(time.Millisecond)}
	f := struct{ Operation, Scope, PaymentID string }{"payments.create", "local", "pay_1"}
	big := strings.Repeat("x", DefaultCaptureLimit+10)
	for name, body := range map[string]string{"small": `{"amount":1000}`, "over the capture limit": big} {
		t.Run(name, func(t *testing.T) {
			c = collector{}
			var seen string
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				seen = string(b)
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Set-Cookie", "sid=1")
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, `{"id":"pay_1"}`)
			})
			r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
			r.Header.Set("Idempotency-Key", "k-1")
			w := httptest.NewRecorder()
			rw, r, file := api.Begin(w, r)
			next.ServeHTTP(rw, r)
			file(f.Operation, f.Scope, f.PaymentID)
			if seen != body || w.Code != http.StatusCreated || w.Body.String() != `{"id":"pay_1"}` {
				t.Fatalf("handler saw %d bytes, caller got %d %s", len(seen), w.Code, w.Body)
			}
			got := c.attempts()
			if len(got) != 1 {
				t.Fatalf("%d attempts", len(got))
			}
			a := got[0]
			if a.Operation != f.Operation || a.Scope != f.Scope || a.PaymentID != f.PaymentID || a.Provider != "api" ||
				a.Direction != Inbound || a.IdempotencyKey != "k-1" || a.Status != http.StatusCreated || a.Result != ResultOK {
				t.Errorf("attempt %+v", a)
			}
			if a.ResponseBody != `{"id":"pay_1"}` || a.ResponseHeader["Set-Cookie"] != "[redacted]" || a.Duration != time.Millisecond {
				t.Errorf("response %q headers %v duration %s", a.ResponseBody, a.ResponseHeader, a.Duration)
			}
			if truncated := len(body) > DefaultCaptureLimit; a.RequestTruncated != truncated || a.RequestBytes != min(len(body), DefaultCaptureLimit+1) {
				t.Errorf("request truncated %v, %d bytes", a.RequestTruncated, a.RequestBytes)
			}
		})
	}
}

// gate is a Recorder whose Record blocks until the test opens it.
type gate struct {
	started chan Attempt
	open    chan struct{}
	seen    chan string // what Record saw of its context once opened: its error and id value
}

func newGate() *gate {
	return &gate{started: make(chan Attempt, 4), open: make(chan struct{}), seen: make(chan string, 4)}
}

func (g *gate) Record(ctx context.Context, a Attempt) error {
	g.started <- a
	<-g.open
	g.seen <- fmt.Sprint(ctx.Err(), " ", ctx.Value(idKey{}))
	return nil
}

type idKey struct{}

type recorderFunc func(context.Context, Attempt) error

func (f recorderFunc) Record(ctx context.Context, a Attempt) error { return f(ctx, a) }

// TestRequestAttemptsAreStoredBesideIt: a provider call's attempt made while an API request is
// served does not hold up the handler, which goes on to its own writes; the answer's first
// byte waits until the attempt is stored; the store sees the call's context values but not its
// end (a call's context ends as soon as the call returns). Outside an API request, BestEffort
// stores in line.
func TestRequestAttemptsAreStoredBesideIt(t *testing.T) {
	g := newGate()
	record := BestEffort(g, nil)
	var exchanges collector
	// As a Lambda function wires it: the exchange must be stored before file returns.
	api := API{Record: BestEffort(recorderFunc(func(ctx context.Context, a Attempt) error {
		exchanges.record(ctx, a)
		return nil
	}), nil)}

	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{}`))
	rw, r, file := api.Begin(w, r)
	afterCall := make(chan struct{})
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		defer file("payments.create", "local", "pay_1")
		callCtx, endCall := context.WithCancel(context.WithValue(r.Context(), idKey{}, "call-1"))
		record(callCtx, Attempt{ID: "att_call", Direction: Outbound, Provider: "stripe"})
		endCall() // the call has returned
		close(afterCall)
		rw.WriteHeader(http.StatusCreated)
		io.WriteString(rw, `{"id":"pay_1"}`)
	}()
	if a := <-g.started; a.ID != "att_call" {
		t.Fatalf("stored %q", a.ID)
	}
	<-afterCall // the handler went on while the attempt was still being stored
	select {
	case <-answered:
		t.Fatal("the answer left before the call's attempt was stored")
	case <-time.After(20 * time.Millisecond): // a bound on a wrong answer, not a wait for a right one
	}
	if w.Code != http.StatusOK || w.Body.Len() != 0 || len(exchanges.attempts()) != 0 {
		t.Fatalf("before the attempt was stored the caller had %d %q and %d exchanges", w.Code, w.Body, len(exchanges.attempts()))
	}
	close(g.open)
	<-answered
	if seen := <-g.seen; seen != "<nil> call-1" {
		t.Errorf("the store's context: %s; want live (<nil>), with the call's value (call-1)", seen)
	}
	if w.Code != http.StatusCreated || w.Body.String() != `{"id":"pay_1"}` {
		t.Errorf("caller got %d %s", w.Code, w.Body)
	}
	if got := exchanges.attempts(); len(got) != 1 || got[0].Status != http.StatusCreated {
		t.Errorf("exchanges stored by the time file returned: %+v", got)
	}

	// Outside an API request: in line.
	g2 := newGate()
	close(g2.open)
	BestEffort(g2, nil)(context.Background(), Attempt{ID: "att_webhook"})
	select {
	case a := <-g2.started:
		if a.ID != "att_webhook" {
			t.Fatalf("stored %q", a.ID)
		}
	default:
		t.Fatal("BestEffort returned before storing an attempt made outside an API request")
	}
}
