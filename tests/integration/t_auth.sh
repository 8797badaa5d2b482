#!/bin/sh
# Integration area "auth": a daemon with an API key
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "API key daemon"
printf 'test-key-0123456789\n' >"$T/keyfile"
if start_daemon "$T/key.log" --db "$T/key.db" --api-key-file "$T/keyfile" --max-train-points 10; then
    pass "daemon with --api-key-file starts"
    PORT=$DPORT
    KEY='test-key-0123456789'
    check "api key: /healthz without a key" 200 GET /healthz
    check_err "api key: missing -> 401" 401 unauthorized - GET /v1/models
    check_err "api key: wrong Bearer -> 401" 401 unauthorized - GET /v1/models -H 'Authorization: Bearer wrong-key'
    check_err "api key: key prefix -> 401" 401 unauthorized - GET /v1/models -H "Authorization: Bearer ${KEY%?}"
    check "api key: Authorization: Bearer KEY -> 200" 200 GET /v1/models -H "Authorization: Bearer $KEY"
    check "api key: /readyz without a key" 200 GET /readyz
    check_err "api key: Basic with the raw key (not base64) -> 401" 401 unauthorized - GET /v1/models -H "Authorization: Basic $KEY"
    [ "$(header WWW-Authenticate)" = 'Bearer realm="gpserve"' ]
    verdict "api key: an API 401 asks for Bearer" $? "'$(header WWW-Authenticate)'"
    check "api key: the key as a Basic password (curl -u) -> 200" 200 GET /v1/models -u "anyone:$KEY"
    # aliases change what production serves: setting or deleting one, and deleting a
    # version, take the key like a fit (401 before anything is looked up)
    check_err "api key: PUT an alias without the key -> 401" 401 unauthorized - \
        PUT /v1/models/m/aliases/champion -H 'Content-Type: application/json' --data-binary '{"version":1}'
    check_err "api key: DELETE an alias without the key -> 401" 401 unauthorized - \
        DELETE /v1/models/m/aliases/champion
    check_err "api key: DELETE a version without the key -> 401" 401 unauthorized - \
        DELETE /v1/models/m/versions/1
    check_err "api key: PUT an alias with the key passes the key check (404 no model)" 404 not_found \
        '^name$' PUT /v1/models/m/aliases/champion -H "Authorization: Bearer $KEY" \
        -H 'Content-Type: application/json' --data-binary '{"version":1}'
    check_err "api key: a wrong Basic password -> 401" 401 unauthorized - GET /v1/models -u "anyone:${KEY}x"
    check_err "api key: fit without key -> 401" 401 unauthorized - POST $M -H 'Content-Type: application/json' --data-binary "$SINE_BODY"
    check_err "--max-train-points 10: 21 points -> 413" 413 payload_too_large - POST $M \
        -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' --data-binary "$SINE_BODY"
    stop_daemon "$DPID"
    [ "$STOP_RC" = 0 ]
    verdict "api key daemon exits 0 on SIGTERM" $? "exit $STOP_RC"
else
    fail "daemon with --api-key-file starts"
fi
# A key shorter than 16 bytes: the daemon refuses to start, naming the minimum.
printf 'short-key\n' >"$T/shortkey"
"$BIN" --bind 127.0.0.1 --port 0 --db "$T/short.db" --api-key-file "$T/shortkey" >"$T/short.log" 2>&1 &
spid=$!
PIDS="$PIDS $spid"
i=0
while alive "$spid" && [ $i -lt $((STARTUP * 10)) ]; do sleep 0.1; i=$((i + 1)); done
if alive "$spid"; then
    fail "a 9-byte API key: the daemon refuses to start" "still running"
    kill -TERM "$spid" 2>/dev/null
else
    wait "$spid"
    rc=$?
    [ "$rc" -ne 0 ] && grep -q 'at least 16' "$T/short.log"
    verdict "a 9-byte API key: the daemon refuses to start (exit $rc), naming the minimum" $? "$(tail -n 1 "$T/short.log")"
fi
# Fail closed: an API key file named but empty (GPSERVE_API_KEY_FILE="", e.g.
# a template whose secret is missing, or --api-key-file "") is an error, not
# "no authentication". The daemon must exit non-zero, saying why, and never listen.
refuses_to_start() {
    # $1: name; $2: log; the command follows. Bounded by STARTUP seconds.
    _name=$1 _log=$2
    shift 2
    "$@" >"$_log" 2>&1 &
    _pid=$!
    PIDS="$PIDS $_pid"
    _i=0
    while alive "$_pid" && [ $_i -lt $((STARTUP * 10)) ]; do sleep 0.1; _i=$((_i + 1)); done
    if alive "$_pid"; then
        fail "$_name" "still running: $(tail -n 2 "$_log")"
        kill -TERM "$_pid" 2>/dev/null
        wait "$_pid" 2>/dev/null
        return
    fi
    wait "$_pid"
    _rc=$?
    [ "$_rc" -ne 0 ] && grep -qi 'empty' "$_log" && ! grep -q 'listening' "$_log"
    verdict "$_name (exit $_rc)" $? "$(tail -n 2 "$_log")"
}
refuses_to_start 'GPSERVE_API_KEY_FILE="" (set, empty): the daemon refuses to start' \
    "$T/emptyenv.log" env GPSERVE_API_KEY_FILE= "$BIN" --bind 127.0.0.1 --port 0 \
    --db "$T/emptyenv.db"
refuses_to_start '--api-key-file "": the daemon refuses to start' "$T/emptyflag.log" \
    "$BIN" --bind 127.0.0.1 --port 0 --db "$T/emptyflag.db" --api-key-file ''
: >"$T/emptykey"
refuses_to_start 'an empty API key file: the daemon refuses to start' "$T/emptyfile.log" \
    "$BIN" --bind 127.0.0.1 --port 0 --db "$T/emptyfile.db" --api-key-file "$T/emptykey"
