# The two front-door commands: `make run` (the local stack) and `make test` (every test).
.PHONY: test run

# Installs the pinned test tools, starts the test servers, runs every check (scripts/test.sh).
test:
	@bash scripts/test.sh

# Every function behind one local HTTP server on an embedded store.
run:
	go run ./infra/local
