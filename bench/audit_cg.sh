#!/bin/sh
# The audit trail's cost on the store's writes, in instructions under
# callgrind (bench/results/audit.md):
#   sh bench/audit_cg.sh [BUILD]     (BUILD: build, with build/libgpstore.a made)
# builds a small program against the store library and runs it four times
# on a fresh SQLite file: 100 saves (a 500 x 8 array and two small ones), or
# 400 one-row observations, without an audit row (audit NULL: the code path
# of the writes before the trail) or with one; prints callgrind's
# instructions per write (the call, its commit and its wait for the disk). Instruction counts do
# not move with the machine's load. Needs valgrind and cc.
BUILD=${1:-build}
W=$(mktemp -d /tmp/gpserve-audit-cg.XXXXXX) || exit 1
cat >"$W/cg.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "store/store.h"

/* One function per variant, so callgrind counts each apart. */
__attribute__((noinline)) int save_plain(gp_store *s, const gp_state *st, gp_error *e)
{
    return gp_store_save_audited(s, "m", "exact", "{}", "{}", 500, 8, st, NULL, NULL, NULL,
                                 NULL, e);
}
__attribute__((noinline)) int save_audited(gp_store *s, const gp_state *st, gp_error *e)
{
    gp_audit_put a = {.route = "POST /v1/models", .model = "m", .status = 201,
                      .request_id = "0123456789abcdef"};
    return gp_store_save_audited(s, "m", "exact", "{}", "{}", 500, 8, st, NULL, NULL, &a, NULL,
                                 e);
}
__attribute__((noinline)) int observe_plain(gp_store *s, int64_t id, uint64_t seq,
                                            const gp_state *b, gp_error *e)
{
    uint64_t got, ticket;
    int rc = gp_store_observe_audited(s, id, seq, b, seq + 1, NULL, NULL, NULL, &got, &ticket, e);
    return rc ? rc : gp_store_wait_durable(s, ticket, e);
}
__attribute__((noinline)) int observe_audited(gp_store *s, int64_t id, uint64_t seq,
                                              const gp_state *b, gp_error *e)
{
    gp_audit_put a = {.route = "POST /v1/models/{name}/observe", .model = "m", .version = 1,
                      .status = 200, .request_id = "0123456789abcdef"};
    uint64_t got, ticket;
    int rc = gp_store_observe_audited(s, id, seq, b, seq + 1, NULL, NULL, &a, &got, &ticket, e);
    return rc ? rc : gp_store_wait_durable(s, ticket, e);
}

int main(int argc, char **argv)
{
    if (argc != 4) return 2;
    gp_store *s;
    gp_error e;
    if (gp_store_open(argv[1], &s, &e)) { fprintf(stderr, "%s\n", e.message); return 1; }
    static double big[500 * 8], small[16], x[8], y[1];
    for (size_t i = 0; i < 500 * 8; i++) big[i] = (double)i / 7.0;
    gp_named_array arr[3] = {{"Z", 500, 8, big}, {"a", 16, 1, small}, {"b", 4, 4, small}};
    gp_state st = {arr, 3, 3};
    gp_named_array obs[2] = {{"X", 1, 8, x}, {"y", 1, 1, y}};
    gp_state batch = {obs, 2, 2};
    const int audited = strcmp(argv[3], "audited") == 0, saves = strcmp(argv[2], "save") == 0;
    for (int i = 0; i < (saves ? 100 : 1); i++)
        if ((audited && saves ? save_audited : save_plain)(s, &st, &e)) { fprintf(stderr, "%s\n", e.message); return 1; }
    gp_model_meta meta;
    if (gp_store_meta_brief(s, "m", 1, &meta, &e)) return 1;
    uint64_t seq = 0;
    for (int i = 0; i < (saves ? 0 : 400); i++)
        if ((audited ? observe_audited : observe_plain)(s, meta.id, seq++, &batch, &e)) { fprintf(stderr, "%s\n", e.message); return 1; }
    gp_model_meta_free(&meta);
    gp_store_close(s);
    return 0;
}
C
LIBS="-lsqlite3 -lpq -lm -lpthread"
cc -std=c11 -O0 -fno-optimize-sibling-calls -g -D_POSIX_C_SOURCE=200809L -I. -I/usr/include/postgresql -o "$W/cg" "$W/cg.c" \
    "$BUILD/libgpstore.a" "$BUILD/libgpcore.a" $LIBS -llapacke -lopenblas || exit 1
# One process per variant and write kind, collecting only inside the write
# (the wrapper: the write, its commit and its wait for the disk).
for f in save_plain save_audited observe_plain observe_audited; do
    rm -f "$W/cg.db" "$W/cg.db-wal" "$W/cg.db-shm"
    valgrind --tool=callgrind --callgrind-out-file="$W/cg.$f.out" --toggle-collect=$f \
        "$W/cg" "$W/cg.db" "${f%_*}" "${f#*_}" >"$W/vg.log" 2>&1 || { cat "$W/vg.log"; exit 1; }
    n=400
    case $f in save*) n=100 ;; esac
    callgrind_annotate "$W/cg.$f.out" 2>/dev/null | awk -v f=$f -v n=$n '/PROGRAM TOTALS/ {
        gsub(",", "", $1); printf "%-16s %9.0f instructions a call (%d calls)\n", f, $1 / n, n }'
done
[ -n "$KEEP" ] && echo "$W" || rm -rf "$W"
