// Package providertest is the one contract suite every provider.Provider implementation must
// pass (Run), and an in-memory Fake that passes it, for tests that need a provider without a
// server. The suite drives outcomes with Stripe's test payment methods (TestCardDeclines): the
// stripe-go adapter runs it against the provider simulator on a loopback server, the Fake
// against itself. A new provider adapter is done when Run passes against its test server.
package providertest
