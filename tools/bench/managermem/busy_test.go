package managermem

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// burnEnv, set to the process ID of the benchmark, makes the test binary burn CPU until that
// process is gone instead of running tests: the processes of -managermem.busy.
const burnEnv = "FLUXFED_MANAGERMEM_BURN"

func TestMain(m *testing.M) {
	if parent, err := strconv.Atoi(os.Getenv(burnEnv)); err == nil {
		burnCPU(parent)
	}
	os.Exit(m.Run())
}

// burnCPU spins one thread until parent is no longer its parent, checking for that a few times
// a second: a burner never outlives the benchmark, however it ends. (The parent's ID comes from
// the parent: one that died before the burner looked would not be missed.)
func burnCPU(parent int) {
	runtime.GOMAXPROCS(1)
	for {
		deadline := time.Now().Add(200 * time.Millisecond)
		for time.Now().Before(deadline) {
		}
		if os.Getppid() != parent {
			os.Exit(0)
		}
	}
}

// burn starts n processes that each keep a CPU busy until the benchmark ends, so that every run
// shares the machine with the same load.
func burn(b *testing.B, n int) {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for range n {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), burnEnv+"="+strconv.Itoa(os.Getpid()))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			b.Fatalf("starting a CPU-burning process: %v", err)
		}
		b.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	logLoad(b, "once the CPU-burning processes started")
}
