#!/bin/sh
# Install Debian's chromium for the dashboard's browser tests when it is missing
# (`make test` calls this). Needs root or passwordless sudo; does nothing when present.
set -eu
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo -n"
else
    echo "ensure_chromium: /usr/bin/chromium is missing and this user cannot install packages (run as root: apt-get install -y chromium)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium
test -x /usr/bin/chromium
