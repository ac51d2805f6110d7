package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/idempotency"
)

// recordingTransport records each DynamoDB call's operation and request size.
type recordingTransport struct {
	mu    sync.Mutex
	calls []string
	bytes map[string]int
}

func (t *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	t.mu.Lock()
	t.calls = append(t.calls, op)
	t.bytes[op] += len(b)
	t.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// TestTwiceMakesTheBareCalls checks that the two sides the interleaved run compares are the
// same design: for new keys and replays, in both completion modes, twice makes the same
// DynamoDB calls in the same order as the bare aws-sdk-go-v2 side, with requests at most 10%
// larger (twice's record carries the same fields under its own encoding). What the rate ratio
// then measures is the client's work around the calls and DynamoDB Local's noise.
func TestTwiceMakesTheBareCalls(t *testing.T) {
	ep := os.Getenv("TWICE_TEST_DYNAMODB_ENDPOINT")
	if ep == "" {
		if os.Getenv("TWICE_TEST_REQUIRE_SERVERS") != "" {
			t.Fatal("TWICE_TEST_DYNAMODB_ENDPOINT is not set and servers are required")
		}
		t.Skip("TWICE_TEST_DYNAMODB_ENDPOINT not set; run through the test script")
	}
	ctx := context.Background()
	admin := dynamo.NewClient(ep)
	stamp := time.Now().UnixNano()
	tables := map[string]string{}
	for _, name := range []string{"twice-keys", "twice-effects", "bare-keys", "bare-effects"} {
		physical := fmt.Sprintf("parity-%s-%d", name, stamp)
		if err := dynamo.CreateTable(ctx, admin, physical, false, false); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dynamo.DeleteTable(context.Background(), admin, physical) })
		tables[name] = physical
	}
	for _, withEffect := range []bool{true, false} {
		rt := &recordingTransport{bytes: map[string]int{}}
		c := dynamo.NewClient(ep, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: rt} })
		st := dynamo.New(c, map[string]string{idempotency.Table: tables["twice-keys"], "payments": tables["twice-effects"]})
		k, err := idempotency.NewKeeper(idempotency.Keeper{Store: st, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		rb := &recordingTransport{bytes: map[string]int{}}
		cb := dynamo.NewClient(ep, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: rb} })
		tw := twiceSide("twice", k, withEffect)
		bare := bareSide("bare", cb, tables["bare-keys"], tables["bare-effects"], withEffect)
		p := fmt.Sprintf("e%v", withEffect)
		for i := range 3 {
			if !tw.newKey(p, i) || !bare.newKey(p, i) {
				t.Fatalf("effect %v: new key %d failed", withEffect, i)
			}
		}
		for i := range 3 {
			if !tw.replay(p, i) || !bare.replay(p, i) {
				t.Fatalf("effect %v: replay %d failed", withEffect, i)
			}
		}
		if !slices.Equal(rt.calls, rb.calls) {
			t.Fatalf("effect %v: twice calls %v, bare calls %v", withEffect, rt.calls, rb.calls)
		}
		for op, n := range rb.bytes {
			if r := float64(rt.bytes[op]) / float64(n); r > 1.10 {
				t.Errorf("effect %v: twice's %s requests are %.2fx the bare side's bytes (%d : %d)", withEffect, op, r, rt.bytes[op], n)
			}
		}
		t.Logf("effect %v: calls %v; request bytes twice %v, bare %v", withEffect, rt.calls, rt.bytes, rb.bytes)
	}
}
