// Package inprocess runs every twice function behind one local HTTP server, on the embedded
// store, the durable local queue, the local state-machine runner and the Stripe simulator: the
// same handlers and the same routes as template.yaml, in one process.
//
// The command is infra/local (`go run ./infra/local`); end-to-end tests build a Stack on free
// ports, or run that command and kill it with -9.
//
// Everything durable lives in one bbolt file (twice.db: the store, the queues and the runner's
// checkpoints) and the simulator's own file (providersim.db) under the data directory, so a
// killed process restarts where it stopped.
package inprocess
