# The two front-door commands: `make run` (the local stack) and `make test` (every test).
.PHONY: test run invoke rehearse bench-lambda

# Installs the pinned test tools, starts the test servers, runs every check (scripts/test.sh).
test:
	@bash scripts/test.sh

# Every function behind one local HTTP server on an embedded store.
run:
	go run ./infra/local

# ---- Lambda builds: `sam build` calls make build-<LogicalId> with ARTIFACTS_DIR set.
# Flags as the Lambda docs advise for provided.al2023: static (CGO off), no RPC shim
# (lambda.norpc), reproducible paths, stripped. LAMBDA_GOARCH matches template.yaml
# Architectures (arm64); `make invoke` builds for the machine it runs on.
LAMBDA_GOARCH ?= arm64
ARTIFACTS_DIR ?= .aws-sam/manual
define build_lambda
	GOOS=linux GOARCH=$(LAMBDA_GOARCH) CGO_ENABLED=0 go build -tags lambda.norpc -trimpath \
		-ldflags "-s -w" -o $(ARTIFACTS_DIR)/bootstrap ./functions/$(1)
endef

build-PaymentsApiFunction:
	$(call build_lambda,payments-api)
build-WebhookIngestFunction:
	$(call build_lambda,webhook-ingest)
build-WebhookWorkerFunction:
	$(call build_lambda,webhook-worker)
build-PaymentResolverFunction:
	$(call build_lambda,payment-resolver)
build-RecoveryStepsFunction:
	$(call build_lambda,recovery-steps)
build-DeadLetterSinkFunction:
	$(call build_lambda,deadletter-sink)
build-OperatorApiFunction:
	$(call build_lambda,operator-api)
build-ReconcilerFunction:
	$(call build_lambda,reconciler)
build-OutboxRelayFunction:
	$(call build_lambda,outbox-relay)

# `sam local invoke` without Docker: make invoke FN=payments-api EVENT=events/payments-api/post-payment.json
# Starts DynamoDB Local and moto, creates the tables, queues and parameters, builds FN for
# this machine, runs it under aws-lambda-rie and prints the response.
invoke:
	@test -n "$(FN)" -a -n "$(EVENT)" || { echo "usage: make invoke FN=payments-api EVENT=events/payments-api/post-payment.json" >&2; exit 2; }
	@bash scripts/with-servers.sh go run ./infra/rie/cmd/invoke -fn "$(FN)" -event "$(EVENT)"

# Transforms template.yaml and creates what it declares in moto; prints the report.
rehearse:
	@bash scripts/with-servers.sh go test -count=1 -run TestDeployRehearsal -v ./infra/rie/

# Bootstrap sizes (arm64) and INIT durations under the emulator beside a bare echo function.
bench-lambda:
	@TWICE_TEST_COLDSTART=1 bash scripts/with-servers.sh go test -count=1 -run 'TestBootstrapSizes|TestColdStart' -v ./infra/rie/
