/* exact with options.coregionalization (core/coreg/exact.h): the fit, the
 * state at given parameters (refactor), observe. Predictions and samples:
 * exact_predict.c; export and import: exact_persist.c; the state they share:
 * exact_impl.h. */
#include "core/coreg/exact.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/coreg/lml.h"
#include "core/coreg/params.h"
#include "core/linalg/linalg.h"
#include "core/optim/driver.h"


void gp_coreg_exact_free(gp_coreg_exact *ce)
{
    if (ce == NULL)
        return;
    gp_coreg_params_free(&ce->cp);
    gp_coreg_entries_free(&ce->e);
    free(ce->Xt);
    free(ce->yw);
    free(ce->L);
    free(ce->alpha);
    gp_coreg_kron_free(&ce->kr);
    free(ce->c);
    free(ce->rt);
    free(ce->AB);
    free(ce);
}

/* c, rt and AB from the decomposition and the parameters. */
int gp_coreg_exact_kron_derived(gp_coreg_exact *ce, gp_error *err)
{
    size_t n = ce->n, p = ce->cp.p;
    const gp_coreg_kron *kr = &ce->kr;
    double *c = gp_alloc_doubles(p * p, err), *rt = gp_alloc_doubles(n * p, err);
    double *AB = gp_alloc_doubles(n * p, err);
    if (!c || !rt || !AB) {
        free(c);
        free(rt);
        free(AB);
        return GP_ENOMEM;
    }
    const double *B = ce->cp.B;
    for (size_t j = 0; j < p; j++)
        for (size_t k = 0; k < p; k++) {
            double t = 0.0;
            for (size_t i = 0; i < p; i++)
                t += kr->V[k * p + i] * B[j * p + i] / sqrt(ce->cp.noise[i]);
            c[j * p + k] = t;
        }
    for (size_t k = 0; k < p; k++)
        for (size_t r = 0; r < n; r++)
            rt[k * n + r] = 1.0 / sqrt(kr->s[r] * kr->l[k] + 1.0);
    for (size_t j = 0; j < p; j++)
        for (size_t r = 0; r < n; r++) {
            double t = 0.0;
            for (size_t i = 0; i < p; i++)
                t += kr->A[i * n + r] * B[j * p + i];
            AB[j * n + r] = t;
        }
    free(ce->c);
    free(ce->rt);
    free(ce->AB);
    ce->c = c, ce->rt = rt, ce->AB = AB;
    return GP_OK;
}

static gp_coreg_data data_of(const gp_coreg_exact *ce)
{
    gp_coreg_data D = {ce->Xt, ce->n, ce->d, &ce->e, ce->yw};
    return D;
}

void gp_coreg_exact_point_view(gp_model *model, gp_coreg_exact *ce)
{
    gp_coreg_params_view(&ce->cp, &model->coreg);
    model->coreg.n_observed = ce->e.M;
    model->coreg.kronecker = ce->kronecker;
}

/* The LML in original units: each entry's density carries 1 / y_scale. */
static double original_lml(const gp_coreg_exact *ce, double lml)
{
    for (size_t a = 0; a < ce->e.M; a++)
        lml -= log(ce->cp.y_scale[ce->e.out[a]]);
    return lml;
}

/* The Kronecker state at the current parameters, replacing ce's (and a
 * general factor) only on success. */
static int refactor_kronecker(gp_model *model, gp_coreg_exact *ce, const gp_cancel *cancel,
                              gp_error *err)
{
    gp_coreg_kron kr, old = ce->kr;
    double lml = 0.0;
    gp_coreg_data D = data_of(ce);
    int rc = gp_coreg_kron_factor(&ce->cp, &D, &kr, &lml, cancel, err);
    if (rc)
        return rc;
    ce->kr = kr;
    if ((rc = gp_coreg_exact_kron_derived(ce, err)) != GP_OK) {
        ce->kr = old;
        gp_coreg_kron_free(&kr);
        return rc;
    }
    gp_coreg_kron_free(&old);
    free(ce->L);
    free(ce->alpha);
    ce->L = ce->alpha = NULL;
    model->diag.jitter = 0.0;
    model->diag.objective = original_lml(ce, lml);
    return GP_OK;
}

/* L, alpha and the LML at the current parameters (general path), into new
 * buffers that replace ce's only on success; the Kronecker state instead
 * when ce->kronecker. */
static int refactor(gp_model *model, gp_coreg_exact *ce, const gp_cancel *cancel, gp_error *err)
{
    if (ce->kronecker)
        return refactor_kronecker(model, ce, cancel, err);
    size_t M = ce->e.M, MM = 0;
    int rc = gp_checked_size(M, M, &MM, err);
    double *L = rc ? NULL : gp_alloc_doubles(MM, err);
    double *alpha = L ? gp_alloc_doubles(M, err) : NULL;
    gp_chol_info info = {0};
    double lml = 0.0;
    gp_coreg_data D = data_of(ce);
    if (alpha == NULL)
        rc = rc ? rc : GP_ENOMEM;
    else
        rc = gp_coreg_lml_general(&ce->cp, &D, L, alpha, &lml, NULL, cancel, &info, err);
    if (rc) {
        free(L);
        free(alpha);
        return rc;
    }
    gp_zero_upper(L, M, M);
    free(ce->L);
    free(ce->alpha);
    ce->L = L;
    ce->alpha = alpha;
    gp_coreg_kron_free(&ce->kr);
    model->diag.jitter = info.jitter;
    model->diag.objective = original_lml(ce, lml);
    return GP_OK;
}

/* ---- the fit's objective ---- */

typedef struct coreg_problem {
    gp_coreg_exact *ce;
    double *A, *alpha, *grad; /* general path's M x M and M; grad dim */
    const gp_cancel *cancel;
} coreg_problem;

static int evaluate(gp_coreg_exact *ce, double *A, double *alpha, double *lml, double *grad,
                    const gp_cancel *cancel, gp_error *err)
{
    gp_coreg_data D = data_of(ce);
    if (ce->kronecker)
        return gp_coreg_lml_kronecker(&ce->cp, &D, lml, grad, cancel, err);
    return gp_coreg_lml_general(&ce->cp, &D, A, alpha, lml, grad, cancel, NULL, err);
}

static double problem_objective(void *ctx, const double *x, double *g)
{
    coreg_problem *pr = ctx;
    gp_coreg_params_unpack(&pr->ce->cp, x);
    double lml;
    if (evaluate(pr->ce, pr->A, pr->alpha, &lml, g ? pr->grad : NULL, pr->cancel, NULL) ||
        !isfinite(lml))
        return INFINITY;
    size_t dim = gp_coreg_params_dim(&pr->ce->cp);
    for (size_t i = 0; g && i < dim; i++)
        g[i] = -pr->grad[i];
    return -lml;
}

/* The relative objective change that ends a coregionalised fit when the
 * request does not give `tolerance`. Its likelihood has flat ridges (W's
 * columns rotate, kappa trades against W's diagonal) along which L-BFGS
 * crawls at exact's 1e-10: on Jura, LMC Q = 2 ran to the 200-iteration cap
 * for 0.02 nats over what 1e-7 reaches in 87 iterations (bench/results/
 * multioutput.md), a difference far inside the hyperparameters' own
 * uncertainty. */
#define GP_COREG_DEFAULT_TOLERANCE 1e-7

static int option_given(const gp_fit_request *req, const char *name)
{
    for (size_t i = 0; i < req->n_options; i++)
        if (strcmp(req->options[i].name, name) == 0)
            return 1;
    return 0;
}

static int optimise(const gp_method *m, const gp_fit_request *req, gp_model *model,
                    gp_coreg_exact *ce, gp_error *err)
{
    size_t dim = gp_coreg_params_dim(&ce->cp), M = ce->e.M, MM = 0;
    coreg_problem pr = {ce, NULL, NULL, NULL, &req->cancel};
    double *x = gp_alloc_doubles(dim, err);
    pr.grad = gp_alloc_doubles(dim, err);
    int rc = x && pr.grad ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK && !ce->kronecker && (rc = gp_checked_size(M, M, &MM, err)) == GP_OK &&
        (!(pr.A = gp_alloc_doubles(MM, err)) || !(pr.alpha = gp_alloc_doubles(M, err))))
        rc = GP_ENOMEM;
    gp_driver_options opt;
    gp_driver_default_options(&opt);
    opt.max_iterations = (int)gp_option_number(m, req, "max_iterations");
    opt.tolerance = option_given(req, "tolerance") ? gp_option_number(m, req, "tolerance")
                                                    : GP_COREG_DEFAULT_TOLERANCE;
    opt.restarts = (int)gp_option_number(m, req, "restarts");
    opt.seed = req->seed;
    opt.progress = req->progress;
    opt.progress_ctx = req->progress_ctx;
    opt.objective_offset = original_lml(ce, 0.0);
    opt.cancel = &req->cancel;
    gp_driver_result res = {0};
    if (rc == GP_OK) {
        gp_coreg_params_pack(&ce->cp, x);
        rc = gp_driver_minimize(problem_objective, &pr, x, dim, &opt, &res, err);
    }
    if (rc == GP_OK)
        gp_coreg_params_unpack(&ce->cp, x);
    model->diag.iterations += res.iterations;
    model->diag.evaluations += res.evaluations;
    model->diag.converged = res.converged;
    model->diag.restarts = res.restarts;
    free(x);
    free(pr.grad);
    free(pr.A);
    free(pr.alpha);
    return rc;
}

/* ---- fit ---- */

static int choose_solver(const gp_coreg_spec *spec, gp_coreg_exact *ce, gp_error *err)
{
    int iso = gp_coreg_entries_isotopic(&ce->e, ce->n, ce->cp.p);
    int can = ce->cp.q == 1 && iso;
    if (spec->solver == GP_COREG_SOLVER_KRONECKER && !can)
        return gp_error_set(err, GP_EINVAL, "options.coregionalization.solver",
                            "options.coregionalization.solver: \"kronecker\" needs icm (one "
                            "latent kernel) and every output observed at every row%s",
                            iso ? "" : " (y has missing values)");
    ce->kronecker = can && spec->solver != GP_COREG_SOLVER_GENERAL;
    return GP_OK;
}

/* The cap on the matrices' order (max_train_points): the general path's
 * M x M over the observed values, the Kronecker path's N x N over the rows. */
static int size_guard(const gp_coreg_exact *ce, size_t n, size_t M, gp_error *err)
{
    size_t order = ce->kronecker ? n : M;
    if (order <= ce->cap)
        return GP_OK;
    return gp_error_set(err, GP_ETOOBIG, "X",
                        "exact GP needs a %zu x %zu matrix (%s): it exceeds max_train_points = "
                        "%zu (use sgpr or svgp)",
                        order, order, ce->kronecker ? "the rows" : "the observed values",
                        ce->cap);
}

/* The rows, entries, parameters and working targets of the request. */
static int fit_setup(gp_model *model, const gp_fit_request *req, const gp_coreg_spec *spec,
                     gp_coreg_exact *ce, gp_error *err)
{
    size_t n = req->n, d = req->d, p = req->n_outputs ? req->n_outputs : 1, nd = 0;
    ce->n = n;
    ce->d = d;
    ce->cap = gp_fit_point_cap(req);
    int rc = gp_coreg_entries_build(req->y, n, p, &ce->e, err);
    if (rc == GP_OK)
        rc = gp_coreg_params_init(&ce->cp, spec, p, model->kernel, req, err);
    if (rc == GP_OK)
        rc = choose_solver(spec, ce, err);
    if (rc == GP_OK)
        rc = size_guard(ce, ce->n, ce->e.M, err);
    if (rc == GP_OK)
        rc = gp_checked_size(n, d, &nd, err);
    if (rc == GP_OK && (!(ce->Xt = gp_alloc_doubles(nd, err)) ||
                        !(ce->yw = gp_alloc_doubles(ce->e.M ? ce->e.M : 1, err))))
        rc = GP_ENOMEM;
    if (rc)
        return rc;
    if (model->standardize && p > 1) /* gp_model_new standardises one output's X only */
        gp_column_stats(req->X, n, d, model->x_mean, model->x_scale);
    gp_model_standardize_points(model, req->X, n, ce->Xt);
    gp_coreg_standardise(&ce->cp, req->y, n, &ce->e, model->standardize, ce->yw);
    return GP_OK;
}

/* The model's common fields from the fitted parameters: its kernel is
 * latent 0's, its noise output 0's (every number is in model->coreg). */
static void fill_common(gp_model *model, gp_coreg_exact *ce)
{
    double *theta = malloc((ce->cp.n_kparams + 1) * sizeof *theta);
    if (theta) {
        gp_kernel_get_params(ce->cp.kernels[0], theta);
        gp_kernel_set_params(model->kernel, theta);
        model->kernel->fixed = ce->cp.kernels[0]->fixed;
    }
    free(theta);
    model->noise_variance = ce->cp.noise[0];
    if (ce->cp.p == 1) {
        model->y_mean = ce->cp.y_mean[0];
        model->y_scale = ce->cp.y_scale[0];
    }
    gp_coreg_exact_point_view(model, ce);
}

int gp_coreg_exact_fit(const gp_method *m, const gp_fit_request *req, gp_model **out,
                       gp_coreg_exact **ce_out, gp_error *err)
{
    gp_coreg_spec spec;
    int rc = gp_coreg_spec_from_request(req, 1, &spec, err);
    if (rc)
        return rc;
    gp_model *model;
    if ((rc = gp_model_new(m, req, &model, err)) != GP_OK)
        return rc;
    gp_coreg_exact *ce = calloc(1, sizeof *ce);
    rc = ce ? fit_setup(model, req, &spec, ce, err)
            : gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK && gp_coreg_params_dim(&ce->cp) > 0)
        rc = optimise(m, req, model, ce, err);
    if (rc == GP_OK)
        rc = refactor(model, ce, &req->cancel, err);
    if (rc) {
        gp_coreg_exact_free(ce);
        gp_model_free(model);
        return rc;
    }
    fill_common(model, ce);
    *out = model;
    *ce_out = ce;
    return GP_OK;
}

/* ---- observe ---- */

/* The new rows' targets in working units (yw, one per entry of `add`) as
 * a one-output observe checks them: finite and within GP_WORKING_LIMIT of
 * the output's mean, so that nothing the factor builds from them
 * overflows; "y[i][j]" names the first that is not. */
static int check_working_targets(const double *yw, const gp_coreg_entries *add, gp_error *err)
{
    for (size_t a = 0; a < add->M; a++)
        if (!isfinite(yw[a]) || fabs(yw[a]) > GP_WORKING_LIMIT) {
            char field[GP_ERROR_FIELD_LEN];
            snprintf(field, sizeof field, "y[%zu][%zu]", add->row[a], add->out[a]);
            return gp_error_set(err, GP_EDATA, field,
                                "%s lies beyond %g standard deviations of its output's "
                                "training values, so the model could not stay finite",
                                field, GP_WORKING_LIMIT);
        }
    return GP_OK;
}

/* ce's rows, entries and targets with the k new rows appended, in new
 * arrays swapped in by the caller. */
static int append_rows(const gp_model *model, const gp_coreg_exact *ce, const double *X,
                       const double *Y, size_t k, gp_coreg_exact *nw, gp_error *err)
{
    size_t n = ce->n, N = n + k, d = ce->d, p = ce->cp.p, Nd = 0;
    gp_coreg_entries add = {0};
    int rc = gp_checked_size(N, d, &Nd, err);
    if (rc == GP_OK)
        rc = gp_coreg_entries_build(Y, k, p, &add, err);
    size_t M = ce->e.M + add.M;
    int kron = ce->kronecker && add.M == k * p;
    gp_coreg_exact probe = {.kronecker = kron, .cap = ce->cap};
    if (rc == GP_OK && (N < n || M < ce->e.M))
        rc = gp_error_set(err, GP_ETOOBIG, "X", "too many rows");
    if (rc == GP_OK)
        rc = size_guard(&probe, N, M, err);
    if (rc == GP_OK &&
        (!(nw->Xt = gp_alloc_doubles(Nd, err)) || !(nw->yw = gp_alloc_doubles(M, err)) ||
         !(nw->e.row = malloc(M * sizeof *nw->e.row)) || !(nw->e.out = malloc(M * sizeof *nw->e.out))))
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK) {
        memcpy(nw->Xt, ce->Xt, n * d * sizeof *nw->Xt);
        gp_model_standardize_points(model, X, k, nw->Xt + n * d);
        memcpy(nw->yw, ce->yw, ce->e.M * sizeof *nw->yw);
        memcpy(nw->e.row, ce->e.row, ce->e.M * sizeof *nw->e.row);
        memcpy(nw->e.out, ce->e.out, ce->e.M * sizeof *nw->e.out);
        for (size_t a = 0; a < add.M; a++) {
            size_t j = add.out[a], b = ce->e.M + a;
            nw->e.row[b] = n + add.row[a];
            nw->e.out[b] = j;
            nw->yw[b] = (Y[j * k + add.row[a]] - ce->cp.y_mean[j]) / ce->cp.y_scale[j];
        }
        nw->e.M = M;
        rc = check_working_targets(nw->yw + ce->e.M, &add, err);
    }
    gp_coreg_entries_free(&add);
    return rc;
}

static void swap_state(gp_coreg_exact *a, gp_coreg_exact *b)
{
    gp_coreg_entries te = a->e;
    a->e = b->e;
    b->e = te;
    double *t = a->Xt;
    a->Xt = b->Xt, b->Xt = t;
    t = a->yw, a->yw = b->yw, b->yw = t;
    size_t tn = a->n;
    a->n = b->n, b->n = tn;
}

int gp_coreg_exact_observe(gp_model *model, gp_coreg_exact *ce, const double *X,
                           const double *Y, size_t k, gp_error *err)
{
    int rc = gp_check_working_points(model, X, k, GP_WORKING_LIMIT, err);
    gp_coreg_exact nw;
    memset(&nw, 0, sizeof nw);
    if (rc == GP_OK)
        rc = append_rows(model, ce, X, Y, k, &nw, err);
    if (rc == GP_OK) {
        nw.n = ce->n + k;
        double jitter = model->diag.jitter, objective = model->diag.objective;
        int kron = ce->kronecker;
        swap_state(ce, &nw);
        /* the Kronecker path while the rows stay isotopic, else the general one */
        ce->kronecker = kron && gp_coreg_entries_isotopic(&ce->e, ce->n, ce->cp.p);
        rc = refactor(model, ce, NULL, err);
        if (rc) { /* all or nothing: the old rows back */
            swap_state(ce, &nw);
            ce->kronecker = kron;
            model->diag.jitter = jitter;
            model->diag.objective = objective;
        } else {
            model->n_train = ce->n;
            gp_coreg_exact_point_view(model, ce);
        }
    }
    gp_coreg_entries_free(&nw.e);
    free(nw.Xt);
    free(nw.yw);
    return rc;
}

/* ---- tests and benchmarks ---- */

size_t gp_coreg_exact_dim(const gp_coreg_exact *ce)
{
    return gp_coreg_params_dim(&ce->cp);
}

void gp_coreg_exact_pack(const gp_coreg_exact *ce, double *x)
{
    gp_coreg_params_pack(&ce->cp, x);
}

int gp_coreg_exact_set(gp_model *model, gp_coreg_exact *ce, const double *x, gp_error *err)
{
    gp_coreg_params_unpack(&ce->cp, x);
    int rc = refactor(model, ce, NULL, err);
    if (rc == GP_OK)
        fill_common(model, ce);
    return rc;
}

int gp_coreg_exact_eval(gp_coreg_exact *ce, const double *x, int kronecker, double *lml,
                        double *grad, gp_error *err)
{
    size_t dim = gp_coreg_params_dim(&ce->cp), M = ce->e.M, MM = 0;
    double *keep = gp_alloc_doubles(dim + 1, err), *A = NULL, *alpha = NULL;
    int rc = keep ? gp_checked_size(M, M, &MM, err) : GP_ENOMEM;
    if (rc == GP_OK && !kronecker &&
        (!(A = gp_alloc_doubles(MM, err)) || !(alpha = gp_alloc_doubles(M, err))))
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        gp_coreg_params_pack(&ce->cp, keep);
        gp_coreg_params_unpack(&ce->cp, x);
        int was = ce->kronecker;
        ce->kronecker = kronecker;
        rc = evaluate(ce, A, alpha, lml, grad, NULL, err);
        ce->kronecker = was;
        gp_coreg_params_unpack(&ce->cp, keep);
    }
    free(keep);
    free(A);
    free(alpha);
    return rc;
}
