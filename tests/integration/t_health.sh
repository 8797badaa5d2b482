#!/bin/sh
# Integration area "health": health, readiness and the method listing
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "health"
check "GET /healthz" 200 GET /healthz
[ "$(jstr status)" = ok ]
verdict "/healthz body is {\"status\":\"ok\"}" $? 'wrong body'
check "GET /readyz" 200 GET /readyz
[ "$(jstr status)" = ready ]
verdict "/readyz body is {\"status\":\"ready\"}" $? 'wrong body'
check "GET /v1/methods" 200 GET /v1/methods
jhas '[.methods[].name] | index("exact")' 
verdict "/v1/methods lists exact" $? 'no "exact" in the body'
