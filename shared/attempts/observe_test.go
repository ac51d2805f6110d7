package attempts

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/webhooks/ingest"
)

// The provider's mode, as its answer or event names it, is kept on the attempt and in the
// summary a lookup returns.
func TestObserversKeepTheProvidersMode(t *testing.T) {
	yes, no := true, false
	for name, tc := range map[string]struct {
		body string
		want *bool
	}{
		"test-mode intent":    {`{"id":"pi_1","object":"payment_intent","livemode":false}`, &no},
		"live-mode intent":    {`{"id":"pi_1","object":"payment_intent","livemode":true}`, &yes},
		"card error's intent": {`{"error":{"type":"card_error","payment_intent":{"id":"pi_1","livemode":false}}}`, &no},
		"error without one":   {`{"error":{"type":"invalid_request_error","code":"resource_missing"}}`, nil},
		"not JSON":            {`upstream connect error`, nil},
	} {
		t.Run(name, func(t *testing.T) {
			var got []Attempt
			rec := func(_ context.Context, a Attempt) { got = append(got, a) }
			StripeObserver{Record: rec}.Observe(context.Background(), provider.Call{Method: http.MethodPost, Path: "/v1/payment_intents",
				StatusCode: 200, ResponseBody: []byte(tc.body), Started: time.Unix(1, 0)})
			IngestObserver{Record: rec}.Observe(context.Background(), ingest.Receipt{Provider: "stripe", EventID: "evt_1", Status: 200,
				Body: []byte(tc.body), Header: http.Header{}, ReceivedAt: time.Unix(1, 0)})
			for _, a := range got {
				s := a.Summary()
				if (s.Livemode == nil) != (tc.want == nil) || s.Livemode != nil && *s.Livemode != *tc.want {
					t.Errorf("%s: livemode %v, want %v", a.Direction, s.Livemode, tc.want)
				}
			}
		})
	}
}
