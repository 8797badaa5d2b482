/* Rows read in chunks into working units, and the data term of the svgp
 * bound over them as a vector of sums: see core/methods/svgp/stream.h. */
#include "core/methods/svgp/stream.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"
#include "core/methods/svgp/elbo.h"

int svgp_stream_alloc(svgp_stream *s, gp_rows_sync *sync, const gp_model *model, size_t cap,
                      gp_error *err)
{
    const gp_rows *rows = sync->rows;
    memset(s, 0, sizeof *s);
    s->sync = sync;
    s->model = model;
    s->d = rows->d;
    s->p = gp_mean_n_coef(model->mean_type, rows->d);
    s->cap = cap;
    size_t xd = 0, hp = 0;
    int rc = gp_checked_size(cap, rows->d, &xd, err);
    if (rc == GP_OK)
        rc = gp_checked_size(cap, s->p, &hp, err);
    if (rc)
        return rc;
    s->X = gp_alloc_doubles(xd, err);
    s->y = gp_alloc_doubles(cap, err);
    if (s->p) {
        s->H = gp_alloc_doubles(hp, err);
        s->off = gp_alloc_doubles(cap, err);
    }
    if (!s->X || !s->y || (s->p && (!s->H || !s->off))) {
        svgp_stream_free(s);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    return GP_OK;
}

void svgp_stream_free(svgp_stream *s)
{
    free(s->X);
    free(s->y);
    free(s->H);
    free(s->off);
    memset(s, 0, sizeof *s);
}

void svgp_stream_clear(svgp_stream *s)
{
    s->nb = 0;
}

/* Rows [from, from + count) of a read (X ld x d column-major, y) appended
 * to the rows taken, in working units (gp_model_standardize_points'
 * arithmetic, from a read of leading dimension ld). */
static void load(svgp_stream *s, const double *X, const double *y, size_t ld, size_t from,
                 size_t count)
{
    const gp_model *model = s->model;
    size_t d = s->d;
    double *out = s->X + s->nb * d;
    for (size_t k = 0; k < d; k++) {
        const double *col = X + k * ld + from;
        double mu = model->x_mean[k], scale = model->x_scale[k];
        for (size_t i = 0; i < count; i++)
            out[i * d + k] = (col[i] - mu) / scale;
    }
    gp_model_working_targets(model, y + from, count, s->y + s->nb);
    s->nb += count;
}

int svgp_stream_take(svgp_stream *s, size_t lo, size_t hi, gp_error *err)
{
    const gp_rows *rows = s->sync->rows;
    size_t first = rows->first, end = rows->first + rows->n;
    lo = lo > first ? lo : first;
    hi = hi < end ? hi : end;
    if (lo >= hi)
        return GP_OK;
    if (hi - lo > s->cap - s->nb)
        return gp_error_set(err, GP_EINTERNAL, NULL, "a minibatch outgrew its buffer");
    for (size_t i = lo - first; i < hi - first;) {
        size_t count = hi - first - i < rows->chunk ? hi - first - i : rows->chunk;
        int rc = gp_rows_sync_read(s->sync, i, count);
        if (rc)
            return rc;
        load(s, s->sync->X, s->sync->y, count, 0, count);
        i += count;
    }
    return GP_OK;
}

typedef struct piece_pass {
    svgp_stream *s;
    svgp_piece_fn fn;
    void *ctx;
} piece_pass;

/* A chunk as read, cut into pieces of at most cap rows. */
static int piece_chunk(void *ctx, size_t i, size_t count, const double *X, const double *y,
                       gp_error *err)
{
    (void)i;
    piece_pass *p = ctx;
    svgp_stream *s = p->s;
    int rc = GP_OK;
    for (size_t from = 0; rc == GP_OK && from < count; from += s->cap) {
        svgp_stream_clear(s);
        load(s, X, y, count, from, count - from < s->cap ? count - from : s->cap);
        rc = p->fn(p->ctx, s, err);
    }
    return rc;
}

int svgp_stream_pass(svgp_stream *s, svgp_piece_fn fn, void *ctx)
{
    piece_pass p = {s, fn, ctx};
    return gp_rows_sync_each_chunk(s->sync, piece_chunk, &p);
}

void svgp_stream_offsets(svgp_stream *s, const double *beta)
{
    if (s->p == 0 || s->nb == 0)
        return;
    gp_mean_basis(s->model->mean_type, s->X, s->d, s->nb, s->H);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)s->nb, (blasint)s->p, 1.0, s->H,
                (blasint)s->nb, beta, 1, 0.0, s->off, 1);
}

void svgp_sums_layout(svgp_sums *l, size_t theta, size_t z, size_t beta, size_t m)
{
    *l = (svgp_sums){theta, z, beta, m, 0};
    l->len = 1 + theta + z + beta + m * (m + 1) / 2 + m;
}

/* d value / d beta = H^T g_mu over the rows taken. */
static void beta_grad(const svgp_stream *s, const double *gmu, double *out)
{
    for (size_t j = 0; j < s->p; j++) {
        const double *h = s->H + j * s->nb;
        double v = 0.0;
        for (size_t i = 0; i < s->nb; i++)
            v += h[i] * gmu[i];
        out[j] = v;
    }
}

int svgp_stream_sums(const svgp_eval *e, const svgp_stream *s, double scale, const svgp_sums *l,
                     svgp_work *w, double *buf, gp_error *err)
{
    memset(buf, 0, l->len * sizeof *buf);
    size_t nb = s->nb;
    if (nb == 0)
        return GP_OK;
    svgp_eval eb = *e;
    eb.off = s->p ? s->off : NULL;
    eb.r = NULL;
    double ds;
    svgp_block_moments(&eb, s->X, eb.off, nb, w);
    buf[0] = svgp_block_expect(&eb, s->y, NULL, nb, scale, w, &ds);
    if (l->theta == 0 && l->m == 0)
        return GP_OK;
    svgp_block_sens(&eb, nb, l->theta > 0, w);
    double *at = buf + 1;
    if (l->theta > 0) {
        int rc = svgp_kernel_grad(&eb, s->X, nb, w, ds, at, l->z ? at + l->theta : NULL, err);
        if (rc)
            return rc;
    }
    at += l->theta + l->z;
    if (l->beta)
        beta_grad(s, w->gmu, at);
    at += l->beta;
    if (l->m) {
        gp_pack_lower(w->D, l->m, l->m, at); /* D is symmetric: svgp_block_sens averages it */
        memcpy(at + l->m * (l->m + 1) / 2, w->agmu, l->m * sizeof *at);
    }
    return GP_OK;
}

void svgp_sums_unpack(const svgp_sums *l, const double *buf, double *theta, double *gz,
                      double *gbeta, double *D, double *agmu)
{
    const double *at = buf + 1;
    if (theta)
        memcpy(theta, at, l->theta * sizeof *at);
    if (gz)
        memcpy(gz, at + l->theta, l->z * sizeof *at);
    at += l->theta + l->z;
    if (gbeta)
        memcpy(gbeta, at, l->beta * sizeof *at);
    at += l->beta;
    if (l->m && D) {
        gp_unpack_lower(at, l->m, D, l->m);
        gp_symmetrize_from_lower(D, l->m, l->m);
    }
    if (l->m && agmu)
        memcpy(agmu, at + l->m * (l->m + 1) / 2, l->m * sizeof *at);
}
