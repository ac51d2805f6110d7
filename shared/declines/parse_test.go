package declines

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseDecline(t *testing.T) {
	tests := map[string]struct {
		in    string
		want  Decline
		field string // the FieldError.Field expected; empty for success
	}{
		"full": {
			in:   `{"code":"insufficient_funds","advice_code":"try_again_later","network_advice_code":"24","network_decline_code":"51","network":"mastercard"}`,
			want: Decline{Code: "insufficient_funds", AdviceCode: "try_again_later", NetworkAdviceCode: "24", NetworkDeclineCode: "51", Network: NetworkMastercard},
		},
		"unknown members ignored": {in: `{"code":"lost_card","charge":"ch_1"}`, want: Decline{Code: "lost_card"}},
		"empty object":            {in: `{}`},
		"not JSON":                {in: `code=lost_card`, field: "document"},
		"wrong type":              {in: `{"code":51}`, field: "document"},
		"trailing data":           {in: `{"code":"x"} {"code":"y"}`, field: "document"},
		"too large":               {in: `{"code":"` + strings.Repeat("a", MaxDocument) + `"}`, field: "document"},
		"code too long":           {in: `{"code":"` + strings.Repeat("a", 65) + `"}`, field: "code"},
		"control character":       {in: `{"network_decline_code":"5\n1"}`, field: "network_decline_code"},
		"non-ASCII":               {in: `{"network":"visä"}`, field: "network"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDecline([]byte(tc.in))
			if tc.field == "" {
				if err != nil || got != tc.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrInvalidDecline) {
				t.Fatalf("err = %v, want a FieldError on %s wrapping ErrInvalidDecline", err, tc.field)
			}
		})
	}
}

func TestClassificationJSON(t *testing.T) {
	c := Classify(Decline{Code: "insufficient_funds", NetworkAdviceCode: "25", Network: NetworkMastercard})
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"decline_class":"limit"`) {
		t.Errorf("no decline_class member in %s", b)
	}
	var back Classification
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

// FuzzParseDecline checks that any document either fails with ErrInvalidDecline or yields a
// decline whose classification is well formed.
func FuzzParseDecline(f *testing.F) {
	for _, s := range []string{
		`{"code":"insufficient_funds"}`,
		`{"code":"generic_decline","network_decline_code":"05","network":"visa"}`,
		`{"network_advice_code":"25","network":"mastercard"}`,
		`{"advice_code":"do_not_try_again"}`,
		`{}`, `null`, `[]`, `{"code":`, `{"code":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDecline(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidDecline) {
				t.Fatalf("error %v does not wrap ErrInvalidDecline", err)
			}
			return
		}
		wellFormed(t, Classify(d))
	})
}

// FuzzClassify feeds arbitrary codes straight to Classify, as a caller that skipped
// ParseDecline would.
func FuzzClassify(f *testing.F) {
	f.Add("insufficient_funds", "", "", "51", "visa")
	f.Add("", "try_again_later", "24", "", "mastercard")
	f.Add("lost_card", "", "3", "R1", "")
	f.Add("x", "y", "z", "9", "amex")
	f.Fuzz(func(t *testing.T, code, advice, mac, network, brand string) {
		wellFormed(t, Classify(Decline{Code: code, AdviceCode: advice, NetworkAdviceCode: mac, NetworkDeclineCode: network, Network: Network(brand)}))
		_ = VisaCategory(network)
	})
}

func wellFormed(t *testing.T, c Classification) {
	t.Helper()
	switch c.Class {
	case ClassHard, ClassCancellation, ClassData, ClassAuth, ClassLimit, ClassTechnical, ClassGeneric, ClassReview, ClassConfig:
	default:
		t.Fatalf("class %q", c.Class)
	}
	if c.Retryable != c.Action.Retries() {
		t.Fatalf("retryable %v disagrees with action %s", c.Retryable, c.Action)
	}
	if c.Retryable && (c.NeedsCustomer || c.NeedsReview) {
		t.Fatalf("retryable and needs someone: %+v", c)
	}
	if c.Retryable != c.Class.MayRetry() {
		t.Fatalf("hard and retryable: %+v", c)
	}
	if c.Explanation == "" || c.Reason == "" || c.Source == "" {
		t.Fatalf("incomplete: %+v", c)
	}
	if (c.Action == ActionRetryAfter) != (c.DelaySeconds > 0) {
		t.Fatalf("delay %d with action %s", c.DelaySeconds, c.Action)
	}
	if c.Source == SourceUnknown && len(c.Code) > 40 {
		t.Fatalf("unknown code not trimmed: %q", c.Code)
	}
}
