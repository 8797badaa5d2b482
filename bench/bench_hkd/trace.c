/* bench_hkd part 2: the Nystrom trace-error study (the paper's Fig. 6), its
 * fits and its table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_hkd/hkd_bench.h"
#include "bench/support/clock.h"
#include "bench/support/fit.h"
#include "core/methods/hkd/hkd.h"
#include "core/methods/registry.h"

/* ---- part 2: the trace-error study ---- */

enum { T_SGPR_M = 0, T_SGPR_2M, T_HKD_AXIS, T_HKD_PCA, N_TRACE };

static void run_trace_set(const options *o, const large_set *ls, double out[MAX_M][N_TRACE],
                          int *ran)
{
    *ran = 0;
    for (size_t i = 0; i < MAX_M; i++)
        for (int t = 0; t < N_TRACE; t++)
            out[i][t] = NAN;
    if (!gp_dataset_exists(ls->name)) {
        printf("| %s | skipped: %s.csv not found |\n", ls->name, ls->name);
        return;
    }
    gp_dataset all, sub;
    gp_error err;
    gp_error_clear(&err);
    memset(&all, 0, sizeof all);
    memset(&sub, 0, sizeof sub);
    if (gp_dataset_load(ls->name, &all, &err) != GP_OK) {
        printf("| %s | skipped: %s |\n", ls->name, err.message);
        return;
    }
    /* TRACE_ROWS random rows (seed 0), in row order. */
    size_t n = all.n < o->trace_rows ? all.n : o->trace_rows;
    gp_split sp;
    memset(&sp, 0, sizeof sp);
    sp.train = malloc(all.n * sizeof *sp.train);
    if (sp.train == NULL) {
        gp_dataset_free(&all);
        return;
    }
    for (size_t i = 0; i < all.n; i++)
        sp.train[i] = i;
    sp.n_train = all.n;
    int rc = gp_split_subsample_train(&sp, n, 0, &err);
    if (rc == GP_OK)
        rc = gp_dataset_rows(&all, sp.train, sp.n_train, &sub, &err);
    gp_split_free(&sp);
    gp_dataset_free(&all);
    if (rc != GP_OK) {
        printf("| %s | skipped: %s |\n", ls->name, err.message);
        return;
    }
    double ell = gp_bench_median_heuristic(sub.X, sub.n, sub.d, sub.n, 0);
    gp_kernel *k = NULL;
    gp_value *sym[N_TRACE] = {hkdb_make_symmetry(SYM_NONE, sub.d), hkdb_make_symmetry(SYM_NONE, sub.d),
                              hkdb_make_symmetry(SYM_NEGATE_AXES, sub.d),
                              hkdb_make_symmetry(SYM_NEGATE_PCA, sub.d)};
    rc = hkdb_make_kernel(sub.d, ell, &k, &err);
    for (int t = 0; t < N_TRACE && rc == GP_OK; t++)
        if (sym[t] == NULL)
            rc = gp_error_set(&err, GP_ENOMEM, NULL, "out of memory");
    const gp_method *hkd = gp_method_find("hkd");
    for (size_t mi = 0; mi < o->n_trace_m && rc == GP_OK; mi++) {
        for (int t = 0; t < N_TRACE; t++) {
            size_t M = o->trace_m[mi] * (t == T_SGPR_2M ? 2 : 1);
            gp_option_value opts[3];
            size_t n_opts = hkdb_hkd_options(sym[t], M, -1, opts);
            gp_fit_request req;
            memset(&req, 0, sizeof req);
            req.X = sub.X;
            req.y = sub.y;
            req.n = sub.n;
            req.d = sub.d;
            req.kernel = k;
            req.noise_given = 1;
            req.noise_variance = NOISE_INIT;
            req.standardize = 1;
            req.seed = 0;
            req.options = opts;
            req.n_options = n_opts;
            double tr = NAN, t0 = gp_bench_seconds();
            gp_error e2;
            gp_error_clear(&e2);
            int r2 = gp_options_validate(hkd, opts, n_opts, &e2);
            if (r2 == GP_OK)
                r2 = gp_hkd_trace_error(&req, &tr, &e2);
            if (r2 != GP_OK) {
                fprintf(stderr, "bench_hkd: trace %s M=%zu variant %d: %s\n", ls->name, M, t,
                        e2.message);
                tr = NAN;
            } else {
                fprintf(stderr, "bench_hkd: trace %-12s M=%-4zu variant %d: %.4g (%.2f s)\n",
                        ls->name, M, t, tr, gp_bench_seconds() - t0);
            }
            out[mi][t] = tr;
        }
    }
    if (rc != GP_OK)
        printf("| %s | failed: %s |\n", ls->name, err.message);
    else
        *ran = 1;
    for (int t = 0; t < N_TRACE; t++)
        gp_value_free(sym[t]);
    gp_kernel_free(k);
    if (*ran)
        fprintf(stderr, "bench_hkd: trace %s: n %zu, d %zu, lengthscale %.3f\n", ls->name,
                sub.n, sub.d, ell);
    gp_dataset_free(&sub);
}

void hkdb_run_trace(const options *o)
{
    printf("## Part 2: Nyström trace error (the paper's Fig. 6)\n\n");
    if (gp_method_find("hkd") == NULL) {
        printf("not measured: hkd: not available in this build.\n\n");
        return;
    }
    printf("%zu random rows of each set (seed 0), standardised; matern32, variance 1, "
           "lengthscale = median pairwise distance of those rows; mean trace error "
           "Σ_t tr(K_t,ff − K_t,fu K_t,uu⁻¹ K_t,uf) / n (gp_hkd_trace_error, working units, "
           "inducing inputs as the hkd fit chooses them, seed 0). Lower is better; "
           "**bold** = the best of the row.\n\n",
           o->trace_rows);
    printf("| dataset | M | sgpr M | sgpr 2M | hkd 8×M axis negations | hkd 8×M PCA "
           "negations | PCA / sgpr 2M |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < N_LARGE; i++) {
        if (!hkdb_set_selected(o, hkdb_large_sets[i].name))
            continue;
        double tr[MAX_M][N_TRACE];
        int ran = 0;
        run_trace_set(o, &hkdb_large_sets[i], tr, &ran);
        if (!ran)
            continue;
        for (size_t mi = 0; mi < o->n_trace_m; mi++) {
            int best = -1;
            for (int t = 0; t < N_TRACE; t++)
                if (isfinite(tr[mi][t]) && (best < 0 || tr[mi][t] < tr[mi][best]))
                    best = t;
            printf("| %s | %zu |", hkdb_large_sets[i].name, o->trace_m[mi]);
            for (int t = 0; t < N_TRACE; t++) {
                if (!isfinite(tr[mi][t]))
                    printf(" failed |");
                else if (t == best)
                    printf(" **%.4g** |", tr[mi][t]);
                else
                    printf(" %.4g |", tr[mi][t]);
            }
            double q = tr[mi][T_HKD_PCA] / tr[mi][T_SGPR_2M];
            printf(isfinite(q) ? " %.2f |\n" : " — |\n", q);
        }
        fflush(stdout);
    }
    printf("\n");
}
