package inprocess

import (
	"log/slog"
	"maps"
	"slices"
	"testing"

	"github.com/runtwice/twice/shared/outbox/followon"
)

// The local stack's relay registers every kind of the registry, as the outbox-relay function
// does (functions/outbox-relay TestRelayRegistersEveryKind): a kind delivered in AWS is never
// dropped locally.
func TestStackRelayRegistersEveryKind(t *testing.T) {
	s, err := New(Config{DataDir: t.TempDir(), Addr: "127.0.0.1:0", SimAddr: "127.0.0.1:0", ClockStart: testClockStart,
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if got := slices.Sorted(maps.Keys(s.relay.Handlers)); !slices.Equal(got, followon.Kinds()) {
		t.Fatalf("the local relay delivers %v, the registry %v", got, followon.Kinds())
	}
}
