package harness

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the stack die with the chaos run, so an interrupted run leaves no stack
// holding its ports.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
