package dynamo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// NewClient builds a client for a DynamoDB-API server at endpoint (DynamoDB Local in tests and
// local tooling): static credentials, us-east-1, no shared config or environment read.
//
// Response checksums are not validated: DynamoDB Local sends no x-amz-crc32 on error answers
// and the SDK would log a WARN for every failed condition (aws/aws-sdk-go-v2#3545), which is
// every replay. The HTTP client is the SDK's buildable one (a plain *http.Client panics when
// AWS_CA_BUNDLE is set), with enough idle connections for 64 callers in flight.
//
// Production code builds its client from lambdaenv.AWS in main, not through this.
func NewClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConnsPerHost = 64
	})
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:  httpClient,
	}
	opts := append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.DisableValidateResponseChecksum = true
	}}, optFns...)
	return dynamodb.NewFromConfig(cfg, opts...)
}

// TableAdmin is the part of *dynamodb.Client that CreateTable and DeleteTable call.
type TableAdmin interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
}

var _ TableAdmin = (*dynamodb.Client)(nil)

// tableWait bounds how long CreateTable waits for ACTIVE; DynamoDB Local is ACTIVE at once,
// AWS within seconds to a minute.
const tableWait = 5 * time.Minute

// CreateTable creates a PAY_PER_REQUEST table laid out the way Store writes it: pk (S), plus
// sk (S) when sortKey is set, plus the "gsi1" index on gsi1pk/gsi1sk (projection ALL) when
// index is set. It turns TTL on for expires_at and returns once the table is ACTIVE. The
// deployed tables come from template.yaml; this is for tests and local tooling.
func CreateTable(ctx context.Context, client TableAdmin, name string, sortKey, index bool) error {
	return CreateTableWith(ctx, client, name, sortKey, index, DefaultAttributes)
}

// CreateTableWith is CreateTable with the attribute names a: PowertoolsAttributes makes the
// table Powertools' idempotency documentation declares (partition key id, TTL on expiration).
func CreateTableWith(ctx context.Context, client TableAdmin, name string, sortKey, index bool, a Attributes) error {
	if err := a.check(); err != nil {
		return err
	}
	attrs := []types.AttributeDefinition{{AttributeName: aws.String(a.PK), AttributeType: types.ScalarAttributeTypeS}}
	schema := []types.KeySchemaElement{{AttributeName: aws.String(a.PK), KeyType: types.KeyTypeHash}}
	if sortKey {
		attrs = append(attrs, types.AttributeDefinition{AttributeName: aws.String(a.SK), AttributeType: types.ScalarAttributeTypeS})
		schema = append(schema, types.KeySchemaElement{AttributeName: aws.String(a.SK), KeyType: types.KeyTypeRange})
	}
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: attrs,
		KeySchema:            schema,
		BillingMode:          types.BillingModePayPerRequest,
	}
	if index {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String(a.IndexPK), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String(a.IndexSK), AttributeType: types.ScalarAttributeTypeS})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{
			IndexName: aws.String(IndexName),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(a.IndexPK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(a.IndexSK), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}}
	}
	if _, err := client.CreateTable(ctx, in); err != nil {
		return newCallError("CreateTable", name, nil, err)
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = time.Second, 10*time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, tableWait); err != nil {
		return fmt.Errorf("dynamo: table %s not active: %w", name, err)
	}
	if _, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(a.Expires),
			Enabled:       aws.Bool(true),
		},
	}); err != nil {
		return newCallError("UpdateTimeToLive", name, nil, err)
	}
	return nil
}

// DeleteTable deletes a table; a table that does not exist is not an error, so test cleanups
// can run twice.
func DeleteTable(ctx context.Context, client TableAdmin, name string) error {
	_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	var nf *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &nf) {
		return newCallError("DeleteTable", name, nil, err)
	}
	return nil
}
