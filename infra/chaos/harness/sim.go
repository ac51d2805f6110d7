package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// simClient talks to the simulator's Stripe API and its /_sim controls.
type simClient struct {
	http   *http.Client
	base   string
	apiKey string
}

func (s *simClient) do(ctx context.Context, method, path string, body any, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return err
		}
	}
	status, b, err := s.send(ctx, method, path, payload)
	if err != nil {
		return err
	}
	if status >= 300 {
		return fmt.Errorf("chaos: %s %s: HTTP %d", method, path, status)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// observerTries bounds the tries of one of the harness's own requests that is answered 429, or
// 5xx for a read (a throttled run, -throttle, throttles the harness's reads as well).
const observerTries = 10

// send makes one request, repeating it after the Retry-After (default 1 s) while the answer is
// 429, or a 5xx to a GET, which is safe to repeat.
func (s *simClient) send(ctx context.Context, method, path string, payload []byte) (int, []byte, error) {
	for try := 1; ; try++ {
		req, err := http.NewRequestWithContext(ctx, method, s.base+path, bytes.NewReader(payload))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+s.apiKey)
		resp, err := s.http.Do(req)
		if err != nil {
			return 0, nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		again := resp.StatusCode == http.StatusTooManyRequests || (method == http.MethodGet && resp.StatusCode >= 500)
		if err != nil || !again || try == observerTries {
			return resp.StatusCode, b, err
		}
		wait := time.Second
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			wait = time.Duration(n) * time.Second
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, nil, ctx.Err()
		case <-t.C:
		}
	}
}

// simStats is the part of GET /_sim/stats the report uses.
type simStats struct {
	PaymentIntents int   `json:"payment_intents"`
	Requests       int64 `json:"requests"`
	FaultsInjected int64 `json:"faults_injected"`
	DeliveriesSent int64 `json:"deliveries_sent"`
	OutboxEntries  int   `json:"outbox_entries"`
}

func (s *simClient) stats(ctx context.Context) (simStats, error) {
	var st simStats
	err := s.do(ctx, http.MethodGet, "/_sim/stats", nil, &st)
	return st, err
}

// flush sends every delivery the simulator still holds, due or not, and says how many it sent.
func (s *simClient) flush(ctx context.Context) (int, error) {
	var out struct {
		Sent int `json:"sent"`
	}
	err := s.do(ctx, http.MethodPost, "/_sim/webhooks/flush", nil, &out)
	return out.Sent, err
}

// fault is the body of POST /_sim/faults.
type fault struct {
	PathPrefix  string `json:"path_prefix"`
	Fault       string `json:"fault"`
	Count       int    `json:"count"`
	RetryAfterS int    `json:"retry_after_s,omitempty"`
	LatencyMS   int    `json:"latency_ms,omitempty"`
	Method      string `json:"method,omitempty"`
}

func (s *simClient) arm(ctx context.Context, f fault) error {
	return s.do(ctx, http.MethodPost, "/_sim/faults", f, nil)
}

func (s *simClient) clearFaults(ctx context.Context) error {
	return s.do(ctx, http.MethodDelete, "/_sim/faults", nil, nil)
}

// recentEvents lists the ids of the newest events.
func (s *simClient) recentEvents(ctx context.Context, limit int) ([]string, error) {
	var out struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := s.do(ctx, http.MethodGet, fmt.Sprintf("/_sim/events?limit=%d", limit), nil, &out); err != nil {
		return nil, err
	}
	ids := make([]string, len(out.Data))
	for i, d := range out.Data {
		ids[i] = d.ID
	}
	return ids, nil
}

type replay struct {
	EventID string `json:"event_id"`
	Times   int    `json:"times"`
	Shuffle bool   `json:"shuffle"`
	DelayMS int64  `json:"delay_ms,omitempty"`
}

func (s *simClient) replay(ctx context.Context, r replay) error {
	return s.do(ctx, http.MethodPost, "/_sim/webhooks/replay", r, nil)
}

// intents lists every PaymentIntent through the Stripe API, page by page.
func (s *simClient) intents(ctx context.Context) ([]Intent, error) {
	var all []Intent
	after := ""
	for range 100_000 { // bounded: 10 M intents
		q := url.Values{"limit": {"100"}}
		if after != "" {
			q.Set("starting_after", after)
		}
		status, b, err := s.send(ctx, http.MethodGet, "/v1/payment_intents?"+q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		if status != http.StatusOK {
			return nil, fmt.Errorf("chaos: list PaymentIntents: HTTP %d", status)
		}
		page, more, err := parseIntentPage(b)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if !more {
			return all, nil
		}
		after = page[len(page)-1].ID
	}
	return all, fmt.Errorf("chaos: list PaymentIntents: too many pages")
}
