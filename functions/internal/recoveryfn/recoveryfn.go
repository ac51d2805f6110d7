// Package recoveryfn is the recovery wiring the functions share: the starter on Step
// Functions, the decline classifier, and the recovery steps' dead letters on the dead-letter
// table. It is small on purpose: webhook-worker imports it without the payment service's
// provider and queue clients, whose package initialisation would lengthen its cold start.
package recoveryfn

import (
	"context"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/declines"
	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
)

// EnvStateMachineARN names the recovery state machine (template.yaml sets it).
const EnvStateMachineARN = "TWICE_RECOVERY_STATE_MACHINE_ARN"

// Recoverer starts payment recovery on the state machine named by EnvStateMachineARN; a
// missing variable is noted in env.
func Recoverer(cfg aws.Config, env *lambdaenv.Env, log *slog.Logger) *recovery.Recoverer {
	return &recovery.Recoverer{
		Starter: &recovery.SFNStarter{Client: sfn.NewFromConfig(cfg), StateMachineArn: env.Get(EnvStateMachineARN)},
		Log:     log,
	}
}

// Classify is the decline_class the API and the worker store.
func Classify(d provider.Decline) string {
	return string(declines.Classify(declines.Decline{Code: d.Code, AdviceCode: d.AdviceCode,
		NetworkAdviceCode: d.NetworkAdviceCode, NetworkDeclineCode: d.NetworkDeclineCode,
		Network: declines.Network(d.Network)}).Class)
}

// Sink is the recovery.DeadLetterSink on a dead-letter table. Table.Open is idempotent on the
// record id derived from DeadLetter.Key, as recovery requires.
type Sink struct{ Table deadletter.Opener }

var _ recovery.DeadLetterSink = Sink{}

// Open implements recovery.DeadLetterSink.
func (s Sink) Open(ctx context.Context, d recovery.DeadLetter) error {
	attempts := make([]deadletter.Attempt, 0, len(d.Attempts))
	for _, a := range d.Attempts {
		msg := string(a.Outcome)
		if a.Class != "" {
			msg += " (" + string(a.Class) + ")"
		}
		attempts = append(attempts, deadletter.Attempt{At: a.At, Error: msg})
	}
	_, _, err := s.Table.Open(ctx, deadletter.FromRecovery(deadletter.RecoveryDeadLetter{
		Key: d.Key, Source: d.Source, PaymentID: d.PaymentID, Invoice: d.Invoice, Reason: d.Reason,
		Explanation: d.Explanation, SuggestedAction: d.SuggestedAction, Attempts: attempts, Payload: d.Payload,
	}))
	return err
}
