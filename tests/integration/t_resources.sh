#!/bin/sh
# Integration area "resources": running out of disk or memory has its own
# answers, never 500: a full disk is 507 insufficient_storage with Retry-After
# (writes refused, reads served, recovery without a restart, on a small tmpfs);
# an allocation that fails during a fit is 503 overloaded with Retry-After
# (under an address-space limit). Runs after "logs": its 5xx answers are meant.
# Sourced by tests/integration/run.sh (lib.sh loaded).

section "full disk (tmpfs)"
disk_case() {
    mnt=$T/tmpfs
    mkdir -p "$mnt"
    if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=4m tmpfs "$mnt" 2>/dev/null; then
        note "cannot mount a tmpfs here (needs root): the full-disk case is skipped"
        return
    fi
    if ! start_daemon "$T/disk.log" --db "$mnt/disk.db"; then
        fail "daemon on a 4 MiB tmpfs starts"
        umount "$mnt"
        return
    fi
    PORT=$DPORT
    DISK_PID=$DPID
    check_json "full disk: a small fit while there is space" 201 $M "$SINE_BODY"
    # Fill the file system, then ask for a fit whose arrays need space.
    dd if=/dev/zero of="$mnt/filler" bs=64k >/dev/null 2>&1
    gen_xy 300 2 41 | csv_to_json disk-big '"method":"exact","options":{"max_iterations":3},' >"$T/disk_big.json"
    check_jerr "full disk: a fit is 507 insufficient_storage" 507 insufficient_storage - $M @"$T/disk_big.json"
    note "507: $(jqb .error.message)"
    [ "$(header Retry-After)" = 30 ]
    verdict "full disk: 507 carries Retry-After: 30" $? "Retry-After '$(header Retry-After)'"
    check "full disk: models are still listed" 200 GET /v1/models
    check_json "full disk: the stored model still predicts" 200 /v1/models/sine/predict "{\"X\":$SINE_X}"
    req DELETE /v1/models/sine
    case $ST in 204 | 507) pass "full disk: a delete answers $ST (never 500)" ;; *) fail "full disk: a delete answers 204 or 507" "status $ST" body ;; esac
    rm -f "$mnt/filler"
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
