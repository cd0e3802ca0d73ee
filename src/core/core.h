/* SPDX-License-Identifier: MIT */
/* Internal core services: errors, logging, threads, validation helpers. */
#ifndef LY_CORE_CORE_H
#define LY_CORE_CORE_H

#include "libreyolo/kernels.h"

#include <stdarg.h>

/* Record `status` with a formatted message as this thread's last error and
 * return `status`, so failures read `return ly_set_error(LY_E_SHAPE, ...)`. */
ly_status ly_set_error(ly_status status, const char *fmt, ...) LY_PRINTF(2, 3);
ly_status ly_set_errorv(ly_status status, const char *fmt, va_list ap);
void ly_clear_error(void);
/* Re-set the current error with `context: ` in front of its message. */
ly_status ly_error_prefix(ly_status status, const char *context);

/* The shortest decimal that reads back as `v` (as a float32 when `single`):
 * what a user wrote, as Python's repr shows it ("0.45", not "0.449999988"). */
const char *ly_shortest_decimal(double v, bool single, char *buf, size_t size);

/* A monotonic clock, in milliseconds. */
double ly_now_ms(void);

/* Log a message through the installed handler (default: stderr, filtered by
 * LIBREYOLO_LOG). */
void ly_log(ly_log_level level, const char *fmt, ...) LY_PRINTF(2, 3);
/* Log a warning only the first time `key` is seen in this process. */
void ly_warn_once(const char *key, const char *fmt, ...) LY_PRINTF(2, 3);

/* Number of worker threads for a request: `requested` if > 0, else
 * LIBREYOLO_THREADS if set to a positive integer, else the logical CPUs. */
int ly_threads_resolve(int requested);

/* Run fn(ctx, begin, end) over [0, n) split into at most `threads` contiguous
 * ranges whose boundaries are multiples of `grain` (except the last end).
 * Runs inline when threads <= 1 or n <= grain. Never fails: a thread that
 * cannot be started has its range run on the calling thread. */
typedef void (*ly_range_fn)(void *ctx, int64_t begin, int64_t end);
void ly_parallel_for(int64_t n, int64_t grain, int threads, ly_range_fn fn, void *ctx);

/* A thread pool ly_parallel_for hands its ranges to on the calling thread,
 * instead of OpenMP's team or threads of its own: run(pool, task, arg, n)
 * calls task(arg, i) for i in [0, n) and returns when all are done. Code that
 * drives another pool (the XNNPACK delegate's pthreadpool) installs it so that
 * one set of workers serves the whole run; two pools' spinning workers on the
 * same cores slow each other down by several times. */
typedef struct ly_parallel_runner {
    void (*run)(void *pool, void (*task)(void *arg, size_t i), void *arg, size_t n);
    void *pool;
} ly_parallel_runner;
/* Install `runner` for this thread (NULL: the default); returns the previous one. */
const ly_parallel_runner *ly_parallel_use(const ly_parallel_runner *runner);

/* Where the library is at run time (src/core/paths.c): the directory of the
 * shared library or of the executable it is linked into. */
bool ly_self_dir(char *out, size_t size);
/* A file the library ships (the hub lock): <datadir>/libreyolo/<name> of the
 * install the library is part of, or the build tree's <build>/share/libreyolo. */
bool ly_data_file(const char *name, char *out, size_t size);
/* The plugin directories relative to the library (<libdir>/libreyolo/plugins);
 * fills dirs[0..n), returns n. */
#define LY_PATH_MAX 4096
int ly_plugin_dirs(char dirs[][LY_PATH_MAX], int max);

/* Cached CPU features of this machine (never fails). */
const ly_cpu_features *ly_cpu(void);

/* A function built for AVX-512F inside a translation unit built for a lower
 * ISA; call it only where ly_cpu()->avx512f. */
#define LY_AVX512 __attribute__((target("avx512f")))

/* Tensor checks used by slot validators. `what` names the operand in messages,
 * e.g. "fake_quant_fp8: scale". Each returns LY_OK or sets the error. */
ly_status ly_check_tensor(const ly_tensor *t, const char *what, ly_dtype dtype);
/* The same, naming it "op: name" (formatted only on failure: contracts run on
 * every call). */
ly_status ly_check_operand(const ly_tensor *t, const char *op, const char *name, ly_dtype dtype);
/* While the calling thread plans from shapes (a graph), tensors may have no
 * data: the checks above skip that test. Nests. */
void ly_shapes_only_begin(void);
void ly_shapes_only_end(void);
ly_status ly_check_same_shape(const ly_tensor *a, const char *what_a, const ly_tensor *b,
                              const char *what_b);
/* "[2, 3, 4]" into buf. */
const char *ly_shape_str(const ly_tensor *t, char *buf, size_t size);

#endif
