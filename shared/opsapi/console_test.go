package opsapi_test

import (
	"bytes"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// consoleClient logs in through the form and keeps the session cookie.
func consoleClient(t *testing.T, f fixture) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(f.srv.URL+"/ops/login", url.Values{"token": {token}, "name": {"Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/ops/" {
		t.Fatalf("login ended at %s with %d", resp.Request.URL.Path, resp.StatusCode)
	}
	return c
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func TestConsole(t *testing.T) {
	f := newFixture(t)

	t.Run("without a session it asks to sign in", func(t *testing.T) {
		resp, err := (&http.Client{}).Get(f.srv.URL + "/ops/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Request.URL.Path != "/ops/login" {
			t.Errorf("ended at %s", resp.Request.URL.Path)
		}
	})
	t.Run("a wrong token is refused", func(t *testing.T) {
		resp, err := http.PostForm(f.srv.URL+"/ops/login", url.Values{"token": {"nope"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || len(resp.Cookies()) != 0 {
			t.Errorf("status %d cookies %v", resp.StatusCode, resp.Cookies())
		}
	})

	c := consoleClient(t, f)
	u, _ := url.Parse(f.srv.URL + "/ops/")
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Value == token || strings.Contains(ck.Value, token) {
			t.Errorf("the cookie holds the token itself")
		}
	}
	code, list := get(t, c, f.srv.URL+"/ops/")
	if code != 200 || !strings.Contains(list, f.record.ID) || !strings.Contains(list, "<svg") {
		t.Fatalf("list: %d, record or chart missing", code)
	}
	if strings.Contains(list, "<script") {
		t.Errorf("the console must work without JavaScript")
	}
	code, detail := get(t, c, f.srv.URL+"/ops/records/"+f.record.ID)
	if code != 200 || !strings.Contains(detail, "evt_seed") || !strings.Contains(detail, "opened") {
		t.Fatalf("detail: %d", code)
	}
	m := csrfField.FindStringSubmatch(detail)
	if m == nil {
		t.Fatal("no CSRF field on the detail page")
	}

	tests := map[string]struct {
		path       string
		form       url.Values
		wantStatus int
		wantBody   string
	}{
		"forged form without csrf":    {"/ops/records/" + f.record.ID + "/retry", url.Values{}, 403, "expired"},
		"override without a note":     {"/ops/records/" + f.record.ID + "/override", url.Values{"csrf": {m[1]}, "outcome": {"paid"}}, 400, "needs an outcome and a note"},
		"unknown record":              {"/ops/records/dl_nope/resolve", url.Values{"csrf": {m[1]}}, 404, "No such record"},
		"retry with the session csrf": {"/ops/records/" + f.record.ID + "/retry", url.Values{"csrf": {m[1]}}, 200, "Retry queued."},
	}
	for _, name := range []string{"forged form without csrf", "override without a note", "unknown record", "retry with the session csrf"} {
		tc := tests[name]
		t.Run(name, func(t *testing.T) {
			resp, err := c.PostForm(f.srv.URL+tc.path, tc.form)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus || !strings.Contains(b.String(), tc.wantBody) {
				t.Errorf("status %d, want %d; body has %q: %v", resp.StatusCode, tc.wantStatus, tc.wantBody, strings.Contains(b.String(), tc.wantBody))
			}
		})
	}
	f.deliver(t)
	if f.sent.n != 1 {
		t.Errorf("%d retries sent, want 1", f.sent.n)
	}
	code, page := get(t, c, f.srv.URL+"/ops/records/"+f.record.ID)
	if code != 200 || !strings.Contains(page, "operator:Ada") {
		t.Errorf("audit trail lacks the operator's name")
	}
	code, lookup := get(t, c, f.srv.URL+"/ops/lookup?by=event_id&value=evt_seed")
	if code != 200 || !strings.Contains(lookup, "webhook stripe") {
		t.Errorf("lookup: %d", code)
	}
}
