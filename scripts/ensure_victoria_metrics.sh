#!/bin/sh
# Debian's victoria-metrics (single node; vmalert beside it) for the VictoriaMetrics test
# (`make test` calls this); see ensure_debian_package.sh.
exec sh "$(dirname "$0")/ensure_debian_package.sh" victoria-metrics /usr/bin/victoria-metrics /usr/bin/vmalert
