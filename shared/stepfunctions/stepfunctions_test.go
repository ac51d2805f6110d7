package stepfunctions_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/runtwice/twice/shared/stepfunctions"
)

type fakeSFN struct {
	err error
	in  *sfn.StartExecutionInput
}

func (f *fakeSFN) StartExecution(_ context.Context, in *sfn.StartExecutionInput, _ ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	f.in = in
	return &sfn.StartExecutionOutput{}, f.err
}

// TestStarterTakesATakenNameAsStarted: ExecutionAlreadyExists (a second start of a recovery, a
// timer firing after a steered resume) is success; other errors stay errors.
func TestStarterTakesATakenNameAsStarted(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		fail bool
	}{
		"started":        {},
		"already exists": {err: &sfntypes.ExecutionAlreadyExists{}},
		"limit exceeded": {err: &sfntypes.ExecutionLimitExceeded{}, fail: true},
		"throttled":      {err: errors.New("throttling"), fail: true},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeSFN{err: tc.err}
			s := &stepfunctions.Starter{Client: f, StateMachineArn: "arn:aws:states:us-east-1:123456789012:stateMachine:r"}
			err := s.Start(context.Background(), "inv_1-r1-w4", []byte(`{"resume":"charge"}`))
			if (err != nil) != tc.fail {
				t.Fatalf("err %v, want failure %v", err, tc.fail)
			}
			if *f.in.Name != "inv_1-r1-w4" || *f.in.Input != `{"resume":"charge"}` {
				t.Fatalf("started %v %v", *f.in.Name, *f.in.Input)
			}
		})
	}
}
