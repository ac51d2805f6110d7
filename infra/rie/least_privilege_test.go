package rie_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/runtwice/twice/infra/rie"
)

// unexercised lists what template.yaml grants that the events/ samples do not reach under the
// emulator, each with the code path that needs it. Everything else a function is granted it
// must have called, and everything it called it must be granted.
var unexercised = map[string]map[rie.Call]string{
	"payments-api": {
		{Action: "dynamodb:DeleteItem", Resource: "IdempotencyTable"}: "a retryable failure releases the key (idempotency.Keeper: a conditional DeleteItem, or in a transaction with its effects)",
	},
	"payment-resolver": {
		// DeleteItem on IdempotencyTable is exercised: a message that fails releases its record
		// (idemlambda.SQS, one conditional DeleteItem).
		{Action: "dynamodb:GetItem", Resource: "DeadLettersTable"}:        "a job an operator retried checks its retry id (deadletter.Retries)",
		{Action: "dynamodb:PutItem", Resource: "DeadLettersTable"}:        "a job an operator retried resolves or reopens its record",
		{Action: "sqs:ChangeMessageVisibility", Resource: "ResolveQueue"}: "a job whose key another caller holds comes back when the key can be taken (sqsbatch.RetryAfter)",
	},
	"webhook-worker": {
		{Action: "dynamodb:Query", Resource: "PaymentsTable/index/gsi1"}: "a customer-side event (payment_method.attached, invoice.paid, ...) finds the running recoveries it steers",
		{Action: "dynamodb:GetItem", Resource: "DeadLettersTable"}:       "a delivery an operator retried checks its retry id (deadletter.Retries)",
		{Action: "dynamodb:PutItem", Resource: "DeadLettersTable"}:       "a delivery an operator retried resolves or reopens its record",
	},
	"outbox-relay": {
		{Action: "dynamodb:DescribeStream", Resource: "OutboxTable.StreamArn"}:   "the stream event source mapping reads the stream with the function's role",
		{Action: "dynamodb:GetRecords", Resource: "OutboxTable.StreamArn"}:       "the stream event source mapping reads the stream with the function's role",
		{Action: "dynamodb:GetShardIterator", Resource: "OutboxTable.StreamArn"}: "the stream event source mapping reads the stream with the function's role",
		{Action: "dynamodb:ListStreams", Resource: "OutboxTable.StreamArn"}:      "the stream event source mapping reads the stream with the function's role",
		{Action: "sqs:SendMessage", Resource: "OutboxDLQ"}:                       "the event source mapping's on-failure destination is written with the function's role",
		{Action: "sqs:SendMessage", Resource: "ResolveQueue"}:                    "a due resolve job is delivered to the resolve queue",
		{Action: "dynamodb:GetItem", Resource: "OutboxTable"}:                    "a steering signal's wake reads the parked recovery's timer to bring it forward",
		{Action: "dynamodb:PutItem", Resource: "OutboxTable"}:                    "a steering signal's wake writes the parked recovery's timer again, due now",
		{Action: "dynamodb:PutItem", Resource: "PaymentsTable"}:                  "a published payment change stores the payment's publication state",
	},
	"recovery-steps": {
		{Action: "dynamodb:PutItem", Resource: "OutboxTable"}:          "the charge step's outcome commits its change for the event feed; the park step commits the recovery's timer",
		{Action: "dynamodb:GetItem", Resource: "OutboxTable"}:          "a park step that finds a steering signal already stored reads its timer back to bring it forward",
		{Action: "dynamodb:BatchWriteItem", Resource: "AttemptsTable"}: "the charge step's provider call is logged",
	},
	"operator-api": {
		{Action: "dynamodb:Query", Resource: "PaymentsTable/index/gsi1"}: "the console's list of running recoveries (GET /ops/recoveries)",
		{Action: "dynamodb:PutItem", Resource: "PaymentsTable"}:          "charge-now and stop store the steering signal with its wake (POST /ops/recoveries/{id}/{action})",
	},
}

// checked are the services whose actions the template lists by hand (logs, X-Ray and the
// SQS event source's polling are Lambda's own, granted by SAM's managed policies).
var checked = []string{"dynamodb:", "sqs:", "states:"}

func isChecked(action string) bool {
	return slices.ContainsFunc(checked, func(p string) bool { return strings.HasPrefix(action, p) })
}

// checkLeastPrivilege compares, per function, the DynamoDB, SQS and Step Functions actions the
// function called under the emulator (recorded by the proxies in front of DynamoDB Local and
// moto) with the statements template.yaml gives its role. It fails if the template grants
// less (the call would be denied in AWS) or more (a grant no code needs), and if any function
// still uses a SAM policy template (DynamoDBCrudPolicy grants Scan and batch writes nobody
// calls).
func (e *env) checkLeastPrivilege(t *testing.T) {
	path := filepath.Join(e.root, "template.yaml")
	grants, err := rie.TemplateGrants(path)
	if err != nil {
		t.Fatal(err)
	}
	templates, err := rie.PolicyTemplates(path)
	if err != nil {
		t.Fatal(err)
	}
	for lid, names := range templates {
		for _, n := range names {
			if strings.HasSuffix(lid, "Function") && (strings.Contains(n, "DynamoDB") || strings.Contains(n, "SQS") || strings.Contains(n, "StepFunctions")) {
				t.Errorf("%s uses the policy template %s: list the actions it calls instead", lid, n)
			}
		}
	}
	envVar := map[string]string{} // physical name -> the variable the fixture passes it in
	for _, kv := range e.fx.Env() {
		if k, v, ok := strings.Cut(kv, "="); ok && v != "" {
			envVar[v] = k
		}
	}
	if len(e.calls) == 0 {
		t.Skip("no function ran")
	}
	var report []string
	for fn, recs := range e.calls {
		g, ok := grants[fn]
		if !ok {
			t.Errorf("%s: not in template.yaml", fn)
			continue
		}
		called := map[rie.Call]bool{}
		for _, r := range recs {
			for _, c := range r.Calls() {
				if !isChecked(c.Action) {
					continue
				}
				base, index, _ := strings.Cut(c.Resource, "/index/")
				v := envVar[base]
				id, ok := g.Env[v]
				if !ok {
					t.Errorf("%s: called %s on %s, which its template environment does not name (%q)", fn, c.Action, c.Resource, v)
					continue
				}
				if index != "" {
					id += "/index/" + index
				}
				called[rie.Call{Action: c.Action, Resource: id}] = true
			}
		}
		var lines []string
		for c := range called {
			lines = append(lines, c.Action+" "+c.Resource)
			if !g.Actions[c] {
				t.Errorf("%s calls %s on %s: template.yaml does not grant it (denied in AWS)", fn, c.Action, c.Resource)
			}
		}
		for c := range g.Actions {
			if !isChecked(c.Action) || called[c] {
				continue
			}
			if _, ok := unexercised[fn][c]; !ok {
				t.Errorf("%s is granted %s on %s, which it never called: remove it, or name the path that needs it in unexercised", fn, c.Action, c.Resource)
			}
		}
		for c, why := range unexercised[fn] {
			switch {
			case called[c]:
				t.Errorf("%s: %s on %s is listed as unexercised (%s) but was called: drop it from the list", fn, c.Action, c.Resource, why)
			case !g.Actions[c]:
				t.Errorf("%s: %s on %s is listed as unexercised but not granted", fn, c.Action, c.Resource)
			}
		}
		granted := 0
		for c := range g.Actions {
			if isChecked(c.Action) {
				granted++
			}
		}
		slices.Sort(lines)
		report = append(report, fmt.Sprintf("%s: %d DynamoDB/SQS/SFN actions called, %d granted, %d of them for paths the samples do not reach\n    %s",
			fn, len(called), granted, len(unexercised[fn]), strings.Join(lines, "\n    ")))
	}
	slices.Sort(report)
	t.Logf("least privilege (recorded under the emulator vs template.yaml):\n%s", strings.Join(report, "\n"))
}
