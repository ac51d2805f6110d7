#!/usr/bin/env bash
# make test: every check and every test, with the real servers the tests need.
#
# Installs the pinned tools that are missing (npm tools, Go tools, chromium), starts DynamoDB
# Local, moto and stripe-mock on free loopback ports, exports TWICE_TEST_* for infra/testenv,
# runs gofmt, go vet, cfn-lint, asl-validator, redocly lint (docs/openapi.yaml) and
# go test -race, and stops the servers on exit.
# Safe to re-run: leftovers of a killed run are stopped, installs are reused.
#
# GOTESTFLAGS adds flags to go test (e.g. GOTESTFLAGS=-v or GOTESTFLAGS='-run TestX').
set -Eeuo pipefail

TWICE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$TWICE_ROOT"
# shellcheck source=scripts/testenv.sh
. scripts/testenv.sh

TWICE_LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/twice-test.XXXXXX")
export TWICE_LOG_DIR
log "server logs: $TWICE_LOG_DIR (removed when every test passes)"

timed "install npm tools" ensure_npm_tools
timed "install go tools" ensure_go_tools
timed "install chromium" ensure_chromium
# The servers start while the static checks run; go test waits for them.
launch_test_servers

gofmt_check() {
	local files
	files=$(find . \( -name node_modules -o -name '.?*' \) -prune -o -name '*.go' -print0 | xargs -0 -r gofmt -l) || return 1
	if [[ -n $files ]]; then
		printf 'gofmt needed on:\n%s\n' "$files" >&2
		return 1
	fi
}
timed "gofmt" gofmt_check || die "gofmt"
timed "go vet" go vet ./... || die "go vet"
timed "cfn-lint" cfn-lint template.yaml || die "cfn-lint template.yaml"

asl_check() {
	local f found=0
	for f in statemachines/*.asl.json; do
		[[ -e $f ]] || continue
		found=1
		"$TWICE_TEST_ASL_VALIDATOR" --json-path "$f" || return 1
	done
	((found)) || log "asl-validator: no statemachines/*.asl.json yet"
}
timed "asl-validator" asl_check || die "asl-validator"

# docs/openapi.yaml against the OpenAPI 3.1 specification (Redocly's struct rule) and its
# recommended rules, warnings included (docs/redocly.yaml). No telemetry, no update check:
# the machines reach package registries only.
openapi_check() {
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
		"$TWICE_TEST_REDOCLY" lint --config docs/redocly.yaml docs/openapi.yaml
}
timed "openapi lint" openapi_check || die "redocly lint docs/openapi.yaml"

# The recovery calendar sweep over every hour of four years; under -race below it takes every
# fifth hour (the race detector slows its millions of plans tenfold).
timed "calendar sweep" go test -count=1 -run 'TestCalendar' ./shared/recovery || die "recovery calendar sweep"
timed "servers ready" await_test_servers
# A test that cannot reach a server fails instead of skipping when this is set.
export TWICE_TEST_REQUIRE_SERVERS=1

# Last, so the run ends with go test's own summary lines.
log "go test -race -count=1 -timeout 20m ${GOTESTFLAGS:-} ./..."
rc=0
# shellcheck disable=SC2086 # GOTESTFLAGS is a list of flags
go test -race -count=1 -timeout 20m ${GOTESTFLAGS:-} ./... || rc=$?
# Server logs are kept only when something failed.
((rc != 0)) || rm -rf "$TWICE_LOG_DIR"
exit "$rc"
