package inprocess

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/payments"
)

// recoveryFactor runs recovery's clock fast enough that a wait of days takes about a second.
const recoveryFactor = 200_000

func programCard(t *testing.T, simURL, pm, code string, times int) {
	t.Helper()
	a := call(t, "POST", simURL+"/_sim/cards", "", fmt.Sprintf(`{"payment_method":%q,"brand":"visa","decline_code":%q,"times":%d}`, pm, code, times))
	if a.status >= 300 {
		t.Fatalf("program card: %d %s", a.status, a.body)
	}
}

func createDeclined(t *testing.T, s *Stack, key, pm string) payments.View {
	t.Helper()
	return createDeclinedFor(t, s, key, pm, "cus_rec")
}

// createDeclinedFor is createDeclined for the customer given.
func createDeclinedFor(t *testing.T, s *Stack, key, pm, customer string) payments.View {
	t.Helper()
	a := call(t, "POST", s.APIURL()+"/payments", key, fmt.Sprintf(`{"amount":4200,"currency":"usd","customer":%q,"payment_method":%q,"invoice":"inv_%s"}`, customer, pm, key))
	var v payments.View
	if err := json.Unmarshal([]byte(a.body), &v); err != nil || a.status != http.StatusPaymentRequired {
		t.Fatalf("%d %s", a.status, a.body)
	}
	return v
}

// events lists the simulator's events for a PaymentIntent: one per charge attempt's outcome.
func simEvents(t *testing.T, s *Stack, pi string) []string {
	t.Helper()
	a := call(t, "GET", s.SimURL()+"/_sim/events?object_id="+pi, "", "")
	var out struct {
		Data []struct {
			Type string `json:"type"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(a.body), &out); err != nil {
		t.Fatalf("events %s: %v", a.body, err)
	}
	var types []string
	for i := len(out.Data) - 1; i >= 0; i-- { // oldest first
		types = append(types, strings.TrimPrefix(out.Data[i].Type, "payment_intent."))
	}
	return types
}

// execution is the first execution of the stack's one recovery.
func execution(t *testing.T, s *Stack) asl.Execution {
	t.Helper()
	var first []asl.Execution
	eventually(t, 10*time.Second, "a recovery execution starts", func() bool {
		ex, _ := s.runner.ListExecutions(context.Background(), recoveryMachine)
		first = first[:0]
		for _, e := range ex {
			if !resumed(e.Name) {
				first = append(first, e)
			}
		}
		return len(first) == 1
	})
	return first[0]
}

// resumed reports whether an execution name is one that resumed a recovery after a wait
// (recovery.ResumeName: "<first execution's name>-w<seq>").
func resumed(name string) bool { return resumedName.MatchString(name) }

var resumedName = regexp.MustCompile(`-r[0-9]+-w[0-9]+$`)

// chain lists the executions of the recovery whose first execution is named first: it and
// every execution that resumed it after a wait (named first's name + "-w<seq>"), in order.
func chain(t *testing.T, s *Stack, first string) []asl.Execution {
	t.Helper()
	all, err := s.runner.ListExecutions(context.Background(), recoveryMachine)
	if err != nil {
		t.Fatal(err)
	}
	seq := func(e asl.Execution) int64 {
		n, err := strconv.ParseInt(strings.TrimPrefix(e.Name, first+"-w"), 10, 64)
		if err != nil {
			return -1 // the first
		}
		return n
	}
	var out []asl.Execution
	for _, e := range all {
		if e.Name == first || strings.HasPrefix(e.Name, first+"-w") {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b asl.Execution) int { return cmp.Compare(seq(a), seq(b)) })
	return out
}

// awaitRecovery waits until the recovery that first started has ended (its stored state no
// longer running, every execution of it closed) and returns its last execution, with the
// state transitions of all its executions.
func awaitRecovery(t *testing.T, s *Stack, first asl.Execution) (asl.Execution, error) {
	t.Helper()
	var in struct {
		PaymentID string `json:"payment_id"`
	}
	if err := json.Unmarshal(first.Input, &in); err != nil {
		return asl.Execution{}, err
	}
	var exs []asl.Execution
	eventually(t, 60*time.Second, "the recovery of "+in.PaymentID+" ends", func() bool {
		rec, err := payments.GetRecovery(context.Background(), s.store, in.PaymentID)
		if err != nil || rec.Running() {
			return false
		}
		exs = chain(t, s, first.Name)
		for _, e := range exs {
			if e.Status == asl.StatusRunning {
				return false
			}
		}
		return len(exs) > 0
	})
	last, total := exs[len(exs)-1], 0
	for _, e := range exs {
		total += e.StateTransitions
	}
	last.StateTransitions = total
	return last, nil
}

// recoveryHistory is the history of every execution of the recovery that first started.
func recoveryHistory(t *testing.T, s *Stack, first asl.Execution) []asl.HistoryEvent {
	t.Helper()
	var out []asl.HistoryEvent
	for _, e := range chain(t, s, first.Name) {
		hist, err := s.runner.GetExecutionHistory(context.Background(), e.ExecutionArn)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, hist...)
	}
	return out
}

func opsList(t *testing.T, s *Stack, query string) []map[string]any {
	t.Helper()
	req, _ := http.NewRequest("GET", s.APIURL()+"/ops/deadletters?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+s.Config().OperatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Records []map[string]any `json:"records"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	return page.Records
}

// recoveryStarts are the clock starts the recovery scenarios run from, so that no outcome
// depends on the day the tests run. They are the default policy's calendar edges: a payday
// before and after its 09:00, the 17th (the next payday lies past the 14-day window), a leap
// day's eve and a short month's end. Each recovery's own clock starts at the stack's time of
// its decline, moments after the start, so the edge is the one the planner sees.
var recoveryStarts = map[string]time.Time{
	"1st before 09:00":    time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC),
	"15th after 09:00":    time.Date(2026, 12, 15, 9, 30, 0, 0, time.UTC),
	"17th":                time.Date(2027, 1, 17, 12, 0, 0, 0, time.UTC),
	"28 Feb, leap year":   time.Date(2028, 2, 28, 8, 0, 0, 0, time.UTC),
	"30 April, month end": time.Date(2027, 4, 30, 20, 0, 0, 0, time.UTC),
}

// forEachStart runs a recovery scenario from every start, side by side (each on its own
// stack; the waits are on the clock, not the processor).
func forEachStart(t *testing.T, scenario func(t *testing.T, start time.Time)) {
	for name, start := range recoveryStarts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			scenario(t, start)
		})
	}
}

func TestSoftDeclineRecoveredAtThePlannedMoment(t *testing.T) {
	forEachStart(t, func(t *testing.T, start time.Time) {
		s := newStack(t, Config{TimeFactor: recoveryFactor, ClockStart: start})
		programCard(t, s.SimURL(), "pm_soft_funds", "insufficient_funds", 1)
		v := createDeclined(t, s, "soft-1", "pm_soft_funds")
		if deref(v.DeclineClass) != "limit" {
			t.Fatalf("class %v", deref(v.DeclineClass))
		}
		ex := execution(t, s)
		// Fourteen days of recovery time are about 6 s of wall time at this factor.
		eventually(t, 60*time.Second, "the payment is recovered", func() bool {
			return strings.Contains(call(t, "GET", s.APIURL()+"/payments/"+v.ID, "", "").body, `"status":"succeeded"`)
		})
		done, err := awaitRecovery(t, s, ex)
		if err != nil || done.Status != asl.StatusSucceeded {
			t.Fatalf("execution %+v %v", done, err)
		}
		// The charge ran when the plan said, not before: the Park's input names the moment and
		// the resumed execution entered Charge at or after it.
		hist := recoveryHistory(t, s, ex)
		var wait struct {
			Attempts []struct {
				At time.Time `json:"at"`
			} `json:"attempts"`
			Plan struct {
				At          time.Time `json:"at"`
				Explanation string    `json:"explanation"`
			} `json:"plan"`
		}
		var charged time.Time
		for _, e := range hist {
			switch {
			case e.Type == "TaskStateEntered" && e.StateName == "Park":
				json.Unmarshal(e.Input, &wait)
			case e.Type == "TaskStateEntered" && e.StateName == "Charge":
				charged = e.Timestamp
			}
		}
		planned := wait.Plan.At
		if planned.IsZero() || len(wait.Attempts) != 1 || charged.Before(planned) {
			t.Fatalf("planned %v, charged %v, history %+v", planned, charged, wait.Attempts)
		}
		// A likely-funded moment: the next payday (the 1st or the 15th) in the morning, or the
		// last morning the 14-day window allows when that payday falls after it.
		declined := wait.Attempts[0].At
		if declined.Before(start) || declined.After(start.Add(time.Minute)) || !planned.After(declined) || planned.After(declined.Add(14*24*time.Hour)) {
			t.Fatalf("declined %s, retried %s: not inside the window after the decline (start %s)", declined, planned, start)
		}
		fallback := strings.Contains(wait.Plan.Explanation, "last morning inside the recovery window")
		if d := planned.UTC().Day(); (d != 1 && d != 15 && !fallback) || planned.UTC().Hour() != 9 {
			t.Fatalf("insufficient funds retried at %s: %s", planned, wait.Plan.Explanation)
		}
		if got := simEvents(t, s, deref(v.ProviderPaymentID)); fmt.Sprint(got) != "[payment_failed succeeded]" {
			t.Fatalf("charges at the provider: %v", got)
		}
		t.Logf("transitions: %d; declined %s, planned %s: %s", done.StateTransitions, declined.Format(time.RFC3339), planned.Format(time.RFC3339), wait.Plan.Explanation)
	})
}

func TestHardDeclineStopsAtOnceWithADeadLetter(t *testing.T) {
	s := newStack(t, Config{TimeFactor: recoveryFactor, ClockStart: recoveryStarts["17th"]})
	v := createDeclined(t, s, "hard-1", "pm_card_visa_chargeDeclinedLostCard")
	ex := execution(t, s)
	done, err := awaitRecovery(t, s, ex)
	if err != nil || done.Status != asl.StatusSucceeded {
		t.Fatalf("execution %+v %v", done, err)
	}
	var recs []map[string]any
	eventually(t, 10*time.Second, "a dead-letter record opens", func() bool {
		recs = opsList(t, s, "source=recovery")
		return len(recs) == 1
	})
	if recs[0]["payment_id"] != v.ID || recs[0]["class"] != "decline_hard" {
		t.Fatalf("record %v", recs[0])
	}
	if got := simEvents(t, s, deref(v.ProviderPaymentID)); fmt.Sprint(got) != "[payment_failed]" {
		t.Fatalf("a hard decline was retried: %v", got)
	}
}

func TestExhaustedScheduleLeavesADeadLetter(t *testing.T) {
	forEachStart(t, func(t *testing.T, start time.Time) {
		s := newStack(t, Config{TimeFactor: recoveryFactor, ClockStart: start})
		programCard(t, s.SimURL(), "pm_always_failing", "processing_error", 1000)
		v := createDeclined(t, s, "tech-1", "pm_always_failing")
		ex := execution(t, s)
		done, err := awaitRecovery(t, s, ex)
		if err != nil || done.Status != asl.StatusSucceeded {
			t.Fatalf("execution %+v %v", done, err)
		}
		var recs []map[string]any
		eventually(t, 10*time.Second, "a dead-letter record opens", func() bool {
			recs = opsList(t, s, "source=recovery")
			return len(recs) == 1
		})
		if recs[0]["class"] != "exhausted_recovery" {
			t.Fatalf("record %v", recs[0])
		}
		// One charge per planned attempt: the original and the eight the default policy allows.
		got := simEvents(t, s, deref(v.ProviderPaymentID))
		if len(got) != 9 {
			t.Fatalf("%d charges at the provider: %v", len(got), got)
		}
		t.Logf("transitions: %d", done.StateTransitions)
	})
}

// TestTransientChargeFailureIsRetried: the provider answers 500 to the recovery's charge more
// often than the provider call retries inline, so the Charge step fails with
// Recovery.Transient and the state machine's own Retry runs it again with the same attempt
// key; the payment recovers, with no dead letter. (The local runner once saw the Lambda
// handler's named error as "InvokeResponse_Error" and sent it straight to the Catch.)
func TestTransientChargeFailureIsRetried(t *testing.T) {
	s := newStack(t, Config{TimeFactor: recoveryFactor, ClockStart: recoveryStarts["17th"]})
	programCard(t, s.SimURL(), "pm_flaky_provider", "insufficient_funds", 1)
	v := createDeclined(t, s, "flaky-1", "pm_flaky_provider")
	ex := execution(t, s)
	// Only the recovery talks to the provider from here on: these hit its confirms.
	if a := call(t, "POST", s.SimURL()+"/_sim/faults", "", `{"path_prefix":"/v1/payment_intents/","fault":"http_500","count":6}`); a.status != http.StatusCreated {
		t.Fatalf("arm: %d %s", a.status, a.body)
	}
	done, err := awaitRecovery(t, s, ex)
	if err != nil || done.Status != asl.StatusSucceeded {
		t.Fatalf("execution %+v %v", done, err)
	}
	hist := recoveryHistory(t, s, ex)
	failed := 0
	for _, e := range hist {
		if e.Type == "TaskFailed" {
			failed++
			if e.Error != "Recovery.Transient" {
				t.Fatalf("the charge failed as %q, want Recovery.Transient: %s", e.Error, e.Cause)
			}
		}
	}
	if failed == 0 {
		t.Fatal("no charge failed: the faults did not reach the recovery")
	}
	if got := call(t, "GET", s.APIURL()+"/payments/"+v.ID, "", "").body; !strings.Contains(got, `"status":"succeeded"`) {
		t.Fatalf("payment %s", got)
	}
	if recs := opsList(t, s, "source=recovery"); len(recs) != 0 {
		t.Fatalf("dead letters %v", recs)
	}
	t.Logf("%d charge attempts failed with Recovery.Transient before the Retry succeeded", failed)
}
