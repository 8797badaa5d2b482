/* The minibatches of a fit over rows on global indices: see
 * core/methods/svgp/batches.h. */
#include "core/methods/svgp/batches.h"

#define BLOCK_MAX 256 /* rows of a block at most */
#define BLOCK_MIN 64  /* below 4 blocks a step, rows a block at least */
#define FEISTEL_ROUNDS 4

static size_t ceil_div(size_t a, size_t b)
{
    return a / b + (a % b != 0);
}

void svgp_batches_init(svgp_batches *b, size_t n_total, size_t batch, uint64_t seed)
{
    if (batch < 1)
        batch = 1;
    if (batch > n_total)
        batch = n_total;
    size_t few = ceil_div(batch, BLOCK_MIN), per = ceil_div(batch, BLOCK_MAX);
    if (few > 4)
        few = 4;
    b->per_step = per > few ? per : few;
    b->block = ceil_div(batch, b->per_step);
    b->n_total = n_total;
    b->n_blocks = ceil_div(n_total, b->block);
    b->steps = ceil_div(b->n_blocks, b->per_step);
    b->seed = seed;
}

size_t svgp_batches_cap(const svgp_batches *b)
{
    return b->per_step * b->block;
}

size_t svgp_batches_count(const svgp_batches *b, size_t step)
{
    size_t first = step * b->per_step;
    return b->n_blocks - first < b->per_step ? b->n_blocks - first : b->per_step;
}

/* splitmix64's output function: a 64-bit mix in which every input bit moves
 * every output bit. */
static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A bijection of [0, 2^(2 half)): a balanced Feistel network, whose every
 * round is invertible whatever its round function. */
static uint64_t feistel(uint64_t x, unsigned half, uint64_t key)
{
    uint64_t mask = ((uint64_t)1 << half) - 1, l = x >> half, r = x & mask;
    for (uint64_t round = 0; round < FEISTEL_ROUNDS; round++) {
        uint64_t t = l ^ (mix64(r ^ mix64(key + round)) & mask);
        l = r;
        r = t;
    }
    return (l << half) | r;
}

/* Position i of a seeded permutation of [0, n): the Feistel bijection on the
 * smallest domain 4^half >= n, applied again while it lands outside [0, n)
 * (cycle walking: the walk stays on i's cycle, so it returns inside, and
 * distinct i give distinct results; fewer than 4 applications on average). */
static size_t permute(size_t i, size_t n, uint64_t key)
{
    unsigned half = 1;
    while (half < 32 && ((uint64_t)1 << (2 * half)) < (uint64_t)n)
        half++;
    uint64_t x = i;
    do
        x = feistel(x, half, key);
    while (x >= n);
    return (size_t)x;
}

void svgp_batches_block(const svgp_batches *b, int epoch, size_t step, size_t j, size_t *lo,
                        size_t *hi)
{
    uint64_t key = mix64(b->seed ^ mix64((uint64_t)epoch));
    size_t k = permute(step * b->per_step + j, b->n_blocks, key);
    *lo = k * b->block;
    *hi = b->n_total - *lo < b->block ? b->n_total : *lo + b->block;
}

size_t svgp_batches_rows(const svgp_batches *b, int epoch, size_t step)
{
    size_t rows = 0, lo, hi;
    for (size_t j = 0; j < svgp_batches_count(b, step); j++) {
        svgp_batches_block(b, epoch, step, j, &lo, &hi);
        rows += hi - lo;
    }
    return rows;
}
