# Sourced by testbed/etcd/{up,ctl,down}: where the etcd server lives and how
# its three members start.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../lib.sh"

ETCD_MODULE=go.etcd.io/etcd/server/v3
ETCD_VERSION=v3.7.3
ETCD_MEMBERS=3
src_dir=$STRATA_CACHE/etcd/src
bin_dir=$STRATA_CACHE/etcd/bin
bin=$bin_dir/etcd
state=$STRATA_TESTBED_DIR/etcd
envfile=$state/instance.env

# lock: one script at a time works on the instance (and on the build).
lock() {
  exec 9>"$STRATA_TESTBED_DIR/etcd.lock"
  flock 9
}

# installed: the cached binary exists and was built from the pinned version.
installed() {
  [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | grep "dep[[:space:]]*$ETCD_MODULE[[:space:]]*$ETCD_VERSION" >/dev/null
}

# install: build the etcd server once into the cache. `go install
# $ETCD_MODULE@$ETCD_VERSION` is refused (its go.mod has replace
# directives), so a module of its own with a main calling etcdmain.Main is
# built instead.
install() {
  installed && return 0
  log "building $ETCD_MODULE@$ETCD_VERSION into $bin_dir (about a minute)"
  rm -rf "$src_dir"
  mkdir -p "$src_dir" "$bin_dir"
  cat >"$src_dir/main.go" <<'EOT'
// Command etcd is the etcd server, built for the Strata testbed.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOT
  (
    cd "$src_dir" &&
      GOFLAGS= GOWORK=off go mod init strata-testbed/etcd &&
      GOFLAGS= GOWORK=off go get "$ETCD_MODULE@$ETCD_VERSION" &&
      GOFLAGS= GOWORK=off go mod tidy &&
      GOFLAGS= GOWORK=off nice -n 10 go build -o "$bin" .
  ) >&2 || die "building $ETCD_MODULE@$ETCD_VERSION failed"
  installed || die "built $bin is not $ETCD_MODULE@$ETCD_VERSION"
}

# member_env N: sets name, client and peer ports of member N (1-based).
member_env() {
  # shellcheck disable=SC1090
  . "$envfile"
  local n=$1
  name=m$n
  client_port=$(eval echo "\$ETCD_CLIENT_PORT_$n")
  peer_port=$(eval echo "\$ETCD_PEER_PORT_$n")
  pidfile=$state/$name.pid
}

# initial_cluster: the --initial-cluster value naming every member.
initial_cluster() {
  # shellcheck disable=SC1090
  . "$envfile"
  local n out=
  for n in $(seq "$ETCD_MEMBERS"); do
    out="${out:+$out,}m$n=http://127.0.0.1:$(eval echo "\$ETCD_PEER_PORT_$n")"
  done
  echo "$out"
}

# healthy N: member N answers /health with health true.
healthy() {
  member_env "$1"
  curl -sf --max-time 2 "http://127.0.0.1:$client_port/health" | grep -q '"health":"true"'
}

# new_instance: pick ports for a fresh three-member cluster.
new_instance() {
  mkdir -p "$state"
  : >"$envfile"
  local n
  for n in $(seq "$ETCD_MEMBERS"); do
    echo "ETCD_CLIENT_PORT_$n=$(free_port "$state")" >>"$envfile"
    echo "ETCD_PEER_PORT_$n=$(free_port "$state")" >>"$envfile"
  done
  echo "ETCD_TOKEN=strata-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')" >>"$envfile"
}

# start_member N: start member N (same data dir and ports) unless running.
start_member() {
  member_env "$1"
  pid_alive "$pidfile" && return 0
  local cluster_state=new
  [ -d "$state/$name.etcd/member" ] && cluster_state=existing
  wait_port_free "$client_port"
  wait_port_free "$peer_port"
  log "starting etcd member $name on 127.0.0.1:$client_port (peer $peer_port, log $state/$name.log)"
  setsid "$bin" --name "$name" --data-dir "$state/$name.etcd" \
    --listen-client-urls "http://127.0.0.1:$client_port" \
    --advertise-client-urls "http://127.0.0.1:$client_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "$(initial_cluster)" \
    --initial-cluster-token "$ETCD_TOKEN" \
    --initial-cluster-state "$cluster_state" \
    --heartbeat-interval 100 --election-timeout 1000 \
    --log-level warn \
    </dev/null >>"$state/$name.log" 2>&1 9>&- &
  echo $! >"$pidfile"
}

# wait_healthy N...: waits until each member N answers healthy.
wait_healthy() {
  local n
  for n in "$@"; do
    if ! wait_until 60 healthy "$n"; then
      member_env "$n"
      tail -20 "$state/$name.log" >&2
      die "etcd member $name did not become healthy on 127.0.0.1:$client_port within 60s"
    fi
  done
}

# stop_member N: stop member N, keeping its data.
stop_member() {
  member_env "$1"
  stop_pidfile "$pidfile"
}

# all_running: every member's process is alive and healthy.
all_running() {
  [ -f "$envfile" ] || return 1
  local n
  for n in $(seq "$ETCD_MEMBERS"); do
    member_env "$n"
    pid_alive "$pidfile" && healthy "$n" || return 1
  done
}

# print_env: the export lines of `testbed/up etcd`.
print_env() {
  # shellcheck disable=SC1090
  . "$envfile"
  local n eps=
  for n in $(seq "$ETCD_MEMBERS"); do
    eps="${eps:+$eps,}127.0.0.1:$(eval echo "\$ETCD_CLIENT_PORT_$n")"
  done
  echo "export STRATA_ETCD_ENDPOINTS=$eps"
}
