package opsapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/runtwice/twice/shared/attempts"
	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/problem"
)

// TestProblemOf is the operator API's one mapping of errors to problems: every error a handler
// can meet gets its status and stable type, wrapped or not, and an error it does not know is
// internal, with none of its text.
func TestProblemOf(t *testing.T) {
	for name, tc := range map[string]struct {
		err    error
		status int
		typ    string
	}{
		"bad field":        {&FieldError{Field: "limit", Reason: "must be 1 to 100"}, 400, problem.InvalidRequest},
		"no record":        {fmt.Errorf("get: %w", deadletter.ErrNotFound), 404, problem.NotFound},
		"no attempt":       {attempts.ErrNotFound, 404, problem.NotFound},
		"note required":    {deadletter.ErrNoteRequired, 400, problem.InvalidRequest},
		"invalid":          {deadletter.ErrInvalid, 400, problem.InvalidRequest},
		"nothing to retry": {deadletter.ErrNotRetryable, 409, problem.NothingToRetry},
		"closed":           {deadletter.ErrClosed, 409, problem.RecordClosed},
		"changed":          {deadletter.ErrBusy, 409, problem.RecordChanged},
		"unknown":          {errors.New("dynamo: ProvisionedThroughputExceededException on table t-prod-deadletters"), 500, problem.Internal},
	} {
		t.Run(name, func(t *testing.T) {
			p := problemOf(tc.err)
			if p.Status != tc.status || p.Type != problem.TypeBase+tc.typ {
				t.Fatalf("%d %s, want %d %s", p.Status, p.Type, tc.status, tc.typ)
			}
			if p.Title != http.StatusText(tc.status) || p.Detail == "" {
				t.Fatalf("title %q detail %q", p.Title, p.Detail)
			}
			for _, internal := range []string{"dynamo", "sqs", "deadletter:", "t-prod"} {
				if strings.Contains(p.Detail, internal) {
					t.Fatalf("detail %q carries %q", p.Detail, internal)
				}
			}
		})
	}
	if p := problemOf(&FieldError{Field: "limit", Reason: "x"}); fmt.Sprint(p.Extra["fields"]) != "[limit]" {
		t.Fatalf("fields %v", p.Extra["fields"])
	}
}
