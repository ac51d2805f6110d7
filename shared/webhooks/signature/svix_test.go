package signature

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/runtwice/twice/shared/webhooks"
)

// Deliveries signed by svix's Go library, a second implementation of the Standard Webhooks
// scheme (the first is the reference library's signer in verify_test.go), verify here.
func TestStandardVerifierAcceptsSvixSigned(t *testing.T) {
	body := mustRead(t, "standard.json")
	v := mustStd(t, stdSecret, stdSecret2)
	tests := map[string]struct {
		secret string
		at     time.Time
		body   []byte
		want   error
	}{
		"current secret": {secret: stdSecret, at: testNow, body: body},
		"rotated secret": {secret: stdSecret2, at: testNow, body: body},
		"body changed":   {secret: stdSecret, at: testNow, body: append([]byte{' '}, body...), want: webhooks.ErrNoValidSignature},
		"stale":          {secret: stdSecret, at: testNow.Add(-10 * time.Minute), body: body, want: webhooks.ErrTooOld},
		"future":         {secret: stdSecret, at: testNow.Add(10 * time.Minute), body: body, want: webhooks.ErrTooNew},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			wh, err := svix.NewWebhook(tc.secret)
			if err != nil {
				t.Fatal(err)
			}
			sig, err := wh.Sign("msg_svix", tc.at, body)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			h.Set(webhooks.StandardIDHeader, "msg_svix")
			h.Set(webhooks.StandardTimestampHeader, fmt.Sprint(tc.at.Unix()))
			h.Set(webhooks.StandardSignatureHeader, sig)
			if err := v.Verify(h, tc.body); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}
