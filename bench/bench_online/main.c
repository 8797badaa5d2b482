/* Benchmark of online learning with `rfgp` (random-feature GP learning just
 * in time: KJIT, docs/methods/kernel-jit-online.md), issue 16; the content of
 * bench/results/online.md.
 *
 * Run from the repository root (bench/run.sh: `sh bench/run.sh BUILD online
 * [--quick]`, which also runs the HTTP part, bench/online/http.sh):
 *   build/bench/bench_online [--quick] [--parts accuracy,stream,speed]
 *                            [--peers LIST] [--problems K] [--train N] [--test N]
 *                            [--features D] [--inner-features D] [--observes N]
 *                            [--stream-problems K] [--pairs-out DIR]
 * Prints markdown to stdout and progress to stderr. Everything is generated
 * (no dataset): EP on toy Bayesian logistic regression (bench/support/kjit_ep)
 * with the quadrature oracle (bench/support/kjit_oracle, checked against a
 * brute-force grid integral by tests/unit/test_kjit_oracle.c).
 *
 * Part 1 "accuracy" (the note's §5 Experiment 1): the binary logistic factor
 * f(p | z) = delta(p - sigma(z)), incoming m_{z->f} = N(z; m, v) (the EP
 * cavity) and m_{p->f} = Beta(p; a, b) (the observed label y as Beta(y + 1,
 * 2 - y)); target the projected tilted q_{f->z} = proj[N(z; m, v)
 * sigma(z)^(a-1) (1 - sigma(z))^(b-1)] as (mean, log variance), two outputs
 * (§5 [code]). Inputs from EP on toy logistic regression: d = 20, n = 400
 * points a problem, 5 EP sweeps (sequential, undamped), problems with seeds
 * 1..20 (--problems), one true w ~ N(0, I) (gp_rng seed TRUE_W_SEED), x ~
 * N(0, I), prior w ~ N(0, I); every (cavity, label, projected tilted) seen is
 * a pair (20 x 400 x 5 = 40,000), shuffled with seed SHUFFLE_SEED; the first
 * 5000 train (--train), the next 3000 test (--test). Metric: mean and SD over
 * the test pairs of log KL[q || q^], q^ = N(predicted mean, exp(predicted log
 * variance)). Peers (--peers), all fitted on the same pairs:
 *   rfgp_median  rfgp, input messages [normal, beta] (the kernel on the joint
 *                mean embeddings, §3), width_selection median (KJIT's online
 *                heuristic, §4)
 *   rfgp_loocv   the same, widths by closed-form leave-one-out CV (§4, the
 *                note's batch experiments)
 *   rfgp_ml      the same, widths by type-II maximum likelihood (§7)
 *   rfgp_online  rfgp_median fitted on its first warm-up rows, the rest
 *                observed one row at a time (the online path; same widths
 *                rule, so it should match rfgp_median)
 *   rfgp_mv      rfgp on points: the stacked (m, v, a, b) (the note's "MV
 *                kernel" with random features), median widths
 *   exact_mv     an exact GP (rbf ARD, hyperparameters and noise by
 *                L-BFGS, standardize on) on the same stacked (m, v, a, b),
 *                one model per output
 * Every rfgp peer: noise variance NOISE (the note's sigma_y^2, fixed; --noise),
 * features --features (default rfgp's 800 outer, 400 inner).
 *
 * Part 2 "stream" (the picture of Experiment 3): EP run by a client that
 * uses one rfgp model as its message operator, just in time: for every site
 * it predicts the projected tilted message; when the prediction carries
 * ask_oracle (always during warm-up) it calls the oracle, observes the pair
 * and uses the oracle's message, otherwise the prediction's. Problems of
 * kind A (d = 20, x ~ N(0, I), seeds 101..) then kind B (d = 20, x ~
 * N(0, STREAM_B_SCALE^2 I): cavities of a different range, seeds 201..),
 * --stream-problems of each. Reported: the oracle rate in windows of
 * STREAM_WINDOW messages against the stream position (it must rise after
 * the change), and the KL of each JIT posterior from the posterior of EP
 * with the oracle alone on the same problem.
 *
 * Part 3 "speed" (in process): rfgp at D = 800 outer features, fitted on its
 * warm-up rows, then single-row gp_model_observe calls (--observes, default
 * 10^4 rows, the mean per call), batches of 10 and of 100 (the same number of
 * rows, the mean per row), and single-point predict (mean per call): for
 * points (d = 4, p = 1 output) and for the messages input (p = 2). The peer
 * in the same run: the note's own update (§2, the kernel-ep code's): the
 * same random features, Sherman-Morrison on an explicit D x D covariance
 * (dsymv, dsyr) and the mean recomputed by dgemv, shared by the outputs.
 * Target (the issue): 50 us per observation.
 *
 * Duration on the shared 2-core machine: see bench/results/online.md. */

#include "bench/bench_online/online.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/support/args.h"
#include "bench/support/cli.h"
#include "bench/support/clock.h"

#define DEFAULT_PROBLEMS 20
#define DEFAULT_TRAIN 5000
#define DEFAULT_TEST 3000
#define DEFAULT_EXACT_TRAIN 2000 /* an exact fit of 5000 pairs: ~15 minutes an output here */
#define DEFAULT_STREAM_PROBLEMS 10
#define DEFAULT_OBSERVES 10000

/* ---- options ---- */

static const char *const part_names[N_PARTS] = {"accuracy", "stream", "speed"};

/* 0 to run, 1 after --help, 2 after a message on stderr. */
static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 0; i < N_PARTS; i++)
        o->parts[i] = 1;
    for (int i = 0; i < N_PEERS; i++)
        o->peers[i] = 1;
    long problems = -1, stream = -1, train = -1, test = -1, observes = -1, exact_train = -1;
    const char *parts = NULL, *peers = NULL, *pairs_out = NULL;
    double noise = NAN, gate_kappa = NAN; /* NAN: not given */
    char h_problems[64], h_train[64], h_test[64], h_exact[80], h_observes[64], h_stream[64];
    snprintf(h_problems, sizeof h_problems, "EP problems of part 1 (seeds 1..K, default %d)",
             DEFAULT_PROBLEMS);
    snprintf(h_train, sizeof h_train, "training pairs of part 1 (default %d)", DEFAULT_TRAIN);
    snprintf(h_exact, sizeof h_exact, "exact_mv fits the first N training pairs (default %d)",
             DEFAULT_EXACT_TRAIN);
    snprintf(h_observes, sizeof h_observes, "rows of each observe timing (default %d)",
             DEFAULT_OBSERVES);
    snprintf(h_stream, sizeof h_stream, "problems of each kind in part 2 (default %d)",
             DEFAULT_STREAM_PROBLEMS);
    snprintf(h_test, sizeof h_test, "test pairs of part 1 (default %d)", DEFAULT_TEST);
    const gp_bench_cli_option opts[] = {
        {"quick", GP_BENCH_CLI_FLAG, &o->quick, 0, 0,
         "a smoke run of a minute: 4 problems, 1000/600 pairs, features 300/200, 2000 "
         "observes, 2 stream problems a kind"},
        {"parts", GP_BENCH_CLI_STRING, &parts, 0, 0, "parts to run: accuracy,stream,speed (default all)"},
        {"peers", GP_BENCH_CLI_STRING, &peers, 0, 0,
         "part 1 peers (default all): rfgp_median, rfgp_loocv, rfgp_ml, rfgp_online, rfgp_mv, "
         "exact_mv"},
        {"problems", GP_BENCH_CLI_LONG, &problems, 1, 1000, h_problems},
        {"train", GP_BENCH_CLI_LONG, &train, 10, 1000000, h_train},
        {"test", GP_BENCH_CLI_LONG, &test, 10, 1000000, h_test},
        {"exact-train", GP_BENCH_CLI_LONG, &exact_train, 10, 1000000, h_exact},
        {"features", GP_BENCH_CLI_LONG, &o->features, 10, 10000, "rfgp outer features (default rfgp's)"},
        {"inner-features", GP_BENCH_CLI_LONG, &o->inner_features, 10, 10000,
         "rfgp inner features (default rfgp's)"},
        {"observes", GP_BENCH_CLI_LONG, &observes, 100, 100000000, h_observes},
        {"stream-problems", GP_BENCH_CLI_LONG, &stream, 1, 1000, h_stream},
        {"noise", GP_BENCH_CLI_DOUBLE, &noise, 0, 0,
         "part 1's rfgp noise variance, positive (default the note's 1e-4)"},
        {"gate-kappa", GP_BENCH_CLI_DOUBLE, &gate_kappa, 0, 0,
         "gate_kappa of part 2's rfgp, positive (default rfgp's, 1)"},
        {"pairs-out", GP_BENCH_CLI_STRING, &pairs_out, 0, 0,
         "write the part 1 pairs (train.csv, test.csv) to this folder"},
    };
    size_t n_pos = 0;
    int rc = gp_bench_cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0], "[options]", NULL,
                                0, &n_pos);
    if (rc != 0)
        return rc;
    if (parts != NULL && gp_bench_parse_names(parts, part_names, N_PARTS, o->parts, "--parts") != 0)
        return 2;
    if (peers != NULL && gp_bench_parse_names(peers, peer_names, N_PEERS, o->peers, "--peers") != 0)
        return 2;
    if ((!isnan(noise) && !(noise > 0)) || (!isnan(gate_kappa) && !(gate_kappa > 0))) {
        fprintf(stderr, "%s: --noise and --gate-kappa take a positive number\n", argv[0]);
        return 2;
    }
    o->noise = isnan(noise) ? 0.0 : noise;
    o->gate_kappa = isnan(gate_kappa) ? 0.0 : gate_kappa;
    if (pairs_out != NULL)
        snprintf(o->pairs_out, sizeof o->pairs_out, "%s", pairs_out);
    if (!(o->noise > 0))
        o->noise = NOISE;
    o->problems = problems > 0 ? (int)problems : (o->quick ? 4 : DEFAULT_PROBLEMS);
    o->train = train > 0 ? (size_t)train : (o->quick ? 1000 : DEFAULT_TRAIN);
    o->test = test > 0 ? (size_t)test : (o->quick ? 600 : DEFAULT_TEST);
    o->exact_train =
        exact_train > 0 ? (size_t)exact_train : (o->quick ? 500 : DEFAULT_EXACT_TRAIN);
    o->observes = observes > 0 ? (size_t)observes : (o->quick ? 2000 : DEFAULT_OBSERVES);
    o->stream_problems = stream > 0 ? (int)stream : (o->quick ? 2 : DEFAULT_STREAM_PROBLEMS);
    if (o->quick && o->features == 0)
        o->features = 300;
    if (o->quick && o->inner_features == 0)
        o->inner_features = 200;
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    gp_kjit_oracle oracle;
    gp_kjit_oracle_init(&oracle);
    double t0 = gp_bench_seconds();
    printf("# Online learning (rfgp, KJIT): bench_online%s\n\n", o.quick ? " --quick" : "");
    int status = 0;
    if (o.parts[P_ACCURACY])
        status |= part_accuracy(&o, &oracle);
    if (o.parts[P_STREAM])
        status |= part_stream(&o, &oracle);
    if (o.parts[P_SPEED])
        status |= part_speed(&o, &oracle);
    fprintf(stderr, "bench_online: done in %.1f s\n", gp_bench_seconds() - t0);
    printf("(bench_online: %.0f s)\n", gp_bench_seconds() - t0);
    return status;
}
