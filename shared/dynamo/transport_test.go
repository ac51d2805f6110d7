package dynamo

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/store/storetest"
)

// TestTransportErrors: failures before DynamoDB answers keep the context error reachable and
// the message free of SDK request details.
func TestTransportErrors(t *testing.T) {
	// A port that was just free: connections are refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := New(NewClient("http://"+addr), map[string]string{storetest.Simple: "t"})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"refused", context.Background(), nil},
		{"cancelled", cancelled, context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Put(tc.ctx, storetest.Simple, store.Item{PK: "a"}, store.Cond{Kind: store.NotExists})
			var ce *CallError
			if !errors.As(err, &ce) || ce.Op != "PutItem" || ce.Table != storetest.Simple {
				t.Fatalf("got %v, want a *CallError for PutItem", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if errors.Is(err, store.ErrConditionFailed) || errors.Is(err, store.ErrInvalid) {
				t.Fatalf("transport error matches a store sentinel: %v", err)
			}
			if msg := err.Error(); strings.Contains(msg, "RequestID") || strings.Contains(msg, addr) {
				t.Fatalf("message carries SDK details: %s", err)
			}
			t.Log(err)
		})
	}
}
