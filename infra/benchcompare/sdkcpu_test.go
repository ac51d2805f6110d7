package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/idempotency"
)

// replayTransport answers every DynamoDB call as DynamoDB answers a replay: the failed
// condition with the completed record (ALL_OLD). With the network taken out, what a side costs
// per replay is its own CPU, the SDK's included.
type replayTransport struct{ body []byte }

func (t replayTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	return &http.Response{StatusCode: 400, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(bytes.NewReader(t.body)), Request: r}, nil
}

func replayClient(tb testing.TB) *dynamodb.Client {
	fp, err := idempotency.FingerprintJSON(requestBody(0))
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	doc, err := json.Marshal(bareRecord{Status: "completed", Fingerprint: fp, CreatedAt: now, CompletedAt: &now,
		Response: &idempotency.Response{Status: 201, Body: responseBody(0)}})
	if err != nil {
		tb.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{
		"__type":  "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
		"message": "The conditional request failed",
		"Item": map[string]any{"pk": map[string]string{"S": "k#bench#p-0"}, "doc": map[string]string{"B": base64.StdEncoding.EncodeToString(doc)},
			"ver": map[string]string{"N": "2"}, "expires_at": map[string]string{"N": "4102444800"}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return dynamo.NewClient("http://127.0.0.1:1", func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: replayTransport{body: body}}
	})
}

// BenchmarkReplayCPU compares the client CPU of a replay: twice's Keeper.Do on shared/dynamo
// against the same design in bare SDK calls, both through the real SDK stack on a transport
// that answers at once:
//
//	go test -run XXX -bench ReplayCPU -benchmem ./infra/benchcompare
func BenchmarkReplayCPU(b *testing.B) {
	client := replayClient(b)
	k, err := idempotency.NewKeeper(idempotency.Keeper{Store: dynamo.New(client, map[string]string{idempotency.Table: "t", "payments": "e"}), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range []goSide{twiceSide("twice", k, false), bareSide("bare", client, "t", "e", false)} {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !s.replay("p", 0) {
					b.Fatal("not a replay")
				}
			}
		})
	}
}

// Both sides take the canned answer as a replay (the benchmark measures what it says).
func TestReplayCPUHarness(t *testing.T) {
	client := replayClient(t)
	k, err := idempotency.NewKeeper(idempotency.Keeper{Store: dynamo.New(client, map[string]string{idempotency.Table: "t", "payments": "e"}), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if !twiceSide("twice", k, false).replay("p", 0) || !bareSide("bare", client, "t", "e", false).replay("p", 0) {
		t.Fatal("a side did not see a replay")
	}
}

// okTransport answers every call with success and no attributes: a new key's acquisition and
// completion as DynamoDB answers them.
type okTransport struct{}

func (okTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(bytes.NewReader([]byte(`{}`))), Request: r}, nil
}

// BenchmarkNewKeyCPU is BenchmarkReplayCPU for a new key, in both completion modes.
//
//	go test -run XXX -bench NewKeyCPU -benchmem ./infra/benchcompare
func BenchmarkNewKeyCPU(b *testing.B) {
	client := dynamo.NewClient("http://127.0.0.1:1", func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: okTransport{}} })
	k, err := idempotency.NewKeeper(idempotency.Keeper{Store: dynamo.New(client, map[string]string{idempotency.Table: "t", "payments": "e"}), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range []goSide{twiceSide("twice/tx", k, true), bareSide("bare/tx", client, "t", "e", true),
		twiceSide("twice/single", k, false), bareSide("bare/single", client, "t", "e", false)} {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if !s.newKey("p", i) {
					b.Fatal("not new")
				}
			}
		})
	}
}
