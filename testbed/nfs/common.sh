# Sourced by testbed/nfs/{up,ctl,down}. The nfs testbed is a directory:
# the kernel here has no NFS client, so the driver's mounted mode is tested
# on a local directory shared by several processes.
. "$(dirname "$0")/../lib.sh"
STATE=$STRATA_TESTBED_DIR/nfs
ROOT=$STATE/root
# ctl stop moves the root here (same file system: an atomic rename).
STOPPED=$STATE/root.stopped
CONFIG=$STATE/nfs.yaml
