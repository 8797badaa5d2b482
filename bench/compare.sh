#!/bin/sh
# bench/compare.sh OLD NEW [BENCH ARGS...] [-- BENCH ARGS...]...
#
# Builds two commits (any git revision) in temporary worktrees (make -j2
# build-all in each), runs the same benchmarks on both alternately (old, new,
# old, new, ...: a machine shared with other work slows both alike), and prints
# every figure of both (median over the rounds) with the NEW/OLD ratio, flagging
# the figures where NEW is slower by more than the threshold. Exit status 1
# when a figure is flagged, 0 otherwise (2 on a usage or build error).
#
# Default benchmark: bench_exact --quick --only lml,predict. Others are given
# as their command lines after OLD NEW, separated by --, e.g.
#   sh bench/compare.sh 38570e5 HEAD
#   sh bench/compare.sh main HEAD -- bench_exact --quick --only lml -- bench_trsolve --quick
# Environment:
#   ROUNDS=3         runs of each benchmark on each side
#   THRESHOLD=1.10   flag a figure when NEW is worse than OLD by this factor
#   KEEP=1           keep the worktrees (printed) instead of removing them
#   TARGETS=...      what make builds in each worktree (default build-all)
#   GPSERVE_DATASETS the datasets (default: ../shared/datasets of this checkout)
# The environment reaches both sides unchanged: OPENBLAS_CORETYPE=Haswell, for
# instance, compares them with the kernels of an AVX2 machine (bench/README.md).
#
# Which way is worse: a figure whose column header or value has a time unit
# (s, ms, us, seconds) is worse when larger; one in something per second
# (points/s, req/s) when smaller; a `ratio` column (to a floor) when larger;
# any other figure (an LML, a count) is printed without a verdict.
set -u
usage() {
    echo "usage: sh bench/compare.sh OLD NEW [-- BENCH [ARGS...]]..." >&2
    exit 2
}
[ $# -ge 2 ] || usage
OLD=$1
NEW=$2
shift 2
ROUNDS=${ROUNDS:-3}
THRESHOLD=${THRESHOLD:-1.10}
TARGETS=${TARGETS:-build-all}
ROOT=$(git rev-parse --show-toplevel) || exit 2
: "${GPSERVE_DATASETS:=$(cd "$ROOT/.." && pwd)/shared/datasets}"
export GPSERVE_DATASETS

# The benchmark command lines, one a line, in $W/benches.
W=$(mktemp -d "${TMPDIR:-/tmp}/gpcompare.XXXXXX") || exit 2
cleanup() {
    if [ "${KEEP:-0}" = 1 ]; then
        echo "compare: worktrees kept in $W" >&2
        return
    fi
    for side in old new; do
        [ -d "$W/$side" ] && git -C "$ROOT" worktree remove --force "$W/$side" >/dev/null 2>&1
    done
    rm -rf "$W"
}
trap cleanup EXIT INT TERM
line=""
for a in "$@"; do
    if [ "$a" = "--" ]; then
        [ -n "$line" ] && printf '%s\n' "$line" >>"$W/benches"
        line=""
    else
        line="${line:+$line }$a"
    fi
done
[ -n "$line" ] && printf '%s\n' "$line" >>"$W/benches"
[ -s "$W/benches" ] || echo "bench_exact --quick --only lml,predict" >"$W/benches"

build_side() { # build_side old|new REV
    sha=$(git -C "$ROOT" rev-parse --verify "$2^{commit}") || {
        echo "compare: $2 is not a commit" >&2
        exit 2
    }
    git -C "$ROOT" worktree add --detach "$W/$1" "$sha" >/dev/null 2>&1 || {
        echo "compare: cannot make a worktree of $2" >&2
        exit 2
    }
    echo "compare: building $1 = $2 ($(git -C "$ROOT" log -1 --format='%h %s' "$sha" | cut -c1-70))" >&2
    make -C "$W/$1" -j2 $TARGETS >"$W/$1.build.log" 2>&1 || {
        echo "compare: the build of $2 failed; its log:" >&2
        tail -n 20 "$W/$1.build.log" >&2
        exit 2
    }
}
build_side old "$OLD"
build_side new "$NEW"

# Run every benchmark ROUNDS times on each side, alternating; the markdown of
# run r of side s of benchmark b goes to $W/out.b.s.r.
r=1
while [ "$r" -le "$ROUNDS" ]; do
    b=0
    while IFS= read -r cmd; do
        b=$((b + 1))
        order="old new"
        [ $(((r + b) % 2)) = 1 ] && order="new old" # each side goes first in turn
        for side in $order; do
            echo "compare: round $r/$ROUNDS, $side: $cmd" >&2
            # shellcheck disable=SC2086 # the command line splits into words
            (cd "$W/$side" && build/bench/$cmd) >"$W/out.$b.$side.$r" 2>"$W/err.$b.$side.$r" ||
                echo "compare: $side: '$cmd' failed: $(tail -n 3 "$W/err.$b.$side.$r")" >&2
        done
    done <"$W/benches"
    r=$((r + 1))
done

echo "# bench/compare.sh: OLD = $OLD ($(git -C "$ROOT" rev-parse --short "$OLD")), NEW = $NEW ($(git -C "$ROOT" rev-parse --short "$NEW"))"
echo
echo "Medians of $ROUNDS alternating runs each; ratio = NEW / OLD; ** marks NEW worse by more than ${THRESHOLD}x. $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}."
python3 "$ROOT/bench/compare_figures.py" "$W" "$THRESHOLD"
