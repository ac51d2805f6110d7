// Package rie is `sam local invoke` without Docker: it builds a function the way the template
// builds it (linux, CGO off, -tags lambda.norpc, -trimpath, stripped, named bootstrap), runs it
// under aws-lambda-rie (the Lambda Runtime Interface Emulator) and invokes it with an event.
//
// Fixture creates what a function's environment names, on DynamoDB Local (tables, laid out as
// template.yaml declares them) and moto (queues with their DLQs, SSM parameters, the recovery
// state machine), and returns the environment variables template.yaml would set, with the
// AWS SDK pointed at the local servers through AWS_ENDPOINT_URL_<SERVICE>.
//
// The emulator runs one invoke at a time (it crashes on concurrent ones), initialises the
// function on the first invoke, and prints Lambda's REPORT line with "Init Duration", which
// InitDuration reads: the cold-start figure of the size and start-up test.
//
// Gateway stands in for the HTTP API in front of functions under the emulator, with the routes
// HTTPAPIRoutes reads from template.yaml after the SAM transform (rehearsal/routes.py): it picks
// a route as API Gateway does and runs its JWT authorizer and scopes.
//
// `make invoke FN=payments-api EVENT=events/payments-api/post-payment.json` runs cmd/invoke,
// which does all of this for a person.
package rie
