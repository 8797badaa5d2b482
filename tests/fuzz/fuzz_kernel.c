/* libFuzzer target: the kernel JSON parser, gp_kernel_from_json (api/internal.h),
 * on the input parsed as JSON, for inputs of 1, 2 and 5 columns, with no method
 * restriction and with the kernels of "exact". An accepted kernel must come
 * back from gp_kernel_to_json in a shape the parser accepts again
 * (docs/design/api.md: "the same shape comes back in responses"); a failure of that
 * round trip aborts with both texts. */
#include "tests/fuzz/fuzz_common.h"

#include "api/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void roundtrip(const gp_kernel *k, json_t *in, size_t dim, const gp_method *m)
{
    json_t *out = gp_kernel_to_json(k);
    if (out == NULL) {
        fprintf(stderr, "fuzz: gp_kernel_to_json returned NULL\n");
        abort();
    }
    char *text = json_dumps(out, GP_JSON_FLAGS);
    json_error_t je;
    json_t *again = text ? json_loads(text, JSON_DECODE_INT_AS_REAL, &je) : NULL;
    gp_kernel *k2 = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (again == NULL || gp_kernel_from_json(again, "kernel", dim, m, &k2, &err) != 0) {
        char *src = json_dumps(in, GP_JSON_FLAGS);
        fprintf(stderr,
                "fuzz: kernel round trip failed (input_dim %zu, method %s)\n"
                "  input:  %.2000s\n  output: %.2000s\n  error:  %s (%s)\n",
                dim, m ? m->name : "none", src ? src : "?", text ? text : "?", err.message,
                err.field);
        abort();
    }
    gp_kernel_free(k2);
    json_decref(again);
    free(text);
    json_decref(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT)
        return -1;
    json_error_t je;
    json_t *v = json_loadb((const char *)data, size,
                           JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &je);
    if (v == NULL)
        return 0;
    static const size_t dims[] = {1, 2, 5};
    const gp_method *methods[] = {NULL, gp_method_find("exact")};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        for (size_t j = 0; j < 2; j++) {
            gp_kernel *k = NULL;
            gp_error err;
            gp_error_clear(&err);
            int rc = gp_kernel_from_json(v, "kernel", dims[i], methods[j], &k, &err);
            if (rc == 0) {
                if (k == NULL) {
                    fprintf(stderr, "fuzz: kernel accepted but NULL\n");
                    abort();
                }
                roundtrip(k, v, dims[i], methods[j]);
                gp_kernel_free(k);
            } else {
                gp_response res;
                memset(&res, 0, sizeof res);
                gp_api_error(&err, &res);
                fuzz_check_response(&res);
                gp_response_free(&res);
                gp_kernel_free(k);
            }
        }
    json_decref(v);
    return 0;
}
