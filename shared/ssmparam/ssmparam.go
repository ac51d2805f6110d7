package ssmparam

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Errors, as package secrets names them; they name the parameter, never its value.
var (
	ErrNotFound    = errors.New("ssmparam: not found")
	ErrEmpty       = errors.New("ssmparam: empty")
	ErrUnavailable = errors.New("ssmparam: unavailable")
)

// Defaults of Source, as secrets.SSM's.
const (
	DefaultRefresh    = 5 * time.Minute
	DefaultRetryAfter = 30 * time.Second
)

// Split reads one stored value as the list of active secrets, exactly as secrets.Split does
// (a test holds them equal): comma- or newline-separated, trimmed, empties dropped. It is
// repeated here because package secrets links the SDK's ssm client, which is what this
// package exists to avoid.
func Split(value string) []string {
	f := strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' })
	out := f[:0]
	for _, s := range f {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// maxResponse bounds a GetParameter answer: a parameter value is at most 8 KB (advanced tier).
const maxResponse = 64 << 10

// Client makes GetParameter calls.
type Client struct {
	cfg      aws.Config
	endpoint string
	signer   *v4.Signer
	http     aws.HTTPClient
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
	return &Client{cfg: cfg, endpoint: strings.TrimRight(endpoint, "/") + "/", signer: v4.NewSigner(), http: hc, now: time.Now}
}

// apiError is SSM's JSON error body.
type apiError struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// Get returns the parameter's value, decrypted. Errors wrap ErrNotFound or
// ErrUnavailable and name the parameter, never its value.
func (c *Client) Get(ctx context.Context, name string) (string, error) {
	body, err := json.Marshal(map[string]any{"Name": name, "WithDecryption": true})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrUnavailable, name, err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "AmazonSSM.GetParameter")
	creds, err := c.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: %s: credentials: %w", ErrUnavailable, name, err)
	}
	sum := sha256.Sum256(body)
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "ssm", c.cfg.Region, c.now()); err != nil {
		return "", fmt.Errorf("%w: %s: sign: %w", ErrUnavailable, name, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrUnavailable, name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrUnavailable, name, err)
	}
	return decode(name, resp.StatusCode, b)
}

var errorType = regexp.MustCompile(`^[A-Z][A-Za-z]{2,63}(Exception|Error|Fault)$`)

// decode reads a GetParameter answer.
func decode(name string, status int, b []byte) (string, error) {
	if status != http.StatusOK {
		var e apiError
		json.Unmarshal(b, &e)
		typ := e.Type[strings.LastIndexByte(e.Type, '#')+1:]
		if typ == "ParameterNotFound" {
			return "", fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		// Only an error type of AWS's shape is kept: the body is not ours to echo.
		if !errorType.MatchString(typ) {
			typ = "unrecognised error"
		}
		return "", fmt.Errorf("%w: %s: status %d %s", ErrUnavailable, name, status, typ)
	}
	var out struct {
		Parameter *struct {
			Value *string `json:"Value"`
		} `json:"Parameter"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", fmt.Errorf("%w: %s: undecodable answer", ErrUnavailable, name)
	}
	if out.Parameter == nil || out.Parameter.Value == nil {
		return "", fmt.Errorf("%w: %s", ErrEmpty, name)
	}
	return *out.Parameter.Value, nil
}

// Getter is the one call Source makes; *Client satisfies it.
type Getter interface {
	Get(ctx context.Context, name string) (string, error)
}

var _ Getter = (*Client)(nil)

// Source caches parameters as secrets.SSM does.
type Source struct {
	get Getter

	Refresh    time.Duration    // default DefaultRefresh
	RetryAfter time.Duration    // default DefaultRetryAfter
	Now        func() time.Time // default time.Now
	Logger     *slog.Logger     // default slog.Default()

	mu    sync.Mutex
	cache map[string]entry
}

type entry struct {
	values []string
	next   time.Time
}

// NewSource returns a source over g with the defaults.
func NewSource(g Getter) *Source {
	return &Source{get: g, Refresh: DefaultRefresh, RetryAfter: DefaultRetryAfter,
		Now: time.Now, Logger: slog.Default(), cache: map[string]entry{}}
}

// Secrets returns the active secrets in parameter name, split with secrets.Split.
func (s *Source) Secrets(ctx context.Context, name string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Now()
	e, cached := s.cache[name]
	if cached && now.Before(e.next) {
		return e.values, nil
	}
	values, err := s.fetch(ctx, name)
	if err == nil {
		s.cache[name] = entry{values: values, next: now.Add(s.Refresh)}
		return values, nil
	}
	if !cached {
		return nil, err
	}
	s.Logger.WarnContext(ctx, "secret refresh failed; serving the last good value",
		"secret", name, "err", err, "retry_in", s.RetryAfter.String())
	s.cache[name] = entry{values: e.values, next: now.Add(s.RetryAfter)}
	return e.values, nil
}

func (s *Source) fetch(ctx context.Context, name string) ([]string, error) {
	v, err := s.get.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	vs := Split(v)
	if len(vs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrEmpty, name)
	}
	return vs, nil
}
