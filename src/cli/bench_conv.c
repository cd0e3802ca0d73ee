/* SPDX-License-Identifier: MIT */
/*
 * `libreyolo bench conv`: every conv2d implementation timed on the convolutions
 * of one LibreYOLO9t forward at 640x640 (yolo9.md §1.2 and keys_LibreYOLO9t.txt:
 * 185 convolutions after RepConvN merging, 54 distinct shapes, 7.71 GFLOP), with
 * random weights. Each shape is timed best-of-R after a warm-up call (which
 * builds the provider's cached operator, as a model's first inference does);
 * the forward total weights each shape by how often it occurs.
 */
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "libreyolo/nn.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_IMPLS 16
#define DEFAULT_REPEAT 5
#define LINE_BUDGET_S 1.0 /* stop repeating a slow shape after this long */
/* Calls before an implementation's first timing: the first calls of a run pay
 * for thread start-up and placement (with 2 threads the first ~0.1 s of calls
 * ran 10x slow here, both threads on one core until the scheduler moved one). */
#define WARMUP_S 0.3
/* One Zen 3 core: 2 x 256-bit FMA per cycle at ~2.9 GHz (numerics.md §4). */
#define DEFAULT_PEAK_GFLOPS_PER_CORE 93.0

typedef struct conv_shape {
    int64_t c, o, k, stride, groups, h;
    int64_t activation;
    bool residual;
    int count; /* occurrences in one forward */
} conv_shape;

/* LibreYOLO9t at 640: input channels, output channels, kernel, stride, groups,
 * input size (square), activation, residual, occurrences. Convs are padded
 * (k - 1) / 2 and carry a bias (BatchNorm folded). */
static const conv_shape yolo9t_shapes[] = {
    {3, 16, 3, 2, 1, 640, LY_ACT_SILU, false, 1},   {16, 32, 3, 2, 1, 320, LY_ACT_SILU, false, 1},
    {16, 16, 3, 1, 1, 160, LY_ACT_SILU, false, 2},  {32, 32, 1, 1, 1, 160, LY_ACT_SILU, false, 1},
    {64, 32, 1, 1, 1, 160, LY_ACT_SILU, false, 1},  {32, 64, 3, 2, 1, 159, LY_ACT_SILU, false, 1},
    {16, 16, 3, 1, 1, 80, LY_ACT_SILU, false, 12},  {16, 16, 3, 1, 1, 80, LY_ACT_SILU, true, 12},
    {32, 16, 1, 1, 1, 80, LY_ACT_SILU, false, 8},   {32, 32, 1, 1, 1, 80, LY_ACT_SILU, false, 4},
    {32, 32, 3, 1, 1, 80, LY_ACT_SILU, false, 4},   {64, 64, 1, 1, 1, 80, LY_ACT_SILU, false, 1},
    {64, 64, 3, 1, 1, 80, LY_ACT_SILU, false, 1},   {64, 64, 3, 1, 4, 80, LY_ACT_SILU, false, 1},
    {64, 64, 1, 1, 4, 80, LY_ACT_NONE, false, 1},   {64, 80, 3, 1, 1, 80, LY_ACT_SILU, false, 1},
    {80, 80, 3, 1, 1, 80, LY_ACT_SILU, false, 1},   {80, 80, 1, 1, 1, 80, LY_ACT_NONE, false, 1},
    {128, 64, 1, 1, 1, 80, LY_ACT_SILU, false, 2},  {160, 64, 1, 1, 1, 80, LY_ACT_SILU, false, 1},
    {64, 48, 3, 2, 1, 79, LY_ACT_SILU, false, 1},   {64, 96, 3, 2, 1, 79, LY_ACT_SILU, false, 1},
    {24, 24, 3, 1, 1, 40, LY_ACT_SILU, false, 18},  {24, 24, 3, 1, 1, 40, LY_ACT_SILU, true, 18},
    {48, 24, 1, 1, 1, 40, LY_ACT_SILU, false, 12},  {48, 48, 1, 1, 1, 40, LY_ACT_SILU, false, 6},
    {48, 48, 3, 1, 1, 40, LY_ACT_SILU, false, 6},   {64, 64, 3, 1, 4, 40, LY_ACT_SILU, false, 1},
    {64, 64, 1, 1, 4, 40, LY_ACT_NONE, false, 1},   {80, 80, 3, 1, 1, 40, LY_ACT_SILU, false, 1},
    {80, 80, 1, 1, 1, 40, LY_ACT_NONE, false, 1},   {96, 64, 3, 1, 1, 40, LY_ACT_SILU, false, 1},
    {96, 80, 3, 1, 1, 40, LY_ACT_SILU, false, 1},   {96, 96, 1, 1, 1, 40, LY_ACT_SILU, false, 1},
    {144, 96, 1, 1, 1, 40, LY_ACT_SILU, false, 1},  {192, 96, 1, 1, 1, 40, LY_ACT_SILU, false, 3},
    {224, 96, 1, 1, 1, 40, LY_ACT_SILU, false, 1},  {96, 64, 3, 2, 1, 39, LY_ACT_SILU, false, 1},
    {96, 128, 3, 2, 1, 39, LY_ACT_SILU, false, 1},  {32, 32, 3, 1, 1, 20, LY_ACT_SILU, false, 12},
    {32, 32, 3, 1, 1, 20, LY_ACT_SILU, true, 12},   {64, 32, 1, 1, 1, 20, LY_ACT_SILU, false, 8},
    {64, 64, 1, 1, 1, 20, LY_ACT_SILU, false, 4},   {64, 64, 3, 1, 1, 20, LY_ACT_SILU, false, 4},
    {64, 64, 3, 1, 4, 20, LY_ACT_SILU, false, 1},   {64, 64, 1, 1, 4, 20, LY_ACT_NONE, false, 1},
    {80, 80, 3, 1, 1, 20, LY_ACT_SILU, false, 1},   {80, 80, 1, 1, 1, 20, LY_ACT_NONE, false, 1},
    {128, 64, 1, 1, 1, 20, LY_ACT_SILU, false, 1},  {128, 64, 3, 1, 1, 20, LY_ACT_SILU, false, 1},
    {128, 80, 3, 1, 1, 20, LY_ACT_SILU, false, 1},  {128, 128, 1, 1, 1, 20, LY_ACT_SILU, false, 1},
    {192, 128, 1, 1, 1, 20, LY_ACT_SILU, false, 1}, {256, 128, 1, 1, 1, 20, LY_ACT_SILU, false, 3},
};
#define N_SHAPES (sizeof yolo9t_shapes / sizeof yolo9t_shapes[0])

void ly_cli_usage_bench_conv(FILE *to)
{
    fputs("usage: libreyolo bench conv [--threads N] [--repeat R] [--impl NAME] [--no-reference]\n"
          "                            [--shapes] [--peak-gflops G] [--json]\n"
          "\n"
          "Times every conv2d implementation (reference included) on the 185 convolutions\n"
          "(54 distinct shapes, 7.71 GFLOP) of one LibreYOLO9t forward at 640x640 and prints\n"
          "per implementation the total conv time of that forward, GFLOP/s, the speed-up\n"
          "over \"reference\" and the fraction of the FMA peak of the cores used. Each\n"
          "implementation is prepared once per shape, as a graph prepares a node (packed or\n"
          "transformed weights untimed), on plain maps: kernels that take only blocked ones\n"
          "(the thin and stem kernels) fail with LY_E_DECLINED.\n"
          "  --threads N      threads per call (default 1)\n"
          "  --repeat R       timed calls per shape, best kept (default 5)\n"
          "  --impl NAME      only this implementation (plus the reference, unless\n"
          "                   --no-reference)\n"
          "  --no-reference   skip the (slow) reference\n"
          "  --shapes         also print every shape's time per implementation\n"
          "  --peak-gflops G  one core's fp32 FMA peak (default 93, Zen 3 at ~2.9 GHz)\n"
          "  --json           one JSON object instead of the table\n",
          to);
}

static int64_t out_extent(const conv_shape *s)
{
    return (s->h + 2 * ((s->k - 1) / 2) - s->k) / s->stride + 1;
}

static double shape_flop(const conv_shape *s)
{
    int64_t ho = out_extent(s);
    return 2.0 * (double)s->o * (double)(s->c / s->groups) * (double)(s->k * s->k) *
           (double)(ho * ho);
}

typedef struct impl_result {
    char name[32];
    double shape_s[N_SHAPES]; /* best time per call; < 0: declined or failed */
    double total_s;
    int missing; /* shapes it could not run */
    bool warmed;
    char error[160];
} impl_result;

typedef struct bench_options {
    int threads, repeat;
    const char *only;
    bool reference, shapes, json;
    double peak_per_core;
} bench_options;

typedef struct shape_buffers {
    ly_tensor x, w, b, r, y;
    ly_conv2d_params params;
    ly_kernel_call call;
} shape_buffers;

static float *filled(int64_t n, uint64_t *state, float scale)
{
    float *p = malloc((size_t)n * sizeof *p);
    if (!p) return NULL;
    for (int64_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = ((float)(*state >> 40) / 16777216.0f * 2.0f - 1.0f) * scale;
    }
    return p;
}

static void buffers_free(shape_buffers *b)
{
    free(b->x.data);
    free(b->w.data);
    free(b->b.data);
    free(b->r.data);
    free(b->y.data);
}

static ly_status buffers_init(shape_buffers *b, const conv_shape *s, int threads)
{
    memset(b, 0, sizeof *b);
    uint64_t state = 0x1234567ull + (uint64_t)(s->c * 131 + s->o * 7 + s->h);
    int64_t ho = out_extent(s), cg = s->c / s->groups;
    int64_t xs[4] = {1, s->c, s->h, s->h}, ws[4] = {s->o, cg, s->k, s->k};
    int64_t bs[1] = {s->o}, ys[4] = {1, s->o, ho, ho};
    float scale = 1.0f / (float)(cg * s->k * s->k);
    ly_tensor_init(&b->x, filled(s->c * s->h * s->h, &state, 1.0f), LY_F32, 4, xs);
    ly_tensor_init(&b->w, filled(s->o * cg * s->k * s->k, &state, scale), LY_F32, 4, ws);
    ly_tensor_init(&b->b, filled(s->o, &state, 0.1f), LY_F32, 1, bs);
    ly_tensor_init(&b->r, s->residual ? filled(s->o * ho * ho, &state, 1.0f) : NULL, LY_F32, 4, ys);
    ly_tensor_init(&b->y, filled(s->o * ho * ho, &state, 0.0f), LY_F32, 4, ys);
    if (!b->x.data || !b->w.data || !b->b.data || !b->y.data || (s->residual && !b->r.data)) {
        buffers_free(b);
        return LY_E_NO_MEMORY;
    }
    ly_kernel_call_init(&b->call);
    b->call.in[0] = &b->x;
    b->call.in[1] = &b->w;
    b->call.in[2] = &b->b;
    b->call.in[3] = s->residual ? &b->r : NULL;
    b->call.out[0] = &b->y;
    b->params = (ly_conv2d_params)LY_CONV2D_DEFAULTS;
    b->params.stride[0] = b->params.stride[1] = s->stride;
    b->params.padding[0] = b->params.padding[1] = (s->k - 1) / 2;
    b->params.groups = s->groups;
    b->params.activation = s->activation;
    b->call.params = &b->params;
    b->call.threads = threads;
    return LY_OK;
}

/* Best of `repeat` timed calls after a warm-up (one call, or WARMUP_S worth
 * when `long_warmup`), the implementation prepared once before (as a graph
 * prepares a node: packed or transformed weights are not timed; maps plain);
 * < 0 when it fails. */
static double time_impl(const char *impl, const ly_kernel_call *call, int repeat, bool long_warmup,
                        char *error, size_t error_size)
{
    ly_kernel_prepared *prepared = NULL;
    ly_status st = ly_kernel_prepare_impl(ly_op_name(LY_OP_CONV2D), impl, call, &prepared);
    double t0 = ly_cli_now_s(), first;
    do {
        if (st == LY_OK) st = ly_kernel_prepared_run(prepared, call);
        first = ly_cli_now_s() - t0;
        if (st != LY_OK) {
            if (!error[0])
                snprintf(error, error_size, "%s: %s", ly_status_name(st), ly_last_error());
            ly_kernel_prepared_free(prepared);
            return -1.0;
        }
    } while (long_warmup && first < WARMUP_S);
    double best = -1.0, spent = first;
    for (int i = 0; i < repeat && (i == 0 || spent < LINE_BUDGET_S); i++) {
        t0 = ly_cli_now_s();
        ly_kernel_prepared_run(prepared, call);
        double t = ly_cli_now_s() - t0;
        spent += t;
        if (best < 0 || t < best) best = t;
    }
    ly_kernel_prepared_free(prepared);
    return best;
}

typedef struct impl_names {
    const char *names[MAX_IMPLS];
    int count;
} impl_names;

static bool collect_name(const char *name, ly_kernel_fn fn, void *user)
{
    (void)fn;
    impl_names *list = user;
    if (list->count < MAX_IMPLS) list->names[list->count++] = name;
    return true;
}

static bool wanted(const bench_options *o, const char *name)
{
    if (strcmp(name, "reference") == 0) return o->reference;
    return !o->only || strcmp(o->only, name) == 0;
}

static int find_or_add(impl_result *results, int *n, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(results[i].name, name) == 0) return i;
    if (*n == MAX_IMPLS) return -1;
    impl_result *r = &results[(*n)++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    for (size_t s = 0; s < N_SHAPES; s++)
        r->shape_s[s] = -1.0;
    return *n - 1;
}

static const char *activation_name(int64_t a)
{
    return a == LY_ACT_SILU ? "silu" : a == LY_ACT_NONE ? "none" : "other";
}

static void print_table(const bench_options *o, const impl_result *results, int n,
                        double total_flop)
{
    const impl_result *ref = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(results[i].name, "reference") == 0) ref = &results[i];
    double peak = o->peak_per_core * o->threads;
    printf("conv2d on one LibreYOLO9t forward at 640x640 (185 convs, 54 shapes, %.2f GFLOP), "
           "%d thread%s, best of %d per shape\n\n",
           total_flop / 1e9, o->threads, o->threads == 1 ? "" : "s", o->repeat);
    if (o->shapes) {
        printf("%-34s", "shape (C->O kxk /s g, HxW, count)");
        for (int i = 0; i < n; i++)
            printf(" %12s", results[i].name);
        printf("\n");
        for (size_t s = 0; s < N_SHAPES; s++) {
            const conv_shape *sh = &yolo9t_shapes[s];
            char label[64];
            snprintf(label, sizeof label, "%lld->%lld %lldx%lld/%lld g%lld %lld %s%s x%d",
                     (long long)sh->c, (long long)sh->o, (long long)sh->k, (long long)sh->k,
                     (long long)sh->stride, (long long)sh->groups, (long long)sh->h,
                     activation_name(sh->activation), sh->residual ? "+res" : "", sh->count);
            printf("%-34s", label);
            for (int i = 0; i < n; i++) {
                double t = results[i].shape_s[s];
                if (t < 0)
                    printf(" %12s", "-");
                else
                    printf(" %7.3f/%4.0f", t * 1e3, shape_flop(sh) / t / 1e9);
            }
            printf("\n");
        }
        printf("(per shape: ms per call, GFLOP/s)\n\n");
    }
    printf("%-12s %12s %10s %12s %12s\n", "impl", "forward ms", "GFLOP/s", "vs reference",
           "of FMA peak");
    for (int i = 0; i < n; i++) {
        const impl_result *r = &results[i];
        if (r->missing == (int)N_SHAPES) {
            printf("%-12s %12s   (%s)\n", r->name, "failed", r->error);
            continue;
        }
        double gflops = total_flop / r->total_s / 1e9;
        char speedup[32] = "-";
        if (ref && !ref->missing && !r->missing)
            snprintf(speedup, sizeof speedup, "%.1fx", ref->total_s / r->total_s);
        printf("%-12s %12.1f %10.1f %12s %11.0f%%", r->name, r->total_s * 1e3, gflops, speedup,
               100.0 * gflops / peak);
        if (r->missing) printf("   (%d shapes not run: %s)", r->missing, r->error);
        printf("\n");
    }
    printf("\nFMA peak: %.0f GFLOP/s per core x %d (--peak-gflops).\n", o->peak_per_core,
           o->threads);
}

static void print_json(const bench_options *o, const impl_result *results, int n, double total_flop)
{
    printf("{\"bench\": \"conv\", \"model\": \"LibreYOLO9t\", \"imgsz\": 640, \"threads\": %d, "
           "\"repeat\": %d, \"convs\": 185, \"shapes\": %zu, \"gflop\": %.4f, "
           "\"peak_gflops\": %.1f, \"impls\": [",
           o->threads, o->repeat, N_SHAPES, total_flop / 1e9, o->peak_per_core * o->threads);
    for (int i = 0; i < n; i++) {
        const impl_result *r = &results[i];
        printf("%s{\"name\": \"%s\", \"forward_ms\": ", i ? ", " : "", r->name);
        if (r->missing)
            printf("null, \"missing_shapes\": %d", r->missing);
        else
            printf("%.3f, \"gflops\": %.2f", r->total_s * 1e3, total_flop / r->total_s / 1e9);
        printf(", \"shape_ms\": [");
        for (size_t s = 0; s < N_SHAPES; s++) {
            if (r->shape_s[s] < 0)
                printf("%snull", s ? ", " : "");
            else
                printf("%s%.4f", s ? ", " : "", r->shape_s[s] * 1e3);
        }
        printf("]}");
    }
    printf("]}\n");
}

int ly_cli_bench_conv(int argc, char **argv)
{
    bench_options o = {.threads = 1,
                       .repeat = DEFAULT_REPEAT,
                       .reference = true,
                       .peak_per_core = DEFAULT_PEAK_GFLOPS_PER_CORE};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--threads") == 0 && has_value) {
            o.threads = atoi(argv[++i]);
        } else if (strcmp(a, "--repeat") == 0 && has_value) {
            o.repeat = atoi(argv[++i]);
        } else if (strcmp(a, "--impl") == 0 && has_value) {
            o.only = argv[++i];
        } else if (strcmp(a, "--peak-gflops") == 0 && has_value) {
            o.peak_per_core = atof(argv[++i]);
        } else if (strcmp(a, "--no-reference") == 0) {
            o.reference = false;
        } else if (strcmp(a, "--shapes") == 0) {
            o.shapes = true;
        } else if (strcmp(a, "--json") == 0) {
            o.json = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            ly_cli_usage_bench_conv(stdout);
            return 0;
        } else {
            fprintf(stderr, "libreyolo bench conv: unknown or incomplete option '%s'\n", a);
            ly_cli_usage_bench_conv(stderr);
            return 2;
        }
    }
    if (o.threads < 1 || o.threads > 1024 || o.repeat < 1 || o.repeat > 1000 ||
        !(o.peak_per_core > 0)) {
        fprintf(stderr, "libreyolo bench conv: --threads 1..1024, --repeat 1..1000 and "
                        "--peak-gflops > 0\n");
        return 2;
    }
    if (o.only && strcmp(o.only, "reference") == 0) o.reference = true;
    bool progress = !o.json && isatty(STDERR_FILENO);

    static impl_result results[MAX_IMPLS];
    int n = 0;
    double total_flop = 0;
    for (size_t s = 0; s < N_SHAPES; s++) {
        const conv_shape *sh = &yolo9t_shapes[s];
        total_flop += shape_flop(sh) * sh->count;
        shape_buffers b;
        if (buffers_init(&b, sh, o.threads) != LY_OK) {
            fputs("libreyolo bench conv: out of memory\n", stderr);
            return 1;
        }
        impl_names names = {.count = 0};
        ly_status st = ly_kernel_iter(ly_op_name(LY_OP_CONV2D), &b.call, collect_name, &names);
        if (st != LY_OK) {
            fprintf(stderr, "libreyolo bench conv: %s\n", ly_last_error());
            buffers_free(&b);
            return 1;
        }
        for (int k = 0; k < names.count; k++) {
            if (!wanted(&o, names.names[k])) continue;
            int slot = find_or_add(results, &n, names.names[k]);
            if (slot < 0) continue;
            impl_result *r = &results[slot];
            if (progress) {
                fprintf(stderr, "\r\033[K%s: shape %zu/%zu", r->name, s + 1, N_SHAPES);
                fflush(stderr);
            }
            r->shape_s[s] =
                time_impl(r->name, &b.call, o.repeat, !r->warmed, r->error, sizeof r->error);
            r->warmed = true;
        }
        buffers_free(&b);
    }
    if (progress) fprintf(stderr, "\r\033[K");
    /* An implementation that declined a shape (not in the iteration) or failed
     * on it has no forward total. */
    for (int i = 0; i < n; i++) {
        impl_result *r = &results[i];
        for (size_t s = 0; s < N_SHAPES; s++) {
            if (r->shape_s[s] < 0)
                r->missing++;
            else
                r->total_s += r->shape_s[s] * yolo9t_shapes[s].count;
        }
        if (r->missing && !r->error[0]) snprintf(r->error, sizeof r->error, "declined");
    }
    if (n == 0) {
        fprintf(stderr, "libreyolo bench conv: no conv2d implementation matched%s%s\n",
                o.only ? " --impl " : "", o.only ? o.only : "");
        return 1;
    }
    if (o.json)
        print_json(&o, results, n, total_flop);
    else
        print_table(&o, results, n, total_flop);
    return 0;
}
