package header

import (
	"net/http"
	"testing"
)

func TestMask(t *testing.T) {
	h := http.Header{"stripe-signature": {"t=1,v1=ab"}, "Webhook-Signature": {"v1,x", "v1,y"}, "Content-Type": {"application/json"}}
	got := Mask(h)
	if got["stripe-signature"][0] != "[redacted]" || got.Get("Webhook-Signature") != "[redacted]" || len(got.Values("Webhook-Signature")) != 1 {
		t.Fatalf("not redacted: %v", got)
	}
	if got.Get("Content-Type") != "application/json" || h.Get("Webhook-Signature") != "v1,x" {
		t.Fatalf("redaction changed the wrong thing: %v / %v", got, h)
	}
	if Mask(nil) == nil {
		t.Fatal("Mask(nil) is nil")
	}
}

func TestSensitive(t *testing.T) {
	for name, want := range map[string]bool{
		"Authorization": true, "proxy-authorization": true, "COOKIE": true, "Set-Cookie": true,
		"stripe-signature": true, "Webhook-Signature": true, "x-api-key": true,
		"Content-Type": false, "Idempotency-Key": false, "Webhook-Id": false, "": false,
	} {
		if got := Sensitive(name); got != want {
			t.Errorf("Sensitive(%q) = %v, want %v", name, got, want)
		}
	}
}
