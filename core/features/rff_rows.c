/* The sparse-spectrum LML over rows read in chunks and summed over
 * processes: see core/features/rff_rows.h. The per-chunk products and the
 * algebra after the sums are core/features/rff.c's (section 3), so a single
 * chunk on a single process does the in-memory LML's arithmetic. */
#include "core/features/rff_rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"
#include "core/model/method.h"

struct gp_rff_rows_work {
    size_t R, m;      /* m = 2R */
    gp_rff_work *w;   /* made for one chunk of rows */
    double *Xw, *yw;  /* the chunk in working units: chunk x d, chunk */
    double *red;      /* either round's sums, and the sync's slots */
    double *phi_y;    /* round one's Phi^T y (m) and y.y, kept */
    double y_sq;
};

static size_t packed_size(size_t m)
{
    return m * (m + 1) / 2;
}

/* Round one: packed Phi^T Phi, Phi^T y, y.y; round two: res.res, y.res and
 * dOmega (R d, when asked). */
static size_t round_one_len(size_t m)
{
    return packed_size(m) + m + 1;
}

static size_t round_two_len(size_t R, size_t d)
{
    return 2 + R * d;
}

static void work_free(struct gp_rff_rows_work *k)
{
    if (k == NULL)
        return;
    gp_rff_work_free(k->w);
    free(k->Xw);
    free(k->yw);
    free(k->red);
    free(k->phi_y);
    free(k);
}

static int work_alloc(struct gp_rff_rows_work **out, size_t R, size_t chunk, size_t d,
                      gp_error *err)
{
    struct gp_rff_rows_work *k = calloc(1, sizeof *k);
    if (k == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    k->R = R;
    k->m = 2 * R;
    size_t cd = 0, one = round_one_len(k->m), two = round_two_len(R, d);
    size_t red = (one > two ? one : two) + GP_ROWS_SYNC_SLOTS;
    int rc = gp_checked_size(chunk, d, &cd, err);
    if (rc == GP_OK)
        rc = gp_rff_work_new(chunk, d, R, &k->w, err);
    if (rc == GP_OK &&
        (!(k->Xw = gp_alloc_doubles(cd, err)) || !(k->yw = gp_alloc_doubles(chunk, err)) ||
         !(k->red = gp_alloc_doubles(red, err)) || !(k->phi_y = gp_alloc_doubles(k->m, err))))
        rc = GP_ENOMEM;
    if (rc) {
        work_free(k);
        return rc;
    }
    *out = k;
    return GP_OK;
}

void gp_rff_rows_release(gp_rff_rows *s)
{
    work_free(s->work);
    s->work = NULL;
}

/* Buffers for R frequencies, allocated (every process agreeing that it
 * could) when the last evaluation had another R. */
static int work_for(gp_rff_rows *s, size_t R, gp_error *err)
{
    if (s->work && s->work->R == R)
        return GP_OK;
    gp_rff_rows_release(s);
    gp_error local;
    gp_error_clear(&local);
    int rc = work_alloc(&s->work, R, s->rows->chunk, s->d, &local);
    rc = gp_rows_sync_agree(s->sync, rc, &local, err);
    if (rc)
        gp_rff_rows_release(s);
    return rc;
}

double gp_rff_rows_doubles(size_t R, size_t chunk, size_t d)
{
    double r = (double)R, c = (double)chunk, D = (double)d;
    double blk = chunk < 2048 ? c : 2048.0; /* the gradient's row blocks (rff.c) */
    /* the chunk (its features, scaled and working inputs, targets and
     * residual), A and A^{-1} (2R x 2R each), the packed sums, the blocks */
    return c * (2.0 * r + 2.0 * D + 2.0) + 8.0 * r * r + 2.0 * r * r + 3.0 * r * blk +
           r * (D + 6.0) + 16.0;
}

/* ---- the passes ---- */

typedef struct pass {
    const gp_rff_rows *s;
    const gp_rff_problem *p;
    double *acc;
    int with_domega;
} pass;

/* The chunk as the work's problem: the kernel's columns standardised, the
 * working targets. */
static gp_rff_problem chunk_problem(const pass *ps, size_t b, const double *X, const double *y)
{
    struct gp_rff_rows_work *k = ps->s->work;
    gp_model_leaf_inputs(ps->s->units, ps->s->dims, ps->s->d, NULL, X, b, 0, b, k->Xw);
    gp_model_working_targets(ps->s->units, y, b, k->yw);
    gp_rff_problem c = *ps->p;
    c.X = k->Xw;
    c.y = k->yw;
    c.n = b;
    c.cancel = NULL; /* polled between chunks, by the sync */
    return c;
}

static int round_one_chunk(void *ctx, size_t i, size_t b, const double *X, const double *y,
                           gp_error *err)
{
    (void)i;
    (void)err;
    const pass *ps = ctx;
    size_t m = ps->s->work->m, tri = packed_size(m);
    gp_rff_problem c = chunk_problem(ps, b, X, y);
    gp_rff_chunk_gram(&c, b, ps->s->work->w, ps->acc, ps->acc + tri, ps->acc + tri + m);
    return GP_OK;
}

static int round_two_chunk(void *ctx, size_t i, size_t b, const double *X, const double *y,
                           gp_error *err)
{
    (void)i;
    const pass *ps = ctx;
    gp_rff_problem c = chunk_problem(ps, b, X, y);
    int rc = gp_rff_chunk_residual(&c, b, ps->s->work->w, ps->acc,
                                   ps->with_domega ? ps->acc + 2 : NULL);
    return rc ? gp_error_set(err, rc, NULL, "fit cancelled") : GP_OK;
}

/* Round one over every row, then the factor and alpha on every process. */
static int round_one(pass *ps, int with_inverse, gp_error *err)
{
    struct gp_rff_rows_work *k = ps->s->work;
    size_t m = k->m, tri = packed_size(m), len = round_one_len(m);
    ps->acc = k->red;
    memset(ps->acc, 0, len * sizeof *ps->acc);
    /* a failure here is pending: the sum carries it to every process */
    gp_rows_sync_each_chunk(ps->s->sync, round_one_chunk, ps);
    int rc = gp_rows_sync_sum(ps->s->sync, ps->acc, len, err);
    if (rc)
        return rc;
    memcpy(k->phi_y, ps->acc + tri, m * sizeof *k->phi_y);
    k->y_sq = ps->acc[tri + m];
    return gp_rff_factor_sums(ps->p, k->w, ps->acc, k->phi_y, with_inverse, err);
}

int gp_rff_rows_lml(gp_rff_rows *s, const gp_rff_problem *p, double *lml,
                    const gp_rff_grad *grad, gp_error *err)
{
    if (s->sync->failed)
        return gp_rows_sync_result(s->sync, s->sync->failed, err);
    if (p->d != s->d)
        return gp_error_set(err, GP_EINVAL, NULL, "the problem's inputs are not the rows'");
    int rc = work_for(s, p->R, err);
    if (rc)
        return rc;
    pass ps = {.s = s, .p = p};
    if ((rc = round_one(&ps, grad != NULL, err)) != GP_OK)
        return rc;
    ps.with_domega = grad && (grad->omega || grad->log_ls);
    size_t len = round_two_len(ps.with_domega ? p->R : 0, p->d);
    memset(ps.acc, 0, len * sizeof *ps.acc);
    gp_rows_sync_each_chunk(s->sync, round_two_chunk, &ps);
    if ((rc = gp_rows_sync_sum(s->sync, ps.acc, len, err)) != GP_OK)
        return rc;
    gp_rff_problem all = *p;
    all.n = s->rows->n_total;
    return gp_rff_lml_from_sums(&all, s->work->w, ps.acc[0], ps.acc[1],
                                ps.with_domega ? ps.acc + 2 : NULL, lml, grad, err);
}

const gp_rff_work *gp_rff_rows_work(const gp_rff_rows *s)
{
    return s->work ? s->work->w : NULL;
}

const double *gp_rff_rows_phi_y(const gp_rff_rows *s)
{
    return s->work ? s->work->phi_y : NULL;
}

double gp_rff_rows_y_sq(const gp_rff_rows *s)
{
    return s->work ? s->work->y_sq : NAN;
}
