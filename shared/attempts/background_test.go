package attempts

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBackgroundRecordsBehindTheCaller: Record returns while the store is held up, Flush
// waits for what came before it, Close stores the rest, and a Record after Close is stored in
// line: nothing queued is lost, and a request's cancelled context does not cancel its row.
func TestBackgroundRecordsBehindTheCaller(t *testing.T) {
	var c collector
	gate := make(chan struct{})
	held := func(ctx context.Context, a Attempt) {
		<-gate
		if ctx.Err() != nil {
			t.Errorf("attempt %s recorded with a cancelled context", a.ID)
		}
		c.record(ctx, a)
	}
	bg := NewBackground(held, 4)
	ctx, cancel := context.WithCancel(context.Background())
	for i := range 3 {
		bg.Record(ctx, Attempt{ID: fmt.Sprint("att_", i)}) // returns with the store held up
	}
	cancel() // the request is over
	if n := len(c.attempts()); n != 0 {
		t.Fatalf("%d attempts stored before the store was let go", n)
	}
	flushed := make(chan error)
	go func() { flushed <- bg.Flush(context.Background()) }()
	close(gate)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if n := len(c.attempts()); n != 3 {
		t.Fatalf("after Flush: %d attempts stored, want 3", n)
	}
	for i := 3; i < 10; i++ { // more than the queue holds
		bg.Record(context.Background(), Attempt{ID: fmt.Sprint("att_", i)})
	}
	bg.Close()
	if n := len(c.attempts()); n != 10 {
		t.Fatalf("after Close: %d attempts stored, want 10", n)
	}
	bg.Record(context.Background(), Attempt{ID: "att_late"})
	if n := len(c.attempts()); n != 11 {
		t.Fatalf("a Record after Close: %d attempts stored, want 11", n)
	}
	if err := bg.Flush(context.Background()); err != nil {
		t.Fatalf("Flush after Close: %v", err)
	}
}

// TestReplaysGoToTheirRecorder: an exchange answered by a replay is filed through Replays, any
// other through Record; without Replays, every exchange goes to Record.
func TestReplaysGoToTheirRecorder(t *testing.T) {
	answer := func(replayed bool) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if replayed {
				w.Header().Set("Idempotent-Replayed", "true")
			}
			w.WriteHeader(http.StatusCreated)
		})
	}
	for name, c := range map[string]struct {
		replays            bool
		replayed           bool
		toRecord, toReplay int
	}{
		"first answer":             {replays: true, replayed: false, toRecord: 1},
		"replayed answer":          {replays: true, replayed: true, toReplay: 1},
		"replayed, no Replays set": {replays: false, replayed: true, toRecord: 1},
	} {
		t.Run(name, func(t *testing.T) {
			var rec, rep collector
			api := API{Record: rec.record}
			if c.replays {
				api.Replays = rep.record
			}
			r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{}`))
			rw, file := api.Begin(httptest.NewRecorder(), r)
			answer(c.replayed).ServeHTTP(rw, r)
			file("payments.create", "local", "pay_1")
			if len(rec.attempts()) != c.toRecord || len(rep.attempts()) != c.toReplay {
				t.Fatalf("Record got %d, Replays got %d; want %d, %d", len(rec.attempts()), len(rep.attempts()), c.toRecord, c.toReplay)
			}
		})
	}
}
