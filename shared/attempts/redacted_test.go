package attempts

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRedactedAttempt(t *testing.T) {
	body := "amount=1000&card[number]=4242424242424242&description=" + strings.Repeat("x", 100)
	a := Attempt{
		Path:           "/v1/payment_intents?client_secret=pi_1_secret_abc&expand[]=x",
		RequestHeader:  map[string]string{"authorization": "Bearer sk_test_abc", "content-type": "application/x-www-form-urlencoded"},
		RequestBody:    body,
		ResponseHeader: map[string]string{"Content-Type": "application/json"},
		ResponseBody:   `{"client_secret":"pi_1_secret_abc","id":"pi_1"}`,
		Err:            `Post "https://api.stripe.com/v1/x?key=sk_live_zzz": timeout`,
	}
	got := a.Redacted(50)
	if got.Path != "/v1/payment_intents?client_secret=[redacted]&expand[]=x" {
		t.Errorf("path %q", got.Path)
	}
	if got.RequestHeader["Authorization"] != "Bearer [redacted]" {
		t.Errorf("headers %v", got.RequestHeader)
	}
	if got.RequestBody != "amount=1000&card[number]=[card+****4242]&descripti" || !got.RequestTruncated || got.RequestBytes != len(body) {
		t.Errorf("request body %q truncated %v bytes %d", got.RequestBody, got.RequestTruncated, got.RequestBytes)
	}
	if got.ResponseBody != `{"client_secret":"[redacted]","id":"pi_1"}` || got.ResponseTruncated {
		t.Errorf("response body %q truncated %v", got.ResponseBody, got.ResponseTruncated)
	}
	if strings.Contains(got.Err, "zzz") {
		t.Errorf("err %q", got.Err)
	}
	if again := got.Redacted(50); !equalAttempts(again, got) {
		t.Errorf("not idempotent:\n%+v\n%+v", got, again)
	}
}

func equalAttempts(a, b Attempt) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
