#!/bin/sh
# Integration area "multioutput": coregionalised models of several outputs
# (docs/design/multioutput.md): a heterotopic fit with null, names, predict
# with cross_covariance, joint samples, observe with null, CSV ?targets=, OIP
# V2 per-output tensors, and every bad input of the design note (status, code,
# field, and nothing stored).
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).
# Variables are prefixed MO_ (areas share one shell).

section "multioutput"
need_sine
MO_OPT='"options":{"coregionalization":{"type":"icm","rank":1}}'
MO_X='[[0],[0.5],[1],[1.5],[2],[2.5],[3],[3.5],[4],[4.5]]'
MO_Y='[[0.1,1.0,2.0],[0.5,null,2.4],[0.8,1.9,null],[null,2.4,3.1],[0.9,2.0,3.0],[0.6,1.2,2.5],[0.1,null,2.0],[-0.3,-0.5,1.1],[-0.7,-1.2,0.6],[-0.9,null,0.2]]'
MO_BODY="{\"name\":\"mo_jura\",\"method\":\"exact\",\"seed\":1,$MO_OPT,\"outputs\":[\"Cd\",\"Ni\",\"Zn\"],\"X\":$MO_X,\"y\":$MO_Y}"

check_json "multioutput: heterotopic ICM fit with null" 201 /v1/models "$MO_BODY"
jhas '.outputs == ["Cd","Ni","Zn"]'
verdict "multioutput: fit answer names the outputs" $? "outputs $(jqb '.outputs | tostring')"
jhas '.coregionalization.type == "icm" and .coregionalization.rank == 1 and .coregionalization.n_observed == 25 and (.coregionalization.output_correlation | length) == 3 and (.coregionalization.noise_variance_original | length) == 3'
verdict "multioutput: coregionalization block (type, rank, n_observed 25, 3 x 3 correlation, 3 noises)" $? "$(jqb '.coregionalization | tostring' | head -c 300)"
jhas '[.coregionalization.output_correlation[] | .[]] | all(. >= -1.0000001 and . <= 1.0000001)'
verdict "multioutput: correlations within [-1, 1]" $? "$(jqb '.coregionalization.output_correlation | tostring')"
check "multioutput: GET the model" 200 GET /v1/models/mo_jura
jhas '.outputs == ["Cd","Ni","Zn"] and .coregionalization.latents == 1'
verdict "multioutput: GET names the outputs and has the block" $? "$(head -c 200 "$T/body")"

# ---- predict: rows of p, cross_covariance in the (point i, output j) = i p + j layout
MO_PX='[[0.2],[1.7],[3.9]]'
check_json "multioutput: predict with full_covariance" 200 /v1/models/mo_jura/predict "{\"X\":$MO_PX,\"full_covariance\":true}"
cp "$T/body" "$T/mo_pred.json"
jhas '.outputs == ["Cd","Ni","Zn"] and (.mean | length) == 3 and all(.mean[]; length == 3) and all(.variance[]; length == 3)'
verdict "multioutput: mean and variance one row of 3 per point" $? "$(head -c 200 "$T/body")"
jhas '(.cross_covariance | length) == 9 and all(.cross_covariance[]; length == 9)'
verdict "multioutput: cross_covariance 9 x 9" $? "$(jqb '.cross_covariance | length')"
jhas '.cross_covariance as $C | [range(9) as $r | range(9) as $c | ($C[$r][$c] - $C[$c][$r]) | fabs] | max < 1e-12'
verdict "multioutput: cross_covariance symmetric" $? "not symmetric"
jhas '.cross_covariance as $C | .covariance as $B | [range(3) as $i | range(3) as $k | range(3) as $j | ($C[$i*3+$j][$k*3+$j] - $B[$j][$i][$k]) | fabs] | max < 1e-12'
verdict "multioutput: its within-output blocks equal covariance" $? "blocks differ"
jhas '.cross_covariance as $C | .variance as $V | [range(3) as $i | range(3) as $j | ($C[$i*3+$j][$i*3+$j] - $V[$i][$j]) | fabs] | max < 1e-12'
verdict "multioutput: its diagonal equals variance" $? "diagonal differs"
jhas '.cross_covariance as $C | [range(9) as $r | range(9) as $c | ($C[$r][$c] * $C[$r][$c]) <= ($C[$r][$r] * $C[$c][$c] * (1 + 1e-9) + 1e-300)] | all'
verdict "multioutput: |C[r][c]|^2 <= C[r][r] C[c][c] (PSD 2 x 2 minors)" $? "a 2 x 2 minor is negative"
jhas '.cross_covariance as $C | [range(3) as $i | $C[$i*3][$i*3+1] | fabs] | max > 0'
verdict "multioutput: outputs of one point covary (coregionalised)" $? "cross-output entries are zero"
check_json "multioutput: predict without full_covariance" 200 /v1/models/mo_jura/predict "{\"X\":$MO_PX}"
jhas 'has("cross_covariance") | not'
verdict "multioutput: no cross_covariance without full_covariance" $? "it is there"
remember mo_predict /v1/models/mo_jura/predict "{\"X\":$MO_PX,\"full_covariance\":true}"

# ---- samples: joint, one row of p per point per draw
check_json "multioutput: sample" 200 /v1/models/mo_jura/sample "{\"X\":$MO_PX,\"n_samples\":4,\"seed\":5}"
jhas '.outputs == ["Cd","Ni","Zn"] and (.samples | length) == 4 and all(.samples[]; length == 3 and all(.[]; length == 3))'
verdict "multioutput: samples 4 draws x 3 points x 3 outputs" $? "$(head -c 200 "$T/body")"
remember mo_sample /v1/models/mo_jura/sample "{\"X\":$MO_PX,\"n_samples\":4,\"seed\":5}"

# ---- OIP V2: one tensor per output name for mean and variance
check "multioutput: OIP model metadata" 200 GET /v2/models/mo_jura
jhas '[.outputs[].name] == ["mean","variance","mean_Cd","variance_Cd","mean_Ni","variance_Ni","mean_Zn","variance_Zn"]'
verdict "multioutput: OIP lists mean_NAME and variance_NAME per output" $? "$(jqb '[.outputs[].name] | tostring')"
check_json "multioutput: OIP infer of mean_Ni" 200 /v2/models/mo_jura/infer '{"inputs":[{"name":"X","shape":[3,1],"datatype":"FP64","data":[0.2,1.7,3.9]}],"outputs":[{"name":"mean_Ni"}]}'
MO_NI=$(jqb '.outputs[0].data | tostring')
MO_NI_V1=$(jqb '[.mean[][1]] | tostring' "$T/mo_pred.json")
[ "$MO_NI" = "$MO_NI_V1" ] && jhas '.outputs[0].shape == [3]'
verdict "multioutput: OIP mean_Ni equals v1's column Ni" $? "$MO_NI vs $MO_NI_V1"
check_json "multioutput: OIP unknown per-output tensor" 400 /v2/models/mo_jura/infer '{"inputs":[{"name":"X","shape":[1,1],"datatype":"FP64","data":[0.2]}],"outputs":[{"name":"mean_Pb"}]}'
jhas '.error | startswith("outputs[0].name")'
verdict "multioutput: the OIP error names outputs[0].name" $? "$(head -c 200 "$T/body")"
check_json "multioutput: OIP per-output tensor of a one-output model" 400 /v2/models/sine/infer '{"inputs":[{"name":"X","shape":[1,1],"datatype":"FP64","data":[0.2]}],"outputs":[{"name":"mean_y0"}]}'
check "multioutput: single-output OIP metadata unchanged" 200 GET /v2/models/sine
jhas '[.outputs[].name] == ["mean","variance"]'
verdict "multioutput: sine lists mean and variance only" $? "$(jqb '[.outputs[].name] | tostring')"

# ---- observe: rows with null (on a model of its own: the references above stay)
# ; the answers change, and the restart area replays them from the log
check_json "multioutput: fit a model to observe into" 201 /v1/models "$(printf '%s' "$MO_BODY" | sed 's/"mo_jura"/"mo_obs"/')"
check_json "multioutput: observe rows with null" 200 /v1/models/mo_obs/observe '{"X":[[5],[5.5]],"y":[[null,-1.5,0.1],[-1.0,null,null]]}'
check_json "multioutput: predict after observe" 200 /v1/models/mo_obs/predict "{\"X\":[[5.2]]}"
jhas '(.mean[0] | length) == 3 and all(.mean[0][]; type == "number")'
verdict "multioutput: predicts beside the observed rows" $? "$(head -c 200 "$T/body")"
remember mo_observed /v1/models/mo_obs/predict "{\"X\":[[5.2]],\"full_covariance\":true}"
check_jerr "multioutput: observe an all-missing row" 422 invalid_data 'y\[1\]' /v1/models/mo_obs/observe '{"X":[[6],[7]],"y":[[1,2,3],[null,null,null]]}'
check_jerr "multioutput: observe rows of 2 on a 3-output model" 422 invalid_data 'y\[0\]' /v1/models/mo_obs/observe '{"X":[[6]],"y":[[1,2]]}'
check_jerr "multioutput: observe a value beyond float64's reach in working units" 422 invalid_data 'y\[0\]\[1\]' /v1/models/mo_obs/observe '{"X":[[6]],"y":[[null,1e300,0.1]]}'
check_jerr "multioutput: observe null on a one-output model" 422 invalid_data 'y\[0\]' /v1/models/sine/observe '{"X":[[6]],"y":[null]}'

# a model of its own: mo_obs's remembered answer (the log's replay after a restart) stays
check_json "multioutput: fit a model to version by observing" 201 /v1/models "$(printf '%s' "$MO_BODY" | sed 's/"mo_jura"/"mo_ver"/')"
check_json "multioutput: observe with null as a new version" 200 /v1/models/mo_ver/observe '{"X":[[6]],"y":[[0.2,null,0.4]],"new_version":true}'
check "multioutput: the new version keeps the names" 200 GET /v1/models/mo_ver/versions/2
jhas '.outputs == ["Cd","Ni","Zn"]'
verdict "multioutput: version 2 outputs Cd, Ni, Zn" $? "$(jqb '.outputs | tostring')"

# ---- an async fit with null: the durable job stores y with its missing entries
jpost /v1/models "$(printf '%s' "$MO_BODY" | sed 's/"mo_jura"/"mo_async"/; s/"seed":1,/"seed":1,"async":true,/')"
MO_JOB=$(jstr job)
if [ "$ST" = 202 ] && [ -n "$MO_JOB" ] && wait_job "$MO_JOB" succeeded; then
    jhas '.model.outputs == ["Cd","Ni","Zn"] and .model.coregionalization.n_observed == 25'
    verdict "multioutput: async fit with null succeeds with the names and 25 observed" $? "$(head -c 200 "$T/body")"
else
    fail "multioutput: async fit with null" "status $ST, job '$MO_JOB' $JOB_STATUS" body
fi

# ---- CSV: ?targets= names several target columns; an empty cell is missing
printf 'x,Cd,Ni\n0,0.1,1.0\n0.5,,1.4\n1,0.8,\n1.5,0.9,2.4\n2,0.9,2.0\n2.5,0.6,1.2\n3,0.1,0.4\n' >"$T/mo.csv"
check "multioutput: CSV fit with ?targets=Cd,Ni" 201 POST "/v1/models?name=mo_csv&method=exact&targets=Cd,Ni&options=%7B%22coregionalization%22%3A%7B%22type%22%3A%22icm%22%7D%7D" -H 'Content-Type: text/csv' --data-binary @"$T/mo.csv"
jhas '.outputs == ["Cd","Ni"] and .input_dim == 1 and .coregionalization.n_observed == 12'
verdict "multioutput: CSV targets are the outputs, the rest the inputs, empty cells missing" $? "$(jqb '{outputs, input_dim, n: .coregionalization.n_observed} | tostring')"
check_err "multioutput: CSV unknown target column" 400 invalid_argument '^targets$' POST "/v1/models?name=mo_bad_csv&method=exact&targets=Cd,Pb&options=%7B%22coregionalization%22%3A%7B%22type%22%3A%22icm%22%7D%7D" -H 'Content-Type: text/csv' --data-binary @"$T/mo.csv"
check_err "multioutput: CSV empty target cell without coregionalization" 422 invalid_data 'y\[1\]\[0\]' POST "/v1/models?name=mo_bad_csv&method=rfgp&targets=Cd,Ni" -H 'Content-Type: text/csv' --data-binary @"$T/mo.csv"
check "multioutput: nothing stored for the refused CSV fits" 404 GET /v1/models/mo_bad_csv

# ---- every bad input of docs/design/multioutput.md: status, code, field; nothing stored
# mo_bad NAME STATUS CODE FIELD BODY_MEMBERS: a fit of model mo_bad refused, and no mo_bad after.
mo_bad() {
    check_jerr "multioutput bad: $1" "$2" "$3" "$4" /v1/models "{\"name\":\"mo_bad\",$5}"
    check "multioutput bad: $1: nothing stored" 404 GET /v1/models/mo_bad
}
MO_X3='"X":[[0],[1],[2]]'
mo_bad "rows of different lengths" 422 invalid_data '^y\[1\]$' "\"method\":\"exact\",$MO_OPT,$MO_X3,\"y\":[[1,2],[1,2,3],[3,4]]"
MO_WIDE=$(awk 'BEGIN { r = "["; for (j = 0; j < 17; j++) r = r (j ? "," : "") j; print r "]" }')
mo_bad "17 outputs (above 16)" 422 invalid_data '^y$' "\"method\":\"exact\",$MO_OPT,$MO_X3,\"y\":[$MO_WIDE,$MO_WIDE,$MO_WIDE]"
mo_bad "rank above p" 400 invalid_argument 'options\.coregionalization\.rank' "\"method\":\"exact\",\"options\":{\"coregionalization\":{\"type\":\"icm\",\"rank\":3}},$MO_X3,\"y\":[[1,2],[2,3],[3,4]]"
mo_bad "latents above 8" 400 invalid_argument 'options\.coregionalization\.latents' "\"method\":\"exact\",\"options\":{\"coregionalization\":{\"type\":\"lmc\",\"latents\":9}},$MO_X3,\"y\":[[1,2],[2,3],[3,4]]"
mo_bad "a row with every output missing" 422 invalid_data '^y\[1\]$' "\"method\":\"exact\",$MO_OPT,$MO_X3,\"y\":[[1,2],[null,null],[3,4]]"
mo_bad "an output never observed" 422 invalid_data '^y$' "\"method\":\"exact\",$MO_OPT,$MO_X3,\"y\":[[1,null],[2,null],[3,null]]"
mo_bad "null in a one-output fit" 422 invalid_data '^y\[1\]$' "\"method\":\"exact\",$MO_X3,\"y\":[1,null,3]"
mo_bad "null in rows without coregionalization (rfgp)" 422 invalid_data '^y\[1\]\[0\]$' "\"method\":\"rfgp\",$MO_X3,\"y\":[[1,2],[null,3],[3,4]]"
mo_bad "several outputs on exact without the option" 422 unsupported '^y$' "\"method\":\"exact\",$MO_X3,\"y\":[[1,2],[2,3],[3,4]]"
mo_bad "the option on a method without it" 400 invalid_argument '^options\.coregionalization' "\"method\":\"ssgp\",$MO_OPT,$MO_X3,\"y\":[[1,2],[2,3],[3,4]]"
mo_bad "outputs of the wrong count" 400 invalid_argument '^outputs$' "\"method\":\"exact\",$MO_OPT,\"outputs\":[\"a\"],$MO_X3,\"y\":[[1,2],[2,3],[3,4]]"
mo_bad "outputs repeated" 400 invalid_argument '^outputs\[1\]$' "\"method\":\"exact\",$MO_OPT,\"outputs\":[\"a\",\"a\"],$MO_X3,\"y\":[[1,2],[2,3],[3,4]]"
mo_bad "outputs not a string" 400 invalid_argument '^outputs\[0\]$' "\"method\":\"exact\",$MO_OPT,\"outputs\":[1,\"b\"],$MO_X3,\"y\":[[1,2],[2,3],[3,4]]"
mo_bad "outputs empty name" 400 invalid_argument '^outputs\[1\]$' "\"method\":\"exact\",$MO_OPT,\"outputs\":[\"a\",\"\"],$MO_X3,\"y\":[[1,2],[2,3],[3,4]]"
mo_bad "y[i][j] a string" 422 invalid_data '^y\[2\]\[1\]$' "\"method\":\"exact\",$MO_OPT,$MO_X3,\"y\":[[1,2],[2,3],[3,\"4\"]]"

# ---- default names, and a full covariance too large for the limit of points x outputs
check_json "multioutput: LMC fit without names" 201 /v1/models "{\"name\":\"mo_lmc\",\"method\":\"exact\",\"seed\":2,\"options\":{\"coregionalization\":{\"type\":\"lmc\",\"latents\":2}},\"X\":$MO_X,\"y\":$MO_Y}"
jhas '.outputs == ["y0","y1","y2"] and .coregionalization.type == "lmc" and (.coregionalization.latent | length) == 2'
verdict "multioutput: default names y0.., 2 latents" $? "$(jqb '{outputs, t: .coregionalization.type} | tostring')"
