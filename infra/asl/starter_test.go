package asl_test

import (
	"context"
	"errors"
	"testing"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/recovery"
)

var _ recovery.Starter = (*asl.Starter)(nil)

// fakeRunner answers StartExecution with a fixed error.
type fakeRunner struct{ err error }

func (f fakeRunner) StartExecution(context.Context, string, string, []byte) (asl.Execution, error) {
	return asl.Execution{}, f.err
}

func TestStarterErrors(t *testing.T) {
	other := errors.New("disk full")
	tests := map[string]struct {
		err  error
		want error
	}{
		"started":        {nil, nil},
		"already exists": {asl.ErrExecutionAlreadyExists, nil},
		"other failure":  {other, other},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &asl.Starter{Runner: fakeRunner{tc.err}, StateMachine: "payment-recovery"}
			err := s.Start(context.Background(), "inv_1-r1", []byte(`{}`))
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("Start = %v, want %v", err, tc.want)
			}
		})
	}
}
