package idempotency

import (
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/runtwice/twice/shared/problem"
)

// Header names of the IETF Idempotency-Key draft and of Stripe's replay marker.
const (
	HeaderKey      = "Idempotency-Key"
	HeaderReplayed = "Idempotent-Replayed"
)

// ReadRequest reads what every idempotent HTTP request carries, the Idempotency-Key header and
// a body of at most maxBody bytes. When either is unusable it answers the problem (400, or 413
// for a body too large) and reports false.
func ReadRequest(w http.ResponseWriter, r *http.Request, maxBody int64) (key string, body []byte, ok bool) {
	if n := len(r.Header.Values(HeaderKey)); n > 1 {
		// Which one would count is a guess: refuse rather than use the first silently.
		problem.Write(w, problem.New(problem.KeyInvalid, "Send one Idempotency-Key header; this request has "+strconv.Itoa(n)+"."))
		return "", nil, false
	}
	key = r.Header.Get(HeaderKey)
	if err := ValidateKey(key); err != nil {
		if errors.Is(err, ErrKeyMissing) {
			problem.Write(w, problem.New(problem.KeyMissing, "This request needs an Idempotency-Key header."))
		} else {
			problem.Write(w, problem.New(problem.KeyInvalid, "The Idempotency-Key header must be 1-255 visible ASCII characters."))
		}
		return "", nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			problem.Write(w, problem.New(problem.BodyTooLarge, "The request body is larger than "+strconv.FormatInt(maxBody, 10)+" bytes."))
		} else {
			problem.Write(w, problem.New(problem.MalformedRequest, "The request body could not be read."))
		}
		return "", nil, false
	}
	return key, body, true
}

// WriteOutcome answers an idempotent HTTP request from what Run (or Do) returned: the one
// mapping of a key's outcomes to HTTP. New writes the operation's response; Replay and Pending
// the stored one with Idempotent-Replayed: true; InProgress 409 with Retry-After; Mismatch 422
// naming the fields; a lost lease 409; any other error 500, logged, and never its text.
func (k *Keeper) WriteOutcome(w http.ResponseWriter, r *http.Request, out Outcome, err error) {
	switch {
	case errors.Is(err, ErrLeaseLost):
		w.Header().Set("Retry-After", "1")
		problem.Write(w, problem.New(problem.KeyInProgress, "Another request with this Idempotency-Key took over; retry to get its result."))
		return
	case err != nil:
		k.log().ErrorContext(r.Context(), "idempotent request", "error", err)
		problem.Write(w, problem.New(problem.Internal, "The request could not be recorded; it is safe to retry with the same Idempotency-Key."))
		return
	}
	switch out.Kind {
	case New:
		writeResponse(w, *out.Response, false)
	case Replay, Pending:
		writeResponse(w, *out.Response, true)
	case InProgress:
		w.Header().Set("Retry-After", strconv.Itoa(int(out.RetryAfter.Seconds()+0.999)))
		problem.Write(w, problem.New(problem.KeyInProgress, "A request with this Idempotency-Key is still being processed."))
	case Mismatch:
		problem.Write(w, problem.New(problem.KeyReused, "This Idempotency-Key was used with a different request body.").WithFields(out.Fields))
	}
}

func writeResponse(w http.ResponseWriter, resp Response, replayed bool) {
	h := w.Header()
	for _, k := range slices.Sorted(maps.Keys(resp.Header)) {
		h.Set(k, resp.Header[k])
	}
	if replayed {
		h.Set(HeaderReplayed, "true")
	}
	h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}
