/* SPDX-License-Identifier: MIT */
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
#include "kernels/hub/hub.h"
#include "kernels/registry_internal.h"
#include "ops/ops_internal.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 256
#define SELECTION_MAX LY_SELECTION_MAX

struct ly_impl {
    char *name;
    ly_kernel_fn fn;
    ly_kernel_predicate predicate;
    const ly_kernel_stateful *stateful;
    bool is_reference;
    atomic_bool disabled; /* set when it failed at run time */
};
typedef struct ly_impl impl_entry;

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

/* Slots 0 .. LY_OP_COUNT-1 are the manifest's ops, by id; later ones are slots
 * only a plugin knows (no contract: calls reach their implementations as given). */
typedef struct slot {
    char *name;
    const ly_op_def *def;
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
    while (isspace((unsigned char)*v))
        v++;
    size_t n = strlen(v);
    while (n > 0 && isspace((unsigned char)v[n - 1]))
        n--;
    if (n >= SELECTION_MAX) n = SELECTION_MAX - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = (char)tolower((unsigned char)v[i]);
    out[n] = '\0';
}

/* LIBREYOLO_KERNELS, or its legacy alias when the first is unset or empty. */
static void read_selection(char out[SELECTION_MAX])
{
    read_selection_var("LIBREYOLO_KERNELS", out);
    if (!out[0]) read_selection_var("LIBREYOLO_QUANT_KERNELS", out);
}

void ly_selection_read(ly_selection *selection)
{
    read_selection(selection->text);
}

bool ly_selection_equal(const ly_selection *a, const ly_selection *b)
{
    return strcmp(a->text, b->text) == 0;
}

uint64_t ly_kernel_generation(void)
{
    return atomic_load_explicit(&generation, memory_order_acquire);
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
    ly_op op;
    if (n >= LY_OP_COUNT && ly_op_lookup(name, &op)) return slots[op];
    for (size_t i = n >= LY_OP_COUNT ? LY_OP_COUNT : 0; i < n; i++)
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
    ly_op op;
    s->def = ly_op_lookup(name, &op) ? ly_op_def_of(op) : NULL;
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
                                 ly_kernel_predicate predicate, const ly_kernel_stateful *stateful)
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
    e->stateful = stateful;
    e->is_reference = strcmp(name, "reference") == 0;
    atomic_init(&e->disabled, false);
    list->count = old->count + 1;
    list->entries[0] = e; /* newest first */
    memcpy(&list->entries[1], old->entries, old->count * sizeof old->entries[0]);
    publish_impls_locked(s, list);
    return LY_OK;
}

/* The manifest's ops, in its order, each with its reference. */
static void register_builtin_slots(void)
{
    /* Settings are read where they apply; an unreadable LIBREYOLO_THREADS is
     * said here too, at the library's first use, whatever runs later. */
    (void)ly_threads_resolve(0);
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < LY_OP_COUNT; i++) {
        const ly_op_def *def = &ly_op_defs[i];
        if (register_locked(def->name, "reference", def->reference, NULL, NULL) != LY_OK)
            ly_log(LY_LOG_ERROR, "cannot register the reference of slot '%s'", def->name);
    }
    pthread_mutex_unlock(&registry_lock);
}

static void ensure_providers(const char *selection)
{
    pthread_once(&builtin_once, register_builtin_slots);
    if (selection_is_reference(selection)) return;
    if (atomic_load_explicit(&providers_loaded, memory_order_acquire)) return;
    pthread_mutex_lock(&providers_lock);
    if (!atomic_load(&providers_loaded)) {
        ly_providers_load();
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
    return capture_depth > 0 && !e->is_reference;
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

/* A selection that names no implementation of any slot is a typo, not a
 * choice: warn once, naming the variable and what it accepts (registry_lock
 * not held). Every slot then runs its reference, as it would for 'reference'. */
static void check_selection_names_something(const char *selection)
{
    if (!selection[0] || selection_is_reference(selection) || ly_hub_pins(selection)) return;
    char names[256] = "";
    size_t n = atomic_load_explicit(&slot_count, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        impl_list *list = atomic_load_explicit(&slots[i]->impls, memory_order_acquire);
        for (size_t k = 0; list && k < list->count; k++) {
            const char *name = list->entries[k]->name;
            if (strcmp(name, selection) == 0) return;
            if (strcmp(name, "reference") == 0) continue;
            char quoted[80];
            snprintf(quoted, sizeof quoted, "%s,", name);
            if (!strstr(names, quoted) && strlen(names) + strlen(quoted) + 1 < sizeof names)
                strcat(names, quoted);
        }
    }
    char key[SELECTION_MAX + 32];
    snprintf(key, sizeof key, "selection:%s", selection);
    ly_warn_once(key,
                 "LIBREYOLO_KERNELS='%s' names no implementation here; it accepts reference, off "
                 "or one of: %.*s (every op runs its portable reference)",
                 selection, (int)(strlen(names) ? strlen(names) - 1 : 0), names);
}

/* The cached resolution of `s` for `selection`, rebuilt when the registry
 * changed or the selection variables did. */
static resolution *get_resolution(slot *s, const char *selection)
{
    uint64_t gen = atomic_load_explicit(&generation, memory_order_acquire);
    resolution *r = atomic_load_explicit(&s->cache, memory_order_acquire);
    if (r && r->generation == gen && strcmp(r->selection, selection) == 0) return r;
    /* before the lock: the hub takes its own lock, then the registry's */
    check_selection_names_something(selection);
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

/* The call with its params, the defaults where it has none. */
static const ly_kernel_call *with_params(const ly_op_def *def, const ly_kernel_call *call,
                                         ly_kernel_call *resolved)
{
    if (call->params || !def) return call;
    *resolved = *call;
    resolved->params = def->defaults;
    return resolved;
}

ly_status ly_kernel_call_init(ly_kernel_call *call)
{
    if (!call) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_kernel_call_init: call is NULL");
    *call = (ly_kernel_call){.params = NULL, .threads = 0};
    return LY_OK;
}

static ly_status check_registration(const char *fn, const char *slot_name, const char *name)
{
    ly_status st = validate_slot_name(fn, slot_name);
    if (st != LY_OK) return st;
    if (!name || !*name)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: slot '%s': name is empty", fn, slot_name);
    return LY_OK;
}

static ly_status register_public(const char *slot_name, const char *name, ly_kernel_fn fn,
                                 ly_kernel_predicate predicate, const ly_kernel_stateful *stateful)
{
    pthread_once(&builtin_once, register_builtin_slots);
    pthread_mutex_lock(&registry_lock);
    ly_status st = register_locked(slot_name, name, fn, predicate, stateful);
    pthread_mutex_unlock(&registry_lock);
    return st;
}

ly_status ly_kernel_register(const char *slot_name, const char *name, ly_kernel_fn fn,
                             ly_kernel_predicate predicate)
{
    ly_status st = check_registration("ly_kernel_register", slot_name, name);
    if (st != LY_OK) return st;
    if (!fn)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_kernel_register: slot '%s': fn is NULL",
                            slot_name);
    return register_public(slot_name, name, fn, predicate, NULL);
}

ly_status ly_kernel_register_impl(const ly_kernel_impl_desc *desc)
{
    if (!desc || desc->struct_size < sizeof *desc)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_kernel_register_impl: desc is NULL or older than this library "
                            "(struct_size %u, expected %zu)",
                            desc ? desc->struct_size : 0u, sizeof *desc);
    ly_status st = check_registration("ly_kernel_register_impl", desc->slot, desc->name);
    if (st != LY_OK) return st;
    const ly_kernel_stateful *sf = desc->stateful;
    if (sf && (!sf->prepare || !sf->run || !sf->release))
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_kernel_register_impl: slot '%s', '%s': a stateful implementation "
                            "needs prepare, run and release",
                            desc->slot, desc->name);
    if (!desc->fn && !sf)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_kernel_register_impl: slot '%s', '%s': neither fn nor stateful",
                            desc->slot, desc->name);
    return register_public(desc->slot, desc->name, desc->fn, desc->predicate, sf);
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
        if (strcmp(old->entries[i]->name, name) != 0)
            list->entries[list->count++] = old->entries[i];
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

/* The same for a manifest op: no name to look up. */
static slot *op_slot(ly_op op, const char *selection)
{
    ensure_providers(selection);
    return (unsigned)op < LY_OP_COUNT ? slots[op] : NULL;
}

ly_status ly_kernel_iter(const char *slot_name, const ly_kernel_call *call,
                         ly_kernel_visit_fn visit, void *user)
{
    char selection[SELECTION_MAX];
    slot *s;
    ly_status st = lookup("ly_kernel_iter", slot_name, selection, &s);
    if (st != LY_OK) return st;
    if (!visit) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_kernel_iter: visit is NULL");
    ly_kernel_call resolved;
    if (call) call = with_params(s->def, call, &resolved);
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
    bool found;
} first_hit;

static bool take_first(const char *name, ly_kernel_fn fn, void *user)
{
    first_hit *hit = user;
    hit->name = name;
    hit->fn = fn;
    hit->found = true;
    return false;
}

ly_status ly_kernel_resolve(const char *slot_name, const ly_kernel_call *call,
                            const char **name_out, ly_kernel_fn *fn_out)
{
    first_hit hit = {NULL, NULL, false};
    ly_status st = ly_kernel_iter(slot_name, call, take_first, &hit);
    if (st != LY_OK) return st;
    if (name_out) *name_out = hit.name;
    if (fn_out) *fn_out = hit.fn;
    if (!hit.found)
        return ly_set_error(LY_E_UNAVAILABLE, "slot '%s': no eligible implementation", slot_name);
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

static ly_status infer_with(const ly_op_def *def, const ly_kernel_call *call,
                            ly_tensor outputs[LY_KERNEL_MAX_OUTPUTS], int *n_out)
{
    memset(outputs, 0, LY_KERNEL_MAX_OUTPUTS * sizeof outputs[0]);
    *n_out = 0;
    ly_kernel_call resolved;
    return def->contract(with_params(def, call, &resolved), outputs, n_out);
}

ly_status ly_kernel_infer_outputs(const char *slot_name, const ly_kernel_call *call,
                                  ly_tensor outputs[LY_KERNEL_MAX_OUTPUTS], int *n_out)
{
    if (!slot_name || !call || !outputs || !n_out)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "ly_kernel_infer_outputs: slot, call, outputs and n_out are required");
    ly_op op;
    if (!ly_op_lookup(slot_name, &op))
        return ly_set_error(LY_E_NOT_FOUND, "slot '%s' is unknown or has no contract", slot_name);
    return infer_with(ly_op_def_of(op), call, outputs, n_out);
}

/* Check the inputs (through the slot's contract) and that the caller's outputs
 * have the shapes and dtypes the contract gives; *use is the call to run. */
static ly_status validate_call(const slot *s, const ly_kernel_call *call, ly_kernel_call *resolved,
                               const ly_kernel_call **use)
{
    *use = call;
    if (!call) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: call is NULL", s->name);
    if (!s->def) return LY_OK;
    *use = with_params(s->def, call, resolved);
    ly_tensor expected[LY_KERNEL_MAX_OUTPUTS];
    int n_out = 0;
    ly_status st = infer_with(s->def, *use, expected, &n_out);
    if (st != LY_OK) return st;
    static const char *const names[LY_KERNEL_MAX_OUTPUTS] = {"out[0]", "out[1]", "out[2]"};
    for (int i = 0; i < n_out; i++) {
        st = ly_check_operand(call->out[i], s->name, names[i], expected[i].dtype);
        if (st != LY_OK) return st;
        bool same = call->out[i]->ndim == expected[i].ndim;
        for (int d = 0; same && d < expected[i].ndim; d++)
            same = call->out[i]->shape[d] == expected[i].shape[d];
        if (!same) {
            char what[96];
            snprintf(what, sizeof what, "%s: %s", s->name, names[i]);
            return ly_check_same_shape(&expected[i], "the slot's output", call->out[i], what);
        }
    }
    return LY_OK;
}

ly_status ly_kernel_validate(ly_op op, const ly_kernel_call *call, ly_kernel_call *resolved,
                             const ly_kernel_call **use)
{
    pthread_once(&builtin_once, register_builtin_slots);
    if ((unsigned)op >= LY_OP_COUNT)
        return ly_set_error(LY_E_NOT_FOUND, "ly_kernel_validate: op %d is not in the manifest",
                            (int)op);
    return validate_call(slots[op], call, resolved, use);
}

static impl_entry *find_impl(const slot *s, const char *name)
{
    impl_list *list = atomic_load_explicit(&s->impls, memory_order_acquire);
    for (size_t i = 0; i < list->count; i++)
        if (strcmp(list->entries[i]->name, name) == 0) return list->entries[i];
    return NULL;
}

/* ---- running one implementation ------------------------------------------------ */

/* A stateful implementation prepared for `call` outside a graph: maps plain,
 * every input given a constant. */
static ly_status prepare_plain(const ly_impl *e, const ly_kernel_call *call, void **state)
{
    ly_kernel_prepare_info info = {.threads = ly_threads_resolve(call->threads)};
    for (int i = 0; i < LY_KERNEL_MAX_INPUTS; i++)
        if (call->in[i]) info.constant_inputs |= 1u << i;
    return e->stateful->prepare(call, &info, state);
}

ly_status ly_impl_run(const ly_impl *e, const ly_kernel_call *call)
{
    if (e->fn) return e->fn(call);
    /* Stateful only: prepare, run and release for this one call. */
    void *state = NULL;
    ly_status st = prepare_plain(e, call, &state);
    if (st != LY_OK) return st;
    st = e->stateful->run(state, call);
    e->stateful->release(state);
    return st;
}

const char *ly_impl_name(const ly_impl *impl)
{
    return impl->name;
}

ly_kernel_fn ly_impl_fn(const ly_impl *impl)
{
    return impl->fn;
}

const ly_kernel_stateful *ly_impl_stateful(const ly_impl *impl)
{
    return impl->stateful;
}

bool ly_impl_is_reference(const ly_impl *impl)
{
    return impl->is_reference;
}

static void disable(const slot *s, impl_entry *e, ly_status st)
{
    atomic_store(&e->disabled, true);
    atomic_fetch_add(&generation, 1); /* plans made with it are stale */
    char key[256];
    snprintf(key, sizeof key, "failed:%s:%s", s->name, e->name);
    ly_warn_once(key,
                 "kernel '%s' for slot '%s' failed (%s: %s); it is disabled for this "
                 "process and the next implementation takes over",
                 e->name, s->name, ly_status_name(st), ly_last_error());
}

void ly_kernel_disable(ly_op op, const ly_impl *impl, ly_status status)
{
    impl_entry *e = (impl_entry *)impl;
    if ((unsigned)op >= LY_OP_COUNT || e->is_reference) return;
    disable(slots[op], e, status);
}

/* Walk r's entries from `from`, running the first that accepts the call. */
static ly_status run_from(slot *s, resolution *r, size_t from, const ly_kernel_call *call,
                          const char *selection)
{
    for (size_t i = from; i < r->count; i++) {
        impl_entry *e = r->entries[i];
        const char *why_not;
        if (atomic_load_explicit(&e->disabled, memory_order_relaxed)) continue;
        if (declined_by_capture(e)) continue;
        if (check_predicate(s, e, call, &why_not) != LY_OK) continue;
        ly_status st = ly_impl_run(e, call);
        if (st == LY_OK) return LY_OK;
        if (st == LY_E_DECLINED) continue;
        /* The reference defines the result, errors included. */
        if (e->is_reference) return st;
        disable(s, e, st);
    }
    return ly_set_error(LY_E_UNAVAILABLE,
                        "%s: no implementation accepted this call (LIBREYOLO_KERNELS='%s')",
                        s->name, selection);
}

static ly_status dispatch_on(slot *s, const ly_kernel_call *call, const char *selection)
{
    ly_kernel_call resolved;
    const ly_kernel_call *use;
    ly_status st = validate_call(s, call, &resolved, &use);
    if (st != LY_OK) return st;
    resolution *r = get_resolution(s, selection);
    if (!r) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", s->name);
    return run_from(s, r, 0, use, selection);
}

ly_status ly_kernel_dispatch(const char *slot_name, const ly_kernel_call *call)
{
    char selection[SELECTION_MAX];
    slot *s;
    ly_status st = lookup("ly_kernel_dispatch", slot_name, selection, &s);
    if (st != LY_OK) return st;
    return dispatch_on(s, call, selection);
}

ly_status ly_kernel_dispatch_op(ly_op op, const ly_kernel_call *call)
{
    char selection[SELECTION_MAX];
    read_selection(selection);
    slot *s = op_slot(op, selection);
    if (!s)
        return ly_set_error(LY_E_NOT_FOUND, "ly_kernel_dispatch_op: op %d is not in the manifest",
                            (int)op);
    return dispatch_on(s, call, selection);
}

ly_status ly_kernel_select(ly_op op, const ly_selection *selection, const ly_kernel_call *call,
                           const ly_impl **out)
{
    slot *s = op_slot(op, selection->text);
    if (!s)
        return ly_set_error(LY_E_NOT_FOUND, "ly_kernel_select: op %d is not in the manifest",
                            (int)op);
    resolution *r = get_resolution(s, selection->text);
    if (!r) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", s->name);
    for (size_t i = 0; i < r->count; i++) {
        impl_entry *e = r->entries[i];
        const char *why_not;
        if (atomic_load_explicit(&e->disabled, memory_order_relaxed)) continue;
        if (declined_by_capture(e)) continue;
        if (check_predicate(s, e, call, &why_not) != LY_OK) continue;
        *out = e;
        return LY_OK;
    }
    return ly_set_error(LY_E_UNAVAILABLE,
                        "%s: no implementation accepts this call (LIBREYOLO_KERNELS='%s')", s->name,
                        selection->text);
}

const ly_impl *ly_kernel_select_in_place(ly_op op, const ly_tensor *y, int threads)
{
    ly_tensor view = *y;
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    call.in[0] = &view;
    call.out[0] = &view;
    call.threads = threads;
    ly_selection selection;
    ly_selection_read(&selection);
    const ly_impl *impl = NULL;
    if (ly_kernel_select(op, &selection, &call, &impl) != LY_OK) {
        ly_clear_error();
        return NULL;
    }
    return ly_impl_is_reference(impl) ? NULL : impl;
}

ly_status ly_kernel_fallback(ly_op op, const ly_selection *selection, const ly_impl *impl,
                             ly_status status, const ly_kernel_call *call)
{
    slot *s = op_slot(op, selection->text);
    if (!s)
        return ly_set_error(LY_E_NOT_FOUND, "ly_kernel_fallback: op %d is not in the manifest",
                            (int)op);
    impl_entry *e = (impl_entry *)impl;
    if (status != LY_E_DECLINED) {
        if (e->is_reference) return status;
        disable(s, e, status);
    }
    resolution *r = get_resolution(s, selection->text);
    if (!r) return ly_set_error(LY_E_NO_MEMORY, "%s: out of memory", s->name);
    size_t from = 0;
    for (size_t i = 0; i < r->count; i++)
        if (r->entries[i] == e) from = i + 1;
    return run_from(s, r, from, call, selection->text);
}

/* Slot `slot_name`'s implementation `impl`, eligible for `call` (validated:
 * *use is the call to run, possibly `resolved`). */
static ly_status eligible_impl(const char *fn, const char *slot_name, const char *impl,
                               const ly_kernel_call *call, slot **out_slot, impl_entry **out,
                               ly_kernel_call *resolved, const ly_kernel_call **use)
{
    char selection[SELECTION_MAX];
    slot *s;
    ly_status st = lookup(fn, slot_name, selection, &s);
    if (st != LY_OK) return st;
    *out_slot = s;
    if (!impl) return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: impl name is NULL", s->name);
    st = validate_call(s, call, resolved, use);
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
        check_predicate(s, e, *use, &why_not) != LY_OK)
        return ly_set_error(LY_E_UNAVAILABLE, "%s: implementation '%s' is not eligible: %s",
                            s->name, impl, why_not);
    *out = e;
    return LY_OK;
}

ly_status ly_kernel_run_impl(const char *slot_name, const char *impl, const ly_kernel_call *call)
{
    slot *s;
    impl_entry *e = NULL;
    ly_kernel_call resolved;
    const ly_kernel_call *use;
    ly_status st =
        eligible_impl("ly_kernel_run_impl", slot_name, impl, call, &s, &e, &resolved, &use);
    return st == LY_OK ? ly_impl_run(e, use) : st;
}

struct ly_kernel_prepared {
    slot *s;
    impl_entry *e;
    void *state; /* the stateful form's, or NULL: the function runs */
};

ly_status ly_kernel_prepare_impl(const char *slot_name, const char *impl,
                                 const ly_kernel_call *call, ly_kernel_prepared **out)
{
    if (!out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_kernel_prepare_impl: out is NULL");
    *out = NULL;
    slot *s;
    impl_entry *e = NULL;
    ly_kernel_call resolved;
    const ly_kernel_call *use;
    ly_status st =
        eligible_impl("ly_kernel_prepare_impl", slot_name, impl, call, &s, &e, &resolved, &use);
    if (st != LY_OK) return st;
    ly_kernel_prepared *p = calloc(1, sizeof *p);
    if (!p) return ly_set_error(LY_E_NO_MEMORY, "%s/%s: out of memory", s->name, e->name);
    p->s = s;
    p->e = e;
    if (e->stateful) {
        st = prepare_plain(e, use, &p->state);
        if (st != LY_OK) {
            free(p);
            if (st == LY_E_DECLINED)
                return ly_set_error(LY_E_DECLINED,
                                    "%s: implementation '%s' does not prepare this call on plain "
                                    "maps (a graph gives it blocked ones)",
                                    s->name, e->name);
            return st;
        }
    }
    *out = p;
    return LY_OK;
}

ly_status ly_kernel_prepared_run(ly_kernel_prepared *p, const ly_kernel_call *call)
{
    if (!p) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_kernel_prepared_run: handle is NULL");
    ly_kernel_call resolved;
    const ly_kernel_call *use;
    ly_status st = validate_call(p->s, call, &resolved, &use);
    if (st != LY_OK) return st;
    return p->e->stateful ? p->e->stateful->run(p->state, use) : p->e->fn(use);
}

ly_status ly_kernel_prepared_free(ly_kernel_prepared *p)
{
    if (!p) return LY_OK;
    if (p->state) p->e->stateful->release(p->state);
    free(p);
    return LY_OK;
}
