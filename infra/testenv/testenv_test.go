package testenv_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/logging"

	"github.com/runtwice/twice/infra/testenv"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestDynamoDBCreateTable(t *testing.T) {
	db := testenv.DynamoDB(t)
	tests := map[string]struct {
		schema   testenv.Schema
		wantKeys []string
		wantGSI  bool
	}{
		"hash only":         {schema: testenv.Schema{}, wantKeys: []string{"pk"}},
		"hash and range":    {schema: testenv.Schema{SortKey: true}, wantKeys: []string{"pk", "sk"}},
		"hash, range, gsi1": {schema: testenv.Schema{SortKey: true, GSI1: true}, wantKeys: []string{"pk", "sk"}, wantGSI: true},
		"hash and gsi1":     {schema: testenv.Schema{GSI1: true}, wantKeys: []string{"pk"}, wantGSI: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			table := testenv.CreateTable(t, db, tc.schema)
			out, err := db.DescribeTable(ctx(t), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, k := range out.Table.KeySchema {
				keys = append(keys, aws.ToString(k.AttributeName))
			}
			if fmt.Sprint(keys) != fmt.Sprint(tc.wantKeys) {
				t.Errorf("keys = %v, want %v", keys, tc.wantKeys)
			}
			gotGSI := len(out.Table.GlobalSecondaryIndexes) == 1 &&
				aws.ToString(out.Table.GlobalSecondaryIndexes[0].IndexName) == "gsi1"
			if gotGSI != tc.wantGSI {
				t.Errorf("gsi1 present = %v, want %v (%d indexes)", gotGSI, tc.wantGSI, len(out.Table.GlobalSecondaryIndexes))
			}
			if out.Table.BillingModeSummary == nil || out.Table.BillingModeSummary.BillingMode != ddbtypes.BillingModePayPerRequest {
				t.Errorf("billing mode = %+v, want PAY_PER_REQUEST", out.Table.BillingModeSummary)
			}
		})
	}

	listed, err := db.ListTables(ctx(t), &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatalf("ListTables: %v", err)
	}
	for _, name := range listed.TableNames {
		if strings.HasPrefix(name, t.Name()+"_") {
			t.Errorf("table %s outlived its subtest", name)
		}
	}
}

// recordingLogger keeps every SDK log line.
type recordingLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *recordingLogger) Logf(c logging.Classification, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(c)+" "+fmt.Sprintf(format, v...))
}

// A duplicate conditional put must return the stored item from the error, without the
// checksum warning DynamoDB Local would otherwise cause on every such answer.
func TestDynamoDBConditionalPutReturnsOldItemQuietly(t *testing.T) {
	logs := &recordingLogger{}
	db := testenv.DynamoDB(t, func(o *dynamodb.Options) { o.Logger = logs })
	table := testenv.CreateTable(t, db, testenv.Schema{})

	put := func(body string) error {
		_, err := db.PutItem(ctx(t), &dynamodb.PutItemInput{
			TableName: aws.String(table),
			Item: map[string]ddbtypes.AttributeValue{
				"pk":   &ddbtypes.AttributeValueMemberS{Value: "key-1"},
				"body": &ddbtypes.AttributeValueMemberS{Value: body},
			},
			ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return err
	}
	if err := put("first"); err != nil {
		t.Fatalf("first put: %v", err)
	}
	err := put("second")
	var ccf *ddbtypes.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("second put: got %v, want ConditionalCheckFailedException", err)
	}
	got, ok := ccf.Item["body"].(*ddbtypes.AttributeValueMemberS)
	if !ok || got.Value != "first" {
		t.Errorf("old item body = %#v, want \"first\"", ccf.Item["body"])
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, l := range logs.lines {
		if strings.Contains(strings.ToLower(l), "checksum") {
			t.Errorf("SDK logged a checksum line: %s", l)
		}
	}
}

func TestMotoSQS(t *testing.T) {
	client := sqs.NewFromConfig(testenv.MotoConfig(t))
	name := strings.ReplaceAll(testenv.TableName(t), ".", "_")
	created, err := client.CreateQueue(ctx(t), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	t.Cleanup(func() {
		if _, err := client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: created.QueueUrl}); err != nil {
			t.Errorf("DeleteQueue: %v", err)
		}
	})
	listed, err := client.ListQueues(ctx(t), &sqs.ListQueuesInput{QueueNamePrefix: aws.String(name)})
	if err != nil {
		t.Fatalf("ListQueues: %v", err)
	}
	if len(listed.QueueUrls) != 1 || listed.QueueUrls[0] != aws.ToString(created.QueueUrl) {
		t.Errorf("ListQueues = %v, want [%s]", listed.QueueUrls, aws.ToString(created.QueueUrl))
	}
}

func TestStripeMockCustomers(t *testing.T) {
	req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, testenv.StripeMockURL(t)+"/v1/customers", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testenv.StripeMockKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200", resp.StatusCode)
	}
	var list struct {
		Object string `json:"object"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" {
		t.Errorf("object = %q, want \"list\"", list.Object)
	}
}

func TestASLValidator(t *testing.T) {
	bin := testenv.ASLValidator(t)
	dir := t.TempDir()
	tests := map[string]struct {
		definition string
		wantValid  bool
	}{
		"pass state":             {definition: `{"StartAt":"Done","States":{"Done":{"Type":"Pass","End":true}}}`, wantValid: true},
		"missing StartAt target": {definition: `{"StartAt":"Nowhere","States":{"Done":{"Type":"Pass","End":true}}}`, wantValid: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each run starts node, which takes seconds
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".asl.json")
			if err := os.WriteFile(path, []byte(tc.definition), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.CommandContext(ctx(t), bin, "--json-path", path).CombinedOutput()
			if gotValid := err == nil; gotValid != tc.wantValid {
				t.Errorf("valid = %v, want %v; output:\n%s", gotValid, tc.wantValid, out)
			}
		})
	}
}

func TestChromiumRuns(t *testing.T) {
	out, err := exec.CommandContext(ctx(t), testenv.Chromium(t), "--headless", "--no-sandbox", "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("chromium --version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Chromium") {
		t.Errorf("chromium --version = %q, want it to name Chromium", out)
	}
}

func TestRIEIsExecutable(t *testing.T) {
	if path := testenv.RIE(t); filepath.Base(path) != "aws-lambda-rie" {
		t.Errorf("RIE path = %s, want a file named aws-lambda-rie", path)
	}
}

// fakeTB records how a lookup ended. Fatal and Skip stop the goroutine like the real ones.
type fakeTB struct {
	testing.TB
	ended string
}

func (f *fakeTB) Helper()      {}
func (f *fakeTB) Name() string { return "fake" }
func (f *fakeTB) Fatal(args ...any) {
	f.ended = "fatal: " + fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fakeTB) Skip(args ...any) {
	f.ended = "skip: " + fmt.Sprint(args...)
	runtime.Goexit()
}

func TestMissingServerSkipsUnlessRequired(t *testing.T) {
	tests := map[string]struct {
		ci, require string
		want        string
	}{
		"developer laptop":    {want: "skip"},
		"CI":                  {ci: "true", want: "fatal"},
		"required explicitly": {require: "1", want: "fatal"},
		"CI=false":            {ci: "false", want: "skip"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			t.Setenv(testenv.EnvRequireServers, tc.require)
			t.Setenv(testenv.EnvStripeMock, "")
			f := &fakeTB{}
			done := make(chan struct{})
			go func() {
				defer close(done)
				testenv.StripeMockURL(f)
			}()
			<-done
			if !strings.HasPrefix(f.ended, tc.want+":") {
				t.Errorf("lookup ended with %q, want %s", f.ended, tc.want)
			}
			if !strings.Contains(f.ended, testenv.EnvStripeMock) {
				t.Errorf("message %q does not name %s", f.ended, testenv.EnvStripeMock)
			}
		})
	}
}
