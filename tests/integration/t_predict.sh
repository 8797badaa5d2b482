#!/bin/sh
# Integration area "predict": predictions: lengths, means, latent < observation variance, covariance, quantiles, concurrency
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "predict"
need_sine
req GET /v1/models/sine
latest=$(jnum version)
check_json "predict sine" 200 /v1/models/sine/predict "{\"X\":$SINE_X}"
cp "$T/body" "$T/pred_noise.json"
[ "$(jarr mean | count_lines)" = 4 ] && [ "$(jarr variance | count_lines)" = 4 ] &&
    [ "$(jstr name)" = sine ] && [ "$(jnum version)" = "$latest" ]
verdict "predict: 4 means, 4 variances, name, the latest version" $? "wrong lengths"
jarr mean >"$T/m.txt"
jarr variance >"$T/vn.txt"
awk 'BEGIN { split("0.0998 0.9636 0.4274 -0.9825", t, " ") }
     { i++; if ($1 - t[i] > 0.05 || t[i] - $1 > 0.05) exit 1 } END { exit i != 4 }' "$T/m.txt"
verdict "predict sine: means within 0.05 of sin(x)" $? "wrong means"
check_json "predict include_noise false" 200 /v1/models/sine/predict "{\"X\":$SINE_X,\"include_noise\":false}"
jarr variance >"$T/vl.txt"
awk 'NR == FNR { vn[FNR] = $1; n = FNR; next }
     { if (!($1 >= 0 && $1 < vn[FNR])) bad = 1; m = FNR }
     END { exit bad || m != n || n != 4 }' "$T/vn.txt" "$T/vl.txt"
verdict "latent variance < observation variance, every point" $? "not smaller"
check_json "predict full_covariance" 200 /v1/models/sine/predict "{\"X\":$SINE_X,\"full_covariance\":true,\"include_noise\":false}"
jmat covariance >"$T/cov.txt"
awk -F, '{ if (NF != 4) bad = 1; n++ } END { exit bad || n != 4 }' "$T/cov.txt"
verdict "covariance is 4 x 4" $? "shape $(count_lines <"$T/cov.txt") rows"
jarr variance >"$T/vl2.txt"
# The diagonal of the covariance is the latent variance; symmetric.
awk -F, 'NR == FNR { v[FNR] = $1; next }
         { for (j = 1; j <= NF; j++) c[FNR, j] = $j; d = $FNR - v[FNR];
           if (d * d > 1e-20 + 1e-16 * v[FNR] * v[FNR]) bad = 1 }
         END { for (i = 1; i <= 4; i++) for (j = 1; j <= 4; j++) {
                 d = c[i, j] - c[j, i]; if (d * d > 1e-24 + 1e-20 * c[i, j] * c[i, j]) bad = 1 }
               exit bad }' "$T/vl2.txt" "$T/cov.txt"
verdict "covariance symmetric, diagonal = variance" $? "not consistent"
check_json "predict quantiles" 200 /v1/models/sine/predict "{\"X\":$SINE_X,\"quantiles\":[0.05,0.5,0.95]}"
jarr mean >"$T/qm.txt"
ok=0
for q in 0.05 0.5 0.95; do
    jarr "$q" >"$T/q$q.txt"
    [ "$(count_lines <"$T/q$q.txt")" = 4 ] || ok=1
done
[ $ok = 0 ] && awk 'BEGIN { while ((getline a < ARGV[1]) > 0) { getline b < ARGV[2]; getline c < ARGV[3]; getline m < ARGV[4];
        if (!(a < b && b < c)) exit 1; d = b - m; if (d * d > 1e-18 + 1e-18 * m * m) exit 1 } }' \
    "$T/q0.05.txt" "$T/q0.5.txt" "$T/q0.95.txt" "$T/qm.txt"
verdict "quantiles 0.05 < 0.5 < 0.95, 4 each, median = mean" $? "wrong quantiles"

# ---------------------------------------------------------------- concurrent requests
section "concurrent requests"
# 16 predictions at once (request threads, model cache): all 200, all the same body.
cpids=""
i=0
while [ $i -lt 16 ]; do
    curl -sS --max-time "$MT" -o "$T/par$i.json" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary "{\"X\":$SINE_X}" "http://127.0.0.1:$PORT/v1/models/sine/predict" >"$T/par$i.st" 2>/dev/null &
    cpids="$cpids $!"
    i=$((i + 1))
done
for p in $cpids; do wait "$p"; done
n_ok=0
i=0
while [ $i -lt 16 ]; do
    [ "$(cat "$T/par$i.st" 2>/dev/null)" = 200 ] && cmp -s "$T/par$i.json" "$T/pred_noise.json" && n_ok=$((n_ok + 1))
    i=$((i + 1))
done
[ "$n_ok" = 16 ]
verdict "16 concurrent predictions: all 200 with the same body" $? "$n_ok of 16"
