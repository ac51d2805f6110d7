package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/idempotency"
)

// The three kinds of idempotent request measured on each side.
const (
	kindNew        = "new"
	kindReplay     = "replay"
	kindInProgress = "in_progress"
)

// phaseRun is one kind of request on one side: what the DynamoDB client sent and how long
// each request took from the caller's side.
type phaseRun struct {
	Kind      string         `json:"kind"`
	Requests  int            `json:"requests"`
	Errors    int            `json:"errors"`
	Calls     map[string]int `json:"calls"`
	Latencies []float64      `json:"latencies_ms"`
}

// sideRun is one implementation's results.
type sideRun struct {
	Implementation string     `json:"implementation"`
	Version        string     `json:"version"`
	Phases         []phaseRun `json:"phases"`
	// ItemBytes is the mean size of a completed idempotency record, as DynamoDB bills it.
	ItemBytes float64 `json:"item_bytes"`
}

// loadSpec is what both sides run: the same counts and concurrency.
type loadSpec struct {
	Requests    int `json:"requests"`
	Concurrency int `json:"concurrency"`
	Held        int `json:"held"` // keys held in progress while duplicates arrive
}

// responseBody is the payment-shaped answer both sides store; powertools/bench.mjs builds the
// same bytes.
func responseBody(n int) []byte {
	return fmt.Appendf(nil, `{"id":"pay_%08d","status":"succeeded","amount":%d,"currency":"usd","customer":"cus_bench","provider_payment_id":"pi_%024d","decline_code":"","decline_class":"","created_at":"2026-01-01T00:00:00Z"}`,
		n, 1000+n%500, n)
}

func requestBody(n int) []byte {
	return fmt.Appendf(nil, `{"amount":%d,"currency":"usd","customer":"cus_bench","payment_method":"pm_card_visa"}`, 1000+n%500)
}

// load runs count requests with concurrency in flight; fn reports whether the request got the
// expected outcome. Latencies come back in request order, in milliseconds.
func load(count, concurrency int, fn func(i int) bool) ([]float64, int) {
	lat := make([]float64, count)
	var next, bad atomic.Int64
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= count {
					return
				}
				t0 := time.Now()
				ok := fn(i)
				lat[i] = float64(time.Since(t0).Nanoseconds()) / 1e6
				if !ok {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return lat, int(bad.Load())
}

// runTwice measures shared/idempotency's Keeper.Do on shared/dynamo, with calls counted by
// dynamo.CallCounter after the SDK's retry middleware.
func runTwice(endpoint string, spec loadSpec) (sideRun, error) {
	ctx, cancel := waitCtx()
	defer cancel()
	calls := &dynamo.CallCounter{}
	client := dynamo.NewClient(endpoint, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, calls.Middleware()) })
	admin := dynamo.NewClient(endpoint)
	table := fmt.Sprintf("bench-twice-%d", time.Now().UnixNano())
	if err := dynamo.CreateTable(ctx, admin, table, false, false); err != nil {
		return sideRun{}, err
	}
	defer dynamo.DeleteTable(context.Background(), admin, table)
	keeper, err := idempotency.NewKeeper(idempotency.Keeper{Store: dynamo.New(client, map[string]string{idempotency.Table: table}), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return sideRun{}, err
	}
	do := func(key string, n int, want idempotency.Kind, op func(context.Context) (idempotency.Result, error)) bool {
		fp, err := idempotency.FingerprintJSON(requestBody(n))
		if err != nil {
			return false
		}
		out, err := keeper.Do(context.Background(), "bench", key, fp, op)
		return err == nil && out.Kind == want
	}
	answer := func(n int) func(context.Context) (idempotency.Result, error) {
		return func(context.Context) (idempotency.Result, error) {
			return idempotency.Result{Response: idempotency.Response{Status: 201, Body: responseBody(n)}, Final: true}, nil
		}
	}
	phase := func(kind string, fn func(i int) bool) phaseRun {
		calls.Reset()
		lat, bad := load(spec.Requests, spec.Concurrency, fn)
		return phaseRun{Kind: kind, Requests: spec.Requests, Errors: bad, Calls: calls.Counts(), Latencies: lat}
	}
	run := sideRun{Implementation: "twice", Version: "shared/idempotency (this commit)"}
	// Warm-up on keys nobody measures: connections, and the SDK's first-call costs.
	load(min(200, spec.Requests), spec.Concurrency, func(i int) bool {
		return do(fmt.Sprintf("warm-%d", i), i, idempotency.New, answer(i))
	})
	run.Phases = append(run.Phases,
		phase(kindNew, func(i int) bool { return do(fmt.Sprintf("k-%d", i), i, idempotency.New, answer(i)) }),
		phase(kindReplay, func(i int) bool { return do(fmt.Sprintf("k-%d", i), i, idempotency.Replay, answer(i)) }))

	// In progress: Held callers hold their keys inside op; duplicates arrive while they do.
	gate := make(chan struct{})
	var entered, holders sync.WaitGroup
	entered.Add(spec.Held)
	for i := range spec.Held {
		holders.Go(func() {
			do(fmt.Sprintf("h-%d", i), i, idempotency.New, func(ctx context.Context) (idempotency.Result, error) {
				entered.Done()
				<-gate
				return answer(i)(ctx)
			})
		})
	}
	entered.Wait()
	run.Phases = append(run.Phases, phase(kindInProgress, func(i int) bool {
		return do(fmt.Sprintf("h-%d", i%spec.Held), i%spec.Held, idempotency.InProgress, answer(i))
	}))
	close(gate)
	holders.Wait()

	run.ItemBytes, err = meanItemBytes(ctx, admin, table)
	return run, err
}

// runPowertools creates a table laid out as Powertools' DynamoDB persistence layer expects
// (hash key "id") and runs powertools/bench.mjs against it with the same load.
func runPowertools(root, endpoint string, spec loadSpec) (sideRun, error) {
	ctx, cancel := waitCtx()
	defer cancel()
	admin := dynamo.NewClient(endpoint)
	table := fmt.Sprintf("bench-powertools-%d", time.Now().UnixNano())
	if _, err := admin.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		return sideRun{}, fmt.Errorf("benchcompare: create %s: %w", table, err)
	}
	defer dynamo.DeleteTable(context.Background(), admin, table)

	dir := filepath.Join(root, "infra/benchcompare/powertools")
	if err := npmCI(dir); err != nil {
		return sideRun{}, err
	}
	cmd := exec.CommandContext(ctx, "node", "bench.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BENCH_ENDPOINT="+endpoint, "BENCH_TABLE="+table,
		fmt.Sprintf("BENCH_REQUESTS=%d", spec.Requests), fmt.Sprintf("BENCH_CONCURRENCY=%d", spec.Concurrency),
		fmt.Sprintf("BENCH_HELD=%d", spec.Held),
		// The SDK would otherwise read a developer's ~/.aws and AWS_* settings.
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		// The SDK's notice that Node 20 support ends in 2027 is not a benchmark result.
		"NODE_NO_WARNINGS=1")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return sideRun{}, fmt.Errorf("benchcompare: node bench.mjs: %w", err)
	}
	run, err := parseSide(stdout.Bytes())
	if err != nil {
		return sideRun{}, err
	}
	run.Implementation = "Powertools (TypeScript)"
	run.ItemBytes, err = meanItemBytes(ctx, admin, table)
	return run, err
}

// parseSide decodes the JSON the Node script prints.
func parseSide(b []byte) (sideRun, error) {
	var run sideRun
	if err := json.Unmarshal(b, &run); err != nil {
		return sideRun{}, fmt.Errorf("benchcompare: powertools output: %w", err)
	}
	for _, p := range run.Phases {
		if p.Requests != len(p.Latencies) {
			return sideRun{}, fmt.Errorf("benchcompare: powertools %s: %d latencies for %d requests", p.Kind, len(p.Latencies), p.Requests)
		}
	}
	if len(run.Phases) != 3 {
		return sideRun{}, fmt.Errorf("benchcompare: powertools output has %d phases, want 3", len(run.Phases))
	}
	return run, nil
}

// npmCI installs the pinned Node packages unless the lock file is already installed.
func npmCI(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "node_modules/.package-lock.json")); err == nil {
		return nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("benchcompare: npm ci in %s: %w", dir, err)
	}
	return nil
}

// meanItemBytes scans a table and returns the mean billed size of its items.
func meanItemBytes(ctx context.Context, client *dynamodb.Client, table string) (float64, error) {
	total, count := 0, 0
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(table)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("benchcompare: scan %s: %w", table, err)
		}
		for _, it := range page.Items {
			total += itemSize(it)
			count++
		}
	}
	if count == 0 {
		return 0, nil
	}
	return float64(total) / float64(count), nil
}
