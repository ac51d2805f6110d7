package asl

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ExecutionStarter is the part of the runner Starter uses (*Runner).
type ExecutionStarter interface {
	StartExecutionAt(ctx context.Context, stateMachine, name string, input []byte, at time.Time) (Execution, error)
}

var _ ExecutionStarter = (*Runner)(nil)

// Starter starts executions of one state machine on the local runner the way
// stepfunctions.Starter does on Step Functions: it satisfies recovery.Starter, and a name that
// is taken (ErrExecutionAlreadyExists) is success, as on AWS. It lives here rather than in
// shared/recovery so that no Lambda binary links the interpreter.
type Starter struct {
	Runner       ExecutionStarter
	StateMachine string // the name the definition was registered under
	// ClockStart, when set, names the time an execution's own clock starts at from its input
	// (StartExecutionAt; zero: the runner's time), under the runner's WithTimeFactor.
	ClockStart func(input []byte) time.Time
}

// Start starts the execution; ErrExecutionAlreadyExists is success.
func (s *Starter) Start(ctx context.Context, executionName string, input []byte) error {
	var at time.Time
	if s.ClockStart != nil {
		at = s.ClockStart(input)
	}
	_, err := s.Runner.StartExecutionAt(ctx, s.StateMachine, executionName, input, at)
	if errors.Is(err, ErrExecutionAlreadyExists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("recovery: start %s: %w", executionName, err)
	}
	return nil
}
