module github.com/runtwice/twice

go 1.26.8

require (
	github.com/standard-webhooks/standard-webhooks/libraries v0.0.1
	github.com/stripe/stripe-go/v82 v82.5.1
)

require github.com/stretchr/testify v1.12.1 // indirect
