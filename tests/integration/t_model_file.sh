#!/bin/sh
# Integration area "model_file": the portable model file
# (docs/design/model-file.md). A version exported from the main daemon is
# imported into a second daemon on a fresh database (and, where a PostgreSQL
# 15 cluster can be started with tests/support/pgtmp.sh, into a daemon on
# PostgreSQL, and from there back into SQLite): predictions and samples are
# byte-identical. Damaged files are refused with 422 naming the field, and
# nothing is stored. An independent reader (model_file_reader.py: numpy,
# hashlib, json) verifies the checksum and reproduces the predictive mean.
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
cp "$T/body" "$T/mf_sine.gpmodel"
header Content-Type | grep -q 'application/vnd.gpserve.model'
verdict "the export is application/vnd.gpserve.model" $? "$(header Content-Type)"
header Content-Disposition | grep -q 'sine-v1.gpmodel'
verdict "the export is named as an attachment" $? "$(header Content-Disposition)"
check "export of an unknown version" 404 GET /v1/models/sine/versions/999/export
check "alias stable -> sine version 1" 200 PUT /v1/models/sine/aliases/stable \
    -H 'Content-Type: application/json' -d '{"version":1}'
check "export through the alias" 200 GET /v1/models/sine/versions/stable/export
cmp -s "$T/body" "$T/mf_sine.gpmodel"
verdict "the export through an alias is the version's file, byte for byte" $? "files differ"
check "export through an unknown alias" 404 GET /v1/models/sine/versions/nosuch/export
req DELETE /v1/models/sine/aliases/stable

# ---- an independent reader: checksum, arrays, and the predictive mean
jpost /v1/models/sine/predict "{\"X\":$SINE_X}"
MF_MEAN=$(jq -c .mean "$T/body")
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    /usr/bin/python3 "$ROOT/tests/integration/model_file_reader.py" "$T/mf_sine.gpmodel" "$SINE_X" "$MF_MEAN" >"$T/mf_reader.out" 2>&1
    verdict "an independent reader (numpy, hashlib, json) verifies the file and reproduces the mean" $? "$(cat "$T/mf_reader.out")"
    sed 's/^/note: /' "$T/mf_reader.out"
else
    note "model_file: /usr/bin/python3 has no numpy (Debian python3-numpy): the independent reader is skipped"
fi

# ---- refusals on the main daemon: 422 naming the field, nothing stored
mf_refused() { # LABEL FIELD FILE
    req POST "/v1/models/import?name=mf_bad" -H 'Content-Type: application/vnd.gpserve.model' --data-binary "@$3"
    [ "$ST" = 422 ] && [ "$(jqb .error.field)" = "$2" ]
    verdict "import of $1 is 422 naming $2" $? "status $ST $(head -c 300 "$T/body")"
}
# mf_edit OUT PYTHON: the exported file as b (bytes), its header as h (a
# dict: __metadata__ and the arrays) and the bytes after it as d; PYTHON
# edits them and calls seal(h, d) (OUT with its checksum made right) or
# write(bytes) (OUT as is).
mf_edit() {
    /usr/bin/python3 - "$T/mf_sine.gpmodel" "$1" "$2" <<'EOF'
import hashlib, json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
d = b[8 + n:]
def write(x):
    open(sys.argv[2], "wb").write(x)
def seal(h, d):
    h["__metadata__"]["sha256"] = "0" * 64
    t = json.dumps(h, separators=(",", ":")).encode()
    f = struct.pack("<Q", len(t)) + t + d
    i = 8 + t.index(b'"sha256":"' + b"0" * 64) + 10
    write(f[:i] + hashlib.sha256(f).hexdigest().encode() + f[i + 64:])
exec(sys.argv[3])
EOF
}
MF_LEN=$(wc -c <"$T/mf_sine.gpmodel")
head -c $((MF_LEN / 2)) "$T/mf_sine.gpmodel" >"$T/mf_trunc.gpmodel"
mf_refused "a truncated file" body "$T/mf_trunc.gpmodel"
mf_edit "$T/mf_flip.gpmodel" 'x = bytearray(b); x[-20] ^= 0x10; write(bytes(x))'
mf_refused "a file with a flipped byte" sha256 "$T/mf_flip.gpmodel"
mf_edit "$T/mf_tamper.gpmodel" 'write(b.replace(b"\\\"standardize\\\":true", b"\\\"standardize\\\":null", 1))'
mf_refused "a tampered file (checksum mismatch)" sha256 "$T/mf_tamper.gpmodel"
mf_edit "$T/mf_new.gpmodel" 'h["__metadata__"]["format_version"] = "2"; seal(h, d)'
mf_refused "a newer-format file" format_version "$T/mf_new.gpmodel"
mf_edit "$T/mf_nomethod.gpmodel" 'm = json.loads(h["__metadata__"]["model"]); m["method"] = "no_such_method"; h["__metadata__"]["model"] = json.dumps(m); seal(h, d)'
mf_refused "a file of a method this build lacks" method "$T/mf_nomethod.gpmodel"
mf_edit "$T/mf_short.gpmodel" 'h["alpha"]["shape"][1] += 1; seal(h, d)'
mf_refused "a file whose array is short of its shape" alpha.data_offsets "$T/mf_short.gpmodel"
mf_edit "$T/mf_overlap.gpmodel" 'o = h["alpha"]["data_offsets"]; o[0] -= 8; o[1] -= 8; seal(h, d)'
mf_refused "a file whose ranges overlap" alpha.data_offsets "$T/mf_overlap.gpmodel"
mf_edit "$T/mf_uncovered.gpmodel" 'seal(h, d + bytes(8))'
mf_refused "a file with bytes no array owns" data_offsets "$T/mf_uncovered.gpmodel"
mf_edit "$T/mf_hlen.gpmodel" 'write(struct.pack("<Q", 1 << 50) + b[8:])'
mf_refused "a file with an absurd header length" header_length "$T/mf_hlen.gpmodel"
check "nothing was stored by the refused imports" 404 GET /v1/models/mf_bad
req POST "/v1/models/import?name=bad%20name" -H 'Content-Type: application/vnd.gpserve.model' --data-binary "@$T/mf_sine.gpmodel"
[ "$ST" = 400 ] && [ "$(jqb .error.field)" = name ]
verdict "import under a bad name is 400 naming name" $? "status $ST"
req POST "/v1/models/import?name=import" -H 'Content-Type: application/octet-stream' --data-binary "@$T/mf_sine.gpmodel"
[ "$ST" = 422 ] && [ "$(jqb .error.field)" = name ]
verdict "import under the name \"import\" (a route's path) is 422 naming name" $? "status $ST $(head -c 300 "$T/body")"
req POST /v1/models -H 'Content-Type: application/json' --data-binary '{"name":"import","X":[[0],[1]],"y":[0,1]}'
[ "$ST" = 422 ] && [ "$(jqb .error.field)" = name ]
verdict "a fit named \"import\" is 422 naming name" $? "status $ST $(head -c 300 "$T/body")"
req POST "/v1/models/import?name=mf_bad" -H 'Content-Type: application/json' --data-binary "@$T/mf_sine.gpmodel"
[ "$ST" = 415 ]
verdict "an import sent as application/json is 415" $? "status $ST"

# ---- a retried import with an Idempotency-Key stores the file once
MF_KEY="mf-import-$$"
req POST "/v1/models/import?name=mf_idem" -H 'Content-Type: application/vnd.gpserve.model' \
    -H "Idempotency-Key: $MF_KEY" --data-binary "@$T/mf_sine.gpmodel"
[ "$ST" = 201 ] && [ "$(jqb .version)" = 1 ]
verdict "an import with an Idempotency-Key: 201, version 1" $? "status $ST $(head -c 300 "$T/body")"
MF_LOC=$(header Location)
req POST "/v1/models/import?name=mf_idem" -H 'Content-Type: application/vnd.gpserve.model' \
    -H "Idempotency-Key: $MF_KEY" --data-binary "@$T/mf_sine.gpmodel"
[ "$ST" = 201 ] && [ "$(jqb .version)" = 1 ] && [ "$(header Idempotent-Replayed)" = true ] &&
    [ "$(header Location)" = "$MF_LOC" ]
verdict "its retry answers the first import (replayed, same Location), nothing stored again" $? \
    "status $ST replayed '$(header Idempotent-Replayed)' $(head -c 200 "$T/body")"
req GET /v1/models/mf_idem
[ "$(jqb '.versions | length')" = 1 ]
verdict "the model holds one version after the retry" $? "$(head -c 300 "$T/body")"
req POST "/v1/models/import?name=mf_idem2" -H 'Content-Type: application/vnd.gpserve.model' \
    -H "Idempotency-Key: $MF_KEY" --data-binary "@$T/mf_sine.gpmodel"
[ "$ST" = 409 ] && [ "$(jqb .error.field)" = Idempotency-Key ]
verdict "the key with another import (another name) is 409 naming Idempotency-Key" $? \
    "status $ST $(head -c 300 "$T/body")"
check "nothing stored under the other name" 404 GET /v1/models/mf_idem2
req DELETE /v1/models/mf_idem

# ---- an online model: exported with its observations applied
MF_EK='"kernel":{"type":"rbf","variance":1.3,"lengthscale":[0.7],"fixed":true},"noise":{"variance":0.01,"fixed":true},"standardize":false'
req DELETE /v1/models/mf_online
check_json "fit mf_online (exact, 6 rows)" 201 $M \
    "{\"name\":\"mf_online\",\"method\":\"exact\",$MF_EK,\"X\":[0,0.5,1,1.5,2,2.5],\"y\":[0.1,0.5,0.8,1.0,0.9,0.6]}"
check_json "observe 2 rows into mf_online" 200 "$M/mf_online/observe" '{"X":[3,3.5],"y":[0.1,-0.3]}'
check "export the observed mf_online" 200 GET /v1/models/mf_online/versions/1/export
cp "$T/body" "$T/mf_online.gpmodel"
MF_ON=$(/usr/bin/python3 -c 'import json, struct, sys; b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; m = json.loads(json.loads(b[8:8 + n])["__metadata__"]["model"]); print(m["observations"]["seq"], m["n_train"])' "$T/mf_online.gpmodel")
[ "$MF_ON" = "1 8" ]
verdict "the file records the log position (seq 1) and the 8 rows held" $? "$MF_ON"
req POST "/v1/models/import?name=mf_online_copy" -H 'Content-Type: application/vnd.gpserve.model' --data-binary "@$T/mf_online.gpmodel"
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
# (MF_PID) and its export in $T/mf_export_LABEL.gpmodel.
mf_import_into() {
    if ! start_daemon "$T/mf_$1.log" --db "$2" --max-body-mb 256; then
        fail "$1: daemon starts"
        return 1
    fi
    MF_PID=$DPID
    PORT=$DPORT
    req POST /v1/models/import?name=mf_copy -H 'Content-Type: application/vnd.gpserve.model' --data-binary "@$3"
    [ "$ST" = 201 ] && [ "$(jqb .name)" = mf_copy ] && [ "$(jqb .version)" = 1 ] && [ "$(jqb .method)" = exact ]
    verdict "$1: import stores version 1 of mf_copy" $? "status $ST $(head -c 300 "$T/body")"
    header Location | grep -q '/v1/models/mf_copy/versions/1'
    verdict "$1: the import answers its Location" $? "$(header Location)"
    mf_answers mf_copy "$1"
    mf_same "$1" ref "$1"
    check "$1: export of the imported version" 200 GET /v1/models/mf_copy/versions/1/export
    cp "$T/body" "$T/mf_export_$1.gpmodel"
    return 0
}
mf_stop() {
    stop_daemon "$MF_PID"
    PORT=$MF_MAIN_PORT
}

if mf_import_into sqlite "$T/mf_fresh.db" "$T/mf_sine.gpmodel"; then
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
    if mf_import_into postgres "$MF_PGDB" "$T/mf_sine.gpmodel"; then
        mf_stop
        mf_import_into pg_back "$T/mf_back.db" "$T/mf_export_postgres.gpmodel" && mf_stop
    fi
    sh "$MF_PG" stop "$MF_PGDIR/pg" >/dev/null 2>&1
else
    note "model_file: no PostgreSQL cluster could be started ($(tail -n 1 "$T/mf_pg.err" 2>/dev/null)): SQLite only"
fi
PORT=$MF_MAIN_PORT
