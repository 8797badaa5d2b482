/* Fit of method "hkd": working coordinates, inducing inputs, the hyperparameter search and the
 * final posterior. */
#include "core/methods/hkd/fit.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/hkd/bound.h"
#include "core/methods/hkd/gradient.h"
#include "core/methods/hkd/internal.h"
#include "core/methods/hkd/state.h"
#include "core/model/mean.h"

/* ---- fit ---- */

/* Standardisation that the group can act on: a rotated plane and a cycled
 * set of inputs share one scale (and a cycled set one mean), so that the
 * transformation of the original inputs is the same one of the standardised
 * ones; a translated (periodic) input keeps its origin. */
static void adjust_standardisation(gp_model *model, const gp_symmetry *s)
{
    double *mu = model->x_mean, *sc = model->x_scale;
    for (size_t j = 0; s->center_origin && j < model->input_dim; j++)
        mu[j] = 0.0;
    for (size_t g = 0; model->standardize && g < s->n_gen; g++) {
        const gp_sym_generator *G = &s->gen[g];
        size_t n = G->n_dims;
        if (G->type == GP_SYM_TRANSLATE)
            mu[G->dims[0]] = 0.0;
        if (G->type != GP_SYM_ROTATE2D && G->type != GP_SYM_CYCLE_DIMS)
            continue;
        double mean = 0.0, var = 0.0;
        for (size_t i = 0; i < n; i++)
            mean += mu[G->dims[i]] / (double)n;
        for (size_t i = 0; i < n; i++) {
            double dm = G->type == GP_SYM_CYCLE_DIMS ? mu[G->dims[i]] - mean : 0.0;
            var += (sc[G->dims[i]] * sc[G->dims[i]] + dm * dm) / (double)n;
        }
        for (size_t i = 0; i < n; i++) {
            sc[G->dims[i]] = sqrt(var);
            if (G->type == GP_SYM_CYCLE_DIMS)
                mu[G->dims[i]] = mean;
        }
    }
}

/* U: the eigenvectors of the inputs' second moments, by descending
 * eigenvalue (pitfall 6), each with its largest entry positive. */
static int pca_basis(const double *X, size_t n, size_t d, double **U, gp_error *err)
{
    double *A = gp_alloc_doubles(d * d, err), *ev = gp_alloc_doubles(d, err);
    *U = gp_alloc_doubles(d * d, err);
    int rc = A && ev && *U ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)d, (blasint)n,
                    1.0 / (double)n, X, (blasint)d, 0.0, A, (blasint)d);
        if (LAPACKE_dsyev(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)d, A, (lapack_int)d, ev) != 0)
            rc = gp_error_set(err, GP_ENOTPD, NULL, "the PCA eigenproblem failed");
    }
    for (size_t j = 0; rc == GP_OK && j < d; j++) {
        const double *col = A + (d - 1 - j) * d;
        size_t big = 0;
        for (size_t i = 1; i < d; i++)
            if (fabs(col[i]) > fabs(col[big]))
                big = i;
        double sign = col[big] < 0 ? -1.0 : 1.0;
        for (size_t i = 0; i < d; i++)
            (*U)[i + j * d] = sign * col[i];
    }
    free(A);
    free(ev);
    if (rc) {
        free(*U);
        *U = NULL;
    }
    return rc;
}

int hkd_build_frame(const gp_model *model, const gp_symmetry *s, const double *Xs, size_t n,
                    gp_hkd_frame *f, gp_error *err)
{
    memset(f, 0, sizeof *f);
    f->d = model->input_dim;
    for (size_t g = 0; g < s->n_gen; g++) {
        const gp_sym_generator *G = &s->gen[g];
        if (G->type == GP_SYM_NEGATE_PCA && Xs) {
            int rc = pca_basis(Xs, n, f->d, &f->U, err);
            if (rc)
                return rc;
        }
        if (G->type == GP_SYM_TRANSLATE) {
            size_t k = f->n_trans++, i = G->dims[0];
            f->trans_dim[k] = i;
            f->trans_omega[k] = 6.283185307179586476925 * model->x_scale[i] / G->period;
            f->trans_radius[k] = 1.0 / f->trans_omega[k];
        }
    }
    f->dw = f->d + f->n_trans;
    return GP_OK;
}

/* Up to KMEANS_ROWS of the working points, folded, then k-means (or random). */
static int choose_inducing(hkd_impl *im, const double *Xw, size_t n, size_t M,
                           const char *selection, uint64_t seed, gp_error *err)
{
    size_t dw = im->frame.dw, rows = n < KMEANS_ROWS ? n : KMEANS_ROWS;
    double *F = gp_alloc_doubles(rows * dw, err), *scratch = gp_alloc_doubles(dw, err);
    int rc = F && scratch ? GP_OK : GP_ENOMEM;
    gp_rng rng;
    gp_rng_seed(&rng, seed ^ 0x9e3779b97f4a7c15ULL);
    for (size_t i = 0; rc == GP_OK && i < rows; i++) {
        size_t src = rows == n ? i : (size_t)gp_rng_below(&rng, n);
        gp_group_fold(&im->group, Xw + src * dw, F + i * dw, scratch);
    }
    if (rc == GP_OK) {
        gp_inducing_selection sel =
            strcmp(selection, "random") == 0 ? GP_INDUCING_RANDOM : GP_INDUCING_KMEANS;
        rc = gp_inducing_select(sel, NULL, F, rows, dw, M, seed, im->Z, &im->m, err);
    }
    free(F);
    free(scratch);
    return rc;
}

int hkd_alloc_blocks(hkd_impl *im, gp_error *err)
{
    size_t T = im->group.blocks, m = im->m, mb = im->mb, S = im->group.size, dw = im->frame.dw;
    size_t tmm = 0;
    int rc = gp_checked_size(T * mb, mb, &tmm, err);
    if (rc)
        return rc;
    im->O = gp_alloc_doubles(dw * m * S, err);
    im->mt = calloc(T, sizeof *im->mt);
    im->off = calloc(T, sizeof *im->off);
    im->idx = calloc(T * mb, sizeof *im->idx);
    im->L = gp_alloc_doubles(tmm, err);
    im->Mb = gp_alloc_doubles(tmm, err);
    im->mean = gp_alloc_doubles(T * mb, err);
    im->jitter = gp_alloc_doubles(T, err);
    if (!im->O || !im->mt || !im->off || !im->idx || !im->L || !im->Mb ||
        !im->mean || !im->jitter)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for hkd's blocks");
    memset(im->L, 0, tmm * sizeof *im->L);
    memset(im->Mb, 0, tmm * sizeof *im->Mb);
    return GP_OK;
}

/* The same kernel family with lengthscales spread around the data's scale
 * (seeded), ties of the working kernel kept: what the validation also
 * checks, because the fit moves the lengthscales. */
static int perturbed_kernel(const gp_model *model, hkd_impl *im, uint64_t seed, gp_kernel **out,
                            gp_error *err)
{
    int rc = gp_kernel_copy(out, im->kin, err);
    if (rc)
        return rc;
    double theta[1 + GP_SYM_MAX_DIMS];
    size_t np = gp_kernel_n_params(model->kernel);
    gp_kernel_get_params(model->kernel, theta);
    gp_rng rng;
    gp_rng_seed(&rng, seed ^ 0x2545f4914f6cdd1dULL);
    for (size_t p = 1; p < np; p++) /* the lengthscales, around the inputs' scale */
        theta[p] = log(sqrt((double)model->input_dim)) + gp_rng_uniform(&rng) - 0.5;
    hkd_set_working_params(im, theta, *out);
    return GP_OK;
}

static int validate_symmetry(const gp_model *model, hkd_impl *im, const double *Xw, size_t n,
                             uint64_t seed, gp_error *err)
{
    gp_kernel *kp = NULL;
    int rc = perturbed_kernel(model, im, seed, &kp, err);
    if (rc)
        return rc;
    const gp_kernel *ks[2] = {im->kin, kp};
    rc = gp_group_validate(&im->group, &im->sym, ks, 2, Xw, n, seed, "options.symmetry", err);
    gp_kernel_free(kp);
    return rc;
}

/* "share_inducing": false: every block starts from its own copy of the
 * shared k-means Z (so the fit starts where the shared one does, and the
 * shared Z stays a feasible point of the per-block problem); Z becomes the
 * T copies one after the other. */
static int tile_inducing(hkd_impl *im, gp_error *err)
{
    size_t T = im->group.blocks, one = im->frame.dw * im->mb, all = 0;
    int rc = gp_checked_size(T, one, &all, err);
    double *Z = rc == GP_OK ? gp_alloc_doubles(all, err) : NULL;
    if (Z == NULL)
        return rc ? rc : GP_ENOMEM;
    for (size_t t = 0; t < T; t++)
        memcpy(Z + t * one, im->Z, one * sizeof *Z);
    free(im->Z);
    im->Z = Z;
    im->m = T * im->mb;
    return GP_OK;
}

/* The structure of the model: frame, group, working kernel, validation, Z,
 * orbit and blocks. Xs: standardised inputs (d x n); Xw receives the working
 * ones (dw x n, allocated here). */
static int build_structure(gp_model *model, const gp_fit_request *req, hkd_impl *im,
                           const double *Xs, double **Xw, gp_error *err)
{
    size_t n = req->n;
    int rc = hkd_build_frame(model, &im->sym, Xs, n, &im->frame, err);
    if (rc == GP_OK)
        rc = gp_group_build(&im->sym, &im->frame, &im->group, err);
    if (rc == GP_OK)
        rc = hkd_working_kernel(model->kernel, im, err);
    if (rc)
        return rc;
    hkd_sync_kernel(model->kernel, im);
    size_t dw = im->frame.dw, nw = 0;
    if ((rc = gp_checked_size(dw, n, &nw, err)) != GP_OK)
        return rc;
    if ((*Xw = gp_alloc_doubles(nw, err)) == NULL)
        return GP_ENOMEM;
    gp_hkd_frame_apply(&im->frame, Xs, n, *Xw);
    if (im->sym.validate && (rc = validate_symmetry(model, im, *Xw, n, req->seed, err)))
        return rc;
    const gp_method *me = model->method;
    size_t M = (size_t)gp_option_number(me, req, "inducing");
    if ((im->Z = gp_alloc_doubles(dw * (M < n ? M : n), err)) == NULL)
        return GP_ENOMEM;
    rc = choose_inducing(im, *Xw, n, M < n ? M : n,
                         gp_option_string(me, req, "inducing_selection"), req->seed, err);
    im->mb = im->m;
    if (rc == GP_OK && im->sym.per_block)
        rc = tile_inducing(im, err);
    if (rc == GP_OK)
        rc = hkd_alloc_blocks(im, err);
    return rc;
}

/* Structure after Z: orbit and the blocks each point joins (at the kernel
 * as it starts). */
static int place_blocks(hkd_impl *im, gp_error *err)
{
    hkd_orbit_of(im);
    size_t mS = hkd_orbit_points(im);
    double *Koz = gp_alloc_doubles(mS * im->m, err);
    if (Koz == NULL)
        return GP_ENOMEM;
    hkd_orbit_gram(im, Koz);
    hkd_choose_blocks(im, Koz);
    free(Koz);
    if (im->P == 0)
        return gp_error_set(err, GP_EDATA, "X",
                            "every inducing point sits at a fixed point of the group");
    return GP_OK;
}

/* A seeded subsample of `rows` of the n working points and targets (and a
 * mean's basis rows, *Hs, when there is one). */
static int subsample(const hkd_data *full, size_t dw, size_t rows, uint64_t seed, double **Xs,
                     double **ys, double **Hs, gp_error *err)
{
    const double *Xw = full->X, *y = full->y;
    size_t n = full->n, p = full->p;
    *Xs = gp_alloc_doubles(rows * dw, err);
    *ys = gp_alloc_doubles(rows, err);
    *Hs = p ? gp_alloc_doubles(rows * p, err) : NULL;
    unsigned char *taken = calloc(n, 1);
    if (!*Xs || !*ys || (p && !*Hs) || !taken) {
        free(taken);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    gp_rng rng;
    gp_rng_seed(&rng, seed ^ 0x7f4a7c159e3779b9ULL);
    for (size_t picked = 0; picked < rows;) { /* Floyd-free: rows << n here */
        size_t i = (size_t)gp_rng_below(&rng, n);
        if (!taken[i]) {
            taken[i] = 1;
            picked++;
        }
    }
    for (size_t i = 0, k = 0; i < n; i++)
        if (taken[i]) {
            memcpy(*Xs + k * dw, Xw + i * dw, dw * sizeof *Xw);
            for (size_t j = 0; j < p; j++)
                (*Hs)[k + j * rows] = full->H[i + j * n];
            (*ys)[k++] = y[i];
        }
    free(taken);
    return GP_OK;
}

/* The budget of an exact fit of max_train_points points (as for the other
 * methods), in doubles. */
static double budget_doubles(const gp_fit_request *req)
{
    double cap = (double)gp_fit_point_cap(req);
    return cap * cap;
}

/* The feature cache: cache_mb, and never beyond the fit's memory budget. */
static double cache_bytes(const gp_method *me, const gp_fit_request *req)
{
    double want = gp_option_number(me, req, "cache_mb") * 1048576.0;
    double cap = 8.0 * budget_doubles(req);
    return want < cap ? want : cap;
}

/* Hyperparameters by L-BFGS on the bound over (a subsample of) the data. */
static int fit_hyper(gp_model *model, const gp_fit_request *req, hkd_impl *im,
                     const hkd_data *full, gp_error *err)
{
    const gp_method *me = model->method;
    int iters = (int)gp_option_number(me, req, "max_iterations");
    /* the driver's Z has the kernel's d rows: not the circle of a translated input */
    int optimize_z = gp_option_number(me, req, "optimize_inducing") != 0.0 &&
                     im->frame.dw == im->frame.d;
    gp_model_info_number(model, "optimize_inducing", optimize_z);
    size_t rows = (size_t)gp_option_number(me, req, "hyper_subsample");
    if (rows == 0 || rows > full->n)
        rows = full->n;
    gp_model_info_number(model, "hyper_rows", (double)rows);
    gp_noise_param np;
    gp_noise_param_init(&np, req, full->y, full->n);
    if (iters == 0) {
        model->noise_variance = np.start;
        return GP_OK;
    }
    double *Xs = NULL, *ys = NULL, *Hs = NULL;
    hkd_data sub = *full;
    int rc = GP_OK;
    if (rows < full->n) {
        rc = subsample(full, im->frame.dw, rows, req->seed, &Xs, &ys, &Hs, err);
        sub = (hkd_data){Xs, ys, rows, Hs, full->p, full->beta};
    }
    hkd_work w;
    if (rc == GP_OK)
        rc = hkd_work_alloc(&w, im, sub.n, cache_bytes(me, req), optimize_z ? 2 : 1, err);
    if (rc == GP_OK && (rc = hkd_work_alloc_mean(&w, im, sub.p, err)) != GP_OK)
        hkd_work_free(&w);
    if (rc == GP_OK) {
        w.cancel = &req->cancel;
        hkd_problem pb = {im, &sub, &w, gp_option_number(me, req, "pcg_tolerance"),
                          (int)gp_option_number(me, req, "pcg_max_iterations")};
        gp_inducing_fit_spec spec = {
            .fn = hkd_objective, .ctx = &pb, .optimize_z = optimize_z, .max_iterations = iters,
            .tolerance = gp_option_number(me, req, "tolerance"),
            .objective_offset = -(double)sub.n * log(model->y_scale), .max_total = iters};
        rc = gp_inducing_optimise(model->kernel, &np, &model->noise_variance, im->Z, im->m, req,
                                  &spec, &model->diag, err);
        hkd_work_free(&w);
    }
    free(Xs);
    free(ys);
    free(Hs);
    return rc;
}

static void report(gp_model *model, const hkd_impl *im, const hkd_work *w,
                   const hkd_terms *terms, size_t n)
{
    double offset = -(double)n * log(model->y_scale), jit = 0.0;
    size_t dropped = 0;
    for (size_t t = 0; t < im->group.blocks; t++) {
        dropped += im->mb - im->mt[t];
        jit = im->jitter[t] > jit ? im->jitter[t] : jit;
    }
    model->diag.objective = terms->bound + offset;
    model->diag.jitter = jit;
    gp_model_info_number(model, "n_blocks", (double)im->group.blocks);
    gp_model_info_number(model, "group_size", (double)im->group.size);
    gp_model_info_number(model, "collapsed_bound", terms->bound + offset);
    gp_model_info_number(model, "pcg_iterations", (double)w->pcg_iterations);
    gp_model_info_number(model, "pcg_residual", w->pcg_residual);
    gp_model_info_number(model, "inducing", (double)im->mb);
    gp_model_info_number(model, "inducing_per_block", im->mb < im->m ? 1.0 : 0.0);
    gp_model_info_number(model, "inducing_dropped", (double)dropped);
    gp_model_info_number(model, "working_dims", (double)im->frame.dw);
    gp_model_info_number(model, "trace_fraction",
                         terms->trace / ((double)n * gp_kernel_diag(im->kin, im->Z)));
    gp_model_info_number(model, "features_cached", w->cache ? 1.0 : 0.0);
}

/* The posterior on every row at the fitted hyperparameters. */
static int fit_posterior(gp_model *model, const gp_fit_request *req, hkd_impl *im,
                         const hkd_data *data, gp_error *err)
{
    const gp_method *me = model->method;
    hkd_work w;
    int rc = hkd_work_alloc(&w, im, data->n, cache_bytes(me, req), 0, err);
    if (rc == GP_OK && (rc = hkd_work_alloc_mean(&w, im, data->p, err)) != GP_OK)
        hkd_work_free(&w);
    if (rc)
        return rc;
    w.cancel = &req->cancel;
    hkd_orbit_of(im); /* Z as the search left it */
    hkd_sync_kernel(model->kernel, im);
    hkd_terms terms;
    double tol = gp_option_number(me, req, "pcg_tolerance");
    int max_it = 20 * (int)gp_option_number(me, req, "pcg_max_iterations");
    rc = hkd_evaluate(im, data, &w, model->noise_variance,
                      tol < FINAL_PCG_TOL ? tol : FINAL_PCG_TOL, max_it, &terms, err);
    if (rc == GP_OK)
        report(model, im, &w, &terms, data->n);
    if (rc == GP_OK)
        rc = gp_kernel_points_new(im->kin, im->O, hkd_orbit_points(im), &im->Op, err);
    hkd_work_free(&w);
    return rc;
}

/* Memory checked before anything is allocated: the T blocks' four m x m
 * matrices, the orbit's two m S x mz ones (mz = m, or T m points when every
 * block has its own Z), one chunk's buffers and the working copies of the
 * data (the feature cache is optional and has its own limit, cache_bytes). */
static int size_guard(const gp_fit_request *req, const gp_symmetry *sym, size_t m,
                      gp_error *err)
{
    if (req->kernel && req->kernel->n_active != req->d)
        return gp_error_set(err, GP_EUNSUPPORTED, "kernel.active_dims",
                            "hkd's kernel sees every input (the group acts on all of them)");
    size_t S, T;
    gp_symmetry_counts(sym, &S, &T);
    double mz = (double)m * (sym->per_block ? (double)T : 1.0), chunk = 4096.0;
    double need = 4.0 * (double)T * (double)m * (double)m + 2.0 * (double)S * mz * mz +
                  chunk * (2.0 * (double)S * mz + 2.0 * (double)T * mz) +
                  (double)req->n * (2.0 * (double)req->d + 12.0);
    if (need > budget_doubles(req))
        return gp_error_set(err, GP_ETOOBIG, "options.inducing",
                            "hkd with %zu blocks of %zu inducing points (a group of %zu) on %zu "
                            "points needs %.1f GB of workspace, above the budget of an exact fit "
                            "of max_train_points points (%.1f GB): use fewer inducing points or "
                            "a smaller group, or raise --max-train-points",
                            T, m, S, req->n, need * 8e-9, budget_doubles(req) * 8e-9);
    return GP_OK;
}

/* Per-block Z only differ from the shared one where they move: with the
 * hyperparameters (optimize_inducing, an option beside the symmetry, so
 * checked here, when the fit starts), which the driver cannot do through a
 * circle-embedded (translated) input (also checked with the option). */
static int check_per_block(const gp_method *me, const gp_fit_request *req, const gp_symmetry *s,
                           gp_error *err)
{
    const char *f = "options.symmetry.share_inducing";
    if (!s->per_block)
        return GP_OK;
    if (gp_option_number(me, req, "optimize_inducing") == 0.0)
        return gp_error_set(err, GP_EUNSUPPORTED, f,
                            "%s: false gives every block its own Z to optimise, which "
                            "\"optimize_inducing\": false forbids; set one of them to true", f);
    return gp_symmetry_check_per_block(s, "options.symmetry", err);
}

static int fit_into(gp_model *model, const gp_fit_request *req, hkd_impl *im, gp_error *err)
{
    size_t n = req->n, d = req->d;
    double *Xs = gp_alloc_doubles(n * d, err), *y = gp_alloc_doubles(n, err), *Xw = NULL;
    double *H = NULL;
    int rc = Xs && y ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        adjust_standardisation(model, &im->sym);
        gp_model_standardize_points(model, req->X, n, Xs);
        gp_model_working_targets(model, req->y, n, y);
        rc = build_structure(model, req, im, Xs, &Xw, err);
    }
    /* a mean's basis is of the standardised points (model.c adds it back at
     * those), not of hkd's frame: the mean is no part of the symmetric f */
    size_t p = gp_mean_n_coef(model->mean_type, d);
    if (rc == GP_OK && p && (H = gp_model_mean_basis(model, Xs, n, err)) == NULL)
        rc = GP_ENOMEM;
    if (rc == GP_OK)
        rc = place_blocks(im, err);
    hkd_data data = {Xw, y, n, H, p, model->mean_coef};
    if (rc == GP_OK)
        rc = fit_hyper(model, req, im, &data, err);
    if (rc == GP_OK)
        rc = fit_posterior(model, req, im, &data, err);
    free(Xs);
    free(Xw);
    free(y);
    free(H);
    return rc;
}

int hkd_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err)
{
    const gp_method *me = m;
    hkd_impl *im = calloc(1, sizeof *im);
    if (im == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = gp_symmetry_parse(gp_option_object(req, "symmetry"), req->d, "options.symmetry",
                               &im->sym, err);
    if (rc == GP_OK)
        rc = check_per_block(me, req, &im->sym, err);
    if (rc == GP_OK)
        rc = size_guard(req, &im->sym, (size_t)gp_option_number(me, req, "inducing"), err);
    gp_model *model = NULL;
    if (rc == GP_OK)
        rc = gp_model_new(me, req, &model, err);
    if (rc) {
        hkd_impl_free(im);
        return rc;
    }
    model->impl = im;
    if ((rc = fit_into(model, req, im, err)) != GP_OK) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}
