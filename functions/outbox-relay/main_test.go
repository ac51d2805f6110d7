package main

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/outbox/followon"
)

// The relay function registers every kind of the registry, as the local stack does
// (infra/inprocess TestStackRelayRegistersEveryKind): a kind delivered in one is never dropped
// in the other. Building the handlers makes no AWS call.
func TestRelayRegistersEveryKind(t *testing.T) {
	env := &lambdaenv.Env{Lookup: func(name string) (string, bool) {
		return "https://sqs.us-east-1.amazonaws.com/123456789012/twice-" + strings.ToLower(name), true
	}}
	_, handlers, err := followOns(aws.Config{Region: "us-east-1"}, env, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(handlers)); !slices.Equal(got, followon.Kinds()) {
		t.Fatalf("the relay function delivers %v, the registry %v", got, followon.Kinds())
	}
}
