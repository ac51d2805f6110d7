// Package stepfunctions is the AWS Step Functions side of recovery: it starts the recovery
// state machine's executions, the first of a recovery and each one that resumes it after a
// wait. The recovery package declares what it needs (recovery.Starter) and links no Step
// Functions client, so a function that only plans or
// records recoveries does not carry the client's package initialisation in its INIT; the local
// stack satisfies the same interface with its interpreter (infra/asl).
package stepfunctions

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/runtwice/twice/shared/recovery"
)

var _ recovery.Starter = (*Starter)(nil)

// StartExecutionAPI is the part of the Step Functions client Starter uses (*sfn.Client).
type StartExecutionAPI interface {
	StartExecution(ctx context.Context, in *sfn.StartExecutionInput, opts ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
}

// Starter starts recoveries on AWS Step Functions (recovery.Starter).
type Starter struct {
	Client          StartExecutionAPI
	StateMachineArn string
}

// Start calls StartExecution. ExecutionAlreadyExists (the name is taken by an execution
// with other input, or by one that has closed; Standard workflows keep names for 90 days)
// means this recovery already started, so it is success. For a running execution with the
// same input AWS answers with that execution, also success.
func (s *Starter) Start(ctx context.Context, executionName string, input []byte) error {
	_, err := s.Client.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(s.StateMachineArn),
		Name:            aws.String(executionName),
		Input:           aws.String(string(input)),
	})
	var exists *sfntypes.ExecutionAlreadyExists
	if errors.As(err, &exists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stepfunctions: start %s: %w", executionName, err)
	}
	return nil
}
