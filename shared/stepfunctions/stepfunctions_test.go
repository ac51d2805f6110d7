package stepfunctions_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/stepfunctions"
)

type fakeSFN struct {
	err error
	in  *sfn.SendTaskSuccessInput
}

func (f *fakeSFN) SendTaskSuccess(_ context.Context, in *sfn.SendTaskSuccessInput, _ ...func(*sfn.Options)) (*sfn.SendTaskSuccessOutput, error) {
	f.in = in
	return &sfn.SendTaskSuccessOutput{}, f.err
}

// TestSignalerNamesAGoneTask: a token whose wait is over (timed out, gone, invalid) is
// ErrTaskGone, which the Steerer does not count as a failure; other errors stay errors.
func TestSignalerNamesAGoneTask(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		gone bool
		fail bool
	}{
		"sent":           {},
		"timed out":      {err: &sfntypes.TaskTimedOut{}, gone: true},
		"does not exist": {err: &sfntypes.TaskDoesNotExist{}, gone: true},
		"invalid token":  {err: &sfntypes.InvalidToken{}, gone: true},
		"throttled":      {err: errors.New("throttling"), fail: true},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeSFN{err: tc.err}
			err := (&stepfunctions.Signaler{Client: f}).SendTaskSuccess(context.Background(), "tok", []byte(`{"action":"stop"}`))
			if errors.Is(err, recovery.ErrTaskGone) != tc.gone || (err != nil) != (tc.gone || tc.fail) {
				t.Fatalf("err %v", err)
			}
			if *f.in.TaskToken != "tok" || *f.in.Output != `{"action":"stop"}` {
				t.Fatalf("sent %v %v", *f.in.TaskToken, *f.in.Output)
			}
		})
	}
}
