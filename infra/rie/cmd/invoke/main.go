// Command invoke is `sam local invoke` without Docker, for a person: it builds one function as
// the template does, creates its tables, queues, parameters and state machine on DynamoDB
// Local and moto (started by scripts/with-servers.sh, which exports their addresses), starts
// the Stripe simulator on loopback, runs the function under aws-lambda-rie and prints the
// response to stdout and the function's logs to stderr.
//
//	make invoke FN=payments-api EVENT=events/payments-api/post-payment.json
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/runtwice/twice/infra/providersim/stripesim"
	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/infra/testenv"
)

func main() {
	fn := flag.String("fn", "", "function directory under functions/ (payments-api, webhook-worker, ...)")
	event := flag.String("event", "", "event file, e.g. events/payments-api/post-payment.json")
	flag.Parse()
	if err := run(*fn, *event); err != nil {
		fmt.Fprintln(os.Stderr, "invoke:", err)
		os.Exit(1)
	}
}

func run(fn, eventPath string) error {
	if fn == "" || eventPath == "" {
		return fmt.Errorf("need -fn and -event")
	}
	ddb, moto, rieBin := os.Getenv(testenv.EnvDynamoDB), os.Getenv(testenv.EnvMoto), os.Getenv(testenv.EnvRIE)
	if ddb == "" || moto == "" || rieBin == "" {
		return fmt.Errorf("%s, %s and %s must be set: run through scripts/with-servers.sh (make invoke does)",
			testenv.EnvDynamoDB, testenv.EnvMoto, testenv.EnvRIE)
	}
	event, err := os.ReadFile(eventPath)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := rie.ModuleRoot(".")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "twice-invoke-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	sim, err := stripesim.New(stripesim.Config{DataDir: dir, APIKeys: []string{stripesim.DefaultAPIKey}})
	if err != nil {
		return err
	}
	defer sim.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	prefix := "invoke-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	fx, err := rie.NewFixture(ctx, root, prefix, ddb, moto, "http://"+ln.Addr().String(), rie.Secrets{
		StripeAPIKey: stripesim.DefaultAPIKey, StripeWebhookSecret: "whsec_c2FtcGxlLWV2ZW50LXNlY3JldA",
		StandardWebhookSecret: "whsec_dHdpY2UtbG9jYWwtc3RhbmRhcmQtc2VjcmV0",
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "invoke: building functions/%s for linux/%s\n", fn, runtime.GOARCH)
	bin, err := rie.Build(ctx, root, "./functions/"+fn, runtime.GOARCH, dir)
	if err != nil {
		return err
	}
	em, err := rie.Start(ctx, rieBin, bin, fx.Env())
	if err != nil {
		return err
	}
	defer em.Close()
	out, err := em.Invoke(ctx, event)
	fmt.Fprint(os.Stderr, em.Output())
	if err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if d, ok := em.WaitInitDuration(wait); ok {
		fmt.Fprintf(os.Stderr, "invoke: INIT %.1f ms\n", float64(d)/float64(time.Millisecond))
	}
	fmt.Println(string(out))
	return nil
}
