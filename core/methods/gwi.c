/* Gaussian Wasserstein inference: see core/methods/gwi.h.
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
#include "core/methods/gwi.h"

#include <cblas.h>
#include <complex.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/inducing/collapsed.h"
#include "core/inducing/hyper.h"
#include "core/inducing/inducing.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/optim/driver.h"
#include "core/optim/optim.h"

#define LOG_2PI 1.8378770664093454836
/* Eigenvalues of Bm (or of the thesis's A) below this fraction of the
 * largest take no part in the gradient: 1/sqrt(mu) blows up there (P4). */
#define GP_GWI_EIG_FLOOR 1e-10

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
static int alloc2(double **p, size_t n1, size_t n2, gp_error *err)
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
            rc = alloc2(plan[i].p, plan[i].a, plan[i].b, err);
    if (rc) {
        gp_gwi_work_free(w);
        return rc;
    }
    *out = w;
    return GP_OK;
}

/* ---- the network: D -> h -> h -> 1, tanh ---- */

typedef struct mlp_view {
    const double *W1, *b1, *W2, *b2, *W3, *b3;
} mlp_view;

static mlp_view mlp_at(const double *p, size_t d, size_t h)
{
    mlp_view v;
    v.W1 = p;
    v.b1 = v.W1 + h * d;
    v.W2 = v.b1 + h;
    v.b2 = v.W2 + h * h;
    v.W3 = v.b2 + h;
    v.b3 = v.W3 + h;
    return v;
}

/* H = tanh(W X + b) for the n columns of X (rows x n). */
static void dense_tanh(const double *W, const double *b, size_t out, size_t in, const double *X,
                       size_t n, double *H)
{
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)out, (blasint)n, (blasint)in,
                1.0, W, (blasint)out, X, (blasint)in, 0.0, H, (blasint)out);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < out; i++)
            H[i + j * out] = tanh(H[i + j * out] + b[i]);
}

/* f = net(X) at the n columns of X (d x n); H1, H2 (h x n) keep the layers. */
static void mlp_forward(const double *p, size_t d, size_t h, const double *X, size_t n,
                        double *H1, double *H2, double *f)
{
    mlp_view v = mlp_at(p, d, h);
    dense_tanh(v.W1, v.b1, h, d, X, n, H1);
    dense_tanh(v.W2, v.b2, h, h, H1, n, H2);
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)h, (blasint)n, 1.0, H2, (blasint)h, v.W3, 1,
                0.0, f, 1);
    for (size_t j = 0; j < n; j++)
        f[j] += v.b3[0];
}

/* G (h x n) <- G o (1 - H^2), then db = row sums of G. */
static void tanh_back(double *G, const double *H, size_t h, size_t n, double *db)
{
    for (size_t i = 0; i < h; i++)
        db[i] = 0.0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < h; i++) {
            double t = H[i + j * h];
            G[i + j * h] *= 1.0 - t * t;
            db[i] += G[i + j * h];
        }
}

/* The gradient (into gp, the network's layout) of sum_j g_j f_j after
 * mlp_forward on the same X (H1, H2 from it; G1, G2 scratch). */
static void mlp_backward(const double *p, size_t d, size_t h, const double *X, size_t n,
                         const double *H1, const double *H2, const double *g, double *G1,
                         double *G2, double *gp)
{
    mlp_view v = mlp_at(p, d, h);
    double *dW1 = gp, *db1 = dW1 + h * d, *dW2 = db1 + h, *db2 = dW2 + h * h, *dW3 = db2 + h,
           *db3 = dW3 + h;
    blasint bh = (blasint)h, bn = (blasint)n;
    cblas_dgemv(CblasColMajor, CblasNoTrans, bh, bn, 1.0, H2, bh, g, 1, 0.0, dW3, 1);
    db3[0] = 0.0;
    for (size_t j = 0; j < n; j++)
        db3[0] += g[j];
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < h; i++)
            G2[i + j * h] = v.W3[i] * g[j];
    tanh_back(G2, H2, h, n, db2);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, bh, bh, bn, 1.0, G2, bh, H1, bh, 0.0,
                dW2, bh);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, bh, bn, bh, 1.0, v.W2, bh, G2, bh, 0.0,
                G1, bh);
    tanh_back(G1, H1, h, n, db1);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, bh, (blasint)d, bn, 1.0, G1, bh, X,
                (blasint)d, 0.0, dW1, bh);
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
        mlp_forward(theta, s->d, s->hidden, X, n, w->H1, w->H2, f);
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
    mlp_forward(j->theta, s->d, h, w->Xc + c0 * s->d, n, w->H1 + c0 * h, w->H2 + c0 * h,
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
        mlp_backward(theta, s->d, s->hidden, w->Xc, cols, w->H1, w->H2, w->gout, w->G1, w->G2,
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
            mlp_forward(theta, s->d, s->hidden, Xb, b, w->H1, w->H2, mean + start);
        else
            mean_at(s, w, theta, Xb, b, w->KB, mean + start);
        if (var)
            diag_r(s, Xb, b, w->AB, w->PB, var + start);
    }
    return GP_OK;
}

/* ---- B3: the starting point ---- */

/* Over the n points X in blocks: B = I + A A^T / s2 (lower) and c = A y,
 * A = Lk^{-1} k(Z, X); no m x n matrix beyond one block. */
static int titsias_terms(const gp_gwi_setup *s, const double *X, const double *y, size_t n,
                         double *B, double *c, gp_error *err)
{
    size_t m = s->m, block = n < 1024 ? n : 1024;
    double *K = NULL;
    int rc = alloc2(&K, m, block, err);
    if (rc)
        return rc;
    memset(B, 0, m * m * sizeof *B);
    memset(c, 0, m * sizeof *c);
    for (size_t start = 0; start < n; start += block) {
        size_t b = n - start < block ? n - start : block;
        gp_kernel_cross(s->k, s->Z, m, X + start * s->d, b, K, m);
        gp_trsm_lower(s->Lk, m, m, 0, K, b, m);
        cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)b, 1.0 / s->s2,
                    K, (blasint)m, 1.0, B, (blasint)m);
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)m, (blasint)b, 1.0, K, (blasint)m,
                    y + start, 1, 1.0, c, 1);
    }
    free(K);
    for (size_t i = 0; i < m; i++)
        B[i * m + i] += 1.0;
    gp_symmetrize_from_lower(B, m, m);
    return GP_OK;
}

/* L = chol(Lk^{-T} B^{-1} Lk^{-1}) packed into Lp, from Lb = chol(B); S scratch. */
static int initial_factor(const gp_gwi_setup *s, const double *Lb, double *S, double *Lp,
                          gp_error *err)
{
    size_t m = s->m;
    memcpy(S, Lb, m * m * sizeof *S);
    if (LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)m, S, (lapack_int)m) != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "I + A A^T / s2 is singular");
    gp_symmetrize_from_lower(S, m, m);
    gp_trsm_lower(s->Lk, m, m, 1, S, m, m);
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m,
                (blasint)m, 1.0, s->Lk, (blasint)m, S, (blasint)m);
    gp_symmetrize_average(S, m, m);
    int rc = gp_cholesky_jitter(S, m, m, NULL, err);
    if (rc)
        return rc;
    gp_zero_upper(S, m, m);
    gp_pack_lower(S, m, m, Lp);
    return GP_OK;
}

/* U(-1/sqrt(fan_in), 1/sqrt(fan_in)) weights, zero biases. */
static void init_network(const gp_gwi_setup *s, uint64_t seed, double *p)
{
    size_t d = s->d, h = s->hidden;
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    mlp_view v = mlp_at(p, d, h);
    memset(p, 0, gp_gwi_mlp_size(d, h) * sizeof *p);
    struct {
        double *W;
        size_t count, fan_in;
    } layers[] = {{(double *)v.W1, h * d, d}, {(double *)v.W2, h * h, h}, {(double *)v.W3, h, h}};
    for (size_t l = 0; l < 3; l++) {
        double a = 1.0 / sqrt((double)layers[l].fan_in);
        for (size_t i = 0; i < layers[l].count; i++)
            layers[l].W[i] = a * (2.0 * gp_rng_uniform(&rng) - 1.0);
    }
}

int gp_gwi_init(const gp_gwi_setup *s, const double *X, const double *y, size_t n,
                uint64_t seed, double *theta, gp_error *err)
{
    size_t m = s->m;
    double *B = NULL, *S = NULL, *c = NULL;
    int rc = alloc2(&B, m, m, err);
    if (rc == GP_OK)
        rc = alloc2(&S, m, m, err);
    if (rc == GP_OK)
        rc = alloc2(&c, m, 1, err);
    if (rc == GP_OK)
        rc = titsias_terms(s, X, y, n, B, c, err);
    if (rc == GP_OK && LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)m, B, (lapack_int)m))
        rc = gp_error_set(err, GP_ENOTPD, NULL, "I + A A^T / s2 is not positive definite");
    if (rc == GP_OK)
        rc = initial_factor(s, B, S, theta + gp_gwi_mean_size(s), err);
    if (rc == GP_OK && s->mean == GP_GWI_MEAN_MLP)
        init_network(s, seed, theta);
    if (rc == GP_OK && s->learn_noise)
        theta[gp_gwi_n_params(s) - 1] = log(fmax(s->s2 - GP_GWI_NOISE_FLOOR, 1e-300));
    if (rc == GP_OK && s->mean == GP_GWI_MEAN_KERNEL_SUM) {
        /* beta = Lk^{-T} B^{-1} c / s2 */
        LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (lapack_int)m, 1, B, (lapack_int)m, c,
                       (lapack_int)m);
        for (size_t i = 0; i < m; i++)
            theta[i] = c[i] / s->s2;
        cblas_dtrsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)m, s->Lk,
                    (blasint)m, theta, 1);
    }
    free(B);
    free(S);
    free(c);
    return rc;
}

/* ---- the method ---- */

/* Streams of the fit seed (gp_rng_derive): each random choice has its own,
 * so changing one option does not move the others' draws. */
enum { STREAM_SPLIT = 1, STREAM_INDUCING, STREAM_NETWORK, STREAM_TRAIN };

typedef struct gwi_settings {
    gp_gwi_mean_kind mean;
    size_t hidden;
    gp_gwi_w2_kind w2;
    gp_gwi_objective_kind objective;
    size_t inducing; /* 0: round(factor sqrt(N)) */
    double factor;
    size_t batch, w2_points;
    int epochs, patience, temper;
    int prior_sgpr; /* prior "sgpr": the collapsed bound on every training row */
    int optimize_inducing; /* with prior sgpr: Z moves with the hyperparameters */
    int learn_noise;       /* the noise is trained with q (not when the request fixes it) */
    int greedy;            /* inducing_selection greedy (prior sgpr only) */
    double learning_rate, validation_fraction;
} gwi_settings;

static void read_settings(const gp_fit_request *req, gwi_settings *st)
{
    const gp_method *me = &gp_method_gwi;
    st->mean = strcmp(gp_option_string(me, req, "mean"), "mlp") == 0 ? GP_GWI_MEAN_MLP
                                                                      : GP_GWI_MEAN_KERNEL_SUM;
    st->hidden = (size_t)gp_option_number(me, req, "hidden");
    st->w2 = strcmp(gp_option_string(me, req, "w2_estimator"), "thesis_nonsym") == 0
                 ? GP_GWI_W2_THESIS_NONSYM
                 : GP_GWI_W2_BURES_SYM;
    st->objective = strcmp(gp_option_string(me, req, "objective"), "code_w") == 0
                        ? GP_GWI_OBJECTIVE_CODE_W
                        : GP_GWI_OBJECTIVE_THESIS_W2SQ;
    st->inducing = (size_t)gp_option_number(me, req, "inducing");
    st->factor = gp_option_number(me, req, "inducing_factor");
    st->batch = (size_t)gp_option_number(me, req, "batch");
    st->w2_points = (size_t)gp_option_number(me, req, "w2_points");
    st->epochs = (int)gp_option_number(me, req, "epochs");
    st->patience = (int)gp_option_number(me, req, "patience");
    st->temper = gp_option_number(me, req, "temper") != 0.0;
    st->prior_sgpr = strcmp(gp_option_string(me, req, "prior"), "sgpr") == 0;
    st->optimize_inducing = gp_option_number(me, req, "optimize_inducing") != 0.0;
    st->learn_noise = gp_option_number(me, req, "learn_noise") != 0.0 && !req->noise_fixed;
    st->greedy = strcmp(gp_option_string(me, req, "inducing_selection"), "greedy") == 0;
    st->learning_rate = gp_option_number(me, req, "learning_rate");
    st->validation_fraction = gp_option_number(me, req, "validation_fraction");
}

/* Rows held out for validation: round(fraction n) (at least 1 when fraction
 * > 0 and n >= 3), leaving at least 2 to train on; none below 3 rows. */
static size_t validation_rows(size_t n, double fraction)
{
    if (n < 3)
        return 0;
    size_t v = (size_t)floor(fraction * (double)n + 0.5);
    if (fraction > 0.0 && v == 0)
        v = 1;
    return v > n - 2 ? n - 2 : v;
}

/* N_B for a training set of n rows: the option, or N/10 within [100, 1000]. */
static size_t batch_size(const gwi_settings *st, size_t n)
{
    size_t b = st->batch;
    if (b == 0)
        b = n / 10 < 100 ? 100 : n / 10 > 1000 ? 1000 : n / 10;
    return b < n ? b : n;
}

/* M for a training set of n rows. */
static size_t inducing_count(const gwi_settings *st, size_t n)
{
    size_t M = st->inducing;
    if (M == 0)
        M = (size_t)floor(st->factor * sqrt((double)n) + 0.5);
    if (M < 1)
        M = 1;
    return M > n ? n : M;
}

/* The fit's data in working units, point-major: training and validation rows. */
typedef struct gwi_data {
    size_t d, ntr, nva;
    double *Xtr, *ytr, *Xva, *yva;
} gwi_data;

static void data_free(gwi_data *D)
{
    free(D->Xtr);
    free(D->ytr);
    free(D->Xva);
    free(D->yva);
    memset(D, 0, sizeof *D);
}

/* Fisher-Yates over the first k places of idx[0..n): idx[0..k) a uniform draw. */
static void draw_prefix(gp_rng *rng, size_t *idx, size_t n, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        size_t j = i + (size_t)gp_rng_below(rng, n - i), x = idx[i];
        idx[i] = idx[j];
        idx[j] = x;
    }
}

/* Standardise, then split by a seeded permutation (rows keep their order). */
static int data_split(const gp_model *model, const gp_fit_request *req, double fraction,
                      gwi_data *D, gp_error *err)
{
    size_t n = req->n, d = req->d;
    memset(D, 0, sizeof *D);
    D->d = d;
    D->nva = validation_rows(n, fraction);
    D->ntr = n - D->nva;
    double *P = NULL, *t = NULL;
    unsigned char *held = calloc(n, 1);
    size_t *perm = malloc(n * sizeof *perm);
    int rc = held && perm ? GP_OK : gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK)
        rc = alloc2(&P, d, n, err);
    if (rc == GP_OK)
        rc = alloc2(&t, n, 1, err);
    if (rc == GP_OK)
        rc = alloc2(&D->Xtr, d, D->ntr, err);
    if (rc == GP_OK)
        rc = alloc2(&D->ytr, D->ntr, 1, err);
    if (rc == GP_OK)
        rc = alloc2(&D->Xva, d, D->nva, err);
    if (rc == GP_OK)
        rc = alloc2(&D->yva, D->nva, 1, err);
    if (rc == GP_OK) {
        gp_model_standardize_points(model, req->X, n, P);
        gp_model_working_targets(model, req->y, n, t);
        gp_rng rng;
        gp_rng_derive(&rng, req->seed, STREAM_SPLIT);
        for (size_t i = 0; i < n; i++)
            perm[i] = i;
        draw_prefix(&rng, perm, n, D->nva);
        for (size_t i = 0; i < D->nva; i++)
            held[perm[i]] = 1;
        size_t a = 0, b = 0;
        for (size_t i = 0; i < n; i++) {
            double *X = held[i] ? D->Xva + b * d : D->Xtr + a * d;
            memcpy(X, P + i * d, d * sizeof *P);
            if (held[i])
                D->yva[b++] = t[i];
            else
                D->ytr[a++] = t[i];
        }
    }
    free(P);
    free(t);
    free(held);
    free(perm);
    if (rc)
        data_free(D);
    return rc;
}

/* B1: up to M distinct training inputs, uniformly without replacement (P6),
 * with their targets. */
static int choose_inducing(const gwi_data *D, size_t M, uint64_t seed, double *Z, double *yZ,
                           size_t *m, gp_error *err)
{
    size_t n = D->ntr, d = D->d, taken = 0;
    size_t *perm = malloc(n * sizeof *perm);
    if (perm == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    gp_rng rng;
    gp_rng_derive(&rng, seed, STREAM_INDUCING);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = 0; i < n && taken < M; i++) {
        draw_prefix(&rng, perm + i, n - i, 1); /* one more draw, until M distinct inputs */
        const double *p = D->Xtr + perm[i] * d;
        int dup = 0;
        for (size_t k = 0; k < taken && !dup; k++)
            dup = memcmp(Z + k * d, p, d * sizeof *p) == 0;
        if (dup)
            continue;
        memcpy(Z + taken * d, p, d * sizeof *p);
        yZ[taken++] = D->ytr[perm[i]];
    }
    free(perm);
    *m = taken;
    return GP_OK;
}

/* The prior's fit (either kind) reports iteration 0 of the epoch budget: a
 * job shows it under way and can cancel it. */
typedef struct progress_ctx {
    const gp_fit_request *req;
    int epochs;
} progress_ctx;

static int hyper_progress(void *ctx, int iteration, int max_iterations, double objective)
{
    (void)iteration;
    (void)max_iterations;
    const progress_ctx *pc = ctx;
    return pc->req->progress(pc->req->progress_ctx, 0, pc->epochs, objective);
}

/* [D] prior "sgpr" (P7): Titsias' collapsed bound on every training row,
 * with Z moving too when optimize_inducing (the thesis learns GWI-SVGP's Z,
 * B.7; here it is learned by the bound, before the W2 training); the
 * hyperparameters and Z are then frozen as in the thesis. Z gets the
 * optimised inputs. */
static int fit_prior_sgpr(gp_model *model, const gp_fit_request *req, const gwi_settings *st,
                          const gwi_data *D, double *Z, size_t m, gp_error *err)
{
    gp_noise_param np;
    gp_noise_param_init(&np, req, D->ytr, D->ntr);
    progress_ctx pc = {req, st->epochs};
    gp_fit_request quiet = *req;
    quiet.progress = req->progress ? hyper_progress : NULL;
    quiet.progress_ctx = &pc;
    double f = NAN;
    gp_collapsed_data data = {D->Xtr, D->ytr, D->ntr, D->d};
    gp_inducing_fit_spec spec = {.fn = gp_collapsed_objective, .ctx = &data,
                                 .optimize_z = st->optimize_inducing,
                                 .max_iterations = 200, .tolerance = 1e-9,
                                 .max_total = st->epochs, .result_f = &f};
    int rc = gp_inducing_optimise(model->kernel, &np, &model->noise_variance, Z, m, &quiet, &spec,
                                  &model->diag, err);
    gp_model_info_number(model, "prior_objective", f);
    return rc;
}

/* B2: the prior's hyperparameters by the exact marginal likelihood on (Z,
 * y_Z) [T (B.58)] (or fit_prior_sgpr), then frozen. */
static int fit_prior(gp_model *model, const gp_fit_request *req, const gwi_settings *st,
                     const gwi_data *D, double *Z, const double *yZ, size_t m, gp_error *err)
{
    if (st->prior_sgpr)
        return fit_prior_sgpr(model, req, st, D, Z, m, err);
    gp_noise_param np;
    gp_noise_param_init(&np, req, yZ, m);
    progress_ctx pc = {req, st->epochs};
    gp_driver_options opt;
    gp_driver_default_options(&opt);
    opt.seed = req->seed;
    opt.progress = req->progress ? hyper_progress : NULL;
    opt.progress_ctx = &pc;
    opt.max_total = st->epochs;
    opt.cancel = &req->cancel;
    gp_driver_result res;
    memset(&res, 0, sizeof res);
    int rc = gp_hyper_fit_points(model->kernel, &np, &model->noise_variance, Z, m, yZ, &opt,
                                 &res, err);
    gp_model_info_number(model, "prior_objective", -res.f);
    return rc;
}

/* ---- B4: Adam over (mean parameters, L) ---- */

typedef struct trainer {
    const gp_gwi_setup *s;
    gp_gwi_work *w;
    const gwi_data *D;
    const gwi_settings *st;
    const gp_fit_request *req;
    double y_scale;
    size_t nb, ns, np;
    size_t *order, *pool;
    double *XB, *yB, *XS;
    double *theta, *grad, *best;
    double *vm, *vv; /* validation means and variances */
    gp_adam adam;
    gp_rng rng;
    /* outcome */
    int epochs_run, best_epoch, steps, skipped, stopped_early;
    double best_nll; /* working units, untempered */
} trainer;

static void trainer_free(trainer *T)
{
    free(T->order);
    free(T->pool);
    free(T->XB);
    free(T->yB);
    free(T->XS);
    free(T->grad);
    free(T->best);
    free(T->vm);
    free(T->vv);
    gp_adam_free(&T->adam);
}

static int trainer_init(trainer *T, gp_error *err)
{
    const gwi_data *D = T->D;
    size_t d = D->d, nv = D->nva ? D->nva : D->ntr;
    T->order = malloc(D->ntr * sizeof *T->order);
    T->pool = malloc(D->ntr * sizeof *T->pool);
    if (!T->order || !T->pool)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < D->ntr; i++)
        T->order[i] = T->pool[i] = i;
    int rc = alloc2(&T->XB, d, T->nb, err);
    if (rc == GP_OK)
        rc = alloc2(&T->yB, T->nb, 1, err);
    if (rc == GP_OK)
        rc = alloc2(&T->XS, d, T->ns, err);
    if (rc == GP_OK)
        rc = alloc2(&T->grad, T->np, 1, err);
    if (rc == GP_OK)
        rc = alloc2(&T->best, T->np, 1, err);
    if (rc == GP_OK)
        rc = alloc2(&T->vm, nv, 1, err);
    if (rc == GP_OK)
        rc = alloc2(&T->vv, nv, 1, err);
    if (rc == GP_OK)
        rc = gp_adam_init(&T->adam, T->np, T->st->learning_rate, err);
    gp_rng_derive(&T->rng, T->req->seed, STREAM_TRAIN);
    T->best_nll = INFINITY;
    return rc;
}

static void gather(const gwi_data *D, const size_t *idx, size_t k, double *X, double *y)
{
    for (size_t i = 0; i < k; i++) {
        memcpy(X + i * D->d, D->Xtr + idx[i] * D->d, D->d * sizeof *X);
        if (y)
            y[i] = D->ytr[idx[i]];
    }
}

/* The validation rows' (the training rows' when none are held out) mean
 * predictive NLL per point, untempered, and a = mean (y - m)^2 / (r + s2),
 * the NLL's minimiser over a variance factor (working units). */
static int validation_scores(trainer *T, double *nll, double *a, gp_error *err)
{
    const gwi_data *D = T->D;
    const double *X = D->nva ? D->Xva : D->Xtr, *y = D->nva ? D->yva : D->ytr;
    size_t n = D->nva ? D->nva : D->ntr;
    int rc = gp_gwi_latent(T->s, T->w, T->theta, X, n, T->vm, T->vv, err);
    if (rc)
        return rc;
    double sum = 0.0, q = 0.0, s2 = gp_gwi_noise(T->s, T->theta);
    for (size_t i = 0; i < n; i++) {
        double v = fmax(T->vv[i], 0.0) + s2, e = y[i] - T->vm[i];
        sum += 0.5 * (LOG_2PI + log(v)) + e * e / (2.0 * v);
        q += e * e / v;
    }
    *nll = sum / (double)n;
    *a = q / (double)n;
    return GP_OK;
}

/* B5: the tempering factor alpha from a (clipped; 1 without tempering, or
 * with fewer than GP_GWI_TEMPER_MIN_ROWS rows to estimate it from) and
 * the NLL with every variance times alpha: + log(alpha)/2, the squares over
 * alpha. */
static double tempered_nll(const trainer *T, double nll, double a, double *alpha)
{
    size_t rows = T->D->nva ? T->D->nva : T->D->ntr;
    int on = T->st->temper && rows >= GP_GWI_TEMPER_MIN_ROWS;
    *alpha = on ? fmin(fmax(a, GP_GWI_TEMPER_MIN), GP_GWI_TEMPER_MAX) : 1.0;
    return nll + 0.5 * log(*alpha) + 0.5 * a * (1.0 / *alpha - 1.0);
}

/* What early stopping compares: the NLL the model would have if it stopped
 * here, i.e. tempered when tempering is on (the fit keeps tempering's
 * factor, so an epoch whose variances are only off by a common factor is
 * not passed over: the SVGP covariance shrinks as the data term trains it,
 * and the untempered NLL stopped GWI-net while its mean still improved). */
static int epoch_score(trainer *T, double *score, double *untempered, gp_error *err)
{
    double a, alpha;
    int rc = validation_scores(T, untempered, &a, err);
    if (rc == GP_OK)
        *score = tempered_nll(T, *untempered, a, &alpha);
    return rc;
}

/* One pass over the shuffled training rows. */
static int run_epoch(trainer *T, gp_error *err)
{
    const gwi_data *D = T->D;
    draw_prefix(&T->rng, T->order, D->ntr, D->ntr);
    for (size_t start = 0; start < D->ntr; start += T->nb) {
        if (gp_cancel_requested(&T->req->cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "the fit was cancelled");
        size_t b = D->ntr - start < T->nb ? D->ntr - start : T->nb;
        gather(D, T->order + start, b, T->XB, T->yB);
        draw_prefix(&T->rng, T->pool, D->ntr, T->ns);
        gather(D, T->pool, T->ns, T->XS, NULL);
        gp_gwi_terms t;
        int rc = gp_gwi_loss(T->s, T->w, T->theta, T->XB, T->yB, b, T->XS, T->ns, &t, T->grad,
                             err);
        size_t bad;
        if (rc == GP_ENOTPD || (rc == GP_OK && !gp_all_finite(T->grad, T->np, &bad))) {
            /* a failed eigensolver, an overflow, a degenerate eigenvector pair: skip the
             * step rather than let Adam take part of one */
            T->skipped++;
            continue;
        }
        if (rc)
            return rc;
        gp_adam_step(&T->adam, T->theta, T->grad);
        T->steps++;
    }
    return GP_OK;
}

/* Epochs until the budget or `patience` epochs without a better validation
 * NLL; T->theta ends at the best epoch's parameters. */
static int train(trainer *T, gp_error *err)
{
    double best = INFINITY, raw;
    int since = 0, rc = epoch_score(T, &best, &T->best_nll, err); /* epoch 0: the start */
    memcpy(T->best, T->theta, T->np * sizeof *T->theta);
    for (int e = 1; rc == GP_OK && e <= T->st->epochs; e++) {
        double nll;
        if ((rc = run_epoch(T, err)) != GP_OK || (rc = epoch_score(T, &nll, &raw, err)) != GP_OK)
            break;
        T->epochs_run = e;
        if (nll < best) {
            best = nll;
            T->best_nll = raw;
            T->best_epoch = e;
            memcpy(T->best, T->theta, T->np * sizeof *T->theta);
            since = 0;
        } else {
            since++;
        }
        if (T->req->progress &&
            T->req->progress(T->req->progress_ctx, e, T->st->epochs, nll + log(T->y_scale))) {
            rc = gp_error_set(err, GP_ECANCELLED, NULL, "the fit was cancelled");
            break;
        }
        if (since >= T->st->patience) {
            T->stopped_early = 1;
            break;
        }
    }
    if (rc == GP_OK)
        memcpy(T->theta, T->best, T->np * sizeof *T->theta);
    return rc;
}

/* B5 at the kept parameters: alpha and the tempered NLL (working units). */
static int temper(trainer *T, double *alpha, double *nll, gp_error *err)
{
    double untempered, a;
    int rc = validation_scores(T, &untempered, &a, err);
    if (rc == GP_OK)
        *nll = tempered_nll(T, untempered, a, alpha);
    return rc;
}

/* ---- the fitted model ---- */

typedef struct gwi_impl {
    gp_inducing_post post; /* first: Z, Lk, mt = Lk^T beta (0 for mlp), C = Lk^T Sigma Lk,
                              scale = alpha (gp_inducing_predict reads it) */
    gp_gwi_mean_kind mean;
    size_t hidden;
    int learn_noise; /* theta ends with the noise's unconstrained value */
    double *theta; /* the fitted parameters (gwi.h's layout) */
    size_t n_theta;
} gwi_impl;

static void gwi_free(void *p)
{
    gwi_impl *im = p;
    if (im == NULL)
        return;
    gp_inducing_post_free(&im->post);
    free(im->theta);
    free(im);
}

/* The whitened posterior of the fitted parameters (gp_inducing_post's form). */
static int build_post(const gp_gwi_setup *s, const double *theta, double jitter, double alpha,
                      gp_inducing_post *p, gp_error *err)
{
    size_t m = s->m;
    int rc = gp_inducing_post_alloc(p, m, s->d, err);
    if (rc)
        return rc;
    memcpy(p->Z, s->Z, s->d * m * sizeof *s->Z);
    memcpy(p->L, s->Lk, m * m * sizeof *s->Lk);
    p->jitter = jitter;
    p->scale = alpha;
    /* C = (Lk^T L)(Lk^T L)^T, with Lk^T L formed in mt's place first */
    double *T = NULL;
    if ((rc = alloc2(&T, m, m, err)) != GP_OK)
        return rc;
    memset(T, 0, m * m * sizeof *T);
    gp_unpack_lower(theta + gp_gwi_mean_size(s), m, T, m);
    cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)m,
                (blasint)m, 1.0, s->Lk, (blasint)m, T, (blasint)m);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)m, 1.0, T,
                (blasint)m, 0.0, p->C, (blasint)m);
    gp_symmetrize_from_lower(p->C, m, m);
    free(T);
    memset(p->mt, 0, m * sizeof *p->mt);
    if (s->mean == GP_GWI_MEAN_KERNEL_SUM) {
        memcpy(p->mt, theta, m * sizeof *theta);
        cblas_dtrmv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)m, s->Lk,
                    (blasint)m, p->mt, 1);
    }
    return GP_OK;
}

/* Memory checked before anything is allocated: the workspace and the data
 * copies within the budget of an exact fit of max_train_points points. */
static int size_guard(const gp_fit_request *req, const gwi_settings *st, gp_error *err)
{
    double n = (double)req->n, d = (double)req->d, m = (double)inducing_count(st, req->n);
    double nb = (double)batch_size(st, req->n), ns = fmin((double)st->w2_points, n);
    double h = st->mean == GP_GWI_MEAN_MLP ? (double)st->hidden : 0.0;
    double need = 3.0 * n * (d + 1.0) + (st->prior_sgpr ? 3.0 * m * n : 0.0) +
                  6.0 * m * (nb + ns) + 2.0 * m * fmax(nb, ns) + 12.0 * ns * ns + 8.0 * m * m +
                  (4.0 * h + d) * (nb + ns) + 2.0 * nb * ns + 3.0 * (h * h + h * d);
    double cap = (double)gp_fit_point_cap(req);
    if (need > cap * cap)
        return gp_error_set(err, GP_ETOOBIG, "options.inducing",
                            "gwi with %.0f inducing points, batch %.0f and %.0f W2 points on %zu "
                            "rows needs %.1f GB of workspace, above the budget of an exact fit "
                            "of max_train_points = %.0f points (%.1f GB): use fewer inducing "
                            "points, a smaller batch or raise --max-train-points",
                            m, nb, ns, req->n, need * 8e-9, cap, cap * cap * 8e-9);
    return GP_OK;
}

static const char *mean_name(gp_gwi_mean_kind k)
{
    return k == GP_GWI_MEAN_MLP ? "mlp" : "kernel_sum";
}

static void report(gp_model *model, const trainer *T, size_t m, double alpha, double nll)
{
    const gwi_data *D = T->D;
    model->diag.objective = nll + log(model->y_scale);
    model->diag.iterations = T->epochs_run;
    model->diag.evaluations = T->steps;
    model->diag.converged = T->stopped_early;
    gp_model_info_number(model, "inducing", (double)m);
    gp_model_info_string(model, "mean", mean_name(T->s->mean));
    gp_model_info_number(model, "train_rows", (double)D->ntr);
    gp_model_info_number(model, "validation_rows", (double)D->nva);
    gp_model_info_number(model, "batch", (double)T->nb);
    gp_model_info_number(model, "w2_points", (double)T->ns);
    gp_model_info_number(model, "epochs_run", (double)T->epochs_run);
    gp_model_info_number(model, "best_epoch", (double)T->best_epoch);
    gp_model_info_number(model, "skipped_steps", (double)T->skipped);
    gp_model_info_number(model, "temper", alpha);
    gp_model_info_number(model, "untempered_nll", T->best_nll + log(model->y_scale));
}

/* B3-B5 with the prior fixed: train, temper, keep the posterior. */
static int train_into(gp_model *model, const gp_fit_request *req, const gwi_settings *st,
                      const gwi_data *D, gp_gwi_setup *s, double jitter, gwi_impl *im,
                      gp_error *err)
{
    trainer T;
    memset(&T, 0, sizeof T);
    T.s = s, T.D = D, T.st = st, T.req = req, T.y_scale = model->y_scale;
    T.nb = batch_size(st, D->ntr);
    T.ns = st->w2_points < D->ntr ? st->w2_points : D->ntr;
    T.np = gp_gwi_n_params(s);
    im->n_theta = T.np;
    int rc = alloc2(&im->theta, T.np, 1, err);
    T.theta = im->theta;
    if (rc == GP_OK)
        rc = gp_gwi_work_new(s, T.nb, T.ns, &T.w, err);
    if (rc == GP_OK)
        rc = trainer_init(&T, err);
    if (rc == GP_OK) {
        uint64_t net_seed = 0;
        gp_rng rng;
        gp_rng_derive(&rng, req->seed, STREAM_NETWORK);
        net_seed = gp_rng_next(&rng);
        rc = gp_gwi_init(s, D->Xtr, D->ytr, D->ntr, net_seed, T.theta, err);
    }
    if (rc == GP_OK)
        rc = train(&T, err);
    if (rc == GP_OK)
        model->noise_variance = gp_gwi_noise(s, T.theta);
    double alpha = 1.0, nll = 0.0;
    if (rc == GP_OK)
        rc = temper(&T, &alpha, &nll, err);
    if (rc == GP_OK)
        rc = build_post(s, T.theta, jitter, alpha, &im->post, err);
    if (rc == GP_OK)
        rc = gp_inducing_post_prepare(&im->post, model->kernel, err);
    if (rc == GP_OK)
        report(model, &T, s->m, alpha, nll);
    trainer_free(&T);
    gp_gwi_work_free(T.w);
    return rc;
}

static int fit_into(gp_model *model, const gp_fit_request *req, const gwi_settings *st,
                    gwi_impl *im, gp_error *err)
{
    gwi_data D;
    int rc = data_split(model, req, st->validation_fraction, &D, err);
    if (rc)
        return rc;
    size_t M = inducing_count(st, D.ntr), m = 0, d = D.d;
    double *Z = NULL, *yZ = NULL, *Lk = NULL, jitter = 0.0;
    rc = alloc2(&Z, d, M, err);
    if (rc == GP_OK)
        rc = alloc2(&yZ, M, 1, err);
    if (rc == GP_OK && st->greedy) /* [D] sgpr's choice, under the starting kernel */
        rc = gp_inducing_select(GP_INDUCING_GREEDY, model->kernel, D.Xtr, D.ntr, d, M, req->seed,
                                Z, &m, err);
    else if (rc == GP_OK)
        rc = choose_inducing(&D, M, req->seed, Z, yZ, &m, err);
    if (rc == GP_OK)
        rc = fit_prior(model, req, st, &D, Z, yZ, m, err);
    if (rc == GP_OK)
        rc = alloc2(&Lk, m, m, err);
    if (rc == GP_OK)
        rc = gp_inducing_kuu_factor(model->kernel, Z, m, Lk, &jitter, err);
    if (rc == GP_OK) {
        gp_gwi_setup s = {.k = model->kernel, .s2 = model->noise_variance, .Z = Z, .m = m,
                          .d = d, .Lk = Lk, .mean = st->mean, .hidden = st->hidden,
                          .w2 = st->w2, .objective = st->objective, .n_total = D.ntr,
                          .learn_noise = st->learn_noise};
        im->mean = st->mean;
        im->hidden = st->hidden;
        im->learn_noise = st->learn_noise;
        model->diag.jitter = jitter;
        rc = train_into(model, req, st, &D, &s, jitter, im, err);
    }
    free(Z);
    free(yZ);
    free(Lk);
    data_free(&D);
    return rc;
}

static int gwi_fit(const gp_fit_request *req, gp_model **out, gp_error *err)
{
    gwi_settings st;
    read_settings(req, &st);
    if (st.greedy && !st.prior_sgpr) /* greedy points have no targets of their own to fit on */
        return gp_error_set(err, GP_EINVAL, "options.inducing_selection",
                            "inducing_selection greedy needs prior sgpr (prior inducing fits "
                            "the inducing points' own targets, so they must be training rows "
                            "drawn at random)");
    int rc = size_guard(req, &st, err);
    if (rc)
        return rc;
    gp_model *model;
    if ((rc = gp_model_new(&gp_method_gwi, req, &model, err)) != GP_OK)
        return rc;
    gwi_impl *im = calloc(1, sizeof *im);
    model->impl = im;
    if (im == NULL)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    /* serial BLAS: the same bits for any thread count (replayable fits) */
    gp_blas_serial_begin();
    if (rc == GP_OK)
        rc = fit_into(model, req, &st, im, err);
    gp_blas_serial_end();
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}

/* ---- predict and sample ---- */

/* Adds y_scale net(x) to the n_cols columns (m each) of out, for the
 * network mean; P the standardised points (d x m). */
static int add_network_mean(const gp_model *model, const gwi_impl *im, const double *P, size_t m,
                            double *out, size_t n_cols, gp_error *err)
{
    size_t d = model->input_dim, h = im->hidden, block = m < 1024 ? m : 1024;
    double *buf = NULL; /* H1, H2 (h x block each), f (block) */
    int rc = alloc2(&buf, 2 * h + 1, block, err);
    double *H1 = buf, *H2 = buf + h * block, *f = buf + 2 * h * block;
    for (size_t start = 0; rc == GP_OK && start < m; start += block) {
        size_t b = m - start < block ? m - start : block;
        mlp_forward(im->theta, d, h, P + start * d, b, H1, H2, f);
        for (size_t c = 0; c < n_cols; c++)
            for (size_t j = 0; j < b; j++)
                out[c * m + start + j] += model->y_scale * f[j];
    }
    free(buf);
    return rc;
}

static int gwi_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                       gp_error *err)
{
    const gwi_impl *im = model->impl;
    double *P;
    int rc = gp_model_points(model, req->X, req->m, &P, err);
    if (rc)
        return rc;
    rc = gp_inducing_predict_points(model, &im->post, P, req, out, err);
    if (rc == GP_OK && im->mean == GP_GWI_MEAN_MLP)
        rc = add_network_mean(model, im, P, req->m, out->mean, 1, err);
    free(P);
    return rc;
}

static int gwi_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                      gp_error *err)
{
    const gwi_impl *im = model->impl;
    double *P;
    int rc = gp_model_points(model, req->X, req->m, &P, err);
    if (rc)
        return rc;
    rc = gp_inducing_sample_points(model, &im->post, P, req, samples, err);
    if (rc == GP_OK && im->mean == GP_GWI_MEAN_MLP)
        rc = add_network_mean(model, im, P, req->m, samples, req->n_samples, err);
    free(P);
    return rc;
}

/* ---- export / import (B7) ---- */

static int gwi_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const gwi_impl *im = model->impl;
    int rc = gp_inducing_post_export(&im->post, st, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "params", im->n_theta, 1, im->theta, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "temper", im->post.scale, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "mean_mlp", im->mean == GP_GWI_MEAN_MLP ? 1.0 : 0.0, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "hidden", (double)im->hidden, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "noise_learned", im->learn_noise ? 1.0 : 0.0, err);
    return rc;
}

/* The mean kind and width, checked (GP_EDATA naming the array). */
static int import_shape(const gp_state *st, gwi_impl *im, gp_error *err)
{
    double mlp, hidden, alpha, learned;
    int rc = gp_state_get_scalar(st, "mean_mlp", &mlp, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "noise_learned", &learned, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "hidden", &hidden, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "temper", &alpha, err);
    if (rc)
        return rc;
    if (mlp != 0.0 && mlp != 1.0)
        return gp_error_set(err, GP_EDATA, "mean_mlp", "mean_mlp must be 0 or 1");
    if (learned != 0.0 && learned != 1.0)
        return gp_error_set(err, GP_EDATA, "noise_learned", "noise_learned must be 0 or 1");
    im->learn_noise = learned == 1.0;
    if (!(hidden >= 1.0 && hidden <= 4096.0 && hidden == floor(hidden)))
        return gp_error_set(err, GP_EDATA, "hidden", "hidden must be a width from 1 to 4096");
    if (!(alpha >= GP_GWI_TEMPER_MIN && alpha <= GP_GWI_TEMPER_MAX))
        return gp_error_set(err, GP_EDATA, "temper", "temper must lie in [%g, %g]",
                            GP_GWI_TEMPER_MIN, GP_GWI_TEMPER_MAX);
    im->mean = mlp == 1.0 ? GP_GWI_MEAN_MLP : GP_GWI_MEAN_KERNEL_SUM;
    im->hidden = (size_t)hidden;
    im->post.scale = alpha;
    return GP_OK;
}

static int gwi_import(gp_model *model, const gp_state *st, gp_error *err)
{
    /* the kernel type was checked by gp_model_import */
    gwi_impl *im = calloc(1, sizeof *im);
    if (im == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = gp_inducing_post_import(model, st, &im->post, err);
    if (rc == GP_OK)
        rc = import_shape(st, im, err);
    const double *theta = NULL;
    if (rc == GP_OK) {
        gp_gwi_setup s = {.m = im->post.m, .d = model->input_dim, .mean = im->mean,
                          .hidden = im->hidden, .learn_noise = im->learn_noise};
        im->n_theta = gp_gwi_n_params(&s);
        rc = gp_state_get(st, "params", im->n_theta, 1, &theta, err);
    }
    size_t bad;
    if (rc == GP_OK && !gp_all_finite(theta, im->n_theta, &bad))
        rc = gp_error_set(err, GP_EDATA, "params", "params[%zu] is not finite", bad);
    if (rc == GP_OK && (im->theta = gp_alloc_doubles(im->n_theta, err)) == NULL)
        rc = GP_ENOMEM;
    if (rc) {
        gwi_free(im);
        return rc;
    }
    memcpy(im->theta, theta, im->n_theta * sizeof *theta);
    model->impl = im;
    return GP_OK;
}

/* ---- the descriptor ---- */

static const gp_kernel_type gwi_kernels[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12,
                                             GP_KERNEL_MATERN32, GP_KERNEL_MATERN52,
                                             GP_KERNEL_RQ};

static const gp_option_spec gwi_options[] = {
    {"mean", GP_OPTION_ENUM, 0, "kernel_sum", 0, 0, "kernel_sum|mlp",
     "the variational mean: kernel_sum m(x) = k_Z(x)^T beta (GWI-SVGP) or mlp, a D -> h -> h "
     "-> 1 tanh network (GWI-net)"},
    {"hidden", GP_OPTION_INT, 10, NULL, 1, 256, NULL,
     "h, the width of the network's two hidden layers (mean mlp; the thesis: 10)"},
    {"w2_estimator", GP_OPTION_ENUM, 0, "bures_sym", 0, 0, "bures_sym|thesis_nonsym",
     "the squared Wasserstein distance's estimate: bures_sym, the exact W2^2 between the "
     "marginals at the comparison points (symmetric, >= 0, 0 when q is the prior); "
     "thesis_nonsym, the thesis's eigenvalues of r(S, B) k(B, S)"},
    {"objective", GP_OPTION_ENUM, 0, "thesis_w2sq", 0, 0, "thesis_w2sq|code_w",
     "thesis_w2sq: summed expected NLL + W2^2 (the thesis); code_w: the batch's mean expected "
     "NLL + W2 (the authors' released code)"},
    {"inducing", GP_OPTION_INT, 0, NULL, 0, 8192, NULL,
     "M, the inducing points (distinct training inputs drawn at random); 0 (default): "
     "round(inducing_factor sqrt(N))"},
    {"inducing_factor", GP_OPTION_NUMBER, 1.0, NULL, 0.01, 100, NULL,
     "M = round(inducing_factor sqrt(N)) when inducing is 0 (the thesis's grid: 0.5-2 for "
     "mlp, 1-5 for kernel_sum)"},
    {"batch", GP_OPTION_INT, 0, NULL, 0, 1000000, NULL,
     "N_B, the minibatch (all training rows when fewer); 0 (default): N/10 within [100, 1000] "
     "(the thesis: 1000; its code: 100 on the small sets)"},
    {"w2_points", GP_OPTION_INT, 100, NULL, 1, 4096, NULL,
     "N_S, the training inputs drawn afresh every step to estimate W2 (the thesis: 100)"},
    {"epochs", GP_OPTION_INT, 1000, NULL, 0, 1000000, NULL,
     "passes over the training rows (Adam steps: epochs x ceil(N / batch))"},
    {"learning_rate", GP_OPTION_NUMBER, 1e-2, NULL, 1e-8, 10, NULL, "Adam's step size"},
    {"validation_fraction", GP_OPTION_NUMBER, 0.1, NULL, 0, 0.5, NULL,
     "rows held out (seeded) for early stopping and tempering; 0: the training rows serve"},
    {"patience", GP_OPTION_INT, 200, NULL, 1, 1000000, NULL,
     "stop after this many epochs without a better validation NLL; the best epoch is kept"},
    {"prior", GP_OPTION_ENUM, 0, "sgpr", 0, 0, "sgpr|inducing",
     "how the prior's hyperparameters are fitted before they are frozen: sgpr (default), "
     "Titsias' collapsed bound on every training row with Z held (O(N M^2) per evaluation); "
     "inducing, the exact marginal likelihood of the M inducing points' targets alone (the "
     "thesis, (B.58): boston's test NLL 2.77 against 2.45)"},
    {"inducing_selection", GP_OPTION_ENUM, 0, "random", 0, 0, "random|greedy",
     "how Z starts: random, distinct training inputs drawn uniformly (the thesis); greedy, "
     "sgpr's maximum residual variance under the starting kernel (prior sgpr only)"},
    {"optimize_inducing", GP_OPTION_BOOL, 1, NULL, 0, 1, NULL,
     "with prior sgpr: the inducing inputs move with the hyperparameters in that fit (as "
     "sgpr's do), then stay fixed while the W2 loss is trained; false keeps the drawn inputs "
     "(prior inducing always keeps them, as the thesis's GWI-net)"},
    {"learn_noise", GP_OPTION_BOOL, 0, NULL, 0, 1, NULL,
     "also train the noise variance with q (Adam on its log, from the prior fit's value); "
     "false (default) keeps the prior fit's noise, as the thesis does. A fixed noise in the "
     "request is kept either way"},
    {"temper", GP_OPTION_BOOL, 1, NULL, 0, 1, NULL,
     "multiply the predictive variances by alpha = mean[(y - m)^2 / (r + s2)] over the "
     "validation rows, clipped to [1e-6, 2] (the closed-form NLL minimiser; 1 when fewer than "
     "10 rows are there to estimate it)"},
};

static const gp_method_ops gwi_ops = {
    .fit = gwi_fit,
    .predict = gwi_predict,
    .sample = gwi_sample,
    .export_impl = gwi_export,
    .import_impl = gwi_import,
    .free_impl = gwi_free,
};

static const gp_info_spec gwi_info[] = {
    {"inducing", GP_INFO_NUMBER, "M, the inducing points"},
    {"mean", GP_INFO_STRING, "the variational mean: kernel_sum or mlp"},
    {"prior_objective", GP_INFO_NUMBER,
     "what the prior's fit maximised, at its end (standardised units): the exact log marginal "
     "likelihood of the inducing points' targets (prior inducing) or the collapsed bound on "
     "the training rows (prior sgpr)"},
    {"train_rows", GP_INFO_NUMBER, "rows the loss saw"},
    {"validation_rows", GP_INFO_NUMBER, "rows held out for early stopping and tempering"},
    {"batch", GP_INFO_NUMBER, "the minibatch size used"},
    {"w2_points", GP_INFO_NUMBER, "the comparison points per step"},
    {"epochs_run", GP_INFO_NUMBER, "epochs before the budget or early stopping"},
    {"best_epoch", GP_INFO_NUMBER, "the epoch whose parameters were kept (0: the start)"},
    {"skipped_steps", GP_INFO_NUMBER, "steps skipped because an eigensolver failed"},
    {"temper", GP_INFO_NUMBER, "alpha, the factor of every predictive variance (1 untempered)"},
    {"untempered_nll", GP_INFO_NUMBER,
     "the best validation NLL per point before tempering (original units)"},
};

static const gp_option_setting gwi_quick[] = {{"epochs", 8}};

const gp_method gp_method_gwi = {
    .name = "gwi",
    .summary = "Gaussian Wasserstein inference: a sparse GP whose mean is free (a kernel sum or "
               "a small tanh network) and whose covariance is the SVGP kernel, trained by Adam "
               "on the expected NLL plus the squared 2-Wasserstein distance to the prior; "
               "O(N_B M^2 + N_S^3) per step, O(M^2) per predicted point",
    .objective_name = "validation_nll",
    .options = gwi_options,
    .n_options = sizeof gwi_options / sizeof gwi_options[0],
    .kernels = gwi_kernels,
    .n_kernels = sizeof gwi_kernels / sizeof gwi_kernels[0],
    .composite_kernels = 0,
    .iterations_option = "epochs",
    .restarts_option = NULL,
    .info = gwi_info,
    .n_info = sizeof gwi_info / sizeof gwi_info[0],
    .quick = gwi_quick,
    .n_quick = sizeof gwi_quick / sizeof gwi_quick[0],
    .ops = &gwi_ops,
};
