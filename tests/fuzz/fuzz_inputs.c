/* libFuzzer target: distributional inputs (core/model/inputs.c, api/inputs.c;
 * docs/design/api.md "Distributional inputs and the gate"). The first byte
 * picks what the rest of the input is ((byte & 15) % 5):
 *   0  rfgp's `input` option value, {"kind": ..., "dim", "covariance",
 *      "samples", "messages"}: a fit body of an empty rfgp model with it,
 *      parsed and (with bit 4 of the byte set) run, the model deleted again;
 *   1  X of a predict of "dg" (Gaussian inputs, dim 2, diagonal variances);
 *   2  X of a predict of "dc" (Gaussian inputs, dim 2, full covariances);
 *   3  X of a predict of "ds" (samples inputs, dim 1, 3 samples each);
 *   4  X of a predict of "dm" (messages normal, beta, gamma).
 * The predicted models are online (fitted with enough rows at start-up), so
 * valid rows really predict. Every response must be well-formed. */
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char option_body[] =
    "{\"name\":\"di\",\"method\":\"rfgp\",\"seed\":1,\"options\":{\"input\":%s,"
    "\"features\":8,\"inner_features\":4,\"warmup\":2}}";

static const char *const predicted[4] = {"dg", "dc", "ds", "dm"};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    gp_api *api = fuzz_api_open();
    fuzz_fit(api, "{\"name\":\"dg\",\"method\":\"rfgp\",\"seed\":2,\"options\":{\"input\":"
                  "{\"kind\":\"gaussian\",\"dim\":2},\"features\":16,\"inner_features\":8,"
                  "\"warmup\":2},\"X\":[{\"gaussian\":{\"mean\":[0,1],\"var\":[0.1,0.2]}},"
                  "{\"gaussian\":{\"mean\":[1,0],\"var\":[0.2,0.1]}},"
                  "{\"gaussian\":{\"mean\":[2,2],\"var\":[0.1,0.1]}}],\"y\":[0.1,0.5,0.9]}");
    fuzz_fit(api, "{\"name\":\"dc\",\"method\":\"rfgp\",\"seed\":3,\"options\":{\"input\":"
                  "{\"kind\":\"gaussian\",\"dim\":2,\"covariance\":\"full\"},\"features\":16,"
                  "\"inner_features\":8,\"warmup\":2},"
                  "\"X\":[{\"gaussian\":{\"mean\":[0,1],\"cov\":[[0.2,0.05],[0.05,0.1]]}},"
                  "{\"gaussian\":{\"mean\":[1,0],\"cov\":[[0.1,0],[0,0.1]]}},"
                  "{\"gaussian\":{\"mean\":[2,2],\"cov\":[[0.3,-0.1],[-0.1,0.2]]}}],"
                  "\"y\":[0.1,0.5,0.9]}");
    fuzz_fit(api, "{\"name\":\"ds\",\"method\":\"rfgp\",\"seed\":4,\"options\":{\"input\":"
                  "{\"kind\":\"samples\",\"dim\":1,\"samples\":3},\"features\":16,"
                  "\"inner_features\":8,\"warmup\":2},"
                  "\"X\":[{\"samples\":[[0],[0.1],[0.2]]},{\"samples\":[[1],[1.2],[0.9]]},"
                  "{\"samples\":[[2],[2.1],[1.8]]}],\"y\":[0.1,0.5,0.9]}");
    fuzz_fit(api, "{\"name\":\"dm\",\"method\":\"rfgp\",\"seed\":5,\"options\":{\"input\":"
                  "{\"kind\":\"messages\",\"messages\":[\"normal\",\"beta\",\"gamma\"]},"
                  "\"features\":16,\"inner_features\":8,\"warmup\":2},\"X\":["
                  "{\"messages\":[{\"normal\":{\"mean\":0,\"var\":1}},{\"beta\":{\"a\":2,\"b\":1}},"
                  "{\"gamma\":{\"shape\":2,\"rate\":1}}]},"
                  "{\"messages\":[{\"normal\":{\"mean\":1,\"var\":0.5}},{\"beta\":{\"a\":1,\"b\":2}},"
                  "{\"gamma\":{\"shape\":1,\"rate\":2}}]},"
                  "{\"messages\":[{\"normal\":{\"mean\":-1,\"var\":2}},{\"beta\":{\"a\":3,\"b\":3}},"
                  "{\"gamma\":{\"shape\":3,\"rate\":1}}]}],\"y\":[0.1,0.5,0.9]}");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > FUZZ_MAX_INPUT)
        return -1;
    int mode = (data[0] & 15) % 5;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (mode == 0) {
        fuzz_fit_template(option_body, text, len, (data[0] & 16) != 0, "di");
        return 0;
    }
    /* {"X": <text>, "quantiles": [0.1, 0.9]} */
    static const char head[] = "{\"X\":", tail[] = ",\"quantiles\":[0.1,0.9]}";
    char *body = malloc(sizeof head - 1 + len + sizeof tail - 1);
    if (body == NULL)
        return 0;
    memcpy(body, head, sizeof head - 1);
    memcpy(body + sizeof head - 1, text, len);
    memcpy(body + sizeof head - 1 + len, tail, sizeof tail - 1);
    fuzz_call_json(gp_api_predict, predicted[mode - 1], body, sizeof head - 1 + len + sizeof tail - 1);
    free(body);
    return 0;
}
