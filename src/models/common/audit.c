/* SPDX-License-Identifier: MIT */
/* The key audit of one checkpoint-to-graph build (audit.h). */
#include "models/common/audit.h"

#include "core/core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Problems the message shows; its summary counts them all. */
enum { SHOWN = 12, KINDS = LY_PROBLEM_OTHER + 2 /* the last: keys nothing read */ };

typedef struct audit_entry {
    char *name;         /* as the rules rewrite it */
    const char *stored; /* as in the state dict, for messages */
    ly_tensor view;
    bool used;
} audit_entry;

typedef struct audit {
    const ly_state_dict *dict;
    const ly_key_rules *rules;
    audit_entry *entries; /* sorted by name */
    size_t n_entries;
    size_t count[KINDS];
    size_t problems;
    char text[3072]; /* the first SHOWN problems, "; "-separated */
    size_t text_len;
    float **zeros; /* stand-ins for tensors the state dict lacks */
    size_t n_zeros;
} audit;

/* One load is one call on one thread: the audit belongs to that call. */
static _Thread_local audit *current;

static int compare_entries(const void *a, const void *b)
{
    return strcmp(((const audit_entry *)a)->name, ((const audit_entry *)b)->name);
}

static ly_status checkpoint_at(void *user, size_t index, const char **name, ly_tensor *view)
{
    return ly_checkpoint_tensor_at(user, index, name, view);
}

static const char *checkpoint_stored_dtype(void *user, const char *name)
{
    const char *dtype = NULL;
    if (ly_checkpoint_stored_dtype(user, name, &dtype) != LY_OK) {
        ly_clear_error();
        return NULL;
    }
    return dtype;
}

ly_status ly_state_dict_of(const ly_checkpoint *ck, ly_state_dict *out)
{
    *out = (ly_state_dict){
        .at = checkpoint_at, .stored_dtype = checkpoint_stored_dtype, .user = (void *)ck};
    return ly_checkpoint_tensor_count(ck, &out->count);
}

static void record(audit *a, int kind, const char *fmt, va_list ap)
{
    a->count[kind]++;
    a->problems++;
    if (a->problems > SHOWN) return; /* the summary says how many more */
    size_t room = sizeof a->text - a->text_len;
    if (room < 3) return;
    if (a->text_len > 0) {
        memcpy(a->text + a->text_len, "; ", 3);
        a->text_len += 2;
        room -= 2;
    }
    int n = vsnprintf(a->text + a->text_len, room, fmt, ap);
    if (n > 0) a->text_len += (size_t)n < room ? (size_t)n : room - 1;
}

static void record_kind(audit *a, int kind, const char *fmt, ...) LY_PRINTF(3, 4);
static void record_kind(audit *a, int kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(a, kind, fmt, ap);
    va_end(ap);
}

void ly_audit_problem(ly_problem_kind kind, const char *fmt, ...)
{
    if (!current) return;
    va_list ap;
    va_start(ap, fmt);
    record(current, (int)kind, fmt, ap);
    va_end(ap);
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    char *s = malloc(n + m + 1);
    if (!s) return NULL;
    memcpy(s, a, n);
    memcpy(s + n, b, m + 1);
    return s;
}

/* `name` with the rules' prefixes rewritten, malloc'ed. */
static char *rewrite(const ly_key_rules *rules, const char *name)
{
    char *s = join("", name);
    for (size_t i = 0; s && rules && rules->renames && rules->renames[i][0]; i++) {
        const char *from = rules->renames[i][0];
        if (strncmp(s, from, strlen(from)) != 0) continue;
        char *renamed = join(rules->renames[i][1], s + strlen(from));
        free(s);
        s = renamed;
    }
    return s;
}

static void free_audit(audit *a)
{
    for (size_t i = 0; i < a->n_entries; i++)
        free(a->entries[i].name);
    free(a->entries);
    for (size_t i = 0; i < a->n_zeros; i++)
        free(a->zeros[i]);
    free(a->zeros);
    free(a);
}

ly_status ly_audit_begin(const ly_state_dict *dict, const ly_key_rules *rules)
{
    ly_audit_cancel();
    if (!dict || (dict->count > 0 && !dict->at))
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_audit_begin: NULL argument");
    audit *a = calloc(1, sizeof *a);
    if (!a) return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    *a = (audit){.dict = dict, .rules = rules};
    a->entries = calloc(dict->count ? dict->count : 1, sizeof *a->entries);
    if (!a->entries) {
        free(a);
        return ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
    }
    for (size_t i = 0; i < dict->count; i++) {
        const char *name = NULL;
        ly_tensor view;
        ly_status st = dict->at(dict->user, i, &name, &view);
        if (st == LY_OK && !name)
            st = ly_set_error(LY_E_FORMAT, "state-dict entry %zu has no name", i);
        audit_entry *e = &a->entries[a->n_entries];
        if (st == LY_OK) {
            e->name = rewrite(rules, name);
            if (!e->name) st = ly_set_error(LY_E_NO_MEMORY, "ly_model_load: out of memory");
        }
        if (st != LY_OK) {
            free_audit(a);
            return st;
        }
        e->stored = name;
        e->view = view;
        a->n_entries++;
    }
    qsort(a->entries, a->n_entries, sizeof *a->entries, compare_entries);
    for (size_t i = 1; i < a->n_entries; i++)
        if (strcmp(a->entries[i - 1].name, a->entries[i].name) == 0)
            record_kind(a, LY_PROBLEM_OTHER, "keys '%s' and '%s' both name '%s'",
                        a->entries[i - 1].stored, a->entries[i].stored, a->entries[i].name);
    current = a;
    return LY_OK;
}

void ly_audit_cancel(void)
{
    if (current) free_audit(current);
    current = NULL;
}

bool ly_audit_running(void)
{
    return current != NULL;
}

size_t ly_audit_problems(void)
{
    return current ? current->problems : 0;
}

static audit_entry *lookup(const char *key)
{
    audit *a = current;
    if (!a || a->n_entries == 0) return NULL; /* bsearch wants an array */
    audit_entry probe = {.name = (char *)key};
    return bsearch(&probe, a->entries, a->n_entries, sizeof probe, compare_entries);
}

bool ly_audit_find(const char *key, ly_tensor *view, const char **stored)
{
    audit_entry *e = lookup(key);
    if (!e) return false;
    e->used = true;
    if (view) *view = e->view;
    if (stored) *stored = e->stored;
    return true;
}

const char *ly_audit_stored_dtype(const char *key)
{
    const audit_entry *e = lookup(key);
    const ly_state_dict *d = current ? current->dict : NULL;
    return e && d->stored_dtype ? d->stored_dtype(d->user, e->stored) : NULL;
}

float *ly_audit_stand_in(int64_t numel)
{
    audit *a = current;
    if (!a || numel < 0) return NULL;
    float **grown = realloc(a->zeros, (a->n_zeros + 1) * sizeof *grown);
    if (!grown) return NULL;
    a->zeros = grown;
    float *z = calloc(numel > 0 ? (size_t)numel : 1, sizeof *z);
    if (z) a->zeros[a->n_zeros++] = z;
    return z;
}

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Keys a model has that carry nothing it reads. */
static bool ignorable(const ly_key_rules *rules, const char *name)
{
    static const char counter[] = ".num_batches_tracked"; /* BatchNorm's step count */
    size_t n = strlen(name), m = sizeof counter - 1;
    if (n > m && strcmp(name + n - m, counter) == 0) return true;
    for (size_t i = 0; rules && rules->ignore_exact && rules->ignore_exact[i]; i++)
        if (strcmp(name, rules->ignore_exact[i]) == 0) return true;
    for (size_t i = 0; rules && rules->ignore_prefix && rules->ignore_prefix[i]; i++)
        if (starts_with(name, rules->ignore_prefix[i])) return true;
    return false;
}

/* "2 missing keys, 1 key of the wrong shape", the kinds that occurred. */
static void summary(const audit *a, char *out, size_t cap)
{
    static const char *const one[KINDS] = {"missing key", "key of the wrong shape",
                                           "key of the wrong type", "other problem",
                                           "unexpected key"};
    static const char *const many[KINDS] = {"missing keys", "keys of the wrong shape",
                                            "keys of the wrong type", "other problems",
                                            "unexpected keys"};
    /* the order a reader checks them in: absent, misshapen, extra, the rest */
    static const int order[KINDS] = {LY_PROBLEM_MISSING, LY_PROBLEM_SHAPE, LY_PROBLEM_TYPE,
                                     KINDS - 1, LY_PROBLEM_OTHER};
    size_t at =
        (size_t)snprintf(out, cap, "%zu problem%s", a->problems, a->problems == 1 ? "" : "s");
    const char *sep = ": ";
    for (int i = 0; i < KINDS && at < cap; i++) {
        size_t n = a->count[order[i]];
        if (!n) continue;
        at += (size_t)snprintf(out + at, cap - at, "%s%zu %s", sep, n,
                               n == 1 ? one[order[i]] : many[order[i]]);
        sep = ", ";
    }
}

ly_status ly_audit_end(ly_status built, const char *context)
{
    audit *a = current;
    current = NULL;
    if (!a) return built == LY_OK || !context ? built : ly_error_prefix(built, context);
    bool failed = a->problems > 0;
    if (!failed && built != LY_OK) {
        free_audit(a);
        return context ? ly_error_prefix(built, context) : built;
    }
    /* what nothing read is only known once the whole build ran */
    for (size_t i = 0; built == LY_OK && i < a->n_entries; i++) {
        const audit_entry *e = &a->entries[i];
        if (e->used || ignorable(a->rules, e->name)) continue;
        char shape[96];
        record_kind(a, KINDS - 1, "unexpected key '%s' %s", e->stored,
                    ly_shape_str(&e->view, shape, sizeof shape));
    }
    ly_status st = LY_OK;
    if (a->problems > 0) {
        char counts[256];
        summary(a, counts, sizeof counts);
        st = ly_set_error(LY_E_FORMAT, "%s: the state dict does not fit the model (%s): %s%s",
                          context ? context : "ly_model_load", counts, a->text,
                          a->problems > SHOWN ? "; ..." : "");
    }
    free_audit(a);
    return st;
}
