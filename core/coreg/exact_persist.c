/* Export and import of a coregionalised exact model (core/coreg/exact.h):
 * the parameters (core/coreg/params.h's coreg_* arrays), the entries, the
 * rows and targets, and the general path's factor or the Kronecker path's
 * decomposition, so an imported model predicts bit for bit as it did. */
#include "core/coreg/exact_persist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"

/* ---- export / import ---- */

int gp_coreg_exact_state(const gp_state *st)
{
    return gp_state_find(st, "coreg_sizes") != NULL;
}

/* The Kronecker state: the decomposition and alpha as n x p. */
static int export_kronecker(const gp_coreg_exact *ce, gp_state *st, gp_error *err)
{
    size_t n = ce->n, p = ce->cp.p;
    int rc = gp_state_put(st, "coreg_U", n, n, ce->kr.U, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "coreg_s", n, 1, ce->kr.s, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "coreg_V", p, p, ce->kr.V, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "coreg_l", p, 1, ce->kr.l, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "coreg_A", n, p, ce->kr.A, err);
    return rc;
}

int gp_coreg_exact_export(const gp_coreg_exact *ce, gp_state *st, gp_error *err)
{
    size_t M = ce->e.M;
    double *idx = gp_alloc_doubles(2 * M + 1, err);
    if (idx == NULL)
        return GP_ENOMEM;
    for (size_t a = 0; a < M; a++) {
        idx[a] = (double)ce->e.row[a];
        idx[M + a] = (double)ce->e.out[a];
    }
    int rc = gp_coreg_params_export(&ce->cp, st, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "coreg_entries", M, 2, idx, err);
    free(idx);
    if (rc == GP_OK)
        rc = gp_state_put(st, "X_train", ce->d, ce->n, ce->Xt, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "y_train", M, 1, ce->yw, err);
    if (rc == GP_OK && ce->kronecker)
        rc = export_kronecker(ce, st, err);
    if (rc == GP_OK && !ce->kronecker)
        rc = gp_state_put(st, "alpha", M, 1, ce->alpha, err);
    if (rc == GP_OK && !ce->kronecker)
        rc = gp_state_put_cholesky(st, "chol_packed", ce->L, M, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "max_train_points", (double)ce->cap, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "coreg_kronecker", (double)ce->kronecker, err);
    return rc;
}

/* The entries: rows < n in row order, outputs < p, each row observed. */
static int import_entries(gp_coreg_exact *ce, const gp_state *st, gp_error *err)
{
    const gp_named_array *a = gp_state_find(st, "coreg_entries");
    if (a == NULL || a->cols != 2 || a->rows == 0)
        return gp_error_set(err, GP_EDATA, "coreg_entries", "missing or corrupt entries");
    size_t M = a->rows;
    ce->e.M = M;
    ce->e.row = malloc(M * sizeof *ce->e.row);
    ce->e.out = malloc(M * sizeof *ce->e.out);
    if (!ce->e.row || !ce->e.out)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < M; i++) {
        double r = a->data[i], o = a->data[M + i];
        if (!(r >= 0 && r < (double)ce->n && r == floor(r) && o >= 0 &&
              o < (double)ce->cp.p && o == floor(o)))
            return gp_error_set(err, GP_EDATA, "coreg_entries", "corrupt entries");
        ce->e.row[i] = (size_t)r;
        ce->e.out[i] = (size_t)o;
        if (i > 0 && (ce->e.row[i] < ce->e.row[i - 1] ||
                      (ce->e.row[i] == ce->e.row[i - 1] && ce->e.out[i] <= ce->e.out[i - 1])))
            return gp_error_set(err, GP_EDATA, "coreg_entries", "corrupt entries");
    }
    return GP_OK;
}

static int import_one(const gp_state *st, const char *name, size_t rows, size_t cols,
                      double **dst, gp_error *err)
{
    const double *src;
    int rc = gp_state_get(st, name, rows, cols, &src, err);
    if (rc == GP_OK && (*dst = gp_alloc_doubles(rows * cols, err)) == NULL)
        rc = GP_ENOMEM;
    if (rc == GP_OK)
        memcpy(*dst, src, rows * cols * sizeof *src);
    return rc;
}

/* The Kronecker state as exported; t = s l + 1 must be positive. */
static int import_kronecker(gp_coreg_exact *ce, const gp_state *st, gp_error *err)
{
    size_t n = ce->n, p = ce->cp.p;
    gp_coreg_kron *kr = &ce->kr;
    kr->n = n;
    kr->p = p;
    int rc = import_one(st, "coreg_U", n, n, &kr->U, err);
    if (rc == GP_OK)
        rc = import_one(st, "coreg_s", n, 1, &kr->s, err);
    if (rc == GP_OK)
        rc = import_one(st, "coreg_V", p, p, &kr->V, err);
    if (rc == GP_OK)
        rc = import_one(st, "coreg_l", p, 1, &kr->l, err);
    if (rc == GP_OK)
        rc = import_one(st, "coreg_A", n, p, &kr->A, err);
    for (size_t k = 0; rc == GP_OK && k < p; k++)
        for (size_t r = 0; rc == GP_OK && r < n; r++)
            if (!(kr->s[r] * kr->l[k] + 1.0 > 0.0))
                rc = gp_error_set(err, GP_EDATA, "coreg_s", "corrupt eigenvalues");
    return rc == GP_OK ? gp_coreg_exact_kron_derived(ce, err) : rc;
}

static int import_arrays(gp_coreg_exact *ce, const gp_state *st, gp_error *err)
{
    size_t M = ce->e.M, MM = 0;
    const double *Xt, *y;
    double cap = 0, kron = 0;
    int rc = gp_state_get(st, "X_train", ce->d, ce->n, &Xt, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "y_train", M, 1, &y, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "max_train_points", &cap, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "coreg_kronecker", &kron, err);
    if (rc == GP_OK && kron != 0.0 && !(ce->cp.q == 1 && M == ce->n * ce->cp.p))
        rc = gp_error_set(err, GP_EDATA, "coreg_kronecker", "corrupt solver flag");
    if (rc == GP_OK && !(cap >= 1 && cap <= 1e15 && cap == floor(cap) && cap >= (double)M))
        rc = gp_error_set(err, GP_EDATA, "max_train_points", "corrupt point cap");
    if (rc == GP_OK)
        rc = gp_checked_size(M, M, &MM, err);
    if (rc)
        return rc;
    ce->cap = (size_t)cap;
    ce->kronecker = kron != 0.0;
    if (!(ce->Xt = gp_alloc_doubles(ce->d * ce->n, err)) || !(ce->yw = gp_alloc_doubles(M, err)))
        return GP_ENOMEM;
    memcpy(ce->Xt, Xt, ce->d * ce->n * sizeof *Xt);
    memcpy(ce->yw, y, M * sizeof *y);
    if (ce->kronecker)
        return import_kronecker(ce, st, err);
    const double *alpha;
    if ((rc = gp_state_get(st, "alpha", M, 1, &alpha, err)) != GP_OK)
        return rc;
    if (!(ce->alpha = gp_alloc_doubles(M, err)) || !(ce->L = gp_alloc_doubles(MM, err)))
        return GP_ENOMEM;
    memcpy(ce->alpha, alpha, M * sizeof *alpha);
    return gp_state_get_cholesky(st, "chol_packed", M, ce->L, err);
}

int gp_coreg_exact_import(gp_model *model, const gp_state *st, gp_coreg_exact **out,
                          gp_error *err)
{
    gp_coreg_exact *ce = calloc(1, sizeof *ce);
    if (ce == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    ce->n = model->n_train;
    ce->d = model->input_dim;
    int rc = gp_coreg_params_import(&ce->cp, st, model->kernel, err);
    if (rc == GP_OK && ce->cp.p != model->n_outputs)
        rc = gp_error_set(err, GP_EDATA, "coreg_sizes", "output count differs from the model's");
    if (rc == GP_OK)
        rc = import_entries(ce, st, err);
    if (rc == GP_OK)
        rc = import_arrays(ce, st, err);
    if (rc) {
        gp_coreg_exact_free(ce);
        return rc;
    }
    gp_coreg_exact_point_view(model, ce);
    *out = ce;
    return GP_OK;
}

