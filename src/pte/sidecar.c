/* SPDX-License-Identifier: MIT */
/* The sidecar's one table, read and written (see sidecar.h). */
#include "pte/sidecar.h"

#include "core/core.h"
#include "core/json.h"
#include "pte/json_text.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum key_type { STRING, INT, BOOL, FLOAT, STRING_LIST, NAMES } key_type;

typedef enum key_need {
    REQUIRED, /* refused when missing */
    OPTIONAL, /* read when present */
    UNREAD    /* written for LibreYOLO's other readers; ignored here, as upstream's loader does */
} key_need;

typedef struct key_row key_row;

/* The state of one read: the rows already read give the later ones what they
 * check against (the family for a rectangular size, which alias gave a value). */
typedef struct reader {
    const char *side; /* the sidecar's path, in every refusal */
    const ly_sidecar_read_options *options;
    ly_sidecar *s;
    bool given[32];   /* per row: the key gave its value */
    int64_t ints[32]; /* per INT row: its value, when given */
} reader;

struct key_row {
    const char *key;
    key_type type;
    key_need need;
    /* reading (NULL: not read); `refusal` is upstream's wording ("%s" the
     * value's repr; every message is prefixed by the sidecar's path), and
     * `missing` what it quotes when the key is absent */
    ly_status (*read)(reader *r, const key_row *k, const cJSON *v);
    const char *refusal;
    const char *missing;
    /* the key whose value this legacy alias stands in for when that one gave
     * none, and what is read when neither gives one */
    const char *alias_of, *absent;
    /* writing: `constant` (a string the writer always puts), else the member
     * at `field` (a char array for STRING, int64_t for INT; read into too),
     * else `write` */
    const char *constant;
    size_t field;
    bool (*write)(cJSON *o, const key_row *k, const ly_sidecar *s);
};

/* key_row.field: 1 + the member's offset (0: no member) */
#define FIELD(f) ((size_t)offsetof(ly_sidecar, f) + 1)

/* ---- reading -------------------------------------------------------------------- */

/* Python's repr of a JSON value, for refusals quoting upstream's {x!r}; a
 * missing, null, empty or false value quotes `missing` when there is one (as
 * upstream's `x or 'missing ...'`). */
static void repr(const cJSON *v, const char *missing, char *out, size_t size)
{
    if (!v || cJSON_IsNull(v) || (cJSON_IsString(v) && !*v->valuestring) || cJSON_IsFalse(v)) {
        if (missing) {
            snprintf(out, size, "'%s'", missing);
            return;
        }
    }
    if (!v || cJSON_IsNull(v)) {
        snprintf(out, size, "None");
    } else if (cJSON_IsString(v)) {
        snprintf(out, size, "'%.200s'", v->valuestring);
    } else if (cJSON_IsBool(v)) {
        snprintf(out, size, cJSON_IsTrue(v) ? "True" : "False");
    } else if (cJSON_IsNumber(v)) {
        int64_t whole;
        if (ly_json_int(v, &whole))
            snprintf(out, size, "%lld", (long long)whole);
        else
            snprintf(out, size, "%g", v->valuedouble);
    } else {
        char *t = cJSON_PrintUnformatted(v);
        snprintf(out, size, "%.200s", t ? t : "?");
        free(t);
    }
}

static ly_status refuse(const reader *r, const key_row *k, ly_status status, const cJSON *v)
{
    char got[300], words[400];
    repr(v, k->missing, got, sizeof got);
    snprintf(words, sizeof words, k->refusal, got);
    return ly_set_error(status, "%s: %s", r->side, words);
}

/* A string the program must have been exported with (case-insensitive). */
static ly_status read_fixed(reader *r, const key_row *k, const cJSON *v)
{
    if (cJSON_IsString(v) && strcasecmp(v->valuestring, k->constant) == 0) return LY_OK;
    return refuse(r, k, LY_E_UNSUPPORTED, v);
}

/* dynamic: False, "false" or "False" (or absent). */
static ly_status read_dynamic(reader *r, const key_row *k, const cJSON *v)
{
    if (!v || cJSON_IsFalse(v)) return LY_OK;
    if (cJSON_IsString(v) &&
        (strcmp(v->valuestring, "false") == 0 || strcmp(v->valuestring, "False") == 0))
        return LY_OK;
    return refuse(r, k, LY_E_UNSUPPORTED, v);
}

/* upstream's warn_on_metadata_schema_version: a warning, never a refusal */
static ly_status read_schema_version(reader *r, const key_row *k, const cJSON *v)
{
    (void)k;
    const char *schema = cJSON_IsString(v) ? v->valuestring : NULL;
    if (!schema || strncmp(schema, "1.", 2) != 0)
        ly_log(LY_LOG_WARNING, "%s: metadata schema_version %s; this library reads 1.x", r->side,
               schema ? schema : "missing");
    return LY_OK;
}

static int row_index(const key_row *k);
static const key_row *find_row(const char *key);

/* Whether the row of `key` gave its value (and the value, for an integer). */
static bool given(const reader *r, const char *key, int64_t *value)
{
    int i = row_index(find_row(key));
    if (r->given[i] && value) *value = r->ints[i];
    return r->given[i];
}

static ly_status read_string(reader *r, const key_row *k, const cJSON *v)
{
    const char *value = cJSON_IsString(v) ? v->valuestring : k->absent;
    if (!value) return LY_OK;
    char *field = (char *)r->s + k->field - 1;
    size_t size = k->field == FIELD(family) ? sizeof r->s->family
                  : k->field == FIELD(size) ? sizeof r->s->size
                                            : sizeof r->s->task;
    snprintf(field, size, "%s", value);
    r->given[row_index(k)] = cJSON_IsString(v);
    return LY_OK;
}

/* An integer (a JSON number or a numeric string, as Python's int()); null is
 * absent. False when present but not an integer. */
static bool read_int(reader *r, const key_row *k, const cJSON *v)
{
    int i = row_index(k);
    if (!v || cJSON_IsNull(v)) return true;
    if (!ly_json_int(v, &r->ints[i])) return false;
    r->given[i] = true;
    return true;
}

/* imgsz_h and imgsz_w: integers, read together at imgsz */
static ly_status read_size_int(reader *r, const key_row *k, const cJSON *v)
{
    if (read_int(r, k, v)) return LY_OK;
    return ly_set_error(LY_E_FORMAT, "%s: imgsz, imgsz_h and imgsz_w must be integers", r->side);
}

/* upstream's _read_metadata_imgsz: imgsz_h and imgsz_w together, else imgsz;
 * then the limits and the family's rule on rectangular inputs */
static ly_status read_imgsz(reader *r, const key_row *k, const cJSON *v)
{
    ly_status st = read_size_int(r, k, v);
    if (st != LY_OK) return st;
    int64_t h = 0, w = 0, s = 0;
    bool has_h = given(r, "imgsz_h", &h), has_w = given(r, "imgsz_w", &w);
    if (has_h != has_w)
        return ly_set_error(LY_E_FORMAT,
                            "%s: ExecuTorch metadata must define both imgsz_h and imgsz_w, or "
                            "neither.",
                            r->side);
    if (!has_h) {
        if (!given(r, "imgsz", &s))
            return ly_set_error(
                LY_E_FORMAT, "%s: ExecuTorch metadata must declare a fixed input size.", r->side);
        h = w = s;
    }
    if (h <= 0 || w <= 0)
        return ly_set_error(LY_E_FORMAT, "%s: input size %lldx%lld is not a positive size", r->side,
                            (long long)h, (long long)w);
    if (h > LY_SIDECAR_MAX_IMGSZ || w > LY_SIDECAR_MAX_IMGSZ)
        return ly_set_error(LY_E_FORMAT,
                            "%s: input size %lldx%lld is too large (at most %d per side)", r->side,
                            (long long)h, (long long)w, LY_SIDECAR_MAX_IMGSZ);
    const char *family = r->s->family;
    if (h != w && !(r->options->rectangular && r->options->rectangular(family)))
        return ly_set_error(LY_E_FORMAT,
                            "%s: rectangular input %lldx%lld is not allowed for %s programs",
                            r->side, (long long)h, (long long)w, *family ? family : "these");
    r->s->h = h;
    r->s->w = w;
    return LY_OK;
}

/* nc, else nb_classes (each an integer when present), else 80 */
static ly_status read_class_count(reader *r, const key_row *k, const cJSON *v)
{
    if (!read_int(r, k, v))
        return ly_set_error(LY_E_FORMAT, "%s: %s must be an integer", r->side, k->key);
    int64_t nc = 80;
    if (!given(r, k->key, &nc) && !k->alias_of) return LY_OK; /* nb_classes may give it */
    if (nc < 1 || nc > LY_SIDECAR_MAX_CLASSES)
        return ly_set_error(LY_E_FORMAT, "%s: class count %lld", r->side, (long long)nc);
    r->s->nc = nc;
    return LY_OK;
}

/* names: an object {"<index>": name} or a JSON string holding one; the
 * classes it leaves out get the default names (80 classes, no object) or
 * class_<i> */
static ly_status read_names(reader *r, const key_row *k, const cJSON *names)
{
    (void)k;
    ly_sidecar *s = r->s;
    cJSON *parsed = NULL;
    if (cJSON_IsString(names)) {
        parsed = cJSON_Parse(names->valuestring);
        names = parsed;
    }
    ly_status st = LY_OK;
    s->names = calloc((size_t)s->nc, sizeof *s->names);
    if (!s->names) st = ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    for (const cJSON *c = cJSON_IsObject(names) ? names->child : NULL; c && st == LY_OK;
         c = c->next) {
        char *end;
        errno = 0;
        long long i = strtoll(c->string, &end, 10);
        if (errno || end == c->string || *end) {
            st = ly_set_error(LY_E_FORMAT, "ly_model_load: %s: names key '%s' is not a class index",
                              r->side, c->string);
            break;
        }
        if (i < 0 || i >= s->nc) continue;
        char text[256];
        if (cJSON_IsString(c))
            snprintf(text, sizeof text, "%s", c->valuestring);
        else
            repr(c, NULL, text, sizeof text);
        free(s->names[i]);
        s->names[i] = strdup(text);
        if (!s->names[i]) st = ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    }
    bool defaults =
        s->nc == r->options->n_default_names && r->options->default_names && !cJSON_IsObject(names);
    cJSON_Delete(parsed);
    for (int64_t i = 0; i < s->nc && st == LY_OK; i++) {
        if (s->names[i]) continue;
        char text[40];
        if (defaults)
            snprintf(text, sizeof text, "%s", r->options->default_names[i]);
        else
            snprintf(text, sizeof text, "class_%lld", (long long)i);
        s->names[i] = strdup(text);
        if (!s->names[i]) st = ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    }
    return st;
}

/* ---- writing -------------------------------------------------------------------- */

static bool write_imgsz(cJSON *o, const key_row *k, const ly_sidecar *s)
{
    return cJSON_AddNumberToObject(o, k->key, (double)(s->h > s->w ? s->h : s->w)) != NULL;
}

static bool write_task_list(cJSON *o, const key_row *k, const ly_sidecar *s)
{
    cJSON *tasks = cJSON_AddArrayToObject(o, k->key);
    return tasks && cJSON_AddItemToArray(tasks, cJSON_CreateString(s->task));
}

static bool write_names(cJSON *o, const key_row *k, const ly_sidecar *s)
{
    cJSON *names = cJSON_AddObjectToObject(o, k->key);
    bool ok = names != NULL;
    for (int64_t i = 0; ok && i < s->nc; i++) {
        char key[24], fallback[40];
        snprintf(key, sizeof key, "%lld", (long long)i);
        const char *name = s->names && s->names[i] && *s->names[i] ? s->names[i] : NULL;
        if (!name) {
            snprintf(fallback, sizeof fallback, "class_%lld", (long long)i);
            name = fallback;
        }
        ok = cJSON_AddStringToObject(names, key, name) != NULL;
    }
    return ok;
}

static bool write_false(cJSON *o, const key_row *k, const ly_sidecar *s)
{
    (void)s;
    return cJSON_AddFalseToObject(o, k->key) != NULL;
}

static bool write_obb(cJSON *o, const key_row *k, const ly_sidecar *s)
{
    return cJSON_AddBoolToObject(o, k->key, strcmp(s->task, "obb") == 0) != NULL;
}

/* classify_eval_kwargs: the eval transform an ExecuTorch loader repeats */
static bool write_crop_pct(cJSON *o, const key_row *k, const ly_sidecar *s)
{
    return s->crop_pct <= 0 || cJSON_AddNumberToObject(o, k->key, s->crop_pct) != NULL;
}

static bool write_interpolation(cJSON *o, const key_row *k, const ly_sidecar *s)
{
    return !s->interpolation || cJSON_AddStringToObject(o, k->key, s->interpolation) != NULL;
}

static bool write_libreyolo_version(cJSON *o, const key_row *k, const ly_sidecar *s)
{
    return cJSON_AddStringToObject(o, k->key, s->libreyolo_version) != NULL;
}

static bool write_partitions(cJSON *o, const key_row *k, const ly_sidecar *s)
{
    return cJSON_AddNumberToObject(o, k->key, s->delegate_partitions) != NULL;
}

/* ---- the table (in upstream's reading order) -------------------------------------- */

static const key_row rows[] = {
    {.key = "executorch_delegate",
     .type = STRING,
     .need = REQUIRED,
     .read = read_fixed,
     .refusal = "This LibreYOLO version only supports ExecuTorch programs exported for XNNPACK, "
                "got %s.",
     .missing = "missing delegate metadata",
     .constant = "xnnpack"},
    {.key = "dynamic",
     .type = BOOL,
     .need = OPTIONAL,
     .read = read_dynamic,
     .refusal = "ExecuTorch v1 requires metadata dynamic=false, got %s.",
     .write = write_false},
    {.key = "precision",
     .type = STRING,
     .need = REQUIRED,
     .read = read_fixed,
     .refusal = "ExecuTorch v1 requires metadata precision='fp32', got %s.",
     .missing = "missing precision metadata",
     .constant = "fp32"},
    {.key = "schema_version",
     .type = STRING,
     .need = OPTIONAL,
     .read = read_schema_version,
     .constant = LY_SIDECAR_SCHEMA_VERSION},
    {.key = "model_family",
     .type = STRING,
     .need = OPTIONAL,
     .read = read_string,
     .field = FIELD(family)},
    {.key = "size", .type = STRING, .need = OPTIONAL, .read = read_string, .field = FIELD(size)},
    {.key = "model_size",
     .type = STRING,
     .need = OPTIONAL,
     .read = read_string,
     .alias_of = "size",
     .field = FIELD(size)},
    {.key = "task", .type = STRING, .need = OPTIONAL, .read = read_string, .field = FIELD(task)},
    {.key = "default_task",
     .type = STRING,
     .need = OPTIONAL,
     .read = read_string,
     .alias_of = "task",
     .absent = "detect",
     .field = FIELD(task)},
    {.key = "imgsz_h", .type = INT, .need = OPTIONAL, .read = read_size_int, .field = FIELD(h)},
    {.key = "imgsz_w", .type = INT, .need = OPTIONAL, .read = read_size_int, .field = FIELD(w)},
    /* required unless imgsz_h and imgsz_w are given */
    {.key = "imgsz", .type = INT, .need = REQUIRED, .read = read_imgsz, .write = write_imgsz},
    {.key = "nc", .type = INT, .need = OPTIONAL, .read = read_class_count, .field = FIELD(nc)},
    {.key = "nb_classes",
     .type = INT,
     .need = OPTIONAL,
     .read = read_class_count,
     .alias_of = "nc",
     .field = FIELD(nc)},
    {.key = "names", .type = NAMES, .need = OPTIONAL, .read = read_names, .write = write_names},
    {.key = "supported_tasks", .type = STRING_LIST, .need = UNREAD, .write = write_task_list},
    {.key = "libreyolo_version", .type = STRING, .need = UNREAD, .write = write_libreyolo_version},
    {.key = "obb", .type = BOOL, .need = UNREAD, .write = write_obb},
    {.key = "crop_pct", .type = FLOAT, .need = UNREAD, .write = write_crop_pct},
    {.key = "interpolation", .type = STRING, .need = UNREAD, .write = write_interpolation},
    {.key = "executorch_version",
     .type = STRING,
     .need = UNREAD,
     .constant = LY_SIDECAR_EXECUTORCH_VERSION},
    {.key = "executorch_delegate_partitions",
     .type = INT,
     .need = UNREAD,
     .write = write_partitions},
};

enum { N_ROWS = sizeof rows / sizeof rows[0] };
_Static_assert(N_ROWS <= 32, "reader.given holds a flag per row");

static int row_index(const key_row *k)
{
    return (int)(k - rows);
}

static const key_row *find_row(const char *key)
{
    for (int i = 0; i < N_ROWS; i++)
        if (strcmp(rows[i].key, key) == 0) return &rows[i];
    return NULL; /* keys asked for are the table's own */
}

/* ---- the file ----------------------------------------------------------------------- */

/* The sidecar's text (at most 64 MiB: a sidecar is a few kilobytes). */
static ly_status read_text(const char *side, char **text, size_t *len)
{
    FILE *f = fopen(side, "rb");
    if (!f) {
        if (errno == ENOENT)
            return ly_set_error(LY_E_NOT_FOUND, "ExecuTorch metadata sidecar not found: %s", side);
        return ly_set_error(LY_E_IO, "Invalid ExecuTorch metadata sidecar: %s (%s)", side,
                            strerror(errno));
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    bool too_big = false;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            if (cap >= (size_t)64 << 20) {
                too_big = true;
                break;
            }
            cap = cap ? cap * 2 : 8192;
            char *p = realloc(buf, cap);
            if (!p) {
                free(buf);
                fclose(f);
                return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
            }
            buf = p;
        }
        size_t got = fread(buf + n, 1, 4096, f);
        n += got;
        if (got < 4096) break;
    }
    bool read_error = ferror(f);
    fclose(f);
    if (too_big || read_error || !buf) {
        free(buf);
        return ly_set_error(LY_E_FORMAT, "Invalid ExecuTorch metadata sidecar: %s", side);
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return LY_OK;
}

ly_status ly_sidecar_read(const char *program_path, const ly_sidecar_read_options *options,
                          ly_sidecar *out)
{
    memset(out, 0, sizeof *out);
    static const ly_sidecar_read_options none = {0};
    char side[4200];
    if ((size_t)snprintf(side, sizeof side, "%s.json", program_path) >= sizeof side)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_load: path too long");
    char *text = NULL;
    size_t len = 0;
    ly_status st = read_text(side, &text, &len);
    if (st != LY_OK) return st;
    const char *end = NULL;
    cJSON *meta = cJSON_ParseWithLengthOpts(text, len + 1, &end, true);
    free(text);
    if (!meta) return ly_set_error(LY_E_FORMAT, "Invalid ExecuTorch metadata sidecar: %s", side);
    if (!cJSON_IsObject(meta)) {
        cJSON_Delete(meta);
        return ly_set_error(LY_E_FORMAT,
                            "ExecuTorch metadata sidecar must contain a JSON object: %s", side);
    }
    reader r = {.side = side, .options = options ? options : &none, .s = out};
    for (int i = 0; i < N_ROWS && st == LY_OK; i++) {
        const key_row *k = &rows[i];
        if (!k->read || (k->alias_of && given(&r, k->alias_of, NULL))) continue;
        st = k->read(&r, k, cJSON_GetObjectItemCaseSensitive(meta, k->key));
    }
    cJSON_Delete(meta);
    return st;
}

void ly_sidecar_free(ly_sidecar *s)
{
    if (!s || !s->names) return;
    for (int64_t i = 0; i < s->nc; i++)
        free(s->names[i]);
    free(s->names);
    s->names = NULL;
}

ly_status ly_sidecar_write(const ly_sidecar *s, char **text, size_t *length)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o != NULL;
    for (int i = 0; ok && i < N_ROWS; i++) {
        const key_row *k = &rows[i];
        if (k->constant)
            ok = cJSON_AddStringToObject(o, k->key, k->constant) != NULL;
        else if (k->field && k->type == STRING)
            ok = cJSON_AddStringToObject(o, k->key, (const char *)s + k->field - 1) != NULL;
        else if (k->field)
            ok = cJSON_AddNumberToObject(
                     o, k->key, (double)*(const int64_t *)((const char *)s + k->field - 1)) != NULL;
        else
            ok = k->write(o, k, s);
    }
    ly_status st = ok ? ly_json_python_dumps(o, text, length)
                      : ly_set_error(LY_E_NO_MEMORY, "ly_model_export: out of memory");
    cJSON_Delete(o);
    return st;
}
