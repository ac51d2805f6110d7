package recon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrBadEvent: the scheduler's input (or an on-demand request) is not a valid run request.
var ErrBadEvent = errors.New("recon: bad event")

// Event is the input of a run: the fixed JSON the EventBridge Scheduler target sends,
//
//	{"window_hours":25,"end_offset_minutes":5,"scheduled_time":"<aws.scheduler.scheduled-time>"}
//
// (the Scheduler substitutes the time the run was scheduled for, so its own retries, minutes
// later, compute the same window and run id; without it the window ends relative to now),
//
// or an explicit window for an on-demand run,
//
//	{"from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00Z"}
//
// An empty input, {} or null takes the Reconciler's defaults.
type Event struct {
	WindowHours      *int   `json:"window_hours,omitempty"`
	EndOffsetMinutes *int   `json:"end_offset_minutes,omitempty"`
	ScheduledTime    string `json:"scheduled_time,omitempty"`
	From             string `json:"from,omitempty"`
	To               string `json:"to,omitempty"`
	// UpToNow ends the window at this second instead of the scheduled window's end (an
	// operator's run: it reconciles everything so far, and a run a minute later is a new
	// run, not the stored report of the first).
	UpToNow bool `json:"up_to_now,omitempty"`
}

// Limits of Event's relative form.
const (
	maxWindowHours      = int(MaxWindow / time.Hour)
	maxEndOffsetMinutes = 24 * 60
	maxEventBytes       = 4 << 10
)

// ParseEvent reads an Event. Unknown fields are rejected, so a typo in the schedule's input
// fails the first run instead of silently reconciling the default window.
func ParseEvent(raw []byte) (Event, error) {
	var e Event
	raw = bytes.TrimSpace(raw)
	if len(raw) > maxEventBytes {
		return e, fmt.Errorf("%w: larger than %d bytes", ErrBadEvent, maxEventBytes)
	}
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return e, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	if dec.More() {
		return Event{}, fmt.Errorf("%w: trailing data", ErrBadEvent)
	}
	if strings.HasPrefix(e.ScheduledTime, "<aws.scheduler.") {
		e.ScheduledTime = "" // invoked outside the Scheduler (sam local invoke): no substitution
	}
	explicit := e.From != "" || e.To != ""
	switch {
	case e.UpToNow && (explicit || e.EndOffsetMinutes != nil || e.ScheduledTime != ""):
		return Event{}, fmt.Errorf("%w: up_to_now takes only window_hours", ErrBadEvent)
	case explicit && (e.WindowHours != nil || e.EndOffsetMinutes != nil || e.ScheduledTime != ""):
		return Event{}, fmt.Errorf("%w: give either from/to or window_hours/end_offset_minutes", ErrBadEvent)
	case explicit && (e.From == "" || e.To == ""):
		return Event{}, fmt.Errorf("%w: from and to go together", ErrBadEvent)
	case e.WindowHours != nil && (*e.WindowHours < 1 || *e.WindowHours > maxWindowHours):
		return Event{}, fmt.Errorf("%w: window_hours must be 1..%d", ErrBadEvent, maxWindowHours)
	case e.EndOffsetMinutes != nil && (*e.EndOffsetMinutes < 0 || *e.EndOffsetMinutes > maxEndOffsetMinutes):
		return Event{}, fmt.Errorf("%w: end_offset_minutes must be 0..%d", ErrBadEvent, maxEndOffsetMinutes)
	}
	if explicit {
		if _, err := e.parseExplicit(); err != nil {
			return Event{}, err
		}
	}
	if e.ScheduledTime != "" {
		if _, err := time.Parse(time.RFC3339, e.ScheduledTime); err != nil {
			return Event{}, fmt.Errorf("%w: scheduled_time is not an RFC 3339 time", ErrBadEvent)
		}
	}
	return e, nil
}

func (e Event) parseExplicit() (Window, error) {
	from, err := time.Parse(time.RFC3339, e.From)
	if err != nil {
		return Window{}, fmt.Errorf("%w: from is not an RFC 3339 time", ErrBadEvent)
	}
	to, err := time.Parse(time.RFC3339, e.To)
	if err != nil {
		return Window{}, fmt.Errorf("%w: to is not an RFC 3339 time", ErrBadEvent)
	}
	return Window{From: from, To: to}.normalized(), nil
}

// Window resolves e at now with the given defaults: relative to the scheduled time when given,
// else to now. The window is validated against now (ErrBadWindow).
func (e Event) Window(now time.Time, defaultHours int, defaultOffset time.Duration) (Window, error) {
	if e.From != "" {
		w, err := e.parseExplicit()
		if err != nil {
			return Window{}, err
		}
		return w, w.Validate(now)
	}
	base := now
	if e.ScheduledTime != "" {
		t, err := time.Parse(time.RFC3339, e.ScheduledTime)
		if err != nil {
			return Window{}, fmt.Errorf("%w: scheduled_time is not an RFC 3339 time", ErrBadEvent)
		}
		base = t
	}
	hours, offset := defaultHours, defaultOffset
	if e.WindowHours != nil {
		hours = *e.WindowHours
	}
	if e.EndOffsetMinutes != nil {
		offset = time.Duration(*e.EndOffsetMinutes) * time.Minute
	}
	if e.UpToNow {
		to := now.UTC().Truncate(time.Second)
		w := Window{From: to.Add(-time.Duration(hours) * time.Hour), To: to}
		return w, w.Validate(now)
	}
	w := DefaultWindow(base, hours, offset)
	return w, w.Validate(now)
}

// Handle is the reconciler Lambda's handler (EventBridge Scheduler delivers the schedule's
// fixed input as the event) and the on-demand path: parse, resolve the window, Run.
// A bad event returns an error matching ErrBadEvent or ErrBadWindow.
func (r *Reconciler) Handle(ctx context.Context, raw json.RawMessage) (Report, error) {
	e, err := ParseEvent(raw)
	if err != nil {
		return Report{}, err
	}
	w, err := e.Window(r.now(), r.windowHours(), r.endOffset())
	if err != nil {
		return Report{}, err
	}
	return r.Run(ctx, w)
}
