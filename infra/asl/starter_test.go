package asl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/shared/recovery"
)

var _ recovery.Starter = (*asl.Starter)(nil)

// fakeRunner answers StartExecutionAt with a fixed error and records the clock start.
type fakeRunner struct {
	err error
	at  *time.Time
}

func (f fakeRunner) StartExecutionAt(_ context.Context, _, _ string, _ []byte, at time.Time) (asl.Execution, error) {
	if f.at != nil {
		*f.at = at
	}
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
			s := &asl.Starter{Runner: fakeRunner{err: tc.err}, StateMachine: "payment-recovery"}
			err := s.Start(context.Background(), "inv_1-r1", []byte(`{}`))
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("Start = %v, want %v", err, tc.want)
			}
		})
	}
}

// A Starter with ClockStart starts each execution's clock at the time it reads from the input.
func TestStarterClockStart(t *testing.T) {
	want := time.Date(2026, 12, 1, 9, 46, 0, 0, time.UTC)
	var got time.Time
	s := &asl.Starter{Runner: fakeRunner{at: &got}, StateMachine: "payment-recovery",
		ClockStart: func(input []byte) time.Time {
			if string(input) != `{"resume":true}` {
				return time.Time{}
			}
			return want
		}}
	if err := s.Start(context.Background(), "inv_1-r1", []byte(`{"resume":true}`)); err != nil || !got.Equal(want) {
		t.Fatalf("Start = %v, clock start %s, want %s", err, got, want)
	}
	if err := s.Start(context.Background(), "inv_2-r1", []byte(`{}`)); err != nil || !got.IsZero() {
		t.Fatalf("Start = %v, clock start %s, want the runner's", err, got)
	}
}
