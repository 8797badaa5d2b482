/* See kernel_block.h. Cloned for the vector widths like core/linalg's
 * kernels; nothing here uses fma() or reorders a sum, so every clone gives
 * the bits of the scalar code in kernel_formula.h. */
#include "core/kernel/kernel_block.h"

#include <math.h>

#include "core/linalg/fastmath.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define BLOCK_CLONES \
    __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default"), optimize("O3")))
#else
#define BLOCK_CLONES
#endif

int gp_kernel_block_type(gp_kernel_type type)
{
    return type == GP_KERNEL_RBF || type == GP_KERNEL_MATERN12 || type == GP_KERNEL_MATERN32 ||
           type == GP_KERNEL_MATERN52;
}

BLOCK_CLONES
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
BLOCK_CLONES
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
BLOCK_CLONES
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
