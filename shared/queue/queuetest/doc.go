// Package queuetest is the one contract suite every queue.Queue implementation must pass, the
// way watermill's pubsub/tests is run by each of its Pub/Subs.
//
// Time is a parameter: the local queue runs on a fake clock that the suite advances, SQS (moto)
// runs in real time and the suite waits it out, in whole seconds because SQS counts seconds.
package queuetest
