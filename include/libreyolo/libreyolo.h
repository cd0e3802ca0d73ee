/* SPDX-License-Identifier: MIT */
/*
 * libreyolo: the runtime core of LibreYOLO.
 *
 * Conventions shared by every public header:
 *  - Every function that can fail returns ly_status. On failure a human-readable
 *    message naming the file, field or argument and what was expected is kept
 *    per thread and returned by ly_last_error().
 *  - Tensors are plain C-contiguous views (ly_tensor): the caller owns memory.
 *  - Nothing aborts or exits on bad input.
 */
#ifndef LIBREYOLO_LIBREYOLO_H
#define LIBREYOLO_LIBREYOLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LY_API __attribute__((visibility("default")))
#define LY_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define LY_API
#define LY_PRINTF(fmt, args)
#endif

#define LY_VERSION_STRING "0.1.0"

typedef enum ly_status {
    LY_OK = 0,
    LY_E_INVALID_ARGUMENT = 1, /* null pointer, value out of range, unknown option */
    LY_E_SHAPE = 2,            /* tensor shapes that do not fit together */
    LY_E_DTYPE = 3,            /* tensor of the wrong element type */
    LY_E_UNSUPPORTED = 4,      /* valid request this build or machine cannot serve */
    LY_E_NOT_FOUND = 5,        /* unknown slot, implementation, file or key */
    LY_E_IO = 6,               /* the operating system refused a read or write */
    LY_E_FORMAT = 7,           /* a file or payload that is malformed or truncated */
    LY_E_NO_MEMORY = 8,
    LY_E_UNAVAILABLE = 9, /* no implementation is eligible for this call */
    LY_E_DECLINED = 10,   /* an implementation declines this input: try the next one */
    LY_E_PROVIDER = 11,   /* an accelerated implementation failed at run time */
    LY_E_INTERNAL = 12
} ly_status;

/* Short stable name of a status ("LY_E_SHAPE"); never NULL. */
LY_API const char *ly_status_name(ly_status status);

/* The message of the last failure on this thread ("" if none). Valid until the
 * next libreyolo call on the same thread. */
LY_API const char *ly_last_error(void);

/* Library version, e.g. "0.1.0". */
LY_API const char *ly_version(void);

/* "Did you mean": of the n candidates, the one most like `word` by difflib's
 * SequenceMatcher ratio, if it is at least 0.6 (Python's
 * difflib.get_close_matches(word, candidates, n=1)), else NULL. The result is
 * one of the candidates. */
LY_API const char *ly_closest_word(const char *word, const char *const *candidates, size_t n);

/* The threads a call asking for `requested` runs on: `requested` when > 0,
 * else LIBREYOLO_THREADS when set to a positive count, else the logical CPUs. */
LY_API ly_status ly_thread_count(int requested, int *threads);

/* ---- Logging ------------------------------------------------------------ */

typedef enum ly_log_level {
    LY_LOG_DEBUG = 0,
    LY_LOG_INFO = 1,
    LY_LOG_WARNING = 2,
    LY_LOG_ERROR = 3,
    LY_LOG_OFF = 4
} ly_log_level;

typedef void (*ly_log_fn)(ly_log_level level, const char *message, void *user);

/* Route library messages to `fn` (NULL restores the default: stderr, filtered
 * by LIBREYOLO_LOG = debug|info|warning|error|off, default warning).
 * Messages at a level below `min_level` are dropped before `fn` sees them. */
LY_API ly_status ly_set_log_handler(ly_log_fn fn, void *user, ly_log_level min_level);

/* ---- Tensors ------------------------------------------------------------ */

typedef enum ly_dtype {
    LY_F32 = 0,
    LY_F64 = 1,
    LY_I8 = 2,
    LY_U8 = 3,
    LY_I32 = 4,
    LY_I64 = 5,
    LY_F8E4M3 = 6, /* one byte per element: OCP E4M3FN code */
    LY_F16 = 7     /* storage only */
} ly_dtype;

#define LY_MAX_DIMS 8

/* A C-contiguous view of caller-owned memory. */
typedef struct ly_tensor {
    void *data;
    ly_dtype dtype;
    int ndim;
    int64_t shape[LY_MAX_DIMS];
} ly_tensor;

/* Size in bytes of one element of `dtype`; 0 for an unknown dtype. */
LY_API size_t ly_dtype_size(ly_dtype dtype);

/* Lower-case name ("f32", "u8", "f8e4m3", ...); "?" for an unknown dtype. */
LY_API const char *ly_dtype_name(ly_dtype dtype);

/* Fill `t` as a view of `data` with the given shape. Fails on ndim outside
 * [0, LY_MAX_DIMS] or a negative extent. */
LY_API ly_status ly_tensor_init(ly_tensor *t, void *data, ly_dtype dtype, int ndim,
                                const int64_t *shape);

/* Element count (1 for a 0-d tensor); -1 for NULL or an invalid shape. */
static inline int64_t ly_tensor_numel(const ly_tensor *t)
{
    if (!t || t->ndim < 0 || t->ndim > LY_MAX_DIMS) return -1;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0) return -1;
        n *= t->shape[i];
    }
    return n;
}

#ifdef __cplusplus
}
#endif

#endif
