package stripesim

import (
	"strings"
	"sync"
)

// Fault names accepted by POST /_sim/faults (DESIGN.md "Local contract").
const (
	FaultTimeoutAfterEffect = "timeout_after_effect" // do the effect, then never answer
	FaultHTTP500            = "http_500"             // 500 api_error, no effect
	FaultHTTP429            = "http_429"             // 429 rate_limit with Retry-After, no effect
	FaultLatency            = "latency"              // answer normally after LatencyMS
)

// Fault is one armed fault: it applies to the next Count /v1 requests whose path starts
// with PathPrefix (and whose method is Method, when set).
type Fault struct {
	PathPrefix  string `json:"path_prefix"`
	Fault       string `json:"fault"`
	Count       int    `json:"count"`
	RetryAfterS int    `json:"retry_after_s,omitempty"`
	LatencyMS   int    `json:"latency_ms,omitempty"`
	Method      string `json:"method,omitempty"`
}

// faultSet holds armed faults in arming order; the first match is consumed.
// Faults live in memory only: a restart disarms them.
type faultSet struct {
	mu    sync.Mutex
	armed []Fault
}

func (fs *faultSet) arm(f Fault) []Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.armed = append(fs.armed, f)
	return append([]Fault(nil), fs.armed...)
}

func (fs *faultSet) list() []Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]Fault{}, fs.armed...)
}

func (fs *faultSet) clear() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := len(fs.armed)
	fs.armed = nil
	return n
}

// take consumes one use of the first fault matching path and method.
func (fs *faultSet) take(path, method string) (Fault, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, f := range fs.armed {
		if !strings.HasPrefix(path, f.PathPrefix) || (f.Method != "" && !strings.EqualFold(f.Method, method)) {
			continue
		}
		fs.armed[i].Count--
		if fs.armed[i].Count <= 0 {
			fs.armed = append(fs.armed[:i], fs.armed[i+1:]...)
		}
		return f, true
	}
	return Fault{}, false
}

// throttled draws whether this request is over the simulated rate limit (Config.ThrottleRate).
func (s *Simulator) throttled() bool {
	if s.cfg.ThrottleRate <= 0 {
		return false
	}
	s.randMu.Lock()
	defer s.randMu.Unlock()
	return s.rnd.Float64() < s.cfg.ThrottleRate
}
