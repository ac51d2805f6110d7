package signature_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/runtwice/twice/shared/secrets"
	"github.com/runtwice/twice/shared/webhooks"
	"github.com/runtwice/twice/shared/webhooks/signature"
	"github.com/stripe/stripe-go/v82/webhook"
)

func Example() {
	now := time.Unix(1767225600, 0)
	v, err := signature.NewStripeVerifier(signature.StripeVerifier{
		Secrets: []string{"whsec_current", "whsec_next"},
		Now:     func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"id":"evt_1","object":"event","type":"payment_intent.succeeded","created":1767225600,
		"data":{"object":{"id":"pi_1","object":"payment_intent","status":"succeeded","amount":500,"currency":"eur"}}}`)
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: "whsec_next", Timestamp: now})

	h := http.Header{}
	h.Set(webhooks.StripeSignatureHeader, signed.Header)
	fmt.Println("fresh:", v.Verify(h, body))

	now = now.Add(10 * time.Minute)
	fmt.Println("replayed later:", errors.Is(v.Verify(h, body), webhooks.ErrTooOld))

	ev, _ := webhooks.Decode(webhooks.NewDelivery(webhooks.ProviderStripe, h, body, now))
	fmt.Println(ev.ID, ev.Type, ev.ObjectID, ev.PaymentIntent.Status, webhooks.ChangeKey(ev))
	// Output:
	// fresh: <nil>
	// replayed later: true
	// evt_1 payment_intent.succeeded pi_1 succeeded stripe/pi_1/payment_intent.succeeded/28275609605
}

// Rotating builds verifiers from a secrets source (secrets.Cached over ssmparam in AWS, secrets.Static or
// secrets.FromEnv locally) and follows rotations without a redeploy.
func ExampleRotating() {
	src := secrets.Static{"/twice/stripe-webhook-secret": {"whsec_new", "whsec_old"}}
	var _ signature.SecretSource = (*secrets.Cached)(nil)
	vs, err := signature.NewRotating(signature.Rotating{Source: src, Names: map[string]string{webhooks.ProviderStripe: "/twice/stripe-webhook-secret"}})
	if err != nil {
		panic(err)
	}
	_, err = vs.Verifier(context.Background(), "paypal")
	fmt.Println(errors.Is(err, webhooks.ErrUnknownProvider))

	v, _ := vs.Verifier(context.Background(), webhooks.ProviderStripe)
	body := []byte(`{"id":"evt_1"}`)
	h := http.Header{}
	h.Set(webhooks.StripeSignatureHeader, webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: "whsec_old"}).Header)
	fmt.Println(v.Verify(h, body))
	// Output:
	// true
	// <nil>
}
