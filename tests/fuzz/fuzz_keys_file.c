/* libFuzzer target: the keys file's parser (server/keys.h, --keys-file).
 * Checks: any input is parsed or refused without a crash or a leak; a
 * refusal names a line within the input (0 only when no key was found) and
 * says why; a parsed table holds valid unique names with a scope, models=
 * patterns that are names, limits in range, and every key is found by its
 * own name, and never by the empty secret or a wrong one. */
#include "tests/fuzz/fuzz_common.h"

#include "server/keys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz: %s\n", what);
    abort();
}

static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

static void check_table(const gp_keys *k)
{
    if (k->n == 0)
        fail("a parsed table without keys");
    for (size_t i = 0; i < k->n; i++) {
        const gp_key *e = &k->keys[i];
        if (!valid_name(e->name))
            fail("an invalid key name");
        if (e->scope < GP_SCOPE_READ || e->scope > GP_SCOPE_ADMIN)
            fail("a key without a scope");
        if (gp_keys_find(k, e->name) != e)
            fail("a key not found by its name (or a name given twice)");
        if (e->n_models < 0 || e->n_models > GP_KEY_MAX_MODELS)
            fail("models= count out of range");
        for (int m = 0; m < e->n_models; m++)
            if (!valid_name(e->models[m]))
                fail("a models= pattern that is not a name");
        if (e->rps < 0 || e->rps > 1000000000L || e->fits_per_minute < 0 ||
            e->fits_per_minute > 1000000000L)
            fail("a limit out of range");
        for (size_t j = 0; j < i; j++)
            if (gp_digest_equal(e->digest, k->keys[j].digest))
                fail("two keys with one secret");
    }
    if (gp_keys_match(k, "", 0) != NULL)
        fail("the empty secret matched");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT)
        return -1;
    gp_keys *k = NULL;
    int line = -1;
    char msg[512] = "";
    int rc = gp_keys_parse((const char *)data, size, &k, &line, msg, sizeof msg);
    if (rc == 0) {
        if (k == NULL)
            fail("success without a table");
        check_table(k);
        gp_keys_free(k);
        return 0;
    }
    if (k != NULL)
        fail("a refusal with a table");
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    if (line < 0 || (size_t)line > lines)
        fail("a refusal naming a line past the input");
    if (msg[0] == '\0')
        fail("a refusal without a reason");
    return 0;
}
