package main

import (
	"log/slog"
	"os"
	"runtime"
)

// defaultProcs is the GOMAXPROCS the runtime chose: the CPUs this process
// may use (its affinity and cgroup limit), or the GOMAXPROCS variable.
var defaultProcs = runtime.GOMAXPROCS(0)

// brokerProcs is the GOMAXPROCS `strata serve` runs with: twice the CPUs,
// unless the GOMAXPROCS variable is set (then that). The broker's
// goroutines spend much of their time in blocking file system calls (the
// WAL's writes and fdatasyncs, compaction's puts, reads of chunks). With
// a P per CPU, each such call longer than 20 µs has the runtime's monitor
// hand its P to another thread, and the monitor, finding work to retake,
// keeps waking every 20 µs; with Ps to spare, a goroutine in a system call
// keeps its P, the others run, and the monitor backs off. At 16
// partitions saturating on 2 CPUs this took the monitor from 7.8 % of the
// broker's samples to 4.3 % and records/s up 6 % (10 % with the broker on
// one CPU): docs/streamsets.md.
func brokerProcs(envSet bool, cpus int) int {
	if envSet {
		return 0
	}
	return 2 * max(cpus, 1)
}

// setBrokerProcs applies brokerProcs to this process.
func setBrokerProcs(logger *slog.Logger) {
	_, set := os.LookupEnv("GOMAXPROCS")
	if n := brokerProcs(set, defaultProcs); n > 0 {
		runtime.GOMAXPROCS(n)
		logger.Info("GOMAXPROCS set to twice the CPUs (the GOMAXPROCS variable overrides)", "gomaxprocs", n, "cpus", defaultProcs)
	}
}
