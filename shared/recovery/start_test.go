package recovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/recovery/recoverytest"
	"github.com/runtwice/twice/shared/stepfunctions"
)

// validExecutionName applies Step Functions' rules for execution names.
func validExecutionName(name string) bool {
	if n := utf8.RuneCountInString(name); n < 1 || n > 80 {
		return false
	}
	for _, c := range name {
		if c <= 0x20 || (c >= 0x7f && c <= 0x9f) || strings.ContainsRune("<>{}[]?*\"#%\\^|~`$&,;:/", c) {
			return false
		}
	}
	return true
}

func TestExecutionName(t *testing.T) {
	long := strings.Repeat("x", 77) // with "-r1": 80, the limit
	tests := map[string]struct {
		key   string
		round int
		want  string // "" when the name is hashed: checked for its shape instead
	}{
		"invoice":              {key: "in_1NqX2Y", round: 1, want: "in_1NqX2Y-r1"},
		"second round":         {key: "in_1NqX2Y", round: 2, want: "in_1NqX2Y-r2"},
		"round below one":      {key: "inv_7", round: 0, want: "inv_7-r1"},
		"payment id":           {key: "pay_0123456789abcdef01234567", round: 1, want: "pay_0123456789abcdef01234567-r1"},
		"longest kept as is":   {key: long, round: 1, want: long + "-r1"},
		"one too long":         {key: long + "y", round: 1},
		"slash":                {key: "2026/11/inv-9", round: 1},
		"space and colon":      {key: "INV 9: Acme", round: 3},
		"unicode":              {key: "facture-é-12", round: 1},
		"empty":                {key: "", round: 1},
		"only forbidden chars": {key: "<>{}", round: 1},
	}
	seen := map[string]string{}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := recovery.ExecutionName(tc.key, tc.round)
			if !validExecutionName(got) {
				t.Fatalf("ExecutionName(%q) = %q breaks the name rules", tc.key, got)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("ExecutionName(%q, %d) = %q, want %q", tc.key, tc.round, got, tc.want)
			}
			if got != recovery.ExecutionName(tc.key, tc.round) {
				t.Error("not deterministic")
			}
		})
		got := recovery.ExecutionName(tc.key, tc.round)
		if other, dup := seen[got]; dup {
			t.Errorf("%q and %q share the name %q", other, tc.key, got)
		}
		seen[got] = tc.key
	}
}

func FuzzExecutionName(f *testing.F) {
	for _, s := range []string{"inv_1", "", "a/b", "INV 9: Acme", strings.Repeat("é", 90), "\x00\x7f", "in_1NqX2Y"} {
		f.Add(s, 1)
	}
	f.Fuzz(func(t *testing.T, key string, round int) {
		if round < 0 || round > 1_000_000 {
			t.Skip()
		}
		a := recovery.ExecutionName(key, round)
		if !validExecutionName(a) {
			t.Fatalf("ExecutionName(%q, %d) = %q breaks the name rules", key, round, a)
		}
		if b := recovery.ExecutionName(key+"x", round); a == b {
			t.Fatalf("%q and %q share the name %q", key, key+"x", a)
		}
	})
}

// FuzzHandle: any input gets a result or a named error, never a panic or an unnamed error.
func FuzzHandle(f *testing.F) {
	for _, s := range []string{
		`{"step":"plan","state":{"payment_id":"pay_1","invoice":"inv_1","round":1}}`,
		`{"step":"charge","state":{"payment_id":"pay_1","round":1,"attempts":[{"at":"2026-11-29T08:00:00Z","outcome":"declined"}],"plan":{"retry":true,"attempt":2,"at":"2026-11-29T08:00:00Z"}}}`,
		`{"step":"dead_letter","state":{"payment_id":"pay_1","round":1,"error":{"Error":"Recovery.Rejected","Cause":"x"}}}`,
		`{"step":"plan","state":{"payment_id":"pay_1","round":1,"attempts":[]}}`,
		`{"step":7}`, `null`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	clock := clock.NewFake(t0)
	prov := recoverytest.NewProvider(clock.Now)
	prov.SetScript("pm", recoverytest.Script{Code: "processing_error", Declines: 1})
	steps, st, _ := newSteps(f, prov, clock)
	putPayment(f, st, payments.Payment{ID: "pay_1", Status: provider.StatusDeclined, ProviderPaymentID: "pi_1",
		PaymentMethod: "pm", CreatedAt: t0, UpdatedAt: t0, Version: payments.VersionAt(t0, provider.StatusDeclined)})
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := steps.Handle(context.Background(), in)
		if err != nil {
			switch errorName(err) {
			case recovery.ErrNameInvalid, recovery.ErrNameTransient, recovery.ErrNameRejected:
			default:
				t.Fatalf("unnamed error %T %v", err, err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid output %q", out)
		}
	})
}

// recordingStarter records every start and answers like a state machine service: a name
// taken before is already started.
type recordingStarter struct {
	names  []string
	inputs []string
}

func (r *recordingStarter) Start(_ context.Context, name string, input []byte) error {
	r.names = append(r.names, name)
	r.inputs = append(r.inputs, string(input))
	return nil
}

func TestRecovererStartsDeclinedPaymentsOnly(t *testing.T) {
	tests := map[string]struct {
		p        payments.Payment
		wantName string
		wantIn   string
	}{
		"declined with invoice": {p: payments.Payment{ID: "pay_1", Invoice: "inv_1", Status: provider.StatusDeclined},
			wantName: "inv_1-r1", wantIn: `{"payment_id":"pay_1","invoice":"inv_1","round":1,"attempts":[]}`},
		"declined without invoice": {p: payments.Payment{ID: "pay_2", Status: provider.StatusDeclined},
			wantName: "pay_2-r1", wantIn: `{"payment_id":"pay_2","invoice":"","round":1,"attempts":[]}`},
		"hard declines start too": {p: payments.Payment{ID: "pay_3", Status: provider.StatusDeclined, DeclineClass: "hard"},
			wantName: "pay_3-r1", wantIn: `{"payment_id":"pay_3","invoice":"","round":1,"attempts":[]}`},
		"succeeded":  {p: payments.Payment{ID: "pay_4", Status: provider.StatusSucceeded}},
		"pending":    {p: payments.Payment{ID: "pay_5", Status: provider.StatusPending}},
		"processing": {p: payments.Payment{ID: "pay_6", Status: provider.StatusProcessing}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rs := &recordingStarter{}
			r := &recovery.Recoverer{Starter: rs, Log: discard()}
			if err := r.Declined(context.Background(), tc.p); err != nil {
				t.Fatal(err)
			}
			if tc.wantName == "" {
				if len(rs.names) != 0 {
					t.Fatalf("started %v for a %s payment", rs.names, tc.p.Status)
				}
				return
			}
			if len(rs.names) != 1 || rs.names[0] != tc.wantName || rs.inputs[0] != tc.wantIn {
				t.Fatalf("started %v with %v, want %s with %s", rs.names, rs.inputs, tc.wantName, tc.wantIn)
			}
		})
	}
}

// TestStepFunctionsStarterOnMoto starts the same recovery twice against moto's Step Functions API:
// the second start is ExecutionAlreadyExists (or the running execution), and both succeed.
func TestStepFunctionsStarterOnMoto(t *testing.T) {
	ctx := context.Background()
	client, created := motoMachine(t)
	starter := &stepfunctions.Starter{Client: client, StateMachineArn: aws.ToString(created.StateMachineArn)}
	r := &recovery.Recoverer{Starter: starter, Log: discard()}
	p := payments.Payment{ID: "pay_moto", Invoice: "inv_moto", Status: provider.StatusDeclined}
	for i := range 2 {
		if err := r.Declined(ctx, p); err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
	}
	// The same name with other input is ExecutionAlreadyExists: still already started.
	other := `{"payment_id":"pay_other","invoice":"inv_moto","round":1}`
	_, raw := client.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: created.StateMachineArn,
		Name: aws.String("inv_moto-r1"), Input: aws.String(other)})
	var exists *sfntypes.ExecutionAlreadyExists
	if !errors.As(raw, &exists) {
		t.Fatalf("the API answered a taken name with %v, want ExecutionAlreadyExists", raw)
	}
	if err := starter.Start(ctx, recovery.ExecutionName("inv_moto", 1), []byte(other)); err != nil {
		t.Fatalf("start with other input: %v", err)
	}
	list, err := client.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: created.StateMachineArn})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Executions) != 1 || aws.ToString(list.Executions[0].Name) != "inv_moto-r1" {
		t.Fatalf("executions %+v, want one named inv_moto-r1", list.Executions)
	}
	// A name breaking the rules is a real error, not "already started".
	if err := starter.Start(ctx, "bad name", []byte(`{}`)); err == nil {
		t.Error("a name with a space started")
	}
}
