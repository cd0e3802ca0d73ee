/* SPDX-License-Identifier: MIT */
#include "core/core.h"

#include <time.h>

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>

int ly_threads_resolve(int requested)
{
    if (requested > 0) return requested;
    const char *env = getenv("LIBREYOLO_THREADS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v > 0 && v <= 1024) return (int)v;
        ly_warn_once("LIBREYOLO_THREADS",
                     "LIBREYOLO_THREADS='%.40s' is not a thread count (a whole number from 1 to "
                     "1024): using all %d CPUs",
                     env, ly_cpu()->logical_cpus);
    }
    return ly_cpu()->logical_cpus;
}

typedef struct range_task {
    ly_range_fn fn;
    void *ctx;
    int64_t begin, end;
} range_task;

static void *run_range(void *arg)
{
    range_task *t = arg;
    t->fn(t->ctx, t->begin, t->end);
    return NULL;
}

/* Where the process has GNU OpenMP (oneDNN's CPU runtime in Debian), ranges
 * run on its thread team. Its workers spin-wait after each oneDNN call: a
 * thread of our own started then competes with a spinning worker for the same
 * core (an element-wise add on 2 cores ran 3x slower with 2 threads than with
 * 1). Found at run time, so the library links no OpenMP of its own and a build
 * without oneDNN is unchanged; not under TSan, which cannot see into libgomp. */
typedef struct omp_api {
    void (*parallel)(void (*fn)(void *), void *data, unsigned threads, unsigned flags);
    int (*thread_num)(void);
    int (*num_threads)(void);
} omp_api;

static omp_api omp;
static pthread_once_t omp_once = PTHREAD_ONCE_INIT;

static void find_omp(void)
{
#ifndef LY_TSAN
    omp_api found;
    *(void **)&found.parallel = dlsym(RTLD_DEFAULT, "GOMP_parallel");
    *(void **)&found.thread_num = dlsym(RTLD_DEFAULT, "omp_get_thread_num");
    *(void **)&found.num_threads = dlsym(RTLD_DEFAULT, "omp_get_num_threads");
    if (found.parallel && found.thread_num && found.num_threads) omp = found;
#endif
}

typedef struct omp_job {
    range_task *tasks;
    int n;
} omp_job;

/* Each member of the team takes every team-size'th task (a nested call gets a
 * team of one, which takes them all). */
static void omp_member(void *arg)
{
    const omp_job *j = arg;
    int step = omp.num_threads();
    for (int i = omp.thread_num(); i<j->n; i += step> 0 ? step : 1)
        run_range(&j->tasks[i]);
}

static _Thread_local const ly_parallel_runner *runner;

const ly_parallel_runner *ly_parallel_use(const ly_parallel_runner *r)
{
    const ly_parallel_runner *previous = runner;
    runner = r;
    return previous;
}

static void runner_task(void *arg, size_t i)
{
    run_range(&((range_task *)arg)[i]);
}

/* Otherwise threads are started per call: the kernels that use this work on
 * tensors of many megabytes, where thread start-up (~20 us) is noise, and
 * there is no pool to own, size or tear down. */
void ly_parallel_for(int64_t n, int64_t grain, int threads, ly_range_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t grains = (n + grain - 1) / grain;
    if (threads > 64) threads = 64;
    if (threads <= 1 || grains <= 1) {
        fn(ctx, 0, n);
        return;
    }
    if (threads > grains) threads = (int)grains;
    range_task tasks[64];
    pthread_t ids[64];
    bool started[64] = {false};
    for (int i = 0; i < threads; i++) {
        int64_t g0 = grains * i / threads, g1 = grains * (i + 1) / threads;
        tasks[i] = (range_task){fn, ctx, g0 * grain, g1 * grain < n ? g1 * grain : n};
    }
    if (runner) {
        runner->run(runner->pool, runner_task, tasks, (size_t)threads);
        return;
    }
    pthread_once(&omp_once, find_omp);
    if (omp.parallel) {
        omp_job j = {tasks, threads};
        omp.parallel(omp_member, &j, (unsigned)threads, 0);
        return;
    }
    for (int i = 1; i < threads; i++)
        started[i] = pthread_create(&ids[i], NULL, run_range, &tasks[i]) == 0;
    run_range(&tasks[0]);
    for (int i = 1; i < threads; i++) {
        if (started[i])
            pthread_join(ids[i], NULL);
        else
            run_range(&tasks[i]);
    }
}

ly_status ly_thread_count(int requested, int *threads)
{
    if (!threads) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_thread_count: threads is NULL");
    *threads = ly_threads_resolve(requested);
    return LY_OK;
}

double ly_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}
