/* SPDX-License-Identifier: MIT */
/*
 * `libreyolo bench kernels`: every eligible implementation of every slot timed
 * on one machine in one run, next to this machine's measured copy bandwidth.
 *
 * GB/s counts the bytes an op must move at least once (every input read once,
 * every output written once, an identity backward only its gradient; 1 GB = 1e9
 * bytes), so it compares directly with the copy figure (read + write). An op that
 * reads its input twice (dynamic scales) still counts it once: the figure is what
 * the caller sees, not DRAM traffic.
 */
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/json_out.h"
#include "libreyolo/check.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define DEFAULT_SIZE_MIB 64
#define SMALL_SIZE_MIB 1
#define DEFAULT_REPEAT 5
#define LINE_BUDGET_S 2.0 /* stop repeating a slow line after this long */
#define MIN_SAMPLE_S 0.01 /* repeat a fast call inside one sample up to this long */
#define WARMUP_KEEP_S 0.2 /* a first call this slow is a sample, not just a warm-up */
#define COLS 1024         /* fp32 columns of every benchmark tensor */

void ly_cli_usage_bench_kernels(FILE *to)
{
    fputs(
        "usage: libreyolo bench kernels [--slot S] [--size-mib N] [--threads N] [--repeat R]\n"
        "                               [--json] [--no-peer]\n"
        "       libreyolo bench kernels --dispatch [--json]\n"
        "\n"
        "Times every eligible implementation of every slot (best of R after a warm-up, at most\n"
        "~2 s per line) on N MiB fp32 tensors (unpack slots: an N MiB output) and on a 1 MiB\n"
        "(cache-resident) one, and prints time, GB/s (bytes read + written by the op), the\n"
        "speed-up over \"reference\" and the fraction of this machine's copy bandwidth,\n"
        "measured in the same run (the faster of memcpy and a streaming-store copy).\n"
        "  --slot S       only slot S\n"
        "  --size-mib N   tensor size in MiB (default 64)\n"
        "  --threads N    threads per call and for the copy (default 1)\n"
        "  --repeat R     samples per line (default 5)\n"
        "  --json         one JSON object instead of the table\n"
        "  --no-peer      attention slots: skip the PyTorch peer\n"
        "  --dispatch     only the cost of one registry dispatch (a 16-element add, by op\n"
        "                 id and by name, against calling the implementation directly)\n"
        "Target (64 MiB, one thread): accelerated >= 8x reference and >= 50% of copy bandwidth.\n"
        "The attention slots (ms_deform_attn, sdpa) run on real model shapes instead, at 1 and 2\n"
        "threads (or --threads), next to PyTorch's formulation of the same op.\n",
        to);
}

/* ---- Timing --------------------------------------------------------------------- */

typedef ly_status (*bench_fn)(void *ctx);

typedef struct timing {
    double best_s;
    int samples;
} timing;

/* Best of `repeat` samples. The first call warms caches and pages and is a sample
 * only when it is slow enough for that not to matter; calls faster than 10 ms
 * are repeated inside one sample. */
static ly_status time_best(bench_fn fn, void *ctx, int repeat, timing *out)
{
    out->best_s = INFINITY;
    out->samples = 0;
    double start = ly_cli_now_s();
    ly_status st = fn(ctx);
    double first = ly_cli_now_s() - start;
    if (st != LY_OK) return st;
    if (first >= WARMUP_KEEP_S) {
        out->best_s = first;
        out->samples = 1;
    }
    long inner =
        first >= MIN_SAMPLE_S ? 1 : (long)ceil(MIN_SAMPLE_S / (first > 1e-7 ? first : 1e-7));
    if (inner > 100000) inner = 100000;
    while (out->samples < repeat && (out->samples == 0 || ly_cli_now_s() - start < LINE_BUDGET_S)) {
        double t0 = ly_cli_now_s();
        for (long i = 0; i < inner; i++) {
            st = fn(ctx);
            if (st != LY_OK) return st;
        }
        double per_call = (ly_cli_now_s() - t0) / (double)inner;
        if (per_call < out->best_s) out->best_s = per_call;
        out->samples++;
    }
    return LY_OK;
}

/* ---- Copy bandwidth ---------------------------------------------------------------- */

/* Two copies, and the faster one counts: glibc's memcpy is not always the fastest
 * way to stream large buffers (on some CPUs and VMs `rep movsb` reaches half the
 * bandwidth of non-temporal stores), and the target is relative to what the
 * memory can do, not to what memcpy happens to do. */
typedef struct copy_job {
    uint8_t *dst;
    const uint8_t *src;
    size_t bytes;
    int threads;
} copy_job;

static void memcpy_range(void *ctx, int64_t begin, int64_t end)
{
    copy_job *job = ctx;
    memcpy(job->dst + begin, job->src + begin, (size_t)(end - begin));
}

/* Ranges start at multiples of 64 KiB of 64-byte aligned buffers. */
static void streaming_range(void *ctx, int64_t begin, int64_t end)
{
    copy_job *job = ctx;
#if defined(__SSE2__)
    __m128i *d = (__m128i *)(void *)(job->dst + begin);
    const __m128i *s = (const __m128i *)(const void *)(job->src + begin);
    size_t n = (size_t)(end - begin) / 64;
    for (size_t i = 0; i < n; i++, d += 4, s += 4) {
        __m128i a = _mm_load_si128(s), b = _mm_load_si128(s + 1);
        __m128i c = _mm_load_si128(s + 2), e = _mm_load_si128(s + 3);
        _mm_stream_si128(d, a);
        _mm_stream_si128(d + 1, b);
        _mm_stream_si128(d + 2, c);
        _mm_stream_si128(d + 3, e);
    }
    size_t done = n * 64;
    memcpy(job->dst + begin + done, job->src + begin + done, (size_t)(end - begin) - done);
    _mm_sfence();
#else
    memcpy_range(ctx, begin, end);
#endif
}

typedef struct copy_part {
    copy_job *job;
    void (*range)(void *ctx, int64_t begin, int64_t end);
    int64_t begin, end;
} copy_part;

static void *copy_thread(void *arg)
{
    copy_part *p = arg;
    p->range(p->job, p->begin, p->end);
    return NULL;
}

/* The copy split over job->threads threads in 64 KiB-aligned parts (the
 * caller's thread takes the first). */
static void split_copy(copy_job *job, void (*range)(void *ctx, int64_t begin, int64_t end))
{
    enum { GRAIN = 1 << 16, MAX_THREADS = 256 };
    int64_t n = (int64_t)job->bytes;
    int t = job->threads < 1 ? 1 : job->threads > MAX_THREADS ? MAX_THREADS : job->threads;
    int64_t per = (n / t + GRAIN - 1) / GRAIN * GRAIN;
    copy_part parts[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (int i = 0; i < t; i++) {
        int64_t begin = i * per, end = begin + per < n ? begin + per : n;
        parts[i] = (copy_part){job, range, begin < n ? begin : n, end > begin ? end : begin};
        if (i > 0) started[i] = pthread_create(&ids[i], NULL, copy_thread, &parts[i]) == 0;
    }
    copy_thread(&parts[0]);
    for (int i = 1; i < t; i++) {
        if (started[i])
            pthread_join(ids[i], NULL);
        else
            copy_thread(&parts[i]);
    }
}

static ly_status run_memcpy(void *ctx)
{
    split_copy(ctx, memcpy_range);
    return LY_OK;
}

static ly_status run_streaming_copy(void *ctx)
{
    split_copy(ctx, streaming_range);
    return LY_OK;
}

/* ---- Benchmark calls (each op's recipe lives with its parity cases) ----------------- */

typedef struct bench_call {
    ly_check_call c;
    const char *slot;
    const char *impl;
} bench_call;

static ly_status run_bench_call(void *ctx)
{
    bench_call *bc = ctx;
    return ly_kernel_run_impl(bc->slot, bc->impl, &bc->c.call);
}

/* ---- Results ---------------------------------------------------------------------------- */

typedef struct row {
    char slot[64], impl[64];
    double size_bytes, bytes;
    timing t;
    ly_status status;
    char why[160];
    double speedup, copy_fraction; /* NAN when unknown */
    double reference_fraction;     /* the reference's copy_fraction at this size */
    bool speed_target;             /* the quant kernels' target applies */
} row;

typedef struct rows {
    row *items;
    size_t n, cap;
} rows;

static row *rows_add(rows *rs)
{
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? 2 * rs->cap : 64;
        row *grown = realloc(rs->items, cap * sizeof *grown);
        if (!grown) return NULL;
        rs->items = grown;
        rs->cap = cap;
    }
    row *r = &rs->items[rs->n++];
    memset(r, 0, sizeof *r);
    r->speedup = r->copy_fraction = r->reference_fraction = NAN;
    return r;
}

typedef struct impl_names {
    char name[16][64];
    int n;
} impl_names;

static void on_impl(const char *slot, const char *impl, bool eligible, const char *why_not,
                    void *user)
{
    (void)slot;
    (void)why_not;
    impl_names *names = user;
    if (!eligible || names->n == 16) return;
    /* Reference first: the others are measured against it. */
    if (strcmp(impl, "reference") == 0 && names->n > 0) {
        memmove(names->name[1], names->name[0], (size_t)names->n * sizeof names->name[0]);
        snprintf(names->name[0], sizeof names->name[0], "%s", impl);
    } else {
        snprintf(names->name[names->n], sizeof names->name[0], "%s", impl);
    }
    names->n++;
}

static void bench_slot(const char *slot, size_t numel, double copy_gbps, int threads, int repeat,
                       rows *rs, bool *out_of_memory)
{
    impl_names names = {.n = 0};
    if (ly_kernel_list(slot, on_impl, &names) != LY_OK) return;
    ly_cli_progress("bench: preparing %s, %zu MiB", slot, numel * sizeof(float) >> 20);
    bench_call bc = {.slot = slot};
    ly_status st = ly_check_bench_call(slot, numel, &bc.c);
    if (st != LY_OK) {
        row *r = rows_add(rs);
        if (!r || st == LY_E_NO_MEMORY) {
            *out_of_memory = true;
            return;
        }
        snprintf(r->slot, sizeof r->slot, "%s", slot);
        snprintf(r->impl, sizeof r->impl, "-");
        r->size_bytes = (double)numel * 4.0;
        r->status = LY_E_UNSUPPORTED;
        snprintf(r->why, sizeof r->why, "no benchmark recipe for this slot");
        return;
    }
    bc.c.call.threads = threads;
    double reference_s = NAN, reference_fraction = NAN;
    for (int i = 0; i < names.n; i++) {
        row *r = rows_add(rs);
        if (!r) {
            *out_of_memory = true;
            break;
        }
        snprintf(r->slot, sizeof r->slot, "%s", slot);
        snprintf(r->impl, sizeof r->impl, "%s", names.name[i]);
        r->size_bytes = (double)numel * 4.0;
        r->bytes = bc.c.bytes;
        r->speed_target = bc.c.speed_target;
        ly_cli_progress("bench: %s / %s, %.0f MiB", slot, r->impl, r->size_bytes / 1048576.0);
        bc.impl = names.name[i];
        r->status = time_best(run_bench_call, &bc, repeat, &r->t);
        if (r->status != LY_OK) {
            snprintf(r->why, sizeof r->why, "%s: %s", ly_status_name(r->status), ly_last_error());
            continue;
        }
        r->copy_fraction = r->bytes / r->t.best_s * 1e-9 / copy_gbps;
        if (strcmp(r->impl, "reference") == 0) {
            reference_s = r->t.best_s;
            reference_fraction = r->copy_fraction;
        }
        r->speedup = reference_s / r->t.best_s;
        r->reference_fraction = reference_fraction;
    }
    ly_check_call_free(&bc.c);
}

typedef struct copy_result {
    double size_bytes;
    double memcpy_gbps, streaming_gbps; /* read + write bytes per second / 1e9 */
    double gbps;                        /* the better of the two: what % copy refers to */
} copy_result;

static void print_json(const rows *rs, const copy_result *copies, int n_copies, int threads,
                       int repeat)
{
    printf("{\"threads\": %d, \"repeat\": %d, \"copy_bandwidth\": [", threads, repeat);
    for (int i = 0; i < n_copies; i++) {
        printf("%s{\"size_bytes\": %.0f, \"gbps\": ", i ? ", " : "", copies[i].size_bytes);
        ly_json_number(stdout, copies[i].gbps);
        printf(", \"memcpy_gbps\": ");
        ly_json_number(stdout, copies[i].memcpy_gbps);
        printf(", \"streaming_gbps\": ");
        ly_json_number(stdout, copies[i].streaming_gbps);
        printf("}");
    }
    printf("], \"results\": [");
    for (size_t i = 0; i < rs->n; i++) {
        const row *r = &rs->items[i];
        printf("%s{\"slot\": ", i ? ", " : "");
        ly_json_string(stdout, r->slot);
        printf(", \"impl\": ");
        ly_json_string(stdout, r->impl);
        printf(", \"size_bytes\": %.0f", r->size_bytes);
        if (r->status != LY_OK) {
            printf(", \"status\": ");
            ly_json_string(stdout, ly_status_name(r->status));
            printf(", \"error\": ");
            ly_json_string(stdout, r->why);
            printf("}");
            continue;
        }
        printf(", \"status\": \"LY_OK\", \"bytes\": %.0f, \"time_s\": ", r->bytes);
        ly_json_number(stdout, r->t.best_s);
        printf(", \"samples\": %d, \"gbps\": ", r->t.samples);
        ly_json_number(stdout, r->bytes / r->t.best_s * 1e-9);
        printf(", \"speedup\": ");
        ly_json_number(stdout, r->speedup);
        printf(", \"copy_fraction\": ");
        ly_json_number(stdout, r->copy_fraction);
        printf("}");
    }
    printf("]}\n");
}

static void format_size(double bytes, char *buf, size_t size)
{
    if (bytes >= 1048576.0)
        snprintf(buf, size, "%.0f MiB", bytes / 1048576.0);
    else
        snprintf(buf, size, "%.0f KiB", bytes / 1024.0);
}

static void print_table(const rows *rs, const copy_result *copies, int n_copies, int threads,
                        int repeat, double big_bytes)
{
    printf("libreyolo bench kernels: %d thread(s), best of %d (at most ~%.0f s per line)\n",
           threads, repeat, LINE_BUDGET_S);
    printf(
        "copy bandwidth (read + write bytes, the faster of memcpy and a streaming-store copy):\n");
    for (int i = 0; i < n_copies; i++) {
        char sz[32];
        format_size(copies[i].size_bytes, sz, sizeof sz);
        printf("  %7s  %6.1f GB/s  (memcpy %.1f, streaming stores %.1f)\n", sz, copies[i].gbps,
               copies[i].memcpy_gbps, copies[i].streaming_gbps);
    }
    printf("\n");
    int slot_w = 4, impl_w = 4;
    for (size_t i = 0; i < rs->n; i++) {
        int n = (int)strlen(rs->items[i].slot);
        if (n > slot_w) slot_w = n;
        n = (int)strlen(rs->items[i].impl);
        if (n > impl_w) impl_w = n;
    }
    printf("%-*s  %7s  %-*s  %10s  %7s  %8s  %7s  %s\n", slot_w, "slot", "size", impl_w, "impl",
           "time (ms)", "GB/s", "vs ref", "% copy", "target");
    const char *last_slot = "";
    for (size_t i = 0; i < rs->n; i++) {
        const row *r = &rs->items[i];
        char sz[32];
        format_size(r->size_bytes, sz, sizeof sz);
        bool same = strcmp(last_slot, r->slot) == 0;
        last_slot = r->slot;
        if (r->status != LY_OK) {
            printf("%-*s  %7s  %-*s  %s\n", slot_w, same ? "" : r->slot, sz, impl_w, r->impl,
                   r->why);
            continue;
        }
        char speed[32] = "-", frac[32] = "-";
        if (isfinite(r->speedup)) snprintf(speed, sizeof speed, "%.1fx", r->speedup);
        if (isfinite(r->copy_fraction))
            snprintf(frac, sizeof frac, "%.0f%%", r->copy_fraction * 100.0);
        const char *target = "";
        /* The target is defined for the quant kernels only. */
        if (r->speed_target && r->size_bytes == big_bytes && strcmp(r->impl, "reference") != 0 &&
            isfinite(r->speedup)) {
            bool fast = r->speedup >= 8.0, at_bandwidth = r->copy_fraction >= 0.5;
            /* A reference above 1/8 of copy bandwidth (an identity backward) cannot be
             * beaten 8x: bandwidth is all that can be asked. */
            bool reference_bound = r->reference_fraction * 8.0 > 1.0;
            if (at_bandwidth && (fast || reference_bound))
                target = fast ? "met" : "met (reference is memory-bound)";
            else if (fast)
                target = "missed: bandwidth";
            else
                target = at_bandwidth ? "missed: speed-up" : "missed: both";
        }
        printf("%-*s  %7s  %-*s  %10.3f  %7.2f  %8s  %7s  %s\n", slot_w, same ? "" : r->slot, sz,
               impl_w, r->impl, r->t.best_s * 1e3, r->bytes / r->t.best_s * 1e-9, speed, frac,
               target);
    }
    printf(
        "\nGB/s: bytes read + written by the op (1e9 B/s); vs ref: speed-up over \"reference\";\n"
        "%% copy: fraction of the copy bandwidth at the same size; target (%.0f MiB): >= 8x the\n"
        "reference and >= 50%% of copy bandwidth (defined for one thread).\n",
        big_bytes / 1048576.0);
}

static bool is_attention_slot(const char *slot)
{
    return strncmp(slot, "ms_deform_attn", 14) == 0 || strncmp(slot, "sdpa", 4) == 0;
}

int ly_cli_bench_kernels(int argc, char **argv)
{
    if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        ly_cli_usage_bench_kernels(stdout);
        return 0;
    }
    if (argc == 0 || strcmp(argv[0], "kernels") != 0) {
        fprintf(stderr, "libreyolo bench: %s\n", argc ? "unknown target" : "what to benchmark?");
        ly_cli_usage_bench_kernels(stderr);
        return 2;
    }
    const char *only_slot = NULL;
    int size_mib = DEFAULT_SIZE_MIB, threads = 1, repeat = DEFAULT_REPEAT;
    bool json = false, no_peer = false, threads_given = false, dispatch = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        bool ok = true;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            ly_cli_usage_bench_kernels(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--slot") == 0 && has_value) {
            only_slot = argv[++i];
        } else if (strcmp(a, "--size-mib") == 0 && has_value) {
            ok = ly_cli_parse_int(argv[++i], 1, 4096, &size_mib);
        } else if (strcmp(a, "--threads") == 0 && has_value) {
            ok = ly_cli_parse_int(argv[++i], 1, 64, &threads);
            threads_given = true;
        } else if (strcmp(a, "--no-peer") == 0) {
            no_peer = true;
        } else if (strcmp(a, "--dispatch") == 0) {
            dispatch = true;
        } else if (strcmp(a, "--repeat") == 0 && has_value) {
            ok = ly_cli_parse_int(argv[++i], 1, 1000, &repeat);
        } else {
            fprintf(stderr, "libreyolo bench kernels: unknown or incomplete argument '%s'\n", a);
            ly_cli_usage_bench_kernels(stderr);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "libreyolo bench kernels: %s: '%s' is out of range\n", a, argv[i]);
            return 2;
        }
    }

    if (dispatch) return ly_cli_bench_dispatch(json);

    size_t count = 0;
    if (ly_kernel_slot_count(&count) != LY_OK) {
        fprintf(stderr, "libreyolo bench kernels: %s\n", ly_last_error());
        return 1;
    }
    if (only_slot) {
        const char *dummy;
        if (ly_kernel_resolve(only_slot, NULL, &dummy, NULL) == LY_E_NOT_FOUND) {
            fprintf(stderr, "libreyolo bench kernels: %s\n", ly_last_error());
            return 2;
        }
    }

    /* --slot with an attention slot: only its own rows below. */
    bool attention_only = only_slot && is_attention_slot(only_slot);
    if (!attention_only) {
        size_t sizes[2] = {(size_t)size_mib << 20, (size_t)SMALL_SIZE_MIB << 20};
        int n_sizes = size_mib > SMALL_SIZE_MIB ? 2 : 1;

        /* Copy bandwidth at each size, between two buffers the ops do not use. */
        copy_result copies[2];
        uint8_t *src = aligned_alloc(64, sizes[0]), *dst = aligned_alloc(64, sizes[0]);
        if (!src || !dst) {
            free(src);
            free(dst);
            fprintf(stderr, "libreyolo bench kernels: cannot allocate the copy buffers\n");
            return 1;
        }
        memset(src, 1, sizes[0]);
        memset(dst, 2, sizes[0]);
        for (int s = 0; s < n_sizes; s++) {
            ly_cli_progress("bench: copy bandwidth, %zu MiB", sizes[s] >> 20);
            copy_job job = {dst, src, sizes[s], threads};
            timing with_memcpy, streaming;
            time_best(run_memcpy, &job, repeat < 5 ? 5 : repeat, &with_memcpy);
            time_best(run_streaming_copy, &job, repeat < 5 ? 5 : repeat, &streaming);
            double bytes = 2.0 * (double)sizes[s];
            copies[s] = (copy_result){(double)sizes[s], bytes / with_memcpy.best_s * 1e-9,
                                      bytes / streaming.best_s * 1e-9, 0.0};
            copies[s].gbps = copies[s].memcpy_gbps > copies[s].streaming_gbps
                                 ? copies[s].memcpy_gbps
                                 : copies[s].streaming_gbps;
        }
        free(src);
        free(dst);

        rows rs = {0};
        bool out_of_memory = false;
        for (size_t i = 0; i < count && !out_of_memory; i++) {
            const char *slot = NULL;
            if (ly_kernel_slot_name(i, &slot) != LY_OK) continue;
            if (only_slot && strcmp(slot, only_slot) != 0) continue;
            if (is_attention_slot(slot)) continue; /* their own shapes and peer, below */
            for (int s = 0; s < n_sizes && !out_of_memory; s++)
                bench_slot(slot, sizes[s] / sizeof(float), copies[s].gbps, threads, repeat, &rs,
                           &out_of_memory);
        }
        ly_cli_progress("%s", "");
        if (out_of_memory) {
            free(rs.items);
            fprintf(stderr, "libreyolo bench kernels: out of memory\n");
            return 1;
        }
        if (json)
            print_json(&rs, copies, n_sizes, threads, repeat);
        else
            print_table(&rs, copies, n_sizes, threads, repeat, (double)sizes[0]);
        free(rs.items);
    }

    ly_bench_attention_options attention = {threads_given ? threads : 0, repeat, json, no_peer};
    int rc = 0;
    if (!only_slot || strncmp(only_slot, "ms_deform_attn", 14) == 0)
        rc |= ly_cli_bench_msda(&attention);
    if (!only_slot || strncmp(only_slot, "sdpa", 4) == 0) rc |= ly_cli_bench_sdpa(&attention);
    return rc;
}
