package rie_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
	// BackfillBacklogAge is written after each scheduled backfill pass.
	"BackfillBacklogAge": {"reconciler"},
}

// productionConcurrency is the sizing template.yaml states beside the concurrency parameters.
var productionConcurrency = []string{"PaymentsApiReservedConcurrency=35", "RecoveryStepsReservedConcurrency=9",
	"ReconcilerReservedConcurrency=1", "ResolverMaximumConcurrency=5"}

// TestDeployRehearsal transforms template.yaml with aws-sam-translator and creates what it
// declares in moto and DynamoDB Local (rehearsal/rehearse.py), checking that every function's
// environment names a resource that exists and every IAM statement names a stack resource:
// once with the parameters' defaults (no reserved concurrency, as on a new account whose
// concurrency limit is low), once with the production sizing. A third run gives the
// parameters CloudFormation must refuse before it creates anything. The report is the test's
// log (go test -v, or make rehearse).
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
	// Each run is its own stage (no hyphen: the report reads function names after it): two
	// stacks side by side, as dev and prod may share an account.
	run := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	rehearse := func(t *testing.T, stage string, params ...string) (string, error) {
		args := []string{filepath.Join("rehearsal", "rehearse.py"), "--template", filepath.Join(root, "template.yaml"),
			"--moto", moto, "--dynamodb", ddb, "--emitters", string(emitters), "--stage", "r" + run + stage}
		for _, p := range params {
			args = append(args, "--param", p)
		}
		out, err := exec.CommandContext(t.Context(), "python3", args...).CombinedOutput()
		t.Logf("\n%s", out)
		return string(out), err
	}
	common := []string{"all exist", "AWS::DynamoDB::Table: 8/8", "AWS::SQS::Queue: 6/6",
		"AWS::StepFunctions::StateMachine: 1/1", "AWS::Scheduler::Schedule: 4/4", "AWS::Events::EventBus: 1/1",
		"alone may events:PutEvents on it", "POST /webhooks/{provider} [NONE]", "GET /ops/recoveries [Jwt]",
		"AWS::KMS::Key: 1/1", "AWS::SNS::Topic: 1/1", "AWS::CloudWatch::Dashboard: 1/1", "AWS::CloudWatch::Alarm: 34/34",
		"AWS::CodeDeploy::DeploymentGroup: 9/9", "SSM parameters: 4 SecureString",
		"key policy lets cloudwatch.amazonaws.com", "Twice DeadLetterOpen by deadletter-sink, operator-api, reconciler, recovery-steps",
		"Twice NewDifferences by reconciler", "Twice BackfillBacklogAge by reconciler", "AWS/Lambda by 9 functions", "use a function's live alias"}
	for _, c := range []struct {
		name   string
		stage  string
		params []string
		want   []string
	}{
		{"defaults: nothing reserved", "off", nil, []string{
			"reserved concurrency: none (no function sets ReservedConcurrentExecutions)",
			"paths to the provider without a ceiling (the account's limit only): payments-api, reconciler, recovery-steps; with one: payment-resolver 5 (SQS MaximumConcurrency)"}},
		{"production sizing", "on", productionConcurrency, []string{
			"reserved concurrency: payments-api 35, reconciler 1, recovery-steps 9; needs an account concurrency limit of at least 145 (100 + 45)",
			"every path to the provider has a ceiling: payment-resolver 5 (SQS MaximumConcurrency), payments-api 35 reserved, reconciler 1 reserved, recovery-steps 9 reserved; total 50 <= 50"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := rehearse(t, c.stage, c.params...)
			if err != nil {
				t.Fatalf("rehearsal failed: %v", err)
			}
			for _, want := range append(common, c.want...) {
				if !strings.Contains(out, want) {
					t.Errorf("report lacks %q", want)
				}
			}
		})
	}
	t.Run("refused: placeholders, prod without alarm email, too little SQS concurrency", func(t *testing.T) {
		out, err := rehearse(t, "refused", "Stage=prod", "JwtIssuer=https://example.auth0.com/", "JwtAudience=https://api.example.com",
			"ResolverMaximumConcurrency=1")
		if err == nil {
			t.Fatal("the rehearsal accepted them")
		}
		for _, want := range []string{"nothing created", "parameter JwtIssuer='https://example.auth0.com/'",
			"parameter JwtAudience='https://api.example.com'", "parameter ResolverMaximumConcurrency=1: outside 2..1000",
			"rule ProdAlarmsReachSomeone: A prod stack needs AlarmEmail"} {
			if !strings.Contains(out, want) {
				t.Errorf("report lacks %q", want)
			}
		}
	})
}
