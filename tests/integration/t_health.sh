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
# HEAD wherever GET is allowed: the GET's status and headers, no body.
head_req() {
    ST=$(curl -sS --max-time "$MT" -I -o "$T/head.hdr" -w '%{http_code}' "http://127.0.0.1:$PORT$1" 2>/dev/null)
}
for path in /healthz /readyz /metrics /openapi.yaml /v1/methods /v1/models; do
    req GET "$path"
    glen=$(wc -c <"$T/body" | tr -d ' ')
    head_req "$path"
    hlen=$(tr -d '\r' <"$T/head.hdr" | sed -n 's/^[Cc]ontent-[Ll]ength: *//p' | tail -n 1)
    [ "$ST" = 200 ] && { [ "$path" = /metrics ] || [ "$hlen" = "$glen" ]; }
    verdict "HEAD $path: 200 with the GET's Content-Length" $? "status $ST, Content-Length '$hlen' (GET body $glen bytes)"
done
head_req /v1/models/nosuch/predict
[ "$ST" = 405 ] && tr -d '\r' <"$T/head.hdr" | grep -qi '^Allow: POST$'
verdict "HEAD on a POST-only route: 405 with Allow: POST" $? "status $ST"
