package recon

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

var (
	t0     = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	window = Window{From: t0.Add(-25 * time.Hour), To: t0.Add(-5 * time.Minute)}
	old    = t0.Add(-2 * time.Hour)
)

func loc(id, pid, status string, amount int64, created time.Time) payments.Payment {
	return payments.Payment{ID: id, ProviderPaymentID: pid, Status: status, Amount: amount, Currency: "usd",
		Customer: "cus_1", CreatedAt: created, UpdatedAt: created}
}

func rem(id string, status provider.Status, amount int64, created time.Time, meta map[string]string) provider.Payment {
	return provider.Payment{ID: id, Status: status, Amount: amount, Currency: "usd", Customer: "cus_1", Created: created, Metadata: meta}
}

func payID(id string) map[string]string { return map[string]string{"twice_payment_id": id} }

func TestClassify(t *testing.T) {
	recent := t0.Add(-7 * time.Minute) // in the window, within the grace period
	cases := map[string]struct {
		local  []payments.Payment
		remote []provider.Payment
		want   []Kind
	}{
		"clean": {
			local:  []payments.Payment{loc("pay_1", "pi_1", "succeeded", 100, old)},
			remote: []provider.Payment{rem("pi_1", provider.StatusSucceeded, 100, old, payID("pay_1"))},
		},
		"matched by provider id alone": {
			local:  []payments.Payment{loc("pay_1", "pi_1", "declined", 100, old)},
			remote: []provider.Payment{rem("pi_1", provider.StatusDeclined, 100, old, nil)},
		},
		"missing locally": {
			remote: []provider.Payment{rem("pi_1", provider.StatusSucceeded, 100, old, nil)},
			want:   []Kind{MissingLocally},
		},
		"missing locally though it names our payment": {
			remote: []provider.Payment{rem("pi_1", provider.StatusSucceeded, 100, old, payID("pay_gone"))},
			want:   []Kind{MissingLocally},
		},
		"young provider payment without local record is in flight": {
			remote: []provider.Payment{rem("pi_1", provider.StatusSucceeded, 100, recent, nil)},
		},
		"provider payment created before the window is the previous window's": {
			remote: []provider.Payment{rem("pi_1", provider.StatusSucceeded, 100, window.From.Add(-time.Second), nil)},
		},
		"missing at provider": {
			local: []payments.Payment{loc("pay_1", "pi_1", "succeeded", 100, old)},
			want:  []Kind{MissingAtProvider},
		},
		"old unknown outcome with no provider payment": {
			local: []payments.Payment{loc("pay_1", "", "pending", 100, old)},
			want:  []Kind{MissingAtProvider},
		},
		"young unknown outcome is not a difference": {
			local: []payments.Payment{loc("pay_1", "", "pending", 100, recent)},
		},
		"old unknown outcome that succeeded at the provider": {
			local:  []payments.Payment{loc("pay_1", "", "pending", 100, old)},
			remote: []provider.Payment{rem("pi_1", provider.StatusSucceeded, 100, old, payID("pay_1"))},
			want:   []Kind{StatusMismatch},
		},
		"pending locally, succeeded at provider, old": {
			local:  []payments.Payment{loc("pay_1", "pi_1", "processing", 100, old)},
			remote: []provider.Payment{rem("pi_1", provider.StatusSucceeded, 100, old, payID("pay_1"))},
			want:   []Kind{StatusMismatch},
		},
		"processing locally, succeeded at provider, within grace": {
			local:  []payments.Payment{loc("pay_1", "pi_1", "processing", 100, recent)},
			remote: []provider.Payment{rem("pi_1", provider.StatusSucceeded, 100, recent, payID("pay_1"))},
		},
		"both in flight": {
			local:  []payments.Payment{loc("pay_1", "pi_1", "pending", 100, old)},
			remote: []provider.Payment{rem("pi_1", provider.StatusProcessing, 100, old, payID("pay_1"))},
		},
		"refunded at provider only": {
			local:  []payments.Payment{loc("pay_1", "pi_1", "succeeded", 100, old)},
			remote: []provider.Payment{rem("pi_1", provider.StatusRefunded, 100, old, payID("pay_1"))},
			want:   []Kind{StatusMismatch},
		},
		"final locally, in flight at provider": {
			local:  []payments.Payment{loc("pay_1", "pi_1", "succeeded", 100, recent)},
			remote: []provider.Payment{rem("pi_1", provider.StatusProcessing, 100, recent, payID("pay_1"))},
			want:   []Kind{StatusMismatch},
		},
		"amount differs": {
			local:  []payments.Payment{loc("pay_1", "pi_1", "succeeded", 100, old)},
			remote: []provider.Payment{rem("pi_1", provider.StatusSucceeded, 1000, old, payID("pay_1"))},
			want:   []Kind{AmountMismatch},
		},
		"currency differs": {
			local: []payments.Payment{loc("pay_1", "pi_1", "succeeded", 100, old)},
			remote: []provider.Payment{func() provider.Payment {
				r := rem("pi_1", provider.StatusSucceeded, 100, old, payID("pay_1"))
				r.Currency = "eur"
				return r
			}()},
			want: []Kind{AmountMismatch},
		},
		"status and amount both differ": {
			local:  []payments.Payment{loc("pay_1", "pi_1", "declined", 100, old)},
			remote: []provider.Payment{rem("pi_1", provider.StatusSucceeded, 200, old, payID("pay_1"))},
			want:   []Kind{StatusMismatch, AmountMismatch},
		},
		"two succeeded provider payments for one of ours": {
			local: []payments.Payment{loc("pay_1", "pi_1", "succeeded", 100, old)},
			remote: []provider.Payment{rem("pi_1", provider.StatusSucceeded, 100, old, payID("pay_1")),
				rem("pi_2", provider.StatusSucceeded, 100, old.Add(time.Minute), payID("pay_1"))},
			want: []Kind{DuplicateCharge},
		},
		"a declined earlier attempt is no duplicate": {
			local: []payments.Payment{loc("pay_1", "pi_2", "succeeded", 100, old)},
			remote: []provider.Payment{rem("pi_1", provider.StatusDeclined, 100, old, payID("pay_1")),
				rem("pi_2", provider.StatusSucceeded, 100, old.Add(time.Minute), payID("pay_1"))},
		},
		"one invoice charged under two idempotency keys": {
			local: []payments.Payment{loc("pay_1", "pi_1", "succeeded", 100, old), loc("pay_2", "pi_2", "succeeded", 100, old)},
			remote: []provider.Payment{
				rem("pi_1", provider.StatusSucceeded, 100, old, map[string]string{"twice_payment_id": "pay_1", "twice_invoice": "in_1"}),
				rem("pi_2", provider.StatusSucceeded, 100, old, map[string]string{"twice_payment_id": "pay_2", "twice_invoice": "in_1"})},
			want: []Kind{DuplicateCharge},
		},
		"same invoice, different amounts is no duplicate": {
			local: []payments.Payment{loc("pay_1", "pi_1", "succeeded", 100, old), loc("pay_2", "pi_2", "succeeded", 50, old)},
			remote: []provider.Payment{
				rem("pi_1", provider.StatusSucceeded, 100, old, map[string]string{"twice_payment_id": "pay_1", "twice_invoice": "in_1"}),
				rem("pi_2", provider.StatusSucceeded, 50, old, map[string]string{"twice_payment_id": "pay_2", "twice_invoice": "in_1"})},
		},
		"listed and fetched twice counts once": {
			local: []payments.Payment{loc("pay_1", "pi_1", "succeeded", 100, old)},
			remote: []provider.Payment{rem("pi_1", provider.StatusSucceeded, 100, old, payID("pay_1")),
				rem("pi_1", provider.StatusSucceeded, 100, old, payID("pay_1"))},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Window: window, Now: t0, Local: tc.local, Remote: tc.remote}
			got := Classify(snap, DefaultGrace)
			var classes []Kind
			for _, d := range got {
				classes = append(classes, d.Kind)
				if d.Key == "" || d.Explanation == "" || d.SuggestedAction == "" {
					t.Errorf("difference without key, explanation or action: %+v", d)
				}
				if d.Local == nil && len(d.Provider) == 0 {
					t.Errorf("difference without evidence: %+v", d)
				}
			}
			if !slices.Equal(classes, tc.want) {
				t.Fatalf("classes = %v, want %v", classes, tc.want)
			}
			again := Classify(snap, DefaultGrace)
			for i := range got {
				if again[i].Key != got[i].Key {
					t.Fatalf("keys not deterministic: %s then %s", got[i].Key, again[i].Key)
				}
			}
		})
	}
}

// The key follows what differs: the same disagreement keeps its key, a changed one gets a new one.
func TestDifferenceKeyFollowsWhatDiffers(t *testing.T) {
	snap := func(status provider.Status) Snapshot {
		return Snapshot{Window: window, Now: t0,
			Local:  []payments.Payment{loc("pay_1", "pi_1", "processing", 100, old)},
			Remote: []provider.Payment{rem("pi_1", status, 100, old, payID("pay_1"))}}
	}
	a, b := Classify(snap(provider.StatusSucceeded), DefaultGrace), Classify(snap(provider.StatusDeclined), DefaultGrace)
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("want one difference each, got %d and %d", len(a), len(b))
	}
	if a[0].Key == b[0].Key {
		t.Fatalf("different disagreements share key %s", a[0].Key)
	}
	// Another window over the same state finds the same key.
	later := snap(provider.StatusSucceeded)
	later.Window = Window{From: window.From.Add(time.Hour), To: window.To.Add(time.Hour)}
	later.Now = t0.Add(time.Hour)
	if c := Classify(later, DefaultGrace); len(c) != 1 || c[0].Key != a[0].Key {
		t.Fatalf("overlapping window: got %+v, want key %s", c, a[0].Key)
	}
}

func TestWindowContainsAndRunID(t *testing.T) {
	w := DefaultWindow(time.Date(2026, 11, 29, 12, 7, 31, 500, time.UTC), 25, 5*time.Minute)
	if want := (Window{From: time.Date(2026, 11, 28, 11, 2, 0, 0, time.UTC), To: time.Date(2026, 11, 29, 12, 2, 0, 0, time.UTC)}); w != want {
		t.Fatalf("window = %+v, want %+v", w, want)
	}
	if got, want := w.RunID(), "recon_20261128T110200Z_20261129T120200Z"; got != want {
		t.Fatalf("run id = %s, want %s", got, want)
	}
	cases := map[string]struct {
		t    time.Time
		want bool
	}{
		"from":                   {w.From, true},
		"to":                     {w.To, true},
		"within the last second": {w.To.Add(999 * time.Millisecond), true},
		"before":                 {w.From.Add(-time.Nanosecond), false},
		"after":                  {w.To.Add(time.Second), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := w.Contains(tc.t); got != tc.want {
				t.Fatalf("Contains(%s) = %v", tc.t, got)
			}
		})
	}
}

// A pair whose sides straddle the window start belongs to the window holding the newer side.
func TestClassifyStraddlingPairBelongsToTheNewerSide(t *testing.T) {
	before, inside := window.From.Add(-3*time.Hour), window.From.Add(time.Hour)
	for name, tc := range map[string]struct {
		local, remote time.Time
		want          int
	}{
		"local inside, provider before": {inside, before, 1},
		"provider inside, local before": {before, inside, 1},
		"both before":                   {before, before.Add(time.Minute), 0},
	} {
		t.Run(name, func(t *testing.T) {
			snap := Snapshot{Window: window, Now: t0,
				Local:  []payments.Payment{loc("pay_1", "pi_1", "succeeded", 100, tc.local)},
				Remote: []provider.Payment{rem("pi_1", provider.StatusSucceeded, 999, tc.remote, payID("pay_1"))}}
			if got := Classify(snap, DefaultGrace); len(got) != tc.want {
				t.Fatalf("%d differences, want %d", len(got), tc.want)
			}
		})
	}
}

// A payment still pending or processing past its bound (payments.StuckAfter) is a difference,
// reported by the windows that hold the moment the bound ran out, always under one key (so the
// sink opens it once): a calendar of hourly windows misses none.
func TestStuckStates(t *testing.T) {
	cases := map[string]struct {
		p    payments.Payment
		want []Kind
	}{
		"pending past the key horizon":         {loc("pay_1", "", "pending", 100, t0.Add(-26*time.Hour)), []Kind{Stuck}},
		"processing past a day":                {loc("pay_1", "pi_1", "processing", 100, t0.Add(-24*time.Hour-10*time.Minute)), []Kind{Stuck}},
		"pending within its bound":             {loc("pay_1", "", "pending", 100, t0.Add(-23*time.Hour)), nil},
		"due before the window: reported then": {loc("pay_1", "", "pending", 100, t0.Add(-50*time.Hour)), nil},
		"final is never stuck":                 {loc("pay_1", "pi_1", "succeeded", 100, t0.Add(-26*time.Hour)), nil},
		"waiting for the customer past 23 h":   {loc("pay_1", "pi_1", "requires_action", 100, t0.Add(-23*time.Hour-10*time.Minute)), []Kind{Stuck}},
		"waiting for the customer 22 h":        {loc("pay_1", "pi_1", "requires_action", 100, t0.Add(-22*time.Hour)), nil},
		"authorized past 6 days":               {loc("pay_1", "pi_1", "requires_capture", 100, t0.Add(-6*24*time.Hour-10*time.Minute)), []Kind{Stuck}},
		"authorized 5 days":                    {loc("pay_1", "pi_1", "requires_capture", 100, t0.Add(-5*24*time.Hour)), nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := Classify(Snapshot{Window: window, Now: t0, Open: []payments.Payment{c.p}}, 5*time.Minute)
			var classes []Kind
			for _, d := range got {
				classes = append(classes, d.Kind)
				if d.Explanation == "" || d.SuggestedAction == "" || d.PaymentID != "pay_1" {
					t.Errorf("difference without its words or payment: %+v", d)
				}
			}
			if !slices.Equal(classes, c.want) {
				t.Fatalf("classes %v, want %v", classes, c.want)
			}
		})
	}

	// A configured customer window moves the bound; the authorization's words name its lapse.
	short := payments.Bounds{CustomerWindow: time.Hour}
	if got := Classify(Snapshot{Window: window, Now: t0, Bounds: short,
		Open: []payments.Payment{loc("pay_1", "pi_1", "requires_action", 100, t0.Add(-time.Hour-10*time.Minute))}}, 5*time.Minute); len(got) != 1 {
		t.Fatalf("a one-hour customer window: %v", got)
	}
	held := loc("pay_1", "pi_1", "requires_capture", 100, t0.Add(-6*24*time.Hour-10*time.Minute))
	held.CaptureBefore = t0.Add(23 * time.Hour)
	if got := Classify(Snapshot{Window: window, Now: t0, Open: []payments.Payment{held}}, 5*time.Minute); len(got) != 1 ||
		!strings.Contains(got[0].Explanation, held.CaptureBefore.Format("2 Jan 2006 15:04 MST")) || !strings.Contains(got[0].SuggestedAction, "/capture") {
		t.Fatalf("authorization near its lapse: %+v", got)
	}

	// Hourly runs over 25 h windows ending 5 minutes ago, for three days of payments made every
	// 7 minutes that never leave pending or processing: each is reported, under one key.
	start := t0
	var made []payments.Payment
	for at, i := start, 0; at.Before(start.Add(72 * time.Hour)); at, i = at.Add(7*time.Minute), i+1 {
		status := []string{provider.StatusPending, provider.StatusProcessing}[i%2]
		made = append(made, loc(fmt.Sprintf("pay_%d", i), "", status, 100, at))
	}
	reported, keys := map[string]int{}, map[string]map[string]bool{}
	for now := start.Add(time.Hour); now.Before(start.Add(200 * time.Hour)); now = now.Add(time.Hour) {
		w := Window{From: now.Add(-25 * time.Hour), To: now.Add(-5 * time.Minute)}
		var open []payments.Payment
		for _, p := range made { // what the snapshot reads: created a bound before the window
			b := payments.StuckAfter(p.Status)
			if !p.CreatedAt.Before(w.From.Add(-b)) && !p.CreatedAt.After(w.To.Add(-b)) {
				open = append(open, p)
			}
		}
		seen := map[string]bool{}
		for _, d := range Classify(Snapshot{Window: w, Now: now, Open: open}, 5*time.Minute) {
			if !seen[d.Key] {
				seen[d.Key] = true
				reported[d.PaymentID]++
				if keys[d.PaymentID] == nil {
					keys[d.PaymentID] = map[string]bool{}
				}
				keys[d.PaymentID][d.Key] = true
			}
		}
	}
	for _, p := range made {
		if reported[p.ID] == 0 || len(keys[p.ID]) != 1 {
			t.Fatalf("%s (%s since %s): reported %d times under %d keys, want some under one", p.ID, p.Status, p.CreatedAt, reported[p.ID], len(keys[p.ID]))
		}
	}
}
