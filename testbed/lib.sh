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

# free_port: prints a free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
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
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}
