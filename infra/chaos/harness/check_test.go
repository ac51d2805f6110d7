package harness

import (
	"fmt"
	"reflect"
	"testing"
)

func TestCheck(t *testing.T) {
	ok := Answer{201, `{"id":"pay_1","status":"succeeded"}`}
	declined := Answer{402, `{"id":"pay_1","status":"declined"}`}
	processing := Answer{201, `{"id":"pay_1","status":"processing"}`}
	succeeded := []Intent{{ID: "pi_1", PaymentID: "pay_1", Status: "succeeded"}}
	tests := map[string]struct {
		obs     []Observation
		intents []Intent
		cutOff  bool // the run ended at its time bound
		want    Findings
	}{
		"clean": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{ok, ok}, Found: true, Status: "succeeded"}},
			intents: succeeded,
		},
		"double charge": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{ok}, Found: true, Status: "succeeded"}},
			intents: append([]Intent{{ID: "pi_2", PaymentID: "pay_1", Status: "succeeded"}}, succeeded...),
			want:    Findings{DoubleCharges: 1},
		},
		"accepted then forgotten": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{ok}}},
			intents: succeeded,
			want:    Findings{Lost: 1},
		},
		"still pending": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Found: true, Status: "pending"}},
			intents: succeeded,
			want:    Findings{Lost: 1},
		},
		"still pending when the bound cut the run": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Found: true, Status: "pending"}},
			intents: succeeded,
			cutOff:  true,
			want:    Findings{Unsettled: 1},
		},
		"forgotten even when the bound cut the run": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{ok}}},
			intents: succeeded,
			cutOff:  true,
			want:    Findings{Lost: 1},
		},
		"charged but never accepted and unknown": {
			obs:     []Observation{{Key: "k", ID: "pay_1"}},
			intents: succeeded,
			want:    Findings{Lost: 1},
		},
		"charge nobody asked for": {
			intents: []Intent{{ID: "pi_9", PaymentID: "pay_9", Status: "succeeded"}},
			want:    Findings{Lost: 1},
		},
		"never accepted, never charged": {
			obs:  []Observation{{Key: "k", ID: "pay_1"}},
			want: Findings{Unanswered: 1},
		},
		"replay answered differently": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{ok, declined, ok}, Found: true, Status: "succeeded"}},
			intents: succeeded,
			want:    Findings{ReplayMismatches: 1},
		},
		"local status differs from the provider's": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{declined}, Found: true, Status: "declined"}},
			intents: succeeded,
			want:    Findings{StatusMismatches: 1},
		},
		"recoverable and recovered": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{declined}, Found: true, Status: "succeeded", Recoverable: true}},
			intents: succeeded,
		},
		"recoverable but still declined": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{declined}, Found: true, Status: "declined", Recoverable: true}},
			intents: []Intent{{ID: "pi_1", PaymentID: "pay_1", Status: "requires_payment_method"}},
			want:    Findings{NotRecovered: 1},
		},
		"recoverable, still declined when the bound cut the run": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{declined}, Found: true, Status: "declined", Recoverable: true}},
			intents: []Intent{{ID: "pi_1", PaymentID: "pay_1", Status: "requires_payment_method"}},
			cutOff:  true,
			want:    Findings{Unsettled: 1},
		},
		"recoverable, but pending past the key horizon and never at the provider": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{{402, `{"id":"pay_1","status":"canceled"}`}}, Found: true, Status: "canceled", Recoverable: true}},
			intents: nil,
		},
		"pending past the key horizon, never at the provider: canceled": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{{402, `{"id":"pay_1","status":"canceled"}`}}, Found: true, Status: "canceled"}},
			intents: nil,
		},
		"canceled locally but charged at the provider": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{{402, `{"id":"pay_1","status":"canceled"}`}}, Found: true, Status: "canceled"}},
			intents: succeeded,
			want:    Findings{StatusMismatches: 1},
		},
		"declined at both": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{declined}, Found: true, Status: "declined"}},
			intents: []Intent{{ID: "pi_1", PaymentID: "pay_1", Status: "requires_payment_method"}},
		},
		"unheard, caught up by the backfill": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{processing}, Found: true, Status: "succeeded", Unheard: true}},
			intents: succeeded,
		},
		"unheard, settled as a decline and caught up": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{processing}, Found: true, Status: "declined", Unheard: true}},
			intents: []Intent{{ID: "pi_1", PaymentID: "pay_1", Status: "requires_payment_method"}},
		},
		"unheard, still processing after the backfill": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{processing}, Found: true, Status: "processing", Unheard: true}},
			intents: succeeded,
			want:    Findings{StatusMismatches: 1, UnheardBehind: 1},
		},
		"unheard, never settled at the provider": {
			obs:     []Observation{{Key: "k", ID: "pay_1", Accepted: true, Finals: []Answer{processing}, Found: true, Status: "processing", Unheard: true}},
			intents: []Intent{{ID: "pi_1", PaymentID: "pay_1", Status: "processing"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Check(tc.obs, tc.intents, !tc.cutOff)
			got.Examples = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if broken := got.Broken(); (len(broken) == 0) != (got.DoubleCharges+got.Lost+got.ReplayMismatches+got.StatusMismatches+got.NotRecovered+got.UnnamedStops+got.UnheardBehind == 0) {
				t.Fatalf("Broken() = %v for %+v", broken, got)
			}
		})
	}
}

func TestLocalStatus(t *testing.T) {
	tests := map[string]string{
		"succeeded": "succeeded", "requires_payment_method": "declined", "processing": "processing",
		"canceled": "canceled", "requires_confirmation": "requires_action", "requires_action": "requires_action",
		"requires_capture": "requires_capture", "a status Stripe adds later": "pending",
	}
	for stripe, want := range tests {
		t.Run(stripe, func(t *testing.T) {
			if got := LocalStatus(stripe); got != want {
				t.Fatalf("LocalStatus(%q) = %q, want %q", stripe, got, want)
			}
		})
	}
}

func TestParseIntentPage(t *testing.T) {
	tests := map[string]struct {
		page    string
		want    []Intent
		more    bool
		wantErr bool
	}{
		"page": {
			page: `{"object":"list","has_more":true,"data":[{"id":"pi_1","status":"succeeded","metadata":{"twice_payment_id":"pay_1"}}]}`,
			want: []Intent{{ID: "pi_1", PaymentID: "pay_1", Status: "succeeded"}}, more: true,
		},
		"last page":            {page: `{"object":"list","has_more":false,"data":[]}`},
		"not a list":           {page: `{"object":"payment_intent"}`, wantErr: true},
		"more on empty page":   {page: `{"object":"list","has_more":true,"data":[]}`, wantErr: true},
		"intent without an id": {page: `{"object":"list","data":[{"status":"succeeded"}]}`, wantErr: true},
		"not json":             {page: `<html>`, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, more, err := parseIntentPage([]byte(tc.page))
			if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) || more != tc.more {
				t.Fatalf("got %v %v %v", got, more, err)
			}
		})
	}
}

func FuzzParseIntentPage(f *testing.F) {
	f.Add([]byte(`{"object":"list","has_more":true,"data":[{"id":"pi_1","status":"succeeded","metadata":{"twice_payment_id":"pay_1"}}]}`))
	f.Add([]byte(`{"object":"list","has_more":false,"data":[]}`))
	f.Add([]byte(`{"object":"list","data":[{"status":"succeeded"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		intents, more, err := parseIntentPage(b)
		if err != nil {
			return
		}
		// A page that parses names every intent, and a page with more is never empty: the
		// pagination cursor is the last id.
		for _, in := range intents {
			if in.ID == "" {
				t.Fatalf("an intent without id in %q", b)
			}
		}
		if more && len(intents) == 0 {
			t.Fatalf("has_more on an empty page %q", b)
		}
	})
}

// The check finds a second succeeded PaymentIntent for one logical payment.
func ExampleCheck() {
	ok := Answer{Status: 201, Body: `{"id":"pay_1","status":"succeeded"}`}
	f := Check(
		[]Observation{{Key: "order-1", ID: "pay_1", Accepted: true, Finals: []Answer{ok, ok}, Found: true, Status: "succeeded"}},
		[]Intent{{ID: "pi_2", PaymentID: "pay_1", Status: "succeeded"}, {ID: "pi_1", PaymentID: "pay_1", Status: "succeeded"}},
		true,
	)
	fmt.Println(f.Broken())
	fmt.Println(f.Examples[0])
	// Output:
	// [double charges: 1]
	// double charge: key order-1 payment pay_1 has 2 succeeded PaymentIntents
}
