/* The portable model file (docs/design/model-file.md), reading: every check
 * an import makes before it stores anything. The header is small JSON; the
 * arrays are never parsed as text: each is checked by its byte range and
 * copied into an aligned buffer. Checks run in the order that names the
 * most useful field: the container's shape (truncated, header length,
 * ranges), the format, the checksum, then the model and the arrays. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

/* safetensors' own limit on a header (its readers refuse larger ones): a
 * length past it is a damaged or foreign file, not a big model. */
#define HEADER_MAX ((uint64_t)100 << 20)

/* One array of the header, as its byte range says. */
typedef struct tensor {
    const char *name; /* the header's key (in the parsed header) */
    size_t rows, cols;
    uint64_t begin, end;
} tensor;

/* What the container holds, the header parsed. */
typedef struct container {
    json_t *header;
    const unsigned char *data; /* the bytes after the header */
    uint64_t data_len;
    tensor *t;
    size_t count;
} container;

static uint64_t get_u64(const unsigned char *in)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v |= (uint64_t)in[k] << (8 * k);
    return v;
}

static void get_le_doubles(double *out, const unsigned char *in, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n)
        memcpy(out, in, n * sizeof *out);
#else
    for (size_t i = 0; i < n; i++) {
        uint64_t u = get_u64(in + 8 * i);
        memcpy(&out[i], &u, 8);
    }
#endif
}

/* The 8-byte length and the header's JSON. */
static int open_header(const unsigned char *b, size_t len, container *c, gp_error *err)
{
    if (b == NULL || len == 0)
        return gp_error_set(err, GP_EDATA, "body", "is empty: send the exported model file");
    if (len < 8)
        return gp_error_set(err, GP_EDATA, "body",
                            "is %zu bytes, shorter than a model file's 8-byte header length: "
                            "truncated",
                            len);
    uint64_t n = get_u64(b);
    if (n < 2 || n > HEADER_MAX)
        return gp_error_set(err, GP_EDATA, "header_length",
                            "is %llu: a model file's header is 2 bytes to 100 MiB (not a "
                            "gpserve model file, or damaged)",
                            (unsigned long long)n);
    if (n > len - 8)
        return gp_error_set(err, GP_EDATA, "body",
                            "ends inside the header (%zu of %llu bytes): truncated", len - 8,
                            (unsigned long long)n);
    json_error_t je;
    c->header = json_loadb((const char *)b + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(c->header))
        return gp_error_set(err, GP_EDATA, "header",
                            "is not a JSON object (column %d: %s): the file is damaged",
                            je.column, je.text);
    c->data = b + 8 + n;
    c->data_len = len - 8 - n;
    return GP_OK;
}

static const char *meta_string(const container *c, const char *key)
{
    return json_string_value(json_object_get(json_object_get(c->header, "__metadata__"), key));
}

static int check_format(const container *c, gp_error *err)
{
    const char *format = meta_string(c, "format");
    if (format == NULL || strcmp(format, GP_MODEL_FILE_FORMAT) != 0)
        return gp_error_set(err, GP_EDATA, "format",
                            "__metadata__.format is not \"" GP_MODEL_FILE_FORMAT
                            "\": not a gpserve model file");
    const char *v = meta_string(c, "format_version");
    size_t digits = v ? strspn(v, "0123456789") : 0;
    if (v == NULL || digits == 0 || digits > 9 || v[digits] != '\0' || atoi(v) < 1)
        return gp_error_set(err, GP_EDATA, "format_version",
                            "must be the decimal text of an integer >= 1");
    if (atoi(v) > GP_MODEL_FILE_VERSION)
        return gp_error_set(err, GP_EDATA, "format_version",
                            "is %s, newer than this build reads (%d): import it with a newer "
                            "gpserve",
                            v, GP_MODEL_FILE_VERSION);
    return GP_OK;
}

/* A JSON integer in [0, max]. */
static int get_uint(json_t *v, uint64_t max, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (uint64_t)json_integer_value(v) > max)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* One array entry of the header: {"dtype":"F64","shape":[cols,rows],
 * "data_offsets":[begin,end]} with end - begin = 8 * rows * cols. */
static int read_tensor(const char *name, json_t *v, tensor *t, gp_error *err)
{
    char field[GP_ERROR_FIELD_LEN];
    if (strlen(name) == 0 || strlen(name) >= GP_STATE_NAME_LEN)
        return gp_error_set(err, GP_EDATA, "header",
                            "names an array of %zu characters (1..%d)", strlen(name),
                            GP_STATE_NAME_LEN - 1);
    t->name = name;
    const char *dtype = json_string_value(json_object_get(v, "dtype"));
    snprintf(field, sizeof field, "%s.dtype", name);
    if (dtype == NULL || strcmp(dtype, "F64") != 0)
        return gp_error_set(err, GP_EDATA, field, "must be \"F64\" (gpserve's arrays are float64)");
    json_t *shape = json_object_get(v, "shape"), *off = json_object_get(v, "data_offsets");
    uint64_t cols = 0, rows = 0, begin = 0, end = 0;
    snprintf(field, sizeof field, "%s.shape", name);
    if (json_array_size(shape) != 2 || get_uint(json_array_get(shape, 0), UINT32_MAX, &cols) ||
        get_uint(json_array_get(shape, 1), UINT32_MAX, &rows))
        return gp_error_set(err, GP_EDATA, field, "must be [cols, rows], two integers >= 0");
    if (cols && rows > (uint64_t)INT64_MAX / 8 / cols)
        return gp_error_set(err, GP_EDATA, field, "is larger than any file");
    snprintf(field, sizeof field, "%s.data_offsets", name);
    if (json_array_size(off) != 2 || get_uint(json_array_get(off, 0), INT64_MAX, &begin) ||
        get_uint(json_array_get(off, 1), INT64_MAX, &end) || end < begin)
        return gp_error_set(err, GP_EDATA, field,
                            "must be [begin, end], integers with 0 <= begin <= end");
    if (end - begin != 8 * rows * cols)
        return gp_error_set(err, GP_EDATA, field,
                            "spans %llu bytes where a %llu x %llu float64 array takes %llu",
                            (unsigned long long)(end - begin), (unsigned long long)rows,
                            (unsigned long long)cols, (unsigned long long)(8 * rows * cols));
    t->rows = (size_t)rows;
    t->cols = (size_t)cols;
    t->begin = begin;
    t->end = end;
    return GP_OK;
}

static int by_begin(const void *a, const void *b)
{
    const tensor *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* The arrays, in file order, tiling the data bytes exactly: no overlap, no
 * gap, nothing after the last (the safetensors rule). */
static int read_tensors(container *c, gp_error *err)
{
    size_t n = json_object_size(c->header);
    c->t = calloc(n ? n : 1, sizeof *c->t);
    if (c->t == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(c->header, key, v)
    {
        if (strcmp(key, "__metadata__") == 0)
            continue;
        int rc = read_tensor(key, v, &c->t[c->count], err);
        if (rc)
            return rc;
        c->count++;
    }
    qsort(c->t, c->count, sizeof *c->t, by_begin);
    uint64_t at = 0;
    for (size_t i = 0; i < c->count; i++) {
        if (c->t[i].begin != at) {
            char field[GP_ERROR_FIELD_LEN];
            snprintf(field, sizeof field, "%s.data_offsets", c->t[i].name);
            return gp_error_set(err, GP_EDATA, field,
                                "begins at byte %llu where the previous array ends at %llu: "
                                "arrays must tile the data without %s",
                                (unsigned long long)c->t[i].begin, (unsigned long long)at,
                                c->t[i].begin < at ? "overlap" : "gaps");
        }
        at = c->t[i].end;
    }
    /* the last array ends past the file: it was cut short (or its end is
     * out of range, which the checksum could not tell apart) */
    if (at > c->data_len)
        return gp_error_set(err, GP_EDATA, "body",
                            "is truncated: its arrays end at byte %llu after the header, the "
                            "file holds %llu",
                            (unsigned long long)at, (unsigned long long)c->data_len);
    if (at != c->data_len)
        return gp_error_set(err, GP_EDATA, "data_offsets",
                            "the arrays cover %llu of the %llu bytes after the header: the "
                            "file has bytes no array owns",
                            (unsigned long long)at, (unsigned long long)c->data_len);
    return GP_OK;
}

/* The sha256 value's place in the header (-1: absent or not 64 hex). */
static long sum_place(const unsigned char *b, size_t header_len, const char *hex)
{
    if (hex == NULL || strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64)
        return -1;
    const unsigned char *h = b + 8;
    for (size_t i = 0; i + 64 <= header_len; i++)
        if (h[i] == (unsigned char)hex[0] && memcmp(h + i, hex, 64) == 0)
            return (long)(8 + i);
    return -1;
}

/* SHA-256 of the whole file with the sha256 value's 64 hex digits read as
 * ASCII '0's equals that value. */
static int check_sum(const unsigned char *b, size_t len, const container *c, gp_error *err)
{
    const char *want = meta_string(c, "sha256");
    long at = sum_place(b, len - (size_t)c->data_len - 8, want);
    if (at < 0)
        return gp_error_set(err, GP_EDATA, "sha256",
                            "__metadata__.sha256 must be 64 lowercase hex digits");
    static const char zeros[64] = "0000000000000000000000000000000000000000000000000000000000000000";
    char got[65];
    gp_sha256 sh;
    gp_sha256_init(&sh);
    gp_sha256_update(&sh, b, (size_t)at);
    gp_sha256_update(&sh, zeros, 64);
    gp_sha256_update(&sh, b + at + 64, len - (size_t)at - 64);
    gp_sha256_hex(&sh, got);
    if (strcmp(want, got) != 0)
        return gp_error_set(err, GP_EDATA, "sha256",
                            "checksum mismatch (the content hashes to %s): the file was altered "
                            "or damaged after export",
                            got);
    return GP_OK;
}

static int get_count(json_t *o, const char *key, size_t *out, gp_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return gp_error_set(err, GP_EDATA, key, "must be an integer >= 0");
    *out = (size_t)json_integer_value(v);
    return GP_OK;
}

/* __metadata__.model: method, source, fit request, info, sizes, log position. */
static int read_model(json_t *o, gp_model_file *f, gp_error *err)
{
    const char *method = json_string_value(json_object_get(o, "method"));
    if (method == NULL || strlen(method) > GP_METHOD_NAME_MAX)
        return gp_error_set(err, GP_EDATA, "method", "must be a method name");
    f->method = gp_method_find(method);
    if (f->method == NULL)
        return gp_error_set(err, GP_EUNSUPPORTED, "method",
                            "'%s' is not a method of this build (GET /v1/methods lists them)",
                            method);
    const char *name = json_string_value(json_object_get(json_object_get(o, "source"), "name"));
    if (name == NULL || !gp_api_valid_name(name))
        return gp_error_set(err, GP_EDATA, "source.name", "must be a model name");
    snprintf(f->source_name, sizeof f->source_name, "%s", name);
    json_t *spec = json_object_get(o, "fit_request"), *info = json_object_get(o, "info");
    if (!json_is_object(spec))
        return gp_error_set(err, GP_EDATA, "fit_request", "must be an object");
    if (!json_is_object(info))
        return gp_error_set(err, GP_EDATA, "info", "must be an object");
    int rc = get_count(o, "n_train", &f->n_train, err);
    if (rc == GP_OK)
        rc = get_count(o, "input_dim", &f->input_dim, err);
    if (rc)
        return rc;
    json_t *seq = json_object_get(json_object_get(o, "observations"), "seq");
    f->obs_seq = json_is_integer(seq) ? (uint64_t)json_integer_value(seq) : 0;
    f->spec = json_dumps(spec, GP_JSON_FLAGS);
    f->info = json_dumps(info, GP_JSON_FLAGS);
    if (f->spec == NULL || f->info == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    return GP_OK;
}

static int read_model_text(const container *c, gp_model_file *f, gp_error *err)
{
    const char *text = meta_string(c, "model");
    json_error_t je;
    json_t *o = text ? json_loads(text, 0, &je) : NULL;
    int rc = json_is_object(o) ? read_model(o, f, err)
                               : gp_error_set(err, GP_EDATA, "model",
                                              "__metadata__.model must be the JSON text of an "
                                              "object");
    json_decref(o);
    return rc;
}

/* The arrays into the state, in file order (the order they were exported). */
static int read_arrays(const container *c, gp_state *st, gp_error *err)
{
    for (size_t i = 0; i < c->count; i++) {
        const tensor *t = &c->t[i];
        size_t n = t->rows * t->cols;
        double *v = malloc(n ? n * sizeof *v : sizeof *v);
        if (v == NULL)
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        get_le_doubles(v, c->data + t->begin, n);
        if (gp_state_put_owned(st, t->name, t->rows, t->cols, v, err) != GP_OK)
            return gp_error_set(err, GP_EDATA, t->name, "is in the header twice");
    }
    gp_error bad;
    if (gp_state_check_finite(st, &bad) != GP_OK)
        return gp_error_set(err, GP_EDATA, bad.field, "holds a non-finite number");
    return GP_OK;
}

int gp_model_file_read(const char *body, size_t len, gp_model_file *f, gp_error *err)
{
    memset(f, 0, sizeof *f);
    gp_state_init(&f->state);
    const unsigned char *b = (const unsigned char *)body;
    container c;
    memset(&c, 0, sizeof c);
    int rc = open_header(b, len, &c, err);
    if (rc == GP_OK)
        rc = check_format(&c, err);
    if (rc == GP_OK)
        rc = read_tensors(&c, err);
    if (rc == GP_OK)
        rc = check_sum(b, len, &c, err);
    if (rc == GP_OK)
        rc = read_model_text(&c, f, err);
    if (rc == GP_OK)
        rc = read_arrays(&c, &f->state, err);
    free(c.t);
    json_decref(c.header);
    if (rc)
        gp_model_file_free(f);
    return rc;
}
