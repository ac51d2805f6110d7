package stripesim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"
	bolt "go.etcd.io/bbolt"
)

// emitter records events inside the transaction of the state change that caused them,
// and queues their delivery in the outbox in that same transaction.
type emitter struct {
	s         *Simulator
	tx        *bolt.Tx
	now       time.Time
	requestID string
	idemKey   string
	silent    bool // record the event but never send it (a divergence control)
}

func (em *emitter) emit(typ, objectID string, object []byte) error {
	return em.emitChange(typ, objectID, object, nil)
}

// emitChange is emit with previous_attributes.
func (em *emitter) emitChange(typ, objectID string, object, previous []byte) error {
	events := bucket(em.tx, bucketEvents)
	id, err := newID(events, "evt_")
	if err != nil {
		return err
	}
	ev := Event{ID: id, Object: "event", APIVersion: apiVersion, Created: em.now.Unix(),
		Data: EventData{Object: object, PreviousAttributes: previous}, PendingWebhooks: 1, Type: typ,
		Request: EventRequest{ID: strPtr(em.requestID), IdempotencyKey: strPtr(em.idemKey)}}
	se := storedEvent{Type: typ, ObjectID: objectID, Created: ev.Created, State: DeliveryPending}
	switch {
	case em.silent:
		se.State = DeliverySuppressed
	case em.s.cfg.WebhookURL == "":
		se.State = DeliveryDisabled
	default:
		dropped, err := takeDrop(em.tx)
		if err != nil {
			return err
		}
		dropped = dropped || dropByRule(em.tx, id, object)
		if dropped {
			se.State = DeliveryDropped
			em.s.log.Info("webhook dropped on request", "event_id", id, "type", typ)
		} else if err := enqueue(em.tx, delivery{EventIDs: []string{id}, NextAt: em.now.UnixNano(), CreatedAt: em.now.UnixNano()}); err != nil {
			return err
		}
	}
	if err := events.Put([]byte(id), jsonBody(ev)); err != nil {
		return err
	}
	if err := addCount(em.tx, bucketEvents, 1); err != nil { // a new id: never a rewrite
		return err
	}
	return putJSON(bucket(em.tx, bucketEvState), []byte(id), se)
}

// takeDrop consumes one armed webhook drop, if any.
func takeDrop(tx *bolt.Tx) (bool, error) {
	meta := bucket(tx, bucketMeta)
	raw := meta.Get(metaDropWebhooks)
	if len(raw) != 8 {
		return false, nil
	}
	n := be64u(raw)
	if n == 0 {
		return false, nil
	}
	return true, meta.Put(metaDropWebhooks, be64(n-1))
}

func enqueue(tx *bolt.Tx, d delivery) error {
	ob := bucket(tx, bucketOutbox)
	seq, err := ob.NextSequence()
	if err != nil {
		return err
	}
	return putJSON(ob, be64(seq), d)
}

func (s *Simulator) paused() bool {
	var p bool
	_ = s.db.View(func(tx *bolt.Tx) error {
		p = len(bucket(tx, bucketMeta).Get(metaPaused)) > 0
		return nil
	})
	return p
}

// maxPass bounds the outbox entries sent in one Deliver pass.
const maxPass = 512

type dueEntry struct {
	key    []byte
	d      delivery
	events [][]byte // raw event JSON for d.EventIDs
}

// Deliver sends every due outbox entry once (in parallel up to SenderConcurrency;
// the events of one entry in order) and records the results. It returns the number of
// events acknowledged with a 2xx. Start calls it in a loop; tests may call it directly
// with a fake clock instead.
func (s *Simulator) Deliver(ctx context.Context) (int, error) { return s.deliver(ctx, false) }

// deliver is Deliver; force also sends entries still waiting for their retry time.
func (s *Simulator) deliver(ctx context.Context, force bool) (int, error) {
	s.deliverMu.Lock()
	defer s.deliverMu.Unlock()
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if s.cfg.WebhookURL == "" || s.paused() {
		return 0, nil
	}
	now := s.now()
	var due []dueEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		events := bucket(tx, bucketEvents)
		c := bucket(tx, bucketOutbox).Cursor()
		for k, v := c.First(); k != nil && len(due) < maxPass; k, v = c.Next() {
			var d delivery
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("stripesim: outbox entry: %w", err)
			}
			if d.NextAt > now.UnixNano() && !force {
				continue
			}
			e := dueEntry{key: bytes.Clone(k), d: d}
			for _, id := range d.EventIDs {
				raw := events.Get([]byte(id))
				if raw == nil {
					return fmt.Errorf("%w: outbox names missing event %s", errCorrupt, id)
				}
				e.events = append(e.events, bytes.Clone(raw))
			}
			due = append(due, e)
		}
		return nil
	})
	if err != nil || len(due) == 0 {
		return 0, err
	}
	results := make([]entryResult, len(due))
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.cfg.SenderConcurrency)
	for i := range due {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = s.sendEntry(ctx, &due[i], now)
		}()
	}
	wg.Wait()
	// One transaction records the whole pass, and it joins the creates' group commit.
	total := 0
	err = s.commit(ctx, func(tx *bolt.Tx) error {
		total = 0
		for i := range due {
			n, err := s.record(tx, &due[i], results[i], now)
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.stats.sent.Add(int64(total))
	return total, nil
}

// entryResult is how far sending one outbox entry got.
type entryResult struct {
	sent   int   // events acknowledged, from Pos on
	failed bool  // the next event was not acknowledged
	status int   // its HTTP status, 0 for a transport error
	err    error // its transport error
}

// sendEntry posts the entry's events in order from Pos, stopping at the first failure.
func (s *Simulator) sendEntry(ctx context.Context, e *dueEntry, now time.Time) entryResult {
	var r entryResult
	for i := e.d.Pos; i < len(e.events); i++ {
		status, err := s.post(ctx, e.events[i], now)
		if err == nil && status/100 == 2 {
			r.sent++
			continue
		}
		r.failed, r.status, r.err = true, status, err
		s.stats.sendFailures.Add(1)
		s.log.Warn("webhook delivery failed; will retry", "event_id", e.d.EventIDs[i], "status", status,
			"attempt", e.d.Attempts+1)
		break
	}
	return r
}

// record stores the outcome of one entry: delivered events, and either the entry's
// removal or its next attempt (full-jitter backoff), or giving up after RetryHorizon.
func (s *Simulator) record(tx *bolt.Tx, e *dueEntry, r entryResult, now time.Time) (int, error) {
	events := bucket(tx, bucketEvState)
	ob := bucket(tx, bucketOutbox)
	pos := e.d.Pos
	for i := pos; i < pos+r.sent; i++ {
		if err := updateEvent(events, e.d.EventIDs[i], func(se *storedEvent) {
			se.State, se.Attempts, se.Deliveries = DeliveryDelivered, se.Attempts+1, se.Deliveries+1
			se.LastStatus, se.LastError, se.DeliveredAt = 200, "", now.Unix()
		}); err != nil {
			return 0, err
		}
	}
	if !r.failed {
		return r.sent, ob.Delete(e.key)
	}
	d := e.d
	d.Pos = pos + r.sent
	d.Attempts++
	giveUp := now.Sub(time.Unix(0, d.CreatedAt)) > s.cfg.RetryHorizon
	d.NextAt = now.Add(s.backoff(d.Attempts)).UnixNano()
	msg := ""
	if r.err != nil {
		msg = "transport error" // the error text may carry local addresses; keep the state terse
	}
	if err := updateEvent(events, d.EventIDs[d.Pos], func(se *storedEvent) {
		se.Attempts++
		se.LastStatus, se.LastError = r.status, msg
		if giveUp && se.Deliveries == 0 {
			se.State = DeliveryFailed
		}
	}); err != nil {
		return 0, err
	}
	if giveUp {
		return r.sent, ob.Delete(e.key)
	}
	return r.sent, putJSON(ob, e.key, d)
}

func updateEvent(b *bolt.Bucket, id string, f func(*storedEvent)) error {
	var se storedEvent
	found, err := getJSON(b, []byte(id), &se)
	if err != nil || !found {
		return err
	}
	f(&se)
	return putJSON(b, []byte(id), se)
}

// backoff is full jitter over an exponential ceiling.
func (s *Simulator) backoff(attempt int) time.Duration {
	ceil := s.cfg.RetryMax
	if attempt < 40 {
		if c := s.cfg.RetryBase << attempt; c > 0 && c < ceil {
			ceil = c
		}
	}
	return time.Duration(s.int64n(int64(ceil) + 1))
}

// post sends one event signed the way Stripe signs: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">.
func (s *Simulator) post(ctx context.Context, body []byte, now time.Time) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	req.Header.Set("Stripe-Signature", SignatureHeader(body, s.cfg.WebhookSecret, now))
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// SignatureHeader is the Stripe-Signature header value for payload signed at t.
func SignatureHeader(payload []byte, secret string, t time.Time) string {
	return fmt.Sprintf("t=%d,v1=%x", t.Unix(), webhook.ComputeSignature(t, payload, secret))
}
