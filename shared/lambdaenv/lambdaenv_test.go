package lambdaenv_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/runtwice/twice/shared/lambdaenv"
)

func TestEnv(t *testing.T) {
	tests := map[string]struct {
		vars        map[string]string
		wantMissing []string
	}{
		"all set": {vars: map[string]string{"TWICE_TABLE_IDEMPOTENCY": "t-idem", "TWICE_TABLE_WEBHOOK_EVENTS": "t-ev", "Q": "url"}},
		"two missing, one empty": {
			vars:        map[string]string{"TWICE_TABLE_IDEMPOTENCY": ""},
			wantMissing: []string{"TWICE_TABLE_IDEMPOTENCY", "TWICE_TABLE_WEBHOOK_EVENTS", "Q"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := &lambdaenv.Env{Lookup: func(k string) (string, bool) { v, ok := tc.vars[k]; return v, ok }}
			tables := e.Tables("idempotency", "webhook_events")
			q := e.Get("Q")
			if e.Optional("ABSENT", "def") != "def" {
				t.Fatal("Optional default")
			}
			err := e.Err()
			if len(tc.wantMissing) == 0 {
				if err != nil || tables["webhook_events"] != "t-ev" || q != "url" {
					t.Fatalf("err %v tables %v q %q", err, tables, q)
				}
				return
			}
			if !errors.Is(err, lambdaenv.ErrMissing) || !strings.Contains(err.Error(), strings.Join(tc.wantMissing, ", ")) {
				t.Fatalf("err %v, want missing %v", err, tc.wantMissing)
			}
		})
	}
}
