package rie_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/infra/testenv"
)

// metricEmitters names, for every metric of the Twice namespace an alarm watches, the
// functions that write it (EMF, shared/metrics). TestDeployRehearsal fails on an alarm whose
// Twice metric is not listed; TestFunctionsUnderEmulator checks that each listed function
// really printed the metric under the emulator.
var metricEmitters = map[string][]string{
	"DeadLetterOpen": {"deadletter-sink", "operator-api", "recovery-steps", "reconciler"},
	"NewDifferences": {"reconciler"},
}

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
	emitters, err := json.Marshal(metricEmitters)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "python3", filepath.Join("rehearsal", "rehearse.py"),
		"--template", filepath.Join(root, "template.yaml"), "--moto", moto, "--dynamodb", ddb, "--emitters", string(emitters))
	out, err := cmd.CombinedOutput()
	t.Logf("\n%s", out)
	if err != nil {
		t.Fatalf("rehearsal failed: %v", err)
	}
	for _, want := range []string{"all exist", "AWS::DynamoDB::Table: 8/8", "AWS::SQS::Queue: 6/6",
		"AWS::StepFunctions::StateMachine: 1/1", "AWS::Scheduler::Schedule: 3/3", "AWS::Events::EventBus: 1/1",
		"alone may events:PutEvents on it", "POST /webhooks/{provider} [NONE]",
		"AWS::KMS::Key: 1/1", "AWS::SNS::Topic: 1/1", "AWS::CloudWatch::Dashboard: 1/1", "AWS::CloudWatch::Alarm: 32/32",
		"AWS::CodeDeploy::DeploymentGroup: 9/9",
		"key policy lets cloudwatch.amazonaws.com", "Twice DeadLetterOpen by deadletter-sink, operator-api, reconciler, recovery-steps",
		"Twice NewDifferences by reconciler", "AWS/Lambda by 9 functions", "use a function's live alias",
		"every path to the provider has a ceiling: payment-resolver 5 (SQS MaximumConcurrency), payments-api 35 reserved, reconciler 1 reserved, recovery-steps 9 reserved; total 50 <= 50"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
