package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/idempotency"
	"github.com/runtwice/twice/shared/store"
)

// The interleaved comparison (-interleaved): every side runs its new keys and then their
// replays, side after side within a round (A B C, then C B A in the next round), for each concurrency, so a
// drift of the shared machine or of DynamoDB Local hits every side alike; each round's ratios
// are reported, not only their mean.
//
// Sides:
//   - twice/tx: Keeper.Do completing with one effect (the key and a payment-shaped item in one
//     TransactWriteItems), as the payments API does;
//   - twice/single: Keeper.Do with no effect (the record is the result): one conditional PutItem
//     completes it;
//   - twice/single+cache: the same with Keeper.CacheSize (replays served in process);
//   - bare/tx and bare/single: the same design in plain aws-sdk-go-v2 calls (conditional PutItem
//     with ALL_OLD on failure, then TransactWriteItems or a conditional PutItem, the same items
//     and document), with none of the library around them;
//   - powertools and powertools+cache: Powertools for AWS Lambda (TypeScript) makeIdempotent on
//     its DynamoDB persistence layer, useLocalCache off and on (node, a process per run).
type interleaveSpec struct {
	Rounds       int   `json:"rounds"`
	Requests     int   `json:"requests"`
	Concurrency  []int `json:"concurrency"`
	Powertools   bool  `json:"powertools"`
	CachePerSide int   `json:"cache_entries"`
}

// ilPhase is one side's phase in one round at one concurrency.
type ilPhase struct {
	Round       int            `json:"round"`
	Concurrency int            `json:"concurrency"`
	Side        string         `json:"side"`
	Kind        string         `json:"kind"`
	Requests    int            `json:"requests"`
	Errors      int            `json:"errors"`
	PerSec      float64        `json:"per_second"`
	CPUPerReqUS float64        `json:"cpu_us_per_request"`
	P50ms       float64        `json:"p50_ms"`
	P99ms       float64        `json:"p99_ms"`
	Calls       map[string]int `json:"calls,omitempty"`
}

type ilReport struct {
	Spec        interleaveSpec `json:"spec"`
	Machine     machine        `json:"machine"`
	DynamoLocal string         `json:"dynamodb_local"`
	Phases      []ilPhase      `json:"phases"`
}

// goSide is one Go implementation: a new-key request and a replay request for key i.
type goSide struct {
	name   string
	newKey func(prefix string, i int) bool
	replay func(prefix string, i int) bool
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func summarize(round, conc int, side, kind string, lat []float64, bad int, wall, cpu time.Duration) ilPhase {
	sorted := slices.Sorted(slices.Values(lat))
	n := len(lat)
	return ilPhase{Round: round, Concurrency: conc, Side: side, Kind: kind, Requests: n, Errors: bad,
		PerSec: float64(n) / wall.Seconds(), CPUPerReqUS: float64(cpu.Microseconds()) / float64(n),
		P50ms: quantile(sorted, 0.5), P99ms: quantile(sorted, 0.99)}
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func runGoPhase(round, conc int, s goSide, kind, prefix string, n int) ilPhase {
	fn := s.newKey
	if kind == kindReplay {
		fn = s.replay
	}
	c0, t0 := cpuNow(), time.Now()
	lat, bad := load(n, conc, func(i int) bool { return fn(prefix, i) })
	return summarize(round, conc, s.name, kind, lat, bad, time.Since(t0), cpuNow()-c0)
}

// interleaved runs the comparison and writes interleaved.json and the tables.
func interleaved(spec interleaveSpec, root, out string, stdout io.Writer) error {
	endpoint := os.Getenv("TWICE_TEST_DYNAMODB_ENDPOINT")
	rep := ilReport{Spec: spec, Machine: describeMachine(), DynamoLocal: "external: " + endpoint}
	if endpoint == "" {
		d, err := startDynamoLocal(root)
		if err != nil {
			return err
		}
		defer d.Stop()
		endpoint, rep.DynamoLocal = d.Endpoint, d.Version
	}
	ctx, cancel := waitCtx()
	defer cancel()
	admin := dynamo.NewClient(endpoint)
	client := dynamo.NewClient(endpoint)
	stamp := time.Now().UnixNano()
	tables := map[string]string{}
	for _, name := range []string{"twice-keys", "twice-effects", "bare-keys", "bare-effects"} {
		physical := fmt.Sprintf("bench-%s-%d", name, stamp)
		if err := dynamo.CreateTable(ctx, admin, physical, false, false); err != nil {
			return err
		}
		defer dynamo.DeleteTable(context.Background(), admin, physical)
		tables[name] = physical
	}
	st := dynamo.New(client, map[string]string{idempotency.Table: tables["twice-keys"], "payments": tables["twice-effects"]})
	quiet := slog.New(slog.DiscardHandler)
	plain, err := idempotency.NewKeeper(idempotency.Keeper{Store: st, Log: quiet})
	if err != nil {
		return err
	}
	cached, err := idempotency.NewKeeper(idempotency.Keeper{Store: st, Log: quiet, CacheSize: spec.CachePerSide})
	if err != nil {
		return err
	}
	sides := []goSide{
		twiceSide("twice/tx", plain, true), bareSide("bare/tx", client, tables["bare-keys"], tables["bare-effects"], true),
		twiceSide("twice/single", plain, false), bareSide("bare/single", client, tables["bare-keys"], tables["bare-effects"], false),
		twiceSide("twice/single+cache", cached, false),
	}
	// Warm-up on keys nobody measures: connections, the SDK's first calls, DynamoDB Local's JIT.
	for _, s := range sides {
		load(min(200, spec.Requests), 8, func(i int) bool { return s.newKey("warm-"+s.name, i) })
	}
	for round := 1; round <= spec.Rounds; round++ {
		// Odd rounds run the sides in order, even rounds in reverse (A B C, C B A, ...): each pair
		// compared (twice/tx and bare/tx, ...) runs first in half the rounds, so a phase's
		// position after another side's burst weighs on both alike.
		order := sides
		if round%2 == 0 {
			order = slices.Clone(sides)
			slices.Reverse(order)
		}
		for _, conc := range spec.Concurrency {
			for _, s := range order {
				prefix := fmt.Sprintf("r%d-c%d-%s", round, conc, s.name)
				for _, kind := range []string{kindNew, kindReplay} {
					p := runGoPhase(round, conc, s, kind, prefix, spec.Requests)
					rep.Phases = append(rep.Phases, p)
					fmt.Fprintf(os.Stderr, "round %d, %d in flight, %-20s %-6s %8.0f/s  %6.0f us CPU/req\n", round, conc, s.name, kind, p.PerSec, p.CPUPerReqUS)
				}
			}
			if spec.Powertools {
				for _, cache := range []bool{false, true} {
					ps, err := runPowertoolsRound(root, endpoint, admin, spec.Requests, conc, cache)
					if err != nil {
						return err
					}
					for _, p := range ps {
						p.Round = round
						rep.Phases = append(rep.Phases, p)
						fmt.Fprintf(os.Stderr, "round %d, %d in flight, %-20s %-6s %8.0f/s  %6.0f us CPU/req\n", round, conc, p.Side, p.Kind, p.PerSec, p.CPUPerReqUS)
					}
				}
			}
		}
	}
	rep.Machine.LoadAfter = loadAvg()
	writeInterleaved(stdout, rep)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "interleaved.json"), append(b, '\n'), 0o644)
}

func twiceSide(name string, k *idempotency.Keeper, withEffect bool) goSide {
	do := func(prefix string, i int, want idempotency.Kind) bool {
		fp, err := idempotency.FingerprintJSON(requestBody(i))
		if err != nil {
			return false
		}
		key := fmt.Sprintf("%s-%d", prefix, i)
		out, err := k.Do(context.Background(), "bench", key, fp, func(context.Context) (idempotency.Result, error) {
			res := idempotency.Result{Response: idempotency.Response{Status: 201, Body: responseBody(i)}, Final: true}
			if withEffect {
				res.Effects = []store.Write{{Table: "payments", Put: &store.Item{PK: "pay-" + key, Doc: responseBody(i)}, Cond: store.Cond{Kind: store.NotExists}}}
			}
			return res, nil
		})
		return err == nil && out.Kind == want
	}
	return goSide{name: name,
		newKey: func(p string, i int) bool { return do(p, i, idempotency.New) },
		replay: func(p string, i int) bool { return do(p, i, idempotency.Replay) }}
}

// bareRecord is the document the bare side stores: the same fields as the Keeper's record.
type bareRecord struct {
	Status        string                  `json:"status"`
	Fingerprint   idempotency.Fingerprint `json:"fingerprint"`
	Response      *idempotency.Response   `json:"response,omitempty"`
	CreatedAt     time.Time               `json:"created_at"`
	CompletedAt   *time.Time              `json:"completed_at,omitempty"`
	LockExpiresAt *time.Time              `json:"lock_expires_at,omitempty"`
}

// bareSide is the design in plain SDK calls: acquire with a conditional PutItem (the old item
// back on failure), complete with a transaction of the record and the effect, or with one
// conditional PutItem.
func bareSide(name string, c *dynamodb.Client, keys, effects string, withEffect bool) goSide {
	n := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	acquire := func(pk string, fp idempotency.Fingerprint) (*bareRecord, int64, error) {
		now := time.Now()
		lock := now.Add(30 * time.Second)
		doc, err := json.Marshal(bareRecord{Status: "in_progress", Fingerprint: fp, CreatedAt: now.UTC(), LockExpiresAt: &lock})
		if err != nil {
			return nil, 0, err
		}
		ver := now.UnixNano()
		_, err = c.PutItem(context.Background(), &dynamodb.PutItemInput{
			TableName: &keys,
			Item: map[string]types.AttributeValue{"pk": s(pk), "doc": &types.AttributeValueMemberB{Value: doc}, "ver": n(ver),
				"lock_expires_at": n(lock.Unix() + 1), "expires_at": n(now.Add(7 * 24 * time.Hour).Unix())},
			ConditionExpression:                 aws.String("attribute_not_exists(#pk) OR #lock < :now OR #exp < :now"),
			ExpressionAttributeNames:            map[string]string{"#pk": "pk", "#lock": "lock_expires_at", "#exp": "expires_at"},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":now": n(now.Unix())},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			var old bareRecord
			b, _ := ccf.Item["doc"].(*types.AttributeValueMemberB)
			if b == nil {
				return nil, 0, errors.New("bare: old item without doc")
			}
			if err := json.Unmarshal(b.Value, &old); err != nil {
				return nil, 0, err
			}
			return &old, 0, nil
		}
		return nil, ver, err
	}
	complete := func(pk string, ver int64, fp idempotency.Fingerprint, i int) error {
		now := time.Now()
		doc, err := json.Marshal(bareRecord{Status: "completed", Fingerprint: fp, CreatedAt: now.UTC(), CompletedAt: &now,
			Response: &idempotency.Response{Status: 201, Body: responseBody(i)}})
		if err != nil {
			return err
		}
		item := map[string]types.AttributeValue{"pk": s(pk), "doc": &types.AttributeValueMemberB{Value: doc}, "ver": n(ver + 1),
			"expires_at": n(now.Add(7 * 24 * time.Hour).Unix())}
		cond, names, values := aws.String("#ver = :v"), map[string]string{"#ver": "ver"}, map[string]types.AttributeValue{":v": n(ver)}
		if !withEffect {
			_, err := c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &keys, Item: item,
				ConditionExpression: cond, ExpressionAttributeNames: names, ExpressionAttributeValues: values})
			return err
		}
		_, err = c.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: &keys, Item: item, ConditionExpression: cond, ExpressionAttributeNames: names, ExpressionAttributeValues: values}},
			{Put: &types.Put{TableName: &effects, Item: map[string]types.AttributeValue{"pk": s("pay-" + pk), "doc": &types.AttributeValueMemberB{Value: responseBody(i)}, "ver": n(0)},
				ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": "pk"}}},
		}})
		return err
	}
	do := func(prefix string, i int, wantNew bool) bool {
		fp, err := idempotency.FingerprintJSON(requestBody(i))
		if err != nil {
			return false
		}
		pk := fmt.Sprintf("k#bench#%s-%d", prefix, i)
		old, ver, err := acquire(pk, fp)
		switch {
		case err != nil:
			return false
		case old != nil:
			return !wantNew && old.Status == "completed" && old.Fingerprint.Sum == fp.Sum && old.Response != nil
		}
		return wantNew && complete(pk, ver, fp, i) == nil
	}
	return goSide{name: name,
		newKey: func(p string, i int) bool { return do(p, i, true) },
		replay: func(p string, i int) bool { return do(p, i, false) }}
}

// runPowertoolsRound runs powertools/bench.mjs once (new keys, then their replays; no
// in-progress phase) on a fresh table.
func runPowertoolsRound(root, endpoint string, admin *dynamodb.Client, requests, conc int, cache bool) ([]ilPhase, error) {
	ctx, cancel := waitCtx()
	defer cancel()
	table := fmt.Sprintf("bench-powertools-%d", time.Now().UnixNano())
	if _, err := admin.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		return nil, fmt.Errorf("benchcompare: create %s: %w", table, err)
	}
	defer dynamo.DeleteTable(context.Background(), admin, table)
	dir := filepath.Join(root, "infra/benchcompare/powertools")
	if err := npmCI(dir); err != nil {
		return nil, err
	}
	cacheEnv := "BENCH_CACHE="
	side := "powertools"
	if cache {
		cacheEnv, side = "BENCH_CACHE=1", "powertools+cache"
	}
	cmd := exec.CommandContext(ctx, "node", "bench.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BENCH_ENDPOINT="+endpoint, "BENCH_TABLE="+table,
		fmt.Sprintf("BENCH_REQUESTS=%d", requests), fmt.Sprintf("BENCH_CONCURRENCY=%d", conc), "BENCH_HELD=0", cacheEnv,
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null", "NODE_NO_WARNINGS=1")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("benchcompare: node bench.mjs: %w", err)
	}
	var got struct {
		Phases []struct {
			Kind      string         `json:"kind"`
			Errors    int            `json:"errors"`
			Calls     map[string]int `json:"calls"`
			Latencies []float64      `json:"latencies_ms"`
			CPUms     float64        `json:"cpu_ms"`
			WallMS    float64        `json:"wall_ms"`
		} `json:"phases"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		return nil, fmt.Errorf("benchcompare: powertools output: %w", err)
	}
	var out []ilPhase
	for _, p := range got.Phases {
		if p.WallMS <= 0 || len(p.Latencies) == 0 {
			return nil, fmt.Errorf("benchcompare: powertools %s phase without timing", p.Kind)
		}
		ph := summarize(0, conc, side, p.Kind, p.Latencies, p.Errors, time.Duration(p.WallMS*1e6), time.Duration(p.CPUms*1e6))
		ph.Calls = p.Calls
		out = append(out, ph)
	}
	return out, nil
}

// writeInterleaved prints per round the rate of every side and twice's ratios to Powertools
// and to the bare calls, per phase and concurrency, then CPU per request.
func writeInterleaved(w io.Writer, rep ilReport) {
	type k struct {
		round, conc int
		side, kind  string
	}
	at := map[k]ilPhase{}
	var sides []string
	for _, p := range rep.Phases {
		at[k{p.Round, p.Concurrency, p.Side, p.Kind}] = p
		if !slices.Contains(sides, p.Side) {
			sides = append(sides, p.Side)
		}
	}
	ratio := func(a, b ilPhase, okA, okB bool) string {
		if !okA || !okB || b.PerSec == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", a.PerSec/b.PerSec)
	}
	fmt.Fprintf(w, "\n## Interleaved: %d rounds, %d requests per phase, DynamoDB Local %s\n\n", rep.Spec.Rounds, rep.Spec.Requests, rep.DynamoLocal)
	fmt.Fprintf(w, "| round | in flight | phase | %s | twice/tx : bare/tx | twice/single : bare/single | twice/tx : powertools | twice/single : powertools | twice/single+cache : powertools+cache |\n", strings.Join(sides, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", 3+len(sides)+5))
	for round := 1; round <= rep.Spec.Rounds; round++ {
		for _, conc := range rep.Spec.Concurrency {
			for _, kind := range []string{kindNew, kindReplay} {
				var cells []string
				for _, s := range sides {
					if p, ok := at[k{round, conc, s, kind}]; ok {
						cell := fmt.Sprintf("%.0f/s", p.PerSec)
						if p.Errors > 0 {
							cell += fmt.Sprintf(" (%d errors)", p.Errors)
						}
						cells = append(cells, cell)
					} else {
						cells = append(cells, "-")
					}
				}
				get := func(s string) (ilPhase, bool) { p, ok := at[k{round, conc, s, kind}]; return p, ok }
				ttx, ok1 := get("twice/tx")
				btx, ok2 := get("bare/tx")
				ts, ok3 := get("twice/single")
				bs, ok4 := get("bare/single")
				pt, ok5 := get("powertools")
				tc, ok6 := get("twice/single+cache")
				pc, ok7 := get("powertools+cache")
				fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", round, conc, kind, strings.Join(cells, " | "),
					ratio(ttx, btx, ok1, ok2), ratio(ts, bs, ok3, ok4), ratio(ttx, pt, ok1, ok5), ratio(ts, pt, ok3, ok5), ratio(tc, pc, ok6, ok7))
			}
		}
	}
	fmt.Fprintf(w, "\nClient CPU per request (µs, user+system of the process; Powertools' is node's):\n\n")
	fmt.Fprintf(w, "| round | in flight | phase | %s | twice/tx : bare/tx | twice/single : bare/single |\n", strings.Join(sides, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", 3+len(sides)+2))
	for round := 1; round <= rep.Spec.Rounds; round++ {
		for _, conc := range rep.Spec.Concurrency {
			for _, kind := range []string{kindNew, kindReplay} {
				var cells []string
				for _, s := range sides {
					if p, ok := at[k{round, conc, s, kind}]; ok {
						cells = append(cells, fmt.Sprintf("%.0f", p.CPUPerReqUS))
					} else {
						cells = append(cells, "-")
					}
				}
				cpuRatio := func(a, b string) string {
					pa, okA := at[k{round, conc, a, kind}]
					pb, okB := at[k{round, conc, b, kind}]
					if !okA || !okB || pb.CPUPerReqUS == 0 {
						return "-"
					}
					return fmt.Sprintf("%.2fx", pa.CPUPerReqUS/pb.CPUPerReqUS)
				}
				fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s |\n", round, conc, kind, strings.Join(cells, " | "),
					cpuRatio("twice/tx", "bare/tx"), cpuRatio("twice/single", "bare/single"))
			}
		}
	}
}
