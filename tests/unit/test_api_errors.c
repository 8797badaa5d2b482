/* api: bad requests through the route handlers, each checking the status, the
 * catalogue code and the field the error names. One cmocka test per case. */
#include "tests/unit/api_testutil.h"

enum route { FIT, PREDICT, SAMPLE, GET, GET_VERSION, DELETE, OBSERVE };

typedef struct bad_case {
    const char *label;
    enum route route;
    const char *ctype;
    const char *body;
    const char *query; /* "k=v&k=v" (CSV fits) */
    const char *name;  /* model name for PREDICT/SAMPLE/GET/DELETE/OBSERVE */
    int version;
    int status;
    const char *code;
    const char *field;
    const char *message_part; /* must appear in the message (NULL: not checked) */
} bad_case;

#define J "application/json"
#define CSV "text/csv"
/* A valid 2-D training set for fits whose error is elsewhere. */
#define XY "\"X\":[[0,1],[1,2],[2,0.5]],\"y\":[1,2,3]"

static const bad_case cases[] = {
    /* ---- fit: JSON syntax and shape ---- */
    {"malformed json", FIT, J, "{\"name\":\"a\",", NULL, NULL, 0, 400, "malformed_json", "", NULL},
    {"empty body", FIT, J, "", NULL, NULL, 0, 400, "malformed_json", "", NULL},
    {"bare NaN token", FIT, J, "{\"name\":\"a\",\"X\":[NaN],\"y\":[1]}", NULL, NULL, 0, 400,
     "malformed_json", "", NULL},
    {"duplicate keys", FIT, J, "{\"name\":\"a\",\"name\":\"b\"," XY "}", NULL, NULL, 0, 400,
     "malformed_json", "", NULL},
    {"body not an object", FIT, J, "[1,2,3]", NULL, NULL, 0, 400, "invalid_argument", "", NULL},
    {"missing X", FIT, J, "{\"name\":\"a\",\"y\":[1,2]}", NULL, NULL, 0, 400,
     "invalid_argument", "X", NULL},
    {"missing y", FIT, J, "{\"name\":\"a\",\"X\":[1,2]}", NULL, NULL, 0, 400,
     "invalid_argument", "y", NULL},
    {"missing name", FIT, J, "{" XY "}", NULL, NULL, 0, 400, "invalid_argument", "name", NULL},
    {"name with a space", FIT, J, "{\"name\":\"a b\"," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "name", NULL},
    {"name with a slash", FIT, J, "{\"name\":\"a/b\"," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "name", NULL},
    {"name too long", FIT, J,
     "{\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"," XY "}",
     NULL, NULL, 0, 400, "invalid_argument", "name", NULL},
    {"name not a string", FIT, J, "{\"name\":5," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "name", NULL},
    {"unknown top-level field", FIT, J, "{\"name\":\"a\",\"colour\":1," XY "}", NULL, NULL, 0,
     400, "invalid_argument", "colour", NULL},
    {"X not an array", FIT, J, "{\"name\":\"a\",\"X\":\"abc\",\"y\":[1]}", NULL, NULL, 0, 400,
     "invalid_argument", "X", NULL},
    {"unknown method", FIT, J, "{\"name\":\"a\",\"method\":\"magic\"," XY "}", NULL, NULL, 0,
     400, "invalid_argument", "method", "exact"},
    {"standardize not a bool", FIT, J, "{\"name\":\"a\",\"standardize\":\"yes\"," XY "}", NULL,
     NULL, 0, 400, "invalid_argument", "standardize", NULL},
    {"negative seed", FIT, J, "{\"name\":\"a\",\"seed\":-1," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "seed", NULL},
    {"fractional seed", FIT, J, "{\"name\":\"a\",\"seed\":1.5," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "seed", NULL},
    {"async not a bool", FIT, J, "{\"name\":\"a\",\"async\":1," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "async", NULL},
    /* ---- fit: data ---- */
    {"ragged rows", FIT, J, "{\"name\":\"a\",\"X\":[[1,2],[3,4],[5]],\"y\":[1,2,3]}", NULL,
     NULL, 0, 422, "invalid_data", "X[2]", NULL},
    {"row then number", FIT, J, "{\"name\":\"a\",\"X\":[[1,2],3],\"y\":[1,2]}", NULL, NULL, 0,
     422, "invalid_data", "X[1]", NULL},
    {"number then row", FIT, J, "{\"name\":\"a\",\"X\":[1,[3]],\"y\":[1,2]}", NULL, NULL, 0,
     422, "invalid_data", "X[1]", NULL},
    {"NaN as a string in X", FIT, J,
     "{\"name\":\"a\",\"X\":[[1,2],[\"NaN\",4]],\"y\":[1,2]}", NULL, NULL, 0, 422,
     "invalid_data", "X[1][0]", NULL},
    {"Infinity string in X", FIT, J,
     "{\"name\":\"a\",\"X\":[[1,2],[3,\"Infinity\"]],\"y\":[1,2]}", NULL, NULL, 0, 422,
     "invalid_data", "X[1][1]", NULL},
    {"1e999 overflow in X", FIT, J, "{\"name\":\"a\",\"X\":[[1,2],[3,1e999]],\"y\":[1,2]}",
     NULL, NULL, 0, 422, "invalid_data", "X[1][1]", "1e999"},
    {"-1e999 overflow in y", FIT, J, "{\"name\":\"a\",\"X\":[1,2,3],\"y\":[1,-1e999,3]}", NULL,
     NULL, 0, 422, "invalid_data", "y[1]", NULL},
    {"two overflows", FIT, J, "{\"name\":\"a\",\"X\":[1e400,2,3e500],\"y\":[1,2,3]}", NULL,
     NULL, 0, 422, "invalid_data", "X[0]", NULL},
    {"string in X", FIT, J, "{\"name\":\"a\",\"X\":[[1,\"two\"]],\"y\":[1]}", NULL, NULL, 0,
     422, "invalid_data", "X[0][1]", NULL},
    {"null in flat X", FIT, J, "{\"name\":\"a\",\"X\":[1,null],\"y\":[1,2]}", NULL, NULL, 0,
     422, "invalid_data", "X[1]", NULL},
    {"string in y", FIT, J, "{\"name\":\"a\",\"X\":[1,2],\"y\":[1,\"a\"]}", NULL, NULL, 0, 422,
     "invalid_data", "y[1]", NULL},
    {"empty X", FIT, J, "{\"name\":\"a\",\"X\":[],\"y\":[]}", NULL, NULL, 0, 422,
     "invalid_data", "X", NULL},
    {"empty row", FIT, J, "{\"name\":\"a\",\"X\":[[]],\"y\":[1]}", NULL, NULL, 0, 422,
     "invalid_data", "X[0]", NULL},
    {"X/y length mismatch", FIT, J, "{\"name\":\"a\",\"X\":[1,2,3],\"y\":[1,2]}", NULL, NULL, 0,
     422, "invalid_data", "y", NULL},
    /* ---- fit: kernel ---- */
    {"unknown kernel type", FIT, J, "{\"name\":\"a\",\"kernel\":{\"type\":\"gauss\"}," XY "}",
     NULL, NULL, 0, 400, "invalid_argument", "kernel.type", NULL},
    {"kernel without type", FIT, J, "{\"name\":\"a\",\"kernel\":{\"ard\":true}," XY "}", NULL,
     NULL, 0, 400, "invalid_argument", "kernel.type", NULL},
    {"kernel not an object", FIT, J, "{\"name\":\"a\",\"kernel\":\"rbf\"," XY "}", NULL, NULL,
     0, 400, "invalid_argument", "kernel", NULL},
    {"negative lengthscale", FIT, J,
     "{\"name\":\"a\",\"kernel\":{\"type\":\"rbf\",\"lengthscale\":-1}," XY "}", NULL, NULL, 0,
     400, "invalid_argument", "kernel.lengthscale", NULL},
    {"zero variance", FIT, J, "{\"name\":\"a\",\"kernel\":{\"type\":\"rbf\",\"variance\":0}," XY
     "}", NULL, NULL, 0, 400, "invalid_argument", "kernel.variance", NULL},
    {"negative lengthscale in a sum term", FIT, J,
     "{\"name\":\"a\",\"kernel\":{\"type\":\"sum\",\"terms\":[{\"type\":\"rbf\"},"
     "{\"type\":\"matern52\",\"lengthscale\":-2}]}," XY "}",
     NULL, NULL, 0, 400, "invalid_argument", "kernel.terms[1].lengthscale", NULL},
    {"lengthscale list of the wrong length", FIT, J,
     "{\"name\":\"a\",\"kernel\":{\"type\":\"rbf\",\"lengthscale\":[1,2,3]}," XY "}", NULL, NULL,
     0, 400, "invalid_argument", "kernel.lengthscale", NULL},
    {"lengthscale list entry not positive", FIT, J,
     "{\"name\":\"a\",\"kernel\":{\"type\":\"rbf\",\"lengthscale\":[1,0]}," XY "}", NULL, NULL,
     0, 400, "invalid_argument", "kernel.lengthscale[1]", NULL},
    {"active_dims out of range", FIT, J,
     "{\"name\":\"a\",\"kernel\":{\"type\":\"rbf\",\"active_dims\":[0,5]}," XY "}", NULL, NULL,
     0, 400, "invalid_argument", "kernel.active_dims[1]", NULL},
    {"active_dims repeated", FIT, J,
     "{\"name\":\"a\",\"kernel\":{\"type\":\"rbf\",\"active_dims\":[1,1]}," XY "}", NULL, NULL,
     0, 400, "invalid_argument", "kernel.active_dims", NULL},
    {"alpha on rbf", FIT, J, "{\"name\":\"a\",\"kernel\":{\"type\":\"rbf\",\"alpha\":2}," XY "}",
     NULL, NULL, 0, 400, "invalid_argument", "kernel.alpha", NULL},
    {"fixed names a missing hyperparameter", FIT, J,
     "{\"name\":\"a\",\"kernel\":{\"type\":\"rbf\",\"fixed\":[\"period\"]}," XY "}", NULL, NULL,
     0, 400, "invalid_argument", "kernel.fixed[0]", NULL},
    {"empty sum", FIT, J, "{\"name\":\"a\",\"kernel\":{\"type\":\"sum\",\"terms\":[]}," XY "}",
     NULL, NULL, 0, 400, "invalid_argument", "kernel.terms", NULL},
    {"unknown kernel field", FIT, J,
     "{\"name\":\"a\",\"kernel\":{\"type\":\"rbf\",\"colour\":1}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "kernel.colour", NULL},
    /* ---- fit: noise and options ---- */
    {"negative noise variance", FIT, J, "{\"name\":\"a\",\"noise\":{\"variance\":-0.1}," XY "}",
     NULL, NULL, 0, 400, "invalid_argument", "noise.variance", NULL},
    {"fixed noise without a value", FIT, J, "{\"name\":\"a\",\"noise\":{\"fixed\":true}," XY "}",
     NULL, NULL, 0, 400, "invalid_argument", "noise.variance", NULL},
    {"unknown option", FIT, J, "{\"name\":\"a\",\"options\":{\"speed\":3}," XY "}", NULL, NULL,
     0, 400, "invalid_argument", "options.speed", "restarts"},
    {"option out of range", FIT, J, "{\"name\":\"a\",\"options\":{\"restarts\":1000}," XY "}",
     NULL, NULL, 0, 400, "invalid_argument", "options.restarts", NULL},
    {"option of the wrong type", FIT, J,
     "{\"name\":\"a\",\"options\":{\"restarts\":\"many\"}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "options.restarts", NULL},
    {"integer option not integral", FIT, J,
     "{\"name\":\"a\",\"options\":{\"max_iterations\":10.5}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "options.max_iterations", NULL},
    {"options not an object", FIT, J, "{\"name\":\"a\",\"options\":[1]," XY "}", NULL, NULL, 0,
     400, "invalid_argument", "options", NULL},
    /* ---- fit: media types and CSV ---- */
    {"wrong content type", FIT, "text/plain", "{\"name\":\"a\"," XY "}", NULL, NULL, 0, 415,
     "unsupported_media_type", "", NULL},
    {"form content type", FIT, "application/x-www-form-urlencoded", "name=a", NULL, NULL, 0, 415,
     "unsupported_media_type", "", NULL},
    {"CSV non-number cell", FIT, CSV, "a,b,y\n1,2,3\nx,4,5\n", "name=c", NULL, 0, 422,
     "invalid_data", "X[1][0]", "row 2, column 'a'"},
    {"CSV non-number target", FIT, CSV, "a,b,y\n1,2,3\n4,5,six\n", "name=c", NULL, 0, 422,
     "invalid_data", "y[1]", "column 'y'"},
    {"CSV bad target name", FIT, CSV, "a,b,y\n1,2,3\n", "name=c&target=z", NULL, 0, 400,
     "invalid_argument", "target", NULL},
    {"CSV target index out of range", FIT, CSV, "a,b,y\n1,2,3\n", "name=c&target=3", NULL, 0,
     400, "invalid_argument", "target", NULL},
    {"CSV without name", FIT, CSV, "a,b,y\n1,2,3\n", "", NULL, 0, 400, "invalid_argument",
     "name", NULL},
    {"CSV ragged row", FIT, CSV, "a,b,y\n1,2,3\n4,5\n", "name=c", NULL, 0, 422, "invalid_data",
     "X[1]", NULL},
    {"CSV quoted text cell", FIT, CSV, "a,b,y\n1,\"x, y\",3\n", "name=c", NULL, 0, 422,
     "invalid_data", "X[0][1]", "is not a number"},
    {"CSV unclosed quote", FIT, CSV, "a,b,y\n1,\"2,3\n4,5,6\n", "name=c", NULL, 0, 422,
     "invalid_data", "X[0]", "malformed"},
    {"CSV quote inside an unquoted field", FIT, CSV, "a,b,y\n1,2\"x,3\n", "name=c", NULL, 0, 422,
     "invalid_data", "X[0]", "malformed"},
    {"CSV text after a closing quote", FIT, CSV, "a,b,y\n1,2,3\n1,\"2\"x,3\n", "name=c", NULL, 0,
     422, "invalid_data", "X[1]", "malformed"},
    {"CSV malformed header", FIT, CSV, "\"a,b,y\n1,2,3\n", "name=c", NULL, 0, 422, "invalid_data",
     "X", "header"},
    {"CSV escaped quote in a number cell", FIT, CSV, "a,b,y\n1,\"2\"\"\",3\n", "name=c", NULL, 0,
     422, "invalid_data", "X[0][1]", "is not a number"},
    {"CSV inf cell", FIT, CSV, "a,b,y\n1,inf,3\n", "name=c", NULL, 0, 422, "invalid_data",
     "X[0][1]", NULL},
    {"CSV header only", FIT, CSV, "a,b,y\n", "name=c", NULL, 0, 422, "invalid_data", "X", NULL},
    {"CSV unknown query parameter", FIT, CSV, "a,b,y\n1,2,3\n", "name=c&colour=red", NULL, 0,
     400, "invalid_argument", "colour", NULL},
    {"CSV bad seed", FIT, CSV, "a,b,y\n1,2,3\n", "name=c&seed=abc", NULL, 0, 400,
     "invalid_argument", "seed", NULL},
    {"CSV kernel query not JSON", FIT, CSV, "a,b,y\n1,2,3\n", "name=c&kernel={rbf", NULL, 0, 400,
     "invalid_argument", "kernel", NULL},
    /* ---- fit: distributed (api/distributed.c) ---- */
    {"distributed not an object", FIT, J, "{\"name\":\"a\",\"distributed\":4," XY "}", NULL,
     NULL, 0, 400, "invalid_argument", "distributed", "{\"ranks\": N}"},
    {"distributed unknown key", FIT, J,
     "{\"name\":\"a\",\"distributed\":{\"ranks\":2,\"hosts\":3}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "distributed.hosts", NULL},
    {"distributed ranks 0", FIT, J, "{\"name\":\"a\",\"distributed\":{\"ranks\":0}," XY "}",
     NULL, NULL, 0, 400, "invalid_argument", "distributed.ranks", "from 1 to 16"},
    {"distributed ranks above the maximum", FIT, J,
     "{\"name\":\"a\",\"distributed\":{\"ranks\":17}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "distributed.ranks", "--mpi-max-ranks"},
    {"distributed ranks not an integer", FIT, J,
     "{\"name\":\"a\",\"distributed\":{\"ranks\":1.5}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "distributed.ranks", NULL},
    {"distributed ranks a string", FIT, J,
     "{\"name\":\"a\",\"distributed\":{\"ranks\":\"2\"}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "distributed.ranks", NULL},
    {"distributed ranks missing", FIT, J, "{\"name\":\"a\",\"distributed\":{}," XY "}", NULL,
     NULL, 0, 400, "invalid_argument", "distributed.ranks", NULL},
    {"distributed and not async", FIT, J,
     "{\"name\":\"a\",\"async\":false,\"distributed\":{\"ranks\":2}," XY "}", NULL, NULL, 0,
     400, "invalid_argument", "async", "runs as a job"},
    {"distributed with X and y, no data set", FIT, J,
     "{\"name\":\"a\",\"method\":\"sgpr\",\"distributed\":{\"ranks\":2}," XY "}", NULL,
     NULL, 0, 400, "invalid_argument", "data.dataset", "data set"},
    /* ---- fit: validation (api/validation.c) ---- */
    {"validation not an object", FIT, J, "{\"name\":\"a\",\"validation\":\"yes\"," XY "}", NULL,
     NULL, 0, 400, "invalid_argument", "validation", "{\"folds\": k}"},
    {"validation unknown key", FIT, J, "{\"name\":\"a\",\"validation\":{\"splits\":2}," XY "}",
     NULL, NULL, 0, 400, "invalid_argument", "validation.splits", NULL},
    {"validation folds 1", FIT, J, "{\"name\":\"a\",\"validation\":{\"folds\":1}," XY "}", NULL,
     NULL, 0, 400, "invalid_argument", "validation.folds", "from 2"},
    {"validation folds above the rows", FIT, J,
     "{\"name\":\"a\",\"validation\":{\"folds\":4}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "validation.folds", "(3)"},
    {"validation folds fractional", FIT, J,
     "{\"name\":\"a\",\"validation\":{\"folds\":2.5}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "validation.folds", NULL},
    {"validation folds a string", FIT, J,
     "{\"name\":\"a\",\"validation\":{\"folds\":\"2\"}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "validation.folds", NULL},
    {"validation fraction 0", FIT, J,
     "{\"name\":\"a\",\"validation\":{\"fraction\":0}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "validation.fraction", "(0, 1)"},
    {"validation fraction 1.2", FIT, J,
     "{\"name\":\"a\",\"validation\":{\"fraction\":1.2}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "validation.fraction", "(0, 1)"},
    {"validation fraction holding out no row", FIT, J,
     "{\"name\":\"a\",\"validation\":{\"fraction\":0.1}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "validation.fraction", "each side"},
    {"validation fraction a string", FIT, J,
     "{\"name\":\"a\",\"validation\":{\"fraction\":\"0.2\"}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "validation.fraction", NULL},
    {"validation folds and fraction", FIT, J,
     "{\"name\":\"a\",\"validation\":{\"folds\":2,\"fraction\":0.5}," XY "}", NULL, NULL, 0,
     400, "invalid_argument", "validation", "not both"},
    {"validation negative seed", FIT, J,
     "{\"name\":\"a\",\"validation\":{\"seed\":-1}," XY "}", NULL, NULL, 0, 400,
     "invalid_argument", "validation.seed", NULL},
    {"validation of a class with one row", FIT, J,
     "{\"name\":\"a\",\"method\":\"svgp\",\"likelihood\":\"bernoulli\",\"validation\":{\"folds\":"
     "2},\"X\":[0,1,2],\"y\":[0,0,1]}",
     NULL, NULL, 0, 400, "invalid_argument", "validation", "single row"},
    /* ---- fit: likelihoods ---- */
    {"unknown likelihood", FIT, J, "{\"name\":\"a\",\"likelihood\":\"logit\"," XY "}", NULL,
     NULL, 0, 400, "invalid_argument", "likelihood", "bernoulli"},
    {"likelihood not a string", FIT, J, "{\"name\":\"a\",\"likelihood\":1," XY "}", NULL, NULL,
     0, 400, "invalid_argument", "likelihood", NULL},
    {"likelihood the method does not fit", FIT, J,
     "{\"name\":\"a\",\"likelihood\":\"bernoulli\"," XY "}", NULL, NULL, 0, 422, "unsupported",
     "likelihood", "method 'exact' does not fit the bernoulli likelihood"},
    {"CSV unknown likelihood", FIT, CSV, "a,b,y\n1,2,0\n", "name=c&likelihood=probit", NULL, 0,
     400, "invalid_argument", "likelihood", NULL},
    {"CSV likelihood the method does not fit", FIT, CSV, "a,b,y\n1,2,0\n",
     "name=c&likelihood=poisson", NULL, 0, 422, "unsupported", "likelihood", "poisson"},
    /* ---- predict (model "m" has 2 inputs) ---- */
    {"predict dimension mismatch", PREDICT, J, "{\"X\":[[1,2,3]]}", NULL, "m", 0, 422,
     "invalid_data", "X[0]", "expects 2"},
    {"predict flat list for a 2-D model", PREDICT, J, "{\"X\":[1,2]}", NULL, "m", 0, 422,
     "invalid_data", "X", NULL},
    {"predict unknown model", PREDICT, J, "{\"X\":[[1,2]]}", NULL, "nosuch", 0, 404, "not_found",
     "name", NULL},
    {"predict unknown version", PREDICT, J, "{\"X\":[[1,2]],\"version\":99}", NULL, "m", 0, 404,
     "not_found", "version", NULL},
    {"predict version 0", PREDICT, J, "{\"X\":[[1,2]],\"version\":0}", NULL, "m", 0, 400,
     "invalid_argument", "version", NULL},
    {"predict quantile 1.5", PREDICT, J, "{\"X\":[[1,2]],\"quantiles\":[1.5]}", NULL, "m", 0,
     400, "invalid_argument", "quantiles[0]", NULL},
    {"predict quantile 0", PREDICT, J, "{\"X\":[[1,2]],\"quantiles\":[0.5,0]}", NULL, "m", 0,
     400, "invalid_argument", "quantiles[1]", NULL},
    {"predict quantile string", PREDICT, J, "{\"X\":[[1,2]],\"quantiles\":[\"0.5\"]}", NULL,
     "m", 0, 400, "invalid_argument", "quantiles[0]", NULL},
    {"predict include_noise not a bool", PREDICT, J, "{\"X\":[[1,2]],\"include_noise\":\"no\"}",
     NULL, "m", 0, 400, "invalid_argument", "include_noise", NULL},
    {"predict missing X", PREDICT, J, "{\"version\":1}", NULL, "m", 0, 400, "invalid_argument",
     "X", NULL},
    {"predict string in X", PREDICT, J, "{\"X\":[[1,\"2\"]]}", NULL, "m", 0, 422,
     "invalid_data", "X[0][1]", NULL},
    {"predict unknown field", PREDICT, J, "{\"X\":[[1,2]],\"mode\":1}", NULL, "m", 0, 400,
     "invalid_argument", "mode", NULL},
    /* a CSV body names its columns: m was fitted without names to match */
    {"predict CSV body, model without names", PREDICT, CSV, "a,b\n1,2\n", NULL, "m", 0, 422,
     "invalid_data", "rows", NULL},
    {"predict text/plain", PREDICT, "text/plain", "{\"X\":[[1,2]]}", NULL, "m", 0, 415,
     "unsupported_media_type", "", NULL},
    {"predict malformed", PREDICT, J, "{\"X\":[[1,2]", NULL, "m", 0, 400, "malformed_json", "",
     NULL},
    {"predict bad name", PREDICT, J, "{\"X\":[[1,2]]}", NULL, "a b", 0, 400, "invalid_argument",
     "name", NULL},
    {"predict covariance too large", PREDICT, J,
     "{\"full_covariance\":true,\"X\":[[0,0],[0,1],[0,2],[0,3],[0,4],[0,5],[0,6]]}", NULL, "m",
     0, 413, "payload_too_large", "X", "max_covariance_points"},
    {"predict too many points", PREDICT, J,
     "{\"X\":[[0,0],[0,1],[0,2],[0,3],[0,4],[0,5],[0,6],[0,7],[0,8],[0,9],[1,0],[1,1],[1,2],"
     "[1,3],[1,4],[1,5],[1,6],[1,7],[1,8],[1,9],[2,0]]}",
     NULL, "m", 0, 413, "payload_too_large", "X", "max_points"},
    /* ---- sample ---- */
    {"sample n_samples 0", SAMPLE, J, "{\"X\":[[1,2]],\"n_samples\":0}", NULL, "m", 0, 400,
     "invalid_argument", "n_samples", NULL},
    {"sample n_samples too many", SAMPLE, J, "{\"X\":[[1,2]],\"n_samples\":101}", NULL, "m", 0,
     413, "payload_too_large", "n_samples", "max_samples"},
    {"sample values too many", SAMPLE, J,
     "{\"X\":[[0,0],[0,1],[0,2],[0,3],[0,4]],\"n_samples\":30}", NULL, "m", 0, 413,
     "payload_too_large", "n_samples", "max_sample_values"},
    {"sample seed not a number", SAMPLE, J, "{\"X\":[[1,2]],\"seed\":\"x\"}", NULL, "m", 0, 400,
     "invalid_argument", "seed", NULL},
    {"sample unknown model", SAMPLE, J, "{\"X\":[[1,2]]}", NULL, "nosuch", 0, 404, "not_found",
     "name", NULL},
    {"sample dimension mismatch", SAMPLE, J, "{\"X\":[[1]]}", NULL, "m", 0, 422, "invalid_data",
     "X[0]", NULL},
    {"sample observations not a bool", SAMPLE, J, "{\"X\":[[1,2]],\"observations\":1}", NULL,
     "m", 0, 400, "invalid_argument", "observations", NULL},
    {"sample observations with include_noise", SAMPLE, J,
     "{\"X\":[[1,2]],\"observations\":true,\"include_noise\":true}", NULL, "m", 0, 400,
     "invalid_argument", "observations", "include_noise"},
    /* ---- metadata routes ---- */
    {"get unknown model", GET, NULL, NULL, NULL, "nosuch", 0, 404, "not_found", "name", NULL},
    {"get unknown version", GET_VERSION, NULL, NULL, NULL, "m", 7, 404, "not_found", "version",
     NULL},
    {"get bad name", GET, NULL, NULL, NULL, "bad$name", 0, 400, "invalid_argument", "name",
     NULL},
    {"delete unknown model", DELETE, NULL, NULL, NULL, "nosuch", 0, 404, "not_found", "name",
     NULL},
    /* exact observes (tests/unit/test_observe.c): every refusal leaves m as it was */
    {"observe wrong arity", OBSERVE, J, "{\"X\":[[1,2,3]],\"y\":[1]}", NULL, "m", 0, 422,
     "invalid_data", "X[0]", "expects 2"},
    {"observe y rows differ", OBSERVE, J, "{\"X\":[[1,2]],\"y\":[1,2]}", NULL, "m", 0, 422,
     "invalid_data", "y", NULL},
    {"observe NaN", OBSERVE, J, "{\"X\":[[1,\"NaN\"]],\"y\":[1]}", NULL, "m", 0, 422,
     "invalid_data", "X[0][1]", NULL},
    {"observe Inf y", OBSERVE, J, "{\"X\":[[1,2]],\"y\":[1e999]}", NULL, "m", 0, 422,
     "invalid_data", "y[0]", NULL},
    {"observe two outputs", OBSERVE, J, "{\"X\":[[1,2]],\"y\":[[1,2]]}", NULL, "m", 0, 422,
     "unsupported", "y", "one output"},
    {"observe y missing", OBSERVE, J, "{\"X\":[[1,2]]}", NULL, "m", 0, 400,
     "invalid_argument", "y", NULL},
    {"observe X missing", OBSERVE, J, "{\"y\":[1]}", NULL, "m", 0, 400, "invalid_argument",
     "X", NULL},
    {"observe unknown key", OBSERVE, J, "{\"X\":[[1,2]],\"y\":[1],\"z\":1}", NULL, "m", 0,
     400, "invalid_argument", "z", NULL},
    {"observe new_version not bool", OBSERVE, J, "{\"X\":[[1,2]],\"y\":[1],\"new_version\":2}",
     NULL, "m", 0, 400, "invalid_argument", "new_version", NULL},
    {"observe distributions to points", OBSERVE, J,
     "{\"X\":[{\"gaussian\":{\"mean\":[1,2],\"var\":[1,1]}}],\"y\":[1]}", NULL, "m", 0, 422,
     "invalid_data", "X[0]", NULL},
    {"observe unknown version", OBSERVE, J, "{\"X\":[[1,2]],\"y\":[1],\"version\":9}", NULL,
     "m", 0, 404, "not_found", "version", NULL},
    {"observe unknown model", OBSERVE, J, "{\"X\":[[1,2]],\"y\":[1]}", NULL, "nosuch", 0, 404,
     "not_found", "name", NULL},
};

static gp_api *api;
static char dir[64], db[128];

static int group_setup(void **state)
{
    (void)state;
    tmp_db(dir, sizeof dir, db, sizeof db);
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = db;
    cfg.max_points = 20;
    cfg.max_covariance_points = 6;
    cfg.max_samples = 100;
    cfg.max_sample_values = 100;
    gp_error err;
    if (gp_api_open(&cfg, &api, &err) != GP_OK) {
        fprintf(stderr, "gp_api_open: %s\n", err.message);
        return -1;
    }
    gp_response res = {0};
    fit_json(api, "{\"name\":\"m\",\"X\":[[0,1],[1,2],[2,0.5],[3,1],[0.5,0.5]],"
                  "\"y\":[1,2,3,2,1]}",
             &res);
    int ok = res.status == 201;
    if (!ok)
        fprintf(stderr, "fit of m: %d %.*s\n", res.status, (int)res.body_len, res.body);
    gp_response_free(&res);
    return ok ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    gp_api_close(api);
    rm_tree(dir);
    return 0;
}

/* "k=v&k=v" into params (pointers into buf). */
static size_t split_query(const char *q, char *buf, size_t buflen, gp_query_param *params,
                          size_t max)
{
    size_t n = 0;
    if (q == NULL || q[0] == '\0')
        return 0;
    snprintf(buf, buflen, "%s", q);
    char *save = NULL;
    for (char *tok = strtok_r(buf, "&", &save); tok && n < max;
         tok = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(tok, '=');
        params[n].key = tok;
        params[n].value = eq ? eq + 1 : "";
        if (eq)
            *eq = '\0';
        n++;
    }
    return n;
}

static void run_case(void **state)
{
    const bad_case *c = *state;
    char qbuf[256];
    gp_query_param q[8];
    size_t nq = split_query(c->query, qbuf, sizeof qbuf, q, 8);
    gp_request req = make_req(c->ctype, c->body, q, nq);
    gp_response res = {0};
    memset(&res, 0, sizeof res);
    switch (c->route) {
    case FIT: do_fit(api, &req, &res); break;
    case PREDICT: gp_api_predict(api, c->name, &req, &res); break;
    case SAMPLE: gp_api_sample(api, c->name, &req, &res); break;
    case GET: gp_api_get_model(api, c->name, 0, &res); break;
    case GET_VERSION: gp_api_get_model(api, c->name, c->version, &res); break;
    case DELETE: gp_api_delete_model(api, c->name, NULL, &res); break;
    case OBSERVE: gp_api_observe(api, c->name, &req, &res); break;
    }
    print_message("%s -> %d %.*s\n", c->label, res.status, (int)res.body_len,
                  res.body ? res.body : "");
    expect_error(&res, c->status, c->code, c->field);
    /* The case's status is the one the catalogue gives its code. */
    assert_int_equal(gp_status_http(gp_status_from_name(c->code)), c->status);
    assert_string_equal(res.content_type, "application/json");
    if (c->message_part) {
        json_t *j = res_json(&res);
        const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        if (strstr(m, c->message_part) == NULL)
            fail_msg("message '%s' lacks '%s'", m, c->message_part);
        json_decref(j);
    }
    gp_response_free(&res);
}

#define N_CASES (sizeof cases / sizeof cases[0])

int main(void)
{
    struct CMUnitTest tests[N_CASES];
    for (size_t i = 0; i < N_CASES; i++) {
        tests[i] = (struct CMUnitTest)cmocka_unit_test_prestate(run_case, (void *)&cases[i]);
        tests[i].name = cases[i].label;
    }
    return cmocka_run_group_tests_name("api_errors", tests, group_setup, group_teardown);
}
