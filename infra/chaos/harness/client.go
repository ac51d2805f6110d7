package harness

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Answer is one HTTP answer to a POST /payments.
type Answer struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
}

// final reports whether an answer is one the key keeps forever (a created payment, a decline, a
// permanent rejection): every later request with the key must get it back byte for byte.
func (a Answer) final() bool {
	return a.Status == http.StatusCreated || a.Status == http.StatusPaymentRequired || a.Status == http.StatusUnprocessableEntity
}

// accepted reports whether the stack took responsibility for the payment.
func (a Answer) accepted() bool {
	return a.Status == http.StatusCreated || a.Status == http.StatusPaymentRequired || a.Status == http.StatusAccepted
}

// ledger is what the clients saw of one logical payment.
type ledger struct {
	mu       sync.Mutex
	id       string   // the payment id from any accepted answer
	accepted bool     // a 201, 402 or 202 at least once
	finals   []Answer // every final answer, in the order received
	settled  bool
	counted  bool // the progress bar has counted it settled
}

func (l *ledger) isAccepted() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

func (l *ledger) record(a Answer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.accepted() {
		l.accepted = true
		if l.id == "" {
			l.id = paymentID(a.Body)
		}
	}
	if a.final() {
		l.finals = append(l.finals, a)
		l.settled = true
	}
}

// client behaves like a careful integrator: the same key on every retry, Retry-After honoured on
// 409 and 503, bounded backoff with jitter on 5xx and dropped connections, and a time bound.
type client struct {
	http     *http.Client
	base     func() string
	requests *atomic.Int64
	answers  *counts
	attempts int           // retries of 5xx and transport errors
	budget   time.Duration // time bound of one send, 409 waits included
}

// send posts the payment until it has an answer worth keeping (final or 202) or gives up; it
// returns the last answer and whether it got one.
func (c *client) send(ctx context.Context, p Payment, rng *rand.Rand, l *ledger) (Answer, bool) {
	ctx, cancel := context.WithTimeout(ctx, c.budget)
	defer cancel()
	failures := 0
	for {
		a, retryAfter, err := c.post(ctx, p)
		var wait time.Duration
		switch {
		case err == nil && (a.final() || a.Status == http.StatusAccepted):
			l.record(a)
			return a, true
		case err == nil && a.Status == http.StatusConflict:
			wait = max(retryAfter, 100*time.Millisecond)
		case err != nil || a.Status >= 500:
			failures++
			if failures > c.attempts {
				return a, false
			}
			backoff := min(2*time.Second, 100*time.Millisecond<<min(failures, 5))
			wait = max(retryAfter, time.Duration(rng.Int64N(int64(backoff))+1))
		default: // 4xx we did not expect: a real client stops and a person looks
			l.record(a)
			return a, true
		}
		select {
		case <-ctx.Done():
			return a, false
		case <-time.After(wait):
		}
	}
}

func (c *client) post(ctx context.Context, p Payment) (Answer, time.Duration, error) {
	return c.postTo(ctx, "/payments", p.Key, p.Body)
}

// postTo posts body to path under key and reads the answer, with its Retry-After (capped).
func (c *client) postTo(ctx context.Context, path, key, body string) (Answer, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base()+path, strings.NewReader(body))
	if err != nil {
		return Answer{}, 0, err
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	c.requests.Add(1)
	resp, err := c.http.Do(req)
	if err != nil {
		c.answers.add("conn")
		return Answer{}, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.answers.add("conn")
		return Answer{}, 0, err
	}
	c.answers.add(strconv.Itoa(resp.StatusCode))
	wait := time.Duration(-1) // no Retry-After
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		wait = min(time.Duration(s)*time.Second, 10*time.Second)
	}
	return Answer{Status: resp.StatusCode, Body: string(b)}, wait, nil
}

// get reads GET /payments/{id}: the status, or found=false on 404.
func (c *client) get(ctx context.Context, id string) (status string, found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base()+"/payments/"+id, nil)
	if err != nil {
		return "", false, err
	}
	c.requests.Add(1)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		return statusOf(string(b)), true, nil
	case http.StatusNotFound:
		return "", false, nil
	default:
		return "", false, &httpError{resp.StatusCode}
	}
}

type httpError struct{ status int }

func (e *httpError) Error() string { return "chaos: HTTP " + strconv.Itoa(e.status) }

// counts is a counter per name, safe for concurrent use.
type counts struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counts) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[name]++
}

func (c *counts) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.m))
	for k, v := range c.m {
		out[k] = v
	}
	return out
}
