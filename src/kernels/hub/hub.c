/* SPDX-License-Identifier: MIT */
/* Hub artifacts: the lock, the cache, verification and loading (see hub.h). */
#include "kernels/hub/hub.h"

#include "core/atomic_file.h"
#include "core/core.h"
#include "core/digest.h"
#include "core/dirs.h"
#include "io/http.h"
#include "libreyolo/fetch.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_SLOTS 8
#define MAX_VARIANTS 16
#define MAX_LOCK_BYTES (1u << 20)
/* A plugin library is a few MiB; this only bounds a misbehaving server. */
#define MAX_ARTIFACT_BYTES ((size_t)512 << 20)

#if defined(__x86_64__)
#define THIS_ARCH "x86_64"
#elif defined(__aarch64__)
#define THIS_ARCH "aarch64"
#else
#define THIS_ARCH NULL
#endif

typedef struct hub_variant {
    char name[64];
    char file[128];
    char sha256[65];
} hub_variant;

typedef struct hub_provider {
    char name[64];
    char slots[MAX_SLOTS][96];
    size_t n_slots;
    char revision[128];
    hub_variant variants[MAX_VARIANTS];
    size_t n_variants;
} hub_provider;

typedef struct hub_lock {
    hub_provider *providers;
    size_t count;
} hub_lock;

/* ---- Environment -------------------------------------------------------------- */

/* `var` without surrounding blanks, or "" when unset. */
static void env_stripped(const char *var, char *out, size_t size)
{
    out[0] = '\0';
    const char *v = getenv(var);
    if (!v) return;
    while (isspace((unsigned char)*v))
        v++;
    size_t n = strlen(v);
    while (n > 0 && isspace((unsigned char)v[n - 1]))
        n--;
    if (n >= size) n = size - 1;
    memcpy(out, v, n);
    out[n] = '\0';
}

bool ly_hub_disabled_by_env(void)
{
    char v[16];
    env_stripped("LIBREYOLO_HUB_KERNELS", v, sizeof v);
    for (char *p = v; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return strcmp(v, "0") == 0 || strcmp(v, "false") == 0 || strcmp(v, "off") == 0 ||
           strcmp(v, "no") == 0;
}

/* LIBREYOLO_HUB_LOCK, else the lock installed with the library (or the build
 * tree's copy), else kernels.lock.json in the working directory. */
static void lock_path(char *out, size_t size)
{
    env_stripped("LIBREYOLO_HUB_LOCK", out, size);
    if (!out[0] && !ly_data_file("kernels.lock.json", out, size))
        snprintf(out, size, "%s", "kernels.lock.json");
}

/* The base URL without trailing slashes ("" when unset). */
static void hub_url(char *out, size_t size)
{
    env_stripped("LIBREYOLO_HUB_URL", out, size);
    size_t n = strlen(out);
    while (n > 0 && out[n - 1] == '/')
        out[--n] = '\0';
}

#ifdef LY_HAVE_CURL
static bool selection_is_reference(void)
{
    char v[32];
    env_stripped("LIBREYOLO_KERNELS", v, sizeof v);
    if (!v[0]) env_stripped("LIBREYOLO_QUANT_KERNELS", v, sizeof v);
    for (char *p = v; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return strcmp(v, "off") == 0 || strcmp(v, "reference") == 0;
}
#endif

#define BAD_URL "LIBREYOLO_HUB_URL is not an http:// or https:// URL"

/* Why this process does not consult the hub, or NULL when it does. */
static const char *why_off(char *buf, size_t size)
{
#ifndef LY_HAVE_CURL
    (void)buf;
    (void)size;
    return "built without libcurl (LIBREYOLO_WITH_CURL=OFF or libcurl not found)";
#else
    char url[1024];
    hub_url(url, sizeof url);
    if (ly_hub_disabled_by_env()) {
        char v[16];
        env_stripped("LIBREYOLO_HUB_KERNELS", v, sizeof v);
        snprintf(buf, size, "LIBREYOLO_HUB_KERNELS=%s", v);
        return buf;
    }
    if (!url[0]) return "LIBREYOLO_HUB_URL is unset";
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) return BAD_URL;
    if (selection_is_reference()) return "LIBREYOLO_KERNELS selects the references only";
    return NULL;
#endif
}

/* ---- The cache ---------------------------------------------------------------- */

#ifdef LY_HAVE_CURL
static ly_status make_dirs(const char *dir)
{
    char failed[PATH_MAX];
    int err = ly_make_dirs(dir, 0755, failed, sizeof failed);
    if (err == ENAMETOOLONG) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: path too long", dir);
    if (err)
        return ly_set_error(LY_E_IO, "%s: cannot create the directory: %s", failed, strerror(err));
    return LY_OK;
}
#endif

/* ---- The lock ------------------------------------------------------------------- */

/* Names go into paths and URLs: letters, digits and ._+- only, no leading dot. */
static bool safe_token(const char *s, size_t cap)
{
    size_t n = strlen(s);
    if (n == 0 || n >= cap || s[0] == '.') return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._+-", *p)) return false;
    return true;
}

/* Implementation names are matched against LIBREYOLO_KERNELS, which is lower-cased. */
static bool provider_name_ok(const char *s, size_t cap)
{
    if (!safe_token(s, cap)) return false;
    for (const char *p = s; *p; p++)
        if (isupper((unsigned char)*p)) return false;
    return true;
}

static bool sha256_ok(const char *s)
{
    if (strlen(s) != 64) return false;
    for (const char *p = s; *p; p++)
        if (!isxdigit((unsigned char)*p)) return false;
    return true;
}

/* A string member `key` of `obj` into out (checked by `ok`), or an error naming
 * the field. */
static ly_status lock_string(const char *lock, const cJSON *obj, const char *field, const char *key,
                             char *out, size_t cap, bool (*ok)(const char *, size_t),
                             const char *expected)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!item)
        return ly_set_error(LY_E_FORMAT, "hub lock %s: %s.%s: missing (expected %s)", lock, field,
                            key, expected);
    if (!cJSON_IsString(item) || !item->valuestring || !ok(item->valuestring, cap))
        return ly_set_error(LY_E_FORMAT, "hub lock %s: %s.%s: expected %s", lock, field, key,
                            expected);
    snprintf(out, cap, "%s", item->valuestring);
    return LY_OK;
}

static bool slot_name_ok(const char *s, size_t cap)
{
    size_t n = strlen(s);
    return n > 0 && n < cap;
}

static bool sha256_ok_cap(const char *s, size_t cap)
{
    (void)cap;
    return sha256_ok(s);
}

static ly_status parse_provider(const char *lock, const cJSON *item, size_t index, hub_provider *p)
{
    char field[64];
    snprintf(field, sizeof field, "providers[%zu]", index);
    if (!cJSON_IsObject(item))
        return ly_set_error(LY_E_FORMAT, "hub lock %s: %s: expected an object", lock, field);
    ly_status st =
        lock_string(lock, item, field, "name", p->name, sizeof p->name, provider_name_ok,
                    "a lower-case name of letters, digits and ._+- (1 to 63 characters)");
    if (st == LY_OK)
        st = lock_string(lock, item, field, "revision", p->revision, sizeof p->revision, safe_token,
                         "a revision of letters, digits and ._+- (1 to 127 characters)");
    if (st != LY_OK) return st;
    const cJSON *slot = cJSON_GetObjectItemCaseSensitive(item, "slot");
    if (cJSON_IsString(slot)) {
        st = lock_string(lock, item, field, "slot", p->slots[0], sizeof p->slots[0], slot_name_ok,
                         "a slot name or an array of slot names");
        if (st != LY_OK) return st;
        p->n_slots = 1;
    } else if (cJSON_IsArray(slot) && cJSON_GetArraySize(slot) > 0 &&
               cJSON_GetArraySize(slot) <= MAX_SLOTS) {
        const cJSON *s;
        cJSON_ArrayForEach(s, slot)
        {
            if (!cJSON_IsString(s) || !slot_name_ok(s->valuestring, sizeof p->slots[0]))
                return ly_set_error(LY_E_FORMAT, "hub lock %s: %s.slot[%zu]: expected a slot name",
                                    lock, field, p->n_slots);
            snprintf(p->slots[p->n_slots++], sizeof p->slots[0], "%s", s->valuestring);
        }
    } else {
        return ly_set_error(LY_E_FORMAT,
                            "hub lock %s: %s.slot: %s (expected a slot name or an array of 1 to "
                            "%d slot names)",
                            lock, field, slot ? "wrong type" : "missing", MAX_SLOTS);
    }
    const cJSON *variants = cJSON_GetObjectItemCaseSensitive(item, "variants");
    if (!cJSON_IsObject(variants) || !variants->child)
        return ly_set_error(LY_E_FORMAT,
                            "hub lock %s: %s.variants: expected an object mapping build variants "
                            "to {\"file\", \"sha256\"}",
                            lock, field);
    const cJSON *v;
    cJSON_ArrayForEach(v, variants)
    {
        if (p->n_variants == MAX_VARIANTS)
            return ly_set_error(LY_E_FORMAT, "hub lock %s: %s.variants: more than %d variants",
                                lock, field, MAX_VARIANTS);
        hub_variant *hv = &p->variants[p->n_variants];
        if (!safe_token(v->string, sizeof hv->name))
            return ly_set_error(LY_E_FORMAT,
                                "hub lock %s: %s.variants: '%s' is not a variant name (letters, "
                                "digits and ._+-, e.g. cuda13-x86_64-linux)",
                                lock, field, v->string);
        snprintf(hv->name, sizeof hv->name, "%s", v->string);
        char vfield[160];
        snprintf(vfield, sizeof vfield, "%s.variants.%s", field, hv->name);
        if (!cJSON_IsObject(v))
            return ly_set_error(LY_E_FORMAT, "hub lock %s: %s: expected an object", lock, vfield);
        st = lock_string(lock, v, vfield, "file", hv->file, sizeof hv->file, safe_token,
                         "a file name of letters, digits and ._+- (1 to 127 characters)");
        if (st == LY_OK)
            st = lock_string(lock, v, vfield, "sha256", hv->sha256, sizeof hv->sha256,
                             sha256_ok_cap, "64 hexadecimal digits");
        if (st != LY_OK) return st;
        for (char *c = hv->sha256; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        p->n_variants++;
    }
    return LY_OK;
}

static void lock_free(hub_lock *lock)
{
    free(lock->providers);
    lock->providers = NULL;
    lock->count = 0;
}

static ly_status lock_parse_text(const char *lock, const char *text, size_t size, hub_lock *out)
{
    cJSON *root = cJSON_ParseWithLength(text, size);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t offset = at && at >= text && at <= text + size ? (size_t)(at - text) : 0;
        size_t line = 1;
        for (size_t i = 0; i < offset; i++)
            line += text[i] == '\n';
        return ly_set_error(LY_E_FORMAT, "hub lock %s: not valid JSON (near line %zu)", lock, line);
    }
    ly_status st = LY_OK;
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *providers = cJSON_GetObjectItemCaseSensitive(root, "providers");
    if (!cJSON_IsObject(root)) {
        st = ly_set_error(LY_E_FORMAT, "hub lock %s: expected a JSON object at the top", lock);
    } else if (!cJSON_IsNumber(format) || format->valuedouble != 1.0) {
        st = ly_set_error(LY_E_FORMAT, "hub lock %s: format: %s (expected 1)", lock,
                          format ? "unsupported value" : "missing");
    } else if (!cJSON_IsArray(providers)) {
        st = ly_set_error(LY_E_FORMAT, "hub lock %s: providers: %s (expected an array)", lock,
                          providers ? "wrong type" : "missing");
    } else {
        size_t n = (size_t)cJSON_GetArraySize(providers);
        out->providers = calloc(n ? n : 1, sizeof *out->providers);
        if (!out->providers) st = ly_set_error(LY_E_NO_MEMORY, "hub lock %s: out of memory", lock);
        const cJSON *item;
        size_t i = 0;
        cJSON_ArrayForEach(item, providers)
        {
            if (st != LY_OK) break;
            st = parse_provider(lock, item, i, &out->providers[i]);
            for (size_t j = 0; st == LY_OK && j < i; j++)
                if (strcmp(out->providers[j].name, out->providers[i].name) == 0)
                    st = ly_set_error(LY_E_FORMAT,
                                      "hub lock %s: providers[%zu].name: '%s' is pinned twice "
                                      "(also providers[%zu])",
                                      lock, i, out->providers[i].name, j);
            i++;
        }
        out->count = i;
    }
    cJSON_Delete(root);
    if (st != LY_OK) lock_free(out);
    return st;
}

static ly_status lock_read(const char *lock, hub_lock *out)
{
    *out = (hub_lock){0};
    FILE *f = fopen(lock, "rb");
    if (!f)
        return ly_set_error(LY_E_NOT_FOUND, "hub lock %s: cannot open: %s", lock, strerror(errno));
    char *text = malloc(MAX_LOCK_BYTES + 1);
    size_t size = text ? fread(text, 1, MAX_LOCK_BYTES + 1, f) : 0;
    bool read_error = ferror(f) != 0;
    fclose(f);
    if (!text) return ly_set_error(LY_E_NO_MEMORY, "hub lock %s: out of memory", lock);
    ly_status st;
    if (read_error)
        st = ly_set_error(LY_E_IO, "hub lock %s: read failed", lock);
    else if (size > MAX_LOCK_BYTES)
        st = ly_set_error(LY_E_FORMAT, "hub lock %s: larger than %u bytes", lock, MAX_LOCK_BYTES);
    else
        st = lock_parse_text(lock, text, size, out);
    free(text);
    return st;
}

/* ---- Variants --------------------------------------------------------------- */

static int driver_major;

static void probe_driver(void)
{
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver) return;
    int (*get_version)(int *);
    *(void **)&get_version = dlsym(driver, "cuDriverGetVersion");
    int version = 0;
    if (get_version && get_version(&version) == 0) driver_major = version / 1000;
    dlclose(driver);
}

/* The CUDA version the driver supports (major), 0 without a driver. Only the
 * version: initialising the driver is the plugin's business. */
static int cuda_driver_major(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, probe_driver);
    return driver_major;
}

/* How well `variant` fits this machine: 0 not at all; higher is better. */
static int variant_rank(const char *variant)
{
    if (!THIS_ARCH) return 0;
    char suffix[64];
    snprintf(suffix, sizeof suffix, "-%s-linux", THIS_ARCH);
    size_t n = strlen(variant), s = strlen(suffix);
    if (n <= s || strcmp(variant + n - s, suffix) != 0) return 0;
    char kind[64];
    snprintf(kind, sizeof kind, "%.*s", (int)(n - s), variant);
    if (strcmp(kind, "cpu") == 0) return 1;
    if (strcmp(kind, "cpu-avx2") == 0) return ly_cpu()->avx2 && ly_cpu()->fma ? 2 : 0;
    if (strncmp(kind, "cuda", 4) == 0 && kind[4]) {
        char *end;
        long want = strtol(kind + 4, &end, 10);
        if (*end || want <= 0 || want > 1000) return 0;
        int have = cuda_driver_major();
        return have >= want ? 1000 + (int)want : 0;
    }
    return 0;
}

static const hub_variant *pick_variant(const hub_provider *p)
{
    const hub_variant *best = NULL;
    int best_rank = 0;
    for (size_t i = 0; i < p->n_variants; i++) {
        int r = variant_rank(p->variants[i].name);
        if (r > best_rank) {
            best_rank = r;
            best = &p->variants[i];
        }
    }
    return best;
}

/* ---- Entries ------------------------------------------------------------------ */

static void entry_init(ly_hub_entry *e, const hub_provider *p, const hub_variant *v,
                       const char *root)
{
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", p->name);
    for (size_t i = 0; i < p->n_slots; i++) {
        size_t used = strlen(e->slots);
        snprintf(e->slots + used, sizeof e->slots - used, "%s%s", i ? "," : "", p->slots[i]);
    }
    snprintf(e->revision, sizeof e->revision, "%s", p->revision);
    if (!v) {
        snprintf(e->state, sizeof e->state, "unavailable");
        int used = snprintf(e->why, sizeof e->why, "no build variant for this machine (offered:");
        for (size_t i = 0; i < p->n_variants && used > 0 && (size_t)used < sizeof e->why; i++)
            used +=
                snprintf(e->why + used, sizeof e->why - (size_t)used, " %s", p->variants[i].name);
        int cuda = cuda_driver_major();
        const ly_cpu_features *cpu = ly_cpu();
        char driver[32] = "no CUDA driver";
        if (cuda) snprintf(driver, sizeof driver, "a CUDA %d driver", cuda);
        if (used > 0 && (size_t)used < sizeof e->why)
            snprintf(e->why + used, sizeof e->why - (size_t)used, "; this machine: %s-linux%s, %s)",
                     THIS_ARCH ? THIS_ARCH : "unknown", cpu->avx2 && cpu->fma ? " with AVX2" : "",
                     driver);
        return;
    }
    snprintf(e->variant, sizeof e->variant, "%s", v->name);
    snprintf(e->file, sizeof e->file, "%s", v->file);
    snprintf(e->sha256, sizeof e->sha256, "%s", v->sha256);
    snprintf(e->state, sizeof e->state, "pinned");
    /* A path too long for PATH_MAX stays empty: the provider is then not cached. */
    if (root) {
        int n = snprintf(e->path, sizeof e->path, "%s/kernels/%s/%s/%s/%s", root, p->name,
                         p->revision, v->name, v->file);
        if (n < 0 || (size_t)n >= sizeof e->path) e->path[0] = '\0';
    }
}

/* Whether the file at e->path exists and has the pinned hash; *found says
 * whether it exists at all. */
static bool cached_ok(const ly_hub_entry *e, bool *found)
{
    struct stat st;
    *found = e->path[0] && stat(e->path, &st) == 0 && S_ISREG(st.st_mode);
    if (!*found) return false;
    uint8_t digest[LY_DIGEST_MAX];
    size_t len;
    char hex[2 * LY_DIGEST_MAX + 1];
    if (ly_digest_file(e->path, LY_SHA256, digest, &len) != LY_OK) return false;
    ly_digest_hex(digest, len, hex);
    return strcmp(hex, e->sha256) == 0;
}

static void entry_disable(ly_hub_entry *e, const char *fmt, ...) LY_PRINTF(2, 3);
static void entry_disable(ly_hub_entry *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->why, sizeof e->why, fmt, ap);
    va_end(ap);
    snprintf(e->state, sizeof e->state, "disabled");
    char key[128];
    snprintf(key, sizeof key, "hub:%s", e->name);
    ly_warn_once(key,
                 "hub kernel provider '%s' (revision %s, variant %s) is disabled for this "
                 "process: %s; the portable path carries on",
                 e->name, e->revision, e->variant[0] ? e->variant : "none", e->why);
}

#ifdef LY_HAVE_CURL
/* Download, verify and store e's file. On failure e is disabled. */
static bool fetch(ly_hub_entry *e, const char *url_base)
{
    char url[2048];
    snprintf(url, sizeof url, "%s/%s/%s/%s/%s", url_base, e->name, e->revision, e->variant,
             e->file);
    uint8_t *data = NULL;
    size_t size = 0;
    if (ly_http_get(url, MAX_ARTIFACT_BYTES, &data, &size) != LY_OK) {
        entry_disable(e, "download failed: %s", ly_last_error());
        return false;
    }
    uint8_t digest[LY_DIGEST_MAX];
    size_t len = 0;
    char hex[2 * LY_DIGEST_MAX + 1] = "";
    if (ly_digest_buffer(data, size, LY_SHA256, digest, &len) == LY_OK)
        ly_digest_hex(digest, len, hex);
    if (strcmp(hex, e->sha256) != 0) {
        free(data);
        entry_disable(e, "SHA-256 mismatch: the lock pins %s, %s has %s (not stored, not loaded)",
                      e->sha256, url, hex[0] ? hex : "(could not hash)");
        return false;
    }
    char dir[sizeof e->path];
    snprintf(dir, sizeof dir, "%s", e->path);
    *strrchr(dir, '/') = '\0';
    ly_status st = make_dirs(dir);
    ly_atomic_file f;
    if (st == LY_OK) st = ly_atomic_file_begin(&f, e->path, e->path);
    if (st == LY_OK) {
        ly_atomic_file_write(&f, data, size);
        st = ly_atomic_file_commit(&f);
    }
    free(data);
    if (st != LY_OK) {
        entry_disable(e, "cannot store it in the cache: %s", ly_last_error());
        return false;
    }
    ly_log(LY_LOG_INFO, "hub: fetched %s (%zu bytes) into %s", url, size, e->path);
    return true;
}
#endif

/* ---- State of this process ------------------------------------------------------ */

static pthread_mutex_t hub_mutex = PTHREAD_MUTEX_INITIALIZER;
static bool hub_ran;       /* ly_hub_load ran */
static bool hub_consulted; /* ... with the hub enabled */
static char hub_lock_error[512];
static ly_hub_entry *hub_entries;
static size_t hub_count;

bool ly_hub_pins(const char *name)
{
    bool pinned = false, consulted;
    pthread_mutex_lock(&hub_mutex);
    consulted = hub_consulted;
    for (size_t i = 0; i < hub_count && !pinned; i++)
        pinned = strcmp(hub_entries[i].name, name) == 0;
    pthread_mutex_unlock(&hub_mutex);
    if (pinned || consulted) return pinned;
    /* the hub is off: the lock's names still are not typos */
    char lock[PATH_MAX];
    lock_path(lock, sizeof lock);
    hub_lock parsed;
    if (lock_read(lock, &parsed) != LY_OK) {
        ly_clear_error();
        return false;
    }
    for (size_t i = 0; i < parsed.count && !pinned; i++)
        pinned = strcmp(parsed.providers[i].name, name) == 0;
    lock_free(&parsed);
    return pinned;
}

/* Fill entries from the lock and the cache, without fetching or loading. */
static ly_status entries_from_lock(const char *lock, ly_hub_entry **entries, size_t *count,
                                   char *lock_error, size_t lock_error_size)
{
    *entries = NULL;
    *count = 0;
    lock_error[0] = '\0';
    hub_lock parsed;
    if (lock_read(lock, &parsed) != LY_OK) {
        snprintf(lock_error, lock_error_size, "%s", ly_last_error());
        return LY_E_FORMAT;
    }
    char root[PATH_MAX];
    bool have_root = ly_cache_dir(root, sizeof root) == LY_OK;
    ly_hub_entry *list = calloc(parsed.count ? parsed.count : 1, sizeof *list);
    if (!list) {
        lock_free(&parsed);
        return ly_set_error(LY_E_NO_MEMORY, "hub: out of memory");
    }
    for (size_t i = 0; i < parsed.count; i++) {
        const hub_provider *p = &parsed.providers[i];
        entry_init(&list[i], p, pick_variant(p), have_root ? root : NULL);
        if (!list[i].variant[0]) continue;
        if (!have_root || !list[i].path[0]) {
            snprintf(list[i].why, sizeof list[i].why, "%s",
                     have_root ? "its cache path is longer than PATH_MAX"
                               : "no cache directory (set LIBREYOLO_CACHE)");
            continue;
        }
        bool found;
        if (cached_ok(&list[i], &found))
            snprintf(list[i].state, sizeof list[i].state, "cached");
        else if (found)
            snprintf(list[i].why, sizeof list[i].why,
                     "the cached file does not match the pinned SHA-256 (fetched again when "
                     "the hub is consulted)");
    }
    *entries = list;
    *count = parsed.count;
    lock_free(&parsed);
    return LY_OK;
}

void ly_hub_load(void)
{
    pthread_mutex_lock(&hub_mutex);
    if (hub_ran) {
        pthread_mutex_unlock(&hub_mutex);
        return;
    }
    hub_ran = true;
    char buf[256];
    const char *off = why_off(buf, sizeof buf);
    if (off) {
        /* A URL that is set but unusable is a mistake worth saying; the rest are choices. */
        if (strcmp(off, BAD_URL) == 0) ly_warn_once("hub:url", "hub: %s; nothing is fetched", off);
        pthread_mutex_unlock(&hub_mutex);
        return;
    }
    hub_consulted = true;
    char lock[PATH_MAX], url[1024];
    lock_path(lock, sizeof lock);
    hub_url(url, sizeof url);
    if (entries_from_lock(lock, &hub_entries, &hub_count, hub_lock_error, sizeof hub_lock_error) !=
        LY_OK) {
        if (hub_lock_error[0])
            ly_warn_once("hub:lock", "%s; no hub kernel provider is loaded", hub_lock_error);
        pthread_mutex_unlock(&hub_mutex);
        return;
    }
    for (size_t i = 0; i < hub_count; i++) {
        ly_hub_entry *e = &hub_entries[i];
        if (!e->variant[0]) {
            char key[128];
            snprintf(key, sizeof key, "hub:%s", e->name);
            ly_warn_once(key, "hub kernel provider '%s' has %s; the portable path carries on",
                         e->name, e->why);
            continue;
        }
        if (!e->path[0]) {
            entry_disable(e, "%s", e->why);
            continue;
        }
        if (strcmp(e->state, "cached") != 0) {
            e->why[0] = '\0';
#ifdef LY_HAVE_CURL
            if (!fetch(e, url)) continue;
#else
            (void)url;
            entry_disable(e, "not in the cache, and this build cannot download (no libcurl)");
            continue;
#endif
        }
        char slots[MAX_SLOTS][96];
        const char *slot_ptrs[MAX_SLOTS];
        size_t n_slots = 0;
        char copy[sizeof e->slots];
        snprintf(copy, sizeof copy, "%s", e->slots);
        char *save = NULL;
        for (char *s = strtok_r(copy, ",", &save); s && n_slots < MAX_SLOTS;
             s = strtok_r(NULL, ",", &save)) {
            snprintf(slots[n_slots], sizeof slots[0], "%s", s);
            slot_ptrs[n_slots] = slots[n_slots];
            n_slots++;
        }
        size_t registered = 0;
        if (ly_plugin_load_file(e->path, e->name, slot_ptrs, n_slots, &registered) != LY_OK) {
            entry_disable(e, "the library does not load: %s", ly_last_error());
            continue;
        }
        snprintf(e->state, sizeof e->state, "loaded");
        e->why[0] = '\0';
        ly_log(LY_LOG_DEBUG, "hub: %s loaded from %s (%zu implementations)", e->name, e->path,
               registered);
    }
    pthread_mutex_unlock(&hub_mutex);
}

typedef struct run_check {
    const char *name;
    bool failed;
} run_check;

static void on_listed(const char *slot, const char *impl, bool eligible, const char *why_not,
                      void *user)
{
    (void)slot;
    run_check *rc = user;
    if (strcmp(impl, rc->name) == 0 && !eligible && why_not && strstr(why_not, "run-time failure"))
        rc->failed = true;
}

/* A loaded provider the registry disabled after a run-time failure shows as
 * disabled. */
static void check_run_failures(ly_hub_entry *e)
{
    char copy[sizeof e->slots];
    snprintf(copy, sizeof copy, "%s", e->slots);
    char *save = NULL;
    for (char *s = strtok_r(copy, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        run_check rc = {e->name, false};
        if (ly_kernel_list(s, on_listed, &rc) == LY_OK && rc.failed) {
            snprintf(e->state, sizeof e->state, "disabled");
            snprintf(e->why, sizeof e->why,
                     "failed at run time (slot %s); the registry disabled it for this process", s);
            return;
        }
    }
    ly_clear_error();
}

ly_status ly_hub_status_get(ly_hub_status *out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_hub_status_get: out is NULL");
    memset(out, 0, sizeof *out);
#ifdef LY_HAVE_CURL
    out->built = true;
#endif
    hub_url(out->url, sizeof out->url);
    lock_path(out->lock, sizeof out->lock);
    pthread_mutex_lock(&hub_mutex);
    bool consulted = hub_consulted;
    if (consulted) {
        out->consulted = true;
        snprintf(out->lock_error, sizeof out->lock_error, "%s", hub_lock_error);
        if (hub_count) {
            out->entries = malloc(hub_count * sizeof *out->entries);
            if (!out->entries) {
                pthread_mutex_unlock(&hub_mutex);
                return ly_set_error(LY_E_NO_MEMORY, "ly_hub_status_get: out of memory");
            }
            memcpy(out->entries, hub_entries, hub_count * sizeof *out->entries);
            out->count = hub_count;
        }
    } else {
        char buf[256];
        const char *off = why_off(buf, sizeof buf);
        snprintf(out->why_off, sizeof out->why_off, "%s",
                 off ? off : "not consulted yet in this process");
    }
    pthread_mutex_unlock(&hub_mutex);
    if (consulted) {
        /* Outside the mutex: listing may initialise the registry. */
        for (size_t i = 0; i < out->count; i++)
            if (strcmp(out->entries[i].state, "loaded") == 0) check_run_failures(&out->entries[i]);
        return LY_OK;
    }
    if (entries_from_lock(out->lock, &out->entries, &out->count, out->lock_error,
                          sizeof out->lock_error) != LY_OK &&
        !out->lock_error[0])
        return LY_E_NO_MEMORY;
    return LY_OK;
}

ly_status ly_hub_status_free(ly_hub_status *status)
{
    if (!status) return LY_OK;
    free(status->entries);
    status->entries = NULL;
    status->count = 0;
    return LY_OK;
}
