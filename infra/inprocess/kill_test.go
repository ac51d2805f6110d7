package inprocess

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/backfill"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
)

// process is the real infra/local binary, so kill -9 is a real kill.
type process struct {
	t       *testing.T
	extra   []string
	bin     string
	data    string
	mu      sync.Mutex // guards api and sim, which a restart may move
	api     string
	sim     string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	logPath string
}

func (p *process) apiAddr() string { a, _ := p.addrs(); return a }
func (p *process) simAddr() string { _, s := p.addrs(); return s }

func (p *process) addrs() (api, sim string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.api, p.sim
}

var localBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "twice-local")
	if err != nil {
		panic(err)
	}
	localBinary = filepath.Join(dir, "twice-local")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildLocal(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(localBinary); err != nil {
		out, err := exec.Command("go", "build", "-o", localBinary, "github.com/runtwice/twice/infra/local").CombinedOutput()
		if err != nil {
			t.Fatalf("build infra/local: %v\n%s", err, out)
		}
	}
	return localBinary
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startProcess(t *testing.T, data string, extra ...string) *process {
	if !slices.Contains(extra, "-clock-start") {
		extra = append(extra, "-clock-start", testClockStart.Format(time.RFC3339))
	}
	p := &process{t: t, bin: buildLocal(t), data: data, api: freeAddr(t), sim: freeAddr(t), extra: extra}
	p.start()
	return p
}

func (p *process) start() {
	p.t.Helper()
	// Ports are picked free, then bound by the child: another test may take one in between
	// (after a kill frees it, say). A child that exits while starting is started again on new
	// ports, at most three times; the stack's clients read the ports at each call.
	for try := 1; ; try++ {
		if p.startOnce() {
			return
		}
		if try == 3 {
			p.t.Fatalf("the local stack exited while starting, three times (log %s)", p.logPath)
		}
		p.mu.Lock()
		p.api, p.sim = freeAddr(p.t), freeAddr(p.t)
		p.mu.Unlock()
	}
}

// startOnce starts the child and waits until it answers /healthz; false if it exited first.
func (p *process) startOnce() bool {
	p.t.Helper()
	p.logPath = filepath.Join(p.data, fmt.Sprintf("stderr-%d.log", time.Now().UnixNano()))
	logf, err := os.Create(p.logPath)
	if err != nil {
		p.t.Fatal(err)
	}
	api, sim := p.addrs()
	args := append([]string{"-addr", api, "-sim-addr", sim, "-data", p.data,
		"-provider-timeout", "2s", "-request-timeout", "2s", "-resolve-delay", "100ms"}, p.extra...)
	cmd := exec.Command(p.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	p.cmd, p.exited = cmd, exited
	p.t.Cleanup(func() {
		p.kill()
		if p.t.Failed() { // the stack's own account of what happened
			if b, err := os.ReadFile(p.logPath); err == nil {
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				p.t.Logf("%s, last lines:\n%s", p.logPath, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			return false
		default:
		}
		if resp, err := http.Get("http://" + api + "/healthz"); err == nil {
			resp.Body.Close()
			select {
			case <-exited: // another process answered on a port this one could not bind
				return false
			default:
			}
			if resp.StatusCode == 200 {
				return true
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("not within 30s: the local stack answers /healthz (log %s)", p.logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// grepLogs returns every line of every run's log that contains s.
func (p *process) grepLogs(s string) string {
	logs, _ := filepath.Glob(filepath.Join(p.data, "stderr-*.log"))
	var out []string
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, s) {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out, "\n")
}

func (p *process) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		p.cmd = nil
	}
}

// retryPOST retries as a well-behaved client: on 409 it waits Retry-After, and on a dropped
// connection it tries again, bounded.
func retryPOST(t *testing.T, url, key, body string) answer {
	t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	for {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			a := answer{resp.StatusCode, resp.Header, string(b)}
			if a.status != http.StatusConflict {
				return a
			}
			wait, _ := strconv.Atoi(a.header.Get("Retry-After"))
			time.Sleep(time.Duration(max(wait, 1)) * time.Second)
		} else {
			time.Sleep(200 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer but 409 within 40 s")
		}
	}
}

func simCount(t *testing.T, sim string) float64 {
	t.Helper()
	a := call(t, "GET", "http://"+sim+"/_sim/stats", "", "")
	var m map[string]any
	json.Unmarshal([]byte(a.body), &m)
	n, _ := m["payment_intents"].(float64)
	return n
}

// TestKillDuringProviderCall kills the stack with -9 while the provider holds a request whose
// charge it already made, restarts it on the same data, and retries as a client would: the
// payment resolves to succeeded with exactly one PaymentIntent at the provider.
func TestKillDuringProviderCall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	p := startProcess(t, t.TempDir())
	armFault(t, "http://"+p.simAddr(), "timeout_after_effect", 1)
	body := paymentBody("pm_card_visa")
	go func() {
		req, _ := http.NewRequest("POST", "http://"+p.apiAddr()+"/payments", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "killed-1")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	eventually(t, 20*time.Second, "the provider made the charge", func() bool { return simCount(t, p.simAddr()) == 1 })
	p.kill()
	p.start()

	a := retryPOST(t, "http://"+p.apiAddr()+"/payments", "killed-1", body)
	var v payments.View
	if err := json.Unmarshal([]byte(a.body), &v); err != nil || (a.status != http.StatusCreated && a.status != http.StatusAccepted) {
		t.Fatalf("retry after restart: %d %s", a.status, a.body)
	}
	eventually(t, 30*time.Second, "the payment resolves", func() bool {
		return strings.Contains(call(t, "GET", "http://"+p.apiAddr()+"/payments/"+v.ID, "", "").body, `"status":"succeeded"`)
	})
	if n := simCount(t, p.simAddr()); n != 1 {
		t.Fatalf("the simulator holds %v PaymentIntents, want 1", n)
	}
}

// TestKillAndRestartKeepsEverything kills the stack after a run of payments and checks every one
// is still there and replays byte for byte after the restart.
func TestKillAndRestartKeepsEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	p := startProcess(t, t.TempDir())
	bodies := map[string]string{}
	for i := range 20 {
		key := fmt.Sprint("keep-", i)
		a := call(t, "POST", "http://"+p.apiAddr()+"/payments", key, paymentBody("pm_card_visa"))
		if a.status != http.StatusCreated {
			t.Fatalf("%s: %d %s", key, a.status, a.body)
		}
		bodies[key] = a.body
	}
	p.kill()
	p.start()
	for key, want := range bodies {
		a := call(t, "POST", "http://"+p.apiAddr()+"/payments", key, paymentBody("pm_card_visa"))
		if a.status != http.StatusCreated || a.body != want || a.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s after restart: %d %s", key, a.status, a.body)
		}
	}
	if n := simCount(t, p.simAddr()); n != 20 {
		t.Fatalf("the simulator holds %v PaymentIntents, want 20", n)
	}
}

func (p *process) stack() *Stack {
	return &Stack{cfg: Config{OperatorToken: DefaultOperatorToken, StripeAPIKey: DefaultStripeAPIKey}, apiLn: liveAddr{p, false}, simLn: liveAddr{p, true}}
}

// liveAddr lets the HTTP helpers of the in-process tests address a process's ports as they
// are now (a restart may have moved them).
type liveAddr struct {
	p   *process
	sim bool
}

func (a liveAddr) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (a liveAddr) Close() error              { return nil }
func (a liveAddr) Addr() net.Addr {
	api, sim := a.p.addrs()
	if a.sim {
		return addr(sim)
	}
	return addr(api)
}

type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }

// TestKillDuringRecoveryWait kills the stack while a recovery waits for its planned moment:
// no execution is open then (it ended at the wait) and the timer is in the store, so after the
// restart the relay fires it at its due time, and the card is charged exactly once more.
func TestKillDuringRecoveryWait(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	// Declined on the 13th, the card is retried on the 15th: about two days of waiting, 8 s of
	// wall time at this factor, long enough to kill in the middle.
	p := startProcess(t, t.TempDir(), "-time-factor", "20000", "-clock-start", "2027-03-13T10:00:00Z")
	s := p.stack()
	programCard(t, s.SimURL(), "pm_wait_kill", "insufficient_funds", 1)
	v := createDeclined(t, s, "wait-kill", "pm_wait_kill")
	// The park step logs the wait it committed; the execution then ends.
	eventually(t, 20*time.Second, "the recovery parks", func() bool {
		b, _ := os.ReadFile(p.logPath)
		return strings.Contains(string(b), "recovery parked")
	})
	p.kill()
	p.start()
	eventually(t, 60*time.Second, "the payment is recovered after the restart", func() bool {
		return strings.Contains(call(t, "GET", s.APIURL()+"/payments/"+v.ID, "", "").body, `"status":"succeeded"`)
	})
	if got := simEvents(t, s, deref(v.ProviderPaymentID)); fmt.Sprint(got) != "[payment_failed succeeded]" {
		t.Fatalf("charges at the provider: %v", got)
	}
}

// TestKillDuringRecoveryCharge kills the stack while the recovery's charge is at the provider
// (held there by a latency fault): after the restart the Charge step runs again with the same
// attempt key, and the provider charges once.
func TestKillDuringRecoveryCharge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	// Declined on the 15th after 09:00: the next payday is past the window, so the charge
	// comes on the last morning inside it, about 14 days (6 s) later.
	p := startProcess(t, t.TempDir(), "-time-factor", "200000", "-clock-start", "2027-06-15T09:30:00Z")
	s := p.stack()
	programCard(t, s.SimURL(), "pm_charge_kill", "insufficient_funds", 1)
	// Every confirm from now on answers 3 s late: the recovery's charge is in flight then.
	a := call(t, "POST", s.SimURL()+"/_sim/faults", "", `{"path_prefix":"/v1/payment_intents/","fault":"latency","latency_ms":3000,"count":1}`)
	if a.status != http.StatusCreated {
		t.Fatalf("arm: %d %s", a.status, a.body)
	}
	v := createDeclined(t, s, "charge-kill", "pm_charge_kill")
	eventually(t, 20*time.Second, "the recovery charge reaches the provider", func() bool {
		return strings.Contains(call(t, "GET", s.SimURL()+"/_sim/faults", "", "").body, `"armed":[]`)
	})
	p.kill()
	p.start()
	eventually(t, 60*time.Second, "the payment is recovered after the restart", func() bool {
		return strings.Contains(call(t, "GET", s.APIURL()+"/payments/"+v.ID, "", "").body, `"status":"succeeded"`)
	})
	if got := simEvents(t, s, deref(v.ProviderPaymentID)); fmt.Sprint(got) != "[payment_failed succeeded]" {
		t.Fatalf("charges at the provider: %v", got)
	}
}

// TestKillWhileSteering kills the stack with -9 twice around steering: once while two
// recoveries are parked (their timers are in the outbox), then again right after a card
// update (the simulator's payment_method.attached) and an operator's stop were sent, while the
// event, the outbox and the signals are in flight. After the restarts the first payment is
// charged once more, with the new card; the second ends stopped without a charge.
func TestKillWhileSteering(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	p := startProcess(t, t.TempDir(), "-time-factor", "100")
	s := p.stack()
	programCard(t, s.SimURL(), "pm_kill_card", "insufficient_funds", 1)
	programCard(t, s.SimURL(), "pm_kill_stop", "insufficient_funds", 1)
	card := createDeclined(t, s, "kill-steer-card", "pm_kill_card")
	// Another customer: the card update below steers the first customer's recovery only, so
	// the operator's stop is the one thing that reaches the second (with one customer, the
	// update could charge it before the stop arrives).
	stop := createDeclinedFor(t, s, "kill-steer-stop", "pm_kill_stop", "cus_rec_stop")
	for _, v := range []payments.View{card, stop} {
		eventually(t, 20*time.Second, "the recovery of "+v.ID+" is parked", func() bool {
			got := paymentWithRecovery(t, s, v.ID)
			return got.Recovery != nil && got.Recovery.State == payments.RecoveryScheduled
		})
	}
	p.kill()
	p.start()
	customerEvent(t, s, "cus_rec", `{"type":"payment_method.attached","payment_method":"pm_card_visa"}`)
	var a answer
	eventually(t, 20*time.Second, "the operator's stop is accepted", func() bool {
		req, _ := http.NewRequest("POST", s.APIURL()+"/ops/recoveries/"+stop.ID+"/stop", nil)
		req.Header.Set("Authorization", "Bearer "+s.Config().OperatorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		a.status = resp.StatusCode
		return resp.StatusCode == http.StatusAccepted
	})
	p.kill() // the card update is somewhere between the simulator, the queue, the outbox and the timer
	p.start()
	eventually(t, 60*time.Second, "the first payment is charged with the new card", func() bool {
		return paymentWithRecovery(t, s, card.ID).Status == provider.StatusSucceeded
	})
	eventually(t, 30*time.Second, "the second recovery reads stopped", func() bool {
		got := paymentWithRecovery(t, s, stop.ID)
		return got.Recovery != nil && got.Recovery.State == payments.RecoveryStopped
	})
	if got := simEvents(t, s, deref(card.ProviderPaymentID)); fmt.Sprint(got) != "[payment_failed succeeded]" {
		t.Fatalf("charges of the first payment: %v", got)
	}
	if got := simEvents(t, s, deref(stop.ProviderPaymentID)); fmt.Sprint(got) != "[payment_failed]" {
		t.Fatalf("charges of the stopped payment: %v", got)
	}
	req, _ := http.NewRequest("GET", s.SimURL()+"/v1/payment_intents/"+deref(card.ProviderPaymentID), nil)
	req.SetBasicAuth(DefaultStripeAPIKey, "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var pi struct {
		PaymentMethod string `json:"payment_method"`
	}
	if err := json.Unmarshal(body, &pi); err != nil || pi.PaymentMethod != "pm_card_visa" {
		t.Fatalf("the recovery charge used %q (%v), want the new card: %d %s", pi.PaymentMethod, err, resp.StatusCode, body)
	}
}

// TestKillDuringBackfillAppliesEveryEventOnce: every delivery is dropped while 250 payments
// are refunded at the provider, so the backfill has 250 changes to bring. The stack is killed
// (-9) as soon as the first has been applied, mid-pass; after the restart, passes run until
// the walk is done, and every payment is refunded exactly once (its amount refunded is the
// refund's, not twice it).
func TestKillDuringBackfillAppliesEveryEventOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	// A long request deadline: the pass must still be running when it is killed.
	p := startProcess(t, t.TempDir(), "-request-timeout", "60s")
	sim := "http://" + p.simAddr()
	if a := call(t, "POST", sim+"/_sim/webhooks/drop", "", `{"rate":1,"seed":1}`); a.status != 200 {
		t.Fatalf("drop: %d %s", a.status, a.body)
	}
	const n = 250
	ids := make([]string, n)
	for i := range n {
		a := call(t, "POST", "http://"+p.apiAddr()+"/payments", fmt.Sprint("bf-kill-", i), paymentBody("pm_card_visa"))
		var v payments.View
		if err := json.Unmarshal([]byte(a.body), &v); err != nil || a.status != http.StatusCreated || v.ProviderPaymentID == nil {
			t.Fatalf("payment %d: %d %s", i, a.status, a.body)
		}
		ids[i] = v.ID
		req, _ := http.NewRequest("POST", sim+"/v1/refunds", strings.NewReader("payment_intent="+*v.ProviderPaymentID))
		req.Header.Set("Authorization", "Bearer "+DefaultStripeAPIKey)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("refund %d: %v %v", i, err, resp)
		}
		resp.Body.Close()
	}
	status := func(id string) payments.View {
		var v payments.View
		json.Unmarshal([]byte(call(t, "GET", "http://"+p.apiAddr()+"/payments/"+id, "", "").body), &v)
		return v
	}
	if v := status(ids[0]); v.Status != provider.StatusSucceeded {
		t.Fatalf("the refund reached the stack without the backfill: %s", v.Status)
	}

	pass := func() (applied int, more bool) {
		req, _ := http.NewRequest("POST", "http://"+p.apiAddr()+"/ops/backfill", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+DefaultOperatorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, true // killed under it
		}
		defer resp.Body.Close()
		var rep backfill.Report
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || resp.StatusCode != 200 {
			t.Errorf("backfill: %d %v", resp.StatusCode, err)
		}
		return len(rep.Applied), rep.More
	}
	go pass()
	eventually(t, 30*time.Second, "the backfill applies its first refund", func() bool {
		return status(ids[0]).Status == provider.StatusRefunded
	})
	p.kill()
	p.start()
	total, passes := 0, 0
	for more := true; more; passes++ {
		if passes == 50 {
			t.Fatal("the walk did not finish in 50 passes")
		}
		var applied int
		applied, more = pass()
		total += applied
	}
	if total == 0 {
		t.Fatal("the passes after the restart applied nothing: the kill did not land mid-pass")
	}
	for i, id := range ids {
		if v := status(id); v.Status != provider.StatusRefunded || v.AmountRefunded != 2500 {
			t.Fatalf("payment %d after the restart: %s, %d refunded, want refunded 2500 once", i, v.Status, v.AmountRefunded)
		}
	}
	t.Logf("after the kill: %d passes applied %d of %d refunds", passes, total, n)
}
