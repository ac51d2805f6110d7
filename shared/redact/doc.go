// Package redact is the redaction engine: what never reaches a stored record or a log line,
// whoever writes it. The attempt log (shared/attempts) redacts every attempt with it before it
// stores one, the webhook ingest masks headers with its header package, and the local stack's
// logger and those of the functions that call the provider or take requests go through
// LogHandler.
//
//   - Headers (Header, HeaderMap): Authorization, Proxy-Authorization, Cookie, Set-Cookie,
//     Stripe-Signature, Webhook-Signature and X-Api-Key become "[redacted]" ("Bearer
//     [redacted]"); header.Sensitive is the list, header.Mask masks them and nothing else.
//   - Bodies (Body): fields with a sensitive name (sensitiveName: card_cvc, security_code,
//     cvv, pin, password, client_secret, api_key, anything ending in token or signature; the
//     list and the patterns are documented there, SensitiveFieldNames has examples), at any
//     depth of a JSON body or as the last bracketed segment of a form key (card[number],
//     payment_method_data[card][security_code]), lose their values; a card number field keeps
//     its last four digits: "[card ****4242]". Expiry month and year are kept. A truncated or
//     invalid JSON body is redacted by pattern.
//   - Everywhere (Text, which Header, Body and Path apply to every value): Stripe secret and
//     restricted keys, webhook secrets and client secrets keep only their prefix, and
//     Luhn-valid card numbers of 13 to 19 digits (grouped by single spaces, dashes, dots or
//     slashes, or not) keep their last four. Digits inside an id of the form Stripe and twice
//     issue (lower-case letters and "_", then letters, digits and "_": evt_..., pi_...,
//     pay_..., twice_pay_...) are not a card number and stay.
//
// Redaction is idempotent, and runs before any cap: Cap cuts on a UTF-8 boundary and never
// inside a digit group, so a cut never leaves half a secret or makes a card number of a longer
// one. CapLog is Text and a cut at MaxLogField bytes, marked with the size cut.
//
// LogHandler wraps a slog.Handler so that every log line, from any package, is redacted and
// every string in it capped (CapLog):
//
//	log := slog.New(redact.LogHandler(logs.Logger().Handler()))
//
// The fuzz targets hold the engine to an independent statement of what must not survive
// (package redacttest), which the attempt log's FuzzRecordNoLeak uses too.
package redact
