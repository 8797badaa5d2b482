/* bench_online: the pairs of messages, collected from EP on toy logistic
 * regression with the quadrature oracle (parts 1 and 3), and that EP. */

#include "bench/bench_online/online.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/clock.h"
#include "bench/support/kjit_ep.h"
#include "core/base/error.h"

/* ---- the pairs of part 1 ---- */

static int pairs_push(pairs *p, const double *in, const double *out)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 4096;
        double *a = realloc(p->in, cap * IN_COLS * sizeof *a);
        if (a == NULL)
            return -1;
        p->in = a;
        double *b = realloc(p->out, cap * OUT_COLS * sizeof *b);
        if (b == NULL)
            return -1;
        p->out = b;
        p->cap = cap;
    }
    memcpy(p->in + p->n * IN_COLS, in, IN_COLS * sizeof *in);
    memcpy(p->out + p->n * OUT_COLS, out, OUT_COLS * sizeof *out);
    p->n++;
    return 0;
}

void pairs_free(pairs *p)
{
    free(p->in);
    free(p->out);
    memset(p, 0, sizeof *p);
}

/* EP with the oracle on problems with seeds first..first+count-1; every pair
 * seen is pushed onto out (NULL: not kept). The final posterior of problem k
 * goes to mu_out + k d and S_out + k d d when those are not NULL. */
int run_oracle_ep(const double *w, size_t d, size_t n, double x_scale, uint64_t first,
                         int count, int sweeps, gp_kjit_oracle *oracle, pairs *out,
                         double *mu_out, double *S_out, ep_stats *st)
{
    gp_error err;
    for (int k = 0; k < count; k++) {
        gp_kjit_problem prob;
        gp_kjit_ep ep;
        if (gp_kjit_problem_make(w, d, n, x_scale, first + (uint64_t)k, &prob, &err) != GP_OK)
            return -1;
        if (gp_kjit_ep_init(&ep, &prob, PRIOR_VAR, &err) != GP_OK) {
            gp_kjit_problem_free(&prob);
            return -1;
        }
        for (int s = 0; s < sweeps; s++) {
            for (size_t i = 0; i < n; i++) {
                double m, v, a, b;
                if (gp_kjit_ep_cavity(&ep, i, &m, &v) != 0) {
                    ep.skipped++;
                    continue;
                }
                gp_kjit_label_beta(prob.y[i], &a, &b);
                gp_kjit_moments q;
                double t0 = gp_bench_seconds();
                if (gp_kjit_logistic_tilted(oracle, m, v, a, b, &q, &err) != GP_OK) {
                    fprintf(stderr, "bench_online: oracle: %s\n", err.message);
                    gp_kjit_ep_free(&ep);
                    gp_kjit_problem_free(&prob);
                    return -1;
                }
                st->oracle_seconds += gp_bench_seconds() - t0;
                st->oracle_calls++;
                double in[IN_COLS] = {m, v, a, b}, o2[OUT_COLS] = {q.mean, log(q.var)};
                if (out != NULL && pairs_push(out, in, o2) != 0) {
                    gp_kjit_ep_free(&ep);
                    gp_kjit_problem_free(&prob);
                    return -1;
                }
                gp_kjit_ep_update(&ep, i, m, v, q.mean, q.var, 1.0);
            }
            if (gp_kjit_ep_refresh(&ep, &err) != GP_OK)
                st->refresh_failures++;
        }
        st->skipped += ep.skipped;
        if (mu_out != NULL)
            memcpy(mu_out + (size_t)k * d, ep.mu, d * sizeof *ep.mu);
        if (S_out != NULL)
            memcpy(S_out + (size_t)k * d * d, ep.Sigma, d * d * sizeof *ep.Sigma);
        gp_kjit_ep_free(&ep);
        gp_kjit_problem_free(&prob);
    }
    return 0;
}
