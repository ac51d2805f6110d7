package recoverytest

import (
	"context"
	"sync"

	"github.com/runtwice/twice/shared/recovery"
)

// DeadLetters is the dead-letter sink: one record per key, like the real table's conditional
// put. The zero value is ready to use.
type DeadLetters struct {
	mu      sync.Mutex
	records map[string]recovery.DeadLetter
}

func (s *DeadLetters) Open(_ context.Context, d recovery.DeadLetter) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records == nil {
		s.records = map[string]recovery.DeadLetter{}
	}
	if _, ok := s.records[d.Key]; !ok {
		s.records[d.Key] = d
	}
	return nil
}

// All copies the records by key.
func (s *DeadLetters) All() map[string]recovery.DeadLetter {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]recovery.DeadLetter{}
	for k, v := range s.records {
		out[k] = v
	}
	return out
}
