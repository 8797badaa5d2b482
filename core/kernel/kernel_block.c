/* See kernel_block.h. Cloned for the vector widths (GP_CLONES, core/linalg/fastmath.h); nothing here uses fma() or reorders a sum, so every clone gives
 * the bits of the scalar code in kernel_formula.h. */
#include "core/kernel/kernel_block.h"

#include <math.h>
#include <string.h>

#include "core/linalg/fastmath.h"

int gp_kernel_block_type(gp_kernel_type type)
{
    return type == GP_KERNEL_RBF || type == GP_KERNEL_MATERN12 || type == GP_KERNEL_MATERN32 ||
           type == GP_KERNEL_MATERN52;
}

GP_CLONES
void gp_kernel_block_q(const double *at, size_t ldat, size_t na, size_t i0, size_t len,
                       const double *b, double *q)
{
    double acc[GP_KERNEL_BLOCK];
    for (size_t t = 0; t < len; t++)
        acc[t] = 0.0;
    for (size_t c = 0; c < na; c++) {
        const double *col = at + i0 + c * ldat;
        double bc = b[c];
        for (size_t t = 0; t < len; t++) {
            double d = col[t] - bc;
            acc[t] += d * d;
        }
    }
    for (size_t t = 0; t < len; t++)
        q[t] = acc[t];
}

/* The argument of exp for each type (kernel_formula.h's *_terms). */
GP_CLONES
static void block_exp_args(gp_kernel_type type, const double *q, size_t len, double *x)
{
    switch (type) {
    case GP_KERNEL_RBF:
        for (size_t t = 0; t < len; t++)
            x[t] = -0.5 * q[t];
        break;
    case GP_KERNEL_MATERN12:
        for (size_t t = 0; t < len; t++)
            x[t] = -sqrt(q[t]);
        break;
    case GP_KERNEL_MATERN32:
        for (size_t t = 0; t < len; t++)
            x[t] = -(SQRT3 * sqrt(q[t]));
        break;
    default:
        for (size_t t = 0; t < len; t++)
            x[t] = -(SQRT5 * sqrt(q[t]));
        break;
    }
}

/* k and c0 from e = exp(x) (x holds e on entry). */
GP_CLONES
static void block_values(const leaf_par *p, const double *q, size_t len, const double *e,
                         double *v, double *c0)
{
    double var = p->var;
    switch (p->type) {
    case GP_KERNEL_RBF:
        for (size_t t = 0; t < len; t++)
            v[t] = var * e[t];
        if (c0)
            for (size_t t = 0; t < len; t++)
                c0[t] = v[t];
        break;
    case GP_KERNEL_MATERN12:
        for (size_t t = 0; t < len; t++)
            v[t] = var * e[t];
        if (c0)
            for (size_t t = 0; t < len; t++) {
                double r = sqrt(q[t]);
                c0[t] = r > 0.0 ? v[t] / r : 0.0;
            }
        break;
    case GP_KERNEL_MATERN32:
        for (size_t t = 0; t < len; t++) {
            double s = SQRT3 * sqrt(q[t]);
            v[t] = var * ((1.0 + s) * e[t]);
        }
        if (c0)
            for (size_t t = 0; t < len; t++)
                c0[t] = 3.0 * var * e[t];
        break;
    default:
        for (size_t t = 0; t < len; t++) {
            double s = SQRT5 * sqrt(q[t]);
            v[t] = var * ((1.0 + s + 5.0 * q[t] / 3.0) * e[t]);
        }
        if (c0)
            for (size_t t = 0; t < len; t++) {
                double s = SQRT5 * sqrt(q[t]);
                c0[t] = (5.0 / 3.0) * var * (1.0 + s) * e[t];
            }
        break;
    }
}

void gp_kernel_block_terms(const leaf_par *p, const double *q, size_t len, double *v,
                           double *c0, double *scratch)
{
    block_exp_args(p->type, q, len, scratch);
    gp_exp_block(scratch, scratch, len);
    block_values(p, q, len, scratch, v, c0);
}

/* ---- gp_kernel_block_known ---- */

/* Eight doubles, unaligned (GCC vector extension; C11 mode contracts none of
 * its multiply-adds, so each lane rounds as the scalar code does). */
typedef double v8 __attribute__((vector_size(64), aligned(8)));

/* Unaligned loads and stores by memcpy (a function returning a v8 would
 * change the ABI outside the AVX-512 clone). */
#define V8_LOAD(dst, p) memcpy(&(dst), (p), sizeof(v8))
#define V8_STORE(p, src) memcpy((p), &(src), sizeof(v8))

/* leaf_factors_from_value (kernel_gram.c)'s c[0], expression for expression. */
static inline void known_factors(gp_kernel_type type, const double *q, const double *kv,
                                 size_t len, double *c0)
{
    switch (type) {
    case GP_KERNEL_RBF:
        for (size_t t = 0; t < len; t++)
            c0[t] = kv[t];
        break;
    case GP_KERNEL_MATERN12:
        for (size_t t = 0; t < len; t++) {
            double r = sqrt(q[t]);
            c0[t] = r > 0.0 ? kv[t] / r : 0.0;
        }
        break;
    case GP_KERNEL_MATERN32:
        for (size_t t = 0; t < len; t++)
            c0[t] = 3.0 * kv[t] / (1.0 + SQRT3 * sqrt(q[t]));
        break;
    default:
        for (size_t t = 0; t < len; t++) {
            double s = SQRT5 * sqrt(q[t]);
            c0[t] = (5.0 / 3.0) * (1.0 + s) * kv[t] / (1.0 + s + 5.0 * q[t] / 3.0);
        }
        break;
    }
}

/* The body for nv vectors of 8 coordinates (a constant once inlined). */
static inline __attribute__((always_inline)) void
known_point(const gp_known_args *ka, const double *a, const double *kcol, const double *wcol,
            double *g, double *gzp, size_t nv)
{
    size_t na = ka->na, m = ka->m, width = ka->width;
    double pad[GP_KNOWN_MAX_COORDS] = {0.0}, gpad[GP_KNOWN_MAX_COORDS] = {0.0};
    memcpy(pad, a, na * sizeof *pad);
    if (ka->ard)
        memcpy(gpad, g + 1, na * sizeof *gpad);
    v8 A[GP_KNOWN_MAX_COORDS / 8], G[GP_KNOWN_MAX_COORDS / 8], INV[GP_KNOWN_MAX_COORDS / 8];
    for (size_t v = 0; v < nv; v++) {
        V8_LOAD(A[v], pad + 8 * v);
        V8_LOAD(G[v], gpad + 8 * v);
        V8_LOAD(INV[v], ka->inv + 8 * v);
    }
    double g0 = g[0], g1 = ka->iso_term ? g[1] : 0.0;
    double q[GP_KERNEL_BLOCK], c0[GP_KERNEL_BLOCK];
    for (size_t j0 = 0; j0 < m; j0 += GP_KERNEL_BLOCK) {
        size_t len = m - j0 < GP_KERNEL_BLOCK ? m - j0 : GP_KERNEL_BLOCK;
        /* (z - x)^2 is (x - z)^2 exactly: a rounded difference only changes sign */
        gp_kernel_block_q(ka->zt, m, na, j0, len, a, q);
        known_factors(ka->type, q, kcol + j0, len, c0);
        for (size_t t = 0; t < len; t++) {
            size_t j = j0 + t;
            double w = wcol[j];
            if (w == 0.0)
                continue;
            double wc0 = w * c0[t];
            g0 += w * kcol[j];
            if (ka->iso_term)
                g1 += wc0 * q[t];
            const double *zj = ka->zp + j * width;
            double *gzj = gzp ? gzp + j * width : NULL;
            for (size_t v = 0; v < nv; v++) {
                v8 z, acc;
                V8_LOAD(z, zj + 8 * v);
                v8 d = A[v] - z;
                if (ka->ard)
                    G[v] += wc0 * (d * d);
                if (gzj) {
                    V8_LOAD(acc, gzj + 8 * v);
                    acc += (wc0 * d) * INV[v];
                    V8_STORE(gzj + 8 * v, acc);
                }
            }
        }
    }
    g[0] = g0;
    if (ka->iso_term)
        g[1] = g1;
    if (ka->ard) {
        for (size_t v = 0; v < nv; v++)
            V8_STORE(gpad + 8 * v, G[v]);
        memcpy(g + 1, gpad, na * sizeof *gpad);
    }
}

GP_CLONES
void gp_kernel_block_known(const gp_known_args *ka, const double *a, const double *kcol,
                           const double *wcol, double *g, double *gzp)
{
    switch (ka->width / 8) {
    case 1: known_point(ka, a, kcol, wcol, g, gzp, 1); break;
    case 2: known_point(ka, a, kcol, wcol, g, gzp, 2); break;
    case 3: known_point(ka, a, kcol, wcol, g, gzp, 3); break;
    default: known_point(ka, a, kcol, wcol, g, gzp, 4); break;
    }
}
