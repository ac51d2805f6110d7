package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/runtwice/twice/shared/problem"
	"github.com/runtwice/twice/shared/redact/header"
	"github.com/runtwice/twice/shared/webhooks"
)

// Pattern is the ServeMux pattern the handler expects; it reads the {provider} wildcard.
const Pattern = "POST /webhooks/{provider}"

// DefaultMaxBody caps a delivery body. A Delivery travels as JSON with the body base64-encoded
// (4/3 larger): 512 KiB becomes about 683 KiB, inside SQS's 1 MiB message limit with room for the
// envelope. Stripe and Standard Webhooks events are a few KiB.
const DefaultMaxBody = 512 << 10

// Queue takes a verified delivery. A nil error means it is durably accepted: the handler then
// answers 200 and the provider stops retrying.
type Queue interface {
	Enqueue(ctx context.Context, d webhooks.Delivery) error
}

// Observer is told about every delivery, accepted or rejected, for the attempt log. It is called
// synchronously before the response is written, so it should be quick.
type Observer interface {
	Observe(ctx context.Context, rec Receipt)
}

// Receipt is one inbound delivery as the handler received it, accepted or refused: an
// Observer turns it into the attempt log's entry.
type Receipt struct {
	Provider string
	EventID  string // empty unless verified
	Status   int
	// Err is the real reason for a non-200 answer (a webhooks sentinel, or the queue's error):
	// for operators, never for the caller.
	Err error
	// Header is a copy of the request headers with signatures and credentials masked
	// (header.Mask).
	Header http.Header
	Body   []byte // nil when over the cap
	// Source is where the delivery came from: the peer address as the server saw it.
	Source     string
	ReceivedAt time.Time
	Duration   time.Duration
}

// Handler is the fast webhook ingest: verify, enqueue, 200. Nothing slow happens inline.
// Build it as a literal; Verifiers and Queue are required.
type Handler struct {
	Verifiers webhooks.Verifiers
	Queue     Queue

	// Observer, if set, is called for every delivery.
	Observer Observer
	// Log receives one line per delivery (default slog.Default()).
	Log *slog.Logger
	// Now is the clock for ReceivedAt and durations (default time.Now).
	Now func() time.Time
	// MaxBody is the body cap in bytes (default DefaultMaxBody).
	MaxBody int64
}

func (h *Handler) now() time.Time {
	if h.Now == nil {
		return time.Now()
	}
	return h.Now()
}

func (h *Handler) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}

var _ http.Handler = (*Handler)(nil)

// Generic details: the same text for every cause of a status, so a response tells a forger
// nothing about which check failed.
const (
	detailRejected    = "The webhook could not be verified."
	detailUnknown     = "No webhook endpoint here."
	detailTooLarge    = "The webhook body is too large."
	detailUnavailable = "The webhook could not be accepted now; retry later."
)

// ServeHTTP implements POST /webhooks/{provider}.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	start := h.now()
	rec := Receipt{Provider: r.PathValue("provider"), ReceivedAt: start, Source: r.RemoteAddr}
	defer func() {
		rec.Duration = h.now().Sub(start)
		if h.Observer != nil {
			rec.Header = header.Mask(r.Header)
			h.Observer.Observe(ctx, rec)
		}
	}()
	// The provider name comes from the path: cap it before it reaches a log line.
	log := h.log().With("provider", capField(rec.Provider))

	v, err := h.Verifiers.Verifier(ctx, rec.Provider)
	if err != nil {
		if errors.Is(err, webhooks.ErrUnknownProvider) {
			log.WarnContext(ctx, "webhook for unknown provider")
			refuse(w, &rec, err, problem.New(problem.NotFound, detailUnknown))
			return
		}
		// Secrets not loadable: refuse with 503 so the provider retries later.
		log.ErrorContext(ctx, "webhook verifier unavailable", "err", err)
		refuse(w, &rec, err, unavailable())
		return
	}

	max := h.MaxBody
	if max <= 0 {
		max = DefaultMaxBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			log.WarnContext(ctx, "webhook rejected", "reason", webhooks.ErrTooLarge.Error(), "limit", max)
			refuse(w, &rec, webhooks.ErrTooLarge, problem.New(problem.BodyTooLarge, detailTooLarge))
			return
		}
		log.WarnContext(ctx, "webhook body unreadable", "err", err)
		refuse(w, &rec, err, problem.New(problem.WebhookUnverified, detailRejected))
		return
	}
	rec.Body = body

	if err := v.Verify(r.Header, body); err != nil {
		// The verifier's errors name the failed check, never a secret or a signature.
		log.WarnContext(ctx, "webhook rejected", "reason", err.Error(), "bytes", len(body),
			"claimed_event_id", capField(claimedID(r.Header, body)), "source", capField(r.RemoteAddr))
		refuse(w, &rec, err, problem.New(problem.WebhookUnverified, detailRejected))
		return
	}

	d := webhooks.NewDelivery(rec.Provider, r.Header, body, start)
	rec.EventID = d.EventID
	log = log.With("event_id", d.EventID)
	if err := h.Queue.Enqueue(ctx, d); err != nil {
		log.ErrorContext(ctx, "webhook verified but not enqueued", "err", err)
		refuse(w, &rec, err, unavailable())
		return
	}
	if d.EventID == "" {
		log.WarnContext(ctx, "webhook verified without an event id; the worker will dead-letter it")
	}
	rec.Status = http.StatusOK
	log.InfoContext(ctx, "webhook accepted", "bytes", len(body))
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Content-Length", strconv.Itoa(len(okBody)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(okBody)
}

var okBody = []byte(`{"received":true}`)

// claimedID is the event id an unverified delivery claims (its Webhook-Id header, or the
// body's top-level "id"): for the log line only, never to file it under.
func claimedID(h http.Header, body []byte) string {
	if id := h.Get(webhooks.StandardIDHeader); id != "" {
		return id
	}
	var ev struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &ev) != nil {
		return ""
	}
	return ev.ID
}

// maxLogField caps a string from the request before it is logged.
const maxLogField = 64

func capField(s string) string {
	if len(s) <= maxLogField {
		return s
	}
	return strings.ToValidUTF8(s[:maxLogField], "") + "…[+" + strconv.Itoa(len(s)-maxLogField) + " bytes]"
}

// refuse answers p, the one way a delivery is refused, and records its status and cause on
// the delivery's receipt.
func refuse(w http.ResponseWriter, rec *Receipt, cause error, p problem.Problem) {
	rec.Status, rec.Err = p.Status, cause
	problem.Write(w, p)
}

// unavailable is the answer when the webhook cannot be accepted now: the provider retries.
func unavailable() problem.Problem {
	p := problem.New(problem.Unavailable, detailUnavailable)
	p.RetryAfter = 5
	return p
}
