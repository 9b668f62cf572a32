#!/bin/sh
# Install Debian's prometheus (server + promtool) for the Prometheus-source tests and
# benchmark when it is missing (`make test` calls this). Needs root or passwordless sudo;
# does nothing when present. It never starts a service: the tests run the binary
# themselves on a free loopback port, so a policy-rc.d that forbids service starts is in
# place during the install (and removed after, unless one was already there).
set -eu
if [ -x /usr/bin/prometheus ] && [ -x /usr/bin/promtool ]; then
    exit 0
fi
. "$(dirname "$0")/sudo_or_root.sh" "apt-get install -y --no-install-recommends prometheus"
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
$SUDO apt-get install -y -q --no-install-recommends prometheus
test -x /usr/bin/prometheus
test -x /usr/bin/promtool
