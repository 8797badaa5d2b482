#!/bin/sh
# Integration area "priors": priors, bounds and single held hyperparameters in
# the kernel JSON (docs/design/api.md, "Priors, bounds and held
# hyperparameters"): a MAP fit reports its log prior, a fit that ends on a
# bound says so in `warnings`, the model JSON gives back what was stated, and
# every bad statement is refused naming its field with nothing stored.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "priors, bounds and held hyperparameters"
QX='[[0],[0.3],[0.6],[0.9],[1.2],[1.5],[1.8],[2.1],[2.4],[2.7],[3.0],[3.3]]'
QY='[0.0,0.29,0.56,0.78,0.93,1.0,0.97,0.86,0.68,0.43,0.14,-0.16]'
fit_body() { # name, kernel JSON, [extra fields]
    printf '{"name":"%s","X":%s,"y":%s,"kernel":%s%s}' "$1" "$QX" "$QY" "$2" "${3:-}"
}

check_jerr "prior on a hyperparameter the kernel lacks" 400 invalid_argument \
    '^kernel\.priors\.alpha$' /v1/models \
    "$(fit_body pri '{"type":"rbf","priors":{"alpha":{"type":"gamma","shape":2,"rate":1}}}')"
check_jerr "unknown prior type" 400 invalid_argument '^kernel\.priors\.lengthscale\.type$' \
    /v1/models "$(fit_body pri '{"type":"rbf","priors":{"lengthscale":{"type":"beta"}}}')"
check_jerr "prior parameter out of range" 400 invalid_argument \
    '^kernel\.priors\.lengthscale\.scale$' /v1/models \
    "$(fit_body pri '{"type":"rbf","priors":{"lengthscale":{"type":"lognormal","loc":0,"scale":-1}}}')"
check_jerr "prior parameter missing" 400 invalid_argument \
    '^kernel\.priors\.noise\.rate$' /v1/models \
    "$(fit_body pri '{"type":"rbf","priors":{"noise":{"type":"gamma","shape":2}}}')"
check_jerr "bounds lo >= hi" 400 invalid_argument '^kernel\.bounds\.lengthscale$' /v1/models \
    "$(fit_body pri '{"type":"rbf","bounds":{"lengthscale":[2,1]}}')"
check_jerr "bounds not a pair" 400 invalid_argument '^kernel\.bounds\.variance$' /v1/models \
    "$(fit_body pri '{"type":"rbf","bounds":{"variance":[1]}}')"
check_jerr "start outside its bounds" 400 invalid_argument '^kernel\.lengthscale\[0\]$' /v1/models \
    "$(fit_body pri '{"type":"rbf","lengthscale":5,"bounds":{"lengthscale":[0.1,1]}}')"
check_jerr "noise start outside its bounds" 400 invalid_argument '^noise\.variance$' /v1/models \
    "$(fit_body pri '{"type":"rbf","bounds":{"noise":[0.001,0.01]}}' ',"noise":{"variance":0.5}')"
check_jerr "a single lengthscale beyond the kernel's" 400 invalid_argument '^kernel\.fixed\[0\]$' \
    /v1/models "$(fit_body pri '{"type":"rbf","fixed":["lengthscale[3]"]}')"
check_jerr "noise prior in a term of a sum" 400 invalid_argument \
    '^kernel\.terms\[0\]\.priors\.noise$' /v1/models \
    "$(fit_body pri '{"type":"sum","terms":[{"type":"rbf","priors":{"noise":{"type":"halfcauchy","scale":1}}},{"type":"white"}]}')"
check_jerr "noise held without its value" 400 invalid_argument '^noise\.variance$' /v1/models \
    "$(fit_body pri '{"type":"rbf","fixed":["noise"]}')"
check_jerr "rfgp: priors without the selection that fits" 422 unsupported '^kernel\.priors$' \
    /v1/models "$(fit_body pri '{"type":"rbf","priors":"default"}' ',"method":"rfgp","options":{"warmup":12}')"
if grep -q 'width_selection ml' "$T/body"; then
    pass "the refusal says which selection takes them"
else fail "the refusal says which selection takes them" "$(head -c 300 "$T/body")"; fi
check_jerr "a prior on what the method does not learn" 422 unsupported '^kernel\.priors$' \
    /v1/models "$(fit_body pri '{"type":"rbf","priors":{"variance":{"type":"gamma","shape":2,"rate":1}}}' ',"method":"msrfr","options":{"iterations":5,"particles":2,"features":8}')"
check_jerr "a noise prior on a bernoulli model" 400 invalid_argument '^kernel\.priors\.noise$' \
    /v1/models "$(printf '{"name":"pri","method":"svgp","likelihood":"bernoulli","X":%s,"y":[0,0,0,1,1,1,1,1,1,0,0,0],"kernel":{"type":"rbf","priors":{"noise":{"type":"lognormal","loc":-4,"scale":1}}},"options":{"max_iterations":5}}' "$QX")"
check "nothing stored" 404 GET /v1/models/pri

# a MAP fit with an active bound: the warning names the hyperparameter
jpost /v1/models "$(fit_body pri '{"type":"rbf","lengthscale":3,"priors":{"variance":{"type":"gamma","shape":2,"rate":2},"noise":{"type":"lognormal","loc":-4,"scale":1}},"bounds":{"lengthscale":[2,5]},"fixed":["noise"]}' ',"noise":{"variance":0.01},"standardize":false')"
if [ "$ST" = 201 ]; then pass "exact MAP fit with a bound"
else fail "exact MAP fit with a bound" "status $ST" body; fi
jq_has() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$T/body')); sys.exit(0 if ($1) else 1)"; }
if jq_has "any(w['code']=='at_bound' and w['hyperparameter']=='lengthscale[0]' and w['bound']=='lower' for w in d['warnings'])"; then
    pass "warnings: lengthscale at its lower bound"
else fail "warnings: lengthscale at its lower bound" "$(head -c 600 "$T/body")"; fi
if jq_has "d['kernel']['lengthscale'][0] >= 2 and d['kernel']['bounds']['lengthscale'] == [2, 5]"; then
    pass "the bound holds and the model gives it back"
else fail "the bound holds and the model gives it back" "$(head -c 600 "$T/body")"; fi
if jq_has "d['method_info']['log_prior'] == d['diagnostics']['log_prior'] and 'log_prior' in d['diagnostics'] and abs(d['diagnostics']['objective_with_prior'] - d['diagnostics']['objective'] - d['diagnostics']['log_prior']) < 1e-9"; then
    pass "diagnostics: log prior and the objective with it"
else fail "diagnostics: log prior and the objective with it" "$(head -c 600 "$T/body")"; fi
check "GET keeps it" 200 GET /v1/models/pri
if jq_has "d['kernel']['priors']['variance']['type'] == 'gamma' and d['kernel']['fixed'] == ['noise'] and len(d['warnings']) == 1"; then
    pass "GET: priors, held noise and warnings persisted"
else fail "GET: priors, held noise and warnings persisted" "$(head -c 600 "$T/body")"; fi
# the kernel JSON the model gives back fits again as it is
KJ=$(/usr/bin/python3 -c "import json; print(json.dumps(json.load(open('$T/body'))['kernel']))")
jpost /v1/models "$(fit_body pri2 "$KJ" ',"noise":{"variance":0.01},"standardize":false')"
if [ "$ST" = 201 ]; then pass "the returned kernel JSON is accepted as a request"
else fail "the returned kernel JSON is accepted as a request" "status $ST" body; fi
# a held single lengthscale and the default preset
jpost /v1/models "$(printf '{"name":"pri3","method":"sgpr","X":[[0,1],[1,0.5],[2,0.1],[3,0.7],[4,0.2],[5,0.9],[6,0.4],[7,0.3]],"y":[0,0.8,0.9,0.1,-0.7,-1,-0.3,0.6],"kernel":{"type":"matern52","lengthscale":[1,0.37],"priors":"default","fixed":["lengthscale[1]"]},"options":{"max_iterations":20}}')"
if [ "$ST" = 201 ] && jq_has "d['kernel']['lengthscale'][1] == 0.37 and d['kernel']['fixed'] == ['lengthscale[1]'] and d['diagnostics']['priors'] == 'default' and d['kernel']['priors']['lengthscale']['type'] == 'lognormal'"; then
    pass "sgpr: the default preset, one lengthscale held exactly"
else fail "sgpr: the default preset, one lengthscale held exactly" "status $ST" body; fi
# svgp's classifier: the default preset unless "none"
BX='[[0,1],[1,0.5],[2,0.1],[3,0.7],[4,0.2],[5,0.9],[6,0.4],[7,0.3]]'
jpost /v1/models "{\"name\":\"pri4\",\"method\":\"svgp\",\"likelihood\":\"bernoulli\",\"X\":$BX,\"y\":[0,0,0,1,0,1,1,1],\"options\":{\"max_iterations\":20}}"
if [ "$ST" = 201 ] && jq_has "d['diagnostics']['priors'] == 'default'"; then
    pass "svgp bernoulli with ARD: the default priors unless told"
else fail "svgp bernoulli with ARD: the default priors unless told" "status $ST" body; fi
jpost /v1/models "{\"name\":\"pri4\",\"method\":\"svgp\",\"likelihood\":\"bernoulli\",\"X\":$BX,\"y\":[0,0,0,1,0,1,1,1],\"kernel\":{\"type\":\"rbf\",\"priors\":\"none\"},\"options\":{\"max_iterations\":20}}"
if [ "$ST" = 201 ] && jq_has "'log_prior' not in d['diagnostics']"; then
    pass "\"priors\": \"none\" fits without them"
else fail "\"priors\": \"none\" fits without them" "status $ST" body; fi
req DELETE /v1/models/pri4
check "methods list hyper_priors" 200 GET /v1/methods
if grep -q '"hyper_priors":true' "$T/body"; then pass "/v1/methods lists hyper_priors"
else fail "/v1/methods lists hyper_priors" "$(head -c 200 "$T/body")"; fi
req DELETE /v1/models/pri
req DELETE /v1/models/pri2
req DELETE /v1/models/pri3
