/* SPDX-License-Identifier: MIT */
/*
 * `libreyolo bench kernels` rows for ms_deform_attn: the forward and backward
 * slots on real model shapes (batch 1), at 1 and 2 threads (or --threads), for
 * every eligible implementation, next to PyTorch's grid_sample formulation run
 * in the same run as a subprocess (bench/peers/torch_msda.py). The peer also
 * receives our inputs and our output for each shape and reports how far its
 * numbers are from ours, so the table compares the same op.
 *
 * Times are medians of `repeats` samples after a warm-up call; a sample repeats
 * a fast call until it lasts 10 ms.
 */
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/json_out.h"
#include "libreyolo/io.h"
#include "libreyolo/msda.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIN_SAMPLE_S 0.01
#define PEER_TIMEOUT_S 900
#define PROBE_TIMEOUT_S 60
#define GOAL_VS_TORCH 10.0 /* forward, one thread */

typedef struct bench_shape {
    const char *name;
    int64_t B, Lq, H, C, L;
    int64_t hw[3][2];
    int64_t points[3];
    bool ragged;
} bench_shape;

static const bench_shape bench_shapes[] = {
    {"RT-DETR-R18@640", 1, 300, 8, 32, 3, {{80, 80}, {40, 40}, {20, 20}}, {4, 4, 4}, false},
    {"D-FINE-N@640", 1, 300, 8, 16, 2, {{40, 40}, {20, 20}}, {6, 6}, false},
    {"RF-DETR-Nano@384", 1, 300, 16, 16, 1, {{24, 24}}, {2}, false},
    {"DEIMv2-atto@320", 1, 100, 8, 8, 2, {{20, 20}, {10, 10}}, {4, 2}, true},
};
#define N_SHAPES (sizeof bench_shapes / sizeof bench_shapes[0])

/* ---- Operands ------------------------------------------------------------------ */

typedef struct operands {
    int64_t len_in, K;
    float *value, *loc, *attn, *grad, *out, *gv, *gl, *ga;
    int64_t *shapes, *npoints;
    ly_tensor t_value, t_shapes, t_loc, t_attn, t_np, t_grad, t_out, t_gv, t_gl, t_ga;
} operands;

static uint64_t rng_state;

static float rnd(void) /* [0, 1) */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (float)((z ^ (z >> 31)) >> 40) * 0x1p-24f;
}

static float rnd_normal(void)
{
    return (rnd() + rnd() + rnd() + rnd() - 2.0f) * 1.7f;
}

static void operands_free(operands *o)
{
    free(o->value);
    free(o->loc);
    free(o->attn);
    free(o->grad);
    free(o->out);
    free(o->gv);
    free(o->gl);
    free(o->ga);
    free(o->shapes);
    free(o->npoints);
}

static bool operands_init(operands *o, const bench_shape *s)
{
    memset(o, 0, sizeof *o);
    for (int64_t l = 0; l < s->L; l++) {
        o->len_in += s->hw[l][0] * s->hw[l][1];
        o->K += s->points[l];
    }
    int64_t rows = s->B * s->Lq * s->H, nv = s->B * o->len_in * s->H * s->C;
    o->value = malloc((size_t)nv * sizeof(float));
    o->gv = malloc((size_t)nv * sizeof(float));
    o->loc = malloc((size_t)(rows * o->K * 2) * sizeof(float));
    o->gl = malloc((size_t)(rows * o->K * 2) * sizeof(float));
    o->attn = malloc((size_t)(rows * o->K) * sizeof(float));
    o->ga = malloc((size_t)(rows * o->K) * sizeof(float));
    o->grad = malloc((size_t)(rows * s->C) * sizeof(float));
    o->out = malloc((size_t)(rows * s->C) * sizeof(float));
    o->shapes = malloc((size_t)s->L * 2 * sizeof(int64_t));
    o->npoints = malloc((size_t)s->L * sizeof(int64_t));
    if (!o->value || !o->gv || !o->loc || !o->gl || !o->attn || !o->ga || !o->grad || !o->out ||
        !o->shapes || !o->npoints)
        return false;
    rng_state = 0x5EED;
    for (int64_t i = 0; i < nv; i++)
        o->value[i] = rnd_normal();
    for (int64_t i = 0; i < rows * o->K * 2; i++)
        o->loc[i] = rnd() * 1.1f - 0.05f;
    for (int64_t r = 0; r < rows; r++) {
        float sum = 0.0f, *a = o->attn + r * o->K;
        for (int64_t k = 0; k < o->K; k++)
            sum += (a[k] = expf(rnd_normal()));
        for (int64_t k = 0; k < o->K; k++)
            a[k] /= sum;
    }
    for (int64_t i = 0; i < rows * s->C; i++)
        o->grad[i] = rnd_normal();
    for (int64_t l = 0; l < s->L; l++) {
        o->shapes[2 * l] = s->hw[l][0];
        o->shapes[2 * l + 1] = s->hw[l][1];
        o->npoints[l] = s->points[l];
    }
    /* The ragged layout for every shape: the same memory as the uniform one when
     * the counts are equal, and what the peer reads. */
    ly_tensor_init(&o->t_value, o->value, LY_F32, 4, (int64_t[]){s->B, o->len_in, s->H, s->C});
    ly_tensor_init(&o->t_gv, o->gv, LY_F32, 4, (int64_t[]){s->B, o->len_in, s->H, s->C});
    ly_tensor_init(&o->t_shapes, o->shapes, LY_I64, 2, (int64_t[]){s->L, 2});
    ly_tensor_init(&o->t_np, o->npoints, LY_I64, 1, (int64_t[]){s->L});
    ly_tensor_init(&o->t_loc, o->loc, LY_F32, 5, (int64_t[]){s->B, s->Lq, s->H, o->K, 2});
    ly_tensor_init(&o->t_gl, o->gl, LY_F32, 5, (int64_t[]){s->B, s->Lq, s->H, o->K, 2});
    ly_tensor_init(&o->t_attn, o->attn, LY_F32, 4, (int64_t[]){s->B, s->Lq, s->H, o->K});
    ly_tensor_init(&o->t_ga, o->ga, LY_F32, 4, (int64_t[]){s->B, s->Lq, s->H, o->K});
    ly_tensor_init(&o->t_grad, o->grad, LY_F32, 3, (int64_t[]){s->B, s->Lq, s->H * s->C});
    ly_tensor_init(&o->t_out, o->out, LY_F32, 3, (int64_t[]){s->B, s->Lq, s->H * s->C});
    if (!s->ragged) {
        int64_t P = s->points[0];
        ly_tensor_init(&o->t_loc, o->loc, LY_F32, 6, (int64_t[]){s->B, s->Lq, s->H, s->L, P, 2});
        ly_tensor_init(&o->t_gl, o->gl, LY_F32, 6, (int64_t[]){s->B, s->Lq, s->H, s->L, P, 2});
        ly_tensor_init(&o->t_attn, o->attn, LY_F32, 5, (int64_t[]){s->B, s->Lq, s->H, s->L, P});
        ly_tensor_init(&o->t_ga, o->ga, LY_F32, 5, (int64_t[]){s->B, s->Lq, s->H, s->L, P});
    }
    return true;
}

/* ---- Timing -------------------------------------------------------------------- */

typedef struct run_ctx {
    const bench_shape *shape;
    operands *o;
    const char *impl;
    bool backward;
    int threads;
} run_ctx;

static ly_status run_once(const run_ctx *r)
{
    ly_kernel_call call;
    ly_kernel_call_init(&call);
    int base = r->backward ? 1 : 0;
    if (r->backward) call.in[0] = &r->o->t_grad;
    call.in[base] = &r->o->t_value;
    call.in[base + 1] = &r->o->t_shapes;
    call.in[base + 2] = &r->o->t_loc;
    call.in[base + 3] = &r->o->t_attn;
    call.in[r->backward ? 5 : 4] = r->shape->ragged ? &r->o->t_np : NULL;
    if (r->backward) {
        call.out[0] = &r->o->t_gv;
        call.out[1] = &r->o->t_gl;
        call.out[2] = &r->o->t_ga;
    } else {
        call.out[0] = &r->o->t_out;
    }
    call.threads = r->threads;
    return ly_kernel_run_impl(r->backward ? ly_op_name(LY_OP_MS_DEFORM_ATTN_BACKWARD)
                                          : ly_op_name(LY_OP_MS_DEFORM_ATTN),
                              r->impl, &call);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median ms, or NAN with the error left in ly_last_error(). */
static double median_ms(const run_ctx *r, int repeats)
{
    double t0 = ly_cli_now_s();
    if (run_once(r) != LY_OK) return NAN;
    double first = ly_cli_now_s() - t0;
    long inner =
        first >= MIN_SAMPLE_S ? 1 : (long)ceil(MIN_SAMPLE_S / (first > 1e-6 ? first : 1e-6));
    double samples[64];
    if (repeats > 64) repeats = 64;
    for (int i = 0; i < repeats; i++) {
        double s0 = ly_cli_now_s();
        for (long j = 0; j < inner; j++)
            if (run_once(r) != LY_OK) return NAN;
        samples[i] = (ly_cli_now_s() - s0) / (double)inner;
    }
    qsort(samples, (size_t)repeats, sizeof samples[0], cmp_double);
    return samples[repeats / 2] * 1e3;
}

/* ---- The PyTorch peer ------------------------------------------------------------- */

typedef struct peer_time {
    double forward_ms, backward_ms;
} peer_time;

typedef struct peer {
    bool ok;
    char reason[512];
    char version[64];
    peer_time t[N_SHAPES][2];   /* per shape, per thread-count slot */
    double parity[N_SHAPES][2]; /* max |diff|, max |out| (NAN: not run) */
} peer;

static int thread_slot(const int *threads, int n, int t)
{
    for (int i = 0; i < n; i++)
        if (threads[i] == t) return i;
    return -1;
}

static void parse_peer(peer *p, const char *text, const int *threads, int n_threads)
{
    const char *start = text ? strchr(text, '{') : NULL;
    cJSON *root = start ? cJSON_Parse(start) : NULL;
    if (!root) {
        snprintf(p->reason, sizeof p->reason, "its output is not JSON");
        return;
    }
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (cJSON_IsString(version))
        snprintf(p->version, sizeof p->version, "%s", version->valuestring);
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(root, "results"))
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(row, "shape");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(row, "threads");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(row, "forward_ms");
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(row, "backward_ms");
        if (!cJSON_IsString(name) || !cJSON_IsNumber(t) || !cJSON_IsNumber(f) || !cJSON_IsNumber(b))
            continue;
        int slot = thread_slot(threads, n_threads, (int)t->valuedouble);
        for (size_t s = 0; s < N_SHAPES && slot >= 0; s++)
            if (strcmp(bench_shapes[s].name, name->valuestring) == 0)
                p->t[s][slot] = (peer_time){f->valuedouble, b->valuedouble};
    }
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(root, "parity"))
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(row, "shape");
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(row, "max_abs_diff");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(row, "max_abs_out");
        if (!cJSON_IsString(name) || !cJSON_IsNumber(d) || !cJSON_IsNumber(m)) continue;
        for (size_t s = 0; s < N_SHAPES; s++)
            if (strcmp(bench_shapes[s].name, name->valuestring) == 0) {
                p->parity[s][0] = d->valuedouble;
                p->parity[s][1] = m->valuedouble;
            }
    }
    cJSON_Delete(root);
    p->ok = true;
}

/* Our inputs and reference output per shape, for the peer's parity check. */
static bool write_data(const char *dir, size_t s, operands *o)
{
    char path[PATH_MAX];
    const char *name = bench_shapes[s].name;
    struct {
        const char *suffix;
        const ly_tensor *t;
    } files[] = {
        {"value", &o->t_value}, {"shapes", &o->t_shapes}, {"attn", &o->t_attn}, {"out", &o->t_out}};
    ly_tensor loc = o->t_loc; /* the ragged view: [B, Lq, H, K, 2] */
    loc.ndim = 5;
    loc.shape[3] = o->K;
    loc.shape[4] = 2;
    ly_tensor attn = o->t_attn;
    attn.ndim = 4;
    attn.shape[3] = o->K;
    files[2].t = &attn;
    snprintf(path, sizeof path, "%s/%s.loc.npy", dir, name);
    if (ly_npy_save(path, &loc) != LY_OK) return false;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s.%s.npy", dir, name, files[i].suffix);
        if (ly_npy_save(path, files[i].t) != LY_OK) return false;
    }
    return true;
}

static void remove_data(const char *dir)
{
    char path[PATH_MAX];
    static const char *const suffixes[] = {"value", "shapes", "loc", "attn", "out"};
    for (size_t s = 0; s < N_SHAPES; s++)
        for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
            snprintf(path, sizeof path, "%s/%s.%s.npy", dir, bench_shapes[s].name, suffixes[i]);
            unlink(path);
        }
    rmdir(dir);
}

static void run_peer(peer *p, const int *threads, int n_threads, int repeats, const char *data_dir)
{
    char script[PATH_MAX + 32];
    if (!ly_cli_find_peer_script("torch_msda.py", script, sizeof script)) {
        snprintf(p->reason, sizeof p->reason,
                 "bench/peers/torch_msda.py not found (run from the repository or set "
                 "LIBREYOLO_BENCH_PEERS)");
        return;
    }
    const char *tried = NULL;
    const char *python = ly_cli_find_python("import torch, numpy", PROBE_TIMEOUT_S, &tried);
    if (!python) {
        snprintf(p->reason, sizeof p->reason,
                 "%s cannot import torch and numpy (apt-get install python3-torch "
                 "python3-numpy, or set LIBREYOLO_PYTHON)",
                 tried);
        return;
    }
    char shape_args[N_SHAPES][160], thread_arg[64] = "", repeat_arg[16];
    char *argv[12 + 2 * N_SHAPES];
    int n = 0;
    argv[n++] = (char *)python;
    argv[n++] = script;
    for (size_t s = 0; s < N_SHAPES; s++) {
        const bench_shape *b = &bench_shapes[s];
        char levels[64] = "", points[32] = "";
        for (int64_t l = 0; l < b->L; l++) {
            size_t ll = strlen(levels), lp = strlen(points);
            snprintf(levels + ll, sizeof levels - ll, "%s%lldx%lld", l ? "," : "",
                     (long long)b->hw[l][0], (long long)b->hw[l][1]);
            snprintf(points + lp, sizeof points - lp, "%s%lld", l ? "," : "",
                     (long long)b->points[l]);
        }
        snprintf(shape_args[s], sizeof shape_args[s], "%s:%lld,%lld,%lld,%lld:%s:%s", b->name,
                 (long long)b->B, (long long)b->Lq, (long long)b->H, (long long)b->C, levels,
                 points);
        argv[n++] = "--shape";
        argv[n++] = shape_args[s];
    }
    for (int i = 0; i < n_threads; i++) {
        size_t len = strlen(thread_arg);
        snprintf(thread_arg + len, sizeof thread_arg - len, "%s%d", i ? "," : "", threads[i]);
    }
    snprintf(repeat_arg, sizeof repeat_arg, "%d", repeats);
    argv[n++] = "--threads";
    argv[n++] = thread_arg;
    argv[n++] = "--repeats";
    argv[n++] = repeat_arg;
    if (data_dir) {
        argv[n++] = "--data";
        argv[n++] = (char *)data_dir;
    }
    argv[n] = NULL;
    ly_cli_progress("bench: running the PyTorch peer (ms_deform_attn)");
    ly_cli_captured c;
    int e = ly_cli_run_capture(argv, PEER_TIMEOUT_S, &c);
    ly_cli_progress_end();
    if (e != 0) {
        snprintf(p->reason, sizeof p->reason, "cannot start %s: %s", python, strerror(e));
        return;
    }
    char why[256];
    ly_cli_last_line(c.err, why, sizeof why);
    if (c.timed_out)
        snprintf(p->reason, sizeof p->reason, "timed out after %d s", PEER_TIMEOUT_S);
    else if (c.exit_code != 0)
        snprintf(p->reason, sizeof p->reason, "exit status %d: %s", c.exit_code,
                 why[0] ? why : "(no message)");
    else
        parse_peer(p, c.out, threads, n_threads);
    ly_cli_captured_free(&c);
}

/* ---- The run ------------------------------------------------------------------------- */

typedef struct row {
    size_t shape;
    int threads, tslot;
    bool backward;
    double ref_ms, avx2_ms;
    char avx2_note[96];
} row;

typedef struct find_impl {
    const char *name;
    bool eligible;
} find_impl;

static void on_listed(const char *slot, const char *impl, bool ok, const char *why_not, void *user)
{
    (void)slot;
    (void)why_not;
    find_impl *f = user;
    if (strcmp(impl, f->name) == 0 && ok) f->eligible = true;
}

/* Registered and eligible on this machine (LIBREYOLO_KERNELS may rule it out). */
static bool eligible(const char *slot, const char *impl)
{
    find_impl f = {impl, false};
    return ly_kernel_list(slot, on_listed, &f) == LY_OK && f.eligible;
}

static double ratio(double num, double den)
{
    return isfinite(num) && isfinite(den) && den > 0 ? num / den : NAN;
}

static void print_ms(double v)
{
    if (isfinite(v))
        printf("  %10.3f", v);
    else
        printf("  %10s", "-");
}

static void print_ratio(double v)
{
    if (isfinite(v))
        printf("  %9.1fx", v);
    else
        printf("  %10s", "-");
}

int ly_cli_bench_msda(const ly_bench_attention_options *options)
{
    int threads[2] = {1, 2}, n_threads = 2;
    if (options->threads > 0) {
        threads[0] = options->threads;
        n_threads = 1;
    }
    int repeats = options->repeats > 0 ? options->repeats : 5;
    bool have_avx2 = eligible(ly_op_name(LY_OP_MS_DEFORM_ATTN), "avx2");

    char tmpl[PATH_MAX];
    const char *tmpdir = getenv("TMPDIR");
    snprintf(tmpl, sizeof tmpl, "%s/libreyolo-msda-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    const char *data_dir = options->no_peer ? NULL : mkdtemp(tmpl);

    row rows[N_SHAPES * 2 * 2];
    int n_rows = 0, rc = 0;
    for (size_t s = 0; s < N_SHAPES; s++) {
        operands o;
        if (!operands_init(&o, &bench_shapes[s])) {
            operands_free(&o);
            fprintf(stderr, "libreyolo bench kernels: ms_deform_attn: out of memory\n");
            rc = 1;
            break;
        }
        for (int t = 0; t < n_threads; t++)
            for (int dir = 0; dir < 2; dir++) {
                row *r = &rows[n_rows++];
                *r = (row){.shape = s, .threads = threads[t], .tslot = t, .backward = dir == 1};
                ly_cli_progress("bench: ms_deform_attn %s %s, %d thread(s)", bench_shapes[s].name,
                                dir ? "backward" : "forward", threads[t]);
                run_ctx ctx = {&bench_shapes[s], &o, "reference", dir == 1, threads[t]};
                r->ref_ms = median_ms(&ctx, repeats);
                if (!isfinite(r->ref_ms)) {
                    fprintf(stderr, "libreyolo bench kernels: ms_deform_attn: %s\n",
                            ly_last_error());
                    rc = 1;
                }
                r->avx2_ms = NAN;
                if (have_avx2) {
                    ctx.impl = "avx2";
                    r->avx2_ms = median_ms(&ctx, repeats);
                    if (!isfinite(r->avx2_ms))
                        snprintf(r->avx2_note, sizeof r->avx2_note, "%s", ly_last_error());
                }
            }
        /* Our forward output (the reference's bits) for the peer's parity check. */
        if (data_dir) {
            run_ctx ctx = {&bench_shapes[s], &o, "reference", false, 0};
            if (run_once(&ctx) != LY_OK || !write_data(data_dir, s, &o)) data_dir = NULL;
        }
        operands_free(&o);
    }
    ly_cli_progress_end();

    peer p;
    memset(&p, 0, sizeof p);
    for (size_t s = 0; s < N_SHAPES; s++)
        for (int t = 0; t < 2; t++) {
            p.t[s][t] = (peer_time){NAN, NAN};
            p.parity[s][t] = NAN;
        }
    if (options->no_peer)
        snprintf(p.reason, sizeof p.reason, "skipped (--no-peer)");
    else
        run_peer(&p, threads, n_threads, repeats, data_dir);
    if (data_dir) remove_data(data_dir);

    /* The goal: forward >= 10x PyTorch on one thread, on every shape. */
    int goal_met = -1;
    for (int i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        if (r->backward || r->threads != 1) continue;
        double v = ratio(p.t[r->shape][r->tslot].forward_ms, r->avx2_ms);
        if (!isfinite(v)) continue;
        if (goal_met < 0) goal_met = 1;
        if (v < GOAL_VS_TORCH) goal_met = 0;
    }

    if (options->json) {
        printf("{\"slot\": \"ms_deform_attn\", \"batch\": 1, \"repeats\": %d, \"peer\": {",
               repeats);
        printf("\"available\": %s, \"version\": ", p.ok ? "true" : "false");
        ly_json_string(stdout, p.ok ? p.version : NULL);
        printf(", \"reason\": ");
        ly_json_string(stdout, p.ok ? NULL : p.reason);
        printf("}, \"goal_forward_vs_torch_1_thread\": %g, \"goal_met\": %s, \"rows\": [",
               GOAL_VS_TORCH,
               goal_met < 0 ? "null"
               : goal_met   ? "true"
                            : "false");
        for (int i = 0; i < n_rows; i++) {
            const row *r = &rows[i];
            const peer_time *pt = &p.t[r->shape][r->tslot];
            double torch_ms = r->backward ? pt->backward_ms : pt->forward_ms;
            printf("%s{\"shape\": ", i ? ", " : "");
            ly_json_string(stdout, bench_shapes[r->shape].name);
            printf(", \"direction\": \"%s\", \"threads\": %d, \"reference_ms\": ",
                   r->backward ? "backward" : "forward", r->threads);
            ly_json_number(stdout, r->ref_ms);
            printf(", \"avx2_ms\": ");
            ly_json_number(stdout, r->avx2_ms);
            printf(", \"torch_ms\": ");
            ly_json_number(stdout, torch_ms);
            printf(", \"avx2_vs_reference\": ");
            ly_json_number(stdout, ratio(r->ref_ms, r->avx2_ms));
            printf(", \"avx2_vs_torch\": ");
            ly_json_number(stdout, ratio(torch_ms, r->avx2_ms));
            printf(", \"reference_vs_torch\": ");
            ly_json_number(stdout, ratio(torch_ms, r->ref_ms));
            printf("}");
        }
        printf("], \"peer_parity\": [");
        int first = 1;
        for (size_t s = 0; s < N_SHAPES; s++) {
            if (!isfinite(p.parity[s][0])) continue;
            printf("%s{\"shape\": ", first ? "" : ", ");
            first = 0;
            ly_json_string(stdout, bench_shapes[s].name);
            printf(", \"max_abs_diff\": ");
            ly_json_number(stdout, p.parity[s][0]);
            printf(", \"max_abs_out\": ");
            ly_json_number(stdout, p.parity[s][1]);
            printf("}");
        }
        printf("]}\n");
        return rc;
    }

    printf("\nms_deform_attn: batch 1, fp32, median of %d; peer: ", repeats);
    if (p.ok)
        printf("PyTorch %s (grid_sample formulation)\n", p.version);
    else
        printf("none (%s)\n", p.reason);
    printf("%-18s  %7s  %-8s  %10s  %10s  %10s  %10s  %10s\n", "shape", "threads", "pass", "ref ms",
           "avx2 ms", "torch ms", "avx2/ref", "torch/avx2");
    for (int i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        const peer_time *pt = &p.t[r->shape][r->tslot];
        double torch_ms = r->backward ? pt->backward_ms : pt->forward_ms;
        printf("%-18s  %7d  %-8s", bench_shapes[r->shape].name, r->threads,
               r->backward ? "backward" : "forward");
        print_ms(r->ref_ms);
        print_ms(r->avx2_ms);
        print_ms(torch_ms);
        print_ratio(ratio(r->ref_ms, r->avx2_ms));
        print_ratio(ratio(torch_ms, r->avx2_ms));
        if (r->avx2_note[0]) printf("  avx2: %s", r->avx2_note);
        printf("\n");
    }
    bool any_parity = false;
    for (size_t s = 0; s < N_SHAPES; s++)
        if (isfinite(p.parity[s][0])) {
            if (!any_parity) printf("\nPyTorch vs ours (forward, same inputs):\n");
            any_parity = true;
            printf("  %-18s  max |diff| %.3g  (max |out| %.3g, relative %.3g)\n",
                   bench_shapes[s].name, p.parity[s][0], p.parity[s][1],
                   p.parity[s][1] > 0 ? p.parity[s][0] / p.parity[s][1] : 0.0);
        }
    printf(
        "\ntorch/avx2 > 1: we are faster. torch backward = autograd backward alone (its forward\n"
        "saved what it needs); ours recomputes the samples. Goal: forward >= %.0fx PyTorch on\n"
        "one thread: %s.\n",
        GOAL_VS_TORCH,
        goal_met < 0 ? "not measured"
        : goal_met   ? "met on every shape"
                     : "NOT met");
    return rc;
}
