#!/bin/sh
# Run the benchmarks and print their markdown tables (called by `make bench`).
# Usage: bench/run.sh BUILD_DIR [ARGS...]      (from the repository root)
#
# bench_exact writes the row indices of every dataset configuration (including
# the seeded training subsamples of kin8nm/power) to a temporary folder, and the
# scikit-learn side reads them from there, so both fit exactly the same rows.
# Arguments after BUILD_DIR go to bench_exact (e.g. --quick, --only fit,lml);
# of them only --quick is passed on to the scikit-learn script (and to
# bench_kernel_approx).
#
# Only the exact benchmark (bench_exact, then bench/sklearn_exact.py on the
# same rows; bench/results/exact.md), with bench_exact's arguments:
#   sh bench/run.sh BUILD_DIR exact [--quick] [--only fit,lml,predict]
#
# Only the kernel-approximation benchmark (random-feature samplers, Nyström;
# bench/results/kernel_approx.md), with its own arguments:
#   sh bench/run.sh BUILD_DIR kernel_approx [--quick] [--sweep r,d,matern,spread] ...
# (the same as running BUILD_DIR/bench/bench_kernel_approx directly; --help
# lists its options).
#
# Only the classification/count benchmark (svgp and pls with bernoulli and
# poisson likelihoods against scikit-learn's GaussianProcessClassifier and
# Poisson GLMs on the same rows; bench/results/classification.md):
#   sh bench/run.sh BUILD_DIR classification [--quick] [--datasets a,b]
# (gpbench runs bench/experiments/classification.json without its peers into a
# temporary folder and prints its tables, then bench/sklearn_classification.py
# fits the peers on the same split files and prints them, the comparison with
# gpbench's lines and the verdict; `make bench` runs the experiment file with
# its peers instead, in the experiments). Duration on the shared 2-core machine with the
# default 10 splits: about 22 minutes (gpserve 6, the peers 16, most of it GPC
# on spam, ~4 minutes a fit; bench/results/classification.md).
#
# Only the multiclass benchmark (issue 35: svgp with the softmax likelihood
# against scikit-learn's GaussianProcessClassifier one-vs-rest and one-vs-one on
# wine_classes and digits, the seeded 80/20 splits of bench/data/splits/;
# the multiclass section of bench/results/classification.md):
#   sh bench/run.sh BUILD_DIR multiclass [--quick] [gpbench run's arguments]
# (gpbench runs bench/experiments/multiclass.json with its peer,
# bench/sklearn_multiclass.py, on the same split files, prints the table, then
# the fit-time ratios and the verdict; the lines are kept in $GPBENCH_OUT when
# it names a folder). Duration on the shared 2-core machine: see
# bench/results/classification.md; --quick (2 splits of wine) about a minute.
#
# Only the hkd benchmark (harmonic kernel decomposition against sgpr: the large
# sets, the Nystrom trace study and a synthetic rotation-invariant set;
# bench/results/hkd.md), with its own arguments:
#   sh bench/run.sh BUILD_DIR hkd [--quick] [--parts large,trace,synth] ...
# (the same as running BUILD_DIR/bench/bench_hkd directly; --help lists its
# options). Duration on the shared 2-core machine with the defaults (5 large
# sets x 3 splits, training sets capped at 6000 rows, m = 128 and 256, both
# methods with Z fixed, plus the Z-optimised pair on split 0 of each set): about
# 25 minutes (part 1 ~23, the trace study under 1, the synthetic set ~1.5;
# bench/results/hkd.md); --quick about 1 minute.
#
# Only the online benchmark (rfgp, KJIT, issue 16: message prediction for
# the logistic factor, the oracle rate over a stream, observes per second in
# process, then over HTTP with bench/online/http.sh; bench/results/online.md):
#   sh bench/run.sh BUILD_DIR online [--quick] [bench_online's arguments]
# (--quick is passed on to the HTTP part; BUILD_DIR/bench/bench_online --help
# lists the rest). Duration on the shared 2-core machine: see
# bench/results/online.md; --quick about a minute.
#
# Only the gwi benchmark (Gaussian Wasserstein inference, issue 17: GWI-SVGP
# and GWI-net against our exact GP, sgpr at the same M and msrfr on the test20
# splits of Table 4.1's nine sets, beside the thesis's figures;
# bench/results/gwi.md), the experiment file bench/experiments/gwi.json:
#   sh bench/run.sh BUILD_DIR gwi [--quick] [--datasets a,b]
# (the same as `build/bench/gpbench run bench/experiments/gwi.json ...` then
# `gpbench table`; other methods, splits or gwi options: edit a copy of the
# file). --quick (2 splits of boston and yacht, 100 gwi epochs) takes
# 2-3 minutes, most of it msrfr (~30-40 s a fit); the full run takes hours
# (msrfr's default fits on kin8nm, power, naval and protein; see
# bench/results/gwi.md).
#
# The soak (bench/soak.sh: 10 minutes of mixed traffic against the daemon with
# its RSS sampled every 10 s; fails on any error or RSS growth; a full-length
# run writes bench/results/soak.md) runs after the HTTP benchmark for
# $SOAK_SECONDS (default 600; 60 with --quick), e.g. `SOAK_SECONDS=120 make bench`;
# only the soak:
#   sh bench/run.sh BUILD_DIR soak [SECONDS]
# Only the multi-output benchmark (issue 34: coregionalised exact on Jura against an
# independent GP and GPyTorch's multitask GP, sgpr/svgp LMC on the power plant's two outputs,
# the Kronecker path against the general one; bench/results/multioutput.md), with
# bench/multioutput.py's arguments (--quick, --parts jura,sparse,kron, --seeds, --restarts):
#   sh bench/run.sh BUILD_DIR multioutput [--quick] ...
# The GPyTorch peer runs when GPYTORCH_PATH names GPyTorch 1.8.1's source tree (default
# /work/wt/gpytorch181 when it exists) and Debian's python3-torch imports; skipped with a
# message otherwise, as is everything without the shared datasets.
BUILD=${1:-build}
# See the Makefile: keeps OpenBLAS's idle threads from spinning on our cores.
: "${OPENBLAS_THREAD_TIMEOUT:=16}"
export OPENBLAS_THREAD_TIMEOUT
[ $# -gt 0 ] && shift

# bench/experiments/classification.json through gpbench (its lines in folder
# $1), then its peers with the comparison and the verdict; the remaining
# arguments go to gpbench run, --quick and --datasets also to the Python side.
run_classification() {
    dir=$1
    shift
    if [ ! -x "$BUILD/bench/gpbench" ]; then
        echo "gpbench: $BUILD/bench/gpbench not built: skipped"
        return 1
    fi
    e=bench/experiments/classification.json
    "$BUILD/bench/gpbench" run "$e" --no-peers "$@" --out "$dir/classification.jsonl" || return 1
    "$BUILD/bench/gpbench" table "$e" "$dir/classification.jsonl" || return 1
    py=""
    while [ $# -gt 0 ]; do
        case $1 in
        --quick) py="$py --quick" ;;
        --datasets) py="$py --datasets ${2:-}"; shift ;;
        esac
        [ $# -gt 0 ] && shift
    done
    if ! /usr/bin/python3 -c 'import sklearn' >/dev/null 2>&1; then
        echo "## Peers: skipped (/usr/bin/python3 cannot import sklearn; install" \
             "python3-sklearn python3-statsmodels: sh mk/deps.sh bench as root)"
        echo
        return 0
    fi
    # shellcheck disable=SC2086
    /usr/bin/python3 bench/sklearn_classification.py --gpserve "$dir/classification.jsonl" $py
}
# bench/experiments/multiclass.json through gpbench with its peers (lines in
# folder $1 unless GPBENCH_OUT names one), its table, then the verdict.
run_multiclass() {
    mdir=${GPBENCH_OUT:-$1}
    shift
    if [ ! -x "$BUILD/bench/gpbench" ]; then
        echo "gpbench: $BUILD/bench/gpbench not built: skipped"
        return 1
    fi
    e=bench/experiments/multiclass.json
    "$BUILD/bench/gpbench" run "$e" "$@" --out "$mdir/multiclass.jsonl" || return 1
    "$BUILD/bench/gpbench" table "$e" "$mdir/multiclass.jsonl" || return 1
    if /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1; then
        /usr/bin/python3 bench/sklearn_multiclass.py --verdict "$mdir/multiclass.jsonl"
    fi
}
# bench_exact then scikit-learn on the same rows (folder $1); the remaining
# arguments go to bench_exact, --quick also to the Python side.
run_exact() {
    xdir=$1
    shift
    if [ ! -x "$BUILD/bench/bench_exact" ]; then
        echo "bench_exact: $BUILD/bench/bench_exact not built: skipped"
        return 1
    fi
    xst=0
    "$BUILD/bench/bench_exact" --splits-out "$xdir" "$@" || xst=1
    xq=""
    for a in "$@"; do [ "$a" = --quick ] && xq=--quick; done
    if /usr/bin/python3 -c 'import sklearn' >/dev/null 2>&1; then
        # shellcheck disable=SC2086
        /usr/bin/python3 bench/sklearn_exact.py --splits "$xdir" $xq || xst=1
    else
        echo "## scikit-learn: skipped (/usr/bin/python3 cannot import sklearn;" \
             "install python3-sklearn to compare)"
        echo
    fi
    return $xst
}
# bench_online then its HTTP part (bench/online/http.sh); arguments go to
# bench_online, --quick to both.
run_online() {
    if [ ! -x "$BUILD/bench/bench_online" ]; then
        echo "bench_online: $BUILD/bench/bench_online not built: skipped"
        return 1
    fi
    ost=0
    "$BUILD/bench/bench_online" "$@" || ost=1
    oq=""
    for a in "$@"; do [ "$a" = --quick ] && oq=--quick; done
    # shellcheck disable=SC2086
    sh bench/online/http.sh "$BUILD" $oq || ost=1
    return $ost
}
# Every experiment file (or those named by EXPERIMENTS, e.g. "ssgp") through
# build/bench/gpbench: the JSON lines to $tmp/NAME.jsonl (kept there when
# GPBENCH_OUT names a folder: $GPBENCH_OUT/NAME.jsonl), then the tables.
run_experiments() {
    if [ ! -x "$BUILD/bench/gpbench" ]; then
        echo "gpbench: $BUILD/bench/gpbench not built: skipped"
        return 1
    fi
    est=0
    edir=${GPBENCH_OUT:-${tmp:-}}
    if [ -z "$edir" ]; then
        edir=$(mktemp -d "${TMPDIR:-/tmp}/gpbench.XXXXXX") || return 1
        echo "gpbench: JSON lines in $edir" >&2
    fi
    for e in bench/experiments/*.json; do
        n=$(basename "$e" .json)
        if [ -n "${EXPERIMENTS:-}" ]; then
            case ",$EXPERIMENTS," in *",$n,"*) ;; *) continue ;; esac
        fi
        "$BUILD/bench/gpbench" run "$e" "$@" --out "$edir/$n.jsonl" || { est=1; continue; }
        "$BUILD/bench/gpbench" table "$e" "$edir/$n.jsonl" || est=1
    done
    return $est
}
# bench/multioutput.py (bench/results/multioutput.md); arguments go to it.
run_multioutput() {
    gpt=${GPYTORCH_PATH:-}
    [ -z "$gpt" ] && [ -d /work/wt/gpytorch181/gpytorch ] && gpt=/work/wt/gpytorch181
    /usr/bin/python3 bench/multioutput.py --build "$BUILD" ${gpt:+--gpytorch "$gpt"} "$@"
}
# Only the experiments (all, or EXPERIMENTS=a,b), with gpbench run's arguments:
#   sh bench/run.sh BUILD_DIR experiments [--quick | --smoke] [--datasets a,b]
# (--smoke: --quick with every method at its descriptor's quick preset and no
# peers: a few minutes in all, to check that every experiment file still runs)
if [ "${1:-}" = experiments ]; then
    shift
    run_experiments "$@"
    exit $?
fi
if [ "${1:-}" = exact ]; then
    shift
    xtmp=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-exact.XXXXXX") || exit 1
    trap 'rm -rf "$xtmp"' EXIT INT TERM
    run_exact "$xtmp" "$@"
    exit $?
fi
if [ "${1:-}" = multioutput ]; then
    shift
    run_multioutput "$@"
    exit $?
fi
if [ "${1:-}" = online ]; then
    shift
    run_online "$@"
    exit $?
fi
if [ "${1:-}" = kernel_approx ]; then
    shift
    if [ ! -x "$BUILD/bench/bench_kernel_approx" ]; then
        echo "bench_kernel_approx: $BUILD/bench/bench_kernel_approx not built"
        exit 1
    fi
    exec "$BUILD/bench/bench_kernel_approx" "$@"
fi
if [ "${1:-}" = classification ]; then
    shift
    ctmp=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-cls.XXXXXX") || exit 1
    trap 'rm -rf "$ctmp"' EXIT INT TERM
    run_classification "$ctmp" "$@"
    exit $?
fi
if [ "${1:-}" = multiclass ]; then
    shift
    mtmp=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-mc.XXXXXX") || exit 1
    trap 'rm -rf "$mtmp"' EXIT INT TERM
    run_multiclass "$mtmp" "$@"
    exit $?
fi
if [ "${1:-}" = hkd ]; then
    shift
    if [ ! -x "$BUILD/bench/bench_hkd" ]; then
        echo "bench_hkd: $BUILD/bench/bench_hkd not built"
        exit 1
    fi
    exec "$BUILD/bench/bench_hkd" "$@"
fi
if [ "${1:-}" = gwi ]; then
    shift
    EXPERIMENTS=gwi run_experiments "$@"
    exit $?
fi
if [ "${1:-}" = soak ]; then
    shift
    exec sh bench/soak.sh "$BUILD" "$@"
fi
EXTRA="$*"
PYEXTRA=""
for a in "$@"; do
    [ "$a" = --quick ] && PYEXTRA="--quick"
done
status=0

DATASETS=${GPSERVE_DATASETS:-../shared/datasets}
if [ ! -d "$DATASETS/splits" ]; then
    echo "note: datasets folder $DATASETS not found: dataset benchmarks are skipped" \
         "(set GPSERVE_DATASETS to the shared datasets folder)"
    echo
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpserve-bench.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# shellcheck disable=SC2086
run_exact "$tmp" $EXTRA || status=1

# The HTTP service against scikit-learn behind Flask/gunicorn (wrk on loopback).
# shellcheck disable=SC2086
sh bench/http/run.sh "$BUILD" $EXTRA || status=1
# The Open Inference Protocol V2, the Python client and the browser view's
# files against v1 predict (bench/results/protocols.md).
# shellcheck disable=SC2086
sh bench/http/protocols.sh "$BUILD" $EXTRA || status=1
# PostgreSQL against SQLite, replicas behind haproxy, the fit queue across
# replicas (bench/results/scale.md).
# shellcheck disable=SC2086
sh bench/scale.sh "$BUILD" $EXTRA || status=1

# The batch-invariant triangular solve behind exact's predictions against
# OpenBLAS's dtrsv/dtrsm (bench/results/trsolve.md).
if [ -x "$BUILD/bench/bench_trsolve" ]; then
    # shellcheck disable=SC2086
    OPENBLAS_NUM_THREADS=1 "$BUILD/bench/bench_trsolve" $EXTRA || status=1
fi

# Peak memory of a fit over 10^6 rows read in chunks against the same rows in
# memory (bench/results/stream.md; --quick: 10^5 rows).
if [ -x "$BUILD/bench/bench_stream" ]; then
    # shellcheck disable=SC2086
    "$BUILD/bench/bench_stream" --memory $PYEXTRA || status=1
fi

# The soak: mixed traffic with the daemon's RSS sampled (bench/soak.sh).
soak_seconds=${SOAK_SECONDS:-600}
[ -n "$PYEXTRA" ] && soak_seconds=${SOAK_SECONDS:-60}
sh bench/soak.sh "$BUILD" "$soak_seconds" || status=1

# Kernel approximation by random features (all sweeps; ~15 minutes, --quick
# for a smoke run of a few seconds).
if [ -x "$BUILD/bench/bench_kernel_approx" ]; then
    # shellcheck disable=SC2086
    "$BUILD/bench/bench_kernel_approx" $PYEXTRA || status=1
else
    echo "bench_kernel_approx: $BUILD/bench/bench_kernel_approx not built: skipped"
    status=1
fi

# Every experiment file (bench/experiments/*.json; bench/README.md) through the
# driver: its JSON lines to $tmp, then its tables (ssgp: the shared datasets,
# ~30 minutes, bench/results/ssgp.md; gwi: gwi against exact, sgpr and msrfr,
# bench/results/gwi.md, hours, most of it msrfr on the large sets; sparse and
# sparse_large: sgpr and renyi against exact, bench/results/sparse.md, ~45
# minutes; msrfr: Table 1 of the M-SRFR paper, bench/results/msrfr.md, about
# 45 minutes; classification: svgp and pls on the binary and count sets with
# their scikit-learn peers, bench/results/classification.md, about an hour;
# multiclass: svgp softmax against GPC one-vs-rest and one-vs-one, the
# multiclass section of bench/results/classification.md, about 16 minutes).
run_experiments $PYEXTRA || status=1

# Any other benchmark program (bench_hkd: hkd against sgpr, bench/results/hkd.md, ~25 minutes), run
# without arguments, or with --quick when given.
# (by their sources, one-file or folder, so that a program an older build left behind, since
# replaced by an experiment file, does not run again)
for src in bench/bench_*.c bench/bench_*/; do
    b="$BUILD/bench/$(basename "$src" .c)" # a folder program bench/bench_NAME/ too
    [ -x "$b" ] || continue
    [ "$(basename "$b")" = bench_exact ] && continue
    [ "$(basename "$b")" = bench_kernel_approx ] && continue
    [ "$(basename "$b")" = bench_soak ] && continue # the soak's client (above)
    [ "$(basename "$b")" = bench_online ] && continue # with its HTTP part (below)
    # shellcheck disable=SC2086
    "$b" $PYEXTRA || status=1
done

# Several outputs (bench/multioutput.py; bench/results/multioutput.md).
# shellcheck disable=SC2086
run_multioutput $PYEXTRA || status=1

# rfgp online (bench_online, then its HTTP part; bench/results/online.md).
# shellcheck disable=SC2086
run_online $PYEXTRA || status=1
exit $status
