#!/bin/sh
# Integration tests: start the real daemon ($BUILD_DIR/gpserve) on free loopback
# ports with temporary databases, drive it with curl, read its JSON with jq, and
# end with the line "N passed, N failed" (exit status non-zero when anything
# failed).
#
# Usage: tests/integration/run.sh BUILD_DIR [AREA...]
#   BUILD_DIR is relative to the repository root (build, build/san) or absolute.
#   With no AREA every area runs, in the order below; with some, only those
#   (still in that order), e.g.  sh tests/integration/run.sh build methods
#   An area makes what it needs from another (a model, a finished job) itself.
#
# Areas, one file each (tests/integration/t_AREA.sh; tests/integration/README.md):
#   health readme fit models columns predict sample multioutput batching jobs methods likelihood multiclass
#   hkd online
#   idempotency oip aliases datasets studies
#   openapi ts_client python_client browser bad_requests cancel metrics second_daemon model_file restart
#   crash replicas auth keys queue abuse logs resources docker deploy config backup access_log audit tls
#   rate_limit mpi
#
# POSIX sh; needs curl, jq, awk, sed, grep, cmp. Every request has a --max-time
# and every wait is bounded, so the suite cannot hang. Under the sanitizers
# (build/san, or GPSERVE_TEST_SLOW=N) every bound is multiplied. No test
# asserts on time but the abuse area's, which the issue asks for: /healthz within
# 100 ms while 1,500 slow connections are held, /healthz and a predict within
# 0.5 s while 6 addresses hold 300 each, and the 3 s request deadline.

AREAS="health readme fit models columns predict ppnoise priors means sample multioutput batching jobs methods likelihood multiclass validation auto hkd online finite idempotency oip aliases datasets studies openapi ts_client python_client browser bad_requests cancel metrics
second_daemon model_file restart crash replicas auth keys queue abuse logs resources docker deploy config backup access_log audit tls rate_limit mpi"

BUILD=${1:-build}
[ $# -gt 0 ] && shift
WANT=$*
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
for a in $WANT; do
    case " $(echo $AREAS) " in *" $a "*) ;; *)
        echo "run.sh: unknown area '$a' (areas: $(echo $AREAS))" >&2
        exit 2
        ;;
    esac
done

. "$HERE/lib.sh"

if [ ! -x "$BIN" ]; then
    fail "daemon binary" "$BIN is not built (make build-all)"
    finish
fi
for tool in curl jq; do
    if ! command -v $tool >/dev/null 2>&1; then
        fail "$tool" "$tool is not installed (make deps)"
        finish
    fi
done

echo "# gpserve integration tests ($BIN, slowness x$SLOW${WANT:+, areas: $WANT})"

# ================================================================ main daemon
section "main daemon"
# Its database: $T/main.db, or a schema of GPSERVE_TEST_DB_URL (lib.sh, db_for).
if ! MAIN_DB=$(db_for main); then
    fail "main database" "cannot make a schema in GPSERVE_TEST_DB_URL (psql)"
    finish
fi
[ -n "$DB_URL" ] && note "the daemons of the main database and of online run on PostgreSQL"
# --max-body-mb 1 for the body-limit cases.
if ! start_daemon "$T/main.log" --db "$MAIN_DB" --max-body-mb 1; then
    fail "main daemon starts" "no 'gpserve listening on 127.0.0.1:PORT' line within ${STARTUP}s"
    finish
fi
pass "main daemon starts (port $DPORT)"
MAIN_PID=$DPID
PORT=$DPORT

for a in $AREAS; do
    if [ -n "$WANT" ]; then
        case " $WANT " in *" $a "*) ;; *) continue ;; esac
    fi
    . "$HERE/t_$a.sh"
done
finish
