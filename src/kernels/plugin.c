/* SPDX-License-Identifier: MIT */
/*
 * Out-of-tree providers: shared libraries named libreyolo_kernels*.so, found on
 * LIBREYOLO_KERNELS_PATH, in <libdir>/libreyolo/plugins relative to the library
 * (where the CUDA plugin installs), and next to the running executable.
 *
 * A plugin's registrations are staged while its entry point runs and committed
 * only if it returns LY_OK and was built for this API version, so a library
 * that fails half-way leaves nothing behind.
 */
#include "core/core.h"
#include "kernels/hub/hub.h"
#include "kernels/registry_internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PLUGIN_PREFIX "libreyolo_kernels"
#define PLUGIN_SUFFIX ".so"
#define MAX_STAGED 256
#define MAX_LOADED 64

typedef struct staged {
    char slot[96];
    char name[64];
    ly_kernel_fn fn;
    ly_kernel_predicate predicate;
    const ly_kernel_stateful *stateful;
} staged;

/* Only touched while the registry's providers lock is held (loading is serialised). */
static staged stage[MAX_STAGED];
static size_t staged_count;
static bool stage_overflow;

static ly_status stage_register(const char *slot, const char *name, ly_kernel_fn fn,
                                ly_kernel_predicate predicate)
{
    if (!slot || !*slot || !name || !*name || !fn)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "plugin register_kernel: slot, name and fn are required");
    if (strlen(slot) >= sizeof stage[0].slot || strlen(name) >= sizeof stage[0].name)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "plugin register_kernel: name too long");
    if (staged_count == MAX_STAGED) {
        stage_overflow = true;
        return ly_set_error(LY_E_NO_MEMORY, "plugin register_kernel: more than %d registrations",
                            MAX_STAGED);
    }
    staged *s = &stage[staged_count++];
    snprintf(s->slot, sizeof s->slot, "%s", slot);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->fn = fn;
    s->predicate = predicate;
    s->stateful = NULL;
    return LY_OK;
}

static ly_status stage_register_impl(const ly_kernel_impl_desc *desc)
{
    if (!desc || desc->struct_size < sizeof *desc)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "plugin register_impl: desc is NULL or too old");
    if (!desc->fn && !desc->stateful)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "plugin register_impl: neither fn nor stateful is set");
    const ly_kernel_stateful *sf = desc->stateful;
    if (sf && (!sf->prepare || !sf->run || !sf->release))
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "plugin register_impl: a stateful implementation needs prepare, run "
                            "and release");
    if (!desc->slot || !*desc->slot || !desc->name || !*desc->name)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "plugin register_impl: slot and name are required");
    if (strlen(desc->slot) >= sizeof stage[0].slot || strlen(desc->name) >= sizeof stage[0].name)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "plugin register_impl: name too long");
    if (staged_count == MAX_STAGED) {
        stage_overflow = true;
        return ly_set_error(LY_E_NO_MEMORY, "plugin register_impl: more than %d registrations",
                            MAX_STAGED);
    }
    staged *s = &stage[staged_count++];
    snprintf(s->slot, sizeof s->slot, "%s", desc->slot);
    snprintf(s->name, sizeof s->name, "%s", desc->name);
    s->fn = desc->fn;
    s->predicate = desc->predicate;
    s->stateful = sf;
    return LY_OK;
}

static ly_status plugin_run_reference(const char *slot, const ly_kernel_call *call)
{
    return ly_kernel_run_impl(slot, "reference", call);
}

static ly_status plugin_set_error(ly_status status, const char *message)
{
    return ly_set_error(status, "%s", message ? message : "");
}

static bool is_plugin_name(const char *name)
{
    size_t n = strlen(name), p = strlen(PLUGIN_PREFIX), x = strlen(PLUGIN_SUFFIX);
    return n > p + x - 1 && strncmp(name, PLUGIN_PREFIX, p) == 0 &&
           strcmp(name + n - x, PLUGIN_SUFFIX) == 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct loaded_set {
    char *paths[MAX_LOADED];
    size_t count;
} loaded_set;

/* Open one library, run its entry point and commit what it staged. When
 * `only_name` is set (the hub), every registration must be named so and be for
 * one of `only_slots`, or nothing is committed. On failure the error says why
 * (without the path) and the library is closed. */
static ly_status load_library(const char *path, const char *only_name,
                              const char *const *only_slots, size_t n_only_slots,
                              size_t *registered)
{
    *registered = 0;
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        return ly_set_error(LY_E_IO, "cannot load it: %s", why ? why : "dlopen failed");
    }
    ly_kernel_plugin_entry_fn entry;
    *(void **)&entry = dlsym(handle, LY_KERNEL_PLUGIN_ENTRY);
    if (!entry) {
        dlclose(handle);
        return ly_set_error(LY_E_FORMAT, "it does not export %s", LY_KERNEL_PLUGIN_ENTRY);
    }
    /* Plugins keep the table to call back later (run_reference): it lives as
     * long as the process, never in this frame. */
    static ly_kernel_plugin_api api;
    api = (ly_kernel_plugin_api){
        .api_version = LY_KERNEL_PLUGIN_API_VERSION,
        .struct_size = sizeof api,
        .cpu = ly_cpu(),
        .register_kernel = stage_register,
        .run_reference = plugin_run_reference,
        .set_error = plugin_set_error,
        .capturing = ly_kernels_capturing,
        .register_impl = stage_register_impl,
    };
    staged_count = 0;
    stage_overflow = false;
    uint32_t built_for = 0;
    ly_clear_error();
    ly_status st = entry(&api, &built_for);
    if (built_for != LY_KERNEL_PLUGIN_API_VERSION) {
        dlclose(handle);
        if (built_for < 3)
            return ly_set_error(LY_E_UNSUPPORTED,
                                "built for plugin API version %u, this library provides version "
                                "%u, where each op's call carries its own parameters struct "
                                "(libreyolo/ops.h) instead of one shared ly_kernel_params: "
                                "rebuild the plugin against this library's headers",
                                built_for, LY_KERNEL_PLUGIN_API_VERSION);
        return ly_set_error(LY_E_UNSUPPORTED,
                            "built for plugin API version %u, this library provides version %u",
                            built_for, LY_KERNEL_PLUGIN_API_VERSION);
    }
    if (st != LY_OK || stage_overflow) {
        char why[512];
        snprintf(why, sizeof why, "%s", ly_last_error());
        dlclose(handle);
        return ly_set_error(st != LY_OK ? st : LY_E_NO_MEMORY, "its entry point failed: %s: %s",
                            ly_status_name(st), why);
    }
    for (size_t i = 0; only_name && i < staged_count; i++) {
        bool slot_ok = false;
        for (size_t j = 0; j < n_only_slots; j++)
            slot_ok = slot_ok || strcmp(stage[i].slot, only_slots[j]) == 0;
        if (!slot_ok || strcmp(stage[i].name, only_name) != 0) {
            dlclose(handle);
            return ly_set_error(LY_E_FORMAT,
                                "it registers '%s' for slot '%s', which the lock does not pin",
                                stage[i].name, stage[i].slot);
        }
    }
    /* The handle stays open for the life of the process: the registry holds its
     * function pointers. */
    for (size_t i = 0; i < staged_count; i++) {
        ly_kernel_impl_desc desc = {.struct_size = sizeof desc,
                                    .slot = stage[i].slot,
                                    .name = stage[i].name,
                                    .fn = stage[i].fn,
                                    .predicate = stage[i].predicate,
                                    .stateful = stage[i].stateful};
        if (ly_kernel_register_impl(&desc) != LY_OK)
            ly_log(LY_LOG_WARNING, "kernel plugin %s: registering %s/%s failed: %s", path,
                   stage[i].slot, stage[i].name, ly_last_error());
        else
            ++*registered;
    }
    ly_log(LY_LOG_DEBUG, "kernel plugin %s: %zu implementations registered", path, staged_count);
    return LY_OK;
}

ly_status ly_plugin_load_file(const char *path, const char *name, const char *const *slots,
                              size_t n_slots, size_t *registered)
{
    size_t count = 0;
    ly_status st = load_library(path, name, slots, n_slots, &count);
    if (registered) *registered = count;
    return st;
}

static void load_one(const char *path, loaded_set *loaded)
{
    char real[PATH_MAX];
    if (!realpath(path, real)) snprintf(real, sizeof real, "%s", path);
    for (size_t i = 0; i < loaded->count; i++)
        if (strcmp(loaded->paths[i], real) == 0) return; /* listed twice on the path */
    if (loaded->count == MAX_LOADED) {
        ly_log(LY_LOG_WARNING, "kernel plugin %s skipped: more than %d plugins", path, MAX_LOADED);
        return;
    }
    loaded->paths[loaded->count++] = strdup(real);
    size_t registered;
    if (load_library(path, NULL, NULL, 0, &registered) != LY_OK)
        ly_log(LY_LOG_WARNING, "kernel plugin %s skipped: %s", path, ly_last_error());
}

static void load_directory(const char *dir, loaded_set *loaded)
{
    DIR *d = opendir(dir);
    if (!d) return; /* a missing directory on a search path is normal */
    char *names[MAX_LOADED];
    size_t n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL && n < MAX_LOADED)
        if (is_plugin_name(ent->d_name)) {
            names[n] = strdup(ent->d_name);
            if (names[n]) n++;
        }
    closedir(d);
    qsort(names, n, sizeof names[0], compare_names);
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) < (int)sizeof path)
            load_one(path, loaded);
        free(names[i]);
    }
}

void ly_plugins_load(void)
{
    loaded_set loaded = {.count = 0};
    const char *env = getenv("LIBREYOLO_KERNELS_PATH");
    if (env && *env) {
        char *copy = strdup(env);
        char *save = NULL;
        for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir;
             dir = strtok_r(NULL, ":", &save))
            load_directory(dir, &loaded);
        free(copy);
    }
    char dirs[2][LY_PATH_MAX];
    int n_dirs = ly_plugin_dirs(dirs, 2);
    for (int i = 0; i < n_dirs; i++)
        load_directory(dirs[i], &loaded);
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            load_directory(exe, &loaded);
        }
    }
    for (size_t i = 0; i < loaded.count; i++)
        free(loaded.paths[i]);
}
