package inprocess

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/opsapi"
)

// fromIP is an HTTP client whose connections leave from ip (any 127/8 address is loopback on
// Linux), so a test can be two sources at once. It follows no redirects.
func fromIP(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// TestOperatorFailuresAreThrottled: on the running stack, wrong bearer tokens and wrong
// console logins from one address count together, on every route that takes the token;
// past the limit that address gets 429 problem+json with Retry-After, while a login from
// another address succeeds; the window is on the injected (fake) clock.
func TestOperatorFailuresAreThrottled(t *testing.T) {
	clk := clock.NewFake(testClockStart)
	s := newStack(t, Config{OperatorFailures: opsapi.FailureLimiter{Max: 5, Window: time.Minute, Clock: clk}})
	attacker, operator := fromIP("127.0.0.1"), fromIP("127.0.0.2")
	if _, err := operator.Get(s.APIURL() + "/healthz"); err != nil {
		t.Skipf("cannot send from 127.0.0.2: %v", err)
	}
	bearer := func(c *http.Client, path, tok string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", s.APIURL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	login := func(c *http.Client, tok string) *http.Response {
		t.Helper()
		resp, err := c.PostForm(s.APIURL()+"/ops/login", url.Values{"token": {tok}, "name": {"ana"}})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// Five failures, mixed: the operator API, the stack's own token routes, the login form.
	for i, r := range []*http.Response{bearer(attacker, "/ops/deadletters", "guess-1"), bearer(attacker, "/events?wait=0", "guess-2"),
		bearer(attacker, "/ops/_faults", "guess-3"), login(attacker, "guess-4"), login(attacker, "guess-5")} {
		if r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i+1, r.StatusCode)
		}
	}
	for name, r := range map[string]*http.Response{
		"bearer": bearer(attacker, "/ops/deadletters", s.cfg.OperatorToken), "login": login(attacker, s.cfg.OperatorToken),
		"feed": bearer(attacker, "/events?wait=0", s.cfg.OperatorToken),
	} {
		if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "60" ||
			r.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s from the blocked address: %d Retry-After %q %s", name, r.StatusCode, r.Header.Get("Retry-After"), r.Header.Get("Content-Type"))
		}
	}
	if r := login(operator, s.cfg.OperatorToken); r.StatusCode != http.StatusSeeOther || r.Header.Get("Set-Cookie") == "" {
		t.Fatalf("login from another address: %d", r.StatusCode)
	}
	if r := bearer(operator, "/ops/deadletters", s.cfg.OperatorToken); r.StatusCode != http.StatusOK {
		t.Fatalf("bearer from another address: %d", r.StatusCode)
	}
	clk.Advance(time.Minute)
	if r := bearer(attacker, "/ops/deadletters", s.cfg.OperatorToken); r.StatusCode != http.StatusOK {
		t.Fatalf("after the window: %d", r.StatusCode)
	}
}

// TestSlowBodyIsCutOff: a client that sends its headers and then a body a byte at a time
// (slowloris) is cut off at the read timeout, against the real server on loopback; the
// request never succeeds. With the default timeouts this is 10 s; here 400 ms.
func TestSlowBodyIsCutOff(t *testing.T) {
	const readTimeout = 400 * time.Millisecond
	s := newStack(t, Config{ReadTimeout: readTimeout})
	conn, err := net.Dial("tcp", s.apiLn.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"amount":2000,"currency":"usd","customer":"cus_slow","payment_method":"pm_card_visa"}`
	start := time.Now()
	if _, err := fmt.Fprintf(conn, "POST /payments HTTP/1.1\r\nHost: x\r\nIdempotency-Key: slow-1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body)); err != nil {
		t.Fatal(err)
	}
	// Trickle the body until the server closes the connection (a write fails) or the bound
	// passes; the read side tells what the server answered.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	type end struct {
		took   time.Duration
		answer string
	}
	closed := make(chan end, 1)
	go func() {
		b, _ := io.ReadAll(conn) // returns at EOF or reset: the server closed the connection
		closed <- end{time.Since(start), string(b)}
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case e := <-closed:
			if e.took > readTimeout+2*time.Second {
				t.Fatalf("closed after %s, want about %s", e.took, readTimeout)
			}
			if first, _, _ := strings.Cut(e.answer, "\r\n"); strings.Contains(first, " 20") {
				t.Fatalf("the slow request succeeded: %q", first)
			}
			first, _, _ := strings.Cut(e.answer, "\r\n")
			t.Logf("connection closed %s after the headers (read timeout %s), %d body bytes sent, answer %q",
				e.took.Round(time.Millisecond), readTimeout, i, first)
			return
		case <-ctx.Done():
			t.Fatalf("the connection is still open after %s, %d body bytes sent", time.Since(start), i)
		case <-tick.C:
			if i < len(body)-1 { // never the last byte: the body stays incomplete
				if _, err := conn.Write([]byte{body[i]}); err != nil && !errors.Is(err, net.ErrClosed) {
					// The server has gone; the reader reports when.
					continue
				}
			}
		}
	}
}

// TestIdleConnectionIsClosed: a keep-alive connection with no next request is closed at the
// idle timeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	s := newStack(t, Config{IdleTimeout: idle})
	conn, err := net.Dial("tcp", s.apiLn.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	one := make([]byte, 1)
	if _, err := conn.Read(one); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: %v after %s, want EOF", err, time.Since(start))
	}
	if took := time.Since(start); took > idle+2*time.Second {
		t.Fatalf("closed after %s, want about %s", took, idle)
	}
}

// TestServerTimeoutsDefault: the defaults bound a request's read (10 s), its answer
// (the request deadline plus 10 s) and an idle connection (60 s).
func TestServerTimeoutsDefault(t *testing.T) {
	c := Config{}
	c.defaults()
	s := &Stack{cfg: c}
	srv := s.server(http.NotFoundHandler())
	if srv.ReadTimeout != 10*time.Second || srv.ReadHeaderTimeout != 10*time.Second || srv.WriteTimeout != 39*time.Second ||
		srv.IdleTimeout != 60*time.Second {
		t.Fatalf("read %s header %s write %s idle %s", srv.ReadTimeout, srv.ReadHeaderTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
}
