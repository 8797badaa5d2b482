/* pls: the particle samplers, projected unadjusted and Metropolis-adjusted
 * Langevin steps (§5.2 A4 (iii)). */
#include "core/methods/pls/langevin.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/linalg/linalg.h"
#include "core/methods/pls/laplace.h"
#include "core/methods/pls/model.h"

/* ---- A4 (iii): the particle samplers ---- */

typedef struct chain {
    const gp_lik *lik;
    const double *Phi, *y, *w; /* w: per-point curvature of the preconditioner (n) */
    const double *off;         /* n: the mean's latent offset h(x)^T beta (NULL: none) */
    size_t n, mk, J;
    int clip;
    double *Rb;          /* mk x mk lower: chol(I + Phi diag(w) Phi^T) */
    double *A, *Ap;      /* mk x J: particles, proposals (mala) */
    double *P, *Pp;      /* mk x J: Rb^{-1} grad V at A, at Ap */
    double *F;           /* n x J: f, then g */
    double *Xi, *T;      /* mk x J: normals, the step */
    double *E, *Ep;      /* J: energies */
    double *mode;        /* mk: the Laplace start's centre; NULL: prior draws */
    gp_rng *rng;         /* J streams */
    long accepted, proposed;
} chain;

static void chain_free(chain *c)
{
    free(c->Rb);
    free(c->A);
    free(c->Ap);
    free(c->P);
    free(c->Pp);
    free(c->F);
    free(c->Xi);
    free(c->T);
    free(c->E);
    free(c->Ep);
    free(c->mode);
    free(c->rng);
}

static int chain_alloc(chain *c, size_t n, size_t mk, size_t J, int mala, gp_error *err)
{
    size_t nJ = 0;
    int rc = gp_checked_size(n, J, &nJ, err);
    if (rc)
        return rc;
    c->n = n;
    c->mk = mk;
    c->J = J;
    c->Rb = gp_alloc_doubles(mk * mk, err);
    c->A = gp_alloc_doubles(mk * J, err);
    c->P = gp_alloc_doubles(mk * J, err);
    c->F = gp_alloc_doubles(nJ, err);
    c->Xi = gp_alloc_doubles(mk * J, err);
    c->T = gp_alloc_doubles(mk * J, err);
    c->E = gp_alloc_doubles(J, err);
    c->rng = malloc(J * sizeof *c->rng);
    int ok = c->Rb && c->A && c->P && c->F && c->Xi && c->T && c->E && c->rng;
    if (ok && mala) {
        c->Ap = gp_alloc_doubles(mk * J, err);
        c->Pp = gp_alloc_doubles(mk * J, err);
        c->Ep = gp_alloc_doubles(J, err);
        ok = c->Ap && c->Pp && c->Ep;
    }
    if (!ok)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for %zu particles", (size_t)J);
    return GP_OK;
}

/* Per-point curvature of -log p for the preconditioner (§5.2 A4 (iii)): the
 * likelihood's bound where it has one (gaussian 1/s2, bernoulli 1/4). The
 * Poisson links have none ([D]): the curvature at the posterior mode is
 * about the count there, so log link y + 1/2 (the rate's curvature exp(f)
 * at f = log(y + 1/2), the transform of A1), square link 4 where y > 0 (2 y
 * / f^2 + 2 at f^2 = y) and 2 at y = 0 (the thesis's constant). */
static void precond_weights(const gp_lik *lik, const double *y, size_t n, double *w)
{
    double bound = gp_lik_curvature_bound(lik);
    for (size_t i = 0; i < n; i++) {
        if (isfinite(bound))
            w[i] = bound;
        else if (lik->type == GP_LIK_POISSON)
            w[i] = y[i] + 0.5;
        else
            w[i] = y[i] > 0.0 ? 4.0 : 2.0;
    }
}

static int chain_precondition(chain *c, gp_error *err)
{
    size_t mk = c->mk, n = c->n;
    double *S = gp_alloc_doubles(mk * n, err);
    if (S == NULL)
        return GP_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        double s = sqrt(c->w[i]);
        for (size_t m = 0; m < mk; m++)
            S[i * mk + m] = c->Phi[i * mk + m] * s;
    }
    int rc = pls_chol_identity_plus_gram(S, mk, n, 1.0, c->Rb);
    free(S);
    if (rc != GP_OK)
        return gp_error_set(err, GP_ENOTPD, NULL, "the preconditioner is not positive definite");
    return GP_OK;
}

typedef struct lik_task {
    chain *c;
    const double *A;
    double *E;
} lik_task;

#define LIK_TASKS 16

/* Task t: columns t, t + LIK_TASKS, ...: f -> g in place and the energies
 * of those particles. Each column depends on nothing else, so the split over
 * threads changes no result. */
static void lik_columns(void *ctx, size_t task)
{
    lik_task *t = ctx;
    chain *c = t->c;
    double *g = malloc(c->n * sizeof *g);
    for (size_t j = task; j < c->J; j += LIK_TASKS) {
        if (g == NULL) {
            t->E[j] = NAN;
            continue;
        }
        double *col = c->F + j * c->n;
        if (c->off)
            cblas_daxpy((blasint)c->n, 1.0, c->off, 1, col, 1);
        double ll = pls_loglik_and_g(c->lik, c->y, col, c->n, g, c->clip);
        memcpy(col, g, c->n * sizeof *g);
        const double *a = t->A + j * c->mk;
        t->E[j] = -ll + 0.5 * cblas_ddot((blasint)c->mk, a, 1, a, 1);
    }
    free(g);
}

/* P = Rb^{-1} grad V(A) and E = V(A) for all particles: two dgemm and one
 * dtrsm over the J columns at once (level 3). */
static void chain_gradient(chain *c, const double *A, double *P, double *E)
{
    blasint mk = (blasint)c->mk, n = (blasint)c->n, J = (blasint)c->J;
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, n, J, mk, 1.0, c->Phi, mk, A, mk, 0.0,
                c->F, n);
    lik_task t = {c, A, E};
    gp_parallel_for(c->J < LIK_TASKS ? c->J : LIK_TASKS, lik_columns, &t);
    memcpy(P, A, c->mk * c->J * sizeof *A);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, mk, J, n, 1.0, c->Phi, mk, c->F, n,
                1.0, P, mk);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, mk, J, 1.0,
                c->Rb, mk, P, mk);
}

static void chain_normals(chain *c)
{
    for (size_t j = 0; j < c->J; j++)
        gp_rng_normal_fill(&c->rng[j], c->Xi + j * c->mk, c->mk);
}

/* out = base + Rb^{-T} (sqrt(2 eta) Xi - eta P): the preconditioned step,
 * A <- A - eta Hb^{-1} grad V + sqrt(2 eta) Hb^{-1/2} xi. Xi is overwritten
 * with Rb^T (out - base). */
static void chain_move(chain *c, double eta, const double *base, double *out)
{
    size_t cnt = c->mk * c->J;
    double s = sqrt(2.0 * eta);
    for (size_t i = 0; i < cnt; i++)
        c->Xi[i] = s * c->Xi[i] - eta * c->P[i];
    memcpy(c->T, c->Xi, cnt * sizeof *c->T);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)c->mk,
                (blasint)c->J, 1.0, c->Rb, (blasint)c->mk, c->T, (blasint)c->mk);
    for (size_t i = 0; i < cnt; i++)
        out[i] = base[i] + c->T[i];
}

static void pula_step(chain *c, double eta)
{
    chain_gradient(c, c->A, c->P, c->E);
    chain_normals(c);
    chain_move(c, eta, c->A, c->A);
}

/* MALA: with D = Rb^T (a' - a) (= Xi after chain_move) the proposal log
 * densities are -|D + eta P(a)|^2 / (4 eta) forward and -|-D + eta P(a')|^2
 * / (4 eta) backward (Hb-metric, the same normaliser both ways). P and E
 * hold the current particles' values on entry and exit. */
static void mala_step(chain *c, double eta)
{
    size_t mk = c->mk;
    chain_normals(c);
    chain_move(c, eta, c->A, c->Ap);
    chain_gradient(c, c->Ap, c->Pp, c->Ep);
    for (size_t j = 0; j < c->J; j++) {
        const double *D = c->Xi + j * mk, *p = c->P + j * mk, *pp = c->Pp + j * mk;
        double fw = 0.0, bw = 0.0;
        for (size_t m = 0; m < mk; m++) {
            double a = D[m] + eta * p[m], b = -D[m] + eta * pp[m];
            fw += a * a;
            bw += b * b;
        }
        double log_acc = c->E[j] - c->Ep[j] - (bw - fw) / (4.0 * eta);
        double u = gp_rng_uniform_pos(&c->rng[j]);
        c->proposed++;
        if (isfinite(c->Ep[j]) && log(u) < log_acc) {
            c->accepted++;
            memcpy(c->A + j * mk, c->Ap + j * mk, mk * sizeof *c->A);
            memcpy(c->P + j * mk, pp, mk * sizeof *c->P);
            c->E[j] = c->Ep[j];
        }
    }
}

double pls_mean_of(const double *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    return s / (double)n;
}

/* [D] The Laplace preconditioner and start (see pls_newton_mode): Rb = chol(H*),
 * c->mode = a*, Newton from a = 0. */
static int laplace_precondition(chain *c, gp_error *err)
{
    newton_ws w;
    c->mode = calloc(c->mk, sizeof *c->mode);
    if (c->mode == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = pls_newton_alloc(&w, c->lik, c->Phi, c->y, c->n, c->mk, err);
    w.off = c->off;
    double V;
    if (rc == GP_OK)
        rc = pls_newton_mode(&w, c->mode, &V, err);
    if (rc == GP_OK)
        memcpy(c->Rb, w.H, c->mk * c->mk * sizeof *c->Rb);
    pls_newton_free(&w);
    return rc;
}

/* Start draws (prior N(0, I), or N(a*, H*^{-1}) = a* + Rb^{-T} xi for the
 * Laplace start), then K steps; progress after every step. */
static int run_chains(chain *c, const pls_settings *set, const gp_fit_request *req,
                      int iteration_base, int max_total, sampler_out *so, gp_error *err)
{
    int mala = set->sampler == SAMPLER_MALA;
    for (size_t j = 0; j < c->J; j++) {
        gp_rng_derive(&c->rng[j], req->seed, STREAM_PARTICLE + j);
        gp_rng_normal_fill(&c->rng[j], c->A + j * c->mk, c->mk);
    }
    if (c->mode) {
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit,
                    (blasint)c->mk, (blasint)c->J, 1.0, c->Rb, (blasint)c->mk, c->A,
                    (blasint)c->mk);
        for (size_t j = 0; j < c->J; j++)
            cblas_daxpy((blasint)c->mk, 1.0, c->mode, 1, c->A + j * c->mk, 1);
    }
    if (mala)
        chain_gradient(c, c->A, c->P, c->E);
    for (long i = 0; i < set->steps; i++) {
        if (mala)
            mala_step(c, set->step);
        else
            pula_step(c, set->step);
        double e = pls_mean_of(c->E, c->J);
        if (gp_cancel_requested(&req->cancel) ||
            (req->progress &&
             req->progress(req->progress_ctx, iteration_base + (int)i + 1, max_total, -e)))
            return gp_error_set(err, GP_ECANCELLED, NULL, "the fit was cancelled");
    }
    chain_gradient(c, c->A, c->P, c->E); /* the final particles' energies */
    so->energy = pls_mean_of(c->E, c->J);
    so->acceptance = mala ? (c->proposed ? (double)c->accepted / (double)c->proposed : NAN) : NAN;
    if (!isfinite(so->energy))
        return gp_error_set(err, GP_ENOTPD, "options.step",
                            "the Langevin chains diverged (mean energy %g): use a smaller step",
                            so->energy);
    return GP_OK;
}

int pls_sample_particles(pls_impl *im, const gp_lik *lik, const double *Phi, size_t n,
                         const double *y, const double *off, const pls_settings *set,
                         const gp_fit_request *req, int iteration_base, int max_total,
                         sampler_out *so, gp_error *err)
{
    chain c;
    memset(&c, 0, sizeof c);
    double *w = gp_alloc_doubles(n, err);
    int rc = w ? chain_alloc(&c, n, im->mk, im->J, set->sampler == SAMPLER_MALA, err) : GP_ENOMEM;
    if (rc == GP_OK) {
        c.lik = lik;
        c.Phi = Phi;
        c.y = y;
        c.off = off;
        c.w = w;
        c.clip = 1;
        if (set->laplace_start) {
            rc = laplace_precondition(&c, err);
        } else {
            precond_weights(lik, y, n, w);
            rc = chain_precondition(&c, err);
        }
    }
    if (rc == GP_OK)
        rc = run_chains(&c, set, req, iteration_base, max_total, so, err);
    if (rc == GP_OK)
        memcpy(im->A, c.A, im->mk * im->J * sizeof *im->A);
    chain_free(&c);
    free(w);
    return rc;
}
