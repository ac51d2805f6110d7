// Package asl is the local stand-in for AWS Step Functions: an interpreter for the subset of
// the Amazon States Language this project uses, with durable checkpoints.
//
// States: Task, Choice (every comparison operator, their Path forms, the Is* tests,
// And/Or/Not, Default), Wait (Seconds, Timestamp, SecondsPath, TimestampPath), Pass,
// Succeed and Fail. Task Retry (ErrorEquals with States.ALL, States.TaskFailed,
// States.Timeout; IntervalSeconds, MaxAttempts, BackoffRate, MaxDelaySeconds,
// JitterStrategy FULL|NONE) and Catch (ErrorEquals, Next, ResultPath). Input and output
// are processed in AWS's order: InputPath, Parameters, ResultSelector, ResultPath,
// OutputPath; paths are RFC 9535 JSONPath (github.com/theory/jsonpath), "$$." reads the
// context object, and Parameters may call States.Format, StringToJson, JsonToString,
// MathAdd, Array, ArrayLength, ArrayGetItem and ArrayContains. Map and Parallel states and
// execution-level TimeoutSeconds are not supported.
//
// Task resources are found through Tasks (TaskRegistry is a map): a plain Lambda
// function ARN receives the effective input and its result is the state's result;
// arn:aws:states:::lambda:invoke calls Parameters.FunctionName with Parameters.Payload and
// wraps the result as {"ExecutedVersion","Payload","StatusCode"} like AWS. Retry and Catch
// match the error's ErrorName() if it has one, else the Go Lambda runtime's name (the
// error's type name: *recovery.DeclineError is "DeclineError"). A task past its
// TimeoutSeconds fails with States.Timeout, a panicking task with States.TaskFailed. The
// callback pattern (waitForTaskToken, TimeoutSecondsPath, HeartbeatSeconds) is not supported:
// nothing here waits inside an execution for an outside signal.
//
// Durability: the runner checkpoints every transition to a Store (BoltStore over a shared
// bbolt file) before the next side effect, recording the current state, its raw input,
// retry counters, the due time of a Wait or retry, and the history. Resume picks up every
// RUNNING execution after a restart. Tasks run at least once: a Task interrupted by a crash
// runs again after Resume, so task functions must be idempotent (the project's tasks use
// idempotency keys derived from the invoice and attempt). A Task whose result was
// checkpointed never runs again, and a Wait resumes with its original due time.
//
// Time comes from a shared/clock Clock (WithClock): clock.Real by default, a clock.Fake in
// tests. WithTimeFactor(N) gives each execution its own clock, starting at the runner clock's
// time when the execution starts and running N times faster, checkpointed with it: a local
// stack's recovery waits days in seconds, and an execution started an hour after the runner
// is not an hour times N ahead of the rest of the stack. Tasks see their execution's time
// through $$.State.EnteredTime. StartExecutionAt starts an execution's own clock at a given
// time, for a workflow that ended at a wait and goes on in a new execution from its moment.
package asl
