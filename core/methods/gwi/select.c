/* inducing_factor "auto" (docs/methods/sparse-variational-and-pls.md §5.3 B1):
 * the thesis treats M as a hyperparameter, M = factor sqrt(N) with the factor
 * from {0.5, 1, 1.5, 2} (GWI-net) or {1, ..., 5} (GWI-SVGP), chosen by the
 * validation NLL [T B.7]. Each factor is one whole fit on the same seeded
 * split (the same validation rows, early stopping and tempering on them);
 * the fit with the lowest tempered validation NLL is kept as it is, as the
 * thesis keeps its chosen trial: gwi needs held-out rows for early stopping
 * and tempering anyway, so a refit "on all rows" would still hold them out. */
#include "core/methods/gwi/select.h"

#include <math.h>

#include "core/methods/gwi/fit.h"

#define GRID_MAX 5

typedef struct factor_grid {
    size_t n;
    double factor[GRID_MAX];
    const char *key[GRID_MAX]; /* method_info's key of each factor's score */
} factor_grid;

static const factor_grid grid_mlp = {4, {0.5, 1.0, 1.5, 2.0},
                                     {"auto_nll_0.5", "auto_nll_1", "auto_nll_1.5",
                                      "auto_nll_2", NULL}};
static const factor_grid grid_kernel_sum = {5, {1.0, 2.0, 3.0, 4.0, 5.0},
                                            {"auto_nll_1", "auto_nll_2", "auto_nll_3",
                                             "auto_nll_4", "auto_nll_5"}};

static const factor_grid *grid_of(gp_gwi_mean_kind mean)
{
    return mean == GP_GWI_MEAN_MLP ? &grid_mlp : &grid_kernel_sum;
}

static double max_factor(gp_gwi_mean_kind mean)
{
    const factor_grid *g = grid_of(mean);
    return g->factor[g->n - 1];
}

/* The grid's fits report as one span: fit i's epoch e is i epochs + e of
 * n epochs (a job's progress grows across the grid; a stop ends it). */
typedef struct grid_progress {
    const gp_fit_request *req;
    int point, points;
} grid_progress;

static int grid_report(void *ctx, int iteration, int max_iterations, double objective)
{
    const grid_progress *gp = ctx;
    return gp->req->progress(gp->req->progress_ctx, gp->point * max_iterations + iteration,
                             gp->points * max_iterations, objective);
}

/* What a numerical failure of one factor leaves: that factor is out of the
 * race (its score key absent); anything else stops the grid. */
static int factor_failed(int rc)
{
    return rc == GP_ENOTPD;
}

static void report_grid(gp_model *best, const factor_grid *g, const double *score)
{
    gp_model_info_string(best, "inducing_factor_selection", "auto");
    for (size_t i = 0; i < g->n; i++)
        if (isfinite(score[i])) /* nothing non-finite leaves: a failed factor has no key */
            gp_model_info_number(best, g->key[i], score[i]);
}

int gwi_fit_auto_factor(const gp_method *m, const gp_fit_request *req, const gwi_settings *st,
                        gp_model **out, gp_error *err)
{
    const factor_grid *g = grid_of(st->mean);
    grid_progress gp = {req, 0, (int)g->n};
    gp_fit_request sub = *req;
    if (req->progress) {
        sub.progress = grid_report;
        sub.progress_ctx = &gp;
    }
    gp_model *best = NULL;
    double best_score = INFINITY, score[GRID_MAX];
    int rc = GP_OK;
    for (size_t i = 0; i < g->n; i++) {
        gwi_settings one = *st;
        one.factor = g->factor[i];
        one.factor_auto = 0;
        gp.point = (int)i;
        gp_model *cand = NULL;
        score[i] = INFINITY;
        rc = gwi_fit_once(m, &sub, &one, &cand, err);
        if (rc != GP_OK && !factor_failed(rc))
            break;
        if (rc != GP_OK)
            continue;
        score[i] = isfinite(cand->diag.objective) ? cand->diag.objective : INFINITY;
        if (score[i] < best_score) { /* strict: a tie keeps the smaller (cheaper) factor */
            gp_model_free(best);
            best = cand;
            best_score = score[i];
        } else
            gp_model_free(cand);
    }
    if (rc != GP_OK && !factor_failed(rc)) {
        gp_model_free(best);
        return rc;
    }
    if (best == NULL)
        return gp_error_set(err, GP_ENOTPD, "options.inducing_factor",
                            "no factor of inducing_factor auto's grid could be fitted");
    report_grid(best, g, score);
    *out = best;
    return GP_OK;
}

int gwi_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err)
{
    gwi_settings st;
    gwi_read_settings(m, req, &st);
    int rc = gwi_check_settings(req, &st, max_factor(st.mean), err);
    if (rc)
        return rc;
    return st.factor_auto ? gwi_fit_auto_factor(m, req, &st, out, err)
                          : gwi_fit_once(m, req, &st, out, err);
}
