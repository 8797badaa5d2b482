#!/bin/sh
# Integration area "keys": named keys with scopes (--keys-file), the route x key
# matrix made from the route table itself (gpserve routes), who did
# what (created_by, updated_by, the access log's key), and rotation (SIGHUP,
# POST /v1/admin/reload) under load.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "named keys"
KR=reader-key-0123456789abcdef
KW=writer-key-0123456789abcdef
KA=admin-key-0123456789abcdefg
KP=team-a-key-0123456789abcdef
KG=gone-key-0123456789abcdefgh
KA_SHA=$(printf '%s' "$KA" | sha256sum | cut -c1-64)
write_keys() {
    # $1: "with" keeps the key named gone
    {
        echo "# the keys area's keys"
        echo "reader read $KR"
        echo "writer write,rps=100000,fits_per_minute=1000 $KW"
        echo "boss admin sha256:$KA_SHA"
        echo "teama write,models=team-a.* $KP"
        [ "$1" = with ] && echo "gone read $KG"
    } >"$T/keys.tmp"
    mv "$T/keys.tmp" "$T/keys" # one rename: a reader never sees half a file
}
write_keys with
A_R="Authorization: Bearer $KR"
A_W="Authorization: Bearer $KW"
A_A="Authorization: Bearer $KA"
A_P="Authorization: Bearer $KP"
A_G="Authorization: Bearer $KG"

if ! start_daemon "$T/keys.log" --db "$T/keys.db" --keys-file "$T/keys" \
    --access-log "$T/keys_access.log" --max-train-points 100; then
    fail "daemon with --keys-file starts"
    return 0 2>/dev/null || exit 0
fi
pass "daemon with --keys-file starts"
KPID=$DPID
MAINPORT=$PORT
PORT=$DPORT

# ---- the matrix: every route and verb of the table x every kind of key
"$BIN" routes >"$T/routes"
n_routes=$(count_lines <"$T/routes")
[ "$n_routes" -ge 30 ] && grep -q '^ADMIN_RELOAD POST /v1/admin/reload admin v1$' "$T/routes"
verdict "gpserve routes lists the table ($n_routes route verbs)" $? "$(head -n 3 "$T/routes")"
rank() {
    case $1 in open) echo 0 ;; read) echo 1 ;; write) echo 2 ;; admin) echo 3 ;; *) echo 9 ;; esac
}
# path_of PATTERN NAME: a request path (a model that does not exist: nothing
# allowed changes anything, it answers 404 or 4xx after the key checks)
path_of() {
    echo "$1" | sed -e "s|{name}|$2|; s|{v}|1|; s|{alias}|champion|; s|{id}|nojob|; s|{file}|app.js|; s|{trial}|1|"
}
# one_cell ROUTE VERB PATTERN SCOPE SHAPE WHO HEADER NAME EXPECT(401|403|ok) [FIELD]
matrix_bad=0
matrix_n=0
one_cell() {
    _p=$(path_of "$3" "$8")
    if [ -n "$7" ]; then req "$2" "$_p" -H "$7"; else req "$2" "$_p"; fi
    matrix_n=$((matrix_n + 1))
    _ok=1
    case $9 in
    ok) case $ST in 401 | 403 | 000) _ok=0 ;; esac ;;
    *)
        [ "$ST" = "$9" ] || _ok=0
        if [ "$5" = oip ]; then
            jhas '.error | type == "string"' || _ok=0
        else
            _code=unauthorized
            [ "$9" = 403 ] && _code=forbidden
            [ "$(jqb '.error.code')" = "$_code" ] || _ok=0
            [ -z "${10}" ] || [ "$(jqb '.error.field')" = "${10}" ] || _ok=0
        fi
        ;;
    esac
    if [ $_ok = 0 ]; then
        matrix_bad=$((matrix_bad + 1))
        fail "matrix: $2 $_p as $6 (route $1, needs $4): expected $9 ${10}" "status $ST" body
    fi
}
while read -r id verb pattern scope shape; do
    need=$(rank "$scope")
    if [ "$scope" = open ]; then
        for who in none wrong; do
            one_cell "$id" "$verb" "$pattern" "$scope" "$shape" "$who" "" m ok
        done
        continue
    fi
    one_cell "$id" "$verb" "$pattern" "$scope" "$shape" "no key" "" m 401
    one_cell "$id" "$verb" "$pattern" "$scope" "$shape" "a wrong key" "Authorization: Bearer ${KR}x" m 401
    for k in read:"$A_R" write:"$A_W" admin:"$A_A"; do
        kscope=${k%%:*}
        if [ "$(rank "$kscope")" -ge "$need" ]; then want=ok; else want=403; fi
        one_cell "$id" "$verb" "$pattern" "$scope" "$shape" "$kscope" "${k#*:}" m "$want" scope
    done
    # the key limited to team-a.*: its scope (write) first, then the name
    if [ "$need" -gt 2 ]; then
        one_cell "$id" "$verb" "$pattern" "$scope" "$shape" teama "$A_P" team-a.m 403 scope
    elif [ "$id" = MODEL_IMPORT ]; then
        one_cell "$id" "$verb" "$pattern" "$scope" "$shape" teama "$A_P" m 403 name
    else
        case $pattern in
        *"{name}"*)
            one_cell "$id" "$verb" "$pattern" "$scope" "$shape" teama "$A_P" team-b.m 403 name
            one_cell "$id" "$verb" "$pattern" "$scope" "$shape" teama "$A_P" team-a.m ok
            ;;
        *) one_cell "$id" "$verb" "$pattern" "$scope" "$shape" teama "$A_P" m ok ;;
        esac
    fi
done <"$T/routes"
[ $matrix_bad = 0 ]
verdict "matrix: $matrix_n route x key cells answer as the table says" $? "$matrix_bad wrong"
grep -q '/v2/models/{name}/infer' "$T/routes"
verdict "matrix: the /v2 routes are in it" $? ""

# ---- messages and shapes
check_err "a read key fitting: 403 naming the scope" 403 forbidden '^scope$' POST $M \
    -H "$A_R" -H 'Content-Type: application/json' --data-binary "$SINE_BODY"
grep -q "needs the write scope; key 'reader' has read" "$T/body"
verdict "the 403 says which scope and which key" $? "$(cat "$T/body")"
check_err "team-a key fitting model sine: 403 naming name" 403 forbidden '^name$' POST $M \
    -H "$A_P" -H 'Content-Type: application/json' --data-binary "$SINE_BODY"

ST_SPACE='"parameters":[{"name":"x","type":"double","bounds":[0,1]}],"objective":{"name":"y","goal":"minimize"}'
check_err "team-a key creating study team-b.s: 403 naming name" 403 forbidden '^name$' \
    POST /v1/studies -H "$A_P" -H 'Content-Type: application/json' \
    --data-binary "{\"name\":\"team-b.s\",$ST_SPACE}"
check "team-a key creating study team-a.s" 201 POST /v1/studies -H "$A_P" \
    -H 'Content-Type: application/json' --data-binary "{\"name\":\"team-a.s\",$ST_SPACE}"
check "writer creating study other.s" 201 POST /v1/studies -H "$A_W" \
    -H 'Content-Type: application/json' --data-binary "{\"name\":\"other.s\",$ST_SPACE}"
check "team-a key lists studies" 200 GET /v1/studies -H "$A_P"
jhas '[.studies[].name] == ["team-a.s"]' && pass "it sees only team-a.s" ||
    fail "it sees only team-a.s" "" body

# ---- who did what: created_by, the job's record, updated_by, the access log
check_json "writer fits sine" 201 $M "$SINE_BODY" -H "$A_W"
[ "$(jqb '.created_by')" = writer ]
verdict "the version's created_by is the key's name" $? "$(jqb '.created_by')"
check "GET the version: created_by kept" 200 GET /v1/models/sine/versions/1 -H "$A_R"
[ "$(jqb '.created_by')" = writer ]
verdict "created_by is stored with the version" $? "$(jqb '.created_by')"
check "reader exports sine (its file names writer)" 200 GET /v1/models/sine/versions/1/export -H "$A_R"
cp "$T/body" "$T/keys_sine.gpmodel"
req POST "/v1/models/import?name=sine-imp" -H "$A_A" -H 'Content-Type: application/vnd.gpserve.model' \
    --data-binary "@$T/keys_sine.gpmodel"
[ "$ST" = 201 ] && [ "$(jqb '.created_by')" = boss ]
verdict "an imported version's created_by is the importing key (boss), not the exporter's" $? \
    "status $ST $(jqb '.created_by')"
TEAM_BODY=$(printf '%s' "$SINE_BODY" | sed 's/"name":"sine"/"name":"team-a.sine","async":true/')
check_json "team-a key fits team-a.sine async" 202 $M "$TEAM_BODY" -H "$A_P"
job=$(jqb '.job')
i=0
while [ $i -lt $((JOBWAIT * 5)) ]; do
    req GET "/v1/jobs/$job" -H "$A_P"
    case $(jqb '.status') in succeeded | failed | cancelled) break ;; esac
    sleep 0.2
    i=$((i + 1))
done
[ "$(jqb '.status')" = succeeded ]
verdict "the async job succeeds" $? "$(head -c 300 "$T/body")"
# another model's job is no job at all to a models= key, and its own is
check "the team-a key reads its own job" 200 GET "/v1/jobs/$job" -H "$A_P"
OTHER_BODY=$(printf '%s' "$SINE_BODY" | sed 's/"name":"sine"/"name":"sine","async":true/')
check_json "writer fits sine async" 202 $M "$OTHER_BODY" -H "$A_W"
other_job=$(jqb '.job')
check_err "the team-a key reading sine's job: 404 naming id" 404 not_found '^id$' GET "/v1/jobs/$other_job" -H "$A_P"
check_err "the team-a key cancelling sine's job: 404 naming id" 404 not_found '^id$' DELETE "/v1/jobs/$other_job" -H "$A_P"
check "the writer reads sine's job" 200 GET "/v1/jobs/$other_job" -H "$A_W"
if command -v sqlite3 >/dev/null 2>&1; then
    sqlite3 "$T/keys.db" "SELECT * FROM jobs" 2>/dev/null | grep -q '"created_by":"teama"'
    verdict "the job's stored request names its key" $? "$(sqlite3 "$T/keys.db" 'SELECT * FROM jobs' 2>&1 | head -c 300)"
fi
check "GET team-a.sine" 200 GET /v1/models/team-a.sine -H "$A_P"
[ "$(jqb '.created_by')" = teama ]
verdict "an async fit's version has created_by" $? "$(jqb '.created_by')"
check "team-a key lists the models" 200 GET /v1/models -H "$A_P"
[ "$(jqb '[.models[].name] | sort | join(",")')" = team-a.sine ]
verdict "a models= key lists only the models it may name" $? "$(jqb '[.models[].name]')"
check "reader lists the models" 200 GET /v1/models -H "$A_R"
jhas '[.models[].name] | index("sine") != null and index("team-a.sine") != null'
verdict "an unlimited key lists every model" $? "$(jqb '[.models[].name]')"
check "writer sets alias champion" 200 PUT /v1/models/sine/aliases/champion -H "$A_W" \
    -H 'Content-Type: application/json' --data-binary '{"version":1}'
[ "$(jqb '.updated_by')" = writer ]
verdict "the alias's updated_by is the key's name" $? "$(cat "$T/body")"
check "reader predicts" 200 POST /v1/models/sine/predict -H "$A_R" \
    -H 'Content-Type: application/json' --data-binary '{"X":[[1]]}'
check_err "reader cannot delete an alias" 403 forbidden '^scope$' DELETE /v1/models/sine/aliases/champion -H "$A_R"
check "the browser view with a read key as Basic password" 200 GET / -u "anyone:$KR"
i=0
while [ $i -lt 30 ] && ! grep -q '"key":"reader"' "$T/keys_access.log" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
grep '"key":"reader"' "$T/keys_access.log" | grep -q '"route":"PREDICT"' &&
    grep -q '"key":"writer"' "$T/keys_access.log" && ! grep -q "$KR" "$T/keys_access.log"
verdict "the access log names the key, never the secret" $? "$(tail -n 2 "$T/keys_access.log")"

# ---- the audit trail names the key (admin reads it)
check_err "a write key cannot read the audit trail" 403 forbidden '^scope$' GET /v1/audit -H "$A_W"
check "admin reads the audit trail" 200 GET "/v1/audit?key=writer" -H "$A_A"
jhas '[.entries[] | select(.key == "writer")] | length >= 2'
verdict "the audit trail names the writer's fit and alias" $? "$(head -c 300 "$T/body")"
check "admin reads reader's refused writes" 200 GET "/v1/audit?key=reader" -H "$A_A"
jhas '[.entries[] | select(.key == "reader" and .status == 403)] | length >= 1'
verdict "a 403 write is in the audit trail with its key" $? "$(head -c 300 "$T/body")"

# ---- rotation by the route
check_err "a write key cannot reload" 403 forbidden '^scope$' POST /v1/admin/reload -H "$A_W"
write_keys without
check "admin reloads (gone removed)" 200 POST /v1/admin/reload -H "$A_A"
[ "$(jqb '.keys')" = 4 ] && jhas '.names == ["reader","writer","boss","teama"]'
verdict "the reload answers the key count and names" $? "$(cat "$T/body")"
check_err "the removed key: 401 on the next request" 401 unauthorized - GET /v1/models -H "$A_G"
printf 'reader read %s\nbroken line\n' "$KR" >"$T/keys"
check_err "a malformed file: 422 naming line 2" 422 invalid_data '^keys_file$' POST /v1/admin/reload -H "$A_A"
grep -q 'line 2' "$T/body"
verdict "the 422 names the line" $? "$(cat "$T/body")"
check "the old keys stay (writer still works)" 200 GET /v1/models -H "$A_W"
grep -q 'reload refused, the old keys stay' "$T/keys.log"
verdict "the refusal is logged" $? "$(tail -n 2 "$T/keys.log")"

# ---- rotation by SIGHUP
write_keys with
kill -HUP "$KPID"
i=0
while [ $i -lt 50 ] && ! grep -q 'SIGHUP: keys reloaded: 5 keys' "$T/keys.log"; do sleep 0.1; i=$((i + 1)); done
check "SIGHUP: the added key works" 200 GET /v1/models -H "$A_G"

# ---- rotation under load: 16 connections predicting with a kept key while
# the file changes; not one answer but 200, and the removed key 401 at once
: >"$T/load.cfg"
i=0
while [ $i -lt 12000 ]; do
    [ $i -gt 0 ] && echo next >>"$T/load.cfg" # options are per URL after a 'next'
    printf 'url = "http://127.0.0.1:%s/v1/models/sine/predict"\n-X POST\n-H "%s"\n-H "Content-Type: application/json"\n-d "{\\"X\\":[[1]]}"\n-o /dev/null\n-w "%%{http_code}\\n"\n' \
        "$PORT" "$A_W" >>"$T/load.cfg"
    i=$((i + 1))
done
curl -s --parallel --parallel-immediate --parallel-max 16 -K "$T/load.cfg" \
    >"$T/load.codes" 2>"$T/load.err" &
LPID=$!
rot_bad=0
r=0
during=0
# rotate for as long as the load runs (and at least 3 times)
while [ $r -lt 3 ] || alive "$LPID"; do
    alive "$LPID" && during=$((during + 1))
    write_keys without
    req POST /v1/admin/reload -H "$A_A"
    [ "$ST" = 200 ] || rot_bad=$((rot_bad + 1))
    req GET /v1/models -H "$A_G"
    [ "$ST" = 401 ] || rot_bad=$((rot_bad + 1))
    write_keys with
    kill -HUP "$KPID"
    sleep 0.05
    r=$((r + 1))
done
wait "$LPID"
total=$(count_lines <"$T/load.codes")
non200=$(grep -vc '^200$' "$T/load.codes")
[ "$total" = 12000 ] && [ "$non200" = 0 ] && [ "$during" -ge 3 ]
verdict "rotation under load: $total predictions on 16 connections, $non200 not 200, $during rotations meanwhile" $? "$(sort "$T/load.codes" | uniq -c | head)"
[ $rot_bad = 0 ]
verdict "rotation under load: the removed key 401 right after each reload" $? "$rot_bad misses"

stop_daemon "$KPID"
[ "$STOP_RC" = 0 ]
verdict "keys daemon exits 0 on SIGTERM" $? "exit $STOP_RC"
PORT=$MAINPORT

# ---- refusals at start
refuse() {
    # $1: name; $2: pattern the log must hold; the daemon's arguments follow
    _name=$1 _pat=$2
    shift 2
    "$BIN" --bind 127.0.0.1 --port 0 "$@" >"$T/refuse.log" 2>&1 &
    _pid=$!
    PIDS="$PIDS $_pid"
    _i=0
    while alive "$_pid" && [ $_i -lt $((STARTUP * 10)) ]; do sleep 0.1; _i=$((_i + 1)); done
    if alive "$_pid"; then
        kill -TERM "$_pid" 2>/dev/null
        wait "$_pid" 2>/dev/null
        fail "$_name" "still running"
        return
    fi
    wait "$_pid"
    _rc=$?
    [ "$_rc" -ne 0 ] && grep -q "$_pat" "$T/refuse.log" && ! grep -q listening "$T/refuse.log"
    verdict "$_name (exit $_rc)" $? "$(tail -n 1 "$T/refuse.log")"
}
printf 'test-key-0123456789\n' >"$T/one_key"
write_keys with
refuse "--api-key-file with --keys-file: refused" 'both set' --db "$T/r1.db" \
    --api-key-file "$T/one_key" --keys-file "$T/keys"
printf 'ok read %s\nbad reed %s\n' "$KR" "$KW" >"$T/bad_keys"
refuse "a malformed keys file: refused naming its line" "line 2: unknown scope 'reed'" \
    --db "$T/r2.db" --keys-file "$T/bad_keys"
