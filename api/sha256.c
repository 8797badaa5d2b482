/* SHA-256 (FIPS 180-4) through nettle, for the fingerprint of a keyed request
 * (api/idempotency.c: a request whose body differs from the one first sent
 * with its key must not be answered with that one's result, and a 64-bit
 * hash would let a client find two bodies that collide) and the checksum of
 * the model file (api/model_file.c). nettle, not a portable loop of our own:
 * Debian's build uses the CPU's SHA instructions (SHA-NI) when it has them,
 * about 8x the portable code here (794 vs 92 MB/s), which is most of a large
 * model file's import; GnuTLS is built on the same library. */
#include <stdio.h>

#include "api/internal.h"

void gp_sha256_init(gp_sha256 *s)
{
    sha256_init(&s->ctx);
}

void gp_sha256_update(gp_sha256 *s, const void *data, size_t n)
{
    sha256_update(&s->ctx, n, data);
}

void gp_sha256_hex(gp_sha256 *s, char out[65])
{
    static const char HEX[] = "0123456789abcdef";
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_digest(&s->ctx, sizeof d, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) {
        out[2 * i] = HEX[d[i] >> 4];
        out[2 * i + 1] = HEX[d[i] & 15];
    }
    out[64] = '\0';
}
