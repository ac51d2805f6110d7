package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"
)

// TestKill9KeepsState runs the real binary, kills it with SIGKILL after a payment whose
// webhook is held back, and checks that a restart on the same data directory replays the
// payment's key and sends the undelivered webhook.
func TestKill9KeepsState(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "providersim")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	const secret = "whsec_kill9"
	var (
		mu       sync.Mutex
		received []string
	)
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ev, err := webhook.ConstructEvent(body, r.Header.Get("Stripe-Signature"), secret)
		if err != nil {
			t.Errorf("unverifiable webhook: %v", err)
			w.WriteHeader(400)
			return
		}
		mu.Lock()
		received = append(received, string(ev.Type))
		mu.Unlock()
	}))
	defer hooks.Close()
	data := t.TempDir()
	start := func() (*exec.Cmd, string) {
		cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-data", data, "-webhook-url", hooks.URL)
		cmd.Env = append(os.Environ(), "TWICE_STRIPE_WEBHOOK_SECRET="+secret)
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatalf("no banner: %v", err)
		}
		m := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/v1`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("banner without address: %q", line)
		}
		go io.Copy(io.Discard, out)
		return cmd, "http://" + m[1]
	}
	call := func(method, u, key, body string) (int, http.Header, []byte) {
		req, _ := http.NewRequest(method, u, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth("sk_test_twice_local", "")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	form := url.Values{"amount": {"1500"}, "currency": {"usd"}, "payment_method": {"pm_card_visa"}, "confirm": {"true"}}.Encode()

	cmd, base := start()
	if st, _, b := call("POST", base+"/_sim/webhooks/pause", "", ""); st != 200 {
		t.Fatalf("pause: %d %s", st, b)
	}
	st, _, first := call("POST", base+"/v1/payment_intents", "kill9", form)
	if st != 200 {
		t.Fatalf("create: %d %s", st, first)
	}
	_ = cmd.Process.Kill() // SIGKILL: no Close, no flush
	_ = cmd.Wait()

	cmd, base = start()
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	st, hd, again := call("POST", base+"/v1/payment_intents", "kill9", form)
	if st != 200 || !bytes.Equal(first, again) || hd.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after kill -9: %d %s\nwant %s", st, again, first)
	}
	call("POST", base+"/_sim/webhooks/resume", "", "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(received)
		mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhooks after restart: %v", received)
		}
		time.Sleep(20 * time.Millisecond) // waiting on another process, not on a clock
	}
	if received[0] != "payment_intent.succeeded" {
		t.Fatalf("got %v", received)
	}
}
