#!/bin/sh
# Install a Debian package for the tests and benchmarks when any of its binaries is missing:
#   sh scripts/ensure_debian_package.sh PACKAGE /usr/bin/BINARY...
# Needs root or passwordless sudo; does nothing when every binary is present. It never
# starts a service: the tests run the binaries themselves on free loopback ports, so a
# policy-rc.d that forbids service starts is in place during the install (and removed
# after, unless one was already there).
set -eu
PACKAGE=$1
shift
missing=0
for binary in "$@"; do
    [ -x "$binary" ] || missing=1
done
[ "$missing" -eq 0 ] && exit 0
. "$(dirname "$0")/sudo_or_root.sh" "apt-get install -y --no-install-recommends $PACKAGE"
POLICY=/usr/sbin/policy-rc.d
OWN_POLICY=0
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod 755 "$POLICY"
    OWN_POLICY=1
fi
cleanup() { if [ "$OWN_POLICY" -eq 1 ]; then $SUDO rm -f "$POLICY"; fi; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "$PACKAGE"
for binary in "$@"; do
    test -x "$binary"
done
