package rie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// InvokePath is the emulator's invoke endpoint.
const InvokePath = "/2015-03-31/functions/function/invocations"

// ErrNotReady: the emulator did not accept connections in time, or exited.
var ErrNotReady = errors.New("rie: emulator not ready")

// Emulator is one aws-lambda-rie process running one bootstrap.
type Emulator struct {
	cmd *exec.Cmd
	// addr is the invoke endpoint's address; runtimeAddr the Runtime API's.
	addr, runtimeAddr string
	out               *syncBuffer
	done              chan struct{}

	mu sync.Mutex // one invoke at a time: the emulator crashes on concurrent ones
}

// Start runs rieBin with bootstrap as the runtime on free loopback ports (the invoke port and
// the Runtime API's, which the emulator otherwise fixes at 127.0.0.1:9001, so two test runs on
// one machine would collide). env is the whole environment of the function (nothing is
// inherited, so a developer's AWS settings never leak in). It returns once the emulator accepts
// connections on both ports. A port taken between choosing it and the emulator binding it
// means a new pair, at most three times.
func Start(ctx context.Context, rieBin, bootstrap string, env []string) (*Emulator, error) {
	var err error
	for range 3 {
		var e *Emulator
		if e, err = start(ctx, rieBin, bootstrap, env); err == nil || !errors.Is(err, errExited) {
			return e, err
		}
	}
	return nil, err
}

// errExited: the emulator exited before it listened (a port it was given was taken).
var errExited = errors.New("exited")

func start(ctx context.Context, rieBin, bootstrap string, env []string) (*Emulator, error) {
	addr, err := pickAddr()
	if err != nil {
		return nil, err
	}
	runtimeAddr, err := pickAddr()
	if err != nil {
		return nil, err
	}
	out := &syncBuffer{}
	cmd := exec.Command(rieBin, "--runtime-interface-emulator-address", addr, "--runtime-api-address", runtimeAddr, bootstrap)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Close stops the bootstrap too
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("rie: start: %w", err)
	}
	e := &Emulator{cmd: cmd, addr: addr, runtimeAddr: runtimeAddr, out: out, done: make(chan struct{})}
	go func() { cmd.Wait(); close(e.done) }()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		// Both ports: the emulator binds the Runtime API's in a goroutine of its own and
		// panics if the port is taken (by any socket, an outgoing connection's included),
		// which can come after the invoke port already answers.
		if accepts(addr) && accepts(runtimeAddr) {
			return e, nil
		}
		select {
		case <-e.done:
			return nil, fmt.Errorf("%w: %w: %s", ErrNotReady, errExited, out.String())
		case <-deadline.C:
			e.Close()
			return nil, fmt.Errorf("%w: %s did not listen: %s", ErrNotReady, addr, out.String())
		case <-ctx.Done():
			e.Close()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// Invoke posts payload to the function and returns its response body. A function error comes
// back as the emulator's JSON error body with status 200, as Lambda's Invoke API does.
func (e *Emulator) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+e.addr+InvokePath, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("rie: invoke: %w (output: %s)", err, e.out.String())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("rie: invoke: status %d: %s", resp.StatusCode, b)
	}
	return b, nil
}

// initRe matches the emulator's own INIT report. (Its REPORT line's "Init Duration" times
// only the emulator's bookkeeping, well under a millisecond, not the function's INIT.)
var initRe = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// InitDuration is the function's INIT phase (process start to its first request for work),
// which the emulator runs on the first invoke.
func (e *Emulator) InitDuration() (time.Duration, bool) {
	return parseInit(e.out.String())
}

// WaitInitDuration is InitDuration once the emulator has written its INIT report, which may
// reach the output after the first invoke answered (it is copied from the emulator's pipe):
// it waits for the line until ctx ends, and reports false if it never came.
func (e *Emulator) WaitInitDuration(ctx context.Context) (time.Duration, bool) {
	for {
		out, changed := e.out.snapshot()
		if d, ok := parseInit(out); ok {
			return d, true
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-e.done:
			return parseInit(e.out.String())
		case <-changed:
		}
	}
}

func parseInit(out string) (time.Duration, bool) {
	m := initRe.FindStringSubmatch(out)
	if m == nil {
		return 0, false
	}
	ms, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}

// Output is everything the emulator and the function wrote so far.
func (e *Emulator) Output() string { return e.out.String() }

// Close stops the emulator and the function.
func (e *Emulator) Close() error {
	if e.cmd.Process != nil {
		syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-e.done
	return nil
}

// accepts reports whether something accepts connections at addr.
func accepts(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// pickAddr chooses a loopback address for the emulator to bind (a test replaces it).
var pickAddr = freeAddr

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed by the next write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// snapshot is the output so far and a channel closed by the next write.
func (s *syncBuffer) snapshot() (string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.b.String(), s.changed
}
