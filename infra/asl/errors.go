package asl

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aws/aws-lambda-go/lambda/messages"
	"reflect"
	"strings"
)

// Sentinel errors a caller can branch on with errors.Is.
var (
	// ErrExecutionAlreadyExists: the name is taken by a closed execution or by a running one
	// with a different input (AWS's ExecutionAlreadyExists).
	ErrExecutionAlreadyExists = errors.New("asl: execution already exists")
	// ErrExecutionDoesNotExist: no execution has that ARN.
	ErrExecutionDoesNotExist = errors.New("asl: execution does not exist")
	// ErrStateMachineDoesNotExist: no state machine was defined under that name.
	ErrStateMachineDoesNotExist = errors.New("asl: state machine does not exist")
	// ErrInvalidName: an execution or state machine name breaks AWS's naming rules.
	ErrInvalidName = errors.New("asl: invalid name")
	// ErrInvalidInput: the execution input is not a JSON document.
	ErrInvalidInput = errors.New("asl: invalid execution input")
	// ErrInvalidDefinition: the definition failed to parse or validate; see *DefinitionError.
	ErrInvalidDefinition = errors.New("asl: invalid definition")
	// ErrClosed: the runner was closed.
	ErrClosed = errors.New("asl: runner closed")
)

// DefinitionError lists every problem found in a definition.
type DefinitionError struct {
	Problems []string
}

func (e *DefinitionError) Error() string {
	return "asl: invalid definition: " + strings.Join(e.Problems, "; ")
}

// Is makes errors.Is(err, ErrInvalidDefinition) hold.
func (e *DefinitionError) Is(target error) bool { return target == ErrInvalidDefinition }

// Predefined error names of the States Language.
const (
	ErrNameAll                   = "States.ALL"
	ErrNameTaskFailed            = "States.TaskFailed"
	ErrNameTimeout               = "States.Timeout"
	ErrNameRuntime               = "States.Runtime"
	ErrNameResultPathMatchFailed = "States.ResultPathMatchFailure"
	ErrNameParameterPathFailure  = "States.ParameterPathFailure"
	ErrNameIntrinsicFailure      = "States.IntrinsicFailure"
	ErrNameNoChoiceMatched       = "States.NoChoiceMatched"
)

// StatesError is an error with a States Language name, the thing Retry and Catch match on.
type StatesError struct {
	Name  string
	Cause string
}

func (e *StatesError) Error() string { return e.Name + ": " + e.Cause }

// ErrorName returns the name Retry and Catch match.
func (e *StatesError) ErrorName() string { return e.Name }

func runtimeErr(name, format string, args ...any) *StatesError {
	return &StatesError{Name: name, Cause: fmt.Sprintf(format, args...)}
}

// ErrorName returns the name Retry and Catch see for an error returned by a task: the
// error's own ErrorName() if it has one; the Type of a messages.InvokeResponse_Error, which a
// Go Lambda handler returns to name its error and Lambda reports as the errorType; else the
// Go Lambda runtime's convention, the dynamic type's name without package or pointer
// (*recovery.DeclineError -> "DeclineError", errors.New -> "errorString", fmt.Errorf with %w
// -> "wrapError").
func ErrorName(err error) string {
	var named interface{ ErrorName() string }
	if errors.As(err, &named) {
		return named.ErrorName()
	}
	if ire, ok := invokeError(err); ok && ire.Type != "" {
		return ire.Type
	}
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		return t.Elem().Name()
	}
	return t.Name()
}

// lambdaCause renders a task error the way Lambda reports a function error in Cause.
func lambdaCause(name string, err error) string {
	msg := err.Error()
	if ire, ok := invokeError(err); ok {
		msg = ire.Message
	}
	b, _ := json.Marshal(struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}{msg, name})
	return string(b)
}

func invokeError(err error) (messages.InvokeResponse_Error, bool) {
	var v messages.InvokeResponse_Error
	if errors.As(err, &v) {
		return v, true
	}
	var p *messages.InvokeResponse_Error
	if errors.As(err, &p) && p != nil {
		return *p, true
	}
	return v, false
}
