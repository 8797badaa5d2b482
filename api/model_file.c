/* The portable model file (docs/design/model-file.md), writing: a
 * safetensors container (https://huggingface.co/docs/safetensors) that
 * carries a stored version whole, so another daemon (on another database,
 * SQLite or PostgreSQL) stores it and answers bit-identically.
 *
 *   8 bytes   N, little-endian u64
 *   N bytes   a JSON header: "__metadata__" (gpserve's description: format,
 *             format_version, model = the JSON text of everything that is not
 *             an array, sha256) and per array {"dtype":"F64","shape":[cols,rows],
 *             "data_offsets":[begin,end]}; padded with spaces to a multiple of 8
 *   the rest  the arrays' little-endian float64 bytes, back to back in the
 *             state's order
 *
 * Why binary: the arrays are 1.0x their bytes (base64 was 1.33x), nothing
 * parses them as text (a 20,000-point exact model's JSON file spent 38 s in
 * jansson and 22 s in base64), every double is 8-aligned in the file (mmap or
 * numpy.frombuffer take it as is), and numpy/safetensors open it. The
 * SHA-256 is of the whole file with its own 64 hex digits read as '0's, so it
 * is computed in one pass while writing and checked in one pass on reading. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

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

static void put_u64(unsigned char *out, uint64_t v)
{
    for (int k = 0; k < 8; k++)
        out[k] = (unsigned char)(v >> (8 * k));
}

/* n doubles as little-endian bytes: a copy on a little-endian host (every one
 * gpserve runs on), byte by byte elsewhere. */
static void put_le_doubles(unsigned char *out, const double *v, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n)
        memcpy(out, v, n * sizeof *v);
#else
    for (size_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, &v[i], 8);
        put_u64(out + 8 * i, u);
    }
#endif
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

/* Everything but the arrays, the format and the checksum, as a JSON object
 * (__metadata__.model). */
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

/* The zeros the checksum is computed over, replaced by its hex afterwards. */
#define SUM_ZEROS "0000000000000000000000000000000000000000000000000000000000000000"

/* The header object: __metadata__ first, then the arrays in the state's
 * order with their byte ranges (*data_len: the bytes after the header). */
static json_t *header_object(const char *model_text, const gp_state *st, size_t *data_len)
{
    json_t *h = json_object(), *meta = json_object();
    char version[16];
    snprintf(version, sizeof version, "%d", GP_MODEL_FILE_VERSION);
    json_object_set_new(meta, "format", json_string(GP_MODEL_FILE_FORMAT));
    json_object_set_new(meta, "format_version", json_string(version));
    json_object_set_new(meta, "model", json_string(model_text));
    json_object_set_new(meta, "sha256", json_string(SUM_ZEROS));
    json_object_set_new(h, "__metadata__", meta);
    size_t at = 0;
    for (size_t i = 0; i < st->count; i++) {
        const gp_named_array *a = &st->arrays[i];
        size_t bytes = a->rows * a->cols * 8;
        /* shape [cols, rows]: the row-major reading of a column-major array
         * is its transpose (X_train, d x n in gpserve, reads as n x d) */
        json_object_set_new(h, a->name,
                            json_pack("{s:s, s:[I,I], s:[I,I]}", "dtype", "F64", "shape",
                                      (json_int_t)a->cols, (json_int_t)a->rows, "data_offsets",
                                      (json_int_t)at, (json_int_t)(at + bytes)));
        at += bytes;
    }
    *data_len = at;
    return h;
}

/* The header's JSON text, padded with spaces so the arrays start 8-aligned. */
static char *header_text(const gp_model_meta *meta, const gp_model_file_source *src,
                         const gp_state *st, size_t *text_len, size_t *data_len, gp_error *err)
{
    json_t *model = file_head(meta, src, err);
    if (model == NULL)
        return NULL;
    char *model_text = json_dumps(model, GP_JSON_FLAGS);
    json_decref(model);
    json_t *h = model_text ? header_object(model_text, st, data_len) : NULL;
    free(model_text);
    char *text = h ? json_dumps(h, GP_JSON_FLAGS | JSON_PRESERVE_ORDER) : NULL;
    json_decref(h);
    size_t n = text ? strlen(text) : 0, padded = (8 + n + 7) / 8 * 8 - 8;
    char *out = text ? realloc(text, padded + 1) : NULL;
    if (out == NULL) {
        free(text);
        gp_error_set(err, GP_ENOMEM, NULL, "out of memory writing the model file");
        return NULL;
    }
    memset(out + n, ' ', padded - n);
    out[padded] = '\0';
    *text_len = padded;
    return out;
}

int gp_model_file_write(const gp_model_meta *meta, const gp_model_file_source *src,
                        const gp_state *st, gp_buf *b, gp_error *err)
{
    size_t hlen = 0, dlen = 0;
    char *header = header_text(meta, src, st, &hlen, &dlen, err);
    if (header == NULL)
        return err->code;
    /* the zeros are the last "sha256":"000..." of the header: the model text
     * inside it is a JSON string, whose quotes are escaped */
    char *zeros = strstr(header, "\"sha256\":\"" SUM_ZEROS "\"");
    size_t total = 8 + hlen + dlen;
    if (zeros == NULL || gp_buf_reserve(b, total + 1)) {
        free(header);
        return gp_error_set(err, zeros ? GP_ENOMEM : GP_EINTERNAL, NULL,
                            zeros ? "out of memory writing the model file (%zu bytes)"
                                  : "the model file's header lost its checksum (%zu bytes)",
                            total);
    }
    size_t sum_at = b->len + 8 + (size_t)(zeros - header) + 10;
    unsigned char *o = (unsigned char *)b->data + b->len;
    put_u64(o, hlen);
    memcpy(o + 8, header, hlen);
    free(header);
    o += 8 + hlen;
    for (size_t i = 0; i < st->count; i++) {
        const gp_named_array *a = &st->arrays[i];
        put_le_doubles(o, a->data, a->rows * a->cols);
        o += a->rows * a->cols * 8;
    }
    char hex[65];
    gp_sha256 sh;
    gp_sha256_init(&sh);
    gp_sha256_update(&sh, b->data + b->len, total);
    gp_sha256_hex(&sh, hex);
    memcpy(b->data + sum_at, hex, 64);
    b->len += total;
    b->data[b->len] = '\0';
    return GP_OK;
}
