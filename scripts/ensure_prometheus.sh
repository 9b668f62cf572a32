#!/bin/sh
# Debian's prometheus (server + promtool) for the Prometheus-source tests and benchmark
# (`make test` calls this); see ensure_debian_package.sh.
exec sh "$(dirname "$0")/ensure_debian_package.sh" prometheus /usr/bin/prometheus /usr/bin/promtool
