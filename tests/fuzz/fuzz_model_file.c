/* libFuzzer target: the portable model file's reader (api/model_file_read.c,
 * docs/design/model-file.md), the bytes an import takes from the network.
 * The first byte of an input picks how the rest is read:
 *   even  as is: the container, header and checksum checks meet any bytes;
 *   odd   with its checksum made right first (when its header holds a
 *         "sha256":"<64 characters>" to fill), so that mutations reach the
 *         model metadata, the arrays and the method's import behind it.
 * A file that reads is handed to its method's import (as POST
 * /v1/models/import does) and the model freed; nothing may crash or leak. */
#include "tests/fuzz/fuzz_common.h"

#include "api/internal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    gp_parallel_set_threads(1);
    return 0;
}

/* The writer's rule: the hash of the file with the value read as '0's. */
static void reseal(unsigned char *b, size_t len)
{
    if (len < 8)
        return;
    uint64_t n = 0;
    for (int k = 0; k < 8; k++)
        n |= (uint64_t)b[k] << (8 * k);
    static const char key[] = "\"sha256\":\"";
    size_t kl = sizeof key - 1;
    if (n > len - 8 || n < kl + 64)
        return;
    for (size_t i = 8; i + kl + 64 <= 8 + n; i++) {
        if (memcmp(b + i, key, kl) != 0)
            continue;
        unsigned char *v = b + i + kl;
        memset(v, '0', 64);
        gp_sha256 sh;
        gp_sha256_init(&sh);
        gp_sha256_update(&sh, b, len);
        char hex[65];
        gp_sha256_hex(&sh, hex);
        memcpy(v, hex, 64);
        return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > FUZZ_MAX_INPUT)
        return 0;
    size_t len = size - 1;
    unsigned char *b = malloc(len ? len : 1);
    if (b == NULL)
        return 0;
    if (len)
        memcpy(b, data + 1, len);
    if (data[0] & 1)
        reseal(b, len);
    gp_model_file f;
    gp_error err;
    gp_error_clear(&err);
    if (gp_model_file_read((const char *)b, len, &f, &err) == GP_OK) {
        gp_model *model = NULL;
        if (gp_model_import(f.method, &f.state, &model, &err) == GP_OK)
            gp_model_free(model);
        gp_model_file_free(&f);
    } else if (err.code == GP_OK || (err.code != GP_EDATA && err.code != GP_EUNSUPPORTED &&
                                     err.code != GP_ENOMEM)) {
        fprintf(stderr, "fuzz_model_file: refused with code %d (%s): %s\n", err.code, err.field,
                err.message);
        abort();
    }
    free(b);
    return 0;
}
