#!/bin/sh
# Integration area "means": a constant or linear mean in a fit ("mean":
# {"type": ...}): accepted by the methods with mean_functions (every method:
# svgp and pls with every likelihood, rfgp for one output of point inputs),
# shown in the model JSON with its coefficients in working and original
# units, carried to predictions far from the data (svgp and pls bernoulli:
# through the latent f); refused naming mean / mean.type (unknown type,
# several outputs), nothing stored.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "mean functions"
MX='[[0],[0.5],[1],[1.5],[2],[2.5],[3],[3.5]]'
MY='[3.0,4.1,4.9,6.1,7.0,7.9,9.1,10.0]'
check_jerr "mean: unknown type" 400 invalid_argument '^mean\.type$' /v1/models \
    "{\"name\":\"mf\",\"X\":$MX,\"y\":$MY,\"mean\":{\"type\":\"quadratic\"}}"
check_jerr "mean: not an object" 400 invalid_argument '^mean$' /v1/models \
    "{\"name\":\"mf\",\"X\":$MX,\"y\":$MY,\"mean\":\"linear\"}"
check_jerr "mean: unknown key" 400 invalid_argument '^mean\.' /v1/models \
    "{\"name\":\"mf\",\"X\":$MX,\"y\":$MY,\"mean\":{\"type\":\"linear\",\"slope\":2}}"
check_jerr "mean: rfgp with two outputs" 422 unsupported '^mean$' /v1/models \
    "{\"name\":\"mf\",\"method\":\"rfgp\",\"options\":{\"outputs\":2,\"input\":{\"kind\":\"point\",\"dim\":1}},\"mean\":{\"type\":\"linear\"}}"
if grep -q 'one output' "$T/body"; then pass "the refusal says a mean is for one output"
else fail "the refusal says a mean is for one output" "$(head -c 300 "$T/body")"; fi
check_jerr "mean: svgp bernoulli, unknown type" 400 invalid_argument '^mean\.type$' /v1/models \
    "{\"name\":\"mf\",\"method\":\"svgp\",\"likelihood\":\"bernoulli\",\"X\":$MX,\"y\":[0,0,0,1,1,1,1,1],\"mean\":{\"type\":\"cubic\"}}"
check_jerr "mean: svgp bernoulli, bad label" 422 invalid_data '^y\[2\]$' /v1/models \
    "{\"name\":\"mf\",\"method\":\"svgp\",\"likelihood\":\"bernoulli\",\"X\":$MX,\"y\":[0,0,0.5,1,1,1,1,1],\"mean\":{\"type\":\"linear\"}}"
check "nothing stored" 404 GET /v1/models/mf
# svgp bernoulli with a linear mean: the mean moves the latent f, so p(y = 1)
# far to the right goes to 1 and stays a probability
jpost /v1/models "{\"name\":\"mfb\",\"method\":\"svgp\",\"likelihood\":\"bernoulli\",\"X\":$MX,\"y\":[0,0,0,1,0,1,1,1],\"mean\":{\"type\":\"linear\"},\"options\":{\"max_iterations\":30,\"inducing\":4}}"
if [ "$ST" = 201 ] || [ "$ST" = 200 ]; then pass "svgp bernoulli fit with a linear mean"
else fail "svgp bernoulli fit with a linear mean" "status $ST" body; fi
jpost /v1/models/mfb/predict '{"X":[[40]],"include_noise":true}'
MF_P1=$(sed -n 's/.*"mean":\[\([-0-9.e+]*\).*/\1/p' "$T/body")
if [ "$ST" = 200 ] && awk -v m="$MF_P1" 'BEGIN { exit !(m > 0.9 && m <= 1) }'; then
    pass "svgp bernoulli: p(y = 1) far to the right follows the latent trend ($MF_P1)"
else fail "svgp bernoulli: p(y = 1) far to the right follows the latent trend" "status $ST mean '$MF_P1'" body; fi
req DELETE /v1/models/mfb
# pls bernoulli: the logistic trend of the labels as the latent offset
jpost /v1/models "{\"name\":\"mfp\",\"method\":\"pls\",\"likelihood\":\"bernoulli\",\"X\":$MX,\"y\":[0,0,0,1,0,1,1,1],\"mean\":{\"type\":\"linear\"},\"options\":{\"steps\":20,\"particles\":10}}"
if [ "$ST" = 201 ] || [ "$ST" = 200 ]; then pass "pls bernoulli fit with a linear mean"
else fail "pls bernoulli fit with a linear mean" "status $ST" body; fi
jpost /v1/models/mfp/predict '{"X":[[40]],"include_noise":true}'
MF_P1=$(sed -n 's/.*"mean":\[\([-0-9.e+]*\).*/\1/p' "$T/body")
if [ "$ST" = 200 ] && awk -v m="$MF_P1" 'BEGIN { exit !(m > 0.9 && m <= 1) }'; then
    pass "pls bernoulli: p(y = 1) far to the right follows the latent trend ($MF_P1)"
else fail "pls bernoulli: p(y = 1) far to the right follows the latent trend" "status $ST mean '$MF_P1'" body; fi
req DELETE /v1/models/mfp
# rfgp: the mean fitted on the warm-up rows, held online
jpost /v1/models "{\"name\":\"mfr\",\"method\":\"rfgp\",\"X\":$MX,\"y\":$MY,\"mean\":{\"type\":\"linear\"},\"options\":{\"warmup\":6,\"features\":32}}"
if [ "$ST" = 201 ] || [ "$ST" = 200 ]; then pass "rfgp fit with a linear mean"
else fail "rfgp fit with a linear mean" "status $ST" body; fi
jpost /v1/models/mfr/predict '{"X":[[50]]}'
MF_P1=$(sed -n 's/.*"mean":\[\([-0-9.e+]*\).*/\1/p' "$T/body")
if [ "$ST" = 200 ] && awk -v m="$MF_P1" 'BEGIN { exit !(m > 95 && m < 111) }'; then
    pass "rfgp: the linear mean carries the trend far from the data ($MF_P1)"
else fail "rfgp: the linear mean carries the trend far from the data" "status $ST mean '$MF_P1'" body; fi
req DELETE /v1/models/mfr
check "nothing stored" 404 GET /v1/models/mf
jpost /v1/models "{\"name\":\"mf\",\"X\":$MX,\"y\":$MY,\"mean\":{\"type\":\"linear\"},\"options\":{\"max_iterations\":30}}"
if [ "$ST" = 201 ] || [ "$ST" = 200 ]; then pass "exact fit with a linear mean"
else fail "exact fit with a linear mean" "status $ST" body; fi
check "model" 200 GET /v1/models/mf
if grep -q '"mean":{"type":"linear","coefficients":\[' "$T/body" &&
    grep -q '"coefficients_original":\[' "$T/body"; then
    pass "the model shows its mean and coefficients"
else fail "the model shows its mean and coefficients" "$(head -c 400 "$T/body")"; fi
# y = 3 + 2 x: at x = 50 the trend gives 103; a zero-mean GP reverts to ~6.5
jpost /v1/models/mf/predict '{"X":[[50]]}'
MF_P1=$(sed -n 's/.*"mean":\[\([-0-9.e+]*\).*/\1/p' "$T/body")
if [ "$ST" = 200 ] && awk -v m="$MF_P1" 'BEGIN { exit !(m > 95 && m < 111) }'; then
    pass "the linear mean carries the trend far from the data ($MF_P1)"
else fail "the linear mean carries the trend far from the data" "status $ST mean '$MF_P1'" body; fi
jpost /v1/models "{\"name\":\"mf2\",\"method\":\"sgpr\",\"X\":$MX,\"y\":$MY,\"mean\":{\"type\":\"constant\"},\"options\":{\"max_iterations\":10,\"inducing\":4}}"
if [ "$ST" = 201 ] || [ "$ST" = 200 ]; then pass "sgpr fit with a constant mean"
else fail "sgpr fit with a constant mean" "status $ST" body; fi
check "methods list mean_functions" 200 GET /v1/methods
if grep -q '"mean_functions":true' "$T/body"; then pass "/v1/methods lists mean_functions"
else fail "/v1/methods lists mean_functions" "$(head -c 200 "$T/body")"; fi
req DELETE /v1/models/mf
req DELETE /v1/models/mf2
