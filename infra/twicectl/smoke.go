package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// smoke is the post-deploy check (docs/deploy.md, "Smoke test"): one test-mode payment through
// the API, its replay, the provider's webhook for it in the attempt log, and the operator API.
// Each check prints one line, "ok   ..." or "FAIL ..."; any failure exits 1.
//
// Live mode: the payment method is Stripe's test token pm_card_visa, which exists only in test
// mode, so a deployment holding a live key cannot charge it (Stripe refuses the token and
// nothing is charged: "payment created" fails). The provider's own answers for the payment
// carry livemode, which the attempt log keeps on each attempt (GET /ops/attempts); smoke fails
// when one says true unless --allow-live is given. A payment method other than a pm_card_ test
// token is refused before anything is sent unless --allow-live is given.
type smoke struct {
	c             *cli
	paymentsToken string
	key           string
	paymentMethod string
	amount        int64
	currency      string
	wait          time.Duration
	allowLive     bool
	poll          time.Duration
	failed        int
}

func (s *smoke) ok(format string, a ...any) { fmt.Fprintf(s.c.out, "ok   "+format+"\n", a...) }

func (s *smoke) fail(format string, a ...any) {
	s.failed++
	fmt.Fprintf(s.c.out, "FAIL "+format+"\n", a...)
}

// httpAnswer is one raw HTTP exchange's answer.
type httpAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (s *smoke) do(ctx context.Context, method, path, token string, body []byte, header map[string]string) (httpAnswer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(s.c.base, "/")+path, rd)
	if err != nil {
		return httpAnswer{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := s.c.http.Do(req)
	if err != nil {
		return httpAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return httpAnswer{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func (s *smoke) run(ctx context.Context) int {
	if !strings.HasPrefix(s.paymentMethod, "pm_card_") && !s.allowLive {
		fmt.Fprintf(s.c.errOut, "twicectl smoke: %s is not a Stripe test token (pm_card_...); it could charge a real card: pass --allow-live to mean it\n", s.paymentMethod)
		return 2
	}
	opsOK := s.checkOps(ctx)
	id, ok := s.checkPayment(ctx)
	switch {
	case !opsOK:
		s.fail("provider mode: not checked (the operator API refused the token)")
		s.fail("webhook delivered: not checked (the operator API refused the token)")
	case id == "":
		s.checkMode(ctx, id, ok)
		s.fail("webhook delivered: not checked (no payment)")
	default:
		s.checkMode(ctx, id, ok)
		s.checkWebhook(ctx, id)
	}
	if s.failed > 0 {
		fmt.Fprintf(s.c.out, "smoke: %d check(s) failed\n", s.failed)
		return 1
	}
	fmt.Fprintln(s.c.out, "smoke: all checks passed")
	return 0
}

// checkOps: the operator's token opens the JSON operator API.
func (s *smoke) checkOps(ctx context.Context) bool {
	a, err := s.do(ctx, "GET", "/ops/deadletters?limit=1", s.c.token, nil, nil)
	switch {
	case err != nil:
		s.fail("ops answers: GET /ops/deadletters: %v", err)
	case a.status != http.StatusOK:
		s.fail("ops answers: GET /ops/deadletters?limit=1 %d with the operator token, want 200", a.status)
	default:
		s.ok("ops answers GET /ops/deadletters?limit=1 200")
		return true
	}
	return false
}

// checkPayment creates the payment and replays it; it returns the payment id (empty when none
// was created) and whether both checks passed.
func (s *smoke) checkPayment(ctx context.Context) (string, bool) {
	body, _ := json.Marshal(map[string]any{"amount": s.amount, "currency": s.currency, "customer": "cus_twice_smoke",
		"payment_method": s.paymentMethod, "description": "twicectl smoke", "metadata": map[string]string{"smoke": s.key}})
	hdr := map[string]string{"Idempotency-Key": s.key}
	first, err := s.do(ctx, "POST", "/payments", s.paymentsToken, body, hdr)
	if err != nil {
		s.fail("payment created: POST /payments: %v", err)
		return "", false
	}
	var v struct {
		ID, Status string
		Provider   string `json:"provider_payment_id"`
	}
	_ = json.Unmarshal(first.body, &v)
	if first.status != http.StatusCreated || v.Status != "succeeded" {
		hint := ""
		if first.status == http.StatusAccepted {
			hint = " (the provider's answer did not come in time: the payment resolves in the background; run smoke again)"
		}
		s.fail("payment created: POST /payments key %s: %d %s, want 201 succeeded%s: %s", s.key, first.status, v.Status, hint, oneLine(first.body))
		return v.ID, false
	}
	s.ok("payment created %s %d %s (provider %s, key %s)", v.ID, first.status, v.Status, v.Provider, s.key)
	again, err := s.do(ctx, "POST", "/payments", s.paymentsToken, body, hdr)
	switch {
	case err != nil:
		s.fail("payment replayed: %v", err)
	case again.status != first.status || !bytes.Equal(again.body, first.body):
		s.fail("payment replayed: %d %s, want the first answer byte for byte (%d %s)", again.status, oneLine(again.body), first.status, oneLine(first.body))
	case again.header.Get("Idempotent-Replayed") != "true":
		s.fail("payment replayed: identical, but without Idempotent-Replayed: true (%q)", again.header.Get("Idempotent-Replayed"))
	default:
		s.ok("payment replayed %s %d, byte-identical, Idempotent-Replayed: true", v.ID, again.status)
		return v.ID, true
	}
	return v.ID, false
}

// lookup is the part of GET /ops/attempts smoke reads (summaries: no bodies).
type lookup struct {
	Attempts []struct {
		Direction string `json:"direction"`
		Operation string `json:"operation"`
		Status    int    `json:"status"`
		EventID   string `json:"event_id"`
		Refused   bool   `json:"refused"`
		Livemode  *bool  `json:"livemode"`
	} `json:"attempts"`
}

func (s *smoke) attempts(ctx context.Context, id string) (lookup, error) {
	var l lookup
	a, err := s.do(ctx, "GET", "/ops/attempts?"+url.Values{"payment_id": {id}}.Encode(), s.c.token, nil, nil)
	if err != nil {
		return l, err
	}
	if a.status != http.StatusOK {
		return l, fmt.Errorf("GET /ops/attempts: %d %s", a.status, oneLine(a.body))
	}
	return l, json.Unmarshal(a.body, &l)
}

// checkMode reads the provider's own answers for the payment (bodies in the attempt log: the
// PaymentIntent and its events carry "livemode").
func (s *smoke) checkMode(ctx context.Context, id string, created bool) {
	if id == "" {
		s.fail("provider mode: not checked (no payment)")
		return
	}
	l, err := s.attempts(ctx, id)
	if err != nil {
		s.fail("provider mode: %v", err)
		return
	}
	live, test := false, false
	for _, a := range l.Attempts {
		if a.Livemode != nil {
			live, test = live || *a.Livemode, test || !*a.Livemode
		}
	}
	switch {
	case live && s.allowLive:
		s.ok("provider mode: live (--allow-live): refund %s in the Dashboard", id)
	case live:
		s.fail("provider mode: live: the provider answered livemode true for %s; refund it, and run smoke against test-mode keys (or pass --allow-live)", id)
	case test:
		s.ok("provider mode: test (livemode false in the provider's answers for %s)", id)
	case created:
		s.fail("provider mode: unknown: no provider answer for %s names livemode", id)
	default:
		s.fail("provider mode: unknown: the payment was not created")
	}
}

// checkWebhook polls the attempt log until a verified delivery of the provider's webhook for
// the payment is there, for at most s.wait.
func (s *smoke) checkWebhook(ctx context.Context, id string) {
	start := time.Now()
	deadline := time.NewTimer(s.wait)
	defer deadline.Stop()
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	var last error
	for {
		l, err := s.attempts(ctx, id)
		last = err
		for _, a := range l.Attempts {
			if a.Direction == "inbound" && strings.HasPrefix(a.Operation, "webhook ") && !a.Refused && a.Status/100 == 2 {
				s.ok("webhook delivered %s for %s %d after %s", a.EventID, id, a.Status, time.Since(start).Round(10*time.Millisecond))
				return
			}
		}
		select {
		case <-deadline.C:
			why := "no verified webhook delivery in the attempt log"
			if last != nil {
				why = last.Error()
			}
			s.fail("webhook delivered: %s for %s within %s (is the Stripe endpoint %s/webhooks/stripe, with its signing secret in SSM?)",
				why, id, s.wait, strings.TrimRight(s.c.base, "/"))
			return
		case <-ctx.Done():
			s.fail("webhook delivered: %v", ctx.Err())
			return
		case <-tick.C:
		}
	}
}

// oneLine shortens a body for a report line.
func oneLine(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// newSmoke reads smoke's flags.
func newSmoke(c *cli, flags map[string]string, env func(string) string, now time.Time) (*smoke, error) {
	s := &smoke{c: c, paymentsToken: first(flags["payments-token"], env("TWICE_PAYMENTS_TOKEN")),
		key: first(flags["key"], "smoke-"+strconv.FormatInt(now.UnixNano(), 10)), paymentMethod: first(flags["payment-method"], "pm_card_visa"),
		currency: first(flags["currency"], "usd"), amount: 100, wait: 60 * time.Second, allowLive: flags["allow-live"] == "true",
		poll: 500 * time.Millisecond}
	if v := flags["amount"]; v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%w: --amount wants a positive integer (minor units)", errUsage)
		}
		s.amount = n
	}
	if v := flags["wait"]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%w: --wait wants a duration such as 60s", errUsage)
		}
		s.wait = d
	}
	return s, nil
}
