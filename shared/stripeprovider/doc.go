// Package stripeprovider is the Stripe adapter of provider.Provider and provider.Operations,
// on stripe-go v82's PaymentIntents and Refunds APIs: create with confirm=true (off_session,
// capture_method=manual, return_url when asked for), retrieve, confirm, list with
// created[gte], created[lte], customer and auto-pagination (limit 100), capture
// (amount_to_capture), cancel (cancellation_reason), and refunds: create by payment_intent and
// list a payment's refunds.
//
// Stripe's PaymentIntent statuses map as provider.Status documents: requires_action and
// requires_confirmation (and a requires_payment_method before any attempt) are
// StatusRequiresAction with the client secret and next_action (type, redirect_to_url.url);
// requires_capture is StatusRequiresCapture with amount_capturable and the charge's
// payment_method_details.card.capture_before; a requires_payment_method with
// last_payment_error is StatusDeclined, a failed authentication
// (payment_intent_authentication_failure) included. An off-session charge that needs
// authentication is a 402 with authentication_required as code and decline_code: a
// *provider.DeclineError like any other decline. Refunds map pending (and requires_action),
// succeeded, failed (with failure_reason) and canceled.
//
// The adapter makes exactly one HTTP exchange per call: stripe-go's own network retries are off
// because package retry decides, with a budget. Every failure becomes a typed error of package
// provider, classified by package retry: a 402 card_error is a *provider.DeclineError carrying
// the declined PaymentIntent with decline_code, advice_code, network_advice_code and
// network_decline_code; a timeout, a reset or a 5xx on a write is a *provider.UnknownOutcomeError
// to repeat with the same Idempotency-Key.
//
// Every exchange is handed to an Observer as a Call (method, path, form body, Idempotency-Key,
// status, body, timing, error) for the attempt log; the Authorization header never is.
//
// BaseURL points the adapter at Stripe, the local simulator or stripe-mock. Wrap it with
// retry.Provider before handing it to the rest of the code.
package stripeprovider
