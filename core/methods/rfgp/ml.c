/* rfgp: width selection by the type-II marginal likelihood (L-BFGS on
 * analytic gradients). */
#include "core/methods/rfgp/ml.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"
#include "core/methods/rfgp/context.h"
#include "core/methods/rfgp/embed.h"
#include "core/methods/rfgp/model.h"
#include "core/model/method.h"
#include "core/optim/driver.h"

#define LOG_2PI 1.8378770664093453

/* ---- the primal marginal likelihood and its gradient (§7, option 3) ----
 * Per output q, with P = Psi Psi^T / s + I / s0, b = Psi y / s, z = L^{-1} b,
 * a = P^{-1} b = L^{-T} z and r = y - Psi^T a:
 *   LML_q = -1/2 [y^T y / s - |z|^2 + log|P| + n log s + D log s0 + n log 2 pi]
 *   dLML/dPsi    = (1/s) (sum_q a_q r_q^T - p P^{-1} Psi)
 *   dLML/dlog s  = -1/2 sum_q [-y^T y / s + b^T a + |a|^2 / s0] - p (n - t) / 2
 *   dLML/dlog s0 = 1/2 sum_q |a_q|^2 / s0 - p t / 2,   t = sum(P^{-1} Psi o Psi) / s
 * (t: D - tr(P^{-1}) / s0), and dLML/dPsi goes through the features with the
 * unit draws fixed (embed.h). */
void rfgp_ml_free(ml_prob *m)
{
    double *bufs[] = {m->yy, m->Xp, m->Phi, m->Psi, m->Sin, m->P, m->B,
                      m->Z, m->A, m->R, m->Q, m->F, m->T, m->gw, m->w};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    memset(m, 0, sizeof *m); /* m->s NULL: freed (primal_lml_body tests it) */
}

int rfgp_ml_init(ml_prob *m, sel_ctx *s, gp_error *err)
{
    memset(m, 0, sizeof *m);
    const rfgp_cfg *c = s->c;
    size_t D = c->D, n = s->n, p = c->p, dk = c->dk, din = c->two_stage ? c->d_in : 1;
    size_t wide = D > din ? D : din;
    m->s = s;
    m->two = c->two_stage;
    rfgp_embed_of(c, s->in, s->m, &m->e);
    int ok = (m->yy = gp_alloc_doubles(p, err)) && (m->Psi = gp_alloc_doubles(D * n, err)) &&
             (m->Sin = gp_alloc_doubles(D * n, err)) && (m->P = gp_alloc_doubles(D * D, err)) &&
             (m->B = gp_alloc_doubles(D * p, err)) && (m->Z = gp_alloc_doubles(D * p, err)) &&
             (m->A = gp_alloc_doubles(D * p, err)) && (m->R = gp_alloc_doubles(n * p, err)) &&
             (m->Q = gp_alloc_doubles(D * n, err)) && (m->T = gp_alloc_doubles(wide * dk, err)) &&
             (m->gw = gp_alloc_doubles(dk, err)) && (m->w = gp_alloc_doubles(dk, err));
    if (ok && m->two)
        ok = (m->Phi = gp_alloc_doubles(din * n, err)) && (m->F = gp_alloc_doubles(din * n, err));
    if (ok && !m->two && (m->Xp = gp_alloc_doubles(dk * n, err)) != NULL)
        gp_embed_points(&m->e, s->X, s->ldx, 0, n, m->Xp);
    else if (ok && !m->two)
        ok = 0;
    if (!ok) {
        rfgp_ml_free(m);
        return GP_ENOMEM;
    }
    double power = 0.0;
    for (size_t q = 0; q < p; q++) {
        m->yy[q] = 0.0;
        for (size_t i = 0; i < n; i++)
            m->yy[q] += s->Yw[q * n + i] * s->Yw[q * n + i];
        power += m->yy[q];
    }
    power = n ? power / (double)(n * p) : 1.0;
    m->np.learned = c->noise_learn;
    m->np.floor = 1e-8 * (power > 0.0 ? power : 1.0);
    m->np.start = s->noise0;
    return GP_OK;
}

int rfgp_ml_eval(ml_prob *m, double *lml, int grad, double *g_gamma, double *g_s0,
                 double *g_noise, gp_error *err)
{
    sel_ctx *s = m->s;
    const rfgp_cfg *c = s->c;
    size_t D = c->D, n = s->n, p = c->p, dk = c->dk, din = c->d_in;
    double sn = m->noise, t = m->s0;
    rfgp_scale_map(c, &s->u, m->w, m->gamma, s->m);
    if (m->two) {
        int rc = gp_embed_inner(&m->e, s->X, s->ldx, 0, n, m->Phi, err);
        if (rc)
            return rc;
        gp_embed_map(m->e.w_out, m->e.b_out, din, D, m->Phi, n, m->Psi, m->Sin);
    } else
        gp_embed_map(m->e.w_out, m->e.b_out, dk, D, m->Xp, n, m->Psi, m->Sin);
    if (gp_cancel_requested(rfgp_ctx_cancel(s)))
        return GP_ECANCELLED;
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)D, (blasint)n, 1.0 / sn, m->Psi,
                (blasint)D, 0.0, m->P, (blasint)D);
    for (size_t j = 0; j < D; j++)
        m->P[j * D + j] += 1.0 / t;
    gp_symmetrize_from_lower(m->P, D, D);
    int rc = gp_cholesky_jitter_cancellable(m->P, D, D, rfgp_ctx_cancel(s), NULL, err);
    if (rc)
        return rc;
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)D, (blasint)p, (blasint)n,
                1.0 / sn, m->Psi, (blasint)D, s->Yw, (blasint)(n ? n : 1), 0.0, m->B, (blasint)D);
    memcpy(m->Z, m->B, D * p * sizeof *m->Z);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)D,
                (blasint)p, 1.0, m->P, (blasint)D, m->Z, (blasint)D);
    double logdet = gp_chol_logdet(m->P, D, D), total = 0.0;
    for (size_t q = 0; q < p; q++) {
        double zz = 0.0;
        for (size_t j = 0; j < D; j++)
            zz += m->Z[q * D + j] * m->Z[q * D + j];
        total += -0.5 * (m->yy[q] / sn - zz + logdet + (double)n * log(sn) +
                         (double)D * log(t) + (double)n * LOG_2PI);
    }
    *lml = total;
    if (!grad)
        return GP_OK;
    memcpy(m->A, m->Z, D * p * sizeof *m->A);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)D,
                (blasint)p, 1.0, m->P, (blasint)D, m->A, (blasint)D);
    memcpy(m->R, s->Yw, n * p * sizeof *m->R);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)n, (blasint)p, (blasint)D, -1.0,
                m->Psi, (blasint)D, m->A, (blasint)D, 1.0, m->R, (blasint)n);
    memcpy(m->Q, m->Psi, D * n * sizeof *m->Q);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)D,
                (blasint)n, 1.0, m->P, (blasint)D, m->Q, (blasint)D);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)D,
                (blasint)n, 1.0, m->P, (blasint)D, m->Q, (blasint)D);
    double tau = 0.0;
    for (size_t i = 0; i < D * n; i++)
        tau += m->Q[i] * m->Psi[i];
    tau /= sn;
    double gs = -0.5 * (double)p * ((double)n - tau), gt = -0.5 * (double)p * tau;
    for (size_t q = 0; q < p; q++) {
        double ba = 0.0, aa = 0.0;
        for (size_t j = 0; j < D; j++) {
            ba += m->B[q * D + j] * m->A[q * D + j];
            aa += m->A[q * D + j] * m->A[q * D + j];
        }
        gs += -0.5 * (-m->yy[q] / sn + ba + aa / t);
        gt += 0.5 * aa / t;
    }
    *g_noise = gs;
    *g_s0 = gt;
    /* G = (A R^T - p Q) / s into Q, then H = dL/dZ = -Sin o G */
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)D, (blasint)n, (blasint)p,
                1.0 / sn, m->A, (blasint)D, m->R, (blasint)n, -(double)p / sn, m->Q, (blasint)D);
    for (size_t i = 0; i < D * n; i++)
        m->Q[i] *= -m->Sin[i];
    memset(m->gw, 0, dk * sizeof *m->gw);
    *g_gamma = 0.0;
    if (!m->two) {
        gp_embed_width_grad_linear(m->e.w_out, dk, D, m->Q, m->Xp, n, m->T, m->gw);
        return GP_OK;
    }
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)din, (blasint)n, (blasint)D,
                1.0, m->e.w_out, (blasint)din, m->Q, (blasint)D, 0.0, m->F, (blasint)din);
    double gg = 0.0;
    for (size_t i = 0; i < din * n; i++)
        gg -= m->Phi[i] * m->F[i];
    *g_gamma = gg;
    return gp_embed_inner_grad(&m->e, s->X, s->ldx, 0, n, m->F, m->gw, err);
}

/* x = [log widths (n_ls)] [log gamma (two stages)] [log s0 (free_var)] [noise x (learned)] */
static size_t ml_dim(const ml_prob *m)
{
    return m->n_ls + (m->two ? 1 : 0) + (m->free_var ? 1 : 0) + (m->np.learned ? 1 : 0);
}

static void ml_apply(ml_prob *m, const double *x)
{
    size_t i = 0, dk = m->s->c->dk;
    for (size_t k = 0; m->n_ls && k < dk; k++)
        m->w[k] = exp(x[m->n_ls == 1 ? 0 : k]);
    i += m->n_ls;
    if (m->two)
        m->gamma = exp(x[i++]);
    if (m->free_var)
        m->s0 = exp(x[i++]);
    m->noise = gp_noise_param_value(&m->np, m->np.learned ? x[i] : 0.0);
}

static void ml_start(const ml_prob *m, double *x)
{
    size_t i = 0;
    for (size_t k = 0; k < m->n_ls; k++)
        x[i++] = log(m->w[k]);
    if (m->two)
        x[i++] = log(m->gamma);
    if (m->free_var)
        x[i++] = log(m->s0);
    if (m->np.learned)
        x[i++] = gp_noise_param_x0(&m->np);
}

static double ml_objective(void *ctx, const double *x, double *g)
{
    ml_prob *m = ctx;
    ml_apply(m, x);
    double lml, gg, gs0, gn;
    if (rfgp_ml_eval(m, &lml, 1, &gg, &gs0, &gn, NULL) != GP_OK || !isfinite(lml))
        return INFINITY;
    size_t i = 0, dk = m->s->c->dk;
    if (m->n_ls == 1) {
        double sum = 0.0;
        for (size_t k = 0; k < dk; k++)
            sum += m->gw[k];
        g[i++] = -sum;
    } else
        for (size_t k = 0; k < m->n_ls; k++)
            g[i++] = -m->gw[k];
    if (m->two)
        g[i++] = -gg;
    if (m->free_var)
        g[i++] = -gs0;
    if (m->np.learned)
        g[i++] = -gp_noise_param_grad(&m->np, m->noise, gn);
    return -lml;
}

/* The LML in original units of the warm-up rows at the selected values. */
double rfgp_lml_offset(const sel_ctx *s)
{
    double off = 0.0;
    for (size_t q = 0; q < s->c->p; q++)
        off -= (double)s->n * log(s->m->y_scale[q]);
    return off;
}

/* The driver through the model's priors and bounds (stored with it, so a
 * selection at the end of a warm-up in observe has them): widths are the
 * kernel's lengthscales (entries 1 ..), s0 its variance (entry 0), gamma
 * rfgp's own. */
static int ml_minimize(ml_prob *m, const gp_hyper_spec *hs, const gp_kernel *k, double *x,
                       size_t dim, const gp_driver_options *opt, gp_driver_result *res,
                       gp_error *err)
{
    if (hs == NULL)
        return gp_driver_minimize(ml_objective, m, x, dim, opt, res, err);
    size_t *coord = malloc(dim * sizeof *coord), i = 0;
    if (coord == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t j = 0; j < m->n_ls; j++)
        coord[i++] = 1 + j;
    if (m->two)
        coord[i++] = GP_HYPER_OTHER;
    if (m->free_var)
        coord[i++] = 0;
    if (m->np.learned)
        coord[i++] = GP_HYPER_NOISE;
    gp_hyper_coords hc = {coord, dim, m->np.floor};
    int rc = gp_hyper_minimize(hs, &hc, k, ml_objective, m, x, opt, res, err);
    free(coord);
    return rc;
}

int rfgp_select_ml(sel_ctx *s, gp_error *err)
{
    ml_prob m;
    int rc = rfgp_ml_init(&m, s, err);
    if (rc)
        return rc;
    const gp_kernel *k = s->model->kernel;
    memcpy(m.w, s->widths, s->c->dk * sizeof *m.w);
    m.gamma = s->gamma;
    m.s0 = s->s0;
    m.noise = s->noise;
    m.n_ls = (k->fixed & GP_FIX_LENGTHSCALE) ? 0 : k->n_lengthscale == 1 ? 1 : s->c->dk;
    m.free_var = !(k->fixed & GP_FIX_VARIANCE);
    size_t dim = ml_dim(&m);
    double *x = gp_alloc_doubles(dim ? dim : 1, err);
    if (x == NULL) {
        rfgp_ml_free(&m);
        return GP_ENOMEM;
    }
    ml_start(&m, x);
    if (dim > 0 && s->c->max_iterations > 0) {
        gp_driver_options opt;
        gp_driver_default_options(&opt);
        opt.max_iterations = s->c->max_iterations;
        opt.tolerance = s->c->tolerance;
        opt.progress = s->req ? s->req->progress : NULL;
        opt.progress_ctx = s->req ? s->req->progress_ctx : NULL;
        opt.objective_offset = rfgp_lml_offset(s);
        opt.cancel = rfgp_ctx_cancel(s);
        gp_driver_result res;
        rc = ml_minimize(&m, s->model->hyper, k, x, dim, &opt, &res, err);
        s->iterations = res.iterations;
        s->evaluations = res.evaluations;
    }
    if (rc == GP_OK) {
        ml_apply(&m, x);
        memcpy(s->widths, m.w, s->c->dk * sizeof *m.w);
        s->gamma = m.gamma;
        s->s0 = m.s0;
        s->noise = m.noise;
    }
    free(x);
    rfgp_ml_free(&m);
    return rc;
}

/* The LML of the warm-up rows at s's values (the fit's reported objective). */
int rfgp_selected_lml(sel_ctx *s, double *lml, gp_error *err)
{
    ml_prob m;
    int rc = rfgp_ml_init(&m, s, err);
    if (rc)
        return rc;
    memcpy(m.w, s->widths, s->c->dk * sizeof *m.w);
    m.gamma = s->gamma;
    m.s0 = s->s0;
    m.noise = s->noise;
    double unused;
    rc = rfgp_ml_eval(&m, lml, 0, &unused, &unused, &unused, err);
    rfgp_ml_free(&m);
    return rc;
}
