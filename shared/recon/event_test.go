package recon

import (
	"errors"
	"testing"
	"time"
)

func TestParseEvent(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 7, 0, 0, time.UTC)
	cases := map[string]struct {
		in      string
		want    Window
		wantErr error
	}{
		"empty takes defaults":      {in: "", want: DefaultWindow(now, 25, 5*time.Minute)},
		"null takes defaults":       {in: "null", want: DefaultWindow(now, 25, 5*time.Minute)},
		"object takes defaults":     {in: "{}", want: DefaultWindow(now, 25, 5*time.Minute)},
		"schedule input":            {in: `{"window_hours":2,"end_offset_minutes":0}`, want: DefaultWindow(now, 2, 0)},
		"explicit window":           {in: `{"from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00+00:00"}`, want: Window{From: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)}},
		"scheduled time":            {in: `{"window_hours":25,"end_offset_minutes":5,"scheduled_time":"2026-11-29T11:00:00Z"}`, want: DefaultWindow(time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC), 25, 5*time.Minute)},
		"unsubstituted placeholder": {in: `{"scheduled_time":"<aws.scheduler.scheduled-time>"}`, want: DefaultWindow(now, 25, 5*time.Minute)},
		"scheduled time not a time": {in: `{"scheduled_time":"soon"}`, wantErr: ErrBadEvent},
		"scheduled in the future":   {in: `{"end_offset_minutes":0,"scheduled_time":"2026-11-29T13:00:00Z"}`, wantErr: ErrBadWindow},
		"scheduled time with from":  {in: `{"scheduled_time":"2026-11-29T11:00:00Z","from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00Z"}`, wantErr: ErrBadEvent},
		"unknown field":             {in: `{"window_hour":2}`, wantErr: ErrBadEvent},
		"both forms":                {in: `{"window_hours":2,"from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00Z"}`, wantErr: ErrBadEvent},
		"from alone":                {in: `{"from":"2026-11-28T00:00:00Z"}`, wantErr: ErrBadEvent},
		"zero hours":                {in: `{"window_hours":0}`, wantErr: ErrBadEvent},
		"too many hours":            {in: `{"window_hours":745}`, wantErr: ErrBadEvent},
		"negative offset":           {in: `{"end_offset_minutes":-1}`, wantErr: ErrBadEvent},
		"not a time":                {in: `{"from":"yesterday","to":"2026-11-29T00:00:00Z"}`, wantErr: ErrBadEvent},
		"reversed":                  {in: `{"from":"2026-11-29T00:00:00Z","to":"2026-11-28T00:00:00Z"}`, wantErr: ErrBadWindow},
		"in the future":             {in: `{"from":"2026-11-29T00:00:00Z","to":"2026-11-30T00:00:00Z"}`, wantErr: ErrBadWindow},
		"longer than the maximum":   {in: `{"from":"2026-09-01T00:00:00Z","to":"2026-11-29T00:00:00Z"}`, wantErr: ErrBadWindow},
		"trailing data":             {in: `{} {}`, wantErr: ErrBadEvent},
		"not an object":             {in: `[1]`, wantErr: ErrBadEvent},
		"wrong type":                {in: `{"window_hours":"25"}`, wantErr: ErrBadEvent},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := ParseEvent([]byte(tc.in))
			var w Window
			if err == nil {
				w, err = e.Window(now, DefaultWindowHours, DefaultEndOffset)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || w != tc.want {
				t.Fatalf("window %+v, err %v; want %+v", w, err, tc.want)
			}
		})
	}
}

func FuzzParseEvent(f *testing.F) {
	for _, s := range []string{"", "null", "{}", `{"window_hours":25,"end_offset_minutes":5}`,
		`{"from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00Z"}`, `{"window_hours":-1}`, `{"from":"x","to":"y"}`,
		`{"from":"2026-11-28T00:00:00.123456789+14:00","to":"2026-11-29T00:00:00-12:00"}`,
		`{"window_hours":25,"end_offset_minutes":5,"scheduled_time":"<aws.scheduler.scheduled-time>"}`,
		`{"scheduled_time":"2026-11-29T11:00:00Z"}`} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, err := ParseEvent(raw)
		if err != nil {
			if !errors.Is(err, ErrBadEvent) {
				t.Fatalf("error %v does not match ErrBadEvent", err)
			}
			return
		}
		w, err := e.Window(now, DefaultWindowHours, DefaultEndOffset)
		if err != nil {
			if !errors.Is(err, ErrBadWindow) {
				t.Fatalf("error %v does not match ErrBadWindow", err)
			}
			return
		}
		// Whatever was accepted is a window a run can use.
		if err := w.Validate(now); err != nil {
			t.Fatalf("accepted %q but window %+v is invalid: %v", raw, w, err)
		}
		if w.RunID() != (Window{From: w.From, To: w.To}).RunID() || w.From.Location() != time.UTC {
			t.Fatalf("window %+v not normalized", w)
		}
	})
}
