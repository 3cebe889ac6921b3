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

# free_port OWNER: prints a TCP port on 127.0.0.1 that is free now, lies
# outside the kernel's ephemeral range (ip_local_port_range) and is not
# reserved by another instance, and reserves it for OWNER (the instance's
# state directory). An instance keeps its ports across ctl stop/start, so
# while it is stopped nothing may take them: a port in the ephemeral range
# can be taken as the source port of some outbound connection, and a free
# port can be picked by another testbed (a test's private one under its own
# STRATA_TESTBED_DIR); the restart would then fail with "address already in
# use". Reservations live in $STRATA_PORT_REGISTRY, one file per port naming
# its owner, shared by every testbed directory; one whose owner directory is
# gone (testbed/down removed it) is free again.
: "${STRATA_PORT_REGISTRY:=${TMPDIR:-/tmp}/strata-testbed-ports}"
export STRATA_PORT_REGISTRY
free_port() {
  [ -n "${1:-}" ] || die "free_port: no owner directory"
  mkdir -p "$STRATA_PORT_REGISTRY"
  python3 - "$STRATA_PORT_REGISTRY" "$(cd "$1" && pwd -P)" <<'PY'
import os, random, socket, sys
registry, owner = sys.argv[1], sys.argv[2]
lo, hi = 32768, 60999
try:
    lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
except OSError:
    pass

def reserve(port):
    path = os.path.join(registry, str(port))
    for _ in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                held = open(path).read().strip()
            except FileNotFoundError:
                continue
            if held and os.path.isdir(held):
                return False
            # A stale reservation: its instance was removed. Whoever
            # unlinks it first may retake it; the O_EXCL create decides.
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, "w") as f:
            f.write(owner + "\n")
        return True
    return False

# Candidates: registered ports below the ephemeral range (or above it when
# the range starts too low to leave room).
ranges = [r for r in ((20000, lo - 1), (hi + 1, 65535)) if r[1] - r[0] >= 1000]
for _ in range(400):
    a, b = random.choice(ranges)
    port = random.randint(a, b)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    if not reserve(port):
        continue
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
