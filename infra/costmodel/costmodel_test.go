package costmodel

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestPrice(t *testing.T) {
	p := Prices{DynamoWRU: 1, DynamoRRU: 2, LambdaRequest: 3, LambdaGBs: 1e-6, LambdaGBsX86: 2e-6, SQSRequest: 4, SFNTransition: 5,
		HTTPAPI: 6, Events: 7}
	f := Flow{Invocations: map[string]int{"a": 1, "b": 1}, HTTP: 1, WRU: 10, RRU: 1, SQS: 3, Transitions: 2, Events: 1, Stripe: 1}
	l := Lambda{MemoryMB: 1024, Arm64: true, OwnMS: 100, ProviderMS: 800}
	// 2 invocations at 100 ms plus one provider wait of 800 ms, at 1 GB: 1 GB-s.
	if got := l.GBSeconds(f); !near(got, 1) {
		t.Fatalf("GB-s = %v, want 1", got)
	}
	c := Price(f, p, l)
	want := Cost{DynamoDB: 10 + 2, Lambda: 2*3 + 1e6*1e-6, SQS: 12, StepFunctions: 2 * 1000 * 5, HTTPAPI: 6, EventBridge: 7}
	if c != want {
		t.Fatalf("Price = %+v, want %+v", c, want)
	}
	l.Arm64 = false
	if c := Price(f, p, l); !near(c.Lambda, 6+2) {
		t.Fatalf("x86_64 Lambda = %v, want 8", c.Lambda)
	}
}

func flows() []Flow {
	one := func(name string, wru float64, units int) Flow {
		return Flow{Name: name, WRU: wru, Units: units, Invocations: map[string]int{"f": 1}}
	}
	return []Flow{
		one(FlowBackfillEmpty, 5, 0), one(FlowNew+" (succeeded)", 20, 0), one(FlowReplay, 2, 0),
		one(FlowWebhooksPaid+" (2 events)", 10, 2), one(FlowDecline, 60, 0), one(FlowWebhooksDecline+" (3 events)", 30, 3),
		one(FlowRefund, 8, 0), one(FlowWebhooksRefund+" (2 events)", 12, 2), one(FlowReconEmpty, 4, 0), one(FlowRecon+" (2 payments)", 10, 2), one(FlowBackfill+" (4 events)", 13, 4),
	}
}

func TestPerPayment(t *testing.T) {
	mix := Mix{DeclineRate: 0.1, ReplayRate: 0.5, RefundRate: 0.2, ReconPasses: 10, BackfillListings: 2}
	lines, err := PerPayment(flows(), mix, 100, Prices{DynamoWRU: 1}, Lambda{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, ln := range lines {
		got[strings.SplitN(ln.Flow, " (", 2)[0]] = ln.Cost.DynamoDB
	}
	events := 0.9*2 + 0.1*3 + 0.2*2
	want := map[string]float64{
		FlowNew: 0.9 * 20, FlowWebhooksPaid: 0.9 * 10, FlowDecline: 0.1 * 60, FlowWebhooksDecline: 0.1 * 30, FlowReplay: 0.5 * 2,
		FlowRefund: 0.2 * 8, FlowWebhooksRefund: 0.2 * 12,
		// A payment's part of a pass: the page's (10 - 4) shared by a page's 100 objects, 10
		// passes.
		FlowRecon: 10 * (10 - 4) / 100.0,
		// An event's part: (13 - 5) shared by 100, 2 listings per event.
		FlowBackfill: events * 2 * (13 - 5) / 100.0,
	}
	for k, w := range want {
		if !near(got[k], w) {
			t.Errorf("%s: %v, want %v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("lines %v, want %v", got, want)
	}
}

func TestPerPaymentNeedsEveryFlow(t *testing.T) {
	fs := flows()
	_, err := PerPayment(fs[1:], DefaultMix, 100, ListPrices, Lambda{})
	if err == nil || !strings.Contains(err.Error(), FlowBackfillEmpty) {
		t.Fatalf("without the empty backfill pass: %v", err)
	}
}

func TestRender(t *testing.T) {
	var b strings.Builder
	if err := Render(&b, flows(), DefaultMix, 100, ListPrices, Lambda{MemoryMB: 256, Arm64: true, TemplateNote: "t"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| new payment (succeeded) | f 1 |", "per GB-s (arm64)", "| **total** |", "0.0000133334"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}

func TestTemplateLambdaNoMemorySize(t *testing.T) {
	if _, _, err := TemplateLambda(strings.NewReader("Resources: {}\n")); !errors.Is(err, ErrNoMemorySize) {
		t.Fatalf("err = %v", err)
	}
}
func TestTemplateLambda(t *testing.T) {
	cases := []struct {
		name    string
		yaml    string
		want    float64
		arm     bool
		wantErr bool
	}{
		{"globals, arm64", "Globals:\n  Function:\n    Architectures: [arm64]\n    MemorySize: 256\nResources:\n  F:\n    Properties:\n      MemorySize: 512\n", 256, true, false},
		{"x86 by default", "Globals:\n  Function:\n    MemorySize: 1024\n", 1024, false, false},
		{"none", "Resources:\n  T:\n    Type: AWS::DynamoDB::Table\n", 0, false, true},
		{"not a number", "    MemorySize: !Ref Mem\n", 0, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, arm, err := TemplateLambda(strings.NewReader(tc.yaml))
			if (err != nil) != tc.wantErr || got != tc.want || arm != tc.arm {
				t.Fatalf("got %v, %v, %v; want %v, %v, error %v", got, arm, err, tc.want, tc.arm, tc.wantErr)
			}
		})
	}
}
