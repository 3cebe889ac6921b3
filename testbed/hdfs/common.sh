# Sourced by testbed/hdfs/{up,ctl,down}: how the HDFS testbed is built and
# started. A small Java main (MiniHdfs.java) runs Hadoop's MiniDFSCluster:
# one NameNode and one DataNode on loopback, metadata and blocks on disk.
#
# STRATA_HDFS_DATANODE_HOSTNAME (optional, read when an instance is created):
# the DataNode then listens on a fixed port, 127.0.0.1:PORT, and registers
# with the NameNode under that name (dfs.datanode.hostname), so a client
# with use_datanode_hostname dials NAME:PORT, where a test can put a proxy
# (e.g. NAME=127.0.0.2: all of 127/8 is loopback). `up` then also prints
# STRATA_HDFS_DATANODE=127.0.0.1:PORT and STRATA_HDFS_DATANODE_HOSTNAME.
# Unset (the default), nothing changes: free DataNode ports, registered as
# 127.0.0.1, the usual three export lines.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Set only by an instance's env file, never by the caller's environment.
unset HDFS_DATANODE_PORT HDFS_DATANODE_HOSTNAME
. "$here/../lib.sh"

cache=$STRATA_CACHE/hdfs
m2=$cache/m2           # Maven local repository (reused across runs and by CI)
builds=$cache/build    # one build per source hash: build/HASH/{classes,lib}
state=$STRATA_TESTBED_DIR/hdfs
pidfile=$state/hdfs.pid
envfile=$state/instance.env
portfile=$state/namenode.port
control=$state/control
config=$state/hdfs.yaml
logfile=$state/hdfs.log

# JDK 17 closes java.base to reflection; Hadoop 3.4 needs these opened.
java_opens=(
  --add-opens=java.base/java.lang=ALL-UNNAMED
  --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens=java.base/java.io=ALL-UNNAMED
  --add-opens=java.base/java.net=ALL-UNNAMED
  --add-opens=java.base/java.nio=ALL-UNNAMED
  --add-opens=java.base/java.util=ALL-UNNAMED
  --add-opens=java.base/java.util.concurrent=ALL-UNNAMED
  --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens=java.base/sun.security.x509=ALL-UNNAMED
)
# Memory: one JVM for both daemons; 512 MiB heap is plenty for tests.
java_mem=(-Xms64m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1)

# lock: one script at a time works on the instance (and on the build).
lock() {
  exec 9>"$STRATA_TESTBED_DIR/hdfs.lock"
  flock 9
}

# source_sum: hash of what the build depends on (pom, sources, resources).
source_sum() {
  (cd "$here" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -d' ' -f1
}

# The build of the sources in this checkout. A running JVM keeps using the
# build it started from: a new build never touches it.
build=$builds/$(source_sum | cut -c1-16)

# installed: the build of these sources is complete.
installed() { [ -f "$build/complete" ]; }

# install: build the main and copy its dependencies with Maven, the local
# repository and all output under $STRATA_CACHE/hdfs (outside the repo).
# Testbeds of other STRATA_TESTBED_DIRs share the cache: one builds at a
# time (a lock in the cache), into a temporary directory renamed into place.
install() {
  installed && return 0
  command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
  command -v java >/dev/null || die "java not found (apt-get install openjdk-17-jdk-headless)"
  mkdir -p "$builds"
  exec 8>"$builds.lock"
  flock 8
  if installed; then
    exec 8>&-
    return 0
  fi
  log "building the HDFS testbed (hadoop-minicluster) into $build"
  local tmp=$build.tmp
  rm -rf "$tmp" "$build"
  mkdir -p "$tmp"
  (cd "$here" && mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$m2" -Dstrata.out="$tmp" package) >&2 \
    || die "maven build of testbed/hdfs failed"
  touch "$tmp/complete"
  mv "$tmp" "$build"
  # Older builds go, unless a running JVM (of any testbed dir) uses one.
  local old
  for old in "$builds"/*/; do
    old=${old%/}
    [ "$old" = "$build" ] && continue
    in_use "$old" || rm -rf "$old"
  done
  exec 8>&-
}

# in_use DIR: a running process has DIR/classes on its command line (a JVM
# of this or another STRATA_TESTBED_DIR started from that build).
in_use() {
  grep -qsaF -- "$1/classes:" /proc/[0-9]*/cmdline
}

# ready: the main wrote the NameNode port (it does so once the NameNode is
# out of safe mode and the DataNode is registered) and the port answers.
ready() {
  [ -s "$portfile" ] || return 1
  local port; port=$(cat "$portfile")
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
}

# ready_or_dead: ready, or the JVM has exited (a failed start).
ready_or_dead() { ready || ! alive; }

# alive: the recorded JVM runs (a killed one not yet reaped is a zombie:
# kill -0 still succeeds on it, so look at its state too).
alive() {
  pid_alive "$pidfile" && [ "$(ps -o stat= -p "$(cat "$pidfile")" 2>/dev/null | cut -c1)" != Z ]
}

# running: the recorded process is alive and ready.
running() { [ -f "$envfile" ] && alive && ready; }

# new_instance: a fresh, formatted instance on a free port.
new_instance() {
  rm -rf "$state/base"
  mkdir -p "$state"
  echo "HDFS_PORT=$(free_port "$state")" >"$envfile"
  echo "HDFS_FORMAT=format" >>"$envfile"
  if [ -n "${STRATA_HDFS_DATANODE_HOSTNAME:-}" ]; then
    echo "HDFS_DATANODE_PORT=$(free_port "$state")" >>"$envfile"
    echo "HDFS_DATANODE_HOSTNAME=$STRATA_HDFS_DATANODE_HOSTNAME" >>"$envfile"
  fi
}

# start: start the recorded instance (same port; existing metadata and blocks
# unless it was never formatted) and wait until it is ready.
start() {
  # shellcheck disable=SC1090
  . "$envfile"
  if alive; then
    wait_until 120 ready || die "HDFS (pid $(cat "$pidfile")) is running but not ready; see $logfile"
    return 0
  fi
  rm -f "$portfile" "$control/command" "$control/done"
  wait_port_free "$HDFS_PORT"
  [ -z "${HDFS_DATANODE_PORT:-}" ] || wait_port_free "$HDFS_DATANODE_PORT"
  log "starting HDFS (MiniDFSCluster) on 127.0.0.1:$HDFS_PORT ($HDFS_FORMAT; base $state/base, log $logfile)"
  local datanode=()
  if [ -n "${HDFS_DATANODE_PORT:-}" ]; then
    datanode=("$HDFS_DATANODE_PORT" "$HDFS_DATANODE_HOSTNAME")
    log "DataNode on 127.0.0.1:$HDFS_DATANODE_PORT, registered as $HDFS_DATANODE_HOSTNAME"
  fi
  setsid java "${java_mem[@]}" "${java_opens[@]}" -cp "$build/classes:$build/lib/*" \
      strata.testbed.MiniHdfs "$state/base" "$HDFS_PORT" "$portfile" "$HDFS_FORMAT" "$control" "${datanode[@]}" \
      </dev/null >>"$logfile" 2>&1 9>&- &
  echo $! >"$pidfile"
  if ! wait_until 180 ready_or_dead || ! ready; then
    tail -30 "$logfile" >&2
    local why="did not become ready on 127.0.0.1:$HDFS_PORT within 180s"
    alive || why="exited while starting on 127.0.0.1:$HDFS_PORT"
    stop_pidfile "$pidfile"
    die "HDFS $why; see $logfile"
  fi
  # From now on restarts keep the formatted metadata.
  sed -i 's/^HDFS_FORMAT=.*/HDFS_FORMAT=keep/' "$envfile"
}

# datanode CMD: ask the running main to stop-datanode, start-datanode,
# enter-safemode or leave-safemode, and wait for its answer.
datanode() {
  alive || die "HDFS is not running"
  rm -f "$control/done"
  echo "$1" >"$control/command.tmp" && mv "$control/command.tmp" "$control/command"
  wait_until 120 test -f "$control/done" || die "HDFS did not answer $1 within 120s; see $logfile"
  local result; result=$(sed -n 2p "$control/done")
  [ "$result" = ok ] || die "$1: $result"
}

# write_config: the hdfs driver config for this instance.
write_config() {
  # shellcheck disable=SC1090
  . "$envfile"
  cat >"$config" <<EOT
# hdfs driver config for the MiniDFSCluster testbed (testbed/up hdfs).
namenodes: [127.0.0.1:$HDFS_PORT]
user: $(id -un)
root: /strata
replication: 1
timeouts:
  connect: 2s
  operation: 20s
EOT
}

# print_env: the export lines of `testbed/up hdfs`.
print_env() {
  # shellcheck disable=SC1090
  . "$envfile"
  echo "export STRATA_HDFS_CONFIG=$config"
  echo "export STRATA_HDFS_NAMENODE=127.0.0.1:$HDFS_PORT"
  echo "export STRATA_HDFS_USER=$(id -un)"
  if [ -n "${HDFS_DATANODE_PORT:-}" ]; then
    echo "export STRATA_HDFS_DATANODE=127.0.0.1:$HDFS_DATANODE_PORT"
    echo "export STRATA_HDFS_DATANODE_HOSTNAME=$HDFS_DATANODE_HOSTNAME"
  fi
}
