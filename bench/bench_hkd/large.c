/* bench_hkd part 1: the large sets, every split and m, hkd against sgpr m and
 * 2m (the protocol: main.c's header). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench_hkd/hkd_bench.h"
#include "bench/support/args.h"
#include "bench/support/fit.h"

void hkdb_variant_label(int v, size_t m, char *buf, size_t len)
{
    if (v == V_SGPR_M)
        snprintf(buf, len, "sgpr M=%zu", m);
    else if (v == V_SGPR_2M)
        snprintf(buf, len, "sgpr M=%zu", 2 * m);
    else if (v == V_SGPR_2M_OPT)
        snprintf(buf, len, "sgpr M=%zu, Z optimised (default)", 2 * m);
    else if (v == V_HKD_OPT)
        snprintf(buf, len, "hkd %d×%zu, Z optimised (default)", HKD_BLOCKS, m);
    else
        snprintf(buf, len, "hkd %d×%zu", HKD_BLOCKS, m);
}

void hkdb_run_large_set(const options *o, const large_set *ls, large_outcome *out)
{
    memset(out, 0, sizeof *out);
    printf("### %s\n\n", ls->name);
    if (!gp_dataset_exists(ls->name)) {
        printf("skipped: %s.csv not found in the datasets folder\n\n", ls->name);
        fflush(stdout);
        return;
    }
    gp_value *sym = hkdb_make_symmetry(SYM_NEGATE_PCA, 0);
    if (sym == NULL) {
        printf("skipped: out of memory\n\n");
        return;
    }
    gp_dataset all;
    gp_error lerr;
    gp_error_clear(&lerr);
    memset(&all, 0, sizeof all);
    if (gp_dataset_load(ls->name, &all, &lerr) != GP_OK) {
        printf("skipped: loading %s failed: %s\n\n", ls->name, lerr.message);
        fflush(stdout);
        gp_value_free(sym);
        return;
    }
    out->splits = ls->slow ? o->slow_splits : o->splits;
    for (int k = 0; k < out->splits; k++) {
        gp_dataset train, test;
        gp_split sp;
        gp_error err;
        gp_error_clear(&err);
        memset(&train, 0, sizeof train);
        memset(&test, 0, sizeof test);
        memset(&sp, 0, sizeof sp);
        size_t full = 0;
        int rc = gp_split_load(ls->name, ls->scheme, k, all.n, &sp, &err);
        if (rc == GP_OK) {
            full = sp.n_train;
            rc = gp_split_subsample_train(&sp, o->max_train, (uint64_t)k, &err);
        }
        if (rc == GP_OK)
            rc = gp_dataset_rows(&all, sp.train, sp.n_train, &train, &err);
        if (rc == GP_OK)
            rc = gp_dataset_rows(&all, sp.test, sp.n_test, &test, &err);
        gp_split_free(&sp);
        if (rc != GP_OK) {
            fprintf(stderr, "bench_hkd: %s split %d: %s\n", ls->name, k, err.message);
            for (size_t mi = 0; mi < o->n_m; mi++)
                for (int v = 0; v < N_VARIANTS; v++) {
                    result *r = &out->cell[mi][v].r[k];
                    r->ran = 1;
                    r->rmse = r->nlpd = r->predict_us = NAN;
                    snprintf(r->error, sizeof r->error, "split %d: %s", k, err.message);
                }
            gp_dataset_free(&train);
            gp_dataset_free(&test);
            continue;
        }
        out->ran = 1;
        out->n_train = train.n;
        out->n_train_full = full;
        out->n_test = test.n;
        out->d = train.d;
        double ell = gp_bench_median_heuristic(train.X, train.n, train.d, MEDIAN_ROWS, (uint64_t)k);
        out->ell[k] = ell;
        for (size_t mi = 0; mi < o->n_m; mi++) {
            size_t m = o->m[mi];
            for (int v = 0; v < N_VARIANTS; v++) {
                if (!o->use[v])
                    continue;
                if ((v == V_SGPR_2M_OPT || v == V_HKD_OPT) &&
                    (k >= o->opt_splits || !gp_bench_list_has(o->opt_datasets, ls->name) ||
                     !hkdb_size_listed(o->opt_m, o->n_opt_m, m)))
                    continue;
                result *r = &out->cell[mi][v].r[k];
                gp_option_value opts[4];
                size_t n_opts;
                const char *method;
                if (v == V_HKD || v == V_HKD_OPT) {
                    n_opts = hkdb_hkd_options(sym, m, v == V_HKD_OPT ? 1 : o->hkd_optimize_inducing,
                                         opts);
                    method = "hkd";
                } else {
                    n_opts = hkdb_sgpr_options(v == V_SGPR_M ? m : 2 * m,
                                          v == V_SGPR_2M_OPT ? 1 : o->sgpr_optimize_inducing,
                                          opts);
                    method = "sgpr";
                }
                gp_model *model = NULL;
                hkdb_fit_model(method, opts, n_opts, &train, ell, (uint64_t)k, &model, r);
                if (model != NULL) {
                    hkdb_score_model(model, &test, r);
                    if (r->ok)
                        r->predict_us = hkdb_predict_latency_us(model, &test, o->predict_calls);
                }
                gp_model_free(model);
                char what[128], label[64];
                hkdb_variant_label(v, m, label, sizeof label);
                snprintf(what, sizeof what, "%s split %d %s", ls->name, k, label);
                hkdb_progress(what, r);
            }
        }
        gp_dataset_free(&train);
        gp_dataset_free(&test);
    }
    gp_dataset_free(&all);
    gp_value_free(sym);
}
