package rie

import (
	"net"
	"testing"

	"github.com/runtwice/twice/infra/testenv"
)

// TestStartOnATakenRuntimePort: an outgoing connection holds the port chosen for the Runtime
// API, as one of the machine's other connections can between choosing a port and the
// emulator binding it. The emulator cannot bind it and dies, possibly after its invoke port
// already answers; Start must see that and start again on new ports.
func TestStartOnATakenRuntimePort(t *testing.T) {
	rieBin := testenv.RIE(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.LocalAddr().String()

	picks := 0
	pickAddr = func() (string, error) {
		picks++
		if picks == 2 { // the first start's Runtime API port
			return taken, nil
		}
		return freeAddr()
	}
	t.Cleanup(func() { pickAddr = freeAddr })

	e, err := Start(t.Context(), rieBin, "/bin/true", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.runtimeAddr == taken {
		t.Fatalf("started with the Runtime API on %s, which another socket holds", taken)
	}
	if !accepts(e.runtimeAddr) || !accepts(e.addr) {
		t.Fatalf("emulator does not accept on %s and %s:\n%s", e.addr, e.runtimeAddr, e.Output())
	}
	if picks != 4 {
		t.Fatalf("chose %d addresses, want 4 (two starts)", picks)
	}
}
