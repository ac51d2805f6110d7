// Package secrets serves named secrets (webhook signing secrets, API keys) to the code that
// needs them: Cached in front of a store's Getter in AWS (ssmparam.Client reads SSM Parameter
// Store) and Static or FromEnv locally. A source has one method:
//
//	Secrets(ctx, name) ([]string, error)
//
// It returns a list because several secrets are active during a rotation: one parameter holds
// them separated by commas or newlines ("whsec_new,whsec_old"), newest first by convention;
// Split is the one reader of that format. Rotate by writing "new,old", waiting one refresh
// interval plus the provider's retry window, then writing "new".
//
// Cached reads a secret once, caches it for Refresh on an injected clock, and keeps serving the
// last good value if a refresh fails. The package links no AWS client, so a function that needs
// one secret pays for no SDK service package at cold start. Secret values never appear in
// a log line or an error; errors name the secret and wrap ErrNotFound, ErrEmpty or ErrUnavailable.
package secrets
