/* The mean network of method "gwi" (mean = mlp): D -> h -> h -> 1 with tanh, forward and
 * backward. */
#include "core/methods/gwi/network.h"

#include <cblas.h>
#include <math.h>

#include "core/linalg/linalg.h"
#include "core/methods/gwi/internal.h"

/* ---- the network: D -> h -> h -> 1, tanh ---- */

mlp_view gwi_mlp_at(const double *p, size_t d, size_t h)
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
void gwi_mlp_forward(const double *p, size_t d, size_t h, const double *X, size_t n,
                     double *H1, double *H2, double *f)
{
    mlp_view v = gwi_mlp_at(p, d, h);
    dense_tanh(v.W1, v.b1, h, d, X, n, H1);
    dense_tanh(v.W2, v.b2, h, h, H1, n, H2);
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)h, (blasint)n, 1.0, H2, (blasint)h, v.W3, 1,
                0.0, f, 1);
    for (size_t j = 0; j < n; j++)
        f[j] += v.b3[0];
}

/* H = tanh(W X + b) with every entry of W X a gp_dot of W's row (column of
 * WT, in x out) and the point's column: its own arithmetic. */
static void dense_tanh_points(const double *WT, const double *b, size_t out, size_t in,
                              const double *X, size_t n, double *H)
{
    gp_dot_columns(WT, in, out, X, in, n, in, H, out);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < out; i++)
            H[i + j * out] = tanh(H[i + j * out] + b[i]);
}

static void transpose(const double *W, size_t rows, size_t cols, double *WT)
{
    for (size_t j = 0; j < cols; j++)
        for (size_t i = 0; i < rows; i++)
            WT[i * cols + j] = W[j * rows + i];
}

void gwi_mlp_forward_points(const double *p, size_t d, size_t h, const double *X, size_t n,
                            double *WT, double *H1, double *H2, double *f)
{
    mlp_view v = gwi_mlp_at(p, d, h);
    transpose(v.W1, h, d, WT);
    dense_tanh_points(WT, v.b1, h, d, X, n, H1);
    transpose(v.W2, h, h, WT);
    dense_tanh_points(WT, v.b2, h, h, H1, n, H2);
    gp_dot_columns(H2, h, n, v.W3, h, 1, h, f, n);
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
 * gwi_mlp_forward on the same X (H1, H2 from it; G1, G2 scratch). */
void gwi_mlp_backward(const double *p, size_t d, size_t h, const double *X, size_t n,
                      const double *H1, const double *H2, const double *g, double *G1,
                      double *G2, double *gp)
{
    mlp_view v = gwi_mlp_at(p, d, h);
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
