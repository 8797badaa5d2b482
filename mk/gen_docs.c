/* gen_docs: the parts of the documentation that restate facts the code holds,
 * generated from it so that each fact is written once: the method reference
 * (from the method descriptors, core/methods/registry.h) and the error
 * catalogue (GP_ERROR_CATALOGUE, core/base/error.h).
 *
 *   gen_docs --write FILE...   replace each file's generated blocks
 *   gen_docs --check FILE...   exit 1 (naming the file) when a block is stale
 *
 * A block lies between two marker lines. Markdown files: "<!-- methods:begin"
 * / "<!-- methods:end" (the method reference) and "<!-- errors:begin" /
 * "<!-- errors:end" (the catalogue as a table). YAML files: "    # methods:begin"
 * / "    # methods:end" (entries of components/schemas: MethodName, each method's
 * <Method>Options and <Method>MethodInfo, and their unions MethodOptions and
 * MethodInfo) and
 * "              # errors:begin" / "              # errors:end" (the enum of the
 * Error schema's code). A file must hold at least one block. `make docs`
 * writes them, `make test` checks them. A build tool, not part of the daemon. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "core/methods/registry.h"
/* the route table's constants only (no code of server/ is linked): the scopes table */
#include "server/route.h"

typedef struct text {
    char *buf;
    size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        exit(2);
    if (t->len + (size_t)n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + (size_t)n + 1)
            cap *= 2;
        char *b = realloc(t->buf, cap);
        if (b == NULL) {
            fprintf(stderr, "gen_docs: out of memory\n");
            exit(2);
        }
        t->buf = b;
        t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->buf + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

/* The shortest %g form that reads back as v (what a person would write). */
static const char *num(double v, char *out, size_t size)
{
    if (v == (double)(long long)v && fabs(v) < 1e15) {
        snprintf(out, size, "%lld", (long long)v);
        return out;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(out, size, "%.*g", p, v);
        if (strtod(out, NULL) == v)
            break;
    }
    return out;
}

static const char *const type_names[] = {"integer", "number", "boolean", "string", "object"};

static const char *option_type(const gp_option_spec *s)
{
    return (unsigned)s->type < sizeof type_names / sizeof type_names[0] ? type_names[s->type]
                                                                       : "string";
}

/* "a|b|c" written as sep-separated items, each wrapped in quote. */
static void put_choices(text *t, const char *choices, const char *sep, const char *quote)
{
    const char *p = choices;
    int first = 1;
    while (p && *p) {
        const char *bar = strchr(p, '|');
        int n = bar ? (int)(bar - p) : (int)strlen(p);
        put(t, "%s%s%.*s%s", first ? "" : sep, quote, n, p, quote);
        first = 0;
        p = bar ? bar + 1 : NULL;
    }
}

/* ---- README.md ---- */

static void md_default(text *t, const gp_option_spec *s)
{
    char b[40];
    switch (s->type) {
    case GP_OPTION_BOOL:
        put(t, "`%s`", s->default_number != 0.0 ? "true" : "false");
        break;
    case GP_OPTION_ENUM:
        put(t, "`%s`", s->default_string ? s->default_string : "");
        break;
    case GP_OPTION_OBJECT:
        put(t, "see meaning");
        break;
    case GP_OPTION_NUMBER:
        if (s->default_string) { /* a keyword default */
            put(t, "`%s`", s->default_string);
            break;
        }
        put(t, "%s", num(s->default_number, b, sizeof b));
        break;
    default:
        put(t, "%s", num(s->default_number, b, sizeof b));
    }
}

static void md_range(text *t, const gp_option_spec *s)
{
    char a[40], b[40];
    switch (s->type) {
    case GP_OPTION_ENUM:
        put_choices(t, s->choices, ", ", "`");
        break;
    case GP_OPTION_BOOL:
        put(t, "true, false");
        break;
    case GP_OPTION_OBJECT:
        /* the schema is in the OpenAPI document and GET /v1/methods */
        put(t, "a JSON object (its schema: `api/openapi.yaml`, `schema` in `GET /v1/methods`; "
               "`docs/design/api.md`, Structured options)");
        break;
    default:
        put(t, "%s to %s", num(s->min, a, sizeof a), num(s->max, b, sizeof b));
        if (s->type == GP_OPTION_NUMBER && s->choices) {
            put(t, ", or ");
            put_choices(t, s->choices, ", ", "`");
        }
    }
}

/* Text in a markdown table cell: a '|' (as in p(y | f)) would end the cell. */
static void md_cell(text *t, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            put(t, "\\|");
        else
            put(t, "%c", *s);
    }
}

static void md_kernels(text *t, const gp_method *m)
{
    int first = 1;
    for (int k = 0; k < GP_KERNEL_TYPE_COUNT; k++) {
        gp_kernel_type type = (gp_kernel_type)k;
        if (type == GP_KERNEL_SUM || type == GP_KERNEL_PRODUCT ||
            !gp_method_accepts_kernel_type(m, type))
            continue;
        put(t, "%s`%s`", first ? "" : ", ", gp_kernel_type_name(type));
        first = 0;
    }
    put(t, m->composite_kernels ? ", and sums and products of them" : " (a single leaf)");
}

static void md_method(text *t, const gp_method *m)
{
    put(t, "\n### `%s`\n\n%s.\n\n", m->name, m->summary);
    put(t, "- Objective (`diagnostics.objective`): `%s`.\n", m->objective_name);
    put(t, "- Kernels: ");
    md_kernels(t, m);
    put(t, ".\n");
    if (m->iterations_option)
        put(t, "- Job progress: `%s`%s%s%s iterations.\n", m->iterations_option,
            m->restarts_option ? " × (`" : "", m->restarts_option ? m->restarts_option : "",
            m->restarts_option ? "` + 1)" : "");
    put(t, "- Likelihoods: ");
    for (int l = 0, first = 1; l < GP_LIK_COUNT; l++)
        if (gp_method_accepts_likelihood(m, (gp_likelihood)l)) {
            put(t, "%s`%s`", first ? "" : ", ", gp_likelihood_name((gp_likelihood)l));
            first = 0;
        }
    put(t, ".\n");
    if (m->per_point_noise)
        put(t, "- Takes known per-point noise (`\"noise\": {\"per_point\": [...]}`).\n");
    if (m->hyper_priors)
        put(t, "- Takes priors, bounds and single held hyperparameters in the kernel "
               "(`\"priors\"`, `\"bounds\"`, `\"fixed\": [\"lengthscale[i]\"]`).\n");
    if (m->mean_functions)
        put(t, "- Takes a constant or linear mean (`\"mean\": {\"type\": \"linear\"}`).\n");
    if (gp_method_is_mixture(m))
        put(t, "- Predicts with a mixture of Gaussians (`\"components\": true` returns them).\n");
    if (gp_method_has_parts(m))
        put(t, "- Predicts a sum of independent parts (`\"components\": true` returns each "
               "part's latent mean and variance).\n");
    put(t, "\n| option | type | default | accepts | meaning |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < m->n_options; i++) {
        const gp_option_spec *s = &m->options[i];
        put(t, "| `%s` | %s | ", s->name, option_type(s));
        md_default(t, s);
        put(t, " | ");
        md_range(t, s);
        put(t, " | ");
        md_cell(t, s->help);
        put(t, " |\n");
    }
    if (m->n_info == 0)
        return;
    put(t, "\n| `method_info` key | type | meaning |\n|---|---|---|\n");
    for (size_t i = 0; i < m->n_info; i++) {
        put(t, "| `%s` | %s | ", m->info[i].key,
            m->info[i].type == GP_INFO_STRING ? "string" : "number");
        md_cell(t, m->info[i].help);
        put(t, " |\n");
    }
}

static void md_block(text *t)
{
    put(t, "\nEvery method's facts as its descriptor in `core/methods/` states them (the same "
           "data `GET /v1/methods` serves).\n");
    for (size_t i = 0; i < gp_method_count(); i++)
        md_method(t, gp_method_at(i));
    put(t, "\n");
}

/* ---- api/openapi.yaml ---- */

/* YAML double-quoted scalar. */
static void yq(text *t, const char *s)
{
    put(t, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            put(t, "\\%c", *s);
        else
            put(t, "%c", *s);
    }
    put(t, "\"");
}

/* A YAML plain scalar can carry s as it is: not empty, no flow or comment
 * indicators, no leading or trailing space, and not read back as another
 * type (a number, a boolean, null). */
static int yaml_plain(const char *s)
{
    if (*s == '\0' || *s == ' ' || s[strlen(s) - 1] == ' ' ||
        strpbrk(s, ",:[]{}#&*!|>'\"%@`\\\n\t") != NULL || strpbrk(s, "-?") == s)
        return 0;
    static const char *const words[] = {"true", "false", "null", "~", "yes", "no", "on", "off"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcasecmp(s, words[i]) == 0)
            return 0;
    char *end = NULL;
    strtod(s, &end);
    return end == s || *end != '\0';
}

/* JSON v as YAML flow text on one line: {k: v, ...}, [v, ...], plain scalars
 * where they read back as the same value (the style the OpenAPI document
 * was written in). */
static void yaml_flow(text *t, const json_t *v)
{
    char b[40];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *item;
        int first = 1;
        put(t, "{");
        json_object_foreach((json_t *)v, key, item) {
            put(t, "%s", first ? "" : ", ");
            if (yaml_plain(key))
                put(t, "%s", key);
            else
                yq(t, key);
            put(t, ": ");
            yaml_flow(t, item);
            first = 0;
        }
        put(t, "}");
        break;
    }
    case JSON_ARRAY:
        put(t, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            put(t, "%s", i ? ", " : "");
            yaml_flow(t, json_array_get(v, i));
        }
        put(t, "]");
        break;
    case JSON_STRING:
        if (yaml_plain(json_string_value(v)))
            put(t, "%s", json_string_value(v));
        else
            yq(t, json_string_value(v));
        break;
    case JSON_INTEGER:
        put(t, "%lld", (long long)json_integer_value(v));
        break;
    case JSON_REAL:
        put(t, "%s", num(json_real_value(v), b, sizeof b));
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        put(t, "%s", json_is_true(v) ? "true" : "false");
        break;
    case JSON_NULL:
        put(t, "null");
        break;
    }
}

static void schema_name(char *out, size_t size, const char *method, const char *suffix)
{
    snprintf(out, size, "%c%s%s", method[0] >= 'a' && method[0] <= 'z' ? method[0] - 32 : method[0],
             method + 1, suffix);
}

static void yaml_option(text *t, const gp_option_spec *s)
{
    char a[40], b[40], c[40];
    put(t, "        %s:\n", s->name);
    switch (s->type) {
    case GP_OPTION_OBJECT: {
        /* the descriptor's JSON Schema (JSON text) as one line of YAML flow,
         * the single item of an allOf so that the description can sit beside it */
        json_error_t je;
        json_t *schema = s->choices ? json_loads(s->choices, 0, &je) : NULL;
        if (!json_is_object(schema)) {
            fprintf(stderr, "gen_docs: option '%s' of an object type needs its schema as JSON "
                            "text of an object, {...}, in choices (%s)\n",
                    s->name, s->choices ? je.text : "none");
            exit(2);
        }
        put(t, "          allOf:\n            - ");
        yaml_flow(t, schema);
        put(t, "\n");
        json_decref(schema);
        break;
    }
    case GP_OPTION_BOOL:
        put(t, "          type: boolean\n          default: %s\n",
            s->default_number != 0.0 ? "true" : "false");
        break;
    case GP_OPTION_ENUM:
        put(t, "          type: string\n          enum: [");
        put_choices(t, s->choices, ", ", "\"");
        put(t, "]\n          default: ");
        yq(t, s->default_string ? s->default_string : "");
        put(t, "\n");
        break;
    case GP_OPTION_INT:
        put(t, "          type: integer\n          default: %s\n          minimum: %s\n"
               "          maximum: %s\n",
            num(s->default_number, a, sizeof a), num(s->min, b, sizeof b),
            num(s->max, c, sizeof c));
        break;
    case GP_OPTION_NUMBER:
        if (s->choices) {
            put(t, "          oneOf:\n            - {type: number, minimum: %s, maximum: %s}\n"
                   "            - {type: string, enum: [",
                num(s->min, b, sizeof b), num(s->max, c, sizeof c));
            put_choices(t, s->choices, ", ", "\"");
            put(t, "]}\n          default: ");
            if (s->default_string)
                yq(t, s->default_string);
            else
                put(t, "%s", num(s->default_number, a, sizeof a));
            put(t, "\n");
        } else {
            put(t, "          type: number\n          default: %s\n          minimum: %s\n"
                   "          maximum: %s\n",
                num(s->default_number, a, sizeof a), num(s->min, b, sizeof b),
                num(s->max, c, sizeof c));
        }
        break;
    }
    put(t, "          description: ");
    yq(t, s->help);
    put(t, "\n");
}

static void yaml_method(text *t, const gp_method *m)
{
    char name[64];
    schema_name(name, sizeof name, m->name, "Options");
    put(t, "    %s:\n      type: object\n      additionalProperties: false\n", name);
    put(t, "      description: ");
    yq(t, m->summary);
    put(t, "\n      properties:\n");
    for (size_t i = 0; i < m->n_options; i++)
        yaml_option(t, &m->options[i]);
    schema_name(name, sizeof name, m->name, "MethodInfo");
    put(t, "    %s:\n      type: object\n      description: method_info of a %s model\n",
        name, m->name);
    if (m->n_info == 0) {
        put(t, "      properties: {}\n");
        return;
    }
    put(t, "      properties:\n");
    for (size_t i = 0; i < m->n_info; i++) {
        put(t, "        %s:\n          type: %s\n          description: ", m->info[i].key,
            m->info[i].type == GP_INFO_STRING ? "string" : "number");
        yq(t, m->info[i].help);
        put(t, "\n");
    }
}

/* A schema that is any of the methods' <Method>suffix schemas: what a fit's
 * options or a model's method_info are when the method is not known (the
 * request's "method" decides which one applies). */
static void yaml_any_method(text *t, const char *schema, const char *suffix, const char *what)
{
    char name[64];
    put(t, "    %s:\n      description: \"%s\"\n      anyOf:\n", schema, what);
    for (size_t i = 0; i < gp_method_count(); i++) {
        schema_name(name, sizeof name, gp_method_at(i)->name, suffix);
        put(t, "        - $ref: \"#/components/schemas/%s\"\n", name);
    }
}

static void yaml_block(text *t)
{
    put(t, "    MethodName:\n      type: string\n      enum: [");
    for (size_t i = 0; i < gp_method_count(); i++)
        put(t, "%s%s", i ? ", " : "", gp_method_at(i)->name);
    put(t, "]\n");
    for (size_t i = 0; i < gp_method_count(); i++)
        yaml_method(t, gp_method_at(i));
    yaml_any_method(t, "MethodOptions", "Options",
                    "the options of a fit: those of its method, <Method>Options");
    yaml_any_method(t, "MethodInfo", "MethodInfo",
                    "method_info of a model: that of its method, <Method>MethodInfo; a fit with "
                    "priors or bounds adds log_prior, objective_without_prior and "
                    "objective_with_prior (as diagnostics has them)");
}

/* ---- the error catalogue ---- */

typedef struct error_row {
    int code;
    const char *symbol, *name, *meaning;
    int http, retry;
} error_row;

#define ROW(code, value, name, http, retry, meaning) {code, #code, name, meaning, http, retry},
static const error_row error_rows[] = {GP_ERROR_CATALOGUE(ROW)};
#undef ROW
#define N_ERROR_ROWS (sizeof error_rows / sizeof error_rows[0])

static void md_errors(text *t)
{
    put(t, "\n| code | HTTP | Retry-After | meaning | C code |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < N_ERROR_ROWS; i++) {
        char retry[16] = "";
        if (error_rows[i].retry > 0)
            snprintf(retry, sizeof retry, "%d s", error_rows[i].retry);
        put(t, "| `%s` | %d | %s | %s | `%s` |\n", error_rows[i].name, error_rows[i].http, retry,
            error_rows[i].meaning, error_rows[i].symbol);
    }
    put(t, "\n");
}

/* The names an HTTP client can see, each once (GP_ECANCELLED never goes out). */
static void yaml_errors(text *t)
{
    put(t, "              enum: [");
    int first = 1;
    for (size_t i = 0; i < N_ERROR_ROWS; i++) {
        int seen = error_rows[i].code == GP_ECANCELLED;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(error_rows[j].name, error_rows[i].name) == 0;
        if (!seen)
            put(t, "%s%s", first ? "" : ", ", error_rows[i].name);
        first = first && seen;
    }
    put(t, "]\n");
}

/* The scope a named key needs for each route and verb (server/routes.def). */
typedef struct scope_row {
    const char *pattern;
    int verbs, auth, scopes;
} scope_row;

#define ROUTE(id, pattern, verbs, auth, scopes, batch, shape, body, handler) \
    {pattern, verbs, auth, scopes},
static const scope_row scope_rows[] = {
#include "server/routes.def"
};
#undef ROUTE

static void md_scopes(text *t)
{
    static const struct {
        int bit, shift;
        const char *name;
    } verbs[] = {{GP_VERB_GET, 0, "GET"}, {GP_VERB_POST, 2, "POST"}, {GP_VERB_PUT, 4, "PUT"},
                 {GP_VERB_DELETE, 6, "DELETE"}};
    static const char *const names[] = {"none", "read", "write", "admin"};
    put(t, "\n| route | scope |\n|---|---|\n");
    for (size_t r = 0; r < sizeof scope_rows / sizeof scope_rows[0]; r++)
        for (size_t v = 0; v < sizeof verbs / sizeof verbs[0]; v++) {
            if (!(scope_rows[r].verbs & verbs[v].bit))
                continue;
            int sc = (scope_rows[r].scopes >> verbs[v].shift) & 3;
            put(t, "| `%s %s` | %s |\n", verbs[v].name, scope_rows[r].pattern,
                scope_rows[r].auth == GP_AUTH_OPEN ? "open (no key)" : names[sc]);
        }
    put(t, "\n");
}

/* ---- splicing ---- */

typedef struct markers {
    int yaml;                  /* 1: for .yaml files, 0: for .md files */
    const char *begin, *end;   /* line prefixes */
    void (*generate)(text *t);
} markers;

static const markers all_markers[] = {
    {0, "<!-- methods:begin", "<!-- methods:end", md_block},
    {0, "<!-- errors:begin", "<!-- errors:end", md_errors},
    {0, "<!-- scopes:begin", "<!-- scopes:end", md_scopes},
    {1, "    # methods:begin", "    # methods:end", yaml_block},
    {1, "              # errors:begin", "              # errors:end", yaml_errors},
};

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    text t = {0};
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        put(&t, "%.*s", (int)n, chunk);
    fclose(f);
    *len = t.len;
    return t.buf ? t.buf : calloc(1, 1);
}

/* Start of the line after the first line that begins with prefix, or NULL. */
static const char *after_marker(const char *s, const char *prefix)
{
    for (const char *p = s; p && *p;) {
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            const char *nl = strchr(p, '\n');
            return nl ? nl + 1 : p + strlen(p);
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return NULL;
}

static const char *line_start_of(const char *s, const char *prefix)
{
    for (const char *p = s; p && *p;) {
        if (strncmp(p, prefix, strlen(prefix)) == 0)
            return p;
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return NULL;
}

/* Replace the block of mk in *doc (length *len) by the generated text; 1 when
 * it changed, 0 when it was current, -1 when doc has no such block. */
static int splice(char **doc, size_t *len, const markers *mk)
{
    const char *body = after_marker(*doc, mk->begin);
    const char *end = body ? line_start_of(body, mk->end) : NULL;
    if (end == NULL)
        return -1;
    text gen = {0};
    mk->generate(&gen);
    size_t have = (size_t)(end - body);
    if (have == gen.len && memcmp(body, gen.buf, have) == 0) {
        free(gen.buf);
        return 0;
    }
    text out = {0};
    put(&out, "%.*s", (int)(body - *doc), *doc);
    put(&out, "%.*s", (int)gen.len, gen.buf ? gen.buf : "");
    put(&out, "%.*s", (int)(*len - (size_t)(end - *doc)), end);
    free(gen.buf);
    free(*doc);
    *doc = out.buf;
    *len = out.len;
    return 1;
}

static int write_file(const char *path, const char *doc, size_t len)
{
    FILE *f = fopen(path, "wb");
    int ok = f != NULL && fwrite(doc, 1, len, f) == len;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok)
        fprintf(stderr, "gen_docs: cannot write %s\n", path);
    return ok ? 0 : 2;
}

static int process(const char *path, int write)
{
    int yaml = ends_with(path, ".yaml") || ends_with(path, ".yml");
    size_t len = 0;
    char *doc = read_file(path, &len);
    if (doc == NULL) {
        fprintf(stderr, "gen_docs: cannot read %s\n", path);
        return 2;
    }
    int blocks = 0, changed = 0;
    for (size_t i = 0; i < sizeof all_markers / sizeof all_markers[0]; i++) {
        if (all_markers[i].yaml != yaml)
            continue;
        int r = splice(&doc, &len, &all_markers[i]);
        blocks += r >= 0;
        changed += r > 0;
    }
    int rc = 0;
    if (blocks == 0) {
        fprintf(stderr, "gen_docs: %s has no generated block (marker lines)\n", path);
        rc = 2;
    } else if (changed && !write) {
        fprintf(stderr, "gen_docs: generated text in %s is stale: run `make docs`\n", path);
        rc = 1;
    } else if (changed) {
        rc = write_file(path, doc, len);
        if (rc == 0)
            printf("gen_docs: wrote %s\n", path);
    }
    free(doc);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "--write") != 0 && strcmp(argv[1], "--check") != 0)) {
        fprintf(stderr, "usage: gen_docs --write|--check FILE...\n");
        return 2;
    }
    int write = strcmp(argv[1], "--write") == 0, rc = 0;
    for (int i = 2; i < argc; i++) {
        int r = process(argv[i], write);
        rc = r > rc ? r : rc;
    }
    return rc;
}
