/* SPDX-License-Identifier: MIT */
/*
 * The key audit of one checkpoint-to-graph build (internal), as LibreYOLO's
 * strict load_state_dict: while a build runs, every key it reads is marked,
 * every missing or misshapen key and every bad value is recorded (the builder
 * then goes on with zeros standing in, so one load finds them all), and at
 * the end the keys nothing read are listed with them, in one LY_E_FORMAT
 * message.
 *
 * The audit belongs to the loading thread (one load is one call on one
 * thread): ly_audit_begin makes it current, ly_audit_end reports and frees it.
 * Builders (builder.h) find it themselves, so a family's pieces need not pass
 * it along; without one they read the checkpoint directly and stop at the
 * first problem.
 */
#ifndef LY_MODELS_COMMON_AUDIT_H
#define LY_MODELS_COMMON_AUDIT_H

#include "libreyolo/checkpoint.h"

#include <stdbool.h>

/* Keys built by the toolkit are far shorter: prefix + module path + field. */
#define LY_KEY_MAX 192

/* A state dict: `count` tensors visited by index (names as stored), and
 * optionally the element type each had in its file ("int8", ...). A
 * checkpoint is one (ly_state_dict_of); tests hand builders their own. */
typedef struct ly_state_dict {
    size_t count;
    ly_status (*at)(void *user, size_t index, const char **name, ly_tensor *view);
    const char *(*stored_dtype)(void *user, const char *name); /* NULL: unknown */
    void *user;
} ly_state_dict;

ly_status ly_state_dict_of(const ly_checkpoint *ck, ly_state_dict *out);

/* What a family says about its keys beyond the module tree: prefixes that
 * name the same key (rewritten in order, each at most once: {"module.", ""}
 * drops DDP's), and keys that carry nothing the model reads (exact names and
 * name prefixes; BatchNorm's num_batches_tracked is always such a key).
 * Lists are NULL-terminated; any may be NULL. */
typedef struct ly_key_rules {
    const char *const (*renames)[2];
    const char *const *ignore_exact;
    const char *const *ignore_prefix;
} ly_key_rules;

/* Start the audit of `dict` (its names rewritten by `rules`, which may be
 * NULL). Names that end up equal are a problem already. */
ly_status ly_audit_begin(const ly_state_dict *dict, const ly_key_rules *rules);

/* End the audit and give the load's status: the audit's message when keys
 * were missing or misshapen or values bad (whatever `built` says: those come
 * first), else `built` prefixed with `context` when the build failed, else
 * the audit's message when some keys were not read, else LY_OK. The message
 * is "<context>: the state dict does not fit the model (N problems: ...):
 * <the first 12>". No audit running: `built`, prefixed when it failed. */
ly_status ly_audit_end(ly_status built, const char *context);

/* End the audit without a word: the load failed before its build. */
void ly_audit_cancel(void);

/* Whether an audit runs on this thread, and the problems it recorded so far
 * (keys not read are not counted: they are known at the end only). */
bool ly_audit_running(void);
size_t ly_audit_problems(void);

/* The audit's entry for `key` (as the rules rewrite names), marked read, or
 * false when the state dict has no such key. `stored` (may be NULL) gets the
 * name as stored. */
bool ly_audit_find(const char *key, ly_tensor *view, const char **stored);
/* The element type `key` had in its file, or NULL when unknown. */
const char *ly_audit_stored_dtype(const char *key);

/* Record a problem (missing, misshapen, of another type, or a bad value:
 * counted apart in the summary). The text names the key. */
typedef enum ly_problem_kind {
    LY_PROBLEM_MISSING,
    LY_PROBLEM_SHAPE,
    LY_PROBLEM_TYPE,
    LY_PROBLEM_OTHER
} ly_problem_kind;
void ly_audit_problem(ly_problem_kind kind, const char *fmt, ...) LY_PRINTF(2, 3);

/* Zeros of `numel` floats, owned by the audit, that stand in for a tensor the
 * state dict lacks so the build goes on; NULL when out of memory. */
float *ly_audit_stand_in(int64_t numel);

#endif
