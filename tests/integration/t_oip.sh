#!/bin/sh
# Integration area "oip": the Open Inference Protocol V2 (KServe / Triton REST "v2"), after
# the examples of its published REST specification (server metadata, model metadata, an
# inference request with "shape" and flat row-major "data", errors {"error": "..."}): every
# route, infer's numbers against POST /v1/models/{name}/predict (equal after jq, which
# prints each double with 17 digits), every refused request naming its field, HEAD and 405,
# the API key, batched infers, the outputs of a classifier and of a gate model.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "Open Inference Protocol V2"
need_sine
sine_reference # $T/pred_noise.json: v1 predict of sine at SINE_X (0.1, 1.3, 2.7, 4.9)
V=/v2/models/sine

# oip_err NAME STATUS FIELD METHOD PATH [curl args...]: an error in the protocol's shape,
# {"error": "<string>"} and nothing else, whose message names FIELD (a fixed string, "-"
# for none) and with the status the v1 catalogue gives.
oip_err() {
    _n=$1
    _s=$2
    _f=$3
    shift 3
    req "$@"
    _why=""
    [ "$ST" = "$_s" ] || _why="status $ST (expected $_s)"
    jhas '(keys == ["error"]) and (.error | type == "string") and (.error | length > 0)' ||
        _why="$_why; not {\"error\": \"...\"}"
    if [ "$_f" != - ]; then
        jqb '.error' | grep -qF -- "$_f" || _why="$_why; the message does not name '$_f'"
    fi
    if [ -z "$_why" ]; then pass "$_n"; else fail "$_n" "${_why#; }" body; fi
}
# oip_jerr NAME STATUS FIELD PATH BODY: the same for a JSON POST.
oip_jerr() {
    oip_err "$1" "$2" "$3" POST "$4" -H 'Content-Type: application/json' --data-binary "$5"
}
# infer_json SHAPE DATA [EXTRA]: an infer request {"id": "42", "inputs": [one FP64 tensor], EXTRA}.
infer_json() {
    printf '{"id":"42","inputs":[{"name":"X","shape":%s,"datatype":"FP64","data":%s}]%s}' \
        "$1" "$2" "${3:+,$3}"
}
# out NAME [FILE]: the data of output NAME of an infer answer, as jq -c prints it.
out() { jq -c --arg n "$1" '.outputs[] | select(.name == $n) | .data' "${2:-$T/body}" 2>/dev/null; }

# ---- health and server metadata (open without a key, like /healthz and /readyz)
check "GET /v2 (server metadata)" 200 GET /v2
jhas '.name == "gpserve" and (.version | type == "string") and .extensions == [] and (keys | length) == 3'
verdict "/v2: {name gpserve, version, extensions []}" $? "$(jqb tostring)"
check "GET /v2/health/live" 200 GET /v2/health/live
jhas '. == {"live": true}'
verdict "/v2/health/live: {\"live\": true}" $? "$(jqb tostring)"
check "GET /v2/health/ready" 200 GET /v2/health/ready
jhas '. == {"ready": true}'
verdict "/v2/health/ready: {\"ready\": true}" $? "$(jqb tostring)"

# ---- model metadata and readiness
check "GET $V (model metadata)" 200 GET $V
jhas '.name == "sine" and .platform == "gpserve" and (.versions | length >= 1 and all(.[]; type == "string"))
      and .inputs == [{"name": "X", "datatype": "FP64", "shape": [-1, 1]}]
      and .outputs == [{"name": "mean", "datatype": "FP64", "shape": [-1]},
                       {"name": "variance", "datatype": "FP64", "shape": [-1]}]'
verdict "model metadata: name, versions, platform, inputs X [-1, 1], outputs mean and variance" $? "$(jqb tostring)"
SINE_VERSION=$(jqb '.versions[-1]')
check "GET $V/versions/1" 200 GET $V/versions/1
jhas '.versions == ["1"] and .name == "sine"'
verdict "versioned metadata names its version" $? "$(jqb tostring)"
check "GET $V/ready" 200 GET $V/ready
jhas '. == {"name": "sine", "ready": true}'
verdict "model ready: {\"name\": \"sine\", \"ready\": true}" $? "$(jqb tostring)"
check "GET $V/versions/1/ready" 200 GET $V/versions/1/ready

# ---- inference, as the specification's example: id, one input, the output asked
jpost $V/infer "$(infer_json '[4,1]' '[0.1,1.3,2.7,4.9]' '"outputs":[{"name":"mean"}]')"
[ "$ST" = 200 ] && jhas ".model_name == \"sine\" and .model_version == \"$SINE_VERSION\" and .id == \"42\"
      and (.outputs | length) == 1 and .outputs[0].name == \"mean\" and .outputs[0].datatype == \"FP64\"
      and .outputs[0].shape == [4] and (.outputs[0].data | length) == 4"
verdict "infer: 200, model_name, model_version, the id echoed, the one output asked, shape [4]" $? "status $ST"
# the numbers are v1 predict's, bit for bit
[ "$(out mean)" = "$(jq -c .mean "$T/pred_noise.json")" ]
verdict "infer mean = v1 predict mean (every digit)" $? "$(out mean) vs $(jq -c .mean "$T/pred_noise.json")"
jpost $V/infer "$(infer_json '[4,1]' '[0.1,1.3,2.7,4.9]')"
cp "$T/body" "$T/oip_all.json"
jhas '[.outputs[].name] == ["mean", "variance"] and all(.outputs[]; .shape == [4] and .datatype == "FP64")'
verdict "infer without outputs: every output (mean, variance)" $? "$(jqb tostring)"
[ "$(out mean)" = "$(jq -c .mean "$T/pred_noise.json")" ] &&
    [ "$(out variance)" = "$(jq -c .variance "$T/pred_noise.json")" ]
verdict "infer mean and variance = v1 predict's" $? "$(jq -c .outputs "$T/body")"
jpost $V/infer "$(infer_json '[4,1]' '[[0.1],[1.3],[2.7],[4.9]]')"
[ "$ST" = 200 ] && [ "$(jq -c .outputs "$T/body")" = "$(jq -c .outputs "$T/oip_all.json")" ]
verdict "infer with nested rows = with flat data" $? "status $ST"
jpost $V/versions/1/infer "$(infer_json '[4,1]' '[0.1,1.3,2.7,4.9]')"
cp "$T/body" "$T/oip_v1.json"
jpost /v1/models/sine/predict "{\"X\":$SINE_X,\"version\":1}"
[ "$(out mean "$T/oip_v1.json")" = "$(jq -c .mean "$T/body")" ] &&
    [ "$(jqb .model_version "$T/oip_v1.json")" = 1 ]
verdict "infer of version 1 = v1 predict of version 1" $? "$(jq -c . "$T/oip_v1.json" | head -c 300)"
jpost $V/infer "$(infer_json '[4,1]' '[0.1,1.3,2.7,4.9]' '"parameters":{"include_noise":false},"outputs":[{"name":"variance"},{"name":"mean"}]')"
cp "$T/body" "$T/oip_latent.json"
jpost /v1/models/sine/predict "{\"X\":$SINE_X,\"include_noise\":false}"
[ "$(out variance "$T/oip_latent.json")" = "$(jq -c .variance "$T/body")" ] &&
    [ "$(jq -c '[.outputs[].name]' "$T/oip_latent.json")" = '["variance","mean"]' ] &&
    [ "$(out variance "$T/oip_latent.json")" != "$(out variance "$T/oip_all.json")" ]
verdict "parameters.include_noise false: v1's latent variance, outputs in the order asked" $? "$(jq -c . "$T/oip_latent.json" | head -c 300)"
# two columns: data row-major, d checked against the model
need_fit oip2 '{"name":"oip2","seed":2,"X":[[0,0],[1,0],[0,1],[1,1],[2,1],[1,2]],"y":[0,1,1,2,3,3]}'
jpost /v2/models/oip2/infer '{"inputs":[{"name":"input-0","shape":[2,2],"datatype":"FP64","data":[0.5,0.25,1.5,2]}]}'
cp "$T/body" "$T/oip2.json"
jpost /v1/models/oip2/predict '{"X":[[0.5,0.25],[1.5,2]]}'
[ "$(out mean "$T/oip2.json")" = "$(jq -c .mean "$T/body")" ] && [ "$(out variance "$T/oip2.json")" = "$(jq -c .variance "$T/body")" ]
verdict "two columns, row-major data (any input name) = v1 predict's rows" $? "$(jq -c . "$T/oip2.json" | head -c 300)"

# ---- concurrent infers and predicts (batched together): each answer is the one it gets alone
OIP_PIDS=""
i=0
while [ $i -lt 12 ]; do
    if [ $((i % 2)) = 0 ]; then
        p=$V/infer
        b=$(infer_json '[4,1]' '[0.1,1.3,2.7,4.9]')
    else
        p=/v1/models/sine/predict
        b="{\"X\":$SINE_X}"
    fi
    curl -s --max-time "$MT" -H 'Content-Type: application/json' --data-binary "$b" \
        "http://127.0.0.1:$PORT$p" >"$T/oip_cc_$i" 2>/dev/null &
    OIP_PIDS="$OIP_PIDS $!"
    i=$((i + 1))
done
for p in $OIP_PIDS; do wait "$p"; done
bad=""
i=0
while [ $i -lt 12 ]; do
    if [ $((i % 2)) = 0 ]; then cmp -s "$T/oip_cc_$i" "$T/oip_all.json" || bad="$bad $i"
    else cmp -s "$T/oip_cc_$i" "$T/pred_noise.json" || bad="$bad $i"; fi
    i=$((i + 1))
done
[ -z "$bad" ]
verdict "12 concurrent infers and predicts: each body byte for byte its answer alone" $? "differ:$bad"

# ---- HEAD and 405 (the v1 rules, the protocol's error shape)
ST=$(curl -sS --max-time "$MT" -I -o "$T/head.hdr" -w '%{http_code}' "http://127.0.0.1:$PORT$V" 2>/dev/null)
req GET $V
glen=$(wc -c <"$T/body" | tr -d ' ')
hlen=$(tr -d '\r' <"$T/head.hdr" | sed -n 's/^[Cc]ontent-[Ll]ength: *//p' | tail -n 1)
[ "$ST" = 200 ] && [ "$hlen" = "$glen" ]
verdict "HEAD $V: 200 with the GET's Content-Length" $? "status $ST, $hlen vs $glen"
oip_err "GET $V/infer: 405" 405 "POST" GET $V/infer
[ "$(header Allow)" = POST ]
verdict "405 on infer: Allow: POST" $? "Allow '$(header Allow)'"
oip_err "POST $V: 405" 405 "GET" POST $V -H 'Content-Type: application/json' --data-binary '{}'
[ "$(header Allow)" = "GET, HEAD" ]
verdict "405 on model metadata: Allow: GET, HEAD" $? "Allow '$(header Allow)'"
oip_err "DELETE /v2/health/live: 405" 405 - DELETE /v2/health/live

# ---- errors of the routes: the catalogue's status, the protocol's shape
oip_err "unknown model: 404" 404 nosuch GET /v2/models/nosuch
oip_err "unknown model ready: 404" 404 nosuch GET /v2/models/nosuch/ready
oip_err "unknown version: 404" 404 version GET $V/versions/999
oip_err "a version that is neither an integer nor an alias: 400" 400 version GET $V/versions/1v
oip_err "an unknown alias as the version: 404" 404 version GET $V/versions/v1
oip_err "a bad model name: 400" 400 name GET '/v2/models/a%20b'
oip_err "no route under /v2: 404" 404 /v2/repository/index GET /v2/repository/index
oip_err "/v2/models: 404" 404 - GET /v2/models
oip_err "infer with text/plain: 415" 415 application/json POST $V/infer -H 'Content-Type: text/plain' --data-binary x
head -c 1200000 /dev/zero | tr '\0' ' ' >"$T/oip_big.json"
oip_err "a body above --max-body-mb: 413" 413 max-body-mb POST $V/infer -H 'Content-Type: application/json' --data-binary @"$T/oip_big.json"
oip_err "a 70 KB header (the HTTP layer's 431): the protocol's shape" 431 - GET /v2 -H "X-Big: $(head -c 70000 /dev/zero | tr '\0' a)"
oip_err "a bad Content-Length: 400" 400 Content-Length POST $V/infer -H 'Content-Type: application/json' -H 'Content-Length: 12x' --data-binary '{}'

# ---- errors of infer requests: 400 naming the field
oip_jerr "infer: not JSON" 400 JSON $V/infer '{"inputs":'
oip_jerr "infer: unknown request field" 400 model $V/infer '{"model":"sine","inputs":[]}'
oip_jerr "infer: no inputs" 400 inputs $V/infer '{"id":"1"}'
oip_jerr "infer: two inputs" 400 inputs $V/infer \
    '{"inputs":[{"name":"a","shape":[1,1],"datatype":"FP64","data":[1]},{"name":"b","shape":[1,1],"datatype":"FP64","data":[1]}]}'
oip_jerr "infer: FP32 (FP64 only)" 400 'inputs[0].datatype' $V/infer "$(infer_json '[1,1]' '[1]' | sed 's/FP64/FP32/')"
jqb .error | grep -q 'FP64'
verdict "infer: FP32 refused saying FP64" $? "$(jqb .error)"
oip_jerr "infer: INT64" 400 'inputs[0].datatype' $V/infer "$(infer_json '[1,1]' '[1]' | sed 's/FP64/INT64/')"
oip_jerr "infer: BYTES" 400 'inputs[0].datatype' $V/infer "$(infer_json '[1,1]' '[1]' | sed 's/FP64/BYTES/')"
oip_jerr "infer: shape [4] (not [n, d])" 400 'inputs[0].shape' $V/infer "$(infer_json '[4]' '[0.1,1.3,2.7,4.9]')"
oip_jerr "infer: shape [2, 2] for a model of one column" 400 'inputs[0].shape' $V/infer "$(infer_json '[2,2]' '[0.1,1.3,2.7,4.9]')"
oip_jerr "infer: shape with a negative entry" 400 'inputs[0].shape' $V/infer "$(infer_json '[-4,1]' '[0.1,1.3,2.7,4.9]')"
oip_jerr "infer: shape [0, 1]" 400 'inputs[0].shape' $V/infer "$(infer_json '[0,1]' '[]')"
oip_jerr "infer: n x d is not the number of data" 400 'inputs[0].data' $V/infer "$(infer_json '[5,1]' '[0.1,1.3,2.7,4.9]')"
oip_jerr "infer: a value that is text" 400 'inputs[0].data[2]' $V/infer "$(infer_json '[4,1]' '[0.1,1.3,"2.7",4.9]')"
oip_jerr "infer: a row too short (nested)" 400 'inputs[0].data[1]' $V/infer "$(infer_json '[2,2]' '[[1,2],[3]]')"
oip_jerr "infer: more rows than max_points: 413" 413 'inputs[0].shape' $V/infer "$(infer_json '[1000001,1]' '[1]')"
oip_jerr "infer: an unknown output" 400 'outputs[0].name' $V/infer "$(infer_json '[1,1]' '[1]' '"outputs":[{"name":"output0"}]')"
oip_jerr "infer: an output of another likelihood" 400 'outputs[0].name' $V/infer "$(infer_json '[1,1]' '[1]' '"outputs":[{"name":"probability"}]')"
oip_jerr "infer: binary output data" 400 'outputs[0].parameters.binary_data' $V/infer "$(infer_json '[1,1]' '[1]' '"outputs":[{"name":"mean","parameters":{"binary_data":true}}]')"
oip_jerr "infer: an unknown parameter" 400 'parameters.include_nosie' $V/infer "$(infer_json '[1,1]' '[1]' '"parameters":{"include_nosie":false}')"
oip_jerr "infer: include_noise not a boolean" 400 'parameters.include_noise' $V/infer "$(infer_json '[1,1]' '[1]' '"parameters":{"include_noise":1}')"
oip_jerr "infer: id not a string" 400 id $V/infer '{"id":42,"inputs":[{"name":"X","shape":[1,1],"datatype":"FP64","data":[1]}]}'
oip_jerr "infer: unknown model: 404" 404 nosuch /v2/models/nosuch/infer "$(infer_json '[1,1]' '[1]')"
oip_jerr "infer: unknown version: 404" 404 version $V/versions/999/infer "$(infer_json '[1,1]' '[1]')"

# ---- a classifier: the outputs of its v1 predict
need_fit oipcls '{"name":"oipcls","method":"svgp","likelihood":"bernoulli","seed":1,"options":{"inducing":6},
  "X":[[0],[0.5],[1],[1.5],[2],[2.5],[3],[3.5],[4],[4.5],[5],[5.5]],"y":[0,0,0,1,0,1,1,1,1,0,1,1]}'
check "GET /v2/models/oipcls" 200 GET /v2/models/oipcls
jhas '[.outputs[].name] == ["mean", "variance", "latent_mean", "latent_variance", "probability"]'
verdict "classifier metadata: mean, variance, latent_mean, latent_variance, probability" $? "$(jq -c .outputs "$T/body")"
jpost /v2/models/oipcls/infer "$(infer_json '[3,1]' '[0.25,3.25,9]' '"outputs":[{"name":"probability"},{"name":"latent_mean"}]')"
cp "$T/body" "$T/oip_cls.json"
jpost /v1/models/oipcls/predict '{"X":[[0.25],[3.25],[9]]}'
[ "$(out probability "$T/oip_cls.json")" = "$(jq -c .probability "$T/body")" ] &&
    [ "$(out latent_mean "$T/oip_cls.json")" = "$(jq -c .latent_mean "$T/body")" ]
verdict "classifier infer: probability and latent_mean = v1 predict's" $? "$(jq -c . "$T/oip_cls.json" | head -c 300)"

# ---- a model with an uncertainty gate: not ready (4xx) while it warms up, then ask_oracle (BOOL)
check_json "rfgp for the gate" 201 /v1/models \
    '{"name":"oipgate","method":"rfgp","seed":1,"options":{"input":{"kind":"point","dim":1},"features":64,"warmup":4}}'
oip_err "gate model warming up: ready 409 (4xx: not ready)" 409 "warming up" GET /v2/models/oipgate/ready
oip_jerr "gate model warming up: infer 409" 409 "warming up" /v2/models/oipgate/infer "$(infer_json '[2,1]' '[1.1,40]')"
check_json "gate model: observe its warmup rows" 200 /v1/models/oipgate/observe \
    '{"X":[0.0,0.5,1.0,1.5,2.0],"y":[0.02,0.47,0.86,0.99,0.90]}'
check "gate model: ready" 200 GET /v2/models/oipgate/ready
jpost /v2/models/oipgate/infer "$(infer_json '[2,1]' '[1.1,40]')"
cp "$T/body" "$T/oip_gate.json"
jpost /v1/models/oipgate/predict '{"X":[1.1,40]}'
jhas '.outputs[2] | .name == "ask_oracle" and .datatype == "BOOL" and .shape == [2]' "$T/oip_gate.json" &&
    [ "$(out ask_oracle "$T/oip_gate.json")" = "$(jq -c .ask_oracle "$T/body")" ] &&
    [ "$(out ask_oracle "$T/oip_gate.json")" = '[false,true]' ] &&
    [ "$(out mean "$T/oip_gate.json")" = "$(jq -c .mean "$T/body")" ]
verdict "gate model infer: ask_oracle BOOL [false, true] and mean = v1 predict's" $? "$(jq -c . "$T/oip_gate.json" | head -c 300)"

# ---- metrics: counted per route pattern
req GET /metrics
grep -q '^gpserve_http_requests_total{route="/v2/models/{name}/infer",method="POST",status="200"} [1-9]' "$T/body" &&
    grep -q '^gpserve_http_requests_total{route="/v2/models/{name}/versions/{v}/infer",method="POST",status="200"} [1-9]' "$T/body" &&
    grep -q '^gpserve_http_request_duration_seconds_count{route="/v2/health/live"} [1-9]' "$T/body"
verdict "/metrics counts the V2 routes by pattern" $? "$(grep '/v2' "$T/body" | head -n 5 | tr '\n' ' ')"

# ---- the API key, and the request deadline's 408 in the protocol's shape
section "Open Inference Protocol V2 with an API key"
printf 'oip-key-0123456789\n' >"$T/oipkey"
MAIN_PORT=$PORT
# (and no batching: an infer is then answered on its request thread)
if start_daemon "$T/oipkey.log" --db "$T/oipkey.db" --api-key-file "$T/oipkey" --request-timeout 2 \
    --batch-delay-us 0; then
    PORT=$DPORT
    OK='Authorization: Bearer oip-key-0123456789'
    check "key: /v2/health/live without the key" 200 GET /v2/health/live
    check "key: /v2/health/ready without the key" 200 GET /v2/health/ready
    oip_err "key: /v2 without the key: 401" 401 "API key" GET /v2
    [ "$(header WWW-Authenticate)" = 'Bearer realm="gpserve"' ]
    verdict "key: 401 carries WWW-Authenticate: Bearer realm=\"gpserve\"" $? "'$(header WWW-Authenticate)'"
    oip_err "key: model metadata without the key: 401" 401 "API key" GET /v2/models/sine
    oip_err "key: infer with a wrong key: 401" 401 "API key" POST /v2/models/sine/infer \
        -H 'Authorization: Bearer wrong' -H 'Content-Type: application/json' --data-binary "$(infer_json '[1,1]' '[1]')"
    oip_err "key: an unknown path without the key: 404 (the route first)" 404 - GET /v2/nothing
    check "key: /v2 with the key" 200 GET /v2 -H "$OK"
    oip_err "key: infer of an unknown model with the key: 404" 404 sine POST /v2/models/sine/infer \
        -H "$OK" -H 'Content-Type: application/json' --data-binary "$(infer_json '[1,1]' '[1]')"
    check_json "key: fit sine" 201 /v1/models "$SINE_BODY" -H "$OK"
    jpost /v2/models/sine/infer "$(infer_json '[4,1]' '[0.1,1.3,2.7,4.9]')" -H "$OK"
    cp "$T/body" "$T/oip_nobatch.json"
    jpost /v1/models/sine/predict "{\"X\":$SINE_X}" -H "$OK"
    [ "$(out mean "$T/oip_nobatch.json")" = "$(jq -c .mean "$T/body")" ] &&
        [ "$(out variance "$T/oip_nobatch.json")" = "$(jq -c .variance "$T/body")" ]
    verdict "no batching (--batch-delay-us 0): infer = v1 predict" $? "$(jq -c . "$T/oip_nobatch.json" | head -c 300)"
    # a body that never comes whole: 408 after --request-timeout, in each API's shape
    oip_err "408 on a /v2 path: the protocol's shape" 408 request-timeout POST /v2/models/sine/infer \
        -H "$OK" -H 'Content-Type: application/json' -H 'Content-Length: 100' --data-binary '{'
    check_err "408 on a /v1 path: the catalogue's shape" 408 request_timeout none POST /v1/models/sine/predict \
        -H "$OK" -H 'Content-Type: application/json' -H 'Content-Length: 100' --data-binary '{'
    stop_daemon "$DPID"
    [ "$STOP_RC" = 0 ]
    verdict "key daemon exits 0 on SIGTERM" $? "exit $STOP_RC"
else
    fail "daemon with --api-key-file, --request-timeout 2 and --batch-delay-us 0 starts"
fi
PORT=$MAIN_PORT
