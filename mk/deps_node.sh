#!/bin/sh
# The test tools of make test (mk/deps.sh node): Debian's chromium (headless
# browser tests), nodejs and npm where node is missing, Debian's scikit-learn,
# venv and pip for the Python client's tests (its estimators are compared with
# scikit-learn's GaussianProcessRegressor, and it is pip-installed into a
# venv), postgresql-15 (a throw-away cluster for the store's tests on
# PostgreSQL, tests/support/pgtmp.sh) and haproxy (in front of the replicas of
# the multi-replica test), then `npm ci` of every package directory below
# whose node_modules is older than its lock file.
# Never fails: a tool that cannot be had makes its tests skip with a message.
set -u
warn() { echo "deps(node): $*" >&2; }
missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
for p in python3-sklearn python3-venv python3-pip python3-yaml postgresql-15 haproxy; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "deps(node): installing:$missing"
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing; } ||
            warn "apt-get could not install$missing; the tests that need them skip"
    else
        warn "missing:$missing (as root: apt-get install -y$missing); the tests that need them skip"
    fi
fi
command -v npm >/dev/null 2>&1 || exit 0
for dir in tests/js clients/typescript; do
    [ -f "$dir/package-lock.json" ] || continue
    stamp="$dir/node_modules/.package-lock.json"
    if [ -f "$stamp" ] && [ ! "$dir/package-lock.json" -nt "$stamp" ]; then
        continue
    fi
    echo "deps(node): npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
        warn "npm ci failed in $dir; the tests that need it skip"
done
exit 0
