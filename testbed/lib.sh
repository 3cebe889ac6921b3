# Sourced by testbed/<name>/{up,ctl,down}. Shared helpers for the testbeds.
# STRATA_CACHE: where installs are cached across runs (outside the repo).
# STRATA_TESTBED_DIR: where running instances keep state, logs and config.
: "${STRATA_CACHE:=$HOME/.cache/strata}"
: "${STRATA_TESTBED_DIR:=/tmp/strata-testbed}"
export STRATA_CACHE STRATA_TESTBED_DIR
mkdir -p "$STRATA_CACHE" "$STRATA_TESTBED_DIR"

# log MSG...: progress to stderr (stdout carries only export lines).
log() { echo "testbed: $*" >&2; }

# die MSG...: fail loudly.
die() { echo "testbed: error: $*" >&2; exit 1; }

# free_port: prints a TCP port on 127.0.0.1 that is free now and lies
# outside the kernel's ephemeral range (ip_local_port_range). An instance
# keeps its port across ctl stop/start; a port in the ephemeral range can be
# taken meanwhile as the source port of some outbound connection (or of a
# client redialing it, which can connect to itself), and the restart then
# fails with "address already in use".
free_port() {
  python3 - <<'PY'
import random, socket
lo, hi = 32768, 60999
try:
    lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
except OSError:
    pass
# Candidates: registered ports below the ephemeral range (or above it when
# the range starts too low to leave room).
ranges = [r for r in ((20000, lo - 1), (hi + 1, 65535)) if r[1] - r[0] >= 1000]
for _ in range(200):
    a, b = random.choice(ranges)
    port = random.randint(a, b)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("testbed: no free port outside the ephemeral range %d-%d" % (lo, hi))
PY
}

# port_free PORT: true when nothing holds 127.0.0.1:PORT (a listener, or a
# connection of a process still exiting).
port_free() {
  python3 -c 'import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.close()' "$1" 2>/dev/null
}

# wait_port_free PORT: waits up to 30s for PORT to be free, so that a
# restart on the same port does not race the old process's exit.
wait_port_free() {
  wait_until 30 port_free "$1" || die "port 127.0.0.1:$1 is still in use 30s after its instance stopped: $(ss -Htanp "( sport = :$1 )" 2>/dev/null | head -3)"
}

# pid_alive FILE: true when FILE holds the pid of a running process.
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# wait_until SECONDS CMD...: retries CMD every 0.2s until it succeeds.
wait_until() {
  local limit=$1; shift
  local deadline=$(( $(date +%s) + limit ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

# stop_pidfile FILE: SIGTERM then SIGKILL the process in FILE; removes FILE.
stop_pidfile() {
  local f=$1
  if pid_alive "$f"; then
    local pid; pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -9 "$pid" 2>/dev/null; then
      # Until it is gone its sockets hold their ports.
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
  fi
  rm -f "$f"
}
