package stripeprovider

import (
	"github.com/stripe/stripe-go/v82"
)

// APIVersion is the Stripe API version the adapter speaks: stripe-go sends it as
// Stripe-Version on every request, so the account's default version does not matter to the
// adapter's calls. A webhook endpoint should be created with the same version, since events are
// rendered in the endpoint's version and the webhook decoder reads these shapes.
const APIVersion = stripe.APIVersion

// Endpoint is one Stripe API call the adapter makes and what a restricted key needs for it.
type Endpoint struct {
	// Method and Path as sent, with {id} for an object id: "GET /v1/payment_intents/{id}".
	Method, Path string
	// Permissions a restricted key (rk_test_..., rk_live_...) needs, as the Dashboard names
	// the resource and the access: "PaymentIntents write", "Charges read". An expanded object
	// needs read access of its own.
	Permissions []string
}

// Endpoints are every call the adapter makes; TestEndpointsAreEveryCall (in
// infra/providersim/stripesim, against the simulator) holds the adapter to this list, and
// docs/deploy.md's restricted-key table is checked against it.
var Endpoints = []Endpoint{
	// A manual-capture create expands latest_charge (the authorization's capture_before).
	{Method: "POST", Path: "/v1/payment_intents", Permissions: []string{"PaymentIntents write", "Charges read"}},
	{Method: "POST", Path: "/v1/payment_intents/{id}/confirm", Permissions: []string{"PaymentIntents write"}},
	// Expands latest_charge: a refund is told from a success by the charge.
	{Method: "GET", Path: "/v1/payment_intents/{id}", Permissions: []string{"PaymentIntents read", "Charges read"}},
	{Method: "GET", Path: "/v1/payment_intents", Permissions: []string{"PaymentIntents read", "Charges read"}},
	{Method: "GET", Path: "/v1/payment_intents/search", Permissions: []string{"PaymentIntents read"}},
	{Method: "GET", Path: "/v1/payment_methods/{id}", Permissions: []string{"PaymentMethods read"}},
	{Method: "GET", Path: "/v1/events", Permissions: []string{"Events read"}},
	// Capture and cancel expand latest_charge (capture_before, the amount refunded).
	{Method: "POST", Path: "/v1/payment_intents/{id}/capture", Permissions: []string{"PaymentIntents write", "Charges read"}},
	{Method: "POST", Path: "/v1/payment_intents/{id}/cancel", Permissions: []string{"PaymentIntents write", "Charges read"}},
	{Method: "POST", Path: "/v1/refunds", Permissions: []string{"Refunds write"}},
	{Method: "GET", Path: "/v1/refunds", Permissions: []string{"Refunds read"}},
}
