/* SPDX-License-Identifier: MIT */
/*
 * The sdpa rows of `libreyolo bench kernels`: the attention shapes of the target
 * models, timed for the reference (manual attention), every eligible accelerated
 * implementation (the fused AVX2 kernel, plugins) and PyTorch 1.13's manual
 * attention (bench/peers/torch_sdpa.py, run as a subprocess in the same run), at
 * 1 and 2 threads (or --threads). GFLOP/s counts the two matmuls only,
 * 4*B*H*N^2*d. The reference is slow enough on the OWLv2 shape (seconds per
 * head) that it is timed on 2 of the 12 heads and scaled: heads are independent
 * and the reference splits work by head, so the time is linear in them.
 */
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/json_out.h"
#include "libreyolo/sdpa.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PEER_TIMEOUT_S 600
#define PROBE_TIMEOUT_S 60
#define MAX_IMPLS 8
#define TARGET_VS_REFERENCE 2.0

typedef struct bench_shape {
    const char *label, *key;
    int64_t B, H, N, d;
    bool swin_masks;
    int max_repeats;     /* the shape is slow: at most this many timed runs */
    int64_t reference_h; /* heads the reference is timed on (scaled to H) */
} bench_shape;

static const bench_shape shapes[] = {
    {"Swin-T stage 1 (64 windows x 3 heads, N 49, d 32)", "swin_t_stage1", 64, 3, 49, 32, true, 0,
     3},
    {"ViT-S/16 @224 (6 heads, N 197, d 64)", "vit_s16", 1, 6, 197, 64, false, 0, 6},
    {"RF-DETR-n @384 windows (4 x 6 heads, N 145, d 64)", "rfdetr_n_window", 4, 6, 145, 64, false,
     0, 6},
    {"RF-DETR-n @384 global (6 heads, N 577, d 64)", "rfdetr_n_global", 1, 6, 577, 64, false, 0, 2},
    {"SwinIR-s @256 windows (1024 x 6 heads, N 64, d 10)", "swinir_s_window", 1024, 6, 64, 10,
     true, 0, 1},
    {"OWLv2-B/16 @960 (12 heads, N 3601, d 64)", "owlv2_b16_960", 1, 12, 3601, 64, false, 3, 2},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* ---- operands ------------------------------------------------------------------------ */

typedef struct operands {
    float *q, *k, *v, *bias, *mask, *out, *check;
    ly_tensor tq, tk, tv, tbias, tmask, tout;
} operands;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Roughly normal (a sum of four uniforms), cheap for the 3601-token tensors. */
static void fill(float *p, size_t n, float gain, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = splitmix(&seed);
        float s = (float)(r & 0xFFFF) + (float)((r >> 16) & 0xFFFF) + (float)((r >> 32) & 0xFFFF) +
                  (float)(r >> 48);
        p[i] = (s * (1.0f / 65536.0f) - 2.0f) * 1.7320508f * gain;
    }
}

static void operands_free(operands *o)
{
    free(o->q);
    free(o->k);
    free(o->v);
    free(o->bias);
    free(o->mask);
    free(o->out);
    free(o->check);
}

static bool operands_alloc(operands *o, const bench_shape *s)
{
    memset(o, 0, sizeof *o);
    size_t n = (size_t)(s->B * s->H * s->N * s->d);
    o->q = malloc(n * sizeof(float));
    o->k = malloc(n * sizeof(float));
    o->v = malloc(n * sizeof(float));
    o->out = malloc(n * sizeof(float));
    o->check = malloc(n * sizeof(float));
    if (!o->q || !o->k || !o->v || !o->out || !o->check) return false;
    fill(o->q, n, 1.5f, 1);
    fill(o->k, n, 1.0f, 2);
    fill(o->v, n, 1.0f, 3);
    int64_t shape[4] = {s->B, s->H, s->N, s->d};
    ly_tensor_init(&o->tq, o->q, LY_F32, 4, shape);
    ly_tensor_init(&o->tk, o->k, LY_F32, 4, shape);
    ly_tensor_init(&o->tv, o->v, LY_F32, 4, shape);
    ly_tensor_init(&o->tout, o->out, LY_F32, 4, shape);
    if (s->swin_masks) {
        size_t nb = (size_t)(s->H * s->N * s->N), nm = (size_t)(s->B * s->N * s->N);
        o->bias = malloc(nb * sizeof(float));
        o->mask = malloc(nm * sizeof(float));
        if (!o->bias || !o->mask) return false;
        fill(o->bias, nb, 0.02f, 4);
        uint64_t seed = 5;
        for (size_t i = 0; i < nm; i++)
            o->mask[i] = splitmix(&seed) % 3 == 0 ? -100.0f : 0.0f;
        ly_tensor_init(&o->tbias, o->bias, LY_F32, 4, (int64_t[]){1, s->H, s->N, s->N});
        ly_tensor_init(&o->tmask, o->mask, LY_F32, 4, (int64_t[]){s->B, 1, s->N, s->N});
    }
    return true;
}

/* A call on the first `heads` heads (B is 1 where heads < H, so they are a prefix). */
static void make_call(ly_kernel_call *call, operands *o, const bench_shape *s, int64_t heads,
                      ly_tensor view[4], float *out, int threads)
{
    ly_kernel_call_init(call);
    int64_t shape[4] = {s->B, heads, s->N, s->d};
    ly_tensor_init(&view[0], o->q, LY_F32, 4, shape);
    ly_tensor_init(&view[1], o->k, LY_F32, 4, shape);
    ly_tensor_init(&view[2], o->v, LY_F32, 4, shape);
    ly_tensor_init(&view[3], out, LY_F32, 4, shape);
    call->in[0] = &view[0];
    call->in[1] = &view[1];
    call->in[2] = &view[2];
    call->out[0] = &view[3];
    if (s->swin_masks) {
        call->in[3] = &o->tbias;
        call->in[4] = &o->tmask;
    }
    call->threads = threads;
}

/* ---- timing --------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median (nearest rank) of `runs` timed calls, after one warm-up if asked, in ms. */
static ly_status time_impl(const char *impl, const ly_kernel_call *call, int runs, bool warmup,
                           double *ms)
{
    double t[64];
    if (runs > 64) runs = 64;
    ly_status st = warmup ? ly_kernel_run_impl(ly_op_name(LY_OP_SDPA), impl, call) : LY_OK;
    for (int i = 0; st == LY_OK && i < runs; i++) {
        double t0 = ly_cli_now_s();
        st = ly_kernel_run_impl(ly_op_name(LY_OP_SDPA), impl, call);
        t[i] = (ly_cli_now_s() - t0) * 1e3;
    }
    if (st != LY_OK) return st;
    qsort(t, (size_t)runs, sizeof t[0], cmp_double);
    *ms = t[(runs + 1) / 2 - 1];
    return LY_OK;
}

/* ---- the PyTorch peer ------------------------------------------------------------------- */

typedef struct peer {
    bool available;
    char reason[512];
    char python[PATH_MAX];
    char script[PATH_MAX + 32];
    char version[64];
} peer;

static void find_peer(peer *p)
{
    memset(p, 0, sizeof *p);
    if (!ly_cli_find_peer_script("torch_sdpa.py", p->script, sizeof p->script)) {
        p->script[0] = '\0';
        snprintf(p->reason, sizeof p->reason,
                 "bench/peers/torch_sdpa.py not found (set LIBREYOLO_BENCH_PEERS)");
        return;
    }
    ly_cli_progress("bench sdpa: looking for a python3 with torch");
    const char *tried = NULL;
    const char *python = ly_cli_find_python("import torch", PROBE_TIMEOUT_S, &tried);
    ly_cli_progress_end();
    if (python) {
        p->available = true;
        snprintf(p->python, sizeof p->python, "%s", python);
    } else {
        snprintf(p->reason, sizeof p->reason,
                 "%s cannot import torch (apt-get install python3-torch, or set "
                 "LIBREYOLO_PYTHON)",
                 tried);
    }
}

/* Every shape at one thread count in one interpreter (torch's import costs
 * seconds). Fills torch_ms[shape] (NAN when missing); false with a reason when the
 * peer failed. */
static bool run_peer(peer *p, int threads, int repeats, double torch_ms[N_SHAPES], char *why,
                     size_t why_size)
{
    for (size_t s = 0; s < N_SHAPES; s++)
        torch_ms[s] = NAN;
    char thr[16], runs[16], cases[N_SHAPES][96];
    snprintf(thr, sizeof thr, "%d", threads);
    snprintf(runs, sizeof runs, "%d", repeats);
    char *argv[8 + 2 * N_SHAPES];
    int n = 0;
    argv[n++] = p->python;
    argv[n++] = p->script;
    argv[n++] = "--threads";
    argv[n++] = thr;
    argv[n++] = "--runs";
    argv[n++] = runs;
    for (size_t s = 0; s < N_SHAPES; s++) {
        const bench_shape *b = &shapes[s];
        int r = b->max_repeats && repeats > b->max_repeats ? b->max_repeats : repeats;
        snprintf(cases[s], sizeof cases[s], "%s:%lld:%lld:%lld:%lld:%s:%d", b->key, (long long)b->B,
                 (long long)b->H, (long long)b->N, (long long)b->d, b->swin_masks ? "swin" : "none",
                 r);
        argv[n++] = "--case";
        argv[n++] = cases[s];
    }
    argv[n] = NULL;
    ly_cli_progress("bench sdpa: PyTorch manual attention, %d thread(s)", threads);
    ly_cli_captured c;
    int e = ly_cli_run_capture(argv, PEER_TIMEOUT_S, &c);
    ly_cli_progress_end();
    if (e != 0) {
        snprintf(why, why_size, "cannot start %.200s: %s", p->python, strerror(e));
        return false;
    }
    char last[256];
    ly_cli_last_line(c.err, last, sizeof last);
    cJSON *root = c.out ? cJSON_Parse(c.out) : NULL;
    bool ok = false;
    if (c.timed_out) {
        snprintf(why, why_size, "timed out after %d s", PEER_TIMEOUT_S);
    } else if (c.exit_code != 0 || !root) {
        snprintf(why, why_size, "exit status %d: %s", c.exit_code, last[0] ? last : "no output");
    } else {
        const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
        if (cJSON_IsString(version))
            snprintf(p->version, sizeof p->version, "%s", version->valuestring);
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "cases"), *item;
        cJSON_ArrayForEach(item, list)
        {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
            const cJSON *ms = cJSON_GetObjectItemCaseSensitive(item, "median_ms");
            if (!cJSON_IsString(name) || !cJSON_IsNumber(ms)) continue;
            for (size_t s = 0; s < N_SHAPES; s++)
                if (strcmp(shapes[s].key, name->valuestring) == 0) torch_ms[s] = ms->valuedouble;
        }
        ok = true;
    }
    cJSON_Delete(root);
    ly_cli_captured_free(&c);
    return ok;
}

/* ---- the rows ---------------------------------------------------------------------------- */

typedef struct impl_row {
    char name[64];
    double ms;
    bool ok, identical;
    char error[160];
} impl_row;

typedef struct result_row {
    const bench_shape *shape;
    int threads;
    double gflop;
    double reference_ms; /* scaled to every head */
    int64_t reference_heads;
    bool reference_ok;
    char reference_error[160];
    impl_row impls[MAX_IMPLS];
    int n_impls;
    double torch_ms;
} result_row;

typedef struct impl_names {
    char names[MAX_IMPLS][64];
    int n;
} impl_names;

static void on_impl(const char *slot, const char *impl, bool eligible, const char *why_not,
                    void *user)
{
    (void)slot;
    (void)why_not;
    impl_names *l = user;
    if (eligible && strcmp(impl, "reference") != 0 && l->n < MAX_IMPLS)
        snprintf(l->names[l->n++], sizeof l->names[0], "%s", impl);
}

static bool bench_shape_threads(const bench_shape *s, operands *o, int threads, int repeats,
                                const impl_names *impls, result_row *row)
{
    memset(row, 0, sizeof *row);
    row->shape = s;
    row->threads = threads;
    row->gflop = 4.0 * (double)(s->B * s->H) * (double)s->N * (double)s->N * (double)s->d * 1e-9;
    row->torch_ms = NAN;
    int runs = s->max_repeats && repeats > s->max_repeats ? s->max_repeats : repeats;
    ly_tensor view[4];
    ly_kernel_call call;

    /* The reference on a prefix of heads (B is 1 whenever that is fewer than H). */
    int64_t heads = s->B == 1 ? s->reference_h : s->H;
    row->reference_heads = heads;
    make_call(&call, o, s, heads, view, o->check, threads);
    ly_cli_progress("bench sdpa: %s, reference, %d thread(s)", s->key, threads);
    double ms = NAN;
    /* Seconds per run on OWLv2: one run, no warm-up, is plenty. */
    bool slow = heads < s->H;
    ly_status st = time_impl("reference", &call, slow ? 1 : runs, !slow, &ms);
    row->reference_ok = st == LY_OK;
    if (st == LY_OK)
        row->reference_ms = ms * (double)s->H / (double)heads;
    else
        snprintf(row->reference_error, sizeof row->reference_error, "%s", ly_last_error());

    for (int i = 0; i < impls->n; i++) {
        impl_row *ir = &row->impls[row->n_impls++];
        snprintf(ir->name, sizeof ir->name, "%s", impls->names[i]);
        make_call(&call, o, s, s->H, view, o->out, threads);
        ly_cli_progress("bench sdpa: %s, %s, %d thread(s)", s->key, ir->name, threads);
        st = time_impl(ir->name, &call, runs, true, &ir->ms);
        ir->ok = st == LY_OK;
        if (!ir->ok) {
            snprintf(ir->error, sizeof ir->error, "%s", ly_last_error());
            continue;
        }
        /* The heads the reference computed must match bit for bit. */
        size_t n = (size_t)(s->B * heads * s->N * s->d);
        ir->identical = row->reference_ok && memcmp(o->out, o->check, n * sizeof(float)) == 0;
    }
    ly_cli_progress_end();
    return true;
}

static void print_table(const result_row *rows, int n_rows, const peer *p, const char *peer_why)
{
    printf("\nsdpa: scaled dot-product attention (q*scale @ k^T [+ masks], softmax, @ v), fp32\n");
    printf("%-50s %3s  %-11s %10s %8s %9s %8s %8s  %s\n", "shape", "thr", "impl", "ms", "GFLOP/s",
           "vs ref", "vs torch", "bits", "target");
    for (int r = 0; r < n_rows; r++) {
        const result_row *row = &rows[r];
        const char *label = row->shape->label;
        char ref_note[80] = "";
        if (row->reference_heads < row->shape->H)
            snprintf(ref_note, sizeof ref_note, " (%lld of %lld heads, scaled)",
                     (long long)row->reference_heads, (long long)row->shape->H);
        if (row->reference_ok)
            printf("%-50s %3d  %-11s %10.3f %8.2f %9s %8s %8s  %s\n", label, row->threads,
                   "reference", row->reference_ms, row->gflop / (row->reference_ms * 1e-3), "1.00x",
                   "", "", ref_note);
        else
            printf("%-50s %3d  %-11s failed: %s\n", label, row->threads, "reference",
                   row->reference_error);
        for (int i = 0; i < row->n_impls; i++) {
            const impl_row *ir = &row->impls[i];
            if (!ir->ok) {
                printf("%-50s %3d  %-11s failed: %s\n", "", row->threads, ir->name, ir->error);
                continue;
            }
            char vs_ref[16] = "", vs_torch[16] = "";
            double speedup = row->reference_ok ? row->reference_ms / ir->ms : NAN;
            double vs_peer = row->torch_ms / ir->ms;
            if (isfinite(speedup)) snprintf(vs_ref, sizeof vs_ref, "%.2fx", speedup);
            if (isfinite(vs_peer)) snprintf(vs_torch, sizeof vs_torch, "%.2fx", vs_peer);
            const char *target =
                !isfinite(speedup) ? ""
                : speedup >= TARGET_VS_REFERENCE && (!isfinite(vs_peer) || vs_peer > 1.0)
                    ? (isfinite(vs_peer) ? "met" : "met (no peer)")
                : speedup < TARGET_VS_REFERENCE ? "missed: vs reference"
                                                : "missed: vs PyTorch";
            printf("%-50s %3d  %-11s %10.3f %8.2f %9s %8s %8s  %s\n", "", row->threads, ir->name,
                   ir->ms, row->gflop / (ir->ms * 1e-3), vs_ref, vs_torch,
                   ir->identical ? "same" : "DIFFER", target);
        }
        if (isfinite(row->torch_ms))
            printf("%-50s %3d  %-11s %10.3f %8.2f\n", "", row->threads, "pytorch", row->torch_ms,
                   row->gflop / (row->torch_ms * 1e-3));
    }
    if (p->available && !peer_why[0])
        printf("\npytorch: %s, manual attention (bench/peers/torch_sdpa.py), same thread count\n",
               p->version);
    else
        printf("\npytorch: not run: %s\n", peer_why[0] ? peer_why : p->reason);
    printf("ms: median of the timed runs after a warm-up; GFLOP/s: 4*B*H*N^2*d (the two matmuls);\n"
           "vs ref / vs torch: their time over this one (> 1: faster); bits: the output against "
           "the\nreference's (on the heads it ran); target: >= %.0fx the reference and faster than "
           "PyTorch.\n",
           TARGET_VS_REFERENCE);
}

static void print_json(const result_row *rows, int n_rows, const peer *p, const char *peer_why,
                       int repeats)
{
    FILE *o = stdout;
    fputs("{\"bench\": \"sdpa\", \"repeats\": ", o);
    fprintf(o, "%d, \"peer\": {\"runtime\": \"pytorch\", \"available\": %s, \"version\": ", repeats,
            p->available && !peer_why[0] ? "true" : "false");
    ly_json_string(o, p->version[0] ? p->version : NULL);
    fputs(", \"reason\": ", o);
    ly_json_string(o, peer_why[0] ? peer_why : (p->available ? NULL : p->reason));
    fputs("}, \"rows\": [", o);
    for (int r = 0; r < n_rows; r++) {
        const result_row *row = &rows[r];
        const bench_shape *s = row->shape;
        fprintf(o, "%s{\"shape\": ", r ? ", " : "");
        ly_json_string(o, s->key);
        fprintf(o,
                ", \"B\": %lld, \"H\": %lld, \"N\": %lld, \"d\": %lld, \"masks\": %s, "
                "\"threads\": %d, \"gflop\": ",
                (long long)s->B, (long long)s->H, (long long)s->N, (long long)s->d,
                s->swin_masks ? "\"bias+mask\"" : "null", row->threads);
        ly_json_number(o, row->gflop);
        fputs(", \"reference_ms\": ", o);
        ly_json_number(o, row->reference_ok ? row->reference_ms : NAN);
        fprintf(o, ", \"reference_heads_timed\": %lld, \"torch_ms\": ",
                (long long)row->reference_heads);
        ly_json_number(o, row->torch_ms);
        fputs(", \"impls\": [", o);
        for (int i = 0; i < row->n_impls; i++) {
            const impl_row *ir = &row->impls[i];
            fprintf(o, "%s{\"impl\": ", i ? ", " : "");
            ly_json_string(o, ir->name);
            fputs(", \"ms\": ", o);
            ly_json_number(o, ir->ok ? ir->ms : NAN);
            fputs(", \"gflops\": ", o);
            ly_json_number(o, ir->ok ? row->gflop / (ir->ms * 1e-3) : NAN);
            fputs(", \"speedup_vs_reference\": ", o);
            ly_json_number(o, ir->ok && row->reference_ok ? row->reference_ms / ir->ms : NAN);
            fputs(", \"speedup_vs_torch\": ", o);
            ly_json_number(o, ir->ok ? row->torch_ms / ir->ms : NAN);
            fprintf(o, ", \"bit_identical\": %s, \"error\": ", ir->identical ? "true" : "false");
            ly_json_string(o, ir->ok ? NULL : ir->error);
            fputs("}", o);
        }
        fputs("]}", o);
    }
    fputs("]}\n", o);
}

int ly_cli_bench_sdpa(const ly_bench_attention_options *options)
{
    int thread_list[2] = {1, 2}, n_threads = 2;
    if (options->threads > 0) {
        thread_list[0] = options->threads;
        n_threads = 1;
    }
    int repeats = options->repeats > 0 ? options->repeats : 5;
    impl_names impls = {0};
    if (ly_kernel_list(ly_op_name(LY_OP_SDPA), on_impl, &impls) != LY_OK) {
        fprintf(stderr, "libreyolo bench kernels: sdpa: %s\n", ly_last_error());
        return 1;
    }
    peer p;
    memset(&p, 0, sizeof p);
    char peer_why[512] = "";
    if (options->no_peer)
        snprintf(p.reason, sizeof p.reason, "--no-peer");
    else
        find_peer(&p);

    result_row rows[N_SHAPES * 2];
    int n_rows = 0;
    int rc = 0;
    double torch_ms[2][N_SHAPES];
    for (int t = 0; t < n_threads; t++) {
        for (size_t s = 0; s < N_SHAPES; s++)
            torch_ms[t][s] = NAN;
        if (p.available && !peer_why[0])
            run_peer(&p, thread_list[t], repeats, torch_ms[t], peer_why, sizeof peer_why);
    }
    for (size_t s = 0; s < N_SHAPES; s++) {
        operands o;
        if (!operands_alloc(&o, &shapes[s])) {
            operands_free(&o);
            fprintf(stderr, "libreyolo bench kernels: sdpa: out of memory for %s\n", shapes[s].key);
            return 1;
        }
        for (int t = 0; t < n_threads; t++) {
            result_row *row = &rows[n_rows++];
            bench_shape_threads(&shapes[s], &o, thread_list[t], repeats, &impls, row);
            row->torch_ms = torch_ms[t][s];
            for (int i = 0; i < row->n_impls; i++)
                if (!row->impls[i].ok || !row->impls[i].identical) rc = 1;
        }
        operands_free(&o);
    }
    if (options->json)
        print_json(rows, n_rows, &p, peer_why, repeats);
    else
        print_table(rows, n_rows, &p, peer_why);
    return rc;
}
