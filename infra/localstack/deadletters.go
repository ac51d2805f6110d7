package localstack

import (
	"context"
	"encoding/json"
	"time"

	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/store"
)

// deadLetters returns the sink recovery opens its dead-letter records through.
func (s *Stack) deadLetters() recovery.DeadLetterSink { return recoveryDeadLetters{s} }

type recoveryDeadLetters struct{ s *Stack }

// Open records a recovery that needs a person, once per key.
func (r recoveryDeadLetters) Open(ctx context.Context, d recovery.DeadLetter) error {
	doc, err := json.Marshal(d)
	if err != nil {
		return err
	}
	err = r.s.store.Put(ctx, "deadletters", store.Item{PK: d.Key, Doc: doc, IndexPK: "status#open",
		IndexSK: r.s.clock.Now().UTC().Format(time.RFC3339Nano) + "#" + d.Key}, store.Cond{Kind: store.NotExists})
	if err != nil && !isCondition(err) {
		return err
	}
	return nil
}

func isCondition(err error) bool {
	_, ok := err.(*store.ConditionError)
	return ok
}
