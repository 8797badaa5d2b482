/* Titsias' collapsed bound over rows read in chunks and summed over
 * processes: see core/inducing/collapsed_rows.h. The algebra after the sums
 * is core/inducing/collapsed.c's (gp_collapsed_mm), so a single chunk on a
 * single process does the in-memory bound's arithmetic. */
#include "core/inducing/collapsed_rows.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"
#include "core/linalg/panels.h"
#include "core/model/method.h"

struct gp_collapsed_rows_work {
    size_t m, chunk, d, np;
    gp_collapsed_mm mm;
    double *P;              /* d x chunk: the chunk's points, working units */
    double *yw, *beta;      /* chunk each: its targets, then beta */
    double *Kuf, *V, *Wuf;  /* m x chunk each */
    double *Bc;             /* m x m: one chunk's V V^T / s2 (lower) */
    double *g, *gzc;        /* one chunk's contraction: np, d x m */
    double *red;            /* the sums of either round, and the sync's slots */
};

/* ---- buffers ---- */

static size_t packed_size(size_t m)
{
    return m * (m + 1) / 2;
}

/* Doubles summed by round one (packed B - I, V y, y.y, tr V V^T) and by
 * round two (the Kuf gradient, dF/dZ when Z moves, beta.beta). */
static size_t round_one_len(size_t m)
{
    return packed_size(m) + m + 2;
}

static size_t round_two_len(size_t m, size_t d, size_t np)
{
    return np + d * m + 1;
}

static void work_free(struct gp_collapsed_rows_work *w)
{
    if (w == NULL)
        return;
    gp_collapsed_mm_free(&w->mm);
    free(w->P);
    free(w->yw);
    free(w->beta);
    free(w->Kuf);
    free(w->V);
    free(w->Wuf);
    free(w->Bc);
    free(w->g);
    free(w->gzc);
    free(w->red);
    free(w);
}

static int work_alloc(struct gp_collapsed_rows_work **out, size_t m, size_t chunk, size_t d,
                      size_t np, gp_error *err)
{
    struct gp_collapsed_rows_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    *w = (struct gp_collapsed_rows_work){.m = m, .chunk = chunk, .d = d, .np = np};
    size_t mc = 0, dc = 0, mm = 0, dm = 0;
    int rc = gp_checked_size(m, chunk, &mc, err);
    if (rc == GP_OK)
        rc = gp_checked_size(d, chunk, &dc, err);
    if (rc == GP_OK)
        rc = gp_checked_size(m, m, &mm, err);
    if (rc == GP_OK)
        rc = gp_checked_size(d, m, &dm, err);
    if (rc == GP_OK)
        rc = gp_collapsed_mm_alloc(&w->mm, m, 1, err);
    size_t one = round_one_len(m), two = round_two_len(m, d, np);
    size_t red = (one > two ? one : two) + GP_ROWS_SYNC_SLOTS;
    if (rc == GP_OK &&
        (!(w->P = gp_alloc_doubles(dc, err)) || !(w->yw = gp_alloc_doubles(chunk, err)) ||
         !(w->beta = gp_alloc_doubles(chunk, err)) || !(w->Kuf = gp_alloc_doubles(mc, err)) ||
         !(w->V = gp_alloc_doubles(mc, err)) || !(w->Wuf = gp_alloc_doubles(mc, err)) ||
         !(w->Bc = gp_alloc_doubles(mm, err)) || !(w->g = gp_alloc_doubles(np, err)) ||
         !(w->gzc = gp_alloc_doubles(dm, err)) || !(w->red = gp_alloc_doubles(red, err))))
        rc = GP_ENOMEM;
    if (rc) {
        work_free(w);
        return rc;
    }
    *out = w;
    return GP_OK;
}

void gp_collapsed_rows_release(gp_collapsed_rows *data)
{
    work_free(data->work);
    data->work = NULL;
}

/* The buffers for m inducing points, allocated (every process agreeing that
 * it could) when the last evaluation had another m. */
static int work_for(gp_collapsed_rows *data, size_t m, size_t np, gp_error *err)
{
    const struct gp_collapsed_rows_work *w = data->work;
    if (w && w->m == m && w->np == np)
        return GP_OK;
    gp_collapsed_rows_release(data);
    gp_error local;
    gp_error_clear(&local);
    int rc = work_alloc(&data->work, m, data->rows->chunk, data->units->input_dim, np, &local);
    rc = gp_rows_sync_agree(data->sync, rc, &local, err);
    if (rc)
        gp_collapsed_rows_release(data);
    return rc;
}

double gp_collapsed_rows_doubles(size_t m, size_t chunk, size_t d, size_t np)
{
    double M = (double)m, c = (double)chunk, D = (double)d;
    /* the chunk's buffers (and the read's), the M x M algebra with one
     * chunk's V V^T, the packed sums, the contractions' scratch */
    return c * (3.0 * M + 2.0 * D + 3.0) + 6.0 * M * M + 1.5 * M * M + 4.0 * M * (D + 4.0) +
           (double)np * 16.0;
}

/* ---- the passes ---- */

typedef struct pass {
    const gp_collapsed_rows *data;
    struct gp_collapsed_rows_work *w;
    const gp_kernel *k;
    double s2;
    const double *Z;
    double *acc; /* the round's sums */
    int with_gz;
} pass;

/* The chunk's points (d x b, point-major) and targets in working units. */
static void chunk_units(const pass *ps, size_t b, const double *X, const double *y)
{
    gp_model_standardize_points(ps->data->units, X, b, ps->w->P);
    gp_model_working_targets(ps->data->units, y, b, ps->w->yw);
}

/* V = L^{-1} k(Z, P) for the chunk's b points (Kuf kept when asked). */
static void chunk_v(const pass *ps, size_t b, int keep_kuf)
{
    struct gp_collapsed_rows_work *w = ps->w;
    size_t m = w->m;
    double *K = keep_kuf ? w->Kuf : w->V;
    gp_kernel_cross(ps->k, ps->Z, m, w->P, b, K, m);
    if (keep_kuf)
        memcpy(w->V, w->Kuf, m * b * sizeof *w->V);
    gp_panel_trsm_lower(w->mm.L, m, m, 0, w->V, b, m);
}

static void add_packed_lower(const double *A, size_t m, double *packed)
{
    size_t at = 0;
    for (size_t j = 0; j < m; j++)
        for (size_t i = j; i < m; i++)
            packed[at++] += A[i + j * m];
}

/* Round one of a chunk: V V^T / s2 (packed), V y, y.y and tr(V V^T). */
static int round_one_chunk(void *ctx, size_t i, size_t b, const double *X, const double *y,
                           gp_error *err)
{
    (void)i;
    (void)err;
    const pass *ps = ctx;
    struct gp_collapsed_rows_work *w = ps->w;
    size_t m = w->m, tri = packed_size(m);
    chunk_units(ps, b, X, y);
    chunk_v(ps, b, 0);
    gp_panel_syrk_lower(0, m, b, 1.0 / ps->s2, w->V, m, w->Bc, m);
    add_packed_lower(w->Bc, m, ps->acc);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)m, (blasint)b, 1.0, w->V, (blasint)m, w->yw,
                1, 1.0, ps->acc + tri, 1);
    ps->acc[tri + m] += cblas_ddot((blasint)b, w->yw, 1, w->yw, 1);
    ps->acc[tri + m + 1] += cblas_ddot((blasint)(m * b), w->V, 1, w->V, 1);
    return GP_OK;
}

/* Round two of a chunk: beta and Wuf from the globals, their contraction
 * with dKuf (kernel parameters, and Z when asked) and beta.beta. */
static int round_two_chunk(void *ctx, size_t i, size_t b, const double *X, const double *y,
                           gp_error *err)
{
    (void)i;
    const pass *ps = ctx;
    struct gp_collapsed_rows_work *w = ps->w;
    size_t m = w->m, np = w->np, dm = ps->with_gz ? w->d * m : 0;
    chunk_units(ps, b, X, y);
    chunk_v(ps, b, 1);
    gp_collapsed_sensitivity_fu(&w->mm, ps->s2, w->V, w->yw, b, w->beta, w->Wuf);
    int rc = gp_kernel_cross_grad_contract_known(ps->k, w->P, b, ps->Z, m, w->Kuf, m, w->Wuf, m,
                                                 w->g, ps->with_gz ? w->gzc : NULL, err);
    if (rc)
        return rc;
    for (size_t p = 0; p < np; p++)
        ps->acc[p] += w->g[p];
    for (size_t j = 0; j < dm; j++)
        ps->acc[np + j] += w->gzc[j];
    ps->acc[np + dm] += cblas_ddot((blasint)b, w->beta, 1, w->beta, 1);
    return GP_OK;
}

/* Round one over every row: B's lower triangle, vy, y.y, tr(V V^T). */
static int round_one(pass *ps, double *yy, double *trvv, gp_error *err)
{
    struct gp_collapsed_rows_work *w = ps->w;
    size_t m = w->m, tri = packed_size(m), len = round_one_len(m);
    ps->acc = w->red;
    memset(ps->acc, 0, len * sizeof *ps->acc);
    /* a failure here is pending: the sum carries it to every process */
    gp_rows_sync_each_chunk(ps->data->sync, round_one_chunk, ps);
    int rc = gp_rows_sync_sum(ps->data->sync, ps->acc, len, err);
    if (rc)
        return rc;
    gp_unpack_lower(ps->acc, m, w->mm.B, m);
    memcpy(w->mm.vy, ps->acc + tri, m * sizeof *ps->acc);
    *yy = ps->acc[tri + m];
    *trvv = ps->acc[tri + m + 1];
    return GP_OK;
}

/* Round two over every row, then the terms without rows: grad (np + 1) and
 * gz (when asked). */
static int round_two(pass *ps, const gp_sgpr_terms *terms, double *grad, double *gz,
                     gp_error *err)
{
    struct gp_collapsed_rows_work *w = ps->w;
    size_t m = w->m, np = w->np, dm = gz ? w->d * m : 0;
    size_t len = round_two_len(m, gz ? w->d : 0, np);
    double n = (double)ps->data->rows->n_total;
    gp_collapsed_sensitivity_globals(&w->mm, ps->s2);
    ps->acc = w->red;
    ps->with_gz = gz != NULL;
    memset(ps->acc, 0, len * sizeof *ps->acc);
    gp_rows_sync_each_chunk(ps->data->sync, round_two_chunk, ps);
    int rc = gp_rows_sync_sum(ps->data->sync, ps->acc, len, err);
    if (rc)
        return rc;
    memcpy(grad, ps->acc, np * sizeof *grad);
    if (gz)
        memcpy(gz, ps->acc + np, dm * sizeof *gz);
    double bb = ps->acc[np + dm];
    gp_collapsed_sensitivity_uu(&w->mm);
    rc = gp_inducing_contract_kuu(ps->k, ps->Z, m, w->mm.T, -1.0 / (2.0 * ps->s2), n, ps->Z,
                                  grad, gz, err);
    if (rc == GP_OK)
        grad[np] = gp_collapsed_noise_grad(&w->mm, n, ps->s2, bb, terms->trace);
    return rc;
}

int gp_sgpr_rows_bound(gp_collapsed_rows *data, const gp_kernel *k, double s2, const double *Z,
                       size_t m, gp_sgpr_terms *terms, double *grad, double *gz,
                       gp_inducing_post *post, gp_error *err)
{
    if (data->sync->failed)
        return gp_rows_sync_result(data->sync, data->sync->failed, err);
    if (!(m > 0 && s2 > 0.0 && data->rows->n_total > 0))
        return gp_error_set(err, GP_EINVAL, NULL, "sgpr bound needs n, m >= 1 and s2 > 0");
    int rc = work_for(data, m, gp_kernel_n_params(k), err);
    if (rc)
        return rc;
    pass ps = {.data = data, .w = data->work, .k = k, .s2 = s2, .Z = Z};
    gp_collapsed_mm *a = &data->work->mm;
    double jitter = 0.0, yy = 0.0, trvv = 0.0;
    /* from theta and Z alone: the same on every process */
    rc = gp_inducing_kuu_factor(k, Z, m, a->L, &jitter, err);
    if (rc)
        return rc == GP_EDATA ? rc : GP_ENOTPD;
    if ((rc = round_one(&ps, &yy, &trvv, err)) != GP_OK)
        return rc;
    if ((rc = gp_collapsed_factor_b(a, err)) != GP_OK)
        return rc;
    gp_collapsed_solve_vy(a, s2);
    double n = (double)data->rows->n_total;
    terms->trace = n * gp_kernel_diag(k, Z) - trvv; /* stationary: one point serves */
    terms->bound = gp_collapsed_value(a, n, s2, yy, terms->trace);
    if (!isfinite(terms->bound))
        return gp_error_set(err, GP_ENOTPD, NULL, "the bound is not finite");
    if (grad || post)
        rc = gp_collapsed_invert_b(a, err);
    if (rc == GP_OK && grad)
        rc = round_two(&ps, terms, grad, gz, err);
    if (rc == GP_OK && post)
        rc = gp_collapsed_fill_post(a, Z, data->units->input_dim, jitter, post, err);
    return rc;
}

int gp_collapsed_rows_objective(void *ctx, const gp_kernel *k, double s2, const double *Z,
                                size_t m, double *f, double *grad, double *gz)
{
    gp_sgpr_terms terms = {NAN, NAN};
    gp_error err;
    int rc = gp_sgpr_rows_bound(ctx, k, s2, Z, m, &terms, grad, gz, NULL, &err);
    *f = terms.bound;
    return rc;
}
