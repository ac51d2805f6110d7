// Package events holds no code: its directories hold one sample event per function and
// trigger, usable with `sam local invoke -e` and `make invoke`. events_test.go parses every
// file into the Go type its handler takes, so a sample cannot drift from the code.
package events
