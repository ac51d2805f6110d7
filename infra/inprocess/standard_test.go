package inprocess

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestStandardWebhooksDelivery sends a Standard Webhooks delivery signed by the reference
// library, and a tampered one: the first is accepted and its delivery can be looked up by event
// id; the second is refused and recorded as a rejected signature.
func TestStandardWebhooksDelivery(t *testing.T) {
	s := newStack(t, Config{})
	wh, err := standardwebhooks.NewWebhook(s.Config().StandardWebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	send := func(id, body string, tamper bool) int {
		now := s.clock.Now() // the stack's time, which its verifier checks the timestamp against
		sig, err := wh.Sign(id, now, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if tamper {
			body = strings.Replace(body, "100", "900", 1)
		}
		req, _ := http.NewRequest("POST", s.APIURL()+"/webhooks/standard", strings.NewReader(body))
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	body := `{"type":"invoice.paid","timestamp":"2026-11-29T10:00:00Z","data":{"id":"inv_1","amount":100}}`
	if got := send("msg_ok", body, false); got != http.StatusOK {
		t.Fatalf("signed delivery: %d", got)
	}
	if got := send("msg_bad", body, true); got != http.StatusBadRequest {
		t.Fatalf("tampered delivery: %d", got)
	}
	eventually(t, 10*time.Second, "the delivery is in the attempt log", func() bool {
		return strings.Contains(ops(t, s, "GET", "/ops/attempts?event_id=msg_ok", "").body, `"status":200`)
	})
	// A refused delivery is not filed under the id it claims: the lookup counts it, and the
	// day's refused list holds it, its signature redacted.
	a := ops(t, s, "GET", "/ops/attempts?event_id=msg_bad", "")
	if !strings.Contains(a.body, `"attempts":[]`) || !strings.Contains(a.body, `"unverified_claims":1`) {
		t.Fatalf("the refused delivery's claimed id: %s", a.body)
	}
	r := ops(t, s, "GET", "/ops/refused?day="+s.clock.Now().UTC().Format("2006-01-02"), "")
	if !strings.Contains(r.body, `"rejected_signature"`) || !strings.Contains(r.body, "msg_bad") || strings.Contains(r.body, "v1,") {
		t.Fatalf("refused delivery not quarantined, or its signature kept: %s", r.body)
	}
}
