/* The W2 loss of method "gwi" and its gradient (core/methods/gwi/gwi.h).
 *
 * Derivation of the gradient (docs/methods/sparse-variational-and-pls.md
 * §5.3 B4, written out). Batch B (nb points), comparison points S (ns),
 * K_ZB = k(Z, X_B), A_B = Lk^{-1} K_ZB, P_B = L^T K_ZB (likewise for S):
 *   r_bb = k_bb - |a_b|^2 + |p_b|^2,  R_SS = K_SS - A_S^T A_S + P_S^T P_S.
 * r depends on Sigma = L L^T only through k_Z^T Sigma k_Z, so for a loss
 * with symmetric sensitivity G = dloss/dSigma, dloss/dL = 2 G L, and
 * G L is formed from the P's without an m x m G:
 *   data term:  G = c K_ZB K_ZB^T,  G L = c K_ZB P_B^T,  c = N / (2 s2 nb)
 *   bures_sym:  w2sq = (tr K_SS + tr R_SS - 2 tr Bm^{1/2} + |m_S|^2) / ns with
 *     Bm = Kh R_SS Kh (Kh = K_SS^{1/2}); d tr Bm^{1/2} = tr(Bm^{-1/2} dBm) / 2
 *     gives dw2sq/dR_SS = G_R = (I - Kh Bm^{-1/2} Kh) / ns (Bm^{-1/2} over
 *     the eigenvalues above GP_GWI_EIG_FLOOR of the largest, P4), so
 *     G L = K_ZS G_R P_S^T.
 *   thesis_nonsym: the eigenvalues of A = R_SB K_BS (R_SB = r(X_S, X_B))
 *     move by d lambda = w^T dA v / (w^T v) (v right, w = conj(u) with u
 *     LAPACK's left eigenvector); with E = sum_s c_s Re(w_s v_s^T / (w_s^T
 *     v_s)), c_s = -1 / (sqrt(nb ns) sqrt(Re lambda_s)), the loss moves by
 *     tr(E^T dA) and dA = K_SZ dSigma K_ZB K_BS, so the Sigma sensitivity is
 *     sym(K_ZS E K_SB K_BZ) and 2 sym(G) L = K_ZS E K_BS^T P_B^T +
 *     K_ZB K_BS E^T P_S^T; its (1/nb) sum r_bb adds (2/nb) K_ZB P_B^T.
 * The mean's outputs get dloss/dm_b = -(N/nb)(y_b - m_b)/s2 (data),
 * (2/ns) m_s (bures_sym) or (2/nb) m_b (thesis_nonsym); kernel_sum:
 * dbeta = K_ZB g_B + K_ZS g_S; mlp: backpropagation through the network.
 * code_w scales the data term by 1/N and the W2 term by 1 / (2 sqrt(w2sq)). */
#include "core/methods/gwi/loss.h"

#include <cblas.h>
#include <complex.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/gwi/internal.h"
#include "core/methods/gwi/network.h"

/* ---- sizes ---- */

size_t gp_gwi_mlp_size(size_t d, size_t h)
{
    return h * d + h + h * h + h + h + 1;
}

size_t gp_gwi_mean_size(const gp_gwi_setup *s)
{
    return s->mean == GP_GWI_MEAN_MLP ? gp_gwi_mlp_size(s->d, s->hidden) : s->m;
}

size_t gp_gwi_n_params(const gp_gwi_setup *s)
{
    return gp_gwi_mean_size(s) + s->m * (s->m + 1) / 2 + (s->learn_noise ? 1 : 0);
}

double gp_gwi_noise(const gp_gwi_setup *s, const double *theta)
{
    return s->learn_noise ? GP_GWI_NOISE_FLOOR + exp(theta[gp_gwi_n_params(s) - 1]) : s->s2;
}

/* ---- the workspace ---- */

struct gp_gwi_work {
    size_t nb, ns, m, d, h, cols; /* cols: the network's columns, nb + ns */
    gp_gwi_mean_kind kind;        /* the setup it was made for (gp_gwi_loss checks) */
    gp_gwi_w2_kind w2;
    double *L;                    /* m x m, theta's factor unpacked */
    double *KB, *AB, *PB;         /* m x nb */
    double *KS, *AS, *PS;         /* m x ns */
    double *mean, *gout;          /* cols: m_Q at [B S], dloss/dm_Q there */
    double *rb;                   /* nb */
    double s2, fit_sum;           /* the noise at theta; sum_b (y_b - m_b)^2 + r_bb */
    double *KSS, *RSS, *Kh, *Bm, *T1, *T2; /* ns x ns */
    double *ev, *mu;              /* ns */
    double *gL;                   /* m x m */
    double *Tm, *Tm2;             /* max(nb, ns) x m */
    double *Xc;                   /* d x cols: the network's inputs */
    double *H1, *H2, *G1, *G2;    /* h x cols */
    /* thesis_nonsym */
    double *RSB, *KBS;            /* ns x nb, nb x ns */
    double *A, *VL, *VR, *E;      /* ns x ns */
    double *wr, *wi;              /* ns */
};

void gp_gwi_work_free(gp_gwi_work *w)
{
    if (w == NULL)
        return;
    double **bufs[] = {&w->L,   &w->KB,  &w->AB,  &w->PB, &w->KS,  &w->AS, &w->PS,
                       &w->mean, &w->gout, &w->rb, &w->KSS, &w->RSS, &w->Kh, &w->Bm,
                       &w->T1,  &w->T2,  &w->ev,  &w->mu, &w->gL,  &w->Tm, &w->Tm2,
                       &w->Xc,  &w->H1,  &w->H2,  &w->G1, &w->G2,  &w->RSB, &w->KBS,
                       &w->A,   &w->VL,  &w->VR,  &w->E,  &w->wr,  &w->wi};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(*bufs[i]);
    free(w);
}

/* n1 x n2 doubles into *p (checked), or an error. */
int gwi_alloc2(double **p, size_t n1, size_t n2, gp_error *err)
{
    size_t n = 0;
    int rc = gp_checked_size(n1 ? n1 : 1, n2 ? n2 : 1, &n, err);
    if (rc)
        return rc;
    *p = gp_alloc_doubles(n, err);
    return *p ? GP_OK : GP_ENOMEM;
}

int gp_gwi_work_new(const gp_gwi_setup *s, size_t nb, size_t ns, gp_gwi_work **out,
                    gp_error *err)
{
    *out = NULL;
    if (nb == 0 || s->m == 0)
        return gp_error_set(err, GP_EINVAL, NULL, "gwi needs a batch and inducing points");
    gp_gwi_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    size_t m = s->m, h = s->mean == GP_GWI_MEAN_MLP ? s->hidden : 0, cols = nb + ns;
    size_t big = nb > ns ? nb : ns;
    w->nb = nb, w->ns = ns, w->m = m, w->d = s->d, w->h = h, w->cols = cols;
    w->kind = s->mean, w->w2 = s->w2;
    int nonsym = s->w2 == GP_GWI_W2_THESIS_NONSYM, rc = GP_OK;
    struct {
        double **p;
        size_t a, b;
        int want;
    } plan[] = {
        {&w->L, m, m, 1},      {&w->KB, m, nb, 1},    {&w->AB, m, nb, 1},   {&w->PB, m, nb, 1},
        {&w->KS, m, ns, 1},    {&w->AS, m, ns, 1},    {&w->PS, m, ns, 1},   {&w->mean, cols, 1, 1},
        {&w->gout, cols, 1, 1}, {&w->rb, nb, 1, 1},   {&w->KSS, ns, ns, 1}, {&w->RSS, ns, ns, 1},
        {&w->Kh, ns, ns, 1},   {&w->Bm, ns, ns, 1},   {&w->T1, ns, ns, 1},  {&w->T2, ns, ns, 1},
        {&w->ev, ns, 1, 1},    {&w->mu, ns, 1, 1},    {&w->gL, m, m, 1},    {&w->Tm, big, m, 1},
        {&w->Tm2, big, m, 1},
        {&w->Xc, s->d, cols, h > 0}, {&w->H1, h, cols, h > 0}, {&w->H2, h, cols, h > 0},
        {&w->G1, h, cols, h > 0}, {&w->G2, h, cols, h > 0},
        {&w->RSB, ns, nb, nonsym}, {&w->KBS, nb, ns, nonsym}, {&w->A, ns, ns, nonsym},
        {&w->VL, ns, ns, nonsym}, {&w->VR, ns, ns, nonsym}, {&w->E, ns, ns, nonsym},
        {&w->wr, ns, 1, nonsym}, {&w->wi, ns, 1, nonsym},
    };
    for (size_t i = 0; rc == GP_OK && i < sizeof plan / sizeof plan[0]; i++)
        if (plan[i].want)
            rc = gwi_alloc2(plan[i].p, plan[i].a, plan[i].b, err);
    if (rc) {
        gp_gwi_work_free(w);
        return rc;
    }
    *out = w;
    return GP_OK;
}

/* ---- forward pieces ---- */

/* K = k(Z, X) (m x n), A = Lk^{-1} K, P = L^T K. */
static void project(const gp_gwi_setup *s, const gp_gwi_work *w, const double *X, size_t n,
                    double *K, double *A, double *P)
{
    size_t m = s->m;
    gp_kernel_cross(s->k, s->Z, m, X, n, K, m);
    memcpy(A, K, m * n * sizeof *K);
    gp_trsm_lower(s->Lk, m, m, 0, A, n, m);
    memcpy(P, K, m * n * sizeof *K);
    cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)m,
                (blasint)n, 1.0, w->L, (blasint)m, P, (blasint)m);
}

/* r(x, x) of the n columns from their A and P. */
static void diag_r(const gp_gwi_setup *s, const double *X, size_t n, const double *A,
                   const double *P, double *r)
{
    size_t m = s->m;
    double kd = gp_kernel_diag(s->k, X); /* stationary: one point serves */
    for (size_t i = 0; i < n; i++) {
        const double *a = A + i * m, *p = P + i * m;
        r[i] = kd - cblas_ddot((blasint)m, a, 1, a, 1) + cblas_ddot((blasint)m, p, 1, p, 1);
    }
}

static void unpack_theta(const gp_gwi_setup *s, gp_gwi_work *w, const double *theta)
{
    size_t m = s->m;
    memset(w->L, 0, m * m * sizeof *w->L);
    gp_unpack_lower(theta + gp_gwi_mean_size(s), m, w->L, m);
}

/* m_Q at the columns of X (n of them; K = k(Z, X) known) into f. The
 * network's columns must fit the workspace (n <= cols). */
static void mean_at(const gp_gwi_setup *s, gp_gwi_work *w, const double *theta, const double *X,
                    size_t n, const double *K, double *f)
{
    if (s->mean == GP_GWI_MEAN_MLP) {
        gwi_mlp_forward(theta, s->d, s->hidden, X, n, w->H1, w->H2, f);
        return;
    }
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)s->m, (blasint)n, 1.0, K, (blasint)s->m,
                theta, 1, 0.0, f, 1);
}

/* ---- the W2 estimators (values; the sensitivities stay in the workspace) ---- */

/* Symmetric eigendecomposition of the n x n matrix in V (overwritten by the
 * eigenvectors), eigenvalues ascending into ev. */
static int sym_eig(double *V, size_t n, double *ev, gp_error *err)
{
    if (LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)n, V, (lapack_int)n, ev) != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "an eigendecomposition did not converge");
    return GP_OK;
}

/* T = V diag(ev^p) over the eigenpairs (V, ev) of an n x n symmetric
 * matrix, columns of eigenvalues at or below floor zeroed: T T^T is then
 * V diag(ev^(2p)) V^T on the kept part. */
static void scaled_columns(const double *V, const double *ev, size_t n, double p, double floor,
                           double *T)
{
    for (size_t j = 0; j < n; j++) {
        double c = ev[j] > floor ? pow(ev[j], p) : 0.0;
        for (size_t i = 0; i < n; i++)
            T[i + j * n] = V[i + j * n] * c;
    }
}

static double largest(const double *v, size_t n)
{
    double x = 0.0;
    for (size_t i = 0; i < n; i++)
        x = fmax(x, v[i]);
    return x;
}

/* bures_sym on S (K_S, A_S, P_S and m_S known): returns w2sq; leaves
 * G_R = (I - Kh Bm^{-1/2} Kh) / ns in w->T2 for the gradient. */
static int bures_sym(const gp_gwi_setup *s, gp_gwi_work *w, const double *XS, size_t ns,
                     const double *mS, double *w2sq, gp_error *err)
{
    size_t m = s->m;
    blasint bn = (blasint)ns, bm = (blasint)m;
    gp_kernel_gram(s->k, XS, ns, w->KSS, ns);
    memcpy(w->RSS, w->KSS, ns * ns * sizeof *w->KSS);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, bn, bm, -1.0, w->AS, bm, 1.0, w->RSS, bn);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, bn, bm, 1.0, w->PS, bm, 1.0, w->RSS, bn);
    gp_symmetrize_from_lower(w->RSS, ns, ns);
    double tr = 0.0, mm = cblas_ddot(bn, mS, 1, mS, 1);
    for (size_t i = 0; i < ns; i++)
        tr += w->KSS[i * ns + i] + w->RSS[i * ns + i];
    /* Kh = K_SS^{1/2} (eigenvalues clamped at 0) */
    memcpy(w->Bm, w->KSS, ns * ns * sizeof *w->KSS);
    int rc = sym_eig(w->Bm, ns, w->ev, err);
    if (rc)
        return rc;
    scaled_columns(w->Bm, w->ev, ns, 0.25, 0.0, w->T1);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, bn, bn, 1.0, w->T1, bn, 0.0, w->Kh, bn);
    gp_symmetrize_from_lower(w->Kh, ns, ns);
    /* Bm = Kh R_SS Kh, then its eigenpairs (U in Bm) */
    cblas_dsymm(CblasColMajor, CblasLeft, CblasLower, bn, bn, 1.0, w->RSS, bn, w->Kh, bn, 0.0,
                w->T1, bn);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bn, bn, bn, 1.0, w->Kh, bn, w->T1, bn,
                0.0, w->Bm, bn);
    gp_symmetrize_average(w->Bm, ns, ns);
    if ((rc = sym_eig(w->Bm, ns, w->mu, err)) != GP_OK)
        return rc;
    double root = 0.0;
    for (size_t i = 0; i < ns; i++)
        root += w->mu[i] > 0.0 ? sqrt(w->mu[i]) : 0.0;
    *w2sq = (mm + tr - 2.0 * root) / (double)ns;
    /* G_R = (I - T2 T2^T) / ns with T2 = Kh U diag(mu^{-1/4}) */
    scaled_columns(w->Bm, w->mu, ns, -0.25, GP_GWI_EIG_FLOOR * largest(w->mu, ns), w->T1);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bn, bn, bn, 1.0, w->Kh, bn, w->T1, bn,
                0.0, w->Bm, bn);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, bn, bn, -1.0 / (double)ns, w->Bm, bn,
                0.0, w->T2, bn);
    for (size_t i = 0; i < ns; i++)
        w->T2[i * ns + i] += 1.0 / (double)ns;
    gp_symmetrize_from_lower(w->T2, ns, ns);
    return GP_OK;
}

/* thesis_nonsym's eigenvalue sum: A = r(X_S, X_B) k(X_B, X_S); returns
 * sum_s sqrt(max(Re lambda_s, 0)) and leaves E (above) in w->E, without the
 * common factor -1 / sqrt(nb ns). */
static int nonsym_root_sum(const gp_gwi_setup *s, gp_gwi_work *w, const double *XB, size_t nb,
                           const double *XS, size_t ns, double *sum, gp_error *err)
{
    size_t m = s->m;
    blasint bn = (blasint)ns, bb = (blasint)nb, bm = (blasint)m;
    gp_kernel_cross(s->k, XS, ns, XB, nb, w->RSB, ns);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, bn, bb, bm, -1.0, w->AS, bm, w->AB, bm,
                1.0, w->RSB, bn);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, bn, bb, bm, 1.0, w->PS, bm, w->PB, bm,
                1.0, w->RSB, bn);
    gp_kernel_cross(s->k, XB, nb, XS, ns, w->KBS, nb);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bn, bn, bb, 1.0, w->RSB, bn, w->KBS,
                bb, 0.0, w->A, bn);
    memcpy(w->E, w->A, ns * ns * sizeof *w->A); /* dgeev destroys its input */
    if (LAPACKE_dgeev(LAPACK_COL_MAJOR, 'V', 'V', (lapack_int)ns, w->E, (lapack_int)ns, w->wr,
                      w->wi, w->VL, (lapack_int)ns, w->VR, (lapack_int)ns) != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "the eigenvalues of r(S, B) k(B, S) did not "
                                                  "converge");
    double top = largest(w->wr, ns), total = 0.0;
    memset(w->E, 0, ns * ns * sizeof *w->E);
    for (size_t j = 0; j < ns; j++) {
        int pair = w->wi[j] != 0.0 && j + 1 < ns;
        double re = w->wr[j];
        total += (pair ? 2.0 : 1.0) * (re > 0.0 ? sqrt(re) : 0.0);
        if (re > GP_GWI_EIG_FLOOR * top) {
            /* v = VR_j + i VR_j+1, w = VL_j - i VL_j+1 (conj of LAPACK's u) */
            const double *vr = w->VR + j * ns, *vi = pair ? vr + ns : NULL;
            const double *ur = w->VL + j * ns, *ui = pair ? ur + ns : NULL;
            double complex wv = 0.0;
            for (size_t i = 0; i < ns; i++)
                wv += (ur[i] - I * (ui ? ui[i] : 0.0)) * (vr[i] + I * (vi ? vi[i] : 0.0));
            double complex c = (pair ? 2.0 : 1.0) / (sqrt(re) * wv);
            for (size_t b = 0; b < ns; b++) {
                double complex vb = vr[b] + I * (vi ? vi[b] : 0.0);
                for (size_t a = 0; a < ns; a++) {
                    double complex wa = ur[a] - I * (ui ? ui[a] : 0.0);
                    w->E[a + b * ns] += creal(c * wa * vb);
                }
            }
        }
        if (pair)
            j++;
    }
    *sum = total;
    return GP_OK;
}

/* ---- the loss and its gradient ---- */

/* Coefficients that turn the two terms into the objective (gwi.h). */
typedef struct loss_weights {
    double data, w2;
} loss_weights;

static loss_weights weights_of(const gp_gwi_setup *s, double w2sq)
{
    loss_weights c = {1.0, 1.0};
    if (s->objective == GP_GWI_OBJECTIVE_CODE_W) {
        c.data = 1.0 / (double)s->n_total;
        c.w2 = w2sq > 0.0 ? 0.5 / sqrt(w2sq) : 0.0;
    }
    return c;
}

static double objective_of(const gp_gwi_setup *s, double nll, double w2sq)
{
    if (s->objective == GP_GWI_OBJECTIVE_CODE_W)
        return (nll - 0.5 * (double)s->n_total * (LOG_2PI + log(s->s2))) / (double)s->n_total +
               sqrt(fmax(w2sq, 0.0));
    return nll + w2sq;
}

/* The network's inputs: [X_B X_S] side by side (S only when bures_sym uses it). */
static size_t network_columns(const gp_gwi_setup *s, gp_gwi_work *w, const double *XB,
                              size_t nb, const double *XS, size_t ns)
{
    size_t d = s->d, cols = s->w2 == GP_GWI_W2_BURES_SYM ? nb + ns : nb;
    if (s->mean != GP_GWI_MEAN_MLP)
        return cols;
    memcpy(w->Xc, XB, d * nb * sizeof *XB);
    if (cols > nb)
        memcpy(w->Xc + d * nb, XS, d * ns * sizeof *XS);
    return cols;
}

/* The forward pass in two tasks that share nothing but theta: the batch
 * side (projections, r_bb, means at B) and the comparison side
 * (projections, means at S and, for bures_sym, its two eigenproblems). The
 * split does not depend on the thread count, so neither do the bits. */
typedef struct forward_job {
    const gp_gwi_setup *s;
    gp_gwi_work *w;
    const double *theta, *XB, *XS;
    size_t nb, ns;
    int rc;
    double w2sq;
    gp_error err;
} forward_job;

/* The network at columns [c0, c0 + n) of the workspace's inputs. */
static void network_at(const forward_job *j, size_t c0, size_t n)
{
    const gp_gwi_setup *s = j->s;
    gp_gwi_work *w = j->w;
    size_t h = s->hidden;
    gwi_mlp_forward(j->theta, s->d, h, w->Xc + c0 * s->d, n, w->H1 + c0 * h, w->H2 + c0 * h,
                    w->mean + c0);
}

static void forward_task(void *ctx, size_t task)
{
    forward_job *j = ctx;
    const gp_gwi_setup *s = j->s;
    gp_gwi_work *w = j->w;
    int mlp = s->mean == GP_GWI_MEAN_MLP, bures = s->w2 == GP_GWI_W2_BURES_SYM;
    if (task == 0) {
        project(s, w, j->XB, j->nb, w->KB, w->AB, w->PB);
        diag_r(s, j->XB, j->nb, w->AB, w->PB, w->rb);
        if (mlp)
            network_at(j, 0, j->nb);
        else
            mean_at(s, w, j->theta, j->XB, j->nb, w->KB, w->mean);
        return;
    }
    project(s, w, j->XS, j->ns, w->KS, w->AS, w->PS);
    if (!bures) /* the thesis estimator reads neither the mean at S nor its eigenproblems */
        return;
    if (mlp)
        network_at(j, j->nb, j->ns);
    else
        mean_at(s, w, j->theta, j->XS, j->ns, w->KS, w->mean + j->nb);
    j->rc = bures_sym(s, w, j->XS, j->ns, w->mean + j->nb, &j->w2sq, &j->err);
}

/* Forward pass: the means at B (and S), r_bb, the two terms. */
static int forward(const gp_gwi_setup *s, gp_gwi_work *w, const double *theta, const double *XB,
                   const double *yB, size_t nb, const double *XS, size_t ns, gp_gwi_terms *t,
                   size_t *cols, gp_error *err)
{
    double N = (double)s->n_total, s2 = gp_gwi_noise(s, theta);
    w->s2 = s2;
    unpack_theta(s, w, theta);
    *cols = network_columns(s, w, XB, nb, XS, ns);
    forward_job job = {.s = s, .w = w, .theta = theta, .XB = XB, .XS = XS, .nb = nb, .ns = ns};
    gp_parallel_for(2, forward_task, &job);
    if (job.rc) {
        *err = job.err;
        return job.rc;
    }
    double sq = 0.0, rsum = 0.0, mb2 = 0.0;
    for (size_t b = 0; b < nb; b++) {
        double e = yB[b] - w->mean[b];
        sq += e * e;
        rsum += w->rb[b];
        mb2 += w->mean[b] * w->mean[b];
    }
    w->fit_sum = sq + rsum;
    t->nll = 0.5 * N * (LOG_2PI + log(s2)) + N / (double)nb * (sq + rsum) / (2.0 * s2);
    t->w2sq = job.w2sq;
    if (s->w2 == GP_GWI_W2_THESIS_NONSYM) {
        double roots = 0.0;
        int rc = nonsym_root_sum(s, w, XB, nb, XS, ns, &roots, err);
        if (rc)
            return rc;
        t->w2sq = (mb2 + rsum) / (double)nb + gp_kernel_diag(s->k, XB) -
                  2.0 / sqrt((double)nb * (double)ns) * roots;
    }
    t->loss = objective_of(s, t->nll, t->w2sq);
    if (!isfinite(t->loss))
        return gp_error_set(err, GP_ENOTPD, NULL, "the gwi loss is not finite");
    return GP_OK;
}

/* dloss/dL (lower triangle packed into gL_packed) from the sensitivities. */
static void grad_factor(const gp_gwi_setup *s, gp_gwi_work *w, size_t nb, size_t ns,
                        loss_weights c, double *gL_packed)
{
    size_t m = s->m;
    blasint bm = (blasint)m, bb = (blasint)nb, bn = (blasint)ns;
    double N = (double)s->n_total;
    double cB = c.data * N / (w->s2 * (double)nb); /* K_ZB P_B^T's coefficient */
    if (s->w2 == GP_GWI_W2_THESIS_NONSYM)
        cB += c.w2 * 2.0 / (double)nb;
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, bm, bm, bb, cB, w->KB, bm, w->PB, bm,
                0.0, w->gL, bm);
    if (s->w2 == GP_GWI_W2_BURES_SYM) {
        /* 2 K_ZS G_R P_S^T */
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, bn, bm, bn, 1.0, w->T2, bn, w->PS,
                    bm, 0.0, w->Tm, bn);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bm, bm, bn, 2.0 * c.w2, w->KS, bm,
                    w->Tm, bn, 1.0, w->gL, bm);
    } else {
        double f = -c.w2 / sqrt((double)nb * (double)ns);
        /* K_ZS E (K_BS^T P_B^T): Tm (ns x m) = K_BS^T P_B^T, Tm2 = E Tm */
        cblas_dgemm(CblasColMajor, CblasTrans, CblasTrans, bn, bm, bb, 1.0, w->KBS, bb, w->PB, bm,
                    0.0, w->Tm, bn);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bn, bm, bn, 1.0, w->E, bn, w->Tm,
                    bn, 0.0, w->Tm2, bn);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bm, bm, bn, f, w->KS, bm, w->Tm2,
                    bn, 1.0, w->gL, bm);
        /* K_ZB (K_BS (E^T P_S^T)) */
        cblas_dgemm(CblasColMajor, CblasTrans, CblasTrans, bn, bm, bn, 1.0, w->E, bn, w->PS, bm,
                    0.0, w->Tm, bn);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bb, bm, bn, 1.0, w->KBS, bb, w->Tm,
                    bn, 0.0, w->Tm2, bb);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bm, bm, bb, f, w->KB, bm, w->Tm2,
                    bb, 1.0, w->gL, bm);
    }
    gp_pack_lower(w->gL, m, m, gL_packed);
}

/* dloss/dm_Q at the network's columns into w->gout. */
static void grad_outputs(const gp_gwi_setup *s, gp_gwi_work *w, const double *yB, size_t nb,
                         size_t ns, loss_weights c)
{
    double N = (double)s->n_total;
    int bures = s->w2 == GP_GWI_W2_BURES_SYM;
    for (size_t b = 0; b < nb; b++) {
        double g = -c.data * N / (double)nb * (yB[b] - w->mean[b]) / w->s2;
        if (!bures)
            g += c.w2 * 2.0 / (double)nb * w->mean[b];
        w->gout[b] = g;
    }
    for (size_t i = 0; bures && i < ns; i++)
        w->gout[nb + i] = c.w2 * 2.0 / (double)ns * w->mean[nb + i];
}

static void grad_mean(const gp_gwi_setup *s, gp_gwi_work *w, const double *theta, size_t nb,
                      size_t ns, size_t cols, double *g)
{
    if (s->mean == GP_GWI_MEAN_MLP) {
        gwi_mlp_backward(theta, s->d, s->hidden, w->Xc, cols, w->H1, w->H2, w->gout, w->G1, w->G2,
                         g);
        return;
    }
    blasint bm = (blasint)s->m;
    cblas_dgemv(CblasColMajor, CblasNoTrans, bm, (blasint)nb, 1.0, w->KB, bm, w->gout, 1, 0.0, g,
                1);
    if (cols > nb)
        cblas_dgemv(CblasColMajor, CblasNoTrans, bm, (blasint)ns, 1.0, w->KS, bm, w->gout + nb,
                    1, 1.0, g, 1);
}

/* 1 when the workspace was made for a setup of s's shape. */
static int same_shape(const gp_gwi_setup *s, const gp_gwi_work *w)
{
    size_t h = s->mean == GP_GWI_MEAN_MLP ? s->hidden : 0;
    return s->m == w->m && s->d == w->d && h == w->h && s->mean == w->kind &&
           (s->w2 == w->w2 || s->w2 == GP_GWI_W2_BURES_SYM);
}

int gp_gwi_loss(const gp_gwi_setup *s, gp_gwi_work *w, const double *theta, const double *XB,
                const double *yB, size_t nb, const double *XS, size_t ns, gp_gwi_terms *t,
                double *grad, gp_error *err)
{
    if (nb == 0 || nb > w->nb || ns == 0 || ns > w->ns || !same_shape(s, w))
        return gp_error_set(err, GP_EINVAL, NULL, "gwi loss: batch sizes beyond the workspace");
    size_t cols = 0;
    int rc = forward(s, w, theta, XB, yB, nb, XS, ns, t, &cols, err);
    if (rc || grad == NULL)
        return rc;
    loss_weights c = weights_of(s, t->w2sq);
    grad_outputs(s, w, yB, nb, ns, c);
    grad_mean(s, w, theta, nb, ns, cols, grad);
    grad_factor(s, w, nb, ns, c, grad + gp_gwi_mean_size(s));
    if (s->learn_noise) { /* d nll / d s2 times d s2 / dx = s2 - floor */
        double N = (double)s->n_total, s2 = w->s2;
        double ds2 = 0.5 * N / s2 - N / (double)nb * w->fit_sum / (2.0 * s2 * s2);
        grad[gp_gwi_n_params(s) - 1] = c.data * ds2 * (s2 - GP_GWI_NOISE_FLOOR);
    }
    return GP_OK;
}

int gp_gwi_latent(const gp_gwi_setup *s, gp_gwi_work *w, const double *theta, const double *X,
                  size_t n, double *mean, double *var, gp_error *err)
{
    if (!same_shape(s, w))
        return gp_error_set(err, GP_EINVAL, NULL, "gwi latent: workspace of another size");
    unpack_theta(s, w, theta);
    size_t block = w->cols < w->nb ? w->cols : w->nb;
    for (size_t start = 0; start < n; start += block) {
        size_t b = n - start < block ? n - start : block;
        const double *Xb = X + start * s->d;
        project(s, w, Xb, b, w->KB, w->AB, w->PB);
        if (s->mean == GP_GWI_MEAN_MLP)
            gwi_mlp_forward(theta, s->d, s->hidden, Xb, b, w->H1, w->H2, mean + start);
        else
            mean_at(s, w, theta, Xb, b, w->KB, mean + start);
        if (var)
            diag_r(s, Xb, b, w->AB, w->PB, var + start);
    }
    return GP_OK;
}
