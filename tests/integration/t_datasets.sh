#!/bin/sh
# Integration area "datasets": data sets as resources (docs/design/api.md,
# "Data sets"). PUT /v1/datasets/{name} of CSV and JSON lines bodies sent in
# pieces (chunked, rate-limited) and larger than --max-body-mb (the main
# daemon runs with 1 MiB), the answer's rows, columns, statistics and
# SHA-256, GET, the list, a replace, DELETE; a dropped connection
# mid-upload and a daemon killed mid-upload (then restarted) leave nothing
# visible and no parts; the quota (507); each bad input refused naming the
# row and column, with nothing stored; a fit naming a data set, its
# refusals, and, when a method of this build streams its rows, a fit over a
# data set, what its version records, and the 409 of a DELETE while an async
# job names the data set. Runs on PostgreSQL too when GPSERVE_TEST_DB_URL is
# set (lib.sh, db_for).
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "datasets"
DS=/v1/datasets

# ds_sql DB QUERY: one value read behind the daemon's back (sqlite3 or psql).
ds_sql() {
    if [ -n "$DB_URL" ]; then
        psql "$1" -qAt -c "$2" 2>/dev/null
    else
        sqlite3 "$1" "$2" 2>/dev/null
    fi
}
DS_CAN_SQL=1
if [ -z "$DB_URL" ] && ! command -v sqlite3 >/dev/null 2>&1; then
    DS_CAN_SQL=0
    note "no sqlite3 shell: the checks of the tables behind the API are skipped (make deps)"
fi
# ds_left DB NAME: the rows of any state and the parts a data set NAME has in DB.
ds_left() {
    ds_sql "$1" "SELECT (SELECT count(*) FROM datasets WHERE name = '$2') + (SELECT count(*)
        FROM dataset_parts WHERE dataset_id IN (SELECT id FROM datasets WHERE name = '$2'))"
}
# ds_wait_left DB NAME N: wait (bounded) until ds_left is N.
ds_wait_left() {
    _i=0
    while [ $_i -lt $((50 * SLOW)) ]; do
        [ "$(ds_left "$1" "$2")" = "$3" ] && return 0
        sleep 0.1
        _i=$((_i + 1))
    done
    return 1
}

# 30000 rows x 3 inputs and y (1.7 MB of CSV, above --max-body-mb 1).
{
    echo "x1,x2,x3,y"
    gen_xy 30000 3 7
} >"$T/ds.csv"
DS_BYTES=$(wc -c <"$T/ds.csv" | tr -d ' ')
DS_SHA=$(sha256sum "$T/ds.csv" | cut -d' ' -f1)
req DELETE $DS/dsa

check "PUT a CSV of 30000 rows, chunked, past --max-body-mb" 201 PUT $DS/dsa \
    -H 'Content-Type: text/csv' -H 'Transfer-Encoding: chunked' --data-binary @"$T/ds.csv"
jhas '.name == "dsa" and .rows == 30000 and ([.columns[].name] == ["x1","x2","x3","y"])
      and all(.columns[]; .count == 30000 and .min <= .mean and .mean <= .max and .sd > 0)
      and .bytes == 30000 * 4 * 8'
verdict "the answer: rows, columns with their statistics, bytes stored" $? "$(head -c 300 "$T/body")"
[ "$(jqb .sha256)" = "$DS_SHA" ] && [ "$(jqb .bytes_received)" = "$DS_BYTES" ]
verdict "sha256 and bytes_received are the file's" $? "$(jqb .sha256) $(jqb .bytes_received)"
[ "$(header Location)" = "$DS/dsa" ]
verdict "Location names the data set" $? "$(header Location)"
# the column statistics against awk's over the file
awk -F, 'NR > 1 { s += $4; if (NR == 2 || $4 < mn) mn = $4; if (NR == 2 || $4 > mx) mx = $4 }
    END { printf "%.6f %.6f %.6f\n", s / (NR - 1), mn, mx }' "$T/ds.csv" >"$T/ds_awk"
jqb '.columns[3] | "\(.mean * 1000000 | round / 1000000) \(.min) \(.max)"' >"$T/ds_api"
awk 'NR == FNR { m = $1; a = $2; b = $3; next } { d = $1 - m; if (d < 0) d = -d;
    exit !(d < 2e-6 && $2 + 0 == a + 0 && $3 + 0 == b + 0) }' "$T/ds_awk" "$T/ds_api"
verdict "y's mean, min and max are the file's" $? "api $(cat "$T/ds_api"), awk $(cat "$T/ds_awk")"
DSA_ID=$(jqb .id)

check "GET the data set" 200 GET $DS/dsa
jhas ".id == $DSA_ID and .rows == 30000 and .sha256 == \"$DS_SHA\" and .created_by == null and
      (.created_at | test(\"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$\"))"
verdict "GET shows what the upload answered" $? "$(head -c 300 "$T/body")"
check "GET the list" 200 GET $DS
jhas "any(.datasets[]; .name == \"dsa\" and .columns == [\"x1\",\"x2\",\"x3\",\"y\"] and .rows == 30000)"
verdict "the list names it with its columns" $? "$(head -c 300 "$T/body")"

# JSON lines, sent slowly in pieces; it replaces the CSV one (200, a new id)
head -n 301 "$T/ds.csv" | awk -F, 'NR > 1 { printf "{\"x1\": %s, \"x2\": %s, \"x3\": %s, \"y\": %s}\n", $1, $2, $3, $4 }' >"$T/ds.ndjson"
check "PUT JSON lines replacing it, at 8 KB/s" 200 PUT $DS/dsa --limit-rate 8k \
    -H 'Content-Type: application/x-ndjson' --data-binary @"$T/ds.ndjson"
jhas ".rows == 300 and .id != $DSA_ID and ([.columns[].name] == [\"x1\",\"x2\",\"x3\",\"y\"])"
verdict "the replace has the new rows under a new id" $? "$(head -c 300 "$T/body")"
if [ "$DS_CAN_SQL" = 1 ]; then
    [ "$(ds_sql "$MAIN_DB" "SELECT count(*) FROM dataset_parts WHERE dataset_id = $DSA_ID")" = 0 ]
    verdict "the replaced data set's parts are gone" $? "parts left"
fi

# ---- a dropped connection mid-upload leaves nothing
{
    echo "x1,x2,x3,y"
    gen_xy 200000 3 9
} >"$T/ds_big.csv"
curl -sS --max-time "$MT" -o /dev/null -X PUT -H 'Content-Type: text/csv' --limit-rate 400k \
    --data-binary @"$T/ds_big.csv" "http://127.0.0.1:$PORT$DS/dsdrop" 2>/dev/null &
DS_CURL=$!
if [ "$DS_CAN_SQL" = 1 ]; then
    _i=0
    while [ $_i -lt $((100 * SLOW)) ]; do
        _p=$(ds_sql "$MAIN_DB" "SELECT count(*) FROM dataset_parts WHERE dataset_id IN
            (SELECT id FROM datasets WHERE name = 'dsdrop' AND state = 'uploading')")
        [ "${_p:-0}" -ge 2 ] && break
        sleep 0.1
        _i=$((_i + 1))
    done
    [ "${_p:-0}" -ge 2 ]
    verdict "parts are stored while the body arrives" $? "${_p:-0} parts"
else
    sleep 2
fi
check "the upload is not visible while it runs" 404 GET $DS/dsdrop
kill "$DS_CURL" 2>/dev/null
wait "$DS_CURL" 2>/dev/null
if [ "$DS_CAN_SQL" = 1 ]; then
    ds_wait_left "$MAIN_DB" dsdrop 0
    verdict "the dropped upload leaves no row and no part" $? "$(ds_left "$MAIN_DB" dsdrop) left"
fi
check "GET after the dropped upload" 404 GET $DS/dsdrop

# ---- bad input: refused naming the row and the column, nothing stored
ds_bad() { # NAME STATUS CODE FIELD BODY [TYPE]
    check_err "$1" "$2" "$3" "$4" PUT $DS/dsbad -H "Content-Type: ${6:-text/csv}" \
        --data-binary "$5"
}
ds_bad "a ragged row" 422 invalid_data '^rows\[2\]$' "$(printf 'a,b,y\n1,2,3\n4,5,6\n7,8\n')"
jstr message | grep -q 'row 3 (line 4): 2 cells; the header has 3 columns'
verdict "its message counts the row and its cells" $? "$(jstr message)"
ds_bad "a cell that is not a number" 422 invalid_data '^rows\[1\]\.b$' \
    "$(printf 'a,b,y\n1,2,3\n4,five,6\n')"
jstr message | grep -q "row 2 (line 3), column 'b': 'five' is not a number"
verdict "its message names the row, the column and the cell" $? "$(jstr message)"
ds_bad "a cell that is not finite" 422 invalid_data '^rows\[0\]\.y$' "$(printf 'a,y\n1,1e400\n')"
ds_bad "nan" 422 invalid_data '^rows\[0\]\.a$' "$(printf 'a,y\nnan,1\n')"
ds_bad "an empty body" 422 invalid_data '^body$' ""
ds_bad "a header without rows" 422 invalid_data '^body$' "$(printf 'a,y\n')"
ds_bad "a repeated column name" 422 invalid_data '^columns\[2\]$' "$(printf 'a,y,a\n1,2,3\n')"
ds_bad "an empty column name" 422 invalid_data '^columns\[1\]$' "$(printf 'a,,y\n1,2,3\n')"
ds_bad "a JSON line without a column" 422 invalid_data '^rows\[1\]$' \
    "$(printf '{"a":1,"y":2}\n{"a":3}\n')" application/x-ndjson
ds_bad "a JSON line with a string" 422 invalid_data '^rows\[0\]\.y$' \
    "$(printf '{"a":1,"y":"2"}\n')" application/x-ndjson
ds_bad "a Content-Type that is not CSV or JSON lines" 415 unsupported_media_type none \
    "$(printf 'a,y\n1,2\n')" application/json
check_err "a bad data set name" 400 invalid_argument '^name$' PUT "$DS/bad%20name" \
    -H 'Content-Type: text/csv' --data-binary "$(printf 'a,y\n1,2\n')"
# a bad row far into a body of many parts: what was stored goes too
{
    cat "$T/ds.csv"
    echo "1,2,x,4"
} >"$T/ds_tail.csv"
ds_bad "a bad row after 30000 good ones" 422 invalid_data '^rows\[30000\]\.x3$' @"$T/ds_tail.csv"
check "nothing of the refused uploads is visible" 404 GET $DS/dsbad
if [ "$DS_CAN_SQL" = 1 ]; then
    ds_wait_left "$MAIN_DB" dsbad 0
    verdict "the refused uploads left no row and no part" $? "$(ds_left "$MAIN_DB" dsbad) left"
fi

# ---- a fit names a data set
check_jerr "a fit naming no such data set" 404 not_found '^data\.dataset$' /v1/models \
    '{"name":"dsfit","method":"sgpr","data":{"dataset":"nothing","target":"y"}}'
check_jerr "a fit naming a column that is not there" 422 invalid_data '^data\.columns\[1\]$' \
    /v1/models '{"name":"dsfit","method":"sgpr","data":{"dataset":"dsa","target":"y","columns":["x1","q"]}}'
jstr message | grep -q 'its columns: x1, x2, x3, y'
verdict "the message lists the columns there are" $? "$(jstr message)"
check_jerr "a fit naming a target that is not there" 422 invalid_data '^data\.target$' \
    /v1/models '{"name":"dsfit","method":"sgpr","data":{"dataset":"dsa","target":"z"}}'
check_jerr "X and y beside data" 400 invalid_argument '^data$' /v1/models \
    '{"name":"dsfit","X":[[1]],"y":[1],"data":{"dataset":"dsa","target":"y"}}'
check_jerr "exact needs its rows in memory" 422 unsupported '^data\.dataset$' /v1/models \
    '{"name":"dsfit","method":"exact","data":{"dataset":"dsa","target":"y"}}'
check_jerr "an async fit of exact too: no job" 422 unsupported '^data\.dataset$' /v1/models \
    '{"name":"dsfit","method":"exact","async":true,"data":{"dataset":"dsa","target":"y"}}'
# the methods that stream (none until ssgp, sgpr and svgp do)
jpost /v1/models '{"name":"dsfit","method":"sgpr","seed":1,"options":{"inducing":16},"data":{"dataset":"dsa","target":"y","columns":["x1","x2"],"rows":{"sample":200,"seed":4}}}'
if [ "$ST" = 422 ] && jhas '.error.field == "data.dataset" and .error.code == "unsupported"'; then
    note "no method of this build streams its rows: the fits over a data set are skipped"
else
    [ "$ST" = 201 ] && jhas '.dataset.name == "dsa" and .dataset.rows == 200 and
        .dataset.sample == {"sample": 200, "seed": 4} and .dataset.target == "y" and
        .dataset.columns == ["x1", "x2"] and .n_train == 200 and .input_dim == 2 and
        (.dataset.sha256 | length) == 64'
    verdict "an sgpr fit over 200 sampled rows records its data set" $? "status $ST"
    check "GET the model" 200 GET /v1/models/dsfit
    jhas '.dataset.name == "dsa" and .dataset.id > 0'
    verdict "GET model shows the data set it was fitted on" $? "$(head -c 300 "$T/body")"
    # an async job naming the data set holds it: DELETE 409 naming the job
    jpost /v1/models '{"name":"dsjob","method":"sgpr","async":true,"options":{"inducing":64,"max_iterations":100000,"tolerance":1e-15},"data":{"dataset":"dsa","target":"y"}}'
    DS_JOB=$(jqb .job)
    [ "$ST" = 202 ] && [ -n "$DS_JOB" ]
    verdict "an async fit over the data set is accepted" $? "status $ST"
    check_err "DELETE while the job names it" 409 conflict '^name$' DELETE $DS/dsa
    jstr message | grep -q "$DS_JOB"
    verdict "the 409 names the job" $? "$(jstr message)"
    check_err "a replace while the job names it" 409 conflict '^name$' PUT $DS/dsa \
        -H 'Content-Type: text/csv' --data-binary "$(printf 'x1,x2,x3,y\n1,2,3,4\n')"
    req DELETE "/v1/jobs/$DS_JOB"
    wait_job "$DS_JOB" cancelled failed succeeded
    verdict "the job ends" $? "status $JOB_STATUS"
    req DELETE /v1/models/dsfit
    req DELETE /v1/models/dsjob
fi

check "DELETE the data set" 204 DELETE $DS/dsa
check "GET after DELETE" 404 GET $DS/dsa
check_err "DELETE again" 404 not_found '^name$' DELETE $DS/dsa
if [ "$DS_CAN_SQL" = 1 ]; then
    [ "$(ds_left "$MAIN_DB" dsa)" = 0 ]
    verdict "its rows and parts are gone" $? "$(ds_left "$MAIN_DB" dsa) left"
fi

# ---- the quota, and a daemon killed mid-upload, on a daemon of their own
DS_MAIN_PORT=$PORT
if DS_DB=$(db_for datasets) && start_daemon "$T/datasets_quota.log" --db "$DS_DB" --dataset-quota-mb 1; then
    DS_PID=$DPID
    PORT=$DPORT
    check_err "an upload past --dataset-quota-mb 1" 507 insufficient_storage '^dataset$' PUT \
        $DS/dsq -H 'Content-Type: text/csv' --data-binary @"$T/ds_big.csv"
    jstr message | grep -q -- '--dataset-quota-mb'
    verdict "the 507 names the quota's flag" $? "$(jstr message)"
    [ -n "$(header Retry-After)" ]
    verdict "with Retry-After" $? "no Retry-After"
    check "nothing of it is visible" 404 GET $DS/dsq
    if [ "$DS_CAN_SQL" = 1 ]; then
        ds_wait_left "$DS_DB" dsq 0
        verdict "the refused upload left no row and no part" $? "$(ds_left "$DS_DB" dsq) left"
    fi
    head -n 1001 "$T/ds.csv" >"$T/ds_small.csv"
    check "an upload within the quota" 201 PUT $DS/dsq -H 'Content-Type: text/csv' \
        --data-binary @"$T/ds_small.csv"
    # killed mid-upload: the upload stays behind its back, then the restarted
    # daemon's first prune removes it once it is older than the bound
    curl -sS --max-time "$MT" -o /dev/null -X PUT -H 'Content-Type: text/csv' --limit-rate 200k \
        --data-binary @"$T/ds.csv" "http://127.0.0.1:$PORT$DS/dskill" 2>/dev/null &
    DS_CURL=$!
    if [ "$DS_CAN_SQL" = 1 ]; then
        _i=0
        while [ $_i -lt $((100 * SLOW)) ] && [ "$(ds_sql "$DS_DB" "SELECT count(*) FROM
            dataset_parts WHERE dataset_id IN (SELECT id FROM datasets WHERE name = 'dskill'
            AND state = 'uploading')")" = 0 ]; do
            sleep 0.1
            _i=$((_i + 1))
        done
        kill -KILL "$DS_PID" 2>/dev/null
        wait "$DS_PID" 2>/dev/null
        kill "$DS_CURL" 2>/dev/null
        wait "$DS_CURL" 2>/dev/null
        [ "$(ds_sql "$DS_DB" "SELECT state FROM datasets WHERE name = 'dskill'")" = uploading ]
        verdict "a daemon killed mid-upload leaves its upload behind" $? "no upload row"
        ds_sql "$DS_DB" "UPDATE datasets SET touched_at = 1000 WHERE name = 'dskill'" >/dev/null
        if start_daemon "$T/datasets2.log" --db "$DS_DB"; then
            PORT=$DPORT
            check "the restarted daemon does not show it" 404 GET $DS/dskill
            ds_wait_left "$DS_DB" dskill 0
            verdict "its first prune removes the abandoned upload and its parts" $? \
                "$(ds_left "$DS_DB" dskill) left"
            check "the finished data set stays" 200 GET $DS/dsq
            stop_daemon "$DPID"
        else
            fail "restart the datasets daemon" "it did not start"
        fi
    else
        kill "$DS_CURL" 2>/dev/null
        stop_daemon "$DS_PID"
    fi
else
    fail "start a daemon with --dataset-quota-mb 1" "it did not start"
fi
PORT=$DS_MAIN_PORT

# ---- replicas share data sets: two daemons on one database (SQLite file, or
# the PostgreSQL schema under GPSERVE_TEST_DB_URL): what one stores the other
# lists, reads and fits; a delete through one is seen by the other
check "PUT a data set through the main daemon (for a replica)" 201 PUT $DS/dsrep \
    -H 'Content-Type: text/csv' --data-binary @"$T/ds.csv"
if start_daemon "$T/datasets_replica.log" --db "$MAIN_DB"; then
    DS_REP_PID=$DPID
    PORT=$DPORT
    check "the replica lists it" 200 GET $DS
    jhas 'any(.datasets[]?; .name == "dsrep")' || jhas 'any(.[]?; .name? == "dsrep")'
    verdict "the replica's list names the main daemon's data set" $? "$(head -c 300 "$T/body")"
    check "the replica describes it" 200 GET $DS/dsrep
    jhas ".sha256 == \"$DS_SHA\" and .rows == 30000"
    verdict "the replica sees its rows and checksum" $? "$(head -c 300 "$T/body")"
    check "the replica fits over it (sgpr, 500 sampled rows)" 201 POST /v1/models \
        -H 'Content-Type: application/json' -d '{"name":"dsrep_fit","method":"sgpr","seed":2,
        "options":{"inducing":8,"max_iterations":5},
        "data":{"dataset":"dsrep","target":"y","rows":{"sample":500,"seed":1}}}'
    check "DELETE through the replica" 204 DELETE $DS/dsrep
    stop_daemon "$DS_REP_PID"
    PORT=$DS_MAIN_PORT
    check "the main daemon no longer has it" 404 GET $DS/dsrep
else
    fail "start a replica on the main database" "it did not start"
fi
PORT=$DS_MAIN_PORT
