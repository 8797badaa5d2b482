#!/bin/sh
# The portable model file at scale (docs/design/model-file.md): fit an exact
# GP on N points (default 20000, 8 inputs, every hyperparameter and the noise
# held, so the fit only factorises), export it, import it into a second
# daemon on a fresh SQLite database, and check that both answer a predict
# and a sample byte-identically. Prints the file's size and the export and
# import wall times (curl's total time, loopback) and the peak memory (VmHWM)
# of the exporting daemon (restarted after the fit, so the figure is the
# load from the store and the export, not the fit) and of the importing one.
#
# Usage: sh bench/model_file.sh [BUILD_DIR] [N]     (needs curl, jq, python3)
# (curl -T streams the upload: --data-binary @FILE reads the whole file into
# memory first.)
# Memory: about 5 GB at N = 20000 (the fit's n x n matrix; an import holds
# the body, the arrays and the model).
set -eu
BUILD=${1:-build}
N=${2:-20000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/$BUILD/gpserve
T=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-mf.XXXXXX")
PIDS=""
trap 'rc=$?; for p in $PIDS; do kill "$p" 2>/dev/null || true; done; rm -rf "$T"; exit $rc' EXIT INT TERM

start() { # LOG DB: sets PORT
    "$BIN" --bind 127.0.0.1 --port 0 --db "$2" --max-train-points "$N" --max-body-mb 8192 \
        --timeout 3600 --request-timeout 3600 >"$1" 2>&1 &
    PIDS="$PIDS $!"
    LASTPID=$!
    i=0
    PORT=""
    while [ -z "$PORT" ] && [ $i -lt 300 ]; do
        sleep 0.1
        PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$1" | head -n 1)
        i=$((i + 1))
    done
    [ -n "$PORT" ] || { cat "$1"; exit 1; }
}

python3 - "$N" >"$T/fit.json" <<'EOF'
import json, math, random, sys
n = int(sys.argv[1]); d = 8
rng = random.Random(1)
X = [[rng.uniform(-2, 2) for _ in range(d)] for _ in range(n)]
y = [math.sin(r[0]) + 0.5 * math.cos(r[1] * r[2]) + 0.1 * rng.gauss(0, 1) for r in X]
print(json.dumps({"name": "big", "method": "exact", "X": X, "y": y, "seed": 1,
                  "kernel": {"type": "rbf", "lengthscale": 1.5, "variance": 1.0, "fixed": True},
                  "noise": {"variance": 0.01, "fixed": True}}))
EOF
hwm() { # PID: its peak resident memory
    sed -n 's/^VmHWM:[[:space:]]*//p' "/proc/$1/status"
}
start "$T/a.log" "$T/a.db"
A=$PORT
curl -sS --max-time 7200 -o "$T/fit.out" -w 'fit: %{http_code} in %{time_total} s\n' \
    -H 'Content-Type: application/json' --data-binary "@$T/fit.json" "http://127.0.0.1:$A/v1/models"
echo "fit: peak memory $(hwm "$LASTPID")"
kill "$LASTPID"
wait "$LASTPID" 2>/dev/null || true
start "$T/a2.log" "$T/a.db"
A=$PORT
APID=$LASTPID
start "$T/b.log" "$T/b.db"
B=$PORT
BPID=$LASTPID
curl -sS --max-time 7200 -o "$T/big.gpmodel" -w 'export: %{http_code} in %{time_total} s\n' \
    "http://127.0.0.1:$A/v1/models/big/versions/1/export"
echo "export (a daemon started after the fit: load from the store and export): peak memory $(hwm "$APID")"
echo "file: $(wc -c <"$T/big.gpmodel") bytes"
python3 -c 'import json, struct, sys; b = open(sys.argv[1], "rb").read(4 << 20); n = struct.unpack("<Q", b[:8])[0]; print("header: %d bytes, n_train %d" % (n, json.loads(json.loads(b[8:8 + n])["__metadata__"]["model"])["n_train"]))' "$T/big.gpmodel"
curl -sS --max-time 7200 -o "$T/import.out" -w 'import: %{http_code} in %{time_total} s\n' \
    -H 'Content-Type: application/vnd.gpserve.model' -X POST -T "$T/big.gpmodel" \
    "http://127.0.0.1:$B/v1/models/import"
echo "import: peak memory $(hwm "$BPID")"
PRED='{"X":[[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8],[-1,1,-1,1,-1,1,-1,1]],"full_covariance":true}'
SAMP='{"X":[[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8],[-1,1,-1,1,-1,1,-1,1]],"n_samples":4,"seed":5}'
for route in predict sample; do
    body=$PRED
    [ $route = sample ] && body=$SAMP
    for p in $A $B; do
        curl -sS --max-time 600 -H 'Content-Type: application/json' --data-binary "$body" \
            "http://127.0.0.1:$p/v1/models/big/$route" | jq -S 'del(.version)' >"$T/$route.$p"
    done
    if cmp -s "$T/$route.$A" "$T/$route.$B"; then echo "$route: identical"; else echo "$route: DIFFER"; fi
done
