#!/bin/sh
# The request path's instructions under callgrind (bench/results/access_log.md):
#   sh bench/access_log_cg.sh BIN TAG [daemon args]
# fits an exact model (500 synthetic points, 8 inputs, seeded) on a fresh
# database with BIN, then runs BIN under valgrind --tool=callgrind collecting
# only inside its libmicrohttpd callbacks, for 400 one-point predicts and 100
# /healthz on one keep-alive connection; prints the total. Run it for two
# builds (or with and without --access-log FILE) on the same machine and
# compare: instruction counts do not move with the machine's load.
# Needs valgrind, curl and awk; uses port 18400 and a folder under /tmp.
BIN=$1
TAG=$2
shift 2
W=$(mktemp -d /tmp/gpserve-cg.XXXXXX) || exit 1
PORT=18400
U=http://127.0.0.1:$PORT
awk 'BEGIN { srand(7); printf "{\"name\":\"ex\",\"method\":\"exact\",\"X\":[";
    for (i = 0; i < 500; i++) { printf "%s[", i ? "," : ""; s = 0;
        for (j = 0; j < 8; j++) { x = rand(); s += x * (j + 1); printf "%s%.6f", j ? "," : "", x }
        printf "]"; y[i] = sin(s) + 0.1 * rand() }
    printf "],\"y\":["; for (i = 0; i < 500; i++) printf "%s%.6f", i ? "," : "", y[i]; printf "]}" }' >"$W/fit.json"
echo '{"X":[[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5]]}' >"$W/p1.json"
wait_up() {
    for _ in $(seq 300); do
        curl -sf "$U/healthz" >/dev/null && return 0
        sleep 0.2
    done
    return 1
}
"$BIN" --bind 127.0.0.1 --port $PORT --db "$W/cg.db" --threads 1 >"$W/fit.log" 2>&1 &
P=$!
wait_up && curl -s -XPOST -H 'Content-Type: application/json' --data @"$W/fit.json" "$U/v1/models" >/dev/null
kill $P
wait $P 2>/dev/null
# OPENBLAS_THREAD_TIMEOUT set and no OPENBLAS_CORETYPE: the daemon does not
# restart itself (server/main.c), which valgrind cannot follow
env -u OPENBLAS_CORETYPE OPENBLAS_THREAD_TIMEOUT=16 valgrind --tool=callgrind \
    --callgrind-out-file="$W/cg.$TAG.out" --toggle-collect=gp_http_on_request \
    --toggle-collect=gp_http_on_uri --toggle-collect=gp_http_on_completed \
    --toggle-collect=gp_http_on_connection \
    "$BIN" --bind 127.0.0.1 --port $PORT --db "$W/cg.db" --threads 1 "$@" >"$W/vg.log" 2>&1 &
P=$!
wait_up || { echo "the daemon under valgrind did not start: $W/vg.log"; exit 1; }
curl -s -XPOST -H 'Content-Type: application/json' --data @"$W/p1.json" \
    $(for i in $(seq 400); do echo "$U/v1/models/ex/predict"; done) >/dev/null
curl -s $(for i in $(seq 100); do echo "$U/healthz"; done) >/dev/null
kill $P
wait $P 2>/dev/null
echo "$TAG: $(callgrind_annotate "$W/cg.$TAG.out" 2>/dev/null | grep -m1 'PROGRAM TOTALS')"
rm -rf "$W"
