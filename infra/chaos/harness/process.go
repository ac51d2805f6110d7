package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// ErrNotReady is returned when the stack does not answer /healthz in time after a start.
var ErrNotReady = errors.New("chaos: the local stack did not become ready")

// Build compiles infra/local into dir and returns the binary's path.
func Build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "twice-local")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/runtwice/twice/infra/local").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("chaos: build infra/local: %w\n%s", err, out)
	}
	return bin, nil
}

// process is the real infra/local binary, so a kill is a real kill -9: no deferred function,
// no fsync, no graceful shutdown runs.
type process struct {
	bin      string
	data     string
	api, sim string
	args     []string
	cmd      *exec.Cmd
	log      *os.File
}

func newProcess(bin, data string, extra []string) (*process, error) {
	api, err := freeAddr()
	if err != nil {
		return nil, err
	}
	sim, err := freeAddr()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(data, "stack.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args := append([]string{"-addr", api, "-sim-addr", sim, "-data", data, "-log", "warn"}, extra...)
	return &process{bin: bin, data: data, api: api, sim: sim, args: args, log: logf}, nil
}

// start runs the binary on the same ports and data directory every time and waits, bounded,
// until it answers.
func (p *process) start(ctx context.Context, within time.Duration) error {
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	dieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	c := &http.Client{Timeout: time.Second}
	for {
		if resp, err := c.Get("http://" + p.api + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w within %s (log: %s)", ErrNotReady, within, p.log.Name())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kill sends SIGKILL and reaps the process.
func (p *process) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
	p.cmd = nil
}

// stop asks for a graceful shutdown, and kills after a bound.
func (p *process) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
	p.cmd = nil
	p.log.Close()
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
