package inprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/webhooks"
)

// apiRecord is a record as GET /ops/deadletters/{id} shows it.
type apiRecord struct {
	deadletter.Record
	Actions        []string `json:"actions"`
	OverrideEffect string   `json:"override_effect"`
}

func getRecord(t *testing.T, s *Stack, id string) apiRecord {
	t.Helper()
	a := ops(t, s, "GET", "/ops/deadletters/"+id, "")
	var r apiRecord
	if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &r) != nil {
		t.Fatalf("get %s: %d %s", id, a.status, a.body)
	}
	return r
}

// doubleClick sends two retries of the record at once, as a double click does, and checks
// that exactly one was carried out.
func doubleClick(t *testing.T, s *Stack, id string) {
	t.Helper()
	// Both requests carry what the operator saw: a second one after the first's retry ended
	// (resolved, or open again) is then a no-op rather than a second retry.
	body := fmt.Sprintf(`{"note":"double click","retries":%d}`, getRecord(t, s, id).Retries)
	var wg sync.WaitGroup
	var mu sync.Mutex
	retried := 0
	for range 2 {
		wg.Go(func() {
			a := ops(t, s, "POST", "/ops/deadletters/"+id+"/retry", body)
			var out struct {
				Retried bool `json:"retried"`
			}
			if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &out) != nil {
				t.Errorf("retry: %d %s", a.status, a.body)
			}
			mu.Lock()
			if out.Retried {
				retried++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if retried != 1 {
		t.Fatalf("a double click carried out %d retries, want 1", retried)
	}
}

// awaitEnd waits until the record leaves retrying and returns it.
func awaitEnd(t *testing.T, s *Stack, id string) apiRecord {
	t.Helper()
	var r apiRecord
	eventually(t, 30*time.Second, "the retried record leaves retrying", func() bool {
		r = getRecord(t, s, id)
		return r.Status != deadletter.StatusRetrying
	})
	return r
}

// checkEnd checks how a retried record ended: resolved with the retry's audit entry, or open
// with one attempt more than before and the same id (never a new record).
func checkEnd(t *testing.T, r apiRecord, want deadletter.Status, attemptsBefore int) {
	t.Helper()
	last := r.Audit[len(r.Audit)-1]
	switch want {
	case deadletter.StatusResolved:
		if r.Status != want || last.Action != deadletter.ActionRetrySucceeded || last.Result == "" || last.RetryID != deadletter.RetryID(r.ID, 1) {
			t.Fatalf("record %s, last audit %+v", r.Status, last)
		}
		if len(r.Actions) != 0 {
			t.Fatalf("a resolved record offers %v", r.Actions)
		}
	case deadletter.StatusOpen:
		if r.Status != want || len(r.Tries) != attemptsBefore+1 || last.Action != deadletter.ActionRetryFailedAgain {
			t.Fatalf("record %s with %d attempts (was %d), last audit %+v", r.Status, len(r.Tries), attemptsBefore, last)
		}
		if !slices.Contains(r.Actions, deadletter.ActRetry) {
			t.Fatalf("a reopened record offers %v", r.Actions)
		}
	}
}

// deadMessage opens the record the dead-letter sink opens for a message that died on queue.
func deadMessage(t *testing.T, s *Stack, dlq, id, body string) deadletter.Record {
	t.Helper()
	sink := &deadletter.Sink{Records: s.deadletters, Now: s.clock.Now}
	m := queue.Message{ID: id, Body: []byte(body), Source: arn(dlq), ReceiveCount: 5}
	r, _, err := s.deadletters.Open(context.Background(), sink.Record(m))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func stripeDelivery(t *testing.T, id string, valid bool) string {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"object":"event","type":"customer.created","created":%d,"data":{"object":{"id":"cus_%s","object":"customer"}}}`,
		id, testClockStart.Unix(), id)
	if !valid {
		body = `{"id":"` + id + `"}` // no type, no data: the worker can never apply it
	}
	b, _ := json.Marshal(webhooks.Delivery{Provider: webhooks.ProviderStripe, EventID: id, Body: []byte(body), ReceivedAt: testClockStart})
	return string(b)
}

// TestEveryRetryClosesItsLoop retries a dead letter from each source through the JSON API
// with a double click, and checks that the record ends resolved, or open with the attempt
// appended, never retrying and never as a new record.
func TestEveryRetryClosesItsLoop(t *testing.T) {
	t.Run("webhook queue", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, Config{})
		ok := deadMessage(t, s, webhookDLQ, "m-ok", stripeDelivery(t, "evt_dl_ok", true))
		bad := deadMessage(t, s, webhookDLQ, "m-bad", stripeDelivery(t, "evt_dl_bad", false))
		for _, r := range []deadletter.Record{ok, bad} {
			if got := getRecord(t, s, r.ID); got.Actions[0] != deadletter.ActRetry {
				t.Fatalf("a webhook record offers %v", got.Actions)
			}
			doubleClick(t, s, r.ID)
		}
		checkEnd(t, awaitEnd(t, s, ok.ID), deadletter.StatusResolved, 1)
		checkEnd(t, awaitEnd(t, s, bad.ID), deadletter.StatusOpen, 1)
		// The applied event was applied once: its dedupe record exists, and a replay of the
		// retried message is not worked again (the retry's ledger entry says it ended).
		if done, err := s.deadletters.RetryDone(context.Background(), deadletter.RetryID(ok.ID, 1)); err != nil || !done {
			t.Fatalf("retry ledger: %v %v", done, err)
		}
		if n := len(opsList(t, s, "source=webhook")); n != 1 {
			t.Fatalf("%d open webhook records, want the reopened one only", n)
		}
	})

	t.Run("resolve queue", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, Config{})
		// A job whose key has no pending record left (resolved meanwhile) completes at once;
		// one without a scope can never run.
		good, _ := json.Marshal(payments.ResolveJob{Scope: "local", Key: "k-gone", PaymentID: payments.PaymentID("local", "k-gone"), Attempt: 6})
		broken, _ := json.Marshal(payments.ResolveJob{Key: "k-broken", PaymentID: "pay_broken", Attempt: 6})
		ok := deadMessage(t, s, resolveDLQ, "m-ok", string(good))
		bad := deadMessage(t, s, resolveDLQ, "m-bad", string(broken))
		doubleClick(t, s, ok.ID)
		doubleClick(t, s, bad.ID)
		checkEnd(t, awaitEnd(t, s, ok.ID), deadletter.StatusResolved, 1)
		checkEnd(t, awaitEnd(t, s, bad.ID), deadletter.StatusOpen, 1)
	})

	t.Run("recovery charges now", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, Config{TimeFactor: recoveryFactor, ClockStart: recoveryStarts["17th"]})
		// Declines the first charge and the eight reattempts, then approves: the schedule is
		// used up, and the operator's charge now succeeds.
		programCard(t, s.SimURL(), "pm_tenth_time", "processing_error", 9)
		v := createDeclined(t, s, "dl-now", "pm_tenth_time")
		rec := recoveryRecord(t, s, v.ID)
		doubleClick(t, s, rec.ID)
		checkEnd(t, awaitEnd(t, s, rec.ID), deadletter.StatusResolved, len(rec.Tries))
		if got := simEvents(t, s, deref(v.ProviderPaymentID)); len(got) != 10 || got[9] != "succeeded" {
			t.Fatalf("charges at the provider: %v", got)
		}
		eventually(t, 10*time.Second, "the payment reads succeeded", func() bool {
			p, err := payments.Get(context.Background(), s.store, v.ID)
			return err == nil && p.Status == provider.StatusSucceeded
		})
		if n := executions(t, s); n != 2 {
			t.Fatalf("%d executions, want the recovery and one charge now", n)
		}
	})

	t.Run("recovery declined again", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, Config{TimeFactor: recoveryFactor, ClockStart: recoveryStarts["17th"]})
		programCard(t, s.SimURL(), "pm_never", "processing_error", 1000)
		v := createDeclined(t, s, "dl-again", "pm_never")
		rec := recoveryRecord(t, s, v.ID)
		doubleClick(t, s, rec.ID)
		got := awaitEnd(t, s, rec.ID)
		checkEnd(t, got, deadletter.StatusOpen, len(rec.Tries))
		if a := got.Tries[len(got.Tries)-1]; !strings.Contains(a.Error, "operator asked for was declined") {
			t.Fatalf("appended attempt %+v", a)
		}
		if n := len(opsList(t, s, "source=recovery")); n != 1 {
			t.Fatalf("%d open recovery records, want the same one reopened", n)
		}
		if ev := simEvents(t, s, deref(v.ProviderPaymentID)); len(ev) != 10 {
			t.Fatalf("charges at the provider: %d, want the 9 of the recovery and one charge now", len(ev))
		}
	})

	t.Run("recovery a network rule forbids", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, Config{TimeFactor: recoveryFactor, ClockStart: recoveryStarts["17th"]})
		v := createDeclined(t, s, "dl-hard", "pm_card_visa_chargeDeclinedLostCard")
		rec := recoveryRecord(t, s, v.ID)
		doubleClick(t, s, rec.ID)
		got := awaitEnd(t, s, rec.ID)
		checkEnd(t, got, deadletter.StatusOpen, len(rec.Tries))
		if a := got.Tries[len(got.Tries)-1]; !strings.Contains(a.Error, "Not charging now") {
			t.Fatalf("appended attempt %+v", a)
		}
		if ev := simEvents(t, s, deref(v.ProviderPaymentID)); fmt.Sprint(ev) != "[payment_failed]" {
			t.Fatalf("a lost card was charged again: %v", ev)
		}
	})

	t.Run("reconciliation", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, Config{ReconcileEvery: -1})
		ctx := context.Background()
		arm := func() {
			if a := call(t, "POST", s.SimURL()+"/_sim/faults", "", `{"path_prefix":"/v1/payment_intents","fault":"http_500","count":1000}`); a.status >= 300 {
				t.Fatalf("arm: %d %s", a.status, a.body)
			}
		}
		arm()
		if _, err := s.reconcileScheduled(ctx); err == nil {
			t.Fatal("the run succeeded against a failing provider")
		}
		recs := opsList(t, s, "source=reconciliation")
		if len(recs) != 1 || recs[0]["class"] != string(deadletter.CauseReconRunFailed) {
			t.Fatalf("records %v", recs)
		}
		id := recs[0]["id"].(string)
		// Still failing: the record comes back open with the attempt.
		doubleClick(t, s, id)
		checkEnd(t, awaitEnd(t, s, id), deadletter.StatusOpen, 1)
		// The provider is back: the next retry resolves it.
		call(t, "DELETE", s.SimURL()+"/_sim/faults", "", "")
		if a := ops(t, s, "POST", "/ops/deadletters/"+id+"/retry", `{}`); a.status != http.StatusOK {
			t.Fatalf("retry: %d %s", a.status, a.body)
		}
		r := awaitEnd(t, s, id)
		if last := r.Audit[len(r.Audit)-1]; r.Status != deadletter.StatusResolved || last.Action != deadletter.ActionRetrySucceeded ||
			!strings.Contains(last.Result, "completed") {
			t.Fatalf("record %s, last audit %+v", r.Status, last)
		}
	})
}

// TestReconciliationDifferenceOffersOnlyWhatApplies: a difference has nothing to retry, so
// neither the API nor the console offers Retry, and an override says that it changes only
// the record.
func TestReconciliationDifferenceOffersOnlyWhatApplies(t *testing.T) {
	s := newStack(t, Config{ReconcileEvery: -1})
	r, _, err := s.deadletters.Open(context.Background(), deadletter.Record{Source: deadletter.SourceReconciliation,
		Key: "recon:amount:pay_x", Cause: deadletter.CauseReconAmountMismatch, PaymentID: "pay_x"})
	if err != nil {
		t.Fatal(err)
	}
	got := getRecord(t, s, r.ID)
	if fmt.Sprint(got.Actions) != "[override resolve ignore]" || !strings.Contains(got.OverrideEffect, "changes only this record") ||
		!strings.Contains(got.OverrideEffect, "refund or charge the difference") {
		t.Fatalf("actions %v, override effect %q", got.Actions, got.OverrideEffect)
	}
	a := ops(t, s, "POST", "/ops/deadletters/"+r.ID+"/override", `{"outcome":"refunded the difference by hand","note":"ticket 12"}`)
	var after apiRecord
	if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &after) != nil || after.Status != deadletter.StatusOverridden ||
		!strings.Contains(after.OverrideEffect, "changes only this record") {
		t.Fatalf("override: %d %s", a.status, a.body)
	}
}

// recoveryRecord waits for the recovery of payment id to end in its dead-letter record.
func recoveryRecord(t *testing.T, s *Stack, id string) apiRecord {
	t.Helper()
	ex := execution(t, s)
	if done, err := awaitRecovery(t, s, ex); err != nil || done.Status != asl.StatusSucceeded {
		t.Fatalf("execution %+v %v", done, err)
	}
	var recs []map[string]any
	eventually(t, 10*time.Second, "a dead-letter record opens", func() bool {
		recs = opsList(t, s, "source=recovery")
		return len(recs) == 1
	})
	if recs[0]["payment_id"] != id {
		t.Fatalf("record %v", recs[0])
	}
	return getRecord(t, s, recs[0]["id"].(string))
}

// executions counts the recovery rounds started: first executions, not the ones that resumed a
// round after a wait.
func executions(t *testing.T, s *Stack) int {
	t.Helper()
	ex, err := s.runner.ListExecutions(context.Background(), recoveryMachine)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ex {
		if !resumed(e.Name) {
			n++
		}
	}
	return n
}

// TestConsoleRetryClosesTheLoopInBrowser: an operator double-clicks Retry on a webhook dead
// letter in chromium; the delivery is applied once and the record reads resolved, with the
// retry in its audit; a reconciliation difference's page offers no Retry and says what an
// override changes.
func TestConsoleRetryClosesTheLoopInBrowser(t *testing.T) {
	bctx := browserOrSkip(t)
	s := newStack(t, Config{ReconcileEvery: -1})
	rec := deadMessage(t, s, webhookDLQ, "m-console", stripeDelivery(t, "evt_console", true))
	diff, _, err := s.deadletters.Open(context.Background(), deadletter.Record{Source: deadletter.SourceReconciliation,
		Key: "recon:amount:pay_console", Cause: deadletter.CauseReconAmountMismatch, PaymentID: "pay_console"})
	if err != nil {
		t.Fatal(err)
	}
	pg := page{t, bctx}
	do, text := pg.do, pg.text
	pg.signIn(s)
	do("open the record", chromedp.Navigate(s.APIURL()+"/ops/records/"+rec.ID), chromedp.WaitVisible(`#retry`))
	// A double click: the second click lands on the page the first one's answer replaces, or
	// on nothing; either way the table carries out one retry.
	do("double-click retry", chromedp.DoubleClick(`#retry`), chromedp.WaitVisible(`div.msg`))
	eventually(t, 20*time.Second, "the console shows the record resolved", func() bool {
		do("reload", chromedp.Navigate(s.APIURL()+"/ops/records/"+rec.ID), chromedp.WaitVisible(`#status`))
		return strings.TrimSpace(text(`#status`)) == string(deadletter.StatusResolved)
	})
	got := getRecord(t, s, rec.ID)
	retries := 0
	for _, a := range got.Audit {
		if a.Action == deadletter.ActionRetry {
			retries++
		}
	}
	if retries != 1 || got.Audit[len(got.Audit)-1].Action != deadletter.ActionRetrySucceeded {
		t.Fatalf("audit %+v", got.Audit)
	}
	do("open the difference", chromedp.Navigate(s.APIURL()+"/ops/records/"+diff.ID), chromedp.WaitVisible(`#override-effect`))
	if effect := text(`#override-effect`); !strings.Contains(effect, "changes only this record") {
		t.Fatalf("override effect %q", effect)
	}
	n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#retry').length`))
	if err != nil || n != 0 {
		t.Fatalf("a difference offers %d Retry buttons (%v)", n, err)
	}
}
