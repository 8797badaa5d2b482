#!/bin/sh
# Integration area "backup": `gpserve backup` of a live SQLite database and
# `gpserve restore` (docs/design/storage.md, "Backups").
# A daemon on its own database serves fits, observes and deletes from a load
# loop while a backup is taken; the backup restored into a new file passes
# PRAGMA integrity_check and a daemon on it answers every version acknowledged
# before the backup started (and every version it has) byte for byte as the
# live daemon did; the observed model as it was at its observation count.
# A restore over a database a daemon holds is refused (exit 3, 409 conflict);
# bad arguments exit non-zero with a message. With PostgreSQL (psql, pg_dump,
# pg_restore and GPSERVE_TEST_DB_URL), the documented pg_dump recipe is run.
# Sourced by tests/integration/run.sh (lib.sh loaded).

section "backup: a live SQLite database under load"
BK_DB=$T/bk.db
BKEK='"kernel":{"type":"rbf","variance":1.3,"lengthscale":[0.7],"fixed":true},"noise":{"variance":0.01,"fixed":true},"standardize":false'
BKQ='[[0.25],[1.75],[3.2]]'
if start_daemon "$T/bk.log" --db "$BK_DB"; then
    pass "backup: a daemon on its own database starts"
    BK_PID=$DPID
    MPORT=$PORT
    PORT=$DPORT
    mkdir -p "$T/bkref"
    for s in 1 2 3; do
        jpost /v1/models "{\"name\":\"keep$s\",\"method\":\"exact\",$BKEK,\"X\":[0,1,2,$s],\"y\":[0.1,0.5,0.8,$s]}"
        [ "$ST" = 201 ] || fail "backup: fit keep$s" "status $ST" body
        jpost /v1/models/keep$s/predict "{\"X\":$BKQ}"
        cp "$T/body" "$T/bkref/keep$s.1"
    done
    jpost /v1/models "{\"name\":\"obs\",\"method\":\"exact\",$BKEK,\"X\":[0,0.5,1],\"y\":[0.1,0.5,0.8]}"
    [ "$ST" = 201 ] || fail "backup: fit obs" "status $ST" body
    # The load: each round fits a new version of "load" (its predict recorded
    # once acknowledged), observes one row into "obs" (its predict recorded at
    # that observation count), and fits then deletes a model "gone".
    : >"$T/bk_running"
    (
        i=0
        while [ -f "$T/bk_running" ] && [ $i -lt 400 ]; do
            i=$((i + 1))
            jpost /v1/models "{\"name\":\"load\",\"method\":\"exact\",$BKEK,\"X\":[0,1,2,3],\"y\":[0.1,0.5,0.$i,1]}"
            if [ "$ST" = 201 ]; then
                v=$(jqb '.version')
                jpost /v1/models/load/predict "{\"X\":$BKQ,\"version\":$v}"
                [ "$ST" = 200 ] && cp "$T/body" "$T/bkref/load.$v.tmp" && mv "$T/bkref/load.$v.tmp" "$T/bkref/load.$v"
            fi
            jpost /v1/models/obs/observe "{\"X\":[$((i + 3))],\"y\":[0.$i]}"
            if [ "$ST" = 200 ]; then
                k=$(jqb '.observations')
                jpost /v1/models/obs/predict "{\"X\":$BKQ}"
                [ "$ST" = 200 ] && cp "$T/body" "$T/bkref/obsn.$k"
            fi
            jpost /v1/models "{\"name\":\"gone\",\"method\":\"exact\",$BKEK,\"X\":[0,1],\"y\":[0,1]}"
            req DELETE /v1/models/gone
        done
    ) >/dev/null 2>&1 &
    BK_LOAD=$!
    sleep 1
    # What was acknowledged before the backup starts must be in it.
    ls "$T/bkref" | grep -v '\.tmp$' | grep -v '^obsn' >"$T/bk_acked"
    "$BIN" backup --db "$BK_DB" --out "$T/bk.backup" >"$T/bk_out" 2>&1
    rc=$?
    sleep 1
    rm -f "$T/bk_running"
    wait $BK_LOAD
    [ $rc = 0 ]
    verdict "backup: 'gpserve backup' of the live database exits 0" $? "exit $rc: $(cat "$T/bk_out")"
    note "backup: $(wc -l <"$T/bk_acked") versions acknowledged before the backup, $(ls "$T/bkref" | grep -c '^load') load versions in all"

    "$BIN" restore --db "$BK_DB" --from "$T/bk.backup" >"$T/bk_out" 2>&1
    rc=$?
    [ $rc = 3 ] && grep -q "held by a running daemon" "$T/bk_out" && grep -q "409 conflict" "$T/bk_out"
    verdict "backup: restore over the database the daemon holds is refused (exit 3, 409)" $? "exit $rc: $(cat "$T/bk_out")"

    "$BIN" restore --db "$T/restored.db" --from "$T/bk.backup" >"$T/bk_out" 2>&1
    rc=$?
    [ $rc = 0 ]
    verdict "backup: restore into a new file exits 0" $? "exit $rc: $(cat "$T/bk_out")"
    ic=$(sqlite3 "$T/restored.db" 'PRAGMA integrity_check' 2>&1)
    [ "$ic" = ok ]
    verdict "backup: the restored database passes PRAGMA integrity_check" $? "$ic"
    [ ! -e "$T/bk.backup-wal" ] && [ ! -e "$T/bk.backup-shm" ] &&
        [ "$(sqlite3 "$T/bk.backup" 'PRAGMA journal_mode' 2>&1)" = delete ]
    verdict "backup: the backup is one file (a rollback journal; no -wal or -shm beside it after the restore read it)" $? \
        "$(ls "$T"/bk.backup*)"
    jm=$(sqlite3 "$T/restored.db" 'PRAGMA journal_mode' 2>&1)
    [ "$jm" = wal ]
    verdict "backup: the restored database is in WAL mode" $? "$jm"

    if start_daemon "$T/restored.log" --db "$T/restored.db"; then
        pass "backup: a daemon starts on the restored database"
        R_PID=$DPID
        PORT=$DPORT
        bad=""
        while read -r f; do
            name=${f%.*}
            v=${f##*.}
            jpost /v1/models/$name/predict "{\"X\":$BKQ,\"version\":$v}"
            cmp -s "$T/body" "$T/bkref/$f" || bad="$bad $f($ST)"
        done <"$T/bk_acked"
        [ -z "$bad" ]
        verdict "backup: every version acknowledged before the backup predicts byte for byte" $? "differ:$bad"
        req GET /v1/models/load
        bad=""
        n=0
        for v in $(jqb '.versions[]? | if type == "object" then .version else . end'); do
            n=$((n + 1))
            jpost /v1/models/load/predict "{\"X\":$BKQ,\"version\":$v}"
            cmp -s "$T/body" "$T/bkref/load.$v" || bad="$bad $v($ST)"
        done
        [ $n -gt 0 ] && [ -z "$bad" ]
        verdict "backup: every version of 'load' in the backup ($n) predicts byte for byte" $? "differ:$bad"
        req GET /v1/models/obs
        k=$(jqb '.online.observations // 0')
        jpost /v1/models/obs/predict "{\"X\":$BKQ}"
        if [ "$k" = 0 ]; then
            note "backup: no observation of 'obs' was in the backup"
        else
            cmp -s "$T/body" "$T/bkref/obsn.$k"
            verdict "backup: 'obs' at its $k observations predicts byte for byte" $? "$(head -c 200 "$T/body")"
        fi
        req GET /v1/models/gone
        [ "$ST" = 404 ] || [ "$ST" = 200 ]
        verdict "backup: 'gone' is whole or absent" $? "status $ST"
        stop_daemon "$R_PID"
    else
        fail "backup: a daemon starts on the restored database" "see above"
    fi
    PORT=$MPORT
    stop_daemon "$BK_PID"
    "$BIN" restore --db "$BK_DB" --from "$T/bk.backup" >"$T/bk_out" 2>&1
    rc=$?
    [ $rc = 0 ] && [ "$(sqlite3 "$BK_DB" 'PRAGMA integrity_check')" = ok ]
    verdict "backup: restore over the stopped daemon's database" $? "exit $rc: $(cat "$T/bk_out")"
else
    fail "backup: a daemon on its own database starts" "see above"
fi

section "backup: bad arguments"
"$BIN" backup --db "$BK_DB" >"$T/bk_out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q -- "--out FILE is required" "$T/bk_out"
verdict "backup: missing --out exits 2 with a message" $? "exit $rc: $(cat "$T/bk_out")"
"$BIN" restore --db "$T/r2.db" --from "$T/no-such-file" >"$T/bk_out" 2>&1
rc=$?
[ $rc != 0 ] && grep -q "cannot read" "$T/bk_out" && [ ! -e "$T/r2.db" ]
verdict "backup: restore from an unreadable file exits non-zero, writes nothing" $? "exit $rc: $(cat "$T/bk_out")"
printf 'not a database at all, not even close to one; %0200d' 0 >"$T/garbage"
"$BIN" restore --db "$T/r3.db" --from "$T/garbage" >"$T/bk_out" 2>&1
rc=$?
[ $rc != 0 ] && grep -q "not a sound SQLite database\|not a gpserve database" "$T/bk_out"
verdict "backup: restore from a file that is not a database exits non-zero" $? "exit $rc: $(cat "$T/bk_out")"
"$BIN" backup --db "$T/no-such.db" --out "$T/x.backup" >"$T/bk_out" 2>&1
rc=$?
[ $rc != 0 ] && grep -q "no database file" "$T/bk_out" && [ ! -e "$T/x.backup" ]
verdict "backup: backup of a missing database exits non-zero" $? "exit $rc: $(cat "$T/bk_out")"
"$BIN" backup --db "$BK_DB" --out "$T/no-such-dir/x.backup" >"$T/bk_out" 2>&1
rc=$?
[ $rc != 0 ] && grep -q "x.backup" "$T/bk_out"
verdict "backup: backup into a folder that does not exist exits non-zero" $? "exit $rc: $(cat "$T/bk_out")"
"$BIN" backup --db "$BK_DB" --out "$T/y.backup" --bogus 1 >"$T/bk_out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "unexpected argument '--bogus'" "$T/bk_out"
verdict "backup: an unknown option exits 2" $? "exit $rc: $(cat "$T/bk_out")"

section "backup: PostgreSQL (pg_dump / pg_restore recipe of docs/design/storage.md)"
# GPSERVE_TEST_DB_URL's server, or else a throw-away PostgreSQL 15 cluster
# (tests/support/pgtmp.sh, as the replicas area) where one is installed.
BK_MAIN_DB_URL=$DB_URL
BK_PGDIR=""
if [ -z "$DB_URL" ] && [ -x "${PGBIN:-/usr/lib/postgresql/15/bin}/initdb" ]; then
    BK_PGDIR=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-pg.XXXXXX") && chmod 755 "$BK_PGDIR"
    if DB_URL=$(sh "$ROOT/tests/support/pgtmp.sh" start "$BK_PGDIR/pg" 2>"$T/bk_pgstart"); then
        CLEANUP_CMDS="$CLEANUP_CMDS sh '$ROOT/tests/support/pgtmp.sh' stop '$BK_PGDIR/pg' >/dev/null 2>&1; rm -rf '$BK_PGDIR';"
    else
        note "backup: no PostgreSQL cluster could be started ($(tail -n 1 "$T/bk_pgstart"))"
        DB_URL=""
    fi
fi
if [ -z "$DB_URL" ] || ! command -v pg_dump >/dev/null 2>&1 || ! command -v pg_restore >/dev/null 2>&1; then
    note "backup: PostgreSQL part skipped (needs PostgreSQL 15 or GPSERVE_TEST_DB_URL, pg_dump and pg_restore)"
else
    PG_SRC=$(db_for bksrc)
    if start_daemon "$T/bkpg.log" --db "$PG_SRC"; then
        MPORT=$PORT
        PORT=$DPORT
        jpost /v1/models "{\"name\":\"pgkeep\",\"method\":\"exact\",$BKEK,\"X\":[0,1,2],\"y\":[0.1,0.5,0.8]}"
        jpost /v1/models/pgkeep/predict "{\"X\":$BKQ}"
        cp "$T/body" "$T/bk_pgref"
        # the recipe: dump (a live database: pg_dump reads one snapshot), lose
        # the schema, restore it, start the daemon again
        pg_dump --format=custom --schema="gpit$$_bksrc" --file="$T/bk.pgdump" "$DB_URL" 2>"$T/bk_pgerr"
        verdict "backup: pg_dump of the live schema" $? "$(head -c 300 "$T/bk_pgerr")"
        stop_daemon "$DPID"
        psql "$DB_URL" -qAt -c "DROP SCHEMA gpit$$_bksrc CASCADE" >/dev/null 2>&1
        pg_restore --dbname="$DB_URL" "$T/bk.pgdump" 2>"$T/bk_pgerr"
        verdict "backup: pg_restore of the dropped schema" $? "$(head -c 300 "$T/bk_pgerr")"
        if start_daemon "$T/bkpg2.log" --db "$PG_SRC"; then
            PORT=$DPORT
            jpost /v1/models/pgkeep/predict "{\"X\":$BKQ}"
            cmp -s "$T/body" "$T/bk_pgref"
            verdict "backup: the restored PostgreSQL schema predicts byte for byte" $? "$(head -c 200 "$T/body")"
            stop_daemon "$DPID"
        fi
        PORT=$MPORT
    fi
fi
if [ -n "$BK_PGDIR" ]; then
    sh "$ROOT/tests/support/pgtmp.sh" stop "$BK_PGDIR/pg" >/dev/null 2>&1
    rm -rf "$BK_PGDIR"
fi
DB_URL=$BK_MAIN_DB_URL
