// Package stripeprovider is the Stripe adapter of provider.Provider, on stripe-go v82's
// PaymentIntents API: create with confirm=true, retrieve, confirm, and list with created[gte],
// created[lte], customer and auto-pagination (limit 100).
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
