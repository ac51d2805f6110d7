package recovery_test

// The fixtures the step tests share; the provider and dead-letter doubles are in
// recoverytest, which the tests that run the steps under the real definition on the local
// state-machine runner (infra/asl's recovery_machine_test.go, recovery_card_caps_test.go)
// use too.

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/runtwice/twice/statemachines"
)

const functionArn = "arn:aws:lambda:us-east-1:123456789012:function:recovery-steps"

// t0 is a Sunday morning: the first payday after it is Tuesday 1 December.
var t0 = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

// definition is the embedded recovery definition that template.yaml deploys, with its one
// placeholder filled as DefinitionSubstitutions fills it.
func definition(testing.TB) []byte {
	return bytes.ReplaceAll(statemachines.PaymentRecovery, []byte("${"+statemachines.RecoveryStepsFunctionArn+"}"), []byte(functionArn))
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// errorName is the name Retry and Catch match for an error a step returns: its ErrorName()
// (recovery.LambdaHandler reports it as Lambda's errorType), or "" for an unnamed error.
func errorName(err error) string {
	var named interface{ ErrorName() string }
	if errors.As(err, &named) {
		return named.ErrorName()
	}
	return ""
}
