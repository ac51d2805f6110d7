// Command invoke is `sam local invoke` without Docker, for a person: it builds one function as
// the template does, creates its tables, queues, parameters and state machine on DynamoDB
// Local and moto (started by scripts/with-servers.sh, which exports their addresses), starts
// the Stripe simulator on loopback, runs the function under aws-lambda-rie and prints the
// response to stdout and the function's logs to stderr.
//
// A sample whose handler checks a time is made fresh first (rie.Fresh): a Stripe-Signature is
// signed again at the current time with the webhook secret the invoke's parameters hold, a
// scheduled reconciliation fires at the current hour, a recovery step runs now. -as-is sends
// the file unchanged. docs/invoke.md lists every sample and its answer.
//
//	make invoke FN=payments-api EVENT=events/payments-api/post-payment.json
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/infra/testenv"
)

func main() {
	fn := flag.String("fn", "", "function directory under functions/ (payments-api, webhook-worker, ...)")
	event := flag.String("event", "", "event file, e.g. events/payments-api/post-payment.json")
	asIs := flag.Bool("as-is", false, "send the event file unchanged (no fresh signature or times)")
	flag.Parse()
	if err := run(*fn, *event, *asIs); err != nil {
		fmt.Fprintln(os.Stderr, "invoke:", err)
		os.Exit(1)
	}
}

func run(fn, eventPath string, asIs bool) error {
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
	res, err := rie.Sample{Root: root, RIE: rieBin, DynamoDB: ddb, Moto: moto, Fn: fn, Event: event,
		DisableFreshEvents: asIs}.Run(ctx)
	fmt.Fprint(os.Stderr, res.Output)
	if err != nil {
		return err
	}
	if res.Init > 0 {
		fmt.Fprintf(os.Stderr, "invoke: INIT %.1f ms\n", float64(res.Init)/float64(time.Millisecond))
	}
	fmt.Fprintln(os.Stderr, "invoke: answer:", rie.Answer(res.Response))
	fmt.Println(string(res.Response))
	return nil
}
