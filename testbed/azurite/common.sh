# Sourced by testbed/azurite/{up,ctl,down}: paths and helpers for Azurite.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

AZURITE_VERSION=3.37.0
AZURITE_HOME=$STRATA_CACHE/azurite                 # npm install (cached, shared)
AZURITE_BIN=$AZURITE_HOME/node_modules/.bin/azurite-blob
STATE=$STRATA_TESTBED_DIR/azurite                  # running instance
DATA=$STATE/data
PIDFILE=$STATE/pid
PORTFILE=$STATE/port
LOGFILE=$STATE/azurite.log
CONFIG=$STATE/config.yaml
ACCOUNT=devstoreaccount1
# The well-known Azurite/emulator key (public, documented by Microsoft).
ACCOUNT_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
CONTAINER=strata

# Serialise up/ctl/down: two test processes may run `up` at once.
mkdir -p "$STATE"
exec 9>"$STRATA_TESTBED_DIR/azurite.lock"
flock 9

# installed: true when the pinned Azurite version is in the cache.
installed() {
  [ -x "$AZURITE_BIN" ] &&
    [ "$(node -p 'require(process.argv[1]).version' "$AZURITE_HOME/node_modules/azurite/package.json" 2>/dev/null)" = "$AZURITE_VERSION" ]
}

# answers PORT: true when something speaks HTTP on PORT (Azurite answers an
# unauthenticated request with 4xx, which is enough to know it is serving).
answers() {
  local code
  code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$1/$ACCOUNT?comp=list") || return 1
  [ "$code" != 000 ]
}

# start_azurite: starts azurite-blob in the background on $(cat PORTFILE),
# keeping its data under DATA, and waits until it answers.
start_azurite() {
  local port; port=$(cat "$PORTFILE")
  mkdir -p "$DATA"
  wait_port_free "$port"
  # --silent: no access log; --debug would log every request. stdout/stderr
  # (startup lines, errors) go to LOGFILE.
  setsid "$AZURITE_BIN" --blobHost 127.0.0.1 --blobPort "$port" \
    --location "$DATA" --skipApiVersionCheck --loose --silent \
    --disableTelemetry >>"$LOGFILE" 2>&1 </dev/null 9>&- &
  echo $! >"$PIDFILE"
  if ! wait_until 60 answers "$port"; then
    tail -20 "$LOGFILE" >&2 || true
    die "azurite did not answer on 127.0.0.1:$port within 60s (log: $LOGFILE)"
  fi
}
