/* The portable model file (docs/design/model-file.md): one JSON text that
 * carries a stored version whole, so another daemon (on another database,
 * SQLite or PostgreSQL) stores it and answers bit-identically.
 *
 * Numbers that must survive exactly (the state's arrays) travel as base64 of
 * little-endian IEEE-754 float64, never as decimal text: decimal would need
 * every reader's parser to round correctly, and base64 costs 4/3 of the raw
 * bytes where 17-digit decimals cost about 3x. The SHA-256 covers every byte
 * before the trailer ',"sha256":"<hex>"}', so any change to the file (a
 * flipped byte in an array, an edited option) is refused on import. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

#define TRAILER_KEY ",\"sha256\":\""
#define TRAILER_KEY_LEN (sizeof TRAILER_KEY - 1)

void gp_model_file_free(gp_model_file *f)
{
    if (f == NULL)
        return;
    free(f->spec);
    free(f->info);
    gp_state_free(&f->state);
    memset(f, 0, sizeof *f);
    gp_state_init(&f->state);
}

/* ---- base64 (RFC 4648, standard alphabet, padded) of little-endian doubles ---- */
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void le_bytes(double v, unsigned char out[8])
{
    uint64_t u;
    memcpy(&u, &v, 8);
    for (int k = 0; k < 8; k++)
        out[k] = (unsigned char)(u >> (8 * k));
}

static double from_le(const unsigned char in[8])
{
    uint64_t u = 0;
    for (int k = 0; k < 8; k++)
        u |= (uint64_t)in[k] << (8 * k);
    double v;
    memcpy(&v, &u, 8);
    return v;
}

static void b64_group(const unsigned char *s, size_t n, char *o)
{
    uint32_t w = (uint32_t)s[0] << 16 | (n > 1 ? (uint32_t)s[1] << 8 : 0) | (n > 2 ? s[2] : 0);
    o[0] = B64[w >> 18 & 63];
    o[1] = B64[w >> 12 & 63];
    o[2] = n > 1 ? B64[w >> 6 & 63] : '=';
    o[3] = n > 2 ? B64[w & 63] : '=';
}

/* Append the base64 of v[0..n) as little-endian float64 bytes. */
static void put_base64_doubles(gp_buf *b, const double *v, size_t n)
{
    size_t bytes = n * 8, out_len = (bytes + 2) / 3 * 4;
    if (gp_buf_reserve(b, out_len + 1))
        return;
    char *o = b->data + b->len;
    unsigned char carry[3];
    size_t have = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char le[8];
        le_bytes(v[i], le);
        for (int k = 0; k < 8; k++) {
            carry[have++] = le[k];
            if (have == 3) {
                b64_group(carry, 3, o);
                o += 4;
                have = 0;
            }
        }
    }
    if (have)
        b64_group(carry, have, o);
    b->len += out_len;
    b->data[b->len] = '\0';
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decode padded base64 text into exactly count doubles (malloc'ed *out).
 * GP_EDATA naming field when it is not base64 or not count*8 bytes. */
static int decode_doubles(const char *text, size_t len, size_t count, const char *field,
                          double **out, gp_error *err)
{
    *out = NULL;
    size_t bytes = count * 8;
    if (len != (bytes + 2) / 3 * 4)
        return gp_error_set(err, GP_EDATA, field,
                            "holds %zu base64 characters where rows x cols = %zu doubles take "
                            "%zu: the file is damaged",
                            len, count, (bytes + 2) / 3 * 4);
    unsigned char *raw = malloc(bytes ? bytes + 2 : 1);
    if (raw == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    size_t w = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            unsigned char c = (unsigned char)text[i + k];
            v[k] = c == '=' && i + 4 == len && k >= 2 ? (pad++, 0) : b64_value(c);
            if (v[k] < 0 || (pad && c != '=')) {
                free(raw);
                return gp_error_set(err, GP_EDATA, field,
                                    "is not base64 (character %zu): the file is damaged", i + k);
            }
        }
        uint32_t g = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        raw[w++] = (unsigned char)(g >> 16);
        if (pad < 2)
            raw[w++] = (unsigned char)(g >> 8);
        if (pad < 1)
            raw[w++] = (unsigned char)g;
    }
    if (w != bytes) {
        free(raw);
        return gp_error_set(err, GP_EDATA, field, "decodes to %zu bytes, not %zu", w, bytes);
    }
    double *d = malloc(count ? count * sizeof *d : sizeof *d);
    if (d == NULL) {
        free(raw);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; i < count; i++)
        d[i] = from_le(raw + 8 * i);
    free(raw);
    *out = d;
    return GP_OK;
}

/* ---- writing ---- */

/* A stored JSON text as a value (NULL: corrupt). */
static json_t *stored_json(const char *text)
{
    json_error_t je;
    return text ? json_loads(text, 0, &je) : NULL;
}

/* The names the model carries ("outputs", and feature/target names once fits
 * keep them), gathered in one block so readers need not know where each lives. */
static json_t *names_block(json_t *info, json_t *spec)
{
    static const char *const keys[] = {"outputs", "feature_names", "target_names", "inputs",
                                       NULL};
    json_t *names = json_object();
    for (size_t i = 0; names && keys[i]; i++) {
        json_t *v = json_object_get(info, keys[i]);
        if (v == NULL)
            v = json_object_get(spec, keys[i]);
        if (json_is_array(v))
            json_object_set(names, keys[i], v);
    }
    return names;
}

/* Everything but the arrays and the checksum, as a JSON object. */
static json_t *file_head(const gp_model_meta *meta, const gp_model_file_source *src,
                         gp_error *err)
{
    json_t *spec = stored_json(meta->spec), *info = stored_json(meta->info);
    json_t *o = json_object();
    if (!json_is_object(spec) || !json_is_object(info) || o == NULL) {
        json_decref(spec);
        json_decref(info);
        json_decref(o);
        gp_error_set(err, GP_EINTERNAL, NULL, "model '%s' version %d has corrupt metadata",
                     meta->name, meta->version);
        return NULL;
    }
    json_t *lik = json_object_get(spec, "likelihood");
    if (lik == NULL)
        lik = json_object_get(info, "likelihood");
    json_object_set_new(o, "format", json_string(GP_MODEL_FILE_FORMAT));
    json_object_set_new(o, "format_version", json_integer(GP_MODEL_FILE_VERSION));
    json_object_set_new(o, "method", json_string(meta->method));
    json_object_set_new(o, "likelihood", lik ? json_incref(lik) : json_string("gaussian"));
    json_t *source = json_object();
    json_object_set_new(source, "name", json_string(meta->name));
    json_object_set_new(source, "version", json_integer(meta->version));
    json_object_set_new(source, "created_at", json_string(meta->created_at));
    json_object_set_new(o, "source", source);
    json_object_set_new(o, "n_train", json_integer((json_int_t)src->n_train));
    json_object_set_new(o, "input_dim", json_integer((json_int_t)src->input_dim));
    json_object_set_new(o, "observations",
                        src->obs_seq ? json_pack("{s:I}", "seq", (json_int_t)src->obs_seq)
                                     : json_null());
    json_object_set_new(o, "names", names_block(info, spec));
    json_object_set_new(o, "fit_request", spec);
    json_object_set_new(o, "info", info);
    return o;
}

static void put_array(gp_buf *b, const gp_named_array *a)
{
    gp_buf_puts(b, "{\"name\":");
    gp_buf_json_string(b, a->name);
    gp_buf_printf(b, ",\"rows\":%zu,\"cols\":%zu,\"data\":\"", a->rows, a->cols);
    put_base64_doubles(b, a->data, a->rows * a->cols);
    gp_buf_puts(b, "\"}");
}

int gp_model_file_write(const gp_model_meta *meta, const gp_model_file_source *src,
                        const gp_state *st, gp_buf *b, gp_error *err)
{
    json_t *head = file_head(meta, src, err);
    if (head == NULL)
        return err->code;
    char *text = json_dumps(head, GP_JSON_FLAGS);
    json_decref(head);
    if (text == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    size_t n = strlen(text); /* "{...}": reopened to append the arrays */
    gp_buf_put(b, text, n - 1);
    free(text);
    gp_buf_puts(b, ",\"arrays\":[");
    for (size_t i = 0; i < st->count; i++) {
        if (i)
            gp_buf_puts(b, ",");
        put_array(b, &st->arrays[i]);
    }
    gp_buf_puts(b, "]");
    if (b->failed)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory writing the model file");
    char hex[65];
    gp_sha256 sh;
    gp_sha256_init(&sh);
    gp_sha256_update(&sh, b->data, b->len);
    gp_sha256_update(&sh, "}", 1);
    gp_sha256_hex(&sh, hex);
    gp_buf_printf(b, TRAILER_KEY "%s\"}\n", hex);
    return b->failed ? gp_error_set(err, GP_ENOMEM, NULL, "out of memory writing the model file")
                     : GP_OK;
}

/* ---- reading ---- */

/* Where the trailer ',"sha256":"<64 hex>"}' starts (trailing white space
 * allowed after it), and its hex; -1 when the text does not end so. */
static long find_trailer(const char *text, size_t len, char hex[65])
{
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
        len--;
    size_t tail = TRAILER_KEY_LEN + 64 + 2;
    if (len < tail + 1 || memcmp(text + len - 2, "\"}", 2) != 0)
        return -1;
    size_t at = len - tail;
    if (memcmp(text + at, TRAILER_KEY, TRAILER_KEY_LEN) != 0)
        return -1;
    for (size_t i = 0; i < 64; i++) {
        char c = text[at + TRAILER_KEY_LEN + i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return -1;
        hex[i] = c;
    }
    hex[64] = '\0';
    return (long)at;
}

static int check_format(json_t *o, gp_error *err)
{
    const char *format = json_string_value(json_object_get(o, "format"));
    if (format == NULL || strcmp(format, GP_MODEL_FILE_FORMAT) != 0)
        return gp_error_set(err, GP_EDATA, "format",
                            "is not \"" GP_MODEL_FILE_FORMAT "\": not a gpserve model file");
    json_t *v = json_object_get(o, "format_version");
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return gp_error_set(err, GP_EDATA, "format_version", "must be an integer >= 1");
    if (json_integer_value(v) > GP_MODEL_FILE_VERSION)
        return gp_error_set(err, GP_EDATA, "format_version",
                            "is %lld, newer than this build reads (%d): import it with a newer "
                            "gpserve",
                            (long long)json_integer_value(v), GP_MODEL_FILE_VERSION);
    return GP_OK;
}

static int check_sum(const char *text, size_t len, gp_error *err)
{
    char want[65], got[65];
    long at = find_trailer(text, len, want);
    if (at < 0)
        return gp_error_set(err, GP_EDATA, "sha256",
                            "the file does not end with its \"sha256\" member as exported: it "
                            "is truncated or was rewritten");
    gp_sha256 sh;
    gp_sha256_init(&sh);
    gp_sha256_update(&sh, text, (size_t)at);
    gp_sha256_update(&sh, "}", 1);
    gp_sha256_hex(&sh, got);
    if (strcmp(want, got) != 0)
        return gp_error_set(err, GP_EDATA, "sha256",
                            "checksum mismatch (the content hashes to %s): the file was altered "
                            "or damaged after export",
                            got);
    return GP_OK;
}

static int get_count(json_t *o, const char *key, const char *field, size_t *out, gp_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return gp_error_set(err, GP_EDATA, field, "must be an integer >= 0");
    *out = (size_t)json_integer_value(v);
    return GP_OK;
}

static int read_array(json_t *a, size_t i, gp_state *st, gp_error *err)
{
    char field[GP_ERROR_FIELD_LEN];
    snprintf(field, sizeof field, "arrays[%zu]", i);
    const char *name = json_string_value(json_object_get(a, "name"));
    json_t *data = json_object_get(a, "data");
    size_t rows = 0, cols = 0;
    if (!json_is_object(a) || name == NULL || name[0] == '\0' ||
        strlen(name) >= GP_STATE_NAME_LEN || !json_is_string(data))
        return gp_error_set(err, GP_EDATA, field,
                            "must be {\"name\", \"rows\", \"cols\", \"data\"} with a name of "
                            "1..%d characters",
                            GP_STATE_NAME_LEN - 1);
    char sub[GP_ERROR_FIELD_LEN];
    snprintf(sub, sizeof sub, "arrays[%zu].rows", i);
    int rc = get_count(a, "rows", sub, &rows, err);
    snprintf(sub, sizeof sub, "arrays[%zu].cols", i);
    if (rc == GP_OK)
        rc = get_count(a, "cols", sub, &cols, err);
    if (rc == GP_OK && cols && rows > SIZE_MAX / 16 / cols)
        rc = gp_error_set(err, GP_EDATA, field, "is too large");
    double *v = NULL;
    snprintf(sub, sizeof sub, "arrays[%zu].data", i);
    if (rc == GP_OK)
        rc = decode_doubles(json_string_value(data), json_string_length(data), rows * cols, sub,
                            &v, err);
    if (rc == GP_OK && (rc = gp_state_put_owned(st, name, rows, cols, v, err)) != GP_OK)
        gp_error_set(err, GP_EDATA, field, "repeats the name '%s'", name);
    return rc;
}

static int read_body(json_t *o, gp_model_file *f, gp_error *err)
{
    const char *method = json_string_value(json_object_get(o, "method"));
    if (method == NULL || strlen(method) > GP_METHOD_NAME_MAX)
        return gp_error_set(err, GP_EDATA, "method", "must be a method name");
    f->method = gp_method_find(method);
    if (f->method == NULL)
        return gp_error_set(err, GP_EUNSUPPORTED, "method",
                            "'%s' is not a method of this build (GET /v1/methods lists them)",
                            method);
    json_t *source = json_object_get(o, "source");
    const char *name = json_string_value(json_object_get(source, "name"));
    if (name == NULL || !gp_api_valid_name(name))
        return gp_error_set(err, GP_EDATA, "source.name", "must be a model name");
    snprintf(f->source_name, sizeof f->source_name, "%s", name);
    json_t *spec = json_object_get(o, "fit_request"), *info = json_object_get(o, "info");
    if (!json_is_object(spec))
        return gp_error_set(err, GP_EDATA, "fit_request", "must be an object");
    if (!json_is_object(info))
        return gp_error_set(err, GP_EDATA, "info", "must be an object");
    int rc = get_count(o, "n_train", "n_train", &f->n_train, err);
    if (rc == GP_OK)
        rc = get_count(o, "input_dim", "input_dim", &f->input_dim, err);
    json_t *arrays = json_object_get(o, "arrays");
    if (rc == GP_OK && !json_is_array(arrays))
        rc = gp_error_set(err, GP_EDATA, "arrays", "must be an array");
    for (size_t i = 0; rc == GP_OK && i < json_array_size(arrays); i++)
        rc = read_array(json_array_get(arrays, i), i, &f->state, err);
    if (rc)
        return rc;
    json_t *seq = json_object_get(json_object_get(o, "observations"), "seq");
    f->obs_seq = json_is_integer(seq) ? (uint64_t)json_integer_value(seq) : 0;
    f->spec = json_dumps(spec, GP_JSON_FLAGS);
    f->info = json_dumps(info, GP_JSON_FLAGS);
    if (f->spec == NULL || f->info == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    gp_error bad;
    if (gp_state_check_finite(&f->state, &bad) != GP_OK)
        return gp_error_set(err, GP_EDATA, bad.field, "holds a non-finite number");
    return GP_OK;
}

int gp_model_file_read(const char *text, size_t len, gp_model_file *f, gp_error *err)
{
    memset(f, 0, sizeof *f);
    gp_state_init(&f->state);
    if (text == NULL || len == 0)
        return gp_error_set(err, GP_EDATA, "body", "is empty: send the exported model file");
    json_error_t je;
    json_t *o = json_loadb(text, len, 0, &je);
    char hex[65];
    if (!json_is_object(o)) {
        json_decref(o);
        if (find_trailer(text, len, hex) < 0)
            return gp_error_set(err, GP_EDATA, "body",
                                "is not a whole model file (truncated: it does not end with "
                                "its \"sha256\" member)");
        return gp_error_set(err, GP_EDATA, "body",
                            "is corrupt: not a JSON object (line %d, column %d: %s)", je.line,
                            je.column, je.text);
    }
    int rc = check_format(o, err);
    if (rc == GP_OK)
        rc = check_sum(text, len, err);
    if (rc == GP_OK)
        rc = read_body(o, f, err);
    json_decref(o);
    if (rc)
        gp_model_file_free(f);
    return rc;
}
