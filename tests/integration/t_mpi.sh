#!/bin/sh
# Integration area "mpi": fits sharded over MPI (docs/design/scale-out.md,
# "Fits beyond one machine"), under `mpirun --oversubscribe -np P` on this
# machine. Skipped with a message without Open MPI's mpirun or without the MPI
# programs (make builds them when mpicc exists).
# Sourced by tests/integration/run.sh (lib.sh loaded, the main daemon on $PORT).
#
# Open MPI refuses to run as root (CI does) unless both variables below are set:
# the area's own daemon inherits them (the daemon passes its environment to the
# launcher and sets nothing itself; the main daemon, started before, has them
# not, and a distributed job on it is refused by mpirun, which the job names).
MPI_ASAN_SAVED=${ASAN_OPTIONS-}
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
MPI_TEST=$ROOT/$BUILD/tests/mpi/test_reduce
FIT=$ROOT/$BUILD/gpserve-fit
case $BUILD in /*) MPI_TEST=$BUILD/tests/mpi/test_reduce FIT=$BUILD/gpserve-fit ;; esac
MPIRUN="timeout $((120 * SLOW)) mpirun --oversubscribe"
# Under the sanitizers: Open MPI's own components leak at MPI_Finalize (and
# are unloaded by then, so no suppression can name them); leak checking of
# the fit code itself is the unit tests' (rows_fixture.h runs the shards).
case $BUILD in *san*) ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0; export ASAN_OPTIONS ;; esac

section "mpi"
if ! command -v mpirun >/dev/null 2>&1; then
    note "mpirun not found (Debian's openmpi-bin, make deps): the mpi area is skipped"
elif [ ! -x "$MPI_TEST" ] || [ ! -x "$FIT" ]; then
    note "$FIT or $MPI_TEST is not built (mpicc missing?): the mpi area is skipped"
else

# The area's own daemon on a database of its own: in a full run the main
# daemon is gone by now (the restart and crash areas stop it), and a check
# of GET /v1/methods against it would skip everything below. Started like
# the main daemon, without the OMPI variables (mpi_daemon.sh checks that a
# distributed job on it, as root, is refused by mpirun naming them) and with
# the sanitizers' leak check of the daemon itself kept.
MPI_SAVED_PORT=$PORT
MPI_DB=$(db_for mpi_area)
unset OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
_mpi_asan=${ASAN_OPTIONS-}
if [ -n "$MPI_ASAN_SAVED" ]; then ASAN_OPTIONS=$MPI_ASAN_SAVED; else unset ASAN_OPTIONS; fi
start_daemon "$T/mpi_area.log" --db "$MPI_DB"
MPI_AREA_RC=$?
ASAN_OPTIONS=$_mpi_asan
export ASAN_OPTIONS
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
MPI_AREA_PID=$DPID
verdict "the mpi area's daemon starts" $MPI_AREA_RC "see $T/mpi_area.log"
PORT=$DPORT

# ---- the reduction: the same bits run to run, the sequential sum to rounding
for p in 1 2 4; do
    $MPIRUN -np $p "$MPI_TEST" >"$T/reduce$p.out" 2>"$T/reduce$p.err"
    verdict "ordered sum over $p ranks: rank-ordered bits on every rank, the sequential sum to rounding" \
        $? "$(tail -n 5 "$T/reduce$p.err" "$T/reduce$p.out" | tr '\n' ' ')"
done
$MPIRUN -np 2 "$MPI_TEST" >"$T/reduce2b.out" 2>&1
grep '^reduce ' "$T/reduce2.out" >"$T/bits_a"
grep '^reduce ' "$T/reduce2b.out" >"$T/bits_b"
[ -s "$T/bits_a" ] && cmp -s "$T/bits_a" "$T/bits_b"
verdict "ordered sum over 2 ranks, run twice: bit-identical" $? "$(diff "$T/bits_a" "$T/bits_b" | head -4)"


# ---- gpserve-fit's refusals: arguments, and a fit it cannot shard
FDB=$T/mpi_fit.db
$MPIRUN -np 2 "$FIT" --db "$FDB" >"$T/fit_usage.out" 2>"$T/fit_usage.err"
[ $? -eq 2 ] && grep -q -- '--job ID' "$T/fit_usage.err"
verdict "gpserve-fit without --job or --request: exit 2 with why" $? "$(head -c 300 "$T/fit_usage.err")"
gen_xy 60 2 5 | csv_to_json mpi_exact '"method":"exact",' >"$T/mpi_exact.json"
$MPIRUN -np 2 "$FIT" --db "$FDB" --request "$T/mpi_exact.json" >"$T/fit_exact.out" 2>"$T/fit_exact.err"
rc=$?
grep '^{"error"' "$T/fit_exact.err" | head -n 1 >"$T/fit_exact.json"
[ $rc -eq 1 ] && [ "$(jqb '.error.code' "$T/fit_exact.json")" = unsupported ] &&
    [ "$(jqb '.error.field' "$T/fit_exact.json")" = data.dataset ] && [ ! -s "$T/fit_exact.out" ]
verdict "gpserve-fit of a method that needs its rows in memory: exit 1, one JSON error naming data.dataset, nothing saved" \
    $? "exit $rc: $(head -c 300 "$T/fit_exact.err")"

# ---- sharded fits against the single-process fit, per method that streams
req GET /v1/methods
STREAMING=$(jqb '[.. | objects | select(.streams_rows? == true) | .name] | unique | .[]')
# ssgp, sgpr and svgp stream: an empty list is a daemon that did not answer,
# not a build without them (a note here once hid every check below in CI)
_missing=
for _m in ssgp sgpr svgp; do echo "$STREAMING" | grep -qx "$_m" || _missing="$_missing $_m"; done
[ -z "$_missing" ]
verdict "GET /v1/methods: ssgp, sgpr and svgp stream their rows" $? "streaming: '$STREAMING'"
gen_xy 400 2 17 >"$T/mpi_rows.csv"
PRED_X='{"X":[[0.1,0.2],[-1,1.5],[2,-0.5]]}'
# Are the means of two predict answers equal to rtol (relative, plus rtol absolute)?
close_means() {
    jq -n --slurpfile a "$1" --slurpfile b "$2" --argjson t "$3" \
        '[$a[0].mean, $b[0].mean] | transpose | all(((.[0] - .[1]) | fabs) <= $t * (1 + (.[1] | fabs)))' |
        grep -q true
}
for m in $STREAMING; do
    # svgp over rows trains by Adam (its L-BFGS needs the rows in memory): the
    # in-memory reference too, with the same budget
    # sgpr with Z fixed: with Z optimised its bound is nearly flat along Z, so
    # sums added in another order (1e-16 apart) move where L-BFGS stops by
    # ~1e-5 (docs/design/scale-out.md); converged hyperparameters agree to 1e-10
    OPTS=
    [ "$m" = svgp ] && OPTS='"options":{"optimizer":"adam","epochs":150,"learning_rate":0.05},'
    [ "$m" = sgpr ] && OPTS='"options":{"inducing":20,"optimize_inducing":false,"tolerance":1e-15},'
    csv_to_json "mpi_ref_$m" "\"method\":\"$m\",\"seed\":3,$OPTS" <"$T/mpi_rows.csv" >"$T/ref_$m.json"
    check_json "$m: the single-process fit" 201 /v1/models "@$T/ref_$m.json"
    cp "$T/body" "$T/ref_$m.out"
    for p in 1 2 4; do
        csv_to_json "mpi_${m}_$p" "\"method\":\"$m\",\"seed\":3,$OPTS" <"$T/mpi_rows.csv" >"$T/req_$m$p.json"
        $MPIRUN -np $p "$FIT" --db "$MPI_DB" --request "$T/req_$m$p.json" --chunk 64 \
            >"$T/fit_$m$p.out" 2>"$T/fit_$m$p.err"
        verdict "$m over $p ranks: saved" $? "$(head -c 300 "$T/fit_$m$p.err")"
        check_json "$m over $p ranks: predicts" 200 "/v1/models/mpi_${m}_$p/predict" "$PRED_X"
        cp "$T/body" "$T/pred_${m}_$p"
        if [ $p -gt 1 ]; then
            # the same streamed fit over p shards: equal to one rank's to 1e-10 (the sums
            # are added in another order, so not in bits)
            close_means "$T/pred_${m}_$p" "$T/pred_${m}_1" 1e-10
            verdict "$m over $p ranks: predictions equal one rank's to 1e-10" $? \
                "$(head -c 200 "$T/pred_${m}_$p") vs $(head -c 200 "$T/pred_${m}_1")"
        fi
    done
    # One rank against the daemon's fit of the same rows held in memory: sgpr and ssgp
    # sum the same statistics in chunks (equal to rounding, then through the
    # optimiser: 1e-6); svgp's minibatches over rows are blocks on global indices,
    # not the in-memory shuffle, so only its accuracy is compared (RMSE within 10 %).
    check_json "$m: the single-process fit predicts" 200 "/v1/models/mpi_ref_$m/predict" "$PRED_X"
    if [ "$m" = svgp ]; then
        jq -n --slurpfile a "$T/pred_${m}_1" --slurpfile b "$T/body" \
            '[$a[0].mean, $b[0].mean] | transpose | all(((.[0] - .[1]) | fabs) <= 0.1 + 0.1 * (.[1] | fabs))' |
            grep -q true
        verdict "$m over 1 rank: predictions near the in-memory fit's (minibatches differ)" $? \
            "$(head -c 200 "$T/pred_${m}_1") vs $(head -c 200 "$T/body")"
    else
        close_means "$T/pred_${m}_1" "$T/body" 1e-6
        verdict "$m over 1 rank: predictions equal the in-memory fit's to 1e-6" $? \
            "$(head -c 200 "$T/pred_${m}_1") vs $(head -c 200 "$T/body")"
    fi
    csv_to_json "mpi_${m}_2b" "\"method\":\"$m\",\"seed\":3,$OPTS" <"$T/mpi_rows.csv" >"$T/req_${m}2b.json"
    $MPIRUN -np 2 "$FIT" --db "$MPI_DB" --request "$T/req_${m}2b.json" --chunk 64 >"$T/fit_${m}2b.out" 2>&1
    jq -S '{kernel, noise_variance, diagnostics: .diagnostics.objective}' "$T/fit_${m}2.out" >"$T/a2" 2>/dev/null
    jq -S '{kernel, noise_variance, diagnostics: .diagnostics.objective}' "$T/fit_${m}2b.out" >"$T/b2" 2>/dev/null
    [ -s "$T/a2" ] && cmp -s "$T/a2" "$T/b2"
    verdict "$m over 2 ranks, run twice: the same bits (17 digits)" $? "$(diff "$T/a2" "$T/b2" | head -4)"
done

# ---- gpserve-fit --stats: rank 0's last line of stdout, what the run spent
if [ -n "$STREAMING" ]; then
    SM=sgpr
    echo "$STREAMING" | grep -qx sgpr || SM=$(echo "$STREAMING" | head -n 1)
    SOPTS=
    [ "$SM" = sgpr ] && SOPTS='"options":{"inducing":20,"optimize_inducing":false},'
    [ "$SM" = svgp ] && SOPTS='"options":{"optimizer":"adam","epochs":5},'
    csv_to_json "mpi_stats" "\"method\":\"$SM\",\"seed\":3,$SOPTS" <"$T/mpi_rows.csv" >"$T/req_stats.json"
    $MPIRUN -np 2 "$FIT" --db "$MPI_DB" --request "$T/req_stats.json" --chunk 64 --stats \
        >"$T/fit_stats.out" 2>"$T/fit_stats.err"
    verdict "gpserve-fit --stats over 2 ranks: saved" $? "$(head -c 300 "$T/fit_stats.err")"
    head -n 1 "$T/fit_stats.out" >"$T/stats_model.json"
    tail -n 1 "$T/fit_stats.out" >"$T/stats.json"
    [ "$(count_lines <"$T/fit_stats.out")" = 2 ] &&
        jq -e --slurpfile m "$T/stats_model.json" --arg method "$SM" '
        .method == $method and .status == "saved" and .ranks == 2 and .rows == 400 and
        .rows_per_rank_min == 200 and .rows_per_rank_max == 200 and .chunk == 64 and
        .evaluations == $m[0].diagnostics.evaluations and .evaluations > 0 and
        .iterations == $m[0].diagnostics.iterations and .reductions >= .evaluations and
        (.doubles_per_evaluation * .evaluations - .doubles_reduced | fabs) <= 1e-9 * .doubles_reduced and
        .bytes_per_evaluation == 8 * .doubles_per_evaluation and
        (.seconds_per_evaluation * .evaluations - .fit_seconds | fabs) <= 1e-9 * .fit_seconds and
        .seconds >= .fit_seconds and .fit_seconds > 0 and
        .reduce_seconds_max >= .reduce_seconds and .reduce_seconds >= 0 and
        .read_seconds_max >= .read_seconds and .read_seconds > 0 and
        .peak_rss_mb_max >= .peak_rss_mb and .peak_rss_mb > 0' "$T/stats.json" >/dev/null
    verdict "gpserve-fit --stats: one JSON line after the model's: ranks, rows per rank, the model's evaluations, reductions and their doubles, seconds, peak RSS" \
        $? "$(head -c 400 "$T/stats.json")"
fi

# ---- the daemon's distributed jobs (they read a data set: PUT /v1/datasets)
req GET /openapi.yaml
if ! grep -q '/v1/datasets' "$T/body" 2>/dev/null || [ -z "$STREAMING" ]; then
    note "data sets (PUT /v1/datasets) or a method that streams are not in this build: the daemon's distributed jobs (ranks 2, a rank killed, cancel) are skipped"
else
    . "$HERE/mpi_daemon.sh"
fi
stop_daemon "$MPI_AREA_PID"
PORT=$MPI_SAVED_PORT

fi
