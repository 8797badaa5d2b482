/* bench_hkd part 3: the synthetic set with an exact 4-fold rotation symmetry,
 * hkd against sgpr with the same number of points. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_hkd/hkd_bench.h"
#include "bench/support/fit.h"
#include "core/base/rng.h"

/* ---- part 3: the synthetic set with an exact 4-fold rotation symmetry ---- */

static double synth_f(double x, double y)
{
    double r = sqrt(x * x + y * y), th = atan2(y, x);
    return cos(4.0 * r) + 0.6 * sin(2.0 * r) * cos(4.0 * th) +
           0.6 * sin(1.5 * r) * sin(8.0 * th) + 0.4 * (r / 3.0) * cos(12.0 * th);
}

/* n points uniform on the disc of radius SYNTH_RADIUS, y = f + noise. */
static int synth_make(gp_rng *rng, size_t n, gp_dataset *ds)
{
    memset(ds, 0, sizeof *ds);
    snprintf(ds->name, sizeof ds->name, "synthetic");
    ds->n = n;
    ds->d = 2;
    ds->X = malloc(2 * n * sizeof *ds->X);
    ds->y = malloc(n * sizeof *ds->y);
    if (ds->X == NULL || ds->y == NULL) {
        gp_dataset_free(ds);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        double r = SYNTH_RADIUS * sqrt(gp_rng_uniform(rng));
        double th = 2.0 * BENCH_PI * gp_rng_uniform(rng);
        double x = r * cos(th), y = r * sin(th);
        ds->X[i] = x;
        ds->X[n + i] = y;
        ds->y[i] = synth_f(x, y) + SYNTH_NOISE * gp_rng_normal(rng);
    }
    return 0;
}

void hkdb_synth_label(int v, size_t m, char *buf, size_t len)
{
    switch (v) {
    case S_HKD:
        snprintf(buf, len, "hkd %d×%zu, defaults (Z optimised)", SYNTH_BLOCKS, m);
        break;
    case S_SGPR:
        snprintf(buf, len, "sgpr M=%zu, defaults (Z optimised)", SYNTH_BLOCKS * m);
        break;
    case S_HKD_FIXED:
        snprintf(buf, len, "hkd %d×%zu, Z fixed (folded k-means)", SYNTH_BLOCKS, m);
        break;
    case S_HKD_PLAIN_FIXED:
        snprintf(buf, len, "hkd 1×%zu, no symmetry, Z fixed (k-means)", SYNTH_BLOCKS * m);
        break;
    case S_HKD_PER_BLOCK:
        snprintf(buf, len, "hkd %d×%zu, Z per block (optimised)", SYNTH_BLOCKS, m);
        break;
    default:
        snprintf(buf, len, "sgpr M=%zu, Z fixed (greedy + reselect)", SYNTH_BLOCKS * m);
        break;
    }
}

void hkdb_run_synth(const options *o, synth_outcome *so)
{
    memset(so, 0, sizeof *so);
    printf("## Part 3: synthetic set with an exact 4-fold rotation symmetry\n\n");
    printf("f(x) = cos(4r) + 0.6 sin(2r) cos 4θ + 0.6 sin(1.5r) sin 8θ + 0.4 (r/3) cos 12θ "
           "(invariant under rotations by 90° about 0), x uniform on the disc of radius %.0f, "
           "y = f + N(0, %.1f²); %zu training and %zu test points per data set, seeds 0..%d "
           "(gp_rng). hkd: rotate2d dims [0, 1] order 4, center origin (%d real blocks), m "
           "points a block; "
           "sgpr: %d·m points, greedy selection. Each with its defaults (Z optimised with the "
           "hyperparameters) and with Z fixed (optimize_inducing false: hkd's folded k-means "
           "Z, sgpr's greedy Z with reselect rounds); and hkd without the symmetry "
           "(generators [], one block of %d·m points, Z fixed: a sparse GP on k-means Z, "
           "which isolates what the symmetry adds). NLPD of the true f with the true noise: "
           "%.3f.\n\n",
           SYNTH_RADIUS, SYNTH_NOISE, o->synth_train, o->synth_test, o->synth_seeds - 1,
           SYNTH_BLOCKS, SYNTH_BLOCKS, SYNTH_BLOCKS,
           0.5 * log(2.0 * BENCH_PI * SYNTH_NOISE * SYNTH_NOISE) + 0.5);
    gp_value *sym = hkdb_make_symmetry(SYM_ROTATE2D, 2), *none = hkdb_make_symmetry(SYM_NONE, 2);
    gp_value *own = hkdb_make_symmetry(SYM_ROTATE2D_PER_BLOCK, 2);
    if (sym == NULL || none == NULL || own == NULL) {
        gp_value_free(sym);
        gp_value_free(none);
        gp_value_free(own);
        printf("skipped: out of memory\n\n");
        return;
    }
    for (int s = 0; s < o->synth_seeds; s++) {
        gp_rng rng;
        gp_rng_seed(&rng, 1000 + (uint64_t)s);
        gp_dataset train, test;
        if (synth_make(&rng, o->synth_train, &train) != 0) {
            printf("skipped: out of memory\n\n");
            break;
        }
        if (synth_make(&rng, o->synth_test, &test) != 0) {
            gp_dataset_free(&train);
            printf("skipped: out of memory\n\n");
            break;
        }
        double ell = gp_bench_median_heuristic(train.X, train.n, train.d, MEDIAN_ROWS, (uint64_t)s);
        for (size_t mi = 0; mi < o->n_synth_m; mi++) {
            size_t m = o->synth_m[mi];
            for (int v = 0; v < N_SYNTH; v++) {
                gp_option_value opts[4];
                size_t n_opts;
                const char *method = v == S_HKD || v == S_HKD_FIXED || v == S_HKD_PLAIN_FIXED ||
                                             v == S_HKD_PER_BLOCK
                                         ? "hkd"
                                         : "sgpr";
                if (v == S_HKD_PER_BLOCK)
                    n_opts = hkdb_hkd_options(own, m, -1, opts);
                else if (v == S_HKD || v == S_HKD_FIXED)
                    n_opts = hkdb_hkd_options(sym, m, v == S_HKD ? -1 : 0, opts);
                else if (v == S_HKD_PLAIN_FIXED)
                    n_opts = hkdb_hkd_options(none, SYNTH_BLOCKS * m, 0, opts);
                else
                    n_opts = hkdb_sgpr_options(SYNTH_BLOCKS * m, v == S_SGPR, opts);
                if ((v == S_HKD || v == S_HKD_PER_BLOCK) && o->synth_hkd_iterations > 0)
                    opts[n_opts++] = (gp_option_value){.name = "max_iterations",
                                                       .number = o->synth_hkd_iterations};
                result *r = &so->r[mi][v][s];
                gp_model *model = NULL;
                hkdb_fit_model(method, opts, n_opts, &train, ell, (uint64_t)s, &model, r);
                if (model != NULL)
                    hkdb_score_model(model, &test, r);
                gp_model_free(model);
                char what[128], label[96];
                hkdb_synth_label(v, m, label, sizeof label);
                snprintf(what, sizeof what, "synth seed %d %s", s, label);
                hkdb_progress(what, r);
            }
        }
        so->ran = 1;
        gp_dataset_free(&train);
        gp_dataset_free(&test);
    }
    gp_value_free(sym);
    gp_value_free(none);
    gp_value_free(own);
    hkdb_print_synth_table(o, so);
}
