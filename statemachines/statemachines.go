// Package statemachines embeds the Amazon States Language definitions, so the local stack runs
// exactly the files template.yaml deploys.
package statemachines

import _ "embed"

// PaymentRecovery is payment-recovery.asl.json, with its ${Placeholders} unfilled.
//
//go:embed payment-recovery.asl.json
var PaymentRecovery []byte

// RecoveryStepsFunctionArn is the placeholder for the recovery-steps function.
const RecoveryStepsFunctionArn = "RecoveryStepsFunctionArn"
