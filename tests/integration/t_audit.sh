#!/bin/sh
# Integration area "audit": the audit trail (docs/design/api.md, "The audit
# trail"). On a daemon of its own database: each write kind (sync fit, async
# fit's submission and outcome, observe, alias set and delete, import,
# version delete, model delete, job cancel) appears in GET /v1/audit with its
# route, model, version, status and request id; a refused write appears with
# its status and code; paging (limit, next, before, after) and the filters
# (model, key, since) and their refusals; a daemon killed with SIGKILL right
# after acknowledged writes keeps every one of them in the trail; and
# --audit-retention-days prunes old entries.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "audit"
AU_MAIN_PORT=$PORT
AUDB=$(db_for audit)
AU=/v1/models/au
AU_BODY=$(printf '%s' "$SINE_BODY" | sed 's/"name":"sine"/"name":"au"/')

# au_entry FILTER: the first entry of the last GET /v1/audit body matching
# FILTER (jq on the entry, "." is the entry) exists.
au_has() {
    jhas "[.entries[] | select($1)] | length >= 1"
}
au_get() { # au_get QUERY: GET /v1/audit?QUERY
    req GET "/v1/audit?$1"
}

if start_daemon "$T/audit.log" --db "$AUDB"; then
    PORT=$DPORT
    AU_PID=$DPID
    pass "a daemon on the audit database"

    # ---- each write kind, with its fields
    check_json "sync fit au (v1)" 201 $M "$AU_BODY" -H 'X-Request-Id: au-fit-1'
    au_get "model=au"
    au_has '.route == "POST /v1/models" and .model == "au" and .version == 1 and
            .status == 201 and .code == null and .request_id == "au-fit-1" and .key == null and
            (.at | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$"))'
    verdict "the sync fit is in the trail (route, model, version, status, request id, time)" $? \
        "$(head -c 400 "$T/body")"

    AU_ASYNC=$(printf '%s' "$AU_BODY" | sed 's/"seed":3/"seed":3,"async":true/')
    check_json "async fit au (v2)" 202 $M "$AU_ASYNC" -H 'X-Request-Id: au-async'
    AU_JOB=$(jstr job)
    wait_job "$AU_JOB" succeeded
    verdict "the async fit succeeds" $? "status $JOB_STATUS"
    au_get "model=au"
    au_has ".status == 202 and .job_id == \"$AU_JOB\" and .request_id == \"au-async\""
    verdict "the async fit's submission (202, its job)" $? "$(head -c 400 "$T/body")"
    au_has ".status == 201 and .job_id == \"$AU_JOB\" and .version == 2 and
            .route == \"POST /v1/models\""
    verdict "the async fit's outcome (201, version 2, its job)" $? "$(head -c 400 "$T/body")"

    check_json "observe au v2" 200 $AU/observe '{"X":[[5.5]],"y":[-0.7]}' -H 'X-Request-Id: au-obs'
    au_get "model=au"
    au_has '.route == "POST /v1/models/{name}/observe" and .version == 2 and .status == 200 and
            .request_id == "au-obs"'
    verdict "the observe" $? "$(head -c 400 "$T/body")"

    check "PUT alias champion -> 1" 200 PUT $AU/aliases/champion \
        -H 'Content-Type: application/json' --data-binary '{"version": 1}' -H 'X-Request-Id: au-al'
    check "DELETE alias champion" 204 DELETE $AU/aliases/champion -H 'X-Request-Id: au-ald'
    au_get "model=au"
    au_has '.route == "PUT /v1/models/{name}/aliases/{alias}" and .version == 1 and
            .status == 200 and .request_id == "au-al"'
    verdict "the alias set" $? "$(head -c 400 "$T/body")"
    au_has '.route == "DELETE /v1/models/{name}/aliases/{alias}" and .status == 204 and
            .request_id == "au-ald"'
    verdict "the alias delete" $? "$(head -c 400 "$T/body")"

    req GET $AU/versions/1/export -o "$T/au.gpm"
    cp "$T/body" "$T/au.gpm" 2>/dev/null
    check "import au's v1 as au-imp" 201 POST "/v1/models/import?name=au-imp" \
        -H 'Content-Type: application/vnd.gpserve.model' --data-binary @"$T/au.gpm" \
        -H 'X-Request-Id: au-imp'
    au_get "model=au-imp"
    au_has '.route == "POST /v1/models/import" and .version == 1 and .status == 201 and
            .request_id == "au-imp"'
    verdict "the import" $? "$(head -c 400 "$T/body")"

    check "DELETE au version 1" 204 DELETE $AU/versions/1 -H 'X-Request-Id: au-dv'
    check "DELETE model au-imp" 204 DELETE /v1/models/au-imp -H 'X-Request-Id: au-dm'
    check "DELETE the ended job" 409 DELETE "/v1/jobs/$AU_JOB" -H 'X-Request-Id: au-dj'
    au_get ""
    au_has '.route == "DELETE /v1/models/{name}/versions/{v}" and .model == "au" and
            .version == 1 and .status == 204 and .request_id == "au-dv"'
    verdict "the version delete" $? "$(head -c 400 "$T/body")"
    au_has '.route == "DELETE /v1/models/{name}" and .model == "au-imp" and .status == 204 and
            .request_id == "au-dm"'
    verdict "the model delete" $? "$(head -c 400 "$T/body")"
    au_has '.route == "DELETE /v1/jobs/{id}" and .status == 409 and .code == "conflict" and
            .request_id == "au-dj"'
    verdict "the job cancel (refused: it had ended)" $? "$(head -c 400 "$T/body")"

    # ---- refused writes: their status and code, nothing else written
    check_json "a fit of an unknown method" 400 $M \
        '{"name":"au-bad","method":"nope","X":[[0]],"y":[0]}' -H 'X-Request-Id: au-bad'
    check "DELETE an unknown model" 404 DELETE /v1/models/au-none -H 'X-Request-Id: au-404'
    au_get ""
    au_has '.request_id == "au-bad" and .status == 400 and .code == "invalid_argument" and
            .route == "POST /v1/models"'
    verdict "the refused fit (400 invalid_argument)" $? "$(head -c 400 "$T/body")"
    au_has '.request_id == "au-404" and .status == 404 and .code == "not_found" and
            .model == "au-none"'
    verdict "the refused delete (404 not_found, the model named)" $? "$(head -c 400 "$T/body")"
    req GET /v1/models/au-bad
    [ "$ST" = 404 ]
    verdict "the refused fit stored nothing" $? "status $ST"
    check "GET /v1/models (a read)" 200 GET $M -H 'X-Request-Id: au-read'
    au_get ""
    ! au_has '.request_id == "au-read"'
    verdict "a read is not in the trail" $? "$(head -c 400 "$T/body")"

    # ---- paging and filters
    au_get ""
    AU_ALL=$(jqb '.entries | length')
    jhas '.next == null and ([.entries[].id] | . == (sort | reverse))'
    verdict "all $AU_ALL entries, newest first, no next page" $? "$(head -c 300 "$T/body")"
    au_get "limit=2"
    AU_NEXT=$(jqb '.next')
    AU_IDS=$(jqb '[.entries[].id] | map(tostring) | join(",")')
    jhas ".entries | length == 2"
    verdict "limit=2: two entries and a cursor ($AU_NEXT)" $? "$(head -c 300 "$T/body")"
    au_get "limit=2&before=$AU_NEXT"
    jhas "(.entries | length == 2) and all(.entries[]; .id < $AU_NEXT)"
    verdict "before=next: the two older ones" $? "$(head -c 300 "$T/body")"
    AU_SEEN=0
    AU_CUR=""
    AU_PAGES=0
    while [ $AU_PAGES -lt 100 ]; do
        au_get "limit=3${AU_CUR:+&before=$AU_CUR}"
        AU_SEEN=$((AU_SEEN + $(jqb '.entries | length')))
        AU_CUR=$(jqb '.next // empty')
        AU_PAGES=$((AU_PAGES + 1))
        [ -n "$AU_CUR" ] || break
    done
    [ "$AU_SEEN" = "$AU_ALL" ]
    verdict "paging by 3 visits every entry once ($AU_SEEN of $AU_ALL)" $? ""
    au_get "after=0&limit=1000"
    jhas "(.entries | length == $AU_ALL) and ([.entries[].id] | . == sort)"
    verdict "after=0: every entry, oldest first" $? "$(head -c 300 "$T/body")"
    au_get "model=au-imp"
    jhas '(.entries | length) == 2 and all(.entries[]; .model == "au-imp")'
    verdict "model= filters (au-imp: its import and its delete)" $? "$(head -c 300 "$T/body")"
    au_get "key=someone"
    jhas '.entries == [] and .next == null'
    verdict "key= filters (no key has a name yet: none)" $? "$(head -c 300 "$T/body")"
    au_get "since=2999-01-01T00:00:00Z"
    jhas '.entries == []'
    verdict "since= in the future: none" $? "$(head -c 300 "$T/body")"
    au_get "since=2000-01-01T02:00:00%2B02:00"
    jhas ".entries | length == $AU_ALL"
    verdict "since= with an offset, in the past: all" $? "$(head -c 300 "$T/body")"
    for bad in "limit=0:limit" "limit=1001:limit" "limit=x:limit" "before=0:before" \
        "since=yesterday:since" "before=5&after=2:after" "colour=red:colour"; do
        q=${bad%:*}
        f=${bad##*:}
        check "GET /v1/audit?$q" 400 GET "/v1/audit?$q"
        [ "$(jstr field)" = "$f" ]
        verdict "  ... names the field $f" $? "$(head -c 200 "$T/body")"
    done

    # ---- kill -9 right after acknowledged writes: every one is in the trail
    : >"$T/au.acked"
    i=0
    while [ $i -lt 20 ]; do
        jpost $AU/observe "{\"X\":[[6.$i]],\"y\":[0.$i]}" -H "X-Request-Id: au-k$i"
        [ "$ST" = 200 ] && echo "au-k$i" >>"$T/au.acked"
        req PUT $AU/aliases/a$i -H 'Content-Type: application/json' \
            --data-binary '{"version": 2}' -H "X-Request-Id: au-p$i"
        [ "$ST" = 200 ] && echo "au-p$i" >>"$T/au.acked"
        i=$((i + 1))
    done
    kill -KILL "$AU_PID" 2>/dev/null
    wait "$AU_PID" 2>/dev/null
    if start_daemon "$T/audit2.log" --db "$AUDB"; then
        PORT=$DPORT
        AU_PID=$DPID
        au_get "after=0&limit=1000"
        missing=0
        while read -r rid; do
            jhas "any(.entries[]; .request_id == \"$rid\")" || missing=$((missing + 1))
        done <"$T/au.acked"
        [ "$missing" = 0 ] && [ "$(count_lines <"$T/au.acked")" = 40 ]
        verdict "after SIGKILL: all $(count_lines <"$T/au.acked") acknowledged writes are in the trail" $? \
            "$missing missing"
        stop_daemon "$AU_PID"
    else
        fail "restart after SIGKILL" "see $T/audit2.log"
    fi

    # ---- retention: entries older than --audit-retention-days go
    if [ -z "$DB_URL" ] && command -v sqlite3 >/dev/null 2>&1; then
        sqlite3 "$AUDB" "UPDATE audit SET at = '2000-01-01T00:00:00Z' WHERE request_id LIKE 'au-k%'"
        if start_daemon "$T/audit3.log" --db "$AUDB" --audit-retention-days 30; then
            PORT=$DPORT
            i=0
            while [ $i -lt 50 ]; do
                au_get "after=0&limit=1000"
                jhas 'any(.entries[]; .request_id | startswith("au-k")) | not' && break
                sleep 0.2
                i=$((i + 1))
            done
            jhas '(any(.entries[]; .request_id | startswith("au-k")) | not) and
                  any(.entries[]; .request_id == "au-p0")'
            verdict "entries past --audit-retention-days are pruned, the others kept" $? \
                "$(head -c 300 "$T/body")"
            stop_daemon "$DPID"
        else
            fail "a daemon with --audit-retention-days" "see $T/audit3.log"
        fi
    else
        note "retention check skipped (PostgreSQL run, or no sqlite3 shell)"
    fi
else
    fail "a daemon on the audit database" "see $T/audit.log"
fi
PORT=$AU_MAIN_PORT
