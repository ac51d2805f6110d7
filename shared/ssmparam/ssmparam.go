package ssmparam

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/secrets"
)

// maxResponse bounds a GetParameter answer: a parameter value is at most 8 KB (advanced tier).
const maxResponse = 64 << 10

// Client makes GetParameter calls.
type Client struct {
	cfg      aws.Config
	endpoint string
	signer   *v4.Signer
	http     aws.HTTPClient
	retryer  aws.Retryer
	now      func() time.Time
}

// New returns a client for cfg's region and credentials. The endpoint is
// AWS_ENDPOINT_URL_SSM, else AWS_ENDPOINT_URL, else cfg.BaseEndpoint, else
// https://ssm.<region>.amazonaws.com: the SDK's own order for a service endpoint.
func New(cfg aws.Config) *Client {
	endpoint := os.Getenv("AWS_ENDPOINT_URL_SSM")
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	if endpoint == "" && cfg.BaseEndpoint != nil {
		endpoint = *cfg.BaseEndpoint
	}
	if endpoint == "" {
		endpoint = "https://ssm." + cfg.Region + ".amazonaws.com"
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = awshttp.NewBuildableClient()
	}
	var r aws.Retryer
	if cfg.Retryer != nil {
		r = cfg.Retryer()
	} else {
		r = retry.NewStandard() // what an SDK client takes when the configuration has none
	}
	return &Client{cfg: cfg, endpoint: strings.TrimRight(endpoint, "/") + "/", signer: v4.NewSigner(), http: hc, retryer: r, now: time.Now}
}

// apiError is SSM's JSON error body.
type apiError struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// Get returns the parameter's value, decrypted (secrets.Getter). Errors wrap secrets.ErrNotFound
// or secrets.ErrUnavailable and name the parameter, never its value.
//
// A throttled or failed call is repeated under the configuration's retryer (the one every SDK
// client of the function uses: its attempts, backoff with jitter, retry quota and deadline
// check), through lambdaenv.Attempts.
func (c *Client) Get(ctx context.Context, name string) (string, error) {
	var v string
	err := lambdaenv.Attempts(ctx, c.retryer, func(ctx context.Context) (err error) {
		v, err = c.get(ctx, name)
		return err
	})
	return v, err
}

func (c *Client) get(ctx context.Context, name string) (string, error) {
	body, err := json.Marshal(map[string]any{"Name": name, "WithDecryption": true})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", secrets.ErrUnavailable, name, err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "AmazonSSM.GetParameter")
	creds, err := c.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: %s: credentials: %w", secrets.ErrUnavailable, name, err)
	}
	sum := sha256.Sum256(body)
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "ssm", c.cfg.Region, c.now()); err != nil {
		return "", fmt.Errorf("%w: %s: sign: %w", secrets.ErrUnavailable, name, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", secrets.ErrUnavailable, name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", secrets.ErrUnavailable, name, err)
	}
	return decode(name, resp.StatusCode, b)
}

// errorType is compiled on first use: compiling at package initialisation was a tenth of
// every function's INIT, and only a failed GetParameter reads it.
var errorType = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Z][A-Za-z]{2,63}(Exception|Error|Fault)$`)
})

// decode reads a GetParameter answer.
func decode(name string, status int, b []byte) (string, error) {
	if status != http.StatusOK {
		var e apiError
		json.Unmarshal(b, &e)
		typ := e.Type[strings.LastIndexByte(e.Type, '#')+1:]
		if typ == "ParameterNotFound" {
			return "", fmt.Errorf("%w: %s", secrets.ErrNotFound, name)
		}
		// Only an error type of AWS's shape is kept: the body is not ours to echo.
		if !errorType().MatchString(typ) {
			typ = ""
		}
		return "", fmt.Errorf("%w: %s: %w", secrets.ErrUnavailable, name, &callError{status: status, code: typ})
	}
	var out struct {
		Parameter *struct {
			Value *string `json:"Value"`
		} `json:"Parameter"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", fmt.Errorf("%w: %s: undecodable answer", secrets.ErrUnavailable, name)
	}
	if out.Parameter == nil || out.Parameter.Value == nil {
		return "", fmt.Errorf("%w: %s", secrets.ErrEmpty, name)
	}
	return *out.Parameter.Value, nil
}

var _ secrets.Getter = (*Client)(nil)

// callError is a failed GetParameter answer: its status and AWS error code, what a retryer
// classifies (ErrorCode, HTTPStatusCode), and nothing of the body.
type callError struct {
	status int
	code   string
}

func (e *callError) Error() string {
	code := e.code
	if code == "" {
		code = "unrecognised error"
	}
	return fmt.Sprintf("status %d %s", e.status, code)
}

func (e *callError) ErrorCode() string   { return e.code }
func (e *callError) HTTPStatusCode() int { return e.status }
