package dynamo

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"

	"github.com/runtwice/twice/shared/store"
	"github.com/runtwice/twice/shared/store/storetest"
)

// TestNoChecksumWarning: DynamoDB Local sends no CRC32 on error answers and the SDK warns about
// it on every failed condition unless told not to validate; NewClient tells it, so replays
// do not flood the log. The second case shows the warning is real.
func TestNoChecksumWarning(t *testing.T) {
	endpoint := testEndpoint(t)
	cases := []struct {
		name     string
		validate bool
		wantWarn bool
	}{
		{"NewClient", false, false},
		{"checksums validated", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var warnings []string
			client := NewClient(endpoint, func(o *dynamodb.Options) {
				o.DisableValidateResponseChecksum = !tc.validate
				o.Logger = logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
					mu.Lock()
					defer mu.Unlock()
					if c == logging.Warn {
						warnings = append(warnings, format)
					}
				})
			})
			s := New(client, newTables(t, client, storetest.Simple))
			ctx := context.Background()
			it := store.Item{PK: "dup"}
			if err := s.Put(ctx, storetest.Simple, it, store.Cond{}); err != nil {
				t.Fatal(err)
			}
			if err := s.Put(ctx, storetest.Simple, it, store.Cond{Kind: store.NotExists}); err == nil {
				t.Fatal("duplicate put succeeded")
			}
			mu.Lock()
			defer mu.Unlock()
			if (len(warnings) > 0) != tc.wantWarn {
				t.Fatalf("warnings %q, want some: %v", strings.Join(warnings, "; "), tc.wantWarn)
			}
		})
	}
}
