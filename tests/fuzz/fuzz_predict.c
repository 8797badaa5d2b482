/* libFuzzer target: predict request bodies, gp_api_predict against the model "fz"
 * fitted once at start-up (fuzz_common.h: version 1 has one input column,
 * version 2, the latest, has two). Valid bodies really predict; the api is opened
 * with small limits and inputs above 64 KB are refused, so no input costs
 * much. The response must be well-formed, valid JSON. */
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_fit_models(fuzz_api_open());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT)
        return -1;
    char *body = size ? malloc(size) : NULL;
    if (size && body == NULL)
        return 0;
    if (size)
        memcpy(body, data, size);
    gp_request req;
    memset(&req, 0, sizeof req);
    req.content_type = "application/json";
    req.body = body;
    req.body_len = size;
    gp_response res;
    memset(&res, 0, sizeof res);
    gp_api_predict(fuzz_api, "fz", &req, &res);
    fuzz_check_response(&res);
    gp_response_free(&res);
    free(body);
    return 0;
}
