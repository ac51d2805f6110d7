package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

// opLedger is what the clients saw of one capture, cancel or refund key.
type opLedger struct {
	mu      sync.Mutex
	sent    bool
	finals  []Answer // every 200 or 201, in order: a replay must be the first, byte for byte
	last    Answer
	pending bool // the last answer was 202: the outcome was unknown
}

func (l *opLedger) record(a Answer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = a
	l.pending = a.Status == http.StatusAccepted
	if a.Status == http.StatusOK || a.Status == http.StatusCreated {
		l.finals = append(l.finals, a)
	}
}

func (l *opLedger) wasSent() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent
}

// flowLedgers are the keys of one payment's capture or cancel and refunds.
type flowLedgers struct {
	capture *opLedger
	refunds []*opLedger // by RefundOp, in plan order
}

// sendOp posts one capture, cancel or refund as a careful client would: the same key on every
// retry, Retry-After honoured on a 409 that names the key in flight, bounded backoff with
// jitter on 5xx and dropped connections. A 202 (outcome unknown, the refund's amount held) is
// kept and ends this send: the late retry of the settle phase sends the key again, and the
// stack resolves it in the background meanwhile.
func (c *client) sendOp(ctx context.Context, path, key, body string, rng *rand.Rand, l *opLedger) {
	ctx, cancel := context.WithTimeout(ctx, c.budget)
	defer cancel()
	l.mu.Lock()
	l.sent = true
	l.mu.Unlock()
	failures := 0
	for {
		a, retryAfter, err := c.postTo(ctx, path, key, body)
		var wait time.Duration
		switch {
		case err == nil && a.Status == http.StatusConflict && retryAfter >= 0:
			wait = max(retryAfter, 100*time.Millisecond) // the key is in flight
		case err != nil || a.Status >= 500:
			failures++
			if failures > c.attempts {
				return
			}
			backoff := min(2*time.Second, 100*time.Millisecond<<min(failures, 5))
			wait = max(retryAfter, time.Duration(rng.Int64N(int64(backoff))+1))
		default: // 200, 201, 202, a stored 409 of the payment's state, a 422
			l.record(a)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// flowView is what GET /payments/{id} shows of a payment's capture and refunds.
type flowView struct {
	Status         string `json:"status"`
	Amount         int64  `json:"amount"`
	AmountReceived int64  `json:"amount_received"`
	AmountRefunded int64  `json:"amount_refunded"`
	Refunds        []struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
		Status string `json:"status"`
	} `json:"refunds"`
}

// captured is what the payment holds of the customer's money once succeeded: all of it, or
// what a partial capture took.
func (v flowView) captured() int64 {
	if v.AmountReceived > 0 && v.AmountReceived < v.Amount {
		return v.AmountReceived
	}
	return v.Amount
}

func (c *client) view(ctx context.Context, id string) (flowView, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base()+"/payments/"+id, nil)
	if err != nil {
		return flowView{}, false, err
	}
	c.requests.Add(1)
	resp, err := c.http.Do(req)
	if err != nil {
		return flowView{}, false, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		var v flowView
		err := json.Unmarshal(b, &v)
		return v, err == nil, err
	case http.StatusNotFound:
		return flowView{}, false, nil
	}
	return flowView{}, false, &httpError{resp.StatusCode}
}

// awaitStatus reads the payment until it is in one of want (true) or the bound passes.
func (r *run) awaitStatus(ctx context.Context, id string, within time.Duration, want ...string) bool {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		if st, found, err := r.client.get(ctx, id); err == nil && found {
			for _, w := range want {
				if st == w {
					return true
				}
			}
			if !stillMoving(st) && st != provider.StatusRequiresCapture {
				return false // declined, canceled, refunded: it will not get there
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// flow runs a payment's capture or cancel and its refunds, once the payment is where they
// apply. A payment that does not get there in time (its outcome still unknown) runs none.
func (r *run) flow(ctx context.Context, p Payment) {
	if p.Capture == "" && len(p.Refunds) == 0 {
		return
	}
	id := payments.PaymentID("local", p.Key)
	fl := r.flows[p.Index]
	rng := rand.New(rand.NewPCG(p.Client, 0x666c6f77))
	if p.Capture != "" {
		if !r.awaitStatus(ctx, id, 15*time.Second, provider.StatusRequiresCapture) {
			r.flowsSkipped.Add(1)
			return
		}
		if p.Capture == CaptureLeave {
			return
		}
		path, body := captureRequest(p)
		r.sendConcurrently(ctx, 2, func(rng *rand.Rand) { r.client.sendOp(ctx, path, opKey(p), body, rng, fl.capture) }, rng)
		r.client.sendOp(ctx, path, opKey(p), body, rng, fl.capture) // a later retry: a replay
	}
	if len(p.Refunds) == 0 {
		return
	}
	if !r.awaitStatus(ctx, id, 15*time.Second, provider.StatusSucceeded) {
		r.flowsSkipped.Add(1)
		return
	}
	for wave := 0; ; wave++ {
		var wg sync.WaitGroup
		any := false
		for i, op := range p.Refunds {
			if op.Wave != wave {
				continue
			}
			any = true
			body := refundBody(op)
			l := fl.refunds[i]
			// The first sends go at once; the rest of them after, as retries of a client
			// that did not hear the answer.
			at := min(op.Sends, 2)
			wg.Go(func() {
				r.sendConcurrently(ctx, at, func(rng *rand.Rand) {
					r.client.sendOp(ctx, refundPath(id), op.Key, body, rng, l)
				}, rand.New(rand.NewPCG(p.Client, uint64(0x7266+i))))
				for range op.Sends - at {
					r.client.sendOp(ctx, refundPath(id), op.Key, body, rng, l)
				}
			})
		}
		wg.Wait()
		if !any {
			return
		}
	}
}

func (r *run) sendConcurrently(ctx context.Context, n int, send func(*rand.Rand), rng *rand.Rand) {
	var wg sync.WaitGroup
	for range n {
		sub := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		wg.Go(func() { send(sub) })
	}
	wg.Wait()
}

// opKey is the Idempotency-Key of a payment's capture or cancel.
func opKey(p Payment) string { return p.Key + "-" + p.Capture }

func captureRequest(p Payment) (path, body string) {
	id := payments.PaymentID("local", p.Key)
	switch p.Capture {
	case CaptureCancel:
		return "/payments/" + id + "/cancel", `{"reason":"requested_by_customer"}`
	case CapturePartial:
		return "/payments/" + id + "/capture", fmt.Sprintf(`{"amount_to_capture":%d}`, p.CaptureAmount)
	}
	return "/payments/" + id + "/capture", `{}`
}

func refundPath(id string) string { return "/payments/" + id + "/refunds" }

func refundBody(op RefundOp) string {
	if op.Amount == 0 {
		return `{"reason":"requested_by_customer"}`
	}
	return fmt.Sprintf(`{"amount":%d}`, op.Amount)
}

// lateFlowRetry sends every capture, cancel and refund key that was sent once more, as a late
// client retry would: a completed key replays its answer, a pending refund resumes.
func (r *run) lateFlowRetry(ctx context.Context) {
	r.parallel(ctx, func(i int) {
		p, fl := r.plan.Payments[i], r.flows[i]
		rng := rand.New(rand.NewPCG(p.Client, 98))
		if p.Capture != "" && p.Capture != CaptureLeave && fl.capture.wasSent() {
			path, body := captureRequest(p)
			r.client.sendOp(ctx, path, opKey(p), body, rng, fl.capture)
		}
		id := payments.PaymentID("local", p.Key)
		for j, op := range p.Refunds {
			if fl.refunds[j].wasSent() {
				r.client.sendOp(ctx, refundPath(id), op.Key, refundBody(op), rng, fl.refunds[j])
			}
		}
	})
}

// settleFlows waits, bounded, until no refund of ours is still pending locally and every
// refund the provider will fail later has failed there, sending each pending key again as a
// client would; the run's last backfill walk then brings any refund event that was dropped.
func (r *run) settleFlows(ctx context.Context) {
	if r.plan.RefundKeys() == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Settle)
	defer cancel()
	for ctx.Err() == nil {
		var open atomic.Int64
		r.parallel(ctx, func(i int) {
			p := r.plan.Payments[i]
			if len(p.Refunds) == 0 {
				return
			}
			v, found, err := r.client.view(ctx, payments.PaymentID("local", p.Key))
			if err != nil || !found {
				return
			}
			for _, rf := range v.Refunds {
				if rf.Status == provider.RefundPending {
					open.Add(1)
				}
			}
		})
		due := 0
		if refunds, err := r.sim.refunds(ctx); err == nil {
			r.markFailsLater(refunds)
			for _, rf := range refunds {
				if rf.FailsLater && rf.Status == provider.RefundSucceeded {
					due++
				}
			}
		}
		if open.Load() == 0 && due == 0 {
			return
		}
		r.lateFlowRetry(ctx)
		if r.backfills() {
			r.backfill(ctx)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ProviderRefund is one refund as the simulator holds it.
type ProviderRefund struct {
	ID            string `json:"id"`
	PaymentIntent string `json:"payment_intent"`
	Amount        int64  `json:"amount"`
	Status        string `json:"status"`
	// RefundID and PaymentID are our twice_refund_id and twice_payment_id metadata.
	RefundID  string `json:"refund_id"`
	PaymentID string `json:"payment_id"`
	// FailsLater says the refund's card is pm_card_refundFail (read from the plan).
	FailsLater bool `json:"-"`
}

// refunds lists every refund at the provider through its Stripe API, page by page.
func (s *simClient) refunds(ctx context.Context) ([]ProviderRefund, error) {
	var all []ProviderRefund
	after := ""
	for range 100_000 {
		path := "/v1/refunds?limit=100"
		if after != "" {
			path += "&starting_after=" + after
		}
		var page struct {
			HasMore bool `json:"has_more"`
			Data    []struct {
				ID            string            `json:"id"`
				PaymentIntent string            `json:"payment_intent"`
				Amount        int64             `json:"amount"`
				Status        string            `json:"status"`
				Metadata      map[string]string `json:"metadata"`
			} `json:"data"`
		}
		if err := s.do(ctx, http.MethodGet, path, nil, &page); err != nil {
			return nil, err
		}
		for _, d := range page.Data {
			all = append(all, ProviderRefund{ID: d.ID, PaymentIntent: d.PaymentIntent, Amount: d.Amount, Status: d.Status,
				RefundID: d.Metadata[payments.MetaRefundID], PaymentID: d.Metadata[payments.MetaPaymentID]})
		}
		if !page.HasMore || len(page.Data) == 0 {
			return all, nil
		}
		after = page.Data[len(page.Data)-1].ID
	}
	return all, fmt.Errorf("chaos: list refunds: too many pages")
}

// FlowObservation is what the clients and the final read know of one payment's capture or
// cancel and refunds.
type FlowObservation struct {
	Key     string
	ID      string
	Capture string // the plan's (CaptureFull, ...; "" for automatic capture)
	// Refunds are the plan's refund keys; RefundFinals their 201 answers each, in order.
	RefundKeys   []string
	RefundFinals [][]Answer
	// CaptureFinals are the capture's or cancel's 200 answers, in order.
	CaptureFinals []Answer
	Found         bool
	View          flowView
}

// FlowFindings are the invariants of captures, cancels and refunds, and the counts the report
// shows. Every invariant count must be zero.
type FlowFindings struct {
	// Captures, Cancels: manual-capture payments the plan captured (in full or part) or
	// canceled, and how many ended so; Left: authorizations the plan left alone.
	CapturesRequested int `json:"captures_requested"`
	Captured          int `json:"captured"`
	CancelsRequested  int `json:"cancels_requested"`
	Canceled          int `json:"canceled"`
	Left              int `json:"authorizations_left"`
	// RefundsRequested counts the refund keys sent; RefundsSucceeded, RefundsFailed and
	// RefundsPending, our refunds by their final local status (a key refused with 422 made
	// none).
	RefundsRequested int `json:"refunds_requested"`
	RefundsSucceeded int `json:"refunds_succeeded"`
	RefundsFailed    int `json:"refunds_failed"`
	RefundsPending   int `json:"refunds_pending"`

	// OverRefunded counts payments with more refunded than captured, locally or at the
	// provider.
	OverRefunded int `json:"over_refunded"`
	// DuplicateRefunds counts refund keys with more than one refund at the provider.
	DuplicateRefunds int `json:"duplicate_provider_refunds"`
	// RefundMismatches counts refunds whose local state is not the provider's after settling
	// and the backfill (a refund missing on one side, another status or amount), and payments
	// whose amount_refunded is not the provider's.
	RefundMismatches int `json:"refund_state_mismatches"`
	// Unsurfaced counts authorizations that ended neither captured, canceled nor named by a
	// dead-letter record.
	Unsurfaced int `json:"authorizations_unsurfaced"`
	// FlowReplayMismatches counts capture, cancel or refund keys whose later answers differ
	// from their first.
	FlowReplayMismatches int `json:"flow_replay_mismatches"`
}

// CheckFlows judges the captures, cancels and refunds: obs from the clients and the stack,
// intents and refunds from the provider, surfaced the payments dead-letter records name.
func CheckFlows(obs []FlowObservation, intents []Intent, refunds []ProviderRefund, surfaced map[string]bool, f *Findings) FlowFindings {
	var ff FlowFindings
	received := map[string]int64{} // by our payment id: what the provider captured
	for _, in := range intents {
		if in.Status == "succeeded" {
			received[in.PaymentID] = max(received[in.PaymentID], in.AmountReceived)
		}
	}
	atProvider := map[string][]ProviderRefund{} // by our refund id
	refundedAt := map[string]int64{}            // by our payment id: pending and succeeded refunds
	for _, rf := range refunds {
		if rf.RefundID != "" {
			atProvider[rf.RefundID] = append(atProvider[rf.RefundID], rf)
		}
		if rf.Status == "pending" || rf.Status == "succeeded" {
			refundedAt[rf.PaymentID] += rf.Amount
		}
	}
	for id, n := range refundedAt {
		if n > received[id] {
			ff.OverRefunded++
			f.example("over-refunded at the provider: payment %s has %d refunded of %d captured", id, n, received[id])
		}
	}
	for _, o := range obs {
		for _, finals := range append([][]Answer{o.CaptureFinals}, o.RefundFinals...) {
			for _, a := range finals[min(1, len(finals)):] {
				if a != finals[0] {
					ff.FlowReplayMismatches++
					f.example("flow replay mismatch: payment %s first %d %s, later %d %s", o.ID, finals[0].Status, finals[0].Body, a.Status, a.Body)
				}
			}
		}
		v := o.View
		switch o.Capture {
		case CaptureFull, CapturePartial:
			ff.CapturesRequested++
			if v.Status == provider.StatusSucceeded || v.Status == provider.StatusRefunded {
				ff.Captured++
			}
		case CaptureCancel:
			ff.CancelsRequested++
			if v.Status == provider.StatusCanceled {
				ff.Canceled++
			}
		case CaptureLeave:
			ff.Left++
		}
		if o.Capture != "" && o.Found && v.Status == provider.StatusRequiresCapture && !surfaced[o.ID] {
			ff.Unsurfaced++
			f.example("authorization unsurfaced: key %s payment %s is still requires_capture and no dead-letter record names it", o.Key, o.ID)
		}
		for j, key := range o.RefundKeys {
			if len(o.RefundFinals[j]) > 0 || o.View.hasRefund(payments.RefundID("local", key)) {
				ff.RefundsRequested++
			}
		}
		if !o.Found {
			continue
		}
		if v.Status == provider.StatusSucceeded || v.Status == provider.StatusRefunded {
			captured := v.captured()
			if got := received[o.ID]; got > 0 && got != captured {
				ff.RefundMismatches++
				f.example("capture mismatch: payment %s captured %d locally, %d at the provider", o.ID, captured, got)
			}
			if v.AmountRefunded > captured {
				ff.OverRefunded++
				f.example("over-refunded locally: payment %s has %d refunded of %d captured", o.ID, v.AmountRefunded, captured)
			}
		}
		if len(o.RefundKeys) == 0 {
			continue
		}
		if v.AmountRefunded != refundedAt[o.ID] {
			ff.RefundMismatches++
			f.example("refunded mismatch: payment %s has amount_refunded %d locally, %d at the provider", o.ID, v.AmountRefunded, refundedAt[o.ID])
		}
		local := map[string]bool{}
		for _, rf := range v.Refunds {
			local[rf.ID] = true
			switch rf.Status {
			case provider.RefundSucceeded:
				ff.RefundsSucceeded++
			case provider.RefundFailed:
				ff.RefundsFailed++
			default:
				ff.RefundsPending++
			}
			at := atProvider[rf.ID]
			if len(at) == 0 && rf.Status == provider.RefundFailed {
				continue // pending past the key horizon and never at the provider: settled as failed
			}
			if len(at) == 0 {
				ff.RefundMismatches++
				f.example("refund mismatch: refund %s of payment %s is %s locally and unknown at the provider", rf.ID, o.ID, rf.Status)
				continue
			}
			if want := localRefundStatus(at[0].Status); want != rf.Status || at[0].Amount != rf.Amount {
				ff.RefundMismatches++
				f.example("refund mismatch: refund %s of payment %s is %s %d locally, %s %d at the provider", rf.ID, o.ID, rf.Status, rf.Amount, want, at[0].Amount)
			}
		}
		for _, key := range o.RefundKeys {
			rid := payments.RefundID("local", key)
			if n := len(atProvider[rid]); n > 1 {
				ff.DuplicateRefunds++
				f.example("duplicate refund: key %s has %d refunds at the provider", key, n)
			}
			if len(atProvider[rid]) > 0 && !local[rid] {
				ff.RefundMismatches++
				f.example("refund mismatch: refund %s (key %s) of payment %s is at the provider, not in the stack", rid, key, o.ID)
			}
		}
	}
	return ff
}

func (v flowView) hasRefund(id string) bool {
	for _, rf := range v.Refunds {
		if rf.ID == id {
			return true
		}
	}
	return false
}

// localRefundStatus is the status the API shows for a provider refund's status.
func localRefundStatus(s string) string {
	switch s {
	case "succeeded", "pending", "failed":
		return s
	case "canceled":
		return provider.RefundFailed
	}
	return provider.RefundPending
}

// Broken lists the flow invariants that failed.
func (ff FlowFindings) Broken() []string {
	var out []string
	for _, c := range []struct {
		name string
		n    int
	}{{"more refunded than captured", ff.OverRefunded}, {"provider refunds beyond one per refund key", ff.DuplicateRefunds},
		{"refund state unlike the provider's after settling", ff.RefundMismatches}, {"authorizations neither captured, canceled nor surfaced", ff.Unsurfaced},
		{"capture, cancel or refund replay mismatches", ff.FlowReplayMismatches}} {
		if c.n != 0 {
			out = append(out, fmt.Sprintf("%s: %d", c.name, c.n))
		}
	}
	return out
}

// surfacedPayments lists the payments dead-letter records name.
func (o opsClient) surfacedPayments(ctx context.Context) map[string]bool {
	out := map[string]bool{}
	cursor := ""
	for range 10_000 {
		path := "/ops/deadletters?limit=200"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var page struct {
			Records []struct {
				PaymentID string `json:"payment_id"`
			} `json:"records"`
			Cursor string `json:"cursor"`
		}
		if err := o.do(ctx, http.MethodGet, path, nil, &page); err != nil {
			return out
		}
		for _, r := range page.Records {
			out[r.PaymentID] = true
		}
		if page.Cursor == "" || len(page.Records) == 0 {
			break
		}
		cursor = page.Cursor
	}
	return out
}

// flowObservations reads every payment with a capture or refunds in its plan.
func (r *run) flowObservations(ctx context.Context) []FlowObservation {
	var obs []FlowObservation
	idx := map[int]int{}
	for i, p := range r.plan.Payments {
		if p.Capture == "" && len(p.Refunds) == 0 {
			continue
		}
		o := FlowObservation{Key: p.Key, ID: payments.PaymentID("local", p.Key), Capture: p.Capture}
		fl := r.flows[i]
		fl.capture.mu.Lock()
		o.CaptureFinals = append([]Answer(nil), fl.capture.finals...)
		fl.capture.mu.Unlock()
		for j, op := range p.Refunds {
			o.RefundKeys = append(o.RefundKeys, op.Key)
			l := fl.refunds[j]
			l.mu.Lock()
			o.RefundFinals = append(o.RefundFinals, append([]Answer(nil), l.finals...))
			l.mu.Unlock()
		}
		idx[i] = len(obs)
		obs = append(obs, o)
	}
	r.parallel(ctx, func(i int) {
		n, ok := idx[i]
		if !ok {
			return
		}
		if v, found, err := r.client.view(ctx, obs[n].ID); err == nil {
			obs[n].Found, obs[n].View = found, v
		}
	})
	return obs
}

// markFailsLater marks the refunds of payments on the card whose refunds fail later.
func (r *run) markFailsLater(refunds []ProviderRefund) {
	fails := map[string]bool{}
	for _, p := range r.plan.Payments {
		if p.Card == RefundFailCard {
			fails[payments.PaymentID("local", p.Key)] = true
		}
	}
	for i := range refunds {
		refunds[i].FailsLater = fails[refunds[i].PaymentID]
	}
}
