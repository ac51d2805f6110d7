package declines

import "github.com/runtwice/twice/shared/provider"

// FromProvider takes the classifier's inputs from a provider's decline.
func FromProvider(d provider.Decline) Decline {
	return Decline{Code: d.Code, AdviceCode: d.AdviceCode, NetworkAdviceCode: d.NetworkAdviceCode,
		NetworkDeclineCode: d.NetworkDeclineCode, Network: Network(d.Network)}
}

// ClassOf is the decline_class the payments API and the webhook worker store for a provider's
// decline.
func ClassOf(d provider.Decline) string { return string(Classify(FromProvider(d)).Class) }
