// Command twicectl asks the operator API what an operator asks the console: was this
// delivered, what happened to this payment, which dead letters are open, and acts on them.
//
//	go run ./infra/twicectl attempts order-1003            # the caller's key, a pay_/evt_/pi_/in_ id
//	go run ./infra/twicectl timeline pay_...
//	go run ./infra/twicectl deadletters ls --status open --source recovery
//	go run ./infra/twicectl deadletters retry dl_... --note "card updated"
//	go run ./infra/twicectl --json attempts pay_...        # JSON for scripts
//	go run ./infra/twicectl smoke                          # the post-deploy check (docs/deploy.md)
//
// It speaks the JSON operator API with the bearer token: --url (TWICE_URL, default
// http://127.0.0.1:3000) and --token (TWICE_OPERATOR_TOKEN, default the local stack's).
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
