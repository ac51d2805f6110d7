// Package recoveryfn is the recovery wiring the functions share: the starter on Step
// Functions and queue names from URLs. It is small on purpose: webhook-worker imports it
// without the payment service's provider and queue clients, whose package initialisation would
// lengthen its cold start. What opens dead-letter records and carries out their retries lives
// with each record's producer (recovery, recon, the webhook worker) and in shared/deadletter.
package recoveryfn

import (
	"time"

	"github.com/runtwice/twice/shared/store"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/stepfunctions"
)

// EnvStateMachineARN names the recovery state machine (template.yaml sets it).
const EnvStateMachineARN = "TWICE_RECOVERY_STATE_MACHINE_ARN"

// Recoverer starts payment recovery on the state machine named by EnvStateMachineARN; a
// missing variable is noted in env.
func Recoverer(cfg aws.Config, env *lambdaenv.Env, log *slog.Logger) *recovery.Recoverer {
	return &recovery.Recoverer{
		Starter: &stepfunctions.Starter{Client: sfn.NewFromConfig(cfg), StateMachineArn: env.Get(EnvStateMachineARN)},
		Log:     log,
	}
}

// Steerer is the outbox relay's Steerer: it starts the executions that resume parked
// recoveries on the state machine named by EnvStateMachineARN, when their timers fire or a
// steering signal brings them forward.
func Steerer(cfg aws.Config, env *lambdaenv.Env, st store.Store) *recovery.Steerer {
	return &recovery.Steerer{Store: st, Now: time.Now,
		Starter: &stepfunctions.Starter{Client: sfn.NewFromConfig(cfg), StateMachineArn: env.Get(EnvStateMachineARN)}}
}

// QueueName is the name in an SQS queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME).
func QueueName(url string) string { return url[strings.LastIndexByte(url, '/')+1:] }
