/* bench_online part 2 "stream" (main.c's comment): EP with one rfgp model as
 * its message operator, just in time, over a change of input range. */

#include "bench/bench_online/online.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/kjit_ep.h"
#include "core/base/error.h"

#define STREAM_A_SEED 101
#define STREAM_B_SEED 201
#define STREAM_B_SCALE 3.0
#define STREAM_WINDOW 2000 /* one problem's messages: n x sweeps */
#define STREAM_TEST_POINTS 10000
#define STREAM_TEST_SEED 100000

/* ---- part 2: the stream ---- */

typedef struct jit_client {
    gp_model *model;
    gp_kjit_oracle *oracle;
    size_t asked, seen, refused, clamped;
    unsigned char *flags; /* one per message seen */
    size_t flags_cap;
    char why[WHY_LEN];
} jit_client;

/* The projected tilted message for (m, v, a, b): predicted, or from the
 * oracle (and observed) when the model asks. -1 on a failure (why set). */
static int jit_message(jit_client *c, double m, double v, double a, double b, double *mean,
                       double *var)
{
    double x[IN_COLS] = {m, v, a, b}, pm[OUT_COLS], pv[OUT_COLS];
    unsigned char ask = 1;
    gp_online_status st;
    gp_model_online_status(c->model, &st);
    if (!st.warmup) {
        gp_predict_request pr;
        memset(&pr, 0, sizeof pr);
        pr.X = x;
        pr.m = 1;
        pr.d = IN_COLS;
        pr.include_noise = 1;
        gp_prediction out;
        memset(&out, 0, sizeof out);
        out.mean = pm;
        out.variance = pv;
        out.ask_oracle = &ask;
        gp_error err;
        int rc = gp_model_predict(c->model, &pr, &out, &err);
        if (rc != GP_OK) {
            snprintf(c->why, sizeof c->why, "predict: %s (%s)", gp_status_name(rc), err.message);
            return -1;
        }
    }
    if (c->seen == c->flags_cap) {
        size_t cap = c->flags_cap ? 2 * c->flags_cap : 65536;
        unsigned char *f = realloc(c->flags, cap);
        if (f == NULL)
            return -1;
        c->flags = f;
        c->flags_cap = cap;
    }
    c->flags[c->seen++] = ask;
    if (!ask) {
        *mean = pm[0];
        *var = exp(pm[1]);
        return 0;
    }
    gp_kjit_moments q;
    gp_error err;
    if (gp_kjit_logistic_tilted(c->oracle, m, v, a, b, &q, &err) != GP_OK) {
        snprintf(c->why, sizeof c->why, "oracle: %s", err.message);
        return -1;
    }
    double y[OUT_COLS] = {q.mean, log(q.var)};
    int rc = gp_model_observe(c->model, x, y, 1, &err);
    if (rc != GP_OK) {
        snprintf(c->why, sizeof c->why, "observe: %s (%s)", gp_status_name(rc), err.message);
        return -1;
    }
    c->asked++;
    *mean = q.mean;
    *var = q.var;
    return 0;
}

/* How a JIT EP run ended against EP with the oracle alone on the same problem. */
typedef struct jit_outcome {
    double kl;                     /* KL[oracle posterior || JIT posterior] */
    double err_jit, err_oracle;    /* test error of the posterior means */
} jit_outcome;

/* JIT EP on one problem; its final posterior against the oracle EP's. */
static int jit_problem(jit_client *c, const double *w, double x_scale, uint64_t seed,
                       gp_kjit_oracle *oracle, jit_outcome *res)
{
    gp_error err;
    gp_kjit_problem prob;
    gp_kjit_ep ep;
    if (gp_kjit_problem_make(w, EXP_D, EXP_N, x_scale, seed, &prob, &err) != GP_OK)
        return -1;
    if (gp_kjit_ep_init(&ep, &prob, PRIOR_VAR, &err) != GP_OK) {
        gp_kjit_problem_free(&prob);
        return -1;
    }
    int status = 0;
    for (int s = 0; s < EXP_SWEEPS && status == 0; s++) {
        for (size_t i = 0; i < EXP_N; i++) {
            double m, v, a, b, mean, var;
            if (gp_kjit_ep_cavity(&ep, i, &m, &v) != 0) {
                c->refused++;
                continue;
            }
            gp_kjit_label_beta(prob.y[i], &a, &b);
            if (jit_message(c, m, v, a, b, &mean, &var) != 0) {
                status = -1;
                break;
            }
            gp_kjit_ep_update(&ep, i, m, v, mean, var, 1.0);
        }
        if (status == 0 && gp_kjit_ep_refresh(&ep, &err) != GP_OK)
            c->refused++;
    }
    c->refused += ep.skipped;
    c->clamped += ep.clamped;
    double mu[EXP_D], S[EXP_D * EXP_D];
    ep_stats st;
    memset(&st, 0, sizeof st);
    if (status == 0 && run_oracle_ep(w, EXP_D, EXP_N, x_scale, seed, 1, EXP_SWEEPS, oracle, NULL,
                                     mu, S, &st) == 0) {
        res->kl = gp_kjit_gauss_kl_d(mu, S, ep.mu, ep.Sigma, EXP_D);
        res->err_oracle = gp_kjit_test_error(w, mu, EXP_D, STREAM_TEST_POINTS, x_scale,
                                             seed + STREAM_TEST_SEED);
        res->err_jit = gp_kjit_test_error(w, ep.mu, EXP_D, STREAM_TEST_POINTS, x_scale,
                                          seed + STREAM_TEST_SEED);
    } else {
        res->kl = res->err_oracle = res->err_jit = NAN;
    }
    gp_kjit_ep_free(&ep);
    gp_kjit_problem_free(&prob);
    return status;
}

int part_stream(const options *o, gp_kjit_oracle *oracle)
{
    printf("## 2. The oracle rate over a stream with a change of problem (Experiment 3's "
           "picture)\n\n");
    rfgp_spec s = {.messages = 1,
                   .widths = "median",
                   .features = o->features,
                   .inner = o->inner_features,
                   .warmup = -1,
                   .outputs = OUT_COLS,
                   .gate_kappa = o->gate_kappa};
    jit_client c;
    memset(&c, 0, sizeof c);
    c.oracle = oracle;
    c.model = rfgp_fit(&s, NULL, NULL, 0, IN_COLS, c.why, sizeof c.why);
    if (c.model == NULL) {
        printf("skipped: %s\n\n", c.why);
        return 1;
    }
    gp_online_status st0;
    gp_model_online_status(c.model, &st0);
    double w[EXP_D];
    gp_kjit_true_w(EXP_D, TRUE_W_SEED, w);
    int K = o->stream_problems, status = 0;
    jit_outcome *kl = calloc(2 * (size_t)K, sizeof *kl);
    size_t change = 0, asked_a = 0;
    for (int phase = 0; phase < 2 && status == 0 && kl != NULL; phase++) {
        if (phase == 1) {
            change = c.seen;
            asked_a = c.asked;
        }
        for (int k = 0; k < K; k++) {
            double scale = phase == 0 ? 1.0 : STREAM_B_SCALE;
            uint64_t seed = (uint64_t)(phase == 0 ? STREAM_A_SEED : STREAM_B_SEED) + (uint64_t)k;
            if (jit_problem(&c, w, scale, seed, oracle, &kl[phase * K + k]) != 0) {
                printf("stopped: %s\n\n", c.why);
                status = 1;
                break;
            }
            const jit_outcome *r = &kl[phase * K + k];
            fprintf(stderr,
                    "bench_online: stream %c%d: %zu messages, %zu oracle calls, KL %.3g, test "
                    "error %.4f (oracle EP %.4f)\n",
                    phase ? 'B' : 'A', k + 1, c.seen, c.asked, r->kl, r->err_jit, r->err_oracle);
        }
    }
    if (status == 0 && kl != NULL) {
        printf("One rfgp model (input messages [normal, beta], median widths, warm-up %zu rows, "
               "noise %.0e, gate_kappa %g) as the message operator of sequential EP (%d sweeps, n = %d, d = %d); "
               "%d problems of kind A (x ~ N(0, I), seeds %d..) then %d of kind B (x ~ N(0, %.0f^2 "
               "I), seeds %d..). The client predicts each message; when ask_oracle is set (or "
               "during warm-up) it calls the oracle, observes the answer and uses it. %zu "
               "messages, %zu oracle calls (%zu in A, %zu in B); %zu outgoing messages not proper "
               "(the predicted variance above the cavity's, §8.6) were set flat, %zu updates "
               "refused.\n\n",
               st0.warmup_target, NOISE, st0.kappa, EXP_SWEEPS, EXP_N, EXP_D, K, STREAM_A_SEED, K,
               STREAM_B_SCALE, STREAM_B_SEED, c.seen, c.asked, asked_a, c.asked - asked_a,
               c.clamped, c.refused);
        printf("Oracle rate in windows of %d messages (`*` marks the window where kind B "
               "starts):\n\n",
               STREAM_WINDOW);
        printf("| messages | problem kind | oracle rate | |\n|---:|---|---:|---|\n");
        for (size_t s0 = 0; s0 < c.seen; s0 += STREAM_WINDOW) {
            size_t e = s0 + STREAM_WINDOW < c.seen ? s0 + STREAM_WINDOW : c.seen, a = 0;
            for (size_t i = s0; i < e; i++)
                a += c.flags[i];
            double rate = (double)a / (double)(e - s0);
            char bar[41];
            int nb = (int)lround(40 * rate);
            memset(bar, '#', (size_t)nb);
            bar[nb] = '\0';
            printf("| %zu-%zu | %s%s | %.3f | `%s` |\n", s0 + 1, e, s0 < change ? "A" : "B",
                   (change >= s0 && change < e) ? " *" : "", rate, bar);
        }
        double ka = 0, kb = 0, ea = 0, eb = 0, oa = 0, ob = 0;
        for (int k = 0; k < K; k++) {
            ka += kl[k].kl / K;
            kb += kl[K + k].kl / K;
            ea += kl[k].err_jit / K;
            eb += kl[K + k].err_jit / K;
            oa += kl[k].err_oracle / K;
            ob += kl[K + k].err_oracle / K;
        }
        /* the windows either side of the change */
        size_t pre0 = change > STREAM_WINDOW ? change - STREAM_WINDOW : 0, pre = 0, post = 0;
        size_t post1 = change + STREAM_WINDOW < c.seen ? change + STREAM_WINDOW : c.seen;
        for (size_t i = pre0; i < change; i++)
            pre += c.flags[i];
        for (size_t i = change; i < post1; i++)
            post += c.flags[i];
        double rpre = change > pre0 ? (double)pre / (double)(change - pre0) : NAN;
        double rpost = post1 > change ? (double)post / (double)(post1 - change) : NAN;
        printf("\nOracle rate in the %d messages before the change %.3f, in the %d after it "
               "%.3f: %s.\n\n",
               STREAM_WINDOW, rpre, STREAM_WINDOW, rpost,
               rpost > rpre ? "it rises after the change" : "it does NOT rise");
        printf("The posteriors (means over the problems of a kind): KL[oracle-EP posterior || "
               "JIT-EP posterior] A %.3g, B %.3g; test error of the posterior mean on %d fresh "
               "points a problem (labels from the true w): JIT-EP A %.4f, B %.4f; oracle-EP A "
               "%.4f, B %.4f.\n\n",
               ka, kb, STREAM_TEST_POINTS, ea, eb, oa, ob);
        if (!(rpost > rpre))
            status = 1;
    }
    free(kl);
    free(c.flags);
    gp_model_free(c.model);
    return status;
}
