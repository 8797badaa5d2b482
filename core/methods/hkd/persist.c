/* Export and import of a fitted "hkd" model. */
#include "core/methods/hkd/persist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/hkd/fit.h"
#include "core/methods/hkd/internal.h"
#include "core/methods/hkd/state.h"

/* ---- export / import ---- */

/* The format: "symmetry" (its code), "blocks" ((mb + 1) x T: m_t then the Z
 * indices of block t), "pca_basis" (negate_pca only), "Z" (dw x m), the
 * factors, "mean_white" and "jitter". A model whose blocks own their Z
 * ("share_inducing": false) also has "inducing_per_block" = [mb] with
 * m = T mb; without it mb = m (the shared Z, every earlier hkd model). A
 * reader that predates it refuses such a model: its "blocks" are not
 * (m + 1) x T. */

/* T blocks of mb x mb lower factors (only the leading m_t x m_t used),
 * packed one after the other: T mb (mb + 1) / 2 values. */
static int put_blocks(gp_state *st, const char *name, const hkd_impl *im, const double *F,
                      gp_error *err)
{
    size_t m = im->mb, T = im->group.blocks, pk = m * (m + 1) / 2;
    double *buf = gp_alloc_doubles(T * pk, err);
    if (buf == NULL)
        return GP_ENOMEM;
    for (size_t t = 0; t < T; t++)
        gp_pack_lower(F + t * m * m, m, m, buf + t * pk);
    return gp_state_put_owned(st, name, T * pk, 1, buf, err);
}

int hkd_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const hkd_impl *im = model->impl;
    size_t T = im->group.blocks, m = im->mb, d = im->frame.d;
    size_t nc = gp_symmetry_encode(&im->sym, NULL);
    double *code = gp_alloc_doubles(nc, err), *bi = gp_alloc_doubles(T * (m + 1), err);
    if (code == NULL || bi == NULL) {
        free(code);
        free(bi);
        return GP_ENOMEM;
    }
    gp_symmetry_encode(&im->sym, code);
    for (size_t t = 0; t < T; t++) {
        bi[t * (m + 1)] = (double)im->mt[t];
        for (size_t j = 0; j < m; j++)
            bi[t * (m + 1) + 1 + j] = j < im->mt[t] ? (double)im->idx[t * m + j] : 0.0;
    }
    int rc = gp_state_put_owned(st, "symmetry", nc, 1, code, err);
    if (rc == GP_OK)
        rc = gp_state_put_owned(st, "blocks", m + 1, T, bi, err);
    else
        free(bi);
    if (rc == GP_OK && im->frame.U)
        rc = gp_state_put(st, "pca_basis", d, d, im->frame.U, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "Z", im->frame.dw, im->m, im->Z, err);
    double mb = (double)im->mb;
    if (rc == GP_OK && im->mb < im->m)
        rc = gp_state_put(st, "inducing_per_block", 1, 1, &mb, err);
    if (rc == GP_OK)
        rc = put_blocks(st, "chol_kuu_blocks", im, im->L, err);
    if (rc == GP_OK)
        rc = put_blocks(st, "chol_b_blocks", im, im->Mb, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "mean_white", im->P, 1, im->mean, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "jitter", T, 1, im->jitter, err);
    return rc;
}

static int bad_state(const char *name, gp_error *err)
{
    return gp_error_set(err, GP_EDATA, name, "the hkd state's %s is malformed", name);
}

static int get_blocks(const gp_state *st, const char *name, hkd_impl *im, double *F,
                      gp_error *err)
{
    size_t m = im->mb, T = im->group.blocks, pk = m * (m + 1) / 2;
    const double *buf;
    int rc = gp_state_get(st, name, T * pk, 1, &buf, err);
    if (rc)
        return rc;
    size_t bad;
    if (!gp_all_finite(buf, T * pk, &bad))
        return bad_state(name, err);
    for (size_t t = 0; t < T; t++) {
        double *Ft = F + t * m * m;
        gp_unpack_lower(buf + t * pk, m, Ft, m);
        for (size_t j = 0; j < im->mt[t]; j++)
            if (!(Ft[j + j * m] > 0.0))
                return bad_state(name, err);
    }
    return GP_OK;
}

/* Block t's indices: increasing, into Z (its own mb points when per block). */
static int import_blocks(const gp_state *st, hkd_impl *im, gp_error *err)
{
    size_t T = im->group.blocks, m = im->mb;
    const double *bi;
    int rc = gp_state_get(st, "blocks", m + 1, T, &bi, err);
    if (rc)
        return rc;
    for (size_t t = 0; t < T; t++) {
        const double *col = bi + t * (m + 1);
        if (!(col[0] >= 0 && col[0] <= (double)m && col[0] == floor(col[0])))
            return bad_state("blocks", err);
        im->mt[t] = (size_t)col[0];
        for (size_t j = 0; j < im->mt[t]; j++) {
            /* increasing, as hkd_choose_blocks writes them */
            double lo = im->mb < im->m ? (double)(t * m) : 0.0, v = col[1 + j];
            if (!(v >= lo && v < lo + (double)m && v == floor(v)) || (j > 0 && !(v > col[j])))
                return bad_state("blocks", err);
            im->idx[t * m + j] = (size_t)col[1 + j];
        }
    }
    hkd_index_blocks(im);
    return GP_OK;
}

/* mb: m, or "inducing_per_block" with m = T mb. */
static int import_capacity(const gp_state *st, hkd_impl *im, gp_error *err)
{
    im->mb = im->m;
    if (gp_state_find(st, "inducing_per_block") == NULL)
        return GP_OK;
    const double *v;
    int rc = gp_state_get(st, "inducing_per_block", 1, 1, &v, err);
    if (rc)
        return rc;
    if (!(v[0] >= 1.0 && v[0] == floor(v[0]) && v[0] * (double)im->group.blocks == (double)im->m))
        return bad_state("inducing_per_block", err);
    im->mb = (size_t)v[0];
    return GP_OK;
}

static int import_arrays(const gp_model *model, const gp_state *st, hkd_impl *im,
                         gp_error *err)
{
    size_t d = model->input_dim, bad;
    const gp_named_array *code = gp_state_find(st, "symmetry"), *z = gp_state_find(st, "Z");
    if (code == NULL || code->cols != 1)
        return bad_state("symmetry", err);
    int rc = gp_symmetry_decode(code->data, code->rows, d, &im->sym, err);
    if (rc == GP_OK)
        rc = hkd_build_frame(model, &im->sym, NULL, 0, &im->frame, err);
    if (rc)
        return rc;
    if (gp_state_find(st, "pca_basis")) {
        const double *U;
        if ((rc = gp_state_get(st, "pca_basis", d, d, &U, err)) != GP_OK)
            return rc;
        if ((im->frame.U = gp_alloc_doubles(d * d, err)) == NULL)
            return GP_ENOMEM;
        memcpy(im->frame.U, U, d * d * sizeof *U);
    }
    if (z == NULL || z->rows != im->frame.dw || z->cols == 0)
        return bad_state("Z", err);
    im->m = z->cols;
    if ((rc = gp_group_build(&im->sym, &im->frame, &im->group, err)) != GP_OK ||
        (rc = hkd_working_kernel(model->kernel, im, err)) != GP_OK ||
        (rc = import_capacity(st, im, err)) != GP_OK)
        return rc;
    hkd_sync_kernel(model->kernel, im);
    if ((im->Z = gp_alloc_doubles(im->frame.dw * im->m, err)) == NULL)
        return GP_ENOMEM;
    memcpy(im->Z, z->data, im->frame.dw * im->m * sizeof *im->Z);
    if (!gp_all_finite(im->Z, im->frame.dw * im->m, &bad))
        return bad_state("Z", err);
    if ((rc = hkd_alloc_blocks(im, err)) != GP_OK || (rc = import_blocks(st, im, err)) != GP_OK)
        return rc;
    hkd_orbit_of(im);
    const double *mean, *jit;
    if ((rc = get_blocks(st, "chol_kuu_blocks", im, im->L, err)) != GP_OK ||
        (rc = get_blocks(st, "chol_b_blocks", im, im->Mb, err)) != GP_OK ||
        (rc = gp_state_get(st, "mean_white", im->P, 1, &mean, err)) != GP_OK ||
        (rc = gp_state_get(st, "jitter", im->group.blocks, 1, &jit, err)) != GP_OK)
        return rc;
    if (!gp_all_finite(mean, im->P, &bad) || !gp_all_finite(jit, im->group.blocks, &bad))
        return bad_state("mean_white", err);
    memcpy(im->mean, mean, im->P * sizeof *mean);
    memcpy(im->jitter, jit, im->group.blocks * sizeof *jit);
    return gp_kernel_points_new(im->kin, im->O, hkd_orbit_points(im), &im->Op, err);
}

int hkd_import(gp_model *model, const gp_state *st, gp_error *err)
{
    hkd_impl *im = calloc(1, sizeof *im);
    if (im == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = gp_method_check_kernel(model->method, model->kernel, err);
    if (rc == GP_OK)
        rc = import_arrays(model, st, im, err);
    if (rc) {
        hkd_impl_free(im);
        return rc;
    }
    model->impl = im;
    return GP_OK;
}
