/* Training of method "svgp": L-BFGS over the hyperparameters and q, or minibatch Adam with
 * natural-gradient steps on q. */
#include "core/methods/svgp/train.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/svgp/elbo.h"
#include "core/methods/svgp/internal.h"

/* ---- the fit ---- */

static int noise_learned(const svgp_fit *f)
{
    return f->lik.type == GP_LIK_GAUSSIAN && f->np.learned;
}

static size_t hyper_dim(const svgp_fit *f)
{
    return f->n_free + (size_t)noise_learned(f) + (f->optimize_z ? f->m * f->d : 0) + f->p;
}

/* The q block: every latent's m and Lq's lower triangle. */
static size_t q_dim(const svgp_fit *f)
{
    return f->C * (f->m + f->m * (f->m + 1) / 2);
}

static size_t full_dim(const svgp_fit *f)
{
    return hyper_dim(f) + q_dim(f);
}

svgp_eval svgp_fit_eval(const svgp_fit *f)
{
    return (svgp_eval){f->k, &f->lik, &f->quad, f->Z, f->m, f->mq, f->Lq, f->r,
                       f->p ? f->off : NULL, f->C, f->C > 1 ? &f->mc : NULL};
}

/* off = H beta: the mean function at every training row. */
void svgp_mean_offsets(svgp_fit *f)
{
    if (f->p)
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)f->n, (blasint)f->p, 1.0, f->H,
                    (blasint)f->n, f->beta, 1, 0.0, f->off, 1);
}

/* x = (free kernel log-parameters, the noise's unconstrained value, Z, the
 * mean's coefficients beta: the method's own trailing coordinates). */
static void pack_hyper(const svgp_fit *f, double x0_noise, double *x)
{
    size_t o = 0;
    for (size_t i = 0; i < f->n_free; i++)
        x[o++] = f->theta[f->free_idx[i]];
    if (noise_learned(f))
        x[o++] = x0_noise;
    if (f->optimize_z)
        memcpy(x + o, f->Z, f->m * f->d * sizeof *x);
    o += f->optimize_z ? f->m * f->d : 0;
    if (f->p)
        memcpy(x + o, f->beta, f->p * sizeof *x);
}

static void apply_hyper(svgp_fit *f, const double *x)
{
    size_t o = 0;
    for (size_t i = 0; i < f->n_free; i++)
        f->theta[f->free_idx[i]] = x[o++];
    gp_kernel_set_params(f->k, f->theta);
    if (f->lik.type == GP_LIK_GAUSSIAN)
        f->lik.noise = gp_noise_param_value(&f->np, noise_learned(f) ? x[o++] : 0.0);
    if (f->optimize_z)
        memcpy(f->Z, x + o, f->m * f->d * sizeof *x);
    o += f->optimize_z ? f->m * f->d : 0;
    if (f->p) /* off follows: svgp_mean_offsets */
        memcpy(f->beta, x + o, f->p * sizeof *x);
}

/* q after the hyperparameters, latent by latent: m, then Lq's lower
 * triangle by columns with the diagonal as its log (Lq stays a valid factor). */
static void pack_q(const svgp_fit *f, double *x)
{
    size_t m = f->m, o = 0;
    for (size_t c = 0; c < f->C; c++) {
        const double *Lq = f->Lq + c * m * m;
        memcpy(x + o, f->mq + c * m, m * sizeof *x);
        o += m;
        for (size_t j = 0; j < m; j++)
            for (size_t i = j; i < m; i++)
                x[o++] = i == j ? log(Lq[i + j * m]) : Lq[i + j * m];
    }
}

static void apply_q(svgp_fit *f, const double *x)
{
    size_t m = f->m, o = 0;
    for (size_t c = 0; c < f->C; c++) {
        double *Lq = f->Lq + c * m * m;
        memcpy(f->mq + c * m, x + o, m * sizeof *x);
        o += m;
        for (size_t j = 0; j < m; j++)
            for (size_t i = j; i < m; i++)
                Lq[i + j * m] = i == j ? exp(x[o++]) : x[o++];
    }
}

/* -(hyperparameter gradient) into g (hyper_dim entries) from gtheta, gz. */
static void hyper_grad(const svgp_fit *f, double *g)
{
    size_t o = 0;
    for (size_t i = 0; i < f->n_free; i++)
        g[o++] = -f->gtheta[f->free_idx[i]];
    if (noise_learned(f))
        g[o++] = -gp_noise_param_grad(&f->np, f->lik.noise, f->gtheta[f->n_kp]);
    for (size_t i = 0; f->optimize_z && i < f->m * f->d; i++)
        g[o++] = -f->gz[i];
    for (size_t j = 0; j < f->p; j++)
        g[o++] = -f->gbeta[j];
}

/* dELBO/dbeta = H^T gmu over the rows evaluated (rows NULL: all n, in order;
 * else the nb rows rows[0..nb) of H, a minibatch). */
static void mean_grad(svgp_fit *f, const size_t *rows, size_t nb)
{
    for (size_t j = 0; j < f->p; j++) {
        const double *h = f->H + j * f->n;
        double s = 0.0;
        for (size_t i = 0; i < nb; i++)
            s += h[rows ? rows[i] : i] * f->w.gmu[i];
        f->gbeta[j] = s;
    }
}

/* What each hyperparameter coordinate is to the request's spec (the q block
 * after them is the method's own): c gets full_dim(f) entries. */
static void hyper_coords(const svgp_fit *f, size_t *c, size_t n)
{
    for (size_t j = 0; j < n; j++)
        c[j] = j < f->n_free ? f->free_idx[j] : GP_HYPER_OTHER;
    if (noise_learned(f))
        c[f->n_free] = GP_HYPER_NOISE;
}

/* -ELBO and its gradient over (hyperparameters, q); +inf where it fails. */
static double fit_objective(void *ctx, const double *x, double *g)
{
    svgp_fit *f = ctx;
    size_t h = hyper_dim(f), m = f->m;
    apply_hyper(f, x);
    apply_q(f, x + h);
    svgp_mean_offsets(f);
    if (!isfinite(f->lik.noise))
        return INFINITY;
    svgp_eval e = svgp_fit_eval(f);
    int kernel = f->n_free > 0 || noise_learned(f);
    svgp_out out = {kernel ? f->gtheta : NULL, f->optimize_z ? f->gz : NULL, f->gmean, f->gchol,
                    0};
    gp_svgp_terms t;
    gp_error err;
    if (svgp_eval_full(&e, f->X, f->n, f->y, &f->w, &t, &out, &err) != GP_OK)
        return INFINITY;
    mean_grad(f, NULL, f->n);
    hyper_grad(f, g);
    size_t o = h;
    for (size_t c = 0; c < f->C; c++) {
        const double *gm = f->gmean + c * m, *gc = f->gchol + c * m * m, *Lq = f->Lq + c * m * m;
        for (size_t j = 0; j < m; j++)
            g[o++] = -gm[j];
        for (size_t j = 0; j < m; j++) /* d/dlog l_jj = l_jj d/dl_jj */
            for (size_t i = j; i < m; i++)
                g[o++] = -gc[i + j * m] * (i == j ? Lq[i + j * m] : 1.0);
    }
    return -t.elbo;
}

/* Natural-gradient steps on q at fixed hyperparameters, full batch: step 1
 * first (exact for gaussian, a Newton-like step otherwise), halved whenever
 * the ELBO would go down, until it stops improving. Cheap beside L-BFGS, and
 * it starts L-BFGS (whose q block is badly scaled against the kernel's) near
 * the optimal q for the current kernel; run again at the end it makes q
 * optimal for the fitted kernel. *elbo receives the bound reached. */
/* One natural-gradient step on every latent's q; GP_ENOTPD (q partly moved:
 * the caller restores it) when one of them would be improper. */
static int natgrad_all(svgp_fit *f, const double *D, const double *agmu, double step,
                       gp_error *err)
{
    size_t m = f->m;
    int rc = GP_OK;
    for (size_t c = 0; rc == GP_OK && c < f->C; c++)
        rc = svgp_natgrad_update(m, D + c * m * m, agmu + c * m, step, f->mq + c * m,
                                 f->Lq + c * m * m, &f->nb, err);
    return rc;
}

int svgp_refine_q(svgp_fit *f, int max_steps, double *elbo, gp_error *err)
{
    size_t m = f->m * f->C, mm = f->m * f->m * f->C; /* all latents' blocks */
    double *mq0 = f->save, *Lq0 = mq0 + m, *D0 = Lq0 + mm, *ag0 = D0 + mm;
    svgp_eval e = svgp_fit_eval(f);
    svgp_out out = {.sens = 1};
    gp_svgp_terms t0, t1;
    int rc = svgp_eval_full(&e, f->X, f->n, f->y, &f->w, &t0, &out, err);
    double step = 1.0;
    for (int s = 0; rc == GP_OK && s < max_steps && step > 1e-3; s++) {
        if (gp_cancel_requested(f->cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
        memcpy(mq0, f->mq, m * sizeof *mq0);
        memcpy(Lq0, f->Lq, mm * sizeof *Lq0);
        memcpy(D0, f->w.D, mm * sizeof *D0);
        memcpy(ag0, f->w.agmu, m * sizeof *ag0);
        gp_error e2;
        int r2 = natgrad_all(f, D0, ag0, step, &e2);
        if (r2 == GP_OK)
            r2 = svgp_eval_full(&e, f->X, f->n, f->y, &f->w, &t1, &out, &e2);
        if (r2 == GP_ENOMEM)
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        if (r2 != GP_OK || !(t1.elbo >= t0.elbo)) { /* back to q0, with its D and agmu */
            memcpy(f->mq, mq0, m * sizeof *mq0);
            memcpy(f->Lq, Lq0, mm * sizeof *Lq0);
            memcpy(f->w.D, D0, mm * sizeof *D0);
            memcpy(f->w.agmu, ag0, m * sizeof *ag0);
            step *= 0.5;
            continue;
        }
        double gain = t1.elbo - t0.elbo;
        t0 = t1;
        if (gain <= 1e-10 * fabs(t1.elbo))
            break;
    }
    if (rc == GP_OK && elbo)
        *elbo = t0.elbo;
    return rc;
}

int svgp_fit_lbfgs(svgp_fit *f, const gp_fit_request *req, const svgp_settings *st,
                   gp_diagnostics *diag, gp_error *err)
{
    size_t dim = full_dim(f);
    double *x = gp_alloc_doubles(dim, err);
    if (x == NULL)
        return GP_ENOMEM;
    pack_hyper(f, gp_noise_param_x0(&f->np), x);
    pack_q(f, x + hyper_dim(f));
    gp_driver_options opt;
    gp_driver_default_options(&opt);
    opt.max_iterations = st->budget;
    opt.tolerance = st->tolerance;
    opt.progress = req->progress;
    opt.progress_ctx = req->progress_ctx;
    opt.cancel = &req->cancel;
    opt.max_total = st->budget;
    opt.objective_offset = st->offset;
    gp_driver_result res;
    int rc = gp_hyper_minimize_free(f->hyper, f->k, f->free_idx, f->n_free, noise_learned(f),
                                    f->np.floor, fit_objective, f, x, dim, &opt, &res, err);
    diag->iterations += res.iterations;
    diag->evaluations += res.evaluations;
    diag->converged = res.converged;
    if (rc == GP_OK) {
        apply_hyper(f, x);
        apply_q(f, x + hyper_dim(f));
        svgp_mean_offsets(f);
    } else if (rc == GP_ENOTPD) {
        gp_error_set(err, GP_ENOTPD, NULL, "the ELBO cannot be evaluated at the starting point");
    }
    free(x);
    return rc;
}

/* ---- minibatch Adam with natural-gradient steps on q ---- */

/* The hyperparameters' Adam under the request's priors and bounds, from the
 * fit's current values. */
int svgp_adam_begin(svgp_fit *f, const svgp_settings *st, svgp_adam_run *run, gp_error *err)
{
    size_t h = hyper_dim(f);
    memset(run, 0, sizeof *run);
    run->h = h;
    run->x = gp_alloc_doubles(h + 1, err);
    run->g = gp_alloc_doubles(h + 1, err);
    run->coord = malloc((h + 1) * sizeof *run->coord);
    int rc = run->x && run->g && run->coord ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK && h > 0)
        rc = gp_adam_init(&run->adam, h, st->lr, err);
    if (rc == GP_OK) {
        hyper_coords(f, run->coord, h);
        gp_hyper_coords hc = {run->coord, h, f->np.floor};
        rc = gp_hyper_walk_new(f->hyper, &hc, f->k, &run->hw, err);
    }
    if (rc == GP_OK) {
        pack_hyper(f, gp_noise_param_x0(&f->np), run->x);
        gp_hyper_walk_project(run->hw, run->x);
    }
    return rc;
}

void svgp_adam_end(svgp_adam_run *run)
{
    if (run->h > 0)
        gp_adam_free(&run->adam);
    gp_hyper_walk_free(run->hw);
    free(run->coord);
    free(run->x);
    free(run->g);
    memset(run, 0, sizeof *run);
}

int svgp_adam_step(svgp_fit *f, svgp_adam_run *run, const svgp_settings *st, gp_error *err)
{
    /* A step that would leave a latent's q improper is skipped for that latent
     * (svgp_natgrad_update leaves it unchanged; the next batch retries). */
    gp_error e2;
    int rc = GP_OK;
    for (size_t c = 0; c < f->C && (rc == GP_OK || rc == GP_ENOTPD); c++)
        rc = svgp_natgrad_update(f->m, f->w.D + c * f->m * f->m, f->w.agmu + c * f->m,
                                 st->natgrad_step, f->mq + c * f->m, f->Lq + c * f->m * f->m,
                                 &f->nb, &e2);
    if (rc != GP_OK && rc != GP_ENOTPD)
        return gp_error_set(err, rc, NULL, "out of memory");
    if (run->h > 0) { /* a projected step under the priors and bounds */
        hyper_grad(f, run->g);
        gp_hyper_walk_prior(run->hw, run->x, run->g);
        gp_adam_step(&run->adam, run->x, run->g);
        gp_hyper_walk_project(run->hw, run->x);
        apply_hyper(f, run->x);
    }
    return GP_OK;
}

int svgp_epoch_progress(int epoch, const svgp_settings *st)
{
    return (int)(((long)epoch * st->budget + st->epochs - 1) / st->epochs);
}

/* One minibatch (nb points gathered into Xb, yb, and rb: their known noise
 * or NULL; rows: their indices, for the mean's basis rows) at weight n / nb:
 * its sensitivities, then svgp_adam_step. *est receives the minibatch
 * estimate of the ELBO. */
static int adam_batch(svgp_fit *f, svgp_adam_run *run, const double *Xb, const double *yb,
                      const double *rb, const size_t *rows, size_t nb, const svgp_settings *st,
                      double *est, gp_error *err)
{
    size_t h = run->h;
    svgp_eval e = svgp_fit_eval(f);
    int rc = svgp_factor_kuu(&e, &f->w, err);
    if (rc)
        return rc;
    double *offb = f->p ? f->off : NULL; /* the batch's own offsets (off is stale here) */
    for (size_t i = 0; offb && i < nb; i++) {
        double v = 0.0;
        for (size_t j = 0; j < f->p; j++)
            v += f->H[rows[i] + j * f->n] * f->beta[j];
        offb[i] = v;
    }
    svgp_block_moments(&e, Xb, offb, nb, &f->w);
    double ds, scale = (double)f->n / (double)nb;
    *est = svgp_block_expect(&e, yb, rb, nb, scale, &f->w, &ds) -
           svgp_kl_sum(f->mq, f->Lq, f->m, f->C);
    if (!isfinite(*est))
        return gp_error_set(err, GP_ENOTPD, NULL, "the ELBO is not finite");
    svgp_block_sens(&e, nb, h > 0, &f->w);
    if (h > 0 && (rc = svgp_kernel_grad(&e, Xb, nb, &f->w, ds, f->gtheta,
                                        f->optimize_z ? f->gz : NULL, err)) != GP_OK)
        return rc;
    if (h > 0)
        mean_grad(f, rows, nb);
    return svgp_adam_step(f, run, st, err);
}

/* One epoch: a seeded shuffle, then the minibatches in order. */
static int adam_epoch(svgp_fit *f, svgp_adam_run *run, size_t *perm, double *Xb, double *yb,
                      double *rb, gp_rng *rng, const svgp_settings *st, double *mean_est,
                      gp_error *err)
{
    size_t n = f->n, d = f->d, b = f->w.cap;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)gp_rng_below(rng, i), t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    double sum = 0.0;
    size_t batches = 0;
    for (size_t s = 0; s < n; s += b) {
        size_t nb = n - s < b ? n - s : b;
        for (size_t i = 0; i < nb; i++) {
            memcpy(Xb + i * d, f->X + perm[s + i] * d, d * sizeof *Xb);
            yb[i] = f->y[perm[s + i]];
        }
        for (size_t i = 0; rb && i < nb; i++) /* a row's known noise follows it */
            rb[i] = f->r[perm[s + i]];
        double est;
        int rc = adam_batch(f, run, Xb, yb, rb, perm + s, nb, st, &est, err);
        if (rc)
            return rc;
        if (gp_cancel_requested(f->cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
        sum += est;
        batches++;
    }
    *mean_est = sum / (double)batches;
    return GP_OK;
}

/* Progress is reported once per epoch on the scale of the iteration budget
 * (svgp_epoch_progress), so a job's progress never passes it. */
int svgp_fit_adam(svgp_fit *f, const gp_fit_request *req, const svgp_settings *st,
                  gp_diagnostics *diag, gp_error *err)
{
    size_t b = f->w.cap;
    svgp_adam_run run;
    double *Xb = gp_alloc_doubles(b * f->d, err), *yb = gp_alloc_doubles(b, err);
    double *rb = f->r ? gp_alloc_doubles(b, err) : NULL;
    size_t *perm = malloc(f->n * sizeof *perm);
    int rc = svgp_adam_begin(f, st, &run, err);
    if (rc == GP_OK && !(Xb && yb && perm && (rb || !f->r)))
        rc = GP_ENOMEM;
    for (size_t i = 0; rc == GP_OK && i < f->n; i++)
        perm[i] = i;
    gp_rng rng;
    gp_rng_seed(&rng, req->seed);
    for (int ep = 1; rc == GP_OK && ep <= st->epochs; ep++) {
        double est = 0.0;
        rc = adam_epoch(f, &run, perm, Xb, yb, rb, &rng, st, &est, err);
        diag->iterations = ep;
        diag->evaluations += (int)((f->n + b - 1) / b);
        if (rc == GP_OK && req->progress &&
            req->progress(req->progress_ctx, svgp_epoch_progress(ep, st), st->budget,
                          est + st->offset))
            rc = gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
    }
    diag->converged = 0; /* a fixed number of epochs */
    svgp_mean_offsets(f);
    svgp_adam_end(&run);
    free(Xb);
    free(yb);
    free(rb);
    free(perm);
    return rc == GP_ENOMEM ? gp_error_set(err, GP_ENOMEM, NULL, "out of memory") : rc;
}
