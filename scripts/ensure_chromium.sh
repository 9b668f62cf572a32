#!/bin/sh
# Install Debian's chromium for the dashboard's browser tests when it is missing
# (`make test` calls this). Needs root or passwordless sudo; does nothing when present.
set -eu
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
. "$(dirname "$0")/sudo_or_root.sh" "apt-get install -y chromium"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium
test -x /usr/bin/chromium
