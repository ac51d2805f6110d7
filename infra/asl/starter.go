package asl

import (
	"context"
	"errors"
	"fmt"
)

// ExecutionStarter is the part of the runner Starter uses (*Runner).
type ExecutionStarter interface {
	StartExecution(ctx context.Context, stateMachine, name string, input []byte) (Execution, error)
}

var _ ExecutionStarter = (*Runner)(nil)

// Starter starts executions of one state machine on the local runner the way
// stepfunctions.Starter does on Step Functions: it satisfies recovery.Starter, and a name that
// is taken (ErrExecutionAlreadyExists) is success, as on AWS. It lives here rather than in
// shared/recovery so that no Lambda binary links the interpreter.
type Starter struct {
	Runner       ExecutionStarter
	StateMachine string // the name the definition was registered under
}

// Start starts the execution; ErrExecutionAlreadyExists is success.
func (s *Starter) Start(ctx context.Context, executionName string, input []byte) error {
	_, err := s.Runner.StartExecution(ctx, s.StateMachine, executionName, input)
	if errors.Is(err, ErrExecutionAlreadyExists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("recovery: start %s: %w", executionName, err)
	}
	return nil
}
