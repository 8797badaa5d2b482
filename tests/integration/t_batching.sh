#!/bin/sh
# Integration area "batching": dynamic batching of predict and sample requests
# (server/batcher.h). Two daemons of its own on one database: A batches (with
# a long --batch-delay-us), B does not (--batch-delay-us 0). Every body A gives
# a burst of concurrent requests that differ in options (latent or observation
# variance, quantiles, components, a covariance, several points, a bad one,
# samples of several seeds, draws and options, a bad sample) must be byte for
# byte what B answers to each request alone; so must every answer to 320
# predicts from 24 clients and 96 samples from 16 clients at once, which A
# answers in batches of several requests (its /metrics).
# Only models of methods whose batched calls share work go through the
# batcher (exact and msrfr here); the others are answered on their request
# threads, batching on or off.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "dynamic batching"
BDB="$T/batching.db"
MPORT=$PORT
if ! start_daemon "$T/batch_a.log" --db "$BDB" --batch-delay-us 50000 --batch-max-points 64; then
    fail "batching daemon starts"
    return 0 2>/dev/null || exit 0
fi
A_PID=$DPID
A_PORT=$DPORT
if ! start_daemon "$T/batch_b.log" --db "$BDB" --batch-delay-us 0; then
    fail "non-batching daemon starts"
    stop_daemon "$A_PID"
    return 0 2>/dev/null || exit 0
fi
B_PID=$DPID
B_PORT=$DPORT
PORT=$A_PORT

# The models: exact, ssgp and msrfr (a mixture: components) on the 200 x 2
# rows of ss.csv, and svgp on 0/1 labels (probabilities, latent fields).
ssfit() { csv_to_json "$1" "$2" <"$T/ss.csv"; }
# exact on 2500 rows: a call costs ~150 us, so that requests overlap and batch
# (a model whose lone call takes under ~20 us is answered on the request
# thread, server/batcher.h)
gen_xy 2500 2 29 | csv_to_json b-exact '"method":"exact","seed":1,"options":{"max_iterations":5},' \
    >"$T/b_exact.json"
ssfit b-ssgp '"method":"ssgp","seed":1,"options":{"features":32},' >"$T/b_ssgp.json"
ssfit b-msrfr '"method":"msrfr","seed":1,"options":{"particles":3,"features":16,"iterations":30},' \
    >"$T/b_msrfr.json"
awk -F, '{ print $1 "," $2 "," ($3 > 0 ? 1 : 0) }' "$T/ss.csv" |
    csv_to_json b-svgp '"method":"svgp","likelihood":"bernoulli","seed":1,"options":{"inducing":16},' \
        >"$T/b_svgp.json"
for m in exact ssgp msrfr svgp; do
    check_json "fit b-$m" 201 /v1/models "@$T/b_$m.json"
done

# burst MODEL: the request bodies of one burst, one a line: "KIND BODY".
burst() {
    comps='"components":true'
    [ "$1" = b-msrfr ] || comps='"include_noise":false'
    cat <<EOB
predict {"X":[[0.1,-0.3]]}
predict {"X":[[1.2,0.4],[-1.5,1.9]]}
predict {"X":[[0.0,0.0]],"include_noise":false}
predict {"X":[[0.7,0.2]],"quantiles":[0.05,0.5,0.95]}
predict {"X":[[0.3,0.3],[0.4,0.4],[0.5,0.5]]}
predict {"X":[[-0.9,1.1]],$comps}
predict {"X":[[0.2,0.9],[1.0,-1.0]],"full_covariance":true}
predict {"X":[[1.9,-0.2]]}
predict {"X":[[0.6,0.6]],"quantiles":[0.05,0.5,0.95]}
predict {"X":[[0.6,0.6],[0.1,-0.3]]}
predict {"X":[[0.1,-0.3],[0.2],[0.3,0.3]]}
sample {"X":[[0.1,-0.3],[1.2,0.4]],"n_samples":3,"seed":7}
predict {"X":[[-1.2,-1.2]],"version":1}
sample {"X":[[0.1,-0.3],[1.2,0.4]],"n_samples":3,"seed":8}
sample {"X":[[0.5,0.5]],"n_samples":2,"seed":7,"include_noise":true}
sample {"X":[[0.3,-0.3],[0.2],[0.1,0.1]],"n_samples":2}
sample {"X":[[-0.4,0.9],[0.0,0.1],[1.1,-1.6]],"n_samples":4,"seed":3,"observations":true}
sample {"X":[[0.6,0.6]],"n_samples":5,"seed":9,"version":1}
EOB
}

# fire MODEL PORT PREFIX: the burst at once, one curl process (--parallel),
# bodies into PREFIX.N, statuses into PREFIX.st.
fire() {
    i=0
    burst "$1" >"$T/burst.txt"
    : >"$3.cfg"
    while IFS= read -r line; do
        kind=${line%% *}
        body=${line#* }
        printf '%s\n' "$body" >"$3.req$i"
        [ $i -gt 0 ] && echo "next" >>"$3.cfg"
        {
            echo "url = \"http://127.0.0.1:$2/v1/models/$1/$kind\""
            echo "header = \"Content-Type: application/json\""
            # the same id as the reference's: an error body carries it
            echo "header = \"X-Request-Id: burst-$i\""
            echo "data-binary = \"@$3.req$i\""
            echo "output = \"$3.$i\""
            echo "write-out = \"$i %{http_code}\\n\""
            echo "max-time = $MT"
        } >>"$3.cfg"
        i=$((i + 1))
    done <"$T/burst.txt"
    curl -sS --parallel --parallel-immediate --parallel-max 50 -K "$3.cfg" >"$3.st" 2>"$3.err"
    echo "$i"
}

batch_max() {
    curl -sS --max-time "$MT" "http://127.0.0.1:$A_PORT/metrics" |
        awk '$1 == "gpserve_batch_max_requests" { print $2 }'
}

for m in exact ssgp msrfr svgp; do
    name=b-$m
    # B, one request at a time: the references
    n=0
    burst "$name" >"$T/burst.txt"
    while IFS= read -r line; do
        kind=${line%% *}
        curl -sS --max-time "$MT" -o "$T/ref_$m.$n" -H 'Content-Type: application/json' \
            -H "X-Request-Id: burst-$n" \
            --data-binary "${line#* }" "http://127.0.0.1:$B_PORT/v1/models/$name/$kind" 2>/dev/null
        n=$((n + 1))
    done <"$T/burst.txt"
    # A, all at once. The batcher never sees a request to a method whose
    # batched calls do not share work (gp_method.batch_shares_work: here ssgp
    # and svgp; they are answered on their request threads). Whether exact's
    # and msrfr's requests meet in a batch depends on timing (a request with
    # no company is answered alone), so only the others are checked here;
    # the load tests below show exact's batches.
    q0=$(curl -sS --max-time "$MT" "http://127.0.0.1:$A_PORT/metrics" |
        awk '$1 == "gpserve_batched_requests_total" { print $2 }')
    fire "$name" "$A_PORT" "$T/got_$m" >/dev/null
    q1=$(curl -sS --max-time "$MT" "http://127.0.0.1:$A_PORT/metrics" |
        awk '$1 == "gpserve_batched_requests_total" { print $2 }')
    case $m in
    ssgp | svgp)
        [ -n "$q0" ] && [ "$q1" = "$q0" ]
        verdict "$name: its method does not share work, and the batcher never sees its requests ($q0 -> $q1 batched)" $? \
            "gpserve_batched_requests_total ${q0:-missing} -> ${q1:-missing}"
        ;;
    esac
    same=0
    diffs=""
    i=0
    while [ $i -lt "$n" ]; do
        if cmp -s "$T/got_$m.$i" "$T/ref_$m.$i"; then
            same=$((same + 1))
        else
            diffs="$diffs $i"
        fi
        i=$((i + 1))
    done
    [ "$same" = "$n" ]
    verdict "$name: $n concurrent requests answered in batches equal the requests alone" $? \
        "differ:$diffs (first: $(head -c 300 "$T/got_$m.${diffs# }" 2>/dev/null) vs $(head -c 300 "$T/ref_$m.${diffs# }" 2>/dev/null))"
done
# the bad request of the burst got its error, named
jhas '.error.field == "X[1]"' "$T/got_exact.10"
verdict "a bad request in a burst gets its own error" $? "$(head -c 200 "$T/got_exact.10")"

# the bad sample request of the burst got its error, named, and the others
# of the burst their draws
jhas '.error.field == "X[1]"' "$T/got_exact.15"
verdict "a bad sample request in a burst gets its own error" $? "$(head -c 200 "$T/got_exact.15")"

# Samples under load: 16 clients at once ask b-exact for joint draws at 20
# points with 4 seeds; the daemon answers them in batches of several sample
# requests (the counters: more requests than batches), every answer byte for
# byte B's answer to the request alone.
SX='[[0.0,0.1],[0.2,0.3],[0.4,0.5],[0.6,0.7],[0.8,0.9],[-0.1,0.0],[-0.3,-0.2],[-0.5,-0.4],[-0.7,-0.6],[-0.9,-0.8],[1.0,0.1],[1.2,0.3],[1.4,0.5],[1.6,0.7],[1.8,0.9],[-1.1,0.0],[-1.3,-0.2],[-1.5,-0.4],[-1.7,-0.6],[-1.9,-0.8]]'
for seed in 1 2 3 4; do
    printf '{"X":%s,"n_samples":20,"seed":%s}' "$SX" "$seed" >"$T/sload_req$seed"
    curl -sS --max-time "$MT" -o "$T/sload_ref$seed" -H 'Content-Type: application/json' \
        --data-binary "@$T/sload_req$seed" "http://127.0.0.1:$B_PORT/v1/models/b-exact/sample" \
        2>/dev/null
done
metric() {
    curl -sS --max-time "$MT" "http://127.0.0.1:$A_PORT/metrics" | awk -v k="$1" '$1 == k { print $2 }'
}
b0=$(metric gpserve_batches_total)
r0=$(metric gpserve_batched_requests_total)
mkdir -p "$T/sload"
seq 1 96 | xargs -P 16 -I{} sh -c 'curl -sS --max-time "$2" -o "$1/sload/$3" \
    -H "Content-Type: application/json" --data-binary "@$1/sload_req$(($3 % 4 + 1))" \
    "http://127.0.0.1:$4/v1/models/b-exact/sample" 2>/dev/null' _ "$T" "$MT" {} "$A_PORT"
same=0
for i in $(seq 1 96); do
    cmp -s "$T/sload/$i" "$T/sload_ref$((i % 4 + 1))" && same=$((same + 1))
done
[ "$same" = 96 ]
verdict "96 sample requests from 16 clients at once: every answer equals the request alone" $? \
    "$same of 96 (first: $(head -c 200 "$T/sload/1" 2>/dev/null))"
b1=$(metric gpserve_batches_total)
r1=$(metric gpserve_batched_requests_total)
[ $((r1 - r0)) -gt $((b1 - b0)) ]
verdict "sample requests answered in batches of several ($((r1 - r0)) requests in $((b1 - b0)) batches)" $? \
    "batches ${b0:-?} -> ${b1:-?}, requests ${r0:-?} -> ${r1:-?}"

# Under load: 24 clients at once (curl processes) ask b-exact the same point
# 320 times; the daemon answers them in batches of several requests (the
# metric), and every answer is byte for byte B's answer to the request alone.
LOADB='{"X":[[0.25,-0.75]]}'
curl -sS --max-time "$MT" -o "$T/load_ref" -H 'Content-Type: application/json' \
    --data-binary "$LOADB" "http://127.0.0.1:$B_PORT/v1/models/b-exact/predict" 2>/dev/null
mkdir -p "$T/load"
# shellcheck disable=SC2016
seq 1 320 | xargs -P 24 -I{} curl -sS --max-time "$MT" -o "$T/load/{}" \
    -H 'Content-Type: application/json' --data-binary "$LOADB" \
    "http://127.0.0.1:$A_PORT/v1/models/b-exact/predict" 2>/dev/null
same=0
for f in "$T"/load/*; do cmp -s "$f" "$T/load_ref" && same=$((same + 1)); done
[ "$same" = 320 ]
verdict "320 requests from 24 clients at once: every answer equals the request alone" $? \
    "$same of 320"
bm=$(batch_max)
[ "${bm:-0}" -ge 2 ]
verdict "batches of several requests formed (largest: ${bm:-?})" $? "gpserve_batch_max_requests ${bm:-missing}"
curl -sS --max-time "$MT" "http://127.0.0.1:$B_PORT/metrics" | grep -q '^gpserve_batches_total 0$'
verdict "no batches with --batch-delay-us 0" $? "batches counted"

stop_daemon "$A_PID"
[ "$STOP_RC" = 0 ]
verdict "batching daemon exits 0 on SIGTERM" $? "exit $STOP_RC"
stop_daemon "$B_PID"
PORT=$MPORT
