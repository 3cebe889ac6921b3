# Sourced by testbed/minio/{up,ctl,down}: where MinIO lives and how it starts.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../lib.sh"

MINIO_MODULE=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
MINIO_BUCKET=strata
bin_dir=$STRATA_CACHE/minio/bin
bin=$bin_dir/minio
state=$STRATA_TESTBED_DIR/minio
pidfile=$state/minio.pid
envfile=$state/instance.env
config=$state/s3.yaml

# lock: one script at a time works on the instance (and on the build).
lock() {
  exec 9>"$STRATA_TESTBED_DIR/minio.lock"
  flock 9
}

# installed: the cached binary exists and was built from the pinned version.
installed() {
  [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | grep "mod[[:space:]]*$MINIO_MODULE[[:space:]]*$MINIO_VERSION" >/dev/null
}

# install: build MinIO from the Go module proxy into the cache (once per
# machine; about 7 minutes on 2 cores).
install() {
  installed && return 0
  log "building $MINIO_MODULE@$MINIO_VERSION into $bin_dir (takes several minutes)"
  mkdir -p "$bin_dir"
  (cd "$bin_dir" && GOBIN="$bin_dir" GOFLAGS= nice -n 10 go install "$MINIO_MODULE@$MINIO_VERSION") >&2 \
    || die "go install $MINIO_MODULE@$MINIO_VERSION failed"
  installed || die "built $bin is not $MINIO_MODULE@$MINIO_VERSION"
}

# ready: MinIO answers /minio/health/ready with 200.
ready() {
  # shellcheck disable=SC1090
  . "$envfile"
  curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$MINIO_PORT/minio/health/ready"
}

# running: the recorded process is alive and ready.
running() { [ -f "$envfile" ] && pid_alive "$pidfile" && ready; }

# new_instance: pick ports and credentials for a fresh instance.
new_instance() {
  mkdir -p "$state/data"
  local user pass
  user="strata-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  pass="$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  cat >"$envfile" <<EOT
MINIO_PORT=$(free_port "$state")
MINIO_CONSOLE_PORT=$(free_port "$state")
MINIO_USER=$user
MINIO_PASS=$pass
EOT
  chmod 600 "$envfile"
}

# start: start the recorded instance (same data, ports, credentials) and
# wait until it is ready.
start() {
  # shellcheck disable=SC1090
  . "$envfile"
  if pid_alive "$pidfile"; then
    wait_until 60 ready || die "MinIO (pid $(cat "$pidfile")) is running but not ready; see $state/minio.log"
    return 0
  fi
  wait_port_free "$MINIO_PORT"
  wait_port_free "$MINIO_CONSOLE_PORT"
  log "starting MinIO on 127.0.0.1:$MINIO_PORT (data $state/data, log $state/minio.log)"
  MINIO_ROOT_USER=$MINIO_USER MINIO_ROOT_PASSWORD=$MINIO_PASS MINIO_BROWSER=off MINIO_UPDATE=off \
    setsid "$bin" server "$state/data" --quiet \
      --address "127.0.0.1:$MINIO_PORT" --console-address "127.0.0.1:$MINIO_CONSOLE_PORT" \
      </dev/null >>"$state/minio.log" 2>&1 9>&- &
  echo $! >"$pidfile"
  if ! wait_until 60 ready; then
    tail -20 "$state/minio.log" >&2
    stop_pidfile "$pidfile"
    die "MinIO did not become ready on 127.0.0.1:$MINIO_PORT within 60s"
  fi
}

# make_bucket: create the bucket with a SigV4-signed PUT (curl --aws-sigv4);
# an existing bucket is fine. MinIO answers ready before its object layer
# is up on a loaded machine (503 XMinioServerNotInitialized): that is
# retried for up to 60 s.
make_bucket() {
  # shellcheck disable=SC1090
  . "$envfile"
  local code tries=0
  while :; do
    code=$(curl -s -o "$state/mkbucket.out" -w '%{http_code}' -X PUT \
      --aws-sigv4 "aws:amz:us-east-1:s3" --user "$MINIO_USER:$MINIO_PASS" \
      -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
      "http://127.0.0.1:$MINIO_PORT/$MINIO_BUCKET")
    [ "$code" = 503 ] && [ $((tries += 1)) -lt 120 ] || break
    sleep 0.5
  done
  case $code in
    200) log "created bucket $MINIO_BUCKET" ;;
    409) ;; # BucketAlreadyOwnedByYou
    *) cat "$state/mkbucket.out" >&2; die "creating bucket $MINIO_BUCKET failed: HTTP $code" ;;
  esac
}

# write_config: the s3 driver config for this instance.
write_config() {
  # shellcheck disable=SC1090
  . "$envfile"
  cat >"$config" <<EOT
# s3 driver config for the MinIO testbed (testbed/up minio).
bucket: $MINIO_BUCKET
endpoint: http://127.0.0.1:$MINIO_PORT
region: us-east-1
path_style: true
credentials:
  access_key_id: $MINIO_USER
  secret_access_key: $MINIO_PASS
timeouts:
  connect: 2s
  request: 10s
  operation: 15s
retry:
  max_attempts: 4
EOT
  chmod 600 "$config"
}

# print_env: the export lines of `testbed/up minio`.
print_env() {
  # shellcheck disable=SC1090
  . "$envfile"
  echo "export STRATA_S3_CONFIG=$config"
  echo "export STRATA_MINIO_ENDPOINT=http://127.0.0.1:$MINIO_PORT"
  echo "export STRATA_MINIO_BUCKET=$MINIO_BUCKET"
  echo "export STRATA_MINIO_ACCESS_KEY=$MINIO_USER"
  echo "export STRATA_MINIO_SECRET_KEY=$MINIO_PASS"
}
