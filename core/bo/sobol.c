/* gpserve core: Sobol points (see sobol.h). */
#include "core/bo/sobol.h"

#include "core/base/rng.h"

/* Direction number j of dimension d (bits digits, digit 1 the top bit):
 * m_j 2^(bits - 1 - j) with the m_j of the table and, beyond the degree s,
 * the Bratley-Fox recurrence
 *   m_j = m_{j-s} ^ (2^s m_{j-s}) ^ XOR_k 2^k a_k m_{j-k}
 * whose a_k are the polynomial's inner coefficients (scipy's
 * _initialize_v, which the plain fixture checks). */
static void directions(size_t d, uint32_t v[GP_SOBOL_BITS])
{
    uint32_t m[GP_SOBOL_BITS];
    if (d == 0) {
        for (int j = 0; j < GP_SOBOL_BITS; j++)
            m[j] = 1;
    } else {
        const gp_sobol_row *row = &gp_sobol_table[d];
        int s = row->degree;
        for (int j = 0; j < s; j++)
            m[j] = row->m[j];
        for (int j = s; j < GP_SOBOL_BITS; j++) {
            uint32_t next = m[j - s];
            for (int k = 0; k < s; k++)
                if ((row->poly >> (s - 1 - k)) & 1u)
                    next ^= (2u << k) * m[j - k - 1];
            m[j] = next;
        }
    }
    for (int j = 0; j < GP_SOBOL_BITS; j++)
        v[j] = m[j] << (GP_SOBOL_BITS - 1 - j);
}

static int parity(uint32_t x)
{
    return __builtin_parity(x);
}

/* Linear matrix scramble and digital shift of one dimension: digit i of a
 * scrambled direction number is the parity of row i of L (unit diagonal,
 * random bits below it) against the digits of the plain one. */
static void scramble(uint64_t seed, size_t d, uint32_t v[GP_SOBOL_BITS], uint32_t *shift)
{
    gp_rng rng;
    gp_rng_derive(&rng, seed, (uint64_t)d);
    uint32_t row_mask[GP_SOBOL_BITS];
    for (int i = 0; i < GP_SOBOL_BITS; i++) {
        uint32_t diag = 1u << (GP_SOBOL_BITS - 1 - i);
        uint32_t above = ~((diag << 1) - 1u) & ((1u << GP_SOBOL_BITS) - 1u); /* digits 0..i-1 */
        row_mask[i] = ((uint32_t)gp_rng_next(&rng) & above) | diag;
    }
    *shift = (uint32_t)gp_rng_next(&rng) & ((1u << GP_SOBOL_BITS) - 1u);
    for (int j = 0; j < GP_SOBOL_BITS; j++) {
        uint32_t w = 0;
        for (int i = 0; i < GP_SOBOL_BITS; i++)
            w |= (uint32_t)parity(row_mask[i] & v[j]) << (GP_SOBOL_BITS - 1 - i);
        v[j] = w;
    }
}

static int check_args(size_t dim, uint64_t first, size_t n, gp_error *err)
{
    if (dim == 0 || dim > GP_SOBOL_MAX_DIM)
        return gp_error_set(err, GP_EINVAL, "dim", "Sobol points need 1 to %d dimensions (got %zu)",
                            GP_SOBOL_MAX_DIM, dim);
    const uint64_t count = (uint64_t)1 << GP_SOBOL_BITS;
    if (first > count || (uint64_t)n > count - first)
        return gp_error_set(err, GP_EINVAL, "first",
                            "a Sobol sequence has 2^%d points (asked up to %llu + %zu)",
                            GP_SOBOL_BITS, (unsigned long long)first, n);
    return GP_OK;
}

/* The points of one dimension: the Gray-code point of `first` from its
 * bits, then x_{i+1} = x_i ^ v[ctz(i + 1)]. */
static void fill_dimension(const uint32_t v[GP_SOBOL_BITS], uint32_t shift, size_t d,
                           size_t dim, uint64_t first, size_t n, double *out)
{
    const double scale = 1.0 / (double)((uint64_t)1 << GP_SOBOL_BITS);
    uint64_t gray = first ^ (first >> 1);
    uint32_t x = 0;
    for (int j = 0; j < GP_SOBOL_BITS; j++)
        if ((gray >> j) & 1u)
            x ^= v[j];
    for (size_t i = 0; i < n; i++) {
        out[i * dim + d] = (double)(x ^ shift) * scale;
        uint64_t next = first + i + 1;
        if (i + 1 < n)
            x ^= v[__builtin_ctzll(next)];
    }
}

static int points(size_t dim, int scrambled, uint64_t seed, uint64_t first, size_t n, double *out,
                  gp_error *err)
{
    int rc = check_args(dim, first, n, err);
    if (rc != GP_OK)
        return rc;
    for (size_t d = 0; d < dim; d++) {
        uint32_t v[GP_SOBOL_BITS], shift = 0;
        directions(d, v);
        if (scrambled)
            scramble(seed, d, v, &shift);
        fill_dimension(v, shift, d, dim, first, n, out);
    }
    return GP_OK;
}

int gp_sobol_points(size_t dim, uint64_t seed, uint64_t first, size_t n, double *out,
                    gp_error *err)
{
    return points(dim, 1, seed, first, n, out, err);
}

int gp_sobol_points_plain(size_t dim, uint64_t first, size_t n, double *out, gp_error *err)
{
    return points(dim, 0, 0, first, n, out, err);
}
