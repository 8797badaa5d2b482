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
if grep -q 'exact, sgpr' "$T/body"; then pass "the refusal names the methods that take it"
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
check "methods list per_point_noise" 200 GET /v1/methods
if grep -q '"per_point_noise":true' "$T/body"; then pass "/v1/methods lists per_point_noise"
else fail "/v1/methods lists per_point_noise" "$(head -c 200 "$T/body")"; fi
req DELETE /v1/models/ppn
