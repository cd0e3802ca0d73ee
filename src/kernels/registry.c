/*
 * The kernel registry.
 *
 * Writers (register, unregister, clear_cache) serialise on one mutex and publish
 * immutable snapshots through atomic pointers; readers (dispatch, resolve) only
 * load those pointers, so the hot path takes no lock. Replaced snapshots are
 * retired, not freed: a reader may still be walking one, registry changes are
 * rare (start-up, plugins, tests), and a retired snapshot is a few hundred bytes.
 */
#include "core/core.h"
#include "kernels/registry_internal.h"
#include "kernels/hub/hub.h"
#include "kernels/slot.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 256
#define SELECTION_MAX 64

typedef struct impl_entry {
    char *name;
    ly_kernel_fn fn;
    ly_kernel_predicate predicate;
    atomic_bool disabled; /* set when it failed at run time */
} impl_entry;

/* Every implementation of a slot, newest first. Immutable once published. */
typedef struct impl_list {
    size_t count;
    impl_entry *entries[];
} impl_list;

/* The implementations allowed by one selection value and this machine: what a
 * call walks, after its own predicate check. Immutable once published. */
typedef struct resolution {
    uint64_t generation;
    char selection[SELECTION_MAX];
    size_t count;
    impl_entry *entries[];
} resolution;

typedef struct slot {
    char *name;
    const ly_slot_def *def; /* NULL for a slot only a plugin knows: no validation */
    _Atomic(impl_list *) impls;
    _Atomic(resolution *) cache;
} slot;

typedef struct retired {
    struct retired *next;
    void *ptr;
} retired;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static slot *slots[MAX_SLOTS];
static atomic_size_t slot_count;
static atomic_uint_fast64_t generation = 1;
static retired *retired_list;

static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t providers_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool providers_loaded;

/* ---- selection ----------------------------------------------------------- */

static void read_selection_var(const char *var, char out[SELECTION_MAX])
{
    out[0] = '\0';
    const char *v = getenv(var);
    if (!v) return;
    while (isspace((unsigned char)*v)) v++;
    size_t n = strlen(v);
    while (n > 0 && isspace((unsigned char)v[n - 1])) n--;
    if (n >= SELECTION_MAX) n = SELECTION_MAX - 1;
    for (size_t i = 0; i < n; i++) out[i] = (char)tolower((unsigned char)v[i]);
    out[n] = '\0';
}

/* LIBREYOLO_KERNELS, or its legacy alias when the first is unset or empty. */
static void read_selection(char out[SELECTION_MAX])
{
    read_selection_var("LIBREYOLO_KERNELS", out);
    if (!out[0]) read_selection_var("LIBREYOLO_QUANT_KERNELS", out);
}

static bool selection_is_reference(const char *selection)
{
    return strcmp(selection, "off") == 0 || strcmp(selection, "reference") == 0;
}

static bool selection_allows(const char *selection, const char *name)
{
    if (strcmp(name, "reference") == 0 || !selection[0]) return true;
    if (selection_is_reference(selection)) return false;
    return strcmp(selection, name) == 0;
}

/* ---- slots and snapshots (writers hold registry_lock) ----------------------- */

static void retire(void *ptr)
{
    if (!ptr) return;
    retired *r = malloc(sizeof *r);
    if (!r) return; /* leaking is the safe failure: a reader may still hold ptr */
    r->ptr = ptr;
    r->next = retired_list;
    retired_list = r;
}

static slot *find_slot(const char *name)
{
    size_t n = atomic_load_explicit(&slot_count, memory_order_acquire);
    for (size_t i = 0; i < n; i++)
        if (strcmp(slots[i]->name, name) == 0) return slots[i];
    return NULL;
}

static slot *find_or_add_slot_locked(const char *name)
{
    slot *s = find_slot(name);
    if (s) return s;
    size_t n = atomic_load(&slot_count);
    if (n == MAX_SLOTS) return NULL;
    s = calloc(1, sizeof *s);
    char *copy = strdup(name);
    impl_list *empty = calloc(1, sizeof *empty);
    if (!s || !copy || !empty) {
        free(s);
        free(copy);
        free(empty);
        return NULL;
    }
    s->name = copy;
    s->def = ly_slot_def_find(name);
    atomic_init(&s->impls, empty);
    atomic_init(&s->cache, NULL);
    slots[n] = s;
    atomic_store_explicit(&slot_count, n + 1, memory_order_release);
    return s;
}

static void publish_impls_locked(slot *s, impl_list *list)
{
    retire(atomic_exchange(&s->impls, list));
    atomic_fetch_add(&generation, 1);
}

static ly_status validate_slot_name(const char *fn, const char *slot_name)
{
    if (!slot_name || !*slot_name)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: slot name is NULL or empty", fn);
    return LY_OK;
}

static ly_status register_locked(const char *slot_name, const char *name, ly_kernel_fn fn,
                                 ly_kernel_predicate predicate)
{
    slot *s = find_or_add_slot_locked(slot_name);
    if (!s)
        return ly_set_error(LY_E_NO_MEMORY, "ly_kernel_register: cannot add slot '%s'", slot_name);
    impl_list *old = atomic_load(&s->impls);
    impl_list *list = malloc(sizeof *list + (old->count + 1) * sizeof list->entries[0]);
    impl_entry *e = calloc(1, sizeof *e);
    char *copy = strdup(name);
    if (!list || !e || !copy) {
        free(list);
        free(e);
        free(copy);
        return ly_set_error(LY_E_NO_MEMORY, "ly_kernel_register: out of memory");
    }
    e->name = copy;
    e->fn = fn;
    e->predicate = predicate;
    atomic_init(&e->disabled, false);
    list->count = old->count + 1;
    list->entries[0] = e; /* newest first */
    memcpy(&list->entries[1], old->entries, old->count * sizeof old->entries[0]);
    publish_impls_locked(s, list);
    return LY_OK;
}

/* The builtin slot tables, in registration order. */
static const struct {
    const ly_slot_def *defs;
    const size_t *count;
} builtin_tables[] = {
    {ly_quant_slots, &ly_quant_slot_count},
    {ly_nn_slots, &ly_nn_slot_count},
    {ly_msda_slots, &ly_msda_slot_count},
    {ly_sdpa_slots, &ly_sdpa_slot_count},
};

static void register_builtin_slots(void)
{
    pthread_mutex_lock(&registry_lock);
    for (size_t t = 0; t < sizeof builtin_tables / sizeof builtin_tables[0]; t++)
        for (size_t i = 0; i < *builtin_tables[t].count; i++) {
            const ly_slot_def *def = &builtin_tables[t].defs[i];
            if (register_locked(def->name, "reference", def->reference, NULL) != LY_OK)
                ly_log(LY_LOG_ERROR, "cannot register the reference of slot '%s'", def->name);
        }
    pthread_mutex_unlock(&registry_lock);
}

const ly_slot_def *ly_slot_def_find(const char *name)
{
    for (size_t t = 0; t < sizeof builtin_tables / sizeof builtin_tables[0]; t++)
        for (size_t i = 0; i < *builtin_tables[t].count; i++)
            if (strcmp(builtin_tables[t].defs[i].name, name) == 0)
                return &builtin_tables[t].defs[i];
    return NULL;
}

/* Out-of-tree libraries first, then the in-tree providers, so in-tree
 * implementations are newer and win when eligible (as upstream, where the
 * out-of-tree package is imported before the lazy in-tree providers). */
static void ensure_providers(const char *selection)
{
    pthread_once(&builtin_once, register_builtin_slots);
    if (selection_is_reference(selection)) return;
    if (atomic_load_explicit(&providers_loaded, memory_order_acquire)) return;
    pthread_mutex_lock(&providers_lock);
    if (!atomic_load(&providers_loaded)) {
        ly_plugins_load();
#ifdef LY_HAVE_AVX2_PROVIDERS
        ly_register_quant_avx2();
#endif
        ly_register_nn_providers();
        ly_register_msda_providers();
        ly_register_sdpa_providers();
        /* Pinned hub providers last: upstream prefers them where eligible. */
        ly_hub_load();
        atomic_store_explicit(&providers_loaded, true, memory_order_release);
    }
    pthread_mutex_unlock(&providers_lock);
}

/* ---- eligibility ----------------------------------------------------------- */

static _Thread_local int capture_depth;

ly_status ly_kernels_capture_begin(void)
{
    capture_depth++;
    return LY_OK;
}

ly_status ly_kernels_capture_end(void)
{
    if (capture_depth <= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_kernels_capture_end: no capture is running on this thread");
    capture_depth--;
    return LY_OK;
}

bool ly_kernels_capturing(void)
{
    return capture_depth > 0;
}

/* Exported programs carry the portable math: during a capture only the
 * reference serves (checked per call, never cached). */
static bool declined_by_capture(const impl_entry *e)
{
    return capture_depth > 0 && strcmp(e->name, "reference") != 0;
}

/* LY_OK eligible; LY_E_DECLINED not (why_not set); a predicate error is warned
 * about once and counts as not eligible. */
static ly_status check_predicate(const slot *s, const impl_entry *e, const ly_kernel_call *call,
                                 const char **why_not)
{
    *why_not = NULL;
    if (!e->predicate) return LY_OK;
    const char *reason = NULL;
    ly_status st = e->predicate(call, ly_cpu(), &reason);
    if (st == LY_OK) return LY_OK;
    if (st == LY_E_DECLINED) {
        *why_not = reason ? reason : "declined by its predicate";
        return LY_E_DECLINED;
    }
    char key[256];
    snprintf(key, sizeof key, "predicate:%s:%s", s->name, e->name);
    ly_warn_once(key, "Kernel predicate failed for %s (slot %s): %s: %s", e->name, s->name,
                 ly_status_name(st), ly_last_error());
    *why_not = "its predicate reported an error";
    return LY_E_DECLINED;
}

static resolution *build_resolution(slot *s, const char *selection, uint64_t gen)
{
    impl_list *list = atomic_load_explicit(&s->impls, memory_order_acquire);
    resolution *r = malloc(sizeof *r + list->count * sizeof r->entries[0]);
    if (!r) return NULL;
    r->generation = gen;
    snprintf(r->selection, sizeof r->selection, "%s", selection);
    r->count = 0;
    for (size_t i = 0; i < list->count; i++) {
        impl_entry *e = list->entries[i];
        const char *why_not;
        if (!selection_allows(selection, e->name)) continue;
        if (check_predicate(s, e, NULL, &why_not) != LY_OK) continue;
        r->entries[r->count++] = e;
    }
    return r;
}

/* The cached resolution of `s` for `selection`, rebuilt when the registry
 * changed or the selection variables did. */
static resolution *get_resolution(slot *s, const char *selection)
{
    uint64_t gen = atomic_load_explicit(&generation, memory_order_acquire);
    resolution *r = atomic_load_explicit(&s->cache, memory_order_acquire);
    if (r && r->generation == gen && strcmp(r->selection, selection) == 0) return r;
    pthread_mutex_lock(&registry_lock);
    gen = atomic_load(&generation);
    r = atomic_load(&s->cache);
    if (!r || r->generation != gen || strcmp(r->selection, selection) != 0) {
        resolution *fresh = build_resolution(s, selection, gen);
        if (fresh) {
            retire(atomic_exchange(&s->cache, fresh));
            r = fresh;
        } else if (r) {
            r = NULL;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return r;
}

/* ---- public API ------------------------------------------------------------ */

ly_status ly_kernel_call_init(ly_kernel_call *call)
{
    if (!call) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_kernel_call_init: call is NULL");
    *call = (ly_kernel_call){
        .params = {.axis = 0,
                   .bits = 4,
                   .group_size = 128,
                   .in_features = -1,
                   .stride = {1, 1},
                   .dilation = {1, 1},
                   .kernel = {1, 1},
                   .groups = 1,
                   .activation = LY_ACT_NONE,
                   .scale = 2,
                   .count_include_pad = 1,
                   .alpha = 0.01,
                   .half_pixel_centers = 1},
    };
    return LY_OK;
}

ly_status ly_kernel_register(const char *slot_name, const char *name, ly_kernel_fn fn,
                             ly_kernel_predicate predicate)
{
    ly_status st = validate_slot_name("ly_kernel_register", slot_name);
    if (st != LY_OK) return st;
    if (!name || !*name)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_kernel_register: slot '%s': name is empty",
                            slot_name);
    if (!fn)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_kernel_register: slot '%s': fn is NULL",
                            slot_name);
    pthread_once(&builtin_once, register_builtin_slots);
    pthread_mutex_lock(&registry_lock);
    st = register_locked(slot_name, name, fn, predicate);
    pthread_mutex_unlock(&registry_lock);
    return st;
}

ly_status ly_kernel_unregister(const char *slot_name, const char *name)
{
    ly_status st = validate_slot_name("ly_kernel_unregister", slot_name);
    if (st != LY_OK) return st;
    if (!name) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_kernel_unregister: name is NULL");
    pthread_once(&builtin_once, register_builtin_slots);
    pthread_mutex_lock(&registry_lock);
    slot *s = find_or_add_slot_locked(slot_name);
    if (!s) {
        pthread_mutex_unlock(&registry_lock);
        return ly_set_error(LY_E_NO_MEMORY, "ly_kernel_unregister: cannot add slot '%s'",
                            slot_name);
    }
    impl_list *old = atomic_load(&s->impls);
    impl_list *list = malloc(sizeof *list + old->count * sizeof list->entries[0]);
    if (!list) {
        pthread_mutex_unlock(&registry_lock);
        return ly_set_error(LY_E_NO_MEMORY, "ly_kernel_unregister: out of memory");
    }
    list->count = 0;
    for (size_t i = 0; i < old->count; i++)
        if (strcmp(old->entries[i]->name, name) != 0) list->entries[list->count++] = old->entries[i];
    publish_impls_locked(s, list);
    pthread_mutex_unlock(&registry_lock);
    return LY_OK;
}

ly_status ly_kernel_clear_cache(void)
{
    atomic_fetch_add(&generation, 1);
    return LY_OK;
}

/* Look up a slot after making sure the providers the selection allows exist. */
static ly_status lookup(const char *fn, const char *slot_name, char selection[SELECTION_MAX],
                        slot **out)
{
    ly_status st = validate_slot_name(fn, slot_name);
    if (st != LY_OK) return st;
    read_selection(selection);
    ensure_providers(selection);
    *out = find_slot(slot_name);
    if (!*out) return ly_set_error(LY_E_NOT_FOUND, "%s: unknown slot '%s'", fn, slot_name);
    return LY_OK;
}

ly_status ly_kernel_iter(const char *slot_name, const ly_kernel_call *call,
                         ly_kernel_visit_fn visit, void *user)
{
    char selection[SELECTION_MAX];
    slot *s;
    ly_status st = lookup("ly_kernel_iter", slot_name, selection, &s);
    if (st != LY_OK) return st;
    if (!visit) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_kernel_iter: visit is NULL");
    resolution *r = get_resolution(s, selection);
    if (!r) return ly_set_error(LY_E_NO_MEMORY, "ly_kernel_iter: out of memory");
    for (size_t i = 0; i < r->count; i++) {
        impl_entry *e = r->entries[i];
        const char *why_not;
        if (atomic_load_explicit(&e->disabled, memory_order_relaxed)) continue;
        if (declined_by_capture(e)) continue;
        if (call && check_predicate(s, e, call, &why_not) != LY_OK) continue;
        if (!visit(e->name, e->fn, user)) break;
    }
    return LY_OK;
}

typedef struct first_hit {
    const char *name;
    ly_kernel_fn fn;
} first_hit;

static bool take_first(const char *name, ly_kernel_fn fn, void *user)
{
    first_hit *hit = user;
    hit->name = name;
    hit->fn = fn;
    return false;
}

ly_status ly_kernel_resolve(const char *slot_name, const ly_kernel_call *call,
                            const char **name_out, ly_kernel_fn *fn_out)
{
    first_hit hit = {NULL, NULL};
    ly_status st = ly_kernel_iter(slot_name, call, take_first, &hit);
    if (st != LY_OK) return st;
    if (name_out) *name_out = hit.name;
    if (fn_out) *fn_out = hit.fn;
    if (!hit.fn)
        return ly_set_error(LY_E_UNAVAILABLE, "slot '%s': no eligible implementation",
                            slot_name);
    return LY_OK;
}

ly_status ly_kernel_active(ly_kernel_active_fn visit, void *user)
{
    if (!visit) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_kernel_active: visit is NULL");
    char selection[SELECTION_MAX];
    read_selection(selection);
    ensure_providers(selection);
    size_t n = atomic_load_explicit(&slot_count, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        const char *name = NULL;
        ly_status st = ly_kernel_resolve(slots[i]->name, NULL, &name, NULL);
        visit(slots[i]->name, st == LY_OK ? name : "unavailable", user);
    }
    ly_clear_error();
    return LY_OK;
}

ly_status ly_kernel_list(const char *slot_name, ly_kernel_list_fn visit, void *user)
{
    char selection[SELECTION_MAX];
    slot *s;
    ly_status st = lookup("ly_kernel_list", slot_name, selection, &s);
    if (st != LY_OK) return st;
    if (!visit) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_kernel_list: visit is NULL");
    impl_list *list = atomic_load_explicit(&s->impls, memory_order_acquire);
    for (size_t i = 0; i < list->count; i++) {
        impl_entry *e = list->entries[i];
        const char *why_not = NULL;
        if (!selection_allows(selection, e->name))
            why_not = "not selected by LIBREYOLO_KERNELS";
        else if (atomic_load(&e->disabled))
            why_not = "disabled after a run-time failure";
        else if (declined_by_capture(e))
            why_not = "a graph is being captured for export";
        else
            check_predicate(s, e, NULL, &why_not);
        visit(s->name, e->name, why_not == NULL, why_not, user);
    }
    return LY_OK;
}

ly_status ly_kernel_slot_count(size_t *count)
{
    if (!count) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_kernel_slot_count: count is NULL");
    pthread_once(&builtin_once, register_builtin_slots);
    *count = atomic_load_explicit(&slot_count, memory_order_acquire);
    return LY_OK;
}

ly_status ly_kernel_slot_name(size_t index, const char **name)
{
    if (!name) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_kernel_slot_name: name is NULL");
    pthread_once(&builtin_once, register_builtin_slots);
    size_t n = atomic_load_explicit(&slot_count, memory_order_acquire);
    if (index >= n)
        return ly_set_error(LY_E_NOT_FOUND, "ly_kernel_slot_name: index %zu, there are %zu slots",
                            index, n);
    *name = slots[index]->name;
    return LY_OK;
}

ly_status ly_kernel_infer_outputs(const char *slot_name, const ly_kernel_call *call,
                                  ly_tensor outputs[LY_KERNEL_MAX_OUTPUTS], int *n_out)
{
    if (!slot_name || !call || !outputs || !n_out)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_kernel_infer_outputs: slot, call, outputs and n_out are required");
    const ly_slot_def *def = ly_slot_def_find(slot_name);
    if (!def)
        return ly_set_error(LY_E_NOT_FOUND, "slot '%s' is unknown or has no contract", slot_name);
    memset(outputs, 0, LY_KERNEL_MAX_OUTPUTS * sizeof outputs[0]);
    *n_out = 0;
    return def->infer(call, outputs, n_out);
}

/* Check the inputs (through the slot's contract) and that the caller's outputs
 * have the shapes and dtypes the contract gives. */
static ly_status validate_call(const slot *s, const ly_kernel_call *call)
{
    if (!call) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: call is NULL", s->name);
    if (!s->def) return LY_OK;
    ly_tensor expected[LY_KERNEL_MAX_OUTPUTS];
    int n_out = 0;
    ly_status st = ly_kernel_infer_outputs(s->name, call, expected, &n_out);
    if (st != LY_OK) return st;
    for (int i = 0; i < n_out; i++) {
        char what[96];
        snprintf(what, sizeof what, "%s: out[%d]", s->name, i);
        st = ly_check_tensor(call->out[i], what, expected[i].dtype);
        if (st != LY_OK) return st;
        st = ly_check_same_shape(&expected[i], "the slot's output", call->out[i], what);
        if (st != LY_OK) return st;
    }
    return LY_OK;
}

static impl_entry *find_impl(const slot *s, const char *name)
{
    impl_list *list = atomic_load_explicit(&s->impls, memory_order_acquire);
    for (size_t i = 0; i < list->count; i++)
        if (strcmp(list->entries[i]->name, name) == 0) return list->entries[i];
    return NULL;
}

ly_status ly_kernel_dispatch(const char *slot_name, const ly_kernel_call *call)
{
    char selection[SELECTION_MAX];
    slot *s;
    ly_status st = lookup("ly_kernel_dispatch", slot_name, selection, &s);
    if (st != LY_OK) return st;
    st = validate_call(s, call);
    if (st != LY_OK) return st;
    resolution *r = get_resolution(s, selection);
    if (!r) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", s->name);
    for (size_t i = 0; i < r->count; i++) {
        impl_entry *e = r->entries[i];
        const char *why_not;
        if (atomic_load_explicit(&e->disabled, memory_order_relaxed)) continue;
        if (declined_by_capture(e)) continue;
        if (check_predicate(s, e, call, &why_not) != LY_OK) continue;
        st = e->fn(call);
        if (st == LY_OK || st == LY_E_DECLINED) {
            if (st == LY_OK) return LY_OK;
            continue;
        }
        /* The reference defines the result, errors included. */
        if (strcmp(e->name, "reference") == 0) return st;
        atomic_store(&e->disabled, true);
        char key[256];
        snprintf(key, sizeof key, "failed:%s:%s", s->name, e->name);
        ly_warn_once(key,
                     "kernel '%s' for slot '%s' failed (%s: %s); it is disabled for this "
                     "process and the next implementation takes over",
                     e->name, s->name, ly_status_name(st), ly_last_error());
    }
    return ly_set_error(LY_E_UNAVAILABLE,
                        "%s: no implementation accepted this call (LIBREYOLO_KERNELS='%s')",
                        s->name, selection);
}

ly_status ly_kernel_run_impl(const char *slot_name, const char *impl, const ly_kernel_call *call)
{
    char selection[SELECTION_MAX];
    slot *s;
    ly_status st = lookup("ly_kernel_run_impl", slot_name, selection, &s);
    if (st != LY_OK) return st;
    if (!impl) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: impl name is NULL", s->name);
    st = validate_call(s, call);
    if (st != LY_OK) return st;
    impl_entry *e = find_impl(s, impl);
    if (!e) {
        if (selection_is_reference(selection))
            return ly_set_error(LY_E_NOT_FOUND,
                                "%s: no implementation named '%s' (LIBREYOLO_KERNELS='%s' skips "
                                "loading accelerated providers)",
                                s->name, impl, selection);
        return ly_set_error(LY_E_NOT_FOUND, "%s: no implementation named '%s'", s->name, impl);
    }
    const char *why_not;
    if (declined_by_capture(e))
        return ly_set_error(LY_E_UNAVAILABLE,
                            "%s: implementation '%s' is not eligible: a graph is being captured "
                            "for export",
                            s->name, impl);
    if (check_predicate(s, e, NULL, &why_not) != LY_OK ||
        check_predicate(s, e, call, &why_not) != LY_OK)
        return ly_set_error(LY_E_UNAVAILABLE, "%s: implementation '%s' is not eligible: %s",
                            s->name, impl, why_not);
    return e->fn(call);
}
