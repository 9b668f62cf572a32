#!/bin/sh
# Grafana's published dashboard schema (@grafana/schema) and the TypeScript compiler that
# checks specdec's dashboard against it, pinned in tests/grafana/package-lock.json, for
# tests/test_grafana.py (`make test` calls this). Node and npm come from Debian when
# missing; the packages from npm, once (again only when the lock file changes).
set -eu
HERE=$(dirname "$0")
[ -x /usr/bin/node ] || command -v node >/dev/null 2>&1 || sh "$HERE/ensure_debian_package.sh" nodejs /usr/bin/node
command -v npm >/dev/null 2>&1 || sh "$HERE/ensure_debian_package.sh" npm /usr/bin/npm
DIR=$(cd "$HERE/../tests/grafana" && pwd)
STAMP="$DIR/node_modules/.installed"
if [ -f "$STAMP" ] && [ "$STAMP" -nt "$DIR/package-lock.json" ]; then
    exit 0
fi
echo "installing @grafana/schema and typescript into tests/grafana/node_modules (npm ci, a few seconds, once)"
npm ci --prefix "$DIR" --no-audit --no-fund --loglevel=error
touch "$STAMP"
