#!/usr/bin/env bash
# with-servers.sh CMD...: runs CMD with the test servers up and TWICE_TEST_* exported, then
# stops them. For testing one package the way make test would:
#
#	scripts/with-servers.sh go test -race ./shared/idempotency/...
set -Eeuo pipefail
(($#)) || { echo "usage: $0 CMD..." >&2; exit 2; }

TWICE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/testenv.sh
. "$TWICE_ROOT/scripts/testenv.sh"
TWICE_LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/twice-test.XXXXXX")
export TWICE_LOG_DIR

ensure_npm_tools
ensure_go_tools
ensure_chromium
start_test_servers
export TWICE_TEST_REQUIRE_SERVERS=1
# Not exec: the EXIT trap must run to stop the servers.
"$@"
