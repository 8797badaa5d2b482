#!/bin/sh
# Integration area "resources": running out of disk or memory has its own
# answers, never 500: a full disk is 507 insufficient_storage with Retry-After
# (writes refused, reads served, recovery without a restart, on a small tmpfs),
# a DELETE still frees it (204; the reserve file released, the WAL cut) and an
# async fit whose model found no room waits and runs again once there is;
# an allocation that fails during a fit is 503 overloaded with Retry-After
# (under an address-space limit). Runs after "logs": its 5xx answers are meant.
# Sourced by tests/integration/run.sh (lib.sh loaded).

section "full disk (tmpfs)"
# df_avail DIR: bytes free on DIR's file system.
df_avail() { df -P -B1 "$1" | awk 'NR == 2 { print $4 }'; }
disk_case() {
    mnt=$T/tmpfs
    mkdir -p "$mnt"
    # 40 MiB: room for the database, its WAL and the 8 MiB reserve file the
    # daemon keeps beside it when at least twice that is free.
    if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=40m tmpfs "$mnt" 2>/dev/null; then
        note "cannot mount a tmpfs here (needs root): the full-disk case is skipped"
        return
    fi
    if ! start_daemon "$T/disk.log" --db "$mnt/disk.db" --fit-workers 1; then
        fail "daemon on a 40 MiB tmpfs starts"
        umount "$mnt"
        return
    fi
    PORT=$DPORT
    DISK_PID=$DPID
    [ -f "$mnt/disk.db-reserve" ]
    verdict "full disk: the daemon keeps a reserve file beside the database" $? "$(ls -l "$mnt")"
    check_json "full disk: a small fit while there is space" 201 $M "$SINE_BODY"
    # A restart: the WAL starts empty, so a write on the full disk finds no
    # room left in it by an earlier transaction.
    stop_daemon "$DISK_PID"
    if ! start_daemon "$T/disk.log" --db "$mnt/disk.db" --fit-workers 1; then
        fail "daemon on a 40 MiB tmpfs starts again"
        umount "$mnt"
        return
    fi
    PORT=$DPORT
    DISK_PID=$DPID
    # Fill the file system to the last block, then ask for a fit whose arrays need space.
    dd if=/dev/zero of="$mnt/filler" bs=64k >/dev/null 2>&1
    dd if=/dev/zero of="$mnt/filler2" bs=4k >/dev/null 2>&1
    gen_xy 300 2 41 | csv_to_json disk-big '"method":"exact","options":{"max_iterations":3},' >"$T/disk_big.json"
    check_jerr "full disk: a fit is 507 insufficient_storage" 507 insufficient_storage - $M @"$T/disk_big.json"
    note "507: $(jqb .error.message)"
    [ "$(header Retry-After)" = 30 ]
    verdict "full disk: 507 carries Retry-After: 30" $? "Retry-After '$(header Retry-After)'"
    check "full disk: models are still listed" 200 GET /v1/models
    check_json "full disk: the stored model still predicts" 200 /v1/models/sine/predict "{\"X\":$SINE_X}"
    before=$(df_avail "$mnt")
    check "full disk: DELETE of a model answers 204" 204 DELETE /v1/models/sine
    after=$(df_avail "$mnt")
    note "free bytes before the delete $before, after $after; WAL $(stat -c %s "$mnt/disk.db-wal" 2>/dev/null) bytes"
    [ "$after" -gt "$before" ]
    verdict "full disk: the delete gives space back" $? "free $before -> $after"
    check "full disk: the deleted model is gone" 404 GET /v1/models/sine
    check_json "full disk: a small fit succeeds in the space the delete freed" 201 $M "$SINE_BODY"
    # Full again but for a 256 KiB gap: an async fit's job (its request, a
    # few KiB) is stored, its model (an exact factor of 300 points, ~370 KiB)
    # is not.
    dd if=/dev/zero of="$mnt/gap" bs=64k count=4 >/dev/null 2>&1
    dd if=/dev/zero of="$mnt/filler3" bs=64k >/dev/null 2>&1
    dd if=/dev/zero of="$mnt/filler4" bs=4k >/dev/null 2>&1
    rm -f "$mnt/gap"
    gen_xy 300 2 43 | csv_to_json disk-job '"async":true,"method":"exact","options":{"max_iterations":3},' >"$T/disk_job.json"
    check_json "full disk: an async fit whose request fits is accepted (202)" 202 $M @"$T/disk_job.json"
    DJOB=$(jstr job)
    # Its model finds the disk full: the job waits for space, saying so.
    i=0
    while [ $i -lt $((JOBWAIT * 5)) ]; do
        req GET "/v1/jobs/$DJOB"
        [ "$(jqb .error.code)" = insufficient_storage ] && break
        case $(jqb .status) in succeeded | failed | cancelled) break ;; esac
        sleep 0.2
        i=$((i + 1))
    done
    [ "$(jqb .status)" = queued ] && [ "$(jqb .error.code)" = insufficient_storage ] &&
        jqb .error.message | grep -q "runs again"
    verdict "full disk: the job whose model found no room is queued again, saying when it runs" $? \
        "status '$(jqb .status)', error '$(jqb .error.code)': $(jqb .error.message)"
    # Space comes back: the waiting job runs again and succeeds.
    rm -f "$mnt"/filler*
    if wait_job "$DJOB" succeeded; then
        pass "space freed: the waiting job runs again and succeeds"
    else
        fail "space freed: the waiting job runs again and succeeds" "status '$JOB_STATUS'" body
    fi
    check "space freed: its model is stored" 200 GET /v1/models/disk-job
    check_json "space freed: the same fit succeeds without a restart" 201 $M @"$T/disk_big.json"
    stop_daemon "$DISK_PID"
    [ "$STOP_RC" = 0 ]
    verdict "full-disk daemon exits 0 on SIGTERM" $? "exit $STOP_RC"
    umount "$mnt"
}
disk_case

section "memory (address-space limit)"
memory_case() {
    case $BUILD in *san*)
        note "the sanitizer build reserves terabytes of address space: the memory case is skipped"
        return
        ;;
    esac
    # 1.5 GiB of address space; an exact fit of 15000 points needs an 1.8 GB matrix.
    (ulimit -v 1572864 2>/dev/null && exec "$BIN" --bind 127.0.0.1 --port 0 --db "$T/mem.db" \
        --max-train-points 20000) >"$T/mem.log" 2>&1 &
    mpid=$!
    PIDS="$PIDS $mpid"
    i=0
    MPORT=""
    while [ $i -lt $((STARTUP * 10)) ] && [ -z "$MPORT" ]; do
        MPORT=$(sed -n 's/.*gpserve listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$T/mem.log" | head -n 1)
        alive "$mpid" || break
        sleep 0.1
        i=$((i + 1))
    done
    if [ -z "$MPORT" ]; then
        note "the daemon does not start under ulimit -v here: the memory case is skipped ($(tail -n 1 "$T/mem.log"))"
        return
    fi
    PORT=$MPORT
    awk 'BEGIN { printf "{\"name\":\"huge\",\"options\":{\"max_iterations\":1},\"X\":["; for (i = 0; i < 15000; i++) printf "%s%.6f", (i ? "," : ""), i / 1000.0;
                 printf "],\"y\":["; for (i = 0; i < 15000; i++) printf "%s%.6f", (i ? "," : ""), sin(i / 1000.0); printf "]}" }' >"$T/huge.json"
    check_jerr "memory: a fit whose matrix cannot be allocated is 503 overloaded" 503 overloaded - $M @"$T/huge.json"
    note "503: $(jqb .error.message)"
    [ "$(header Retry-After)" = 5 ]
    verdict "memory: 503 carries Retry-After: 5" $? "Retry-After '$(header Retry-After)'"
    check "memory: the daemon still answers" 200 GET /healthz
    check_json "memory: a small fit still succeeds" 201 $M "$SINE_BODY"
    stop_daemon "$mpid"
}
memory_case

if grep -Eq 'AddressSanitizer|LeakSanitizer|runtime error:' "$T"/disk.log "$T"/mem.log 2>/dev/null; then
    fail "no sanitizer report in the resource daemons' logs"
else
    pass "no sanitizer report in the resource daemons' logs"
fi
