// Command bench measures the local stack over loopback: payments per second (fresh keys and
// replays) and webhook deliveries per second, with p50/p99 latency and the stack's resident
// memory. It builds and starts infra/local as a child process on free ports and a fresh data
// directory, so the memory figure is the stack's alone, and stops it at the end.
//
//	go run ./infra/bench [-clients 32] [-duration 10s] [-rate 0] [-json results.json]
//
// By default each client sends its next request as soon as its last is answered (a closed
// loop): the rate is the most the stack sustains, and the latency is what 32 callers waiting
// on each other see at that rate. With -rate R, requests are due at R a second whatever the
// answers (an open loop, as independent callers arrive), at most -clients in flight, and each
// latency runs from when the request was due, so a request that waited for a free client
// counts its wait (no coordinated omission). A phase that could not keep up says so.
//
// Before the replays and the webhook deliveries, the bench waits until the stack has done the
// work the phases before left (its queues, its outbox, the simulator's deliveries) and prints
// how long that took (-settle=false starts each phase at once): each phase measures its own
// requests, and the wait is how far the follow-on work ran behind the answers.
//
// With -stack-args "-pprof 127.0.0.1:6061" the stack also serves its profiles there, and
// each phase reports what it cost each data file (commits a second, changes and pages a commit,
// how busy its committer was), read from the stack's /debug/vars.
//
// Every phase is bounded by -duration and by -max-requests; traffic goes to 127.0.0.1 only.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/runtwice/twice/infra/inprocess"
	"github.com/runtwice/twice/infra/providersim/stripesim"
)

type phase struct {
	Name     string  `json:"name"`
	Offered  float64 `json:"offered_per_second,omitempty"` // -rate; 0 for a closed loop
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"per_second"`
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	// SettledMs is how long the stack took, before the phase, to finish the work the phases
	// before it left (-settle).
	SettledMs float64 `json:"settled_ms,omitempty"`
	// Files is what the phase cost each data file, read from the stack's /debug/vars when
	// -stack-args has -pprof: whether the disk's commits were the limit.
	Files map[string]fileUse `json:"files,omitempty"`
}

// fileUse is one data file's commits during a phase.
type fileUse struct {
	CommitsPerSec     float64 `json:"commits_per_second"`
	ChangesPerCommit  float64 `json:"changes_per_commit"`
	PagesPerCommit    float64 `json:"pages_per_commit"`
	MsPerCommit       float64 `json:"ms_per_commit"`
	CommitterBusyPcnt float64 `json:"committer_busy_percent"`
	// PagesPerRequest and KeysPerRequest are the pages the phase's commits wrote and the keys
	// its store writes touched, per table, divided by the phase's requests: the work a request
	// brought to the file while the phase ran (follow-on work still queued when it ended is
	// not counted). KeysPerRequest is empty for the simulator's file.
	PagesPerRequest float64            `json:"pages_per_request"`
	KeysPerRequest  map[string]float64 `json:"keys_per_request,omitempty"`
}

// fileCounts is infra/inprocess.FileStats as /debug/vars encodes it.
type fileCounts struct {
	Commits, Changes, PagesWritten int64
	Committing                     time.Duration
	Keys                           map[string]int64
}

// files reads the stack's data files' commit counts; nil when it does not publish them.
func files(c *http.Client, vars string) map[string]fileCounts {
	if vars == "" {
		return nil
	}
	_, body, err := get(c, vars)
	if err != nil {
		return nil
	}
	var v struct {
		Files map[string]fileCounts `json:"twice_files"`
	}
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	return v.Files
}

// use is what the phase between before and after, its requests in seconds, cost each file.
func use(before, after map[string]fileCounts, seconds float64, requests int) map[string]fileUse {
	out := map[string]fileUse{}
	for name, a := range after {
		b := before[name]
		n := float64(a.Commits - b.Commits)
		if n <= 0 || seconds <= 0 {
			continue
		}
		busy := (a.Committing - b.Committing).Seconds()
		u := fileUse{CommitsPerSec: n / seconds, ChangesPerCommit: float64(a.Changes-b.Changes) / n,
			PagesPerCommit: float64(a.PagesWritten-b.PagesWritten) / n, MsPerCommit: busy * 1000 / n,
			CommitterBusyPcnt: 100 * busy / seconds}
		if requests > 0 {
			u.PagesPerRequest = float64(a.PagesWritten-b.PagesWritten) / float64(requests)
			for table, k := range a.Keys {
				if d := k - b.Keys[table]; d > 0 {
					if u.KeysPerRequest == nil {
						u.KeysPerRequest = map[string]float64{}
					}
					u.KeysPerRequest[table] = float64(d) / float64(requests)
				}
			}
		}
		out[name] = u
	}
	return out
}

type result struct {
	Clients  int     `json:"clients"`
	Phases   []phase `json:"phases"`
	PeakRSS  float64 `json:"peak_rss_mb"`
	FinalRSS float64 `json:"final_rss_mb"`
	AnonRSS  float64 `json:"anon_rss_mb"`
	FileRSS  float64 `json:"file_rss_mb"`
	Checked  string  `json:"checked"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	clients := flag.Int("clients", 32, "concurrent clients")
	duration := flag.Duration("duration", 10*time.Second, "length of each phase")
	maxReq := flag.Int("max-requests", 200_000, "cap on requests per phase")
	warmup := flag.Duration("warmup", time.Second, "new payments sent before the measured phases and not counted: connections open, files grow, code paths warm")
	rate := flag.Float64("rate", 0, "requests due per second in each phase, at most -clients in flight (0: each client sends when answered)")
	jsonOut := flag.String("json", "", "write the results to this file as JSON")
	settle := flag.Bool("settle", true, "before each phase after the first, wait until the stack has done the work the phases before it left (its queues, its outbox, the simulator's deliveries), so each phase measures its own requests; the wait is printed")
	stackArgs := flag.String("stack-args", "", "extra flags for the local stack, space-separated (e.g. -pprof 127.0.0.1:6060)")
	flag.Parse()
	if *rate < 0 || *clients < 1 {
		return fmt.Errorf("-rate %v, -clients %d: want a rate of 0 or more and at least one client", *rate, *clients)
	}

	dir, err := os.MkdirTemp("", "twice-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "twice-local")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/runtwice/twice/infra/local").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	api, sim := freeAddr(), freeAddr()
	cmd := exec.Command(bin, append([]string{"-addr", api, "-sim-addr", sim, "-data", filepath.Join(dir, "data"), "-log", "warn"},
		strings.Fields(*stackArgs)...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	if err := waitUp("http://" + api + "/healthz"); err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients * 2}, Timeout: 30 * time.Second}
	vars := "" // the stack's /debug/vars, if -stack-args serves it
	if f := strings.Fields(*stackArgs); len(f) > 1 {
		if i := slices.Index(f[:len(f)-1], "-pprof"); i >= 0 {
			vars = "http://" + f[i+1] + "/debug/vars"
		}
	}
	base := "http://" + api
	res := result{Clients: *clients}
	measure := func(name string, rate float64, d time.Duration, maxReq int, fn func() (int, error), want int) (phase, error) {
		var settled time.Duration
		if *settle && len(res.Phases) > 0 {
			var err error
			if settled, err = quiet(client, base, "http://"+sim); err != nil {
				return phase{}, fmt.Errorf("before %s: %w", name, err)
			}
		}
		before := files(client, vars)
		ph := load(name, *clients, rate, d, maxReq, fn, want)
		ph.SettledMs = float64(settled.Microseconds()) / 1000
		if after := files(client, vars); before != nil && after != nil {
			ph.Files = use(before, after, ph.Seconds, ph.Requests)
		}
		return ph, nil
	}
	loop := "each client sends when answered"
	if *rate > 0 {
		loop = fmt.Sprintf("%.0f requests due a second", *rate)
	}
	fmt.Printf("bench: %d clients, %s, %s per phase, stack pid %d\n", *clients, loop, *duration, cmd.Process.Pid)

	// Phase 1: new payments, each with a fresh key, after a warm-up of the same that is not
	// counted (the first tens of milliseconds of a fresh stack open 32 connections and grow
	// empty files, and would be the phase's slowest percent).
	var seq atomic.Int64
	var ids, amounts sync.Map // provider payment id -> our id, amount
	newPayment := func() (int, error) {
		n := seq.Add(1)
		status, body, err := post(client, base+"/payments", "bench-"+strconv.FormatInt(n, 10),
			fmt.Sprintf(`{"amount":%d,"currency":"usd","customer":"cus_bench","payment_method":"pm_card_visa"}`, 1000+n%500))
		if status == http.StatusCreated {
			var v struct {
				ID     string `json:"id"`
				PID    string `json:"provider_payment_id"`
				Amount int64  `json:"amount"`
			}
			json.Unmarshal(body, &v)
			ids.Store(v.PID, v.ID)
			amounts.Store(v.PID, v.Amount)
		}
		return status, err
	}
	if *warmup > 0 {
		load("warm-up (not counted)", *clients, *rate, *warmup, *maxReq, newPayment, http.StatusCreated)
	}
	newPay, err := measure("new payments", *rate, *duration, *maxReq, newPayment, http.StatusCreated)
	if err != nil {
		return err
	}
	res.Phases = append(res.Phases, newPay)
	created := seq.Load()

	// Phase 2: replays of those keys.
	var rseq atomic.Int64
	replays, err := measure("replays", *rate, *duration, *maxReq, func() (int, error) {
		n := rseq.Add(1)%created + 1
		status, _, err := post(client, base+"/payments", "bench-"+strconv.FormatInt(n, 10),
			fmt.Sprintf(`{"amount":%d,"currency":"usd","customer":"cus_bench","payment_method":"pm_card_visa"}`, 1000+n%500))
		return status, err
	}, http.StatusCreated)
	if err != nil {
		return err
	}
	res.Phases = append(res.Phases, replays)

	// Phase 3: signed webhook deliveries, each event sent twice: a refund per payment.
	var pis []string
	ids.Range(func(k, _ any) bool {
		pis = append(pis, k.(string))
		return true
	})
	slices.Sort(pis)
	var dseq atomic.Int64
	secret := stripesim.DefaultWebhookSecret
	now := time.Now().Add(time.Hour) // newer than the payments' own versions
	hooks, err := measure("webhook deliveries", *rate, *duration, min(*maxReq, 2*len(pis)), func() (int, error) {
		n := dseq.Add(1) - 1
		if int(n/2) >= len(pis) {
			return 0, errDone
		}
		pi := pis[n/2]
		amount, _ := amounts.Load(pi) // a whole refund: a partial one leaves the payment succeeded
		body := fmt.Sprintf(`{"id":"evt_bench_%s","object":"event","type":"charge.refunded","created":%d,"data":{"object":{"id":"ch_%s","object":"charge","payment_intent":%q,"amount":%d,"amount_refunded":%d,"refunded":true,"metadata":{}}}}`,
			pi, now.Unix(), pi, pi, amount, amount)
		req, _ := http.NewRequest("POST", base+"/webhooks/stripe", strings.NewReader(body))
		req.Header.Set("Stripe-Signature", stripesim.SignatureHeader([]byte(body), secret, time.Now()))
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}, http.StatusOK)
	if err != nil {
		return err
	}
	res.Phases = append(res.Phases, hooks)

	// Exactly once: every refunded payment shows refunded once the queue drains.
	sent := int(min(dseq.Load(), int64(2*len(pis)))) / 2
	deadline := time.Now().Add(2 * time.Minute)
	refunded := 0
	for i := 0; i < sent && time.Now().Before(deadline); {
		id, _ := ids.Load(pis[i])
		_, body, err := get(client, base+"/payments/"+id.(string))
		if err == nil && bytes.Contains(body, []byte(`"status":"refunded"`)) {
			refunded++
			i++
			continue
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.Checked = fmt.Sprintf("%d of %d payments refunded by %d deliveries (each event twice)", refunded, sent, 2*sent)
	res.PeakRSS, res.FinalRSS, res.AnonRSS, res.FileRSS = rss(cmd.Process.Pid)

	fmt.Printf("\n%-20s %9s %7s %10s %9s %9s %9s %12s\n", "phase", "requests", "errors", "per second", "p50 ms", "p99 ms", "max ms", "settled ms")
	for _, p := range res.Phases {
		fmt.Printf("%-20s %9d %7d %10.0f %9.2f %9.2f %9.2f %12.0f\n", p.Name, p.Requests, p.Errors, p.PerSec, p.P50ms, p.P99ms, p.MaxMs, p.SettledMs)
	}
	for _, p := range res.Phases {
		for _, name := range slices.Sorted(maps.Keys(p.Files)) {
			f := p.Files[name]
			fmt.Printf("%-20s %s: %.0f commits/s, %.1f changes and %.0f pages a commit, %.2f ms a commit, committer busy %.0f%%\n",
				p.Name, name, f.CommitsPerSec, f.ChangesPerCommit, f.PagesPerCommit, f.MsPerCommit, f.CommitterBusyPcnt)
			if len(f.KeysPerRequest) > 0 {
				fmt.Printf("%-20s %s: a request wrote %.1f pages and these keys: %s\n", p.Name, name, f.PagesPerRequest, keyList(f.KeysPerRequest))
			}
		}
	}
	fmt.Printf("\nstack RSS: peak %.1f MB, at end %.1f MB (%.1f MB heap and stacks, %.1f MB mapped data file)\nexactly once: %s\n",
		res.PeakRSS, res.FinalRSS, res.AnonRSS, res.FileRSS, res.Checked)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	if refunded != sent {
		return fmt.Errorf("exactly-once check failed: %s", res.Checked)
	}
	return nil
}

// keyList is "table n, ..." with the most written first.
func keyList(keys map[string]float64) string {
	tables := slices.SortedFunc(maps.Keys(keys), func(a, b string) int {
		if c := cmp.Compare(keys[b], keys[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(tables))
	var sum float64
	for i, t := range tables {
		parts[i] = fmt.Sprintf("%s %.1f", t, keys[t])
		sum += keys[t]
	}
	return fmt.Sprintf("%.1f in all: %s", sum, strings.Join(parts, ", "))
}

var errDone = errors.New("done")

// quiet waits until the stack has nothing left to do for the requests sent so far: the
// simulator holds no delivery to send, and the stack's queues and outbox are empty (GET
// /ops/_faults, the local stack's counts). It returns how long that took, at most two minutes.
//
// The polls are not free: the simulator and the stack count the deliveries and messages still
// pending. Polled every 50 ms, they once took 27% of the stack's CPU while it drained (the
// simulator then also counted its PaymentIntents and events by walking its whole file, 17%;
// it now keeps those counts). The wait between polls starts at 50 ms and doubles to at most
// 250 ms, so a short wait is still seen within 50 ms and a long one is polled four times a
// second.
func quiet(c *http.Client, api, sim string) (time.Duration, error) {
	start := time.Now()
	wait := 50 * time.Millisecond
	for time.Since(start) < 2*time.Minute {
		var simStats struct {
			OutboxEntries *int `json:"outbox_entries"`
		}
		var stack struct {
			OutboxPending *int `json:"outbox_pending"`
			QueuePending  *int `json:"queue_pending"`
		}
		err := getJSON(c, sim+"/_sim/stats", "Bearer "+stripesim.DefaultAPIKey, &simStats)
		if err == nil {
			err = getJSON(c, api+"/ops/_faults", "Bearer "+inprocess.DefaultOperatorToken, &stack)
		}
		if err != nil {
			return time.Since(start), err
		}
		if simStats.OutboxEntries == nil || stack.OutboxPending == nil || stack.QueuePending == nil {
			return time.Since(start), errors.New("the stack's counts have no outbox_entries, outbox_pending or queue_pending")
		}
		if *simStats.OutboxEntries == 0 && *stack.OutboxPending == 0 && *stack.QueuePending == 0 {
			return time.Since(start), nil
		}
		time.Sleep(wait)
		wait = min(2*wait, 250*time.Millisecond)
	}
	return time.Since(start), errors.New("the stack still had work after two minutes")
}

func getJSON(c *http.Client, url, auth string, v any) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", auth)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// load runs fn from n clients until the duration or the request cap is reached: each client
// in turn when rate is 0, else as requests fall due at rate a second.
func load(name string, n int, rate float64, d time.Duration, maxReq int, fn func() (int, error), want int) phase {
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var count atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	// due hands out each request's start: now (closed loop) or its slot in the schedule.
	due := func() (time.Time, bool) {
		if ctx.Err() != nil || count.Add(1) > int64(maxReq) {
			return time.Time{}, false
		}
		return time.Now(), true
	}
	if rate > 0 {
		slots := make(chan time.Time, n)
		go func() {
			defer close(slots)
			interval := time.Duration(float64(time.Second) / rate)
			for i := 0; i < maxReq; i++ {
				at := start.Add(time.Duration(i) * interval)
				if wait := time.Until(at); wait > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(wait):
					}
				}
				select {
				case <-ctx.Done():
					return
				case slots <- at:
				}
			}
		}()
		due = func() (time.Time, bool) {
			at, ok := <-slots
			return at, ok && ctx.Err() == nil
		}
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			var mine []time.Duration
			bad := 0
			for {
				t0, ok := due()
				if !ok {
					break
				}
				status, err := fn()
				if errors.Is(err, errDone) {
					break
				}
				mine = append(mine, time.Since(t0))
				if err != nil || status != want {
					bad++
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	ph := phase{Name: name, Offered: rate, Requests: len(lat), Errors: errs, Seconds: elapsed, PerSec: float64(len(lat)) / elapsed,
		P50ms: pct(0.50), P99ms: pct(0.99)}
	if len(lat) > 0 {
		ph.MaxMs = float64(lat[len(lat)-1].Microseconds()) / 1000
	}
	fmt.Printf("bench: %s: %d requests in %.1fs\n", name, ph.Requests, elapsed)
	if rate > 0 && ph.PerSec < 0.95*rate && ph.Requests < maxReq {
		fmt.Printf("bench: %s: could not keep up: %.0f/s answered of %.0f/s due\n", name, ph.PerSec, rate)
	}
	return ph
}

func post(c *http.Client, url, key, body string) (int, []byte, error) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func get(c *http.Client, url string) (int, []byte, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitUp(url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("the local stack did not start within 30 s")
}

// rss reads the child's peak and current resident set from /proc, in MB, and the current one
// split into anonymous memory (heap, stacks) and file pages (the mapped bbolt files).
func rss(pid int) (peak, now, anon, file float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmHWM:":
			peak = v / 1024
		case "VmRSS:":
			now = v / 1024
		case "RssAnon:":
			anon = v / 1024
		case "RssFile:":
			file = v / 1024
		}
	}
	return peak, now, anon, file
}
