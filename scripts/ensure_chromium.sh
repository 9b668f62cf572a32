#!/bin/sh
# Debian's chromium for the dashboard's browser tests (`make test` calls this); see
# ensure_debian_package.sh.
exec sh "$(dirname "$0")/ensure_debian_package.sh" chromium /usr/bin/chromium
