// Package testenv connects tests to the real servers that make test starts: DynamoDB Local,
// moto (SQS, Step Functions, SSM, Secrets Manager, Scheduler), stripe-mock, the Lambda runtime
// interface emulator and a headless chromium.
//
// scripts/test.sh starts each server on a free loopback port and exports where it is:
//
//	TWICE_TEST_DYNAMODB_ENDPOINT  http://127.0.0.1:PORT of DynamoDB Local
//	TWICE_TEST_MOTO_ENDPOINT      http://127.0.0.1:PORT of moto_server
//	TWICE_TEST_STRIPE_MOCK        http://127.0.0.1:PORT of stripe-mock
//	TWICE_TEST_RIE                path of the aws-lambda-rie binary
//	TWICE_TEST_ASL_VALIDATOR      path of the asl-validator command
//	TWICE_TEST_CHROMIUM           path of the chromium binary
//
// A test whose server is not configured is skipped, so `go test ./shared/...` works on a
// laptop without the servers. When CI=true or TWICE_TEST_REQUIRE_SERVERS=1 the same test
// fails instead: CI can never pass by skipping.
//
// Use in a test:
//
//	db := testenv.DynamoDB(t)
//	table := testenv.CreateTable(t, db, testenv.Schema{SortKey: true, GSI1: true})
//	// ... PutItem into table; it is deleted when the test ends.
//
//	sqsClient := sqs.NewFromConfig(testenv.MotoConfig(t))
package testenv
