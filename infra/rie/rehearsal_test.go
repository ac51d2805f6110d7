package rie_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/infra/testenv"
)

// TestDeployRehearsal transforms template.yaml with aws-sam-translator and creates what it
// declares in moto and DynamoDB Local (rehearsal/rehearse.py), checking that every function's
// environment names a resource that exists and every IAM statement names a stack resource.
// The report is the test's log (go test -v, or make rehearse).
func TestDeployRehearsal(t *testing.T) {
	moto := testenv.MotoEndpoint(t)
	ddb := testenv.DynamoDBEndpoint(t)
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "python3", filepath.Join("rehearsal", "rehearse.py"),
		"--template", filepath.Join(root, "template.yaml"), "--moto", moto, "--dynamodb", ddb)
	out, err := cmd.CombinedOutput()
	t.Logf("\n%s", out)
	if err != nil {
		t.Fatalf("rehearsal failed: %v", err)
	}
	for _, want := range []string{"all exist", "AWS::DynamoDB::Table: 8/8", "AWS::SQS::Queue: 5/5",
		"AWS::StepFunctions::StateMachine: 1/1", "AWS::Scheduler::Schedule: 2/2", "POST /webhooks/{provider} [NONE]"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
