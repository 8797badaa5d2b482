#!/bin/sh
# Integration area "model_file": the portable model file
# (docs/design/model-file.md). A version exported from the main daemon is
# imported into a second daemon on a fresh database (and, where a PostgreSQL
# 15 cluster can be started with tests/support/pgtmp.sh, into a daemon on
# PostgreSQL, and from there back into SQLite): predictions and samples are
# byte-identical. Damaged files are refused with 422 naming the field, and
# nothing is stored.
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).

section "model file: export, import elsewhere, identical answers"
MF_MAIN_PORT=$PORT
MF_PRED="{\"X\":$SINE_X,\"quantiles\":[0.1,0.9],\"full_covariance\":true}"
MF_SAMP="{\"X\":$SINE_X,\"n_samples\":3,\"seed\":99}"
need_sine

# mf_reference NAME: the predict and sample bodies of model NAME (on $PORT)
# into $T/mf_pred_NAME.json and $T/mf_samp_NAME.json, without its name and version.
mf_answers() {
    jpost "/v1/models/$1/predict" "$MF_PRED"
    jq -S 'del(.name, .version)' "$T/body" >"$T/mf_pred_$2.json"
    jpost "/v1/models/$1/sample" "$MF_SAMP"
    jq -S 'del(.name, .version)' "$T/body" >"$T/mf_samp_$2.json"
}
# mf_same LABEL A B: the answers saved as A and B are identical.
mf_same() {
    cmp -s "$T/mf_pred_$2.json" "$T/mf_pred_$3.json"
    verdict "$1: predict body identical" $? "bodies differ"
    cmp -s "$T/mf_samp_$2.json" "$T/mf_samp_$3.json"
    verdict "$1: sample body identical" $? "bodies differ"
}
mf_answers sine ref

check "export sine version 1" 200 GET /v1/models/sine/versions/1/export
cp "$T/body" "$T/mf_sine.json"
jhas '.format == "gpserve-model" and .format_version == 1 and .method == "exact" and (.arrays | length > 0) and (.sha256 | length == 64)'
verdict "the file names its format, method, arrays and checksum" $? "$(head -c 200 "$T/body")"
header Content-Disposition | grep -q 'sine-v1.gpmodel.json'
verdict "the export is named as an attachment" $? "$(header Content-Disposition)"
check "export of an unknown version" 404 GET /v1/models/sine/versions/999/export

# ---- refusals on the main daemon: 422 naming the field, nothing stored
mf_refused() { # LABEL FIELD FILE
    req POST "/v1/models/import?name=mf_bad" -H 'Content-Type: application/json' --data-binary "@$3"
    [ "$ST" = 422 ] && [ "$(jqb .error.field)" = "$2" ]
    verdict "import of $1 is 422 naming $2" $? "status $ST $(head -c 300 "$T/body")"
}
MF_LEN=$(wc -c <"$T/mf_sine.json")
head -c $((MF_LEN / 2)) "$T/mf_sine.json" >"$T/mf_trunc.json"
mf_refused "a truncated file" body "$T/mf_trunc.json"
# a byte of the first array's base64 changed (A <-> B): still JSON, checksum fails
python3 - "$T/mf_sine.json" "$T/mf_flip.json" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
i = b.index(b'"data":"') + 12
b[i] = ord('B') if b[i] != ord('B') else ord('A')
open(sys.argv[2], 'wb').write(b)
EOF
mf_refused "a file with a flipped byte" sha256 "$T/mf_flip.json"
# an edited option with the old checksum
sed 's/"format_version":1,"method":"exact"/"format_version":1,"method":"sgpr"/' "$T/mf_sine.json" >"$T/mf_tamper.json"
mf_refused "a tampered file (checksum mismatch)" sha256 "$T/mf_tamper.json"
# a newer format, its checksum made right
python3 - "$T/mf_sine.json" "$T/mf_new.json" "$T/mf_nomethod.json" <<'EOF'
import sys, hashlib
def seal(b, out):
    i = b.rindex(b',"sha256":"')
    h = hashlib.sha256(b[:i] + b'}').hexdigest().encode()
    open(out, 'wb').write(b[:i] + b',"sha256":"' + h + b'"}\n')
b = open(sys.argv[1], 'rb').read()
seal(b.replace(b'"format_version":1,', b'"format_version":2,', 1), sys.argv[2])
seal(b.replace(b'"method":"exact"', b'"method":"no_such_method"', 1), sys.argv[3])
EOF
mf_refused "a newer-format file" format_version "$T/mf_new.json"
mf_refused "a file of a method this build lacks" method "$T/mf_nomethod.json"
check "nothing was stored by the refused imports" 404 GET /v1/models/mf_bad
req POST "/v1/models/import?name=bad%20name" -H 'Content-Type: application/json' --data-binary "@$T/mf_sine.json"
[ "$ST" = 400 ] && [ "$(jqb .error.field)" = name ]
verdict "import under a bad name is 400 naming name" $? "status $ST"

# ---- an online model: exported with its observations applied
MF_EK='"kernel":{"type":"rbf","variance":1.3,"lengthscale":[0.7],"fixed":true},"noise":{"variance":0.01,"fixed":true},"standardize":false'
req DELETE /v1/models/mf_online
check_json "fit mf_online (exact, 6 rows)" 201 $M \
    "{\"name\":\"mf_online\",\"method\":\"exact\",$MF_EK,\"X\":[0,0.5,1,1.5,2,2.5],\"y\":[0.1,0.5,0.8,1.0,0.9,0.6]}"
check_json "observe 2 rows into mf_online" 200 "$M/mf_online/observe" '{"X":[3,3.5],"y":[0.1,-0.3]}'
check "export the observed mf_online" 200 GET /v1/models/mf_online/versions/1/export
cp "$T/body" "$T/mf_online.json"
jhas '.observations.seq == 1 and .n_train == 8'
verdict "the file records the log position (seq 1) and the 8 rows held" $? "$(jqb '{observations, n_train}')"
req POST "/v1/models/import?name=mf_online_copy" -H 'Content-Type: application/json' --data-binary "@$T/mf_online.json"
[ "$ST" = 201 ] && [ "$(jqb .n_train)" = 8 ]
verdict "import of the observed model: 201 holding 8 rows" $? "status $ST $(head -c 300 "$T/body")"
MF_Q='{"X":[0.25,1.75,3.2,5.0],"full_covariance":true}'
jpost /v1/models/mf_online/predict "$MF_Q"
jq -S 'del(.name, .version)' "$T/body" >"$T/mf_on_a.json"
jpost /v1/models/mf_online_copy/predict "$MF_Q"
jq -S 'del(.name, .version)' "$T/body" >"$T/mf_on_b.json"
cmp -s "$T/mf_on_a.json" "$T/mf_on_b.json"
verdict "the imported copy predicts as the observed model, byte for byte" $? "bodies differ"
req DELETE /v1/models/mf_online
req DELETE /v1/models/mf_online_copy

# ---- a second daemon on a fresh SQLite database
# mf_import_into LABEL DB FILE: start a daemon on DB, import FILE as mf_copy,
# compare its answers with the reference; leaves the daemon running on $PORT
# (MF_PID) and its export in $T/mf_export_LABEL.json.
mf_import_into() {
    if ! start_daemon "$T/mf_$1.log" --db "$2" --max-body-mb 256; then
        fail "$1: daemon starts"
        return 1
    fi
    MF_PID=$DPID
    PORT=$DPORT
    req POST /v1/models/import?name=mf_copy -H 'Content-Type: application/json' --data-binary "@$3"
    [ "$ST" = 201 ] && [ "$(jqb .name)" = mf_copy ] && [ "$(jqb .version)" = 1 ] && [ "$(jqb .method)" = exact ]
    verdict "$1: import stores version 1 of mf_copy" $? "status $ST $(head -c 300 "$T/body")"
    header Location | grep -q '/v1/models/mf_copy/versions/1'
    verdict "$1: the import answers its Location" $? "$(header Location)"
    mf_answers mf_copy "$1"
    mf_same "$1" ref "$1"
    check "$1: export of the imported version" 200 GET /v1/models/mf_copy/versions/1/export
    cp "$T/body" "$T/mf_export_$1.json"
    return 0
}
mf_stop() {
    stop_daemon "$MF_PID"
    PORT=$MF_MAIN_PORT
}

if mf_import_into sqlite "$T/mf_fresh.db" "$T/mf_sine.json"; then
    # the same daemon restarted answers the same from its store
    mf_stop
    if start_daemon "$T/mf_sqlite2.log" --db "$T/mf_fresh.db"; then
        MF_PID=$DPID
        PORT=$DPORT
        mf_answers mf_copy sqlite_restart
        mf_same "imported model after a restart" ref sqlite_restart
    fi
    mf_stop
fi

# ---- PostgreSQL and back, where a cluster can be started
MF_PG=$ROOT/tests/support/pgtmp.sh
MF_PGDB=""
if [ -f "$MF_PG" ]; then
    MF_PGDIR=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-pg.XXXXXX") && chmod 755 "$MF_PGDIR"
    MF_PGDB=$(sh "$MF_PG" start "$MF_PGDIR/pg" 2>"$T/mf_pg.err") || MF_PGDB=""
    CLEANUP_CMDS="$CLEANUP_CMDS sh '$MF_PG' stop '$MF_PGDIR/pg' >/dev/null 2>&1; rm -rf '$MF_PGDIR';"
fi
if [ -n "$MF_PGDB" ]; then
    if mf_import_into postgres "$MF_PGDB" "$T/mf_sine.json"; then
        mf_stop
        mf_import_into pg_back "$T/mf_back.db" "$T/mf_export_postgres.json" && mf_stop
    fi
    sh "$MF_PG" stop "$MF_PGDIR/pg" >/dev/null 2>&1
else
    note "model_file: no PostgreSQL cluster could be started ($(tail -n 1 "$T/mf_pg.err" 2>/dev/null)): SQLite only"
fi
PORT=$MF_MAIN_PORT
