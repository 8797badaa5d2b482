#!/bin/sh
# Integration area "ppnoise": known per-point noise (noise.per_point in a fit,
# noise in a predict): accepted by exact, refused naming the field and the
# methods that take it, nothing stored on a bad request.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "known per-point noise"
PX='[[0],[0.5],[1],[1.5],[2],[2.5]]'
PY='[0.1,0.5,0.8,1.0,0.9,0.6]'
PR='[0.01,0.02,0.001,0.05,0.01,0.2]'
check_jerr "per_point: wrong length" 422 invalid_data '^noise\.per_point$' /v1/models \
    "{\"name\":\"ppn\",\"X\":$PX,\"y\":$PY,\"noise\":{\"per_point\":[0.1,0.2]}}"
check_jerr "per_point: negative" 422 invalid_data '^noise\.per_point\[3\]$' /v1/models \
    "{\"name\":\"ppn\",\"X\":$PX,\"y\":$PY,\"noise\":{\"per_point\":[0.1,0.1,0.1,-1,0.1,0.1]}}"
check_jerr "per_point: not a number" 422 invalid_data '^noise\.per_point\[0\]$' /v1/models \
    "{\"name\":\"ppn\",\"X\":$PX,\"y\":$PY,\"noise\":{\"per_point\":[\"NaN\",0.1,0.1,0.1,0.1,0.1]}}"
check_jerr "per_point: method that does not take it" 422 unsupported '^noise\.per_point$' /v1/models \
    "{\"name\":\"ppn\",\"method\":\"msrfr\",\"X\":$PX,\"y\":$PY,\"noise\":{\"per_point\":$PR}}"
named=1
for m in exact sgpr svgp ssgp renyi; do grep -q "[ ;]$m[, ]" "$T/body" || named=0; done
if [ $named = 1 ]; then pass "the refusal names the methods that take it"
else fail "the refusal names the methods that take it" "$(head -c 300 "$T/body")"; fi
check_jerr "variance 0 without per_point" 400 invalid_argument '^noise\.variance$' /v1/models \
    "{\"name\":\"ppn\",\"X\":$PX,\"y\":$PY,\"noise\":{\"variance\":0,\"fixed\":true}}"
check "nothing stored" 404 GET /v1/models/ppn
jpost /v1/models "{\"name\":\"ppn\",\"X\":$PX,\"y\":$PY,\"standardize\":false,\"noise\":{\"per_point\":$PR,\"variance\":0,\"fixed\":true},\"options\":{\"max_iterations\":5}}"
if [ "$ST" = 201 ] || [ "$ST" = 200 ]; then pass "exact fit with per-point noise"
else fail "exact fit with per-point noise" "status $ST" body; fi
check "model" 200 GET /v1/models/ppn
if grep -q '"per_point_noise":true' "$T/body"; then pass "the model says it has per-point noise"
else fail "the model says it has per-point noise" "$(head -c 300 "$T/body")"; fi
jpost /v1/models/ppn/predict '{"X":[[0.7],[3]]}'
if [ "$ST" = 200 ] && grep -q '"noise_included":false' "$T/body"; then
    pass "predict without the points' noise: latent, said so"
else fail "predict without the points' noise: latent, said so" "status $ST" body; fi
jpost /v1/models/ppn/predict '{"X":[[0.7],[3]],"noise":[0.5,0.25]}'
if [ "$ST" = 200 ] && ! grep -q 'noise_included' "$T/body"; then pass "predict with the points' noise"
else fail "predict with the points' noise" "status $ST" body; fi
check_jerr "predict noise: wrong length" 422 invalid_data '^noise$' /v1/models/ppn/predict \
    '{"X":[[0.7],[3]],"noise":[0.5]}'
check_jerr "predict noise: negative" 422 invalid_data '^noise\[1\]$' /v1/models/ppn/predict \
    '{"X":[[0.7],[3]],"noise":[0.5,-0.25]}'
check_jerr "predict noise: a bad entry beside full_covariance" 422 invalid_data '^noise\[0\]$' \
    /v1/models/ppn/predict '{"X":[[0.7],[3]],"noise":["x",0.25],"full_covariance":true}'
check "methods list per_point_noise" 200 GET /v1/methods
if grep -q '"per_point_noise":true' "$T/body"; then pass "/v1/methods lists per_point_noise"
else fail "/v1/methods lists per_point_noise" "$(head -c 200 "$T/body")"; fi
req DELETE /v1/models/ppn

section "per-point noise: svgp, ssgp, renyi; CSV noise_column; observe with noise"
for m in svgp ssgp renyi; do
    jpost /v1/models "{\"name\":\"ppn-$m\",\"method\":\"$m\",\"X\":$PX,\"y\":$PY,\"noise\":{\"per_point\":$PR},\"options\":{\"max_iterations\":5}}"
    if [ "$ST" = 201 ] || [ "$ST" = 200 ]; then pass "$m fit with per-point noise"
    else fail "$m fit with per-point noise" "status $ST" body; fi
    req DELETE "/v1/models/ppn-$m"
done
CSVP='x,sd2,y
0,0.01,0.1
0.5,0.02,0.5
1,0.001,0.8
1.5,0.05,1.0
2,0.01,0.9
2.5,0.2,0.6'
check_err "CSV noise_column: unknown column" 400 invalid_argument '^noise_column$' \
    POST "/v1/models?name=ppcsv&noise_column=nope" -H 'Content-Type: text/csv' --data-binary "$CSVP"
check_err "CSV noise_column: a negative variance" 422 invalid_data '^noise\.per_point\[1\]$' \
    POST "/v1/models?name=ppcsv&noise_column=sd2" -H 'Content-Type: text/csv' \
    --data-binary "$(printf 'x,sd2,y\n0,0.01,0.1\n0.5,-0.02,0.5\n1,0.001,0.8\n')"
check "CSV: nothing stored" 404 GET /v1/models/ppcsv
req POST "/v1/models?name=ppcsv&noise_column=sd2&standardize=false&noise_variance=0&noise_fixed=true&options=%7B%22max_iterations%22:5%7D" \
    -H 'Content-Type: text/csv' --data-binary "$CSVP"
if [ "$ST" = 201 ] || [ "$ST" = 200 ]; then pass "CSV fit with noise_column"
else fail "CSV fit with noise_column" "status $ST" body; fi
jpost /v1/models/ppcsv/predict '{"X":[[0.7],[3]]}'
cp "$T/body" "$T/ppcsv.body"
jpost /v1/models/ppjs/predict '{"X":[[0.7],[3]]}' # absent: 404, only to reset the body
jpost /v1/models "{\"name\":\"ppjs\",\"X\":$PX,\"y\":$PY,\"standardize\":false,\"noise\":{\"per_point\":$PR,\"variance\":0,\"fixed\":true},\"options\":{\"max_iterations\":5}}"
jpost /v1/models/ppjs/predict '{"X":[[0.7],[3]]}'
sed 's/"name":"[^"]*"//' "$T/body" >"$T/ppjs.cmp"
sed 's/"name":"[^"]*"//' "$T/ppcsv.body" >"$T/ppcsv.cmp"
cmp -s "$T/ppjs.cmp" "$T/ppcsv.cmp"
verdict "the CSV's noise column is the JSON's per_point (same predictions)" $? "$(head -c 200 "$T/ppcsv.body")"
req DELETE /v1/models/ppcsv
req DELETE /v1/models/ppjs

for m in exact ssgp; do
    jpost /v1/models "{\"name\":\"ppo-$m\",\"method\":\"$m\",\"X\":$PX,\"y\":$PY,\"noise\":{\"per_point\":$PR},\"options\":{\"max_iterations\":5}}"
    check_jerr "$m observe without noise" 400 invalid_argument '^noise$' /v1/models/ppo-$m/observe \
        '{"X":[[3],[3.5]],"y":[0.2,0.1]}'
    check_jerr "$m observe: noise of the wrong length" 422 invalid_data '^noise$' \
        /v1/models/ppo-$m/observe '{"X":[[3],[3.5]],"y":[0.2,0.1],"noise":[0.1]}'
    check_jerr "$m observe: negative noise" 422 invalid_data '^noise\[1\]$' \
        /v1/models/ppo-$m/observe '{"X":[[3],[3.5]],"y":[0.2,0.1],"noise":[0.1,-1]}'
    jpost /v1/models/ppo-$m/observe '{"X":[[3],[3.5]],"y":[0.2,0.1],"noise":[0.1,0.02]}'
    if [ "$ST" = 200 ] && grep -q '"observations":1}' "$T/body"; then
        pass "$m observe with noise (the refused ones logged nothing)"
    else fail "$m observe with noise" "status $ST" body; fi
    jpost /v1/models/ppo-$m/observe '{"X":[[4]],"y":[-0.3],"noise":[0.3]}'
    jpost /v1/models/ppo-$m/predict '{"X":[[0.7],[3.2],[4.1]]}'
    cp "$T/body" "$T/ppo-$m.body"
done
# another daemon on the same store rebuilds the models from the log, noise included
if start_daemon "$T/ppnoise2.log" --db "$MAIN_DB"; then
    OLDPORT=$PORT
    PORT=$DPORT
    for m in exact ssgp; do
        jpost /v1/models/ppo-$m/predict '{"X":[[0.7],[3.2],[4.1]]}'
        cmp -s "$T/body" "$T/ppo-$m.body"
        verdict "$m: a second daemon replays the observations with their noise bit for bit" $? \
            "$(head -c 300 "$T/body") vs $(head -c 300 "$T/ppo-$m.body")"
    done
    stop_daemon "$DPID"
    PORT=$OLDPORT
else
    fail "second daemon on the store"
fi
jpost /v1/models "{\"name\":\"ppo-plain\",\"method\":\"exact\",\"X\":$PX,\"y\":$PY,\"options\":{\"max_iterations\":5}}"
check_jerr "observe noise on a model fitted without" 422 unsupported '^noise$' /v1/models/ppo-plain/observe \
    '{"X":[[3]],"y":[0.2],"noise":[0.1]}'
for m in exact ssgp plain; do req DELETE "/v1/models/ppo-$m"; done
