package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runtwice/twice/infra/testenv"
)

// A one-round interleaved run of the Go sides on DynamoDB Local: every side answers every
// request as expected (new, then replay), and the table carries each round's ratios.
func TestInterleavedSmoke(t *testing.T) {
	t.Setenv("TWICE_TEST_DYNAMODB_ENDPOINT", testenv.DynamoDBEndpoint(t))
	out := t.TempDir()
	var buf bytes.Buffer
	spec := interleaveSpec{Rounds: 2, Requests: 6, Concurrency: []int{1, 3}, CachePerSide: 100}
	if err := interleaved(spec, "../..", out, &buf); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "interleaved.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep ilReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	// 5 Go sides x 2 phases x 2 concurrencies x 2 rounds, in round order.
	if len(rep.Phases) != 40 || rep.Phases[0].Round != 1 || rep.Phases[39].Round != 2 {
		t.Fatalf("%d phases", len(rep.Phases))
	}
	for _, p := range rep.Phases {
		if p.Errors != 0 || p.Requests != 6 || p.PerSec <= 0 {
			t.Errorf("%+v", p)
		}
	}
	for _, want := range []string{"| 2 | 3 | replay |", "twice/single : bare/single", "twice/tx : bare/tx"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestInterleavedRatios(t *testing.T) {
	rep := ilReport{Spec: interleaveSpec{Rounds: 1, Concurrency: []int{16}}, Phases: []ilPhase{
		{Round: 1, Concurrency: 16, Side: "twice/single", Kind: kindReplay, PerSec: 900, CPUPerReqUS: 110},
		{Round: 1, Concurrency: 16, Side: "bare/single", Kind: kindReplay, PerSec: 1000, CPUPerReqUS: 100},
		{Round: 1, Concurrency: 16, Side: "powertools", Kind: kindReplay, PerSec: 450},
	}}
	var buf bytes.Buffer
	writeInterleaved(&buf, rep)
	for _, want := range []string{"| 0.90x | - | 2.00x |", "| 1.10x |"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("lacks %q:\n%s", want, buf.String())
		}
	}
}
