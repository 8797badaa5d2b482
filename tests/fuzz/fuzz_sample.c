/* libFuzzer target: sample request bodies, gp_api_sample against the model "fz"
 * fitted once at start-up (fuzz_common.h: version 1 has one input column,
 * version 2, the latest, has two). Valid bodies really sample; the api is opened
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
    return fuzz_model_input(gp_api_sample, data, size);
}
