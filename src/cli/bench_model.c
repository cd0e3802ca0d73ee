/* SPDX-License-Identifier: MIT */
/*
 * `libreyolo bench model`: load time, latency and memory of one detector, and of
 * the same network in ONNX Runtime and PyTorch ("peers", bench/peers/) when they
 * are installed, in one run on one machine.
 *
 * Latencies are the median and 90th percentile (nearest rank, as the peers
 * compute them) of R timed calls after W warm-up calls, on one fixed
 * preprocessed input for the network alone, and on one image file end to end.
 * Peers run after our measurements, one at a time, so nobody competes for the
 * cores; they time the same input file and report JSON on stdout.
 */
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/json_out.h"
#include "libreyolo/io.h"
#include "libreyolo/kernels.h"
#include "libreyolo/model.h"

#include <errno.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86_FMA_PROBE 1
#endif
#include <inttypes.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_RUNS 20
#define MAX_ROUNDS 100
#define DEFAULT_WARMUP 3
#define DEFAULT_CORE_GFLOPS 93.0 /* one core's fp32 FMA peak on the project's reference VM */
#define DEFAULT_NANODET_INPUT "../shared/testdata/nanodet/parkour/input.npy"
#define PEER_TIMEOUT_S 600
#define PROBE_TIMEOUT_S 60
#define DEFAULT_IMAGE "../shared/testdata/images/parkour.jpg"

void ly_cli_usage_bench_model(FILE *to)
{
    fputs(
        "usage: libreyolo bench model --model M [--imgsz S] [--threads N] [--runs R] [--warmup W]\n"
        "                             [--input X.npy] [--image I|--no-image] [--onnx O.onnx]\n"
        "                             [--peers DIR|--no-peers] [--gflop G] [--core-gflops P] "
        "[--json]\n"
        "                             [--batch N] [--rounds K] [--vs M2]\n"
        "\n"
        "Times loading M, the network alone (ly_model_run on a fixed preprocessed input) and\n"
        "prediction on an image file end to end (median and p90 of R runs after W warm-ups),\n"
        "reports peak RSS and the RSS of the model, then runs the peers in bench/peers/ on\n"
        "the same input and thread count: ONNX Runtime (node + onnxruntime-node) on an ONNX\n"
        "export of the network (every checkpoint family: LibreYOLO's own export next to M)\n"
        "and PyTorch (python3 + torch) on the same checkpoint (YOLO9 only; a TF.js graph\n"
        "such as NanoDet has no peers).\n"
        "  --model M         checkpoint (.pt), TF.js graph model, or a named model (nanodet)\n"
        "  --imgsz S         square input size (default: the checkpoint's)\n"
        "  --threads N       threads for us and for each peer (default 1)\n"
        "  --fused-attn MODE on or off: attention through the fused sdpa kernel or the\n"
        "                    manual expression (default: the model's)\n"
        "  --runs R          timed runs (default 20)\n"
        "  --warmup W        warm-up runs (default 3)\n"
        "  --rounds K        K interleaved rounds (ours, then each peer, K times): the\n"
        "                    minimum and median of each, and ours over each peer as the\n"
        "                    ratio of minima and of medians (default 1: the table only)\n"
        "  --vs M2           another model of ours on the same input, threads and\n"
        "                    attention form, timed as M is and interleaved with it (a row\n"
        "                    and, with --rounds, a ratio of minima): e.g. an int8\n"
        "                    checkpoint against its fp32 original\n"
        "  --batch N         also time one run on N copies of the input against N single\n"
        "                    runs, interleaved R times (models whose network takes a batch)\n"
        "  --input X.npy     preprocessed input [1,3,S,S] float32 (default: ref_parkour/,\n"
        "                    ref_giraffe/ or ref_dog/input.npy next to M, or for NanoDet\n"
        "                    " DEFAULT_NANODET_INPUT ",\n"
        "                    when it fits, else a fixed pseudo-random input)\n"
        "  --image I         image for the end-to-end line (default " DEFAULT_IMAGE "\n"
        "                    when present); --no-image skips that line\n"
        "  --onnx O.onnx     the ONNX Runtime peer's model (default: M with the suffix .onnx)\n"
        "  --peers DIR       where ort_model.js and torch_yolo9.py are (default:\n"
        "                    $LIBREYOLO_BENCH_PEERS, ./bench/peers, <exe>/../bench/peers)\n"
        "  --no-peers        only our own figures\n"
        "  --gflop G         the network's cost at S (default: LibreYOLO9t's 7.7 at 640, else\n"
        "                    2 x the multiply-adds of the network's convolutions, linears,\n"
        "                    matmuls and attention)\n"
        "  --core-gflops P   one core's FMA peak, GFLOP/s (default: measured here with AVX2/\n"
        "                    AVX-512 FMA chains, the best of short runs before and after the\n"
        "                    timings; 93, the project's VM, without them)\n"
        "  --json            one JSON object instead of the table\n"
        "Environment: LIBREYOLO_PYTHON (default: the first of python3, /usr/bin/python3 that\n"
        "can import torch), LIBREYOLO_NODE (default node).\n"
        "Ratios peer/ours > 1 mean we are faster. Peers that are not installed are reported\n"
        "as \"not available\", not as errors. A .pte program also runs with its XNNPACK\n"
        "delegates on XNNPACK's operators (LIBREYOLO_XNNPACK=operators) as a peer row.\n",
        to);
}

static bool parse_positive(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !isfinite(v) || v <= 0) return false;
    *out = v;
    return true;
}

/* ---- Memory ---------------------------------------------------------------------- */

/* Resident set size now, in MiB; NAN where /proc is not available. */
static double rss_now_mib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return NAN;
    long size_pages, resident_pages;
    int n = fscanf(f, "%ld %ld", &size_pages, &resident_pages);
    fclose(f);
    if (n != 2) return NAN;
    return (double)resident_pages * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

static double rss_peak_mib(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return NAN;
    return (double)ru.ru_maxrss / 1024.0; /* Linux reports KiB */
}

/* ---- Statistics ------------------------------------------------------------------ */

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct latency {
    double median_ms, p90_ms, min_ms;
} latency;

/* Nearest-rank percentile of sorted samples. */
static double percentile(const double *sorted, int n, double q)
{
    int idx = (int)ceil(q * n) - 1;
    if (idx < 0) idx = 0;
    if (idx > n - 1) idx = n - 1;
    return sorted[idx];
}

static latency summarize(double *ms, int n)
{
    qsort(ms, (size_t)n, sizeof *ms, compare_double);
    return (latency){percentile(ms, n, 0.5), percentile(ms, n, 0.9), ms[0]};
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_double);
    return percentile(v, n, 0.5);
}

/* ---- Our measurements ------------------------------------------------------------ */

typedef struct bench_config {
    const char *model_path;
    const char *input_path; /* NULL: default */
    const char *image_path; /* NULL: default */
    bool no_image;
    const char *onnx_path;
    const char *peers_dir;
    bool no_peers;
    int imgsz; /* 0: the checkpoint's */
    int threads, runs, warmup;
    int fused;           /* --fused-attn: -1 the model's default */
    double gflop;        /* 0: known table */
    double core_gflops;  /* 0: measure */
    bool peak_measured;  /* core_gflops measured here: measured again after the runs */
    int batch;           /* > 1: a batch of this many against as many single runs */
    int rounds;          /* interleaved rounds of ours and the peers */
    const char *vs_path; /* --vs: another model of ours, timed beside M */
    char peak_source[96];
    bool json;
} bench_config;

typedef struct ours_result {
    ly_model_info info; /* strings point into family/size below: the model is freed early */
    char family[32], size[16];
    bool executorch; /* a .pte program (its engine is ExecuTorch's) */
    int imgsz;
    double load_ms;
    double rss_model_after_load_mib, rss_model_after_warmup_mib, peak_rss_mib;
    char input_desc[PATH_MAX + 64];
    char input_file[PATH_MAX + 64]; /* the input as a file the peers can read ("" until written) */
    latency run;
    bool have_predict;
    char image[PATH_MAX + 64];
    char image_skip_reason[PATH_MAX + 64];
    latency predict;
    double pre_ms, net_ms, post_ms;
    size_t detections;
    double graph_gflop; /* the network's convolutions at imgsz; NAN when unknown */
    /* --batch: per image, a batch's share against a single run, interleaved */
    bool have_batch;
    latency batch_per_image, single_per_image;
    char batch_skip_reason[160];
} ours_result;

static void ignore_output(const char *name, const ly_tensor *output, void *user)
{
    (void)name;
    (void)output;
    (void)user;
}

static void fill_pseudo_random(float *x, int64_t n)
{
    uint32_t s = 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        x[i] = (float)(s >> 8) / 16777216.0f;
    }
}

static void dirname_of(const char *path, char *out, size_t size)
{
    snprintf(out, size, "%s", path);
    char *slash = strrchr(out, '/');
    if (slash == out)
        out[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(out, size, ".");
}

static bool input_fits(const ly_tensor *t, int imgsz)
{
    return t->dtype == LY_F32 && t->ndim == 4 && t->shape[0] == 1 && t->shape[1] == 3 &&
           t->shape[2] == imgsz && t->shape[3] == imgsz;
}

/* The fixed input: --input, else the fixture's input next to the checkpoint when it
 * has the right size, else a pseudo-random one. */
static int prepare_input(const bench_config *cfg, ours_result *r, ly_tensor *input)
{
    if (cfg->input_path) {
        if (ly_npy_load(cfg->input_path, input) != LY_OK) {
            fprintf(stderr, "libreyolo bench model: --input: %s\n", ly_last_error());
            return 1;
        }
        if (!input_fits(input, r->imgsz)) {
            fprintf(stderr, "libreyolo bench model: --input %s: expected float32 [1, 3, %d, %d]\n",
                    cfg->input_path, r->imgsz, r->imgsz);
            return 2;
        }
        snprintf(r->input_desc, sizeof r->input_desc, "%s", cfg->input_path);
        snprintf(r->input_file, sizeof r->input_file, "%s", cfg->input_path);
        return 0;
    }
    char dir[PATH_MAX], guess[PATH_MAX + 32];
    dirname_of(cfg->model_path, dir, sizeof dir);
    /* a fixture's reference input next to the model, when one fits */
    static const char *const refs[] = {"ref_parkour", "ref_giraffe", "ref_dog"};
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        snprintf(guess, sizeof guess, "%s/%s/input.npy", dir, refs[i]);
        if (strcmp(r->info.family, "nanodet") == 0)
            snprintf(guess, sizeof guess, "%s", DEFAULT_NANODET_INPUT);
        if (ly_cli_file_exists(guess) && ly_npy_load(guess, input) == LY_OK) {
            if (input_fits(input, r->imgsz)) {
                snprintf(r->input_desc, sizeof r->input_desc, "%s", guess);
                snprintf(r->input_file, sizeof r->input_file, "%s", guess);
                return 0;
            }
            ly_npy_free(input);
        }
    }
    int64_t shape[4] = {1, 3, r->imgsz, r->imgsz};
    if (ly_tensor_alloc(input, LY_F32, 4, shape) != LY_OK) {
        fprintf(stderr, "libreyolo bench model: input: %s\n", ly_last_error());
        return 1;
    }
    fill_pseudo_random(input->data, ly_tensor_numel(input));
    snprintf(r->input_desc, sizeof r->input_desc, "pseudo-random [1, 3, %d, %d]", r->imgsz,
             r->imgsz);
    r->input_file[0] = '\0';
    return 0;
}

static int time_network(ly_model *m, const ly_tensor *input, const bench_config *cfg, latency *out)
{
    double *ms = malloc((size_t)cfg->runs * sizeof *ms);
    if (!ms) {
        fprintf(stderr, "libreyolo bench model: out of memory\n");
        return 1;
    }
    for (int i = 0; i < cfg->warmup + cfg->runs; i++) {
        ly_cli_progress("bench: network, %s %d/%d", i < cfg->warmup ? "warm-up" : "run",
                        i < cfg->warmup ? i + 1 : i - cfg->warmup + 1,
                        i < cfg->warmup ? cfg->warmup : cfg->runs);
        double t0 = ly_cli_now_s();
        ly_status st = ly_model_run(m, input, ignore_output, NULL);
        double t = (ly_cli_now_s() - t0) * 1e3;
        if (st != LY_OK) {
            ly_cli_progress_end();
            fprintf(stderr, "libreyolo bench model: ly_model_run: %s\n", ly_last_error());
            free(ms);
            return 1;
        }
        if (i >= cfg->warmup) ms[i - cfg->warmup] = t;
    }
    *out = summarize(ms, cfg->runs);
    free(ms);
    return 0;
}

/* --batch N: rounds of one run on N copies of the input and N single runs,
 * interleaved so that both see the same machine; per image. */
static int time_batch(ly_model *m, const ly_tensor *input, const bench_config *cfg, ours_result *r)
{
    int n = cfg->batch;
    if (!r->info.batched) {
        snprintf(r->batch_skip_reason, sizeof r->batch_skip_reason,
                 "this model's network takes one image per call");
        return 0;
    }
    ly_tensor batch;
    int64_t shape[4] = {n, 3, input->shape[2], input->shape[3]};
    if (ly_tensor_alloc(&batch, LY_F32, 4, shape) != LY_OK) {
        fprintf(stderr, "libreyolo bench model: --batch %d: %s\n", n, ly_last_error());
        return 1;
    }
    size_t one = (size_t)ly_tensor_numel(input) * sizeof(float);
    for (int i = 0; i < n; i++)
        memcpy((char *)batch.data + (size_t)i * one, input->data, one);
    double *together = malloc((size_t)cfg->runs * sizeof *together),
           *alone = malloc((size_t)cfg->runs * sizeof *alone);
    int rc = together && alone ? 0 : 1;
    if (rc) fprintf(stderr, "libreyolo bench model: out of memory\n");
    for (int i = 0; !rc && i < cfg->warmup + cfg->runs; i++) {
        ly_cli_progress("bench: batch of %d against %d single runs, %s %d/%d", n, n,
                        i < cfg->warmup ? "warm-up" : "round",
                        i < cfg->warmup ? i + 1 : i - cfg->warmup + 1,
                        i < cfg->warmup ? cfg->warmup : cfg->runs);
        double t0 = ly_cli_now_s();
        ly_status st = ly_model_run(m, &batch, ignore_output, NULL);
        double t1 = ly_cli_now_s();
        for (int k = 0; st == LY_OK && k < n; k++)
            st = ly_model_run(m, input, ignore_output, NULL);
        double t2 = ly_cli_now_s();
        if (st != LY_OK) {
            fprintf(stderr, "libreyolo bench model: --batch: %s\n", ly_last_error());
            rc = 1;
        } else if (i >= cfg->warmup) {
            together[i - cfg->warmup] = (t1 - t0) * 1e3 / n;
            alone[i - cfg->warmup] = (t2 - t1) * 1e3 / n;
        }
    }
    if (!rc) {
        r->batch_per_image = summarize(together, cfg->runs);
        r->single_per_image = summarize(alone, cfg->runs);
        r->have_batch = true;
    }
    free(together);
    free(alone);
    ly_tensor_free(&batch);
    return rc;
}

static int time_predict(ly_model *m, const bench_config *cfg, ours_result *r)
{
    double *ms = malloc((size_t)cfg->runs * 4 * sizeof *ms);
    if (!ms) {
        fprintf(stderr, "libreyolo bench model: out of memory\n");
        return 1;
    }
    double *pre = ms + cfg->runs, *net = pre + cfg->runs, *post = net + cfg->runs;
    ly_predict_options opt;
    ly_predict_options_init(&opt);
    opt.imgsz = r->imgsz;
    for (int i = 0; i < cfg->warmup + cfg->runs; i++) {
        ly_cli_progress("bench: predict %s, %s %d/%d", r->image,
                        i < cfg->warmup ? "warm-up" : "run",
                        i < cfg->warmup ? i + 1 : i - cfg->warmup + 1,
                        i < cfg->warmup ? cfg->warmup : cfg->runs);
        ly_results *res = NULL;
        double t0 = ly_cli_now_s();
        ly_status st = ly_model_predict_file(m, r->image, &opt, &res);
        double t = (ly_cli_now_s() - t0) * 1e3;
        if (st != LY_OK) {
            ly_cli_progress_end();
            fprintf(stderr, "libreyolo bench model: ly_model_predict_file: %s\n", ly_last_error());
            free(ms);
            return 1;
        }
        if (i >= cfg->warmup) {
            int k = i - cfg->warmup;
            ms[k] = t;
            if (ly_results_speed(res, &pre[k], &net[k], &post[k]) != LY_OK)
                pre[k] = net[k] = post[k] = NAN;
            ly_results_count(res, &r->detections);
        }
        ly_results_free(res);
    }
    r->predict = summarize(ms, cfg->runs);
    r->pre_ms = median_of(pre, cfg->runs);
    r->net_ms = median_of(net, cfg->runs);
    r->post_ms = median_of(post, cfg->runs);
    r->have_predict = true;
    free(ms);
    return 0;
}

static void choose_image(const bench_config *cfg, ours_result *r)
{
    r->image[0] = '\0';
    if (cfg->no_image) {
        snprintf(r->image_skip_reason, sizeof r->image_skip_reason, "--no-image");
        return;
    }
    if (cfg->image_path) {
        snprintf(r->image, sizeof r->image, "%s", cfg->image_path);
        return;
    }
    if (ly_cli_file_exists(DEFAULT_IMAGE)) {
        snprintf(r->image, sizeof r->image, "%s", DEFAULT_IMAGE);
        return;
    }
    /* the fixture layout: <testdata>/yolo9/M next to <testdata>/images/ */
    char dir[PATH_MAX], guess[PATH_MAX + 32];
    dirname_of(cfg->model_path, dir, sizeof dir);
    snprintf(guess, sizeof guess, "%s/../images/parkour.jpg", dir);
    if (ly_cli_file_exists(guess)) {
        snprintf(r->image, sizeof r->image, "%s", guess);
        return;
    }
    snprintf(r->image_skip_reason, sizeof r->image_skip_reason,
             "no image (%s not found; use --image I)", DEFAULT_IMAGE);
}

/* 2 x the multiply-adds of every convolution at imgsz (NAN when the family
 * has no graph). */
static double graph_gflop(const ly_model *m, int imgsz)
{
    ly_model_stats stats;
    return ly_model_get_stats(m, imgsz, &stats) == LY_OK ? stats.gflop : NAN;
}

static int measure_ours(const bench_config *cfg, ours_result *r, ly_tensor *input)
{
    ly_model_options mopt = {.threads = cfg->threads};
    ly_model *m = NULL;
    ly_cli_progress("bench: loading %s", cfg->model_path);
    double rss0 = rss_now_mib();
    double t0 = ly_cli_now_s();
    if (ly_model_load(cfg->model_path, &mopt, &m) != LY_OK) {
        ly_cli_progress_end();
        fprintf(stderr, "libreyolo bench model: %s\n", ly_last_error());
        return 1;
    }
    r->load_ms = (ly_cli_now_s() - t0) * 1e3;
    int fused_code = ly_cli_apply_fused("bench model", m, cfg->fused);
    if (fused_code) {
        ly_model_free(m);
        return fused_code;
    }
    /* Loading's temporaries are freed by now: give their pages back, so the
     * figures below are the model's and the runs', not the loader's. */
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    double rss_loaded = rss_now_mib();
    r->rss_model_after_load_mib = rss_loaded - rss0;

    int rc = 0;
    if (ly_model_get_info(m, &r->info) != LY_OK) {
        fprintf(stderr, "libreyolo bench model: %s\n", ly_last_error());
        rc = 1;
        goto done;
    }
    r->imgsz = cfg->imgsz > 0 ? cfg->imgsz : (int)r->info.imgsz;
    rc = prepare_input(cfg, r, input);
    if (rc) goto done;

    /* The input buffer is ours, not the model's: measure around it. */
    r->graph_gflop = graph_gflop(m, r->imgsz);
    double rss_before_runs = rss_now_mib();
    rc = time_network(m, input, cfg, &r->run);
    if (rc) goto done;
    r->rss_model_after_warmup_mib = r->rss_model_after_load_mib + rss_now_mib() - rss_before_runs;
    if (cfg->batch > 1 && (rc = time_batch(m, input, cfg, r)) != 0) goto done;

    choose_image(cfg, r);
    /* The end-to-end line preprocesses into the model's own input: ours would
     * only add its 4.7 MiB (at 640) to the peak. The peers re-read a file
     * input, so only a generated one is kept for them. */
    if (r->input_file[0] && cfg->rounds <= 1) ly_tensor_free(input);
    if (r->image[0]) rc = time_predict(m, cfg, r);
    r->peak_rss_mib = rss_peak_mib();
done:
    ly_cli_progress_end();
    r->executorch = r->info.engine && strcmp(r->info.engine, "executorch") == 0;
    /* The info strings belong to the model; keep copies for the report. */
    snprintf(r->family, sizeof r->family, "%s", r->info.family ? r->info.family : "?");
    snprintf(r->size, sizeof r->size, "%s", r->info.size ? r->info.size : "?");
    r->info.family = r->family;
    r->info.size = r->size;
    r->info.task = NULL;
    r->info.names = NULL;
    ly_model_free(m);
    return rc;
}

/* ---- Peers ----------------------------------------------------------------------- */

/* The value after "key": in a flat scan of a JSON text (our peers' keys are unique). */
static const char *json_value(const char *json, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\"", key);
    const char *p = strstr(json, pattern);
    if (!p) return NULL;
    p += strlen(pattern);
    while (*p == ' ')
        p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

static double json_number_at(const char *json, const char *key)
{
    const char *v = json_value(json, key);
    if (!v) return NAN;
    char *end;
    double d = strtod(v, &end);
    return end == v ? NAN : d;
}

static void json_string_at(const char *json, const char *key, char *out, size_t size)
{
    out[0] = '\0';
    const char *v = json_value(json, key);
    if (!v || *v != '"') return;
    v++;
    size_t n = 0;
    while (v[n] && v[n] != '"' && v[n] != '\\' && n + 1 < size)
        n++;
    memcpy(out, v, n);
    out[n] = '\0';
}

/* The first complete JSON object in `text` (strings respected), or NULL. */
static char *first_json_object(const char *text)
{
    const char *start = text ? strchr(text, '{') : NULL;
    if (!start) return NULL;
    int depth = 0;
    bool in_string = false;
    for (const char *p = start; *p; p++) {
        if (in_string) {
            if (*p == '\\' && p[1])
                p++;
            else if (*p == '"')
                in_string = false;
        } else if (*p == '"') {
            in_string = true;
        } else if (*p == '{') {
            depth++;
        } else if (*p == '}' && --depth == 0) {
            size_t n = (size_t)(p - start) + 1;
            char *obj = malloc(n + 1);
            if (!obj) return NULL;
            memcpy(obj, start, n);
            obj[n] = '\0';
            return obj;
        }
    }
    return NULL;
}

typedef enum peer_state { PEER_NOT_RUN, PEER_UNAVAILABLE, PEER_FAILED, PEER_OK } peer_state;

typedef struct peer_result {
    const char *label; /* "ONNX Runtime", "PyTorch" */
    peer_state state;
    char reason[512];
    char *json; /* the peer's own JSON object */
    char version[64];
    double median_ms, p90_ms, min_ms, load_ms, peak_rss_mib;
    int parity; /* -1 not checked, 0 failed, 1 ok */
} peer_result;

/* Everything timed beside ours: the peers, and --vs's model of ours. */
typedef struct peer_set {
    peer_result ort, torch, ops, vs;
} peer_set;

static void peer_set_init(peer_set *p, const bench_config *cfg)
{
    *p = (peer_set){.ort = {.label = "ONNX Runtime", .parity = -1},
                    .torch = {.label = "PyTorch", .parity = -1},
                    .ops = {.label = "XNNPACK operators", .parity = -1},
                    .vs = {.label = "--vs", .parity = -1}};
    if (cfg->vs_path) {
        const char *base = strrchr(cfg->vs_path, '/');
        snprintf(p->vs.version, sizeof p->vs.version, "%s", base ? base + 1 : cfg->vs_path);
    }
}

static void peer_set_free(peer_set *p)
{
    free(p->ort.json);
    free(p->torch.json);
}

/* --vs: the other model loaded anew (as M is each round) and timed on the same
 * input; an input given back to its file is read again. */
static void run_vs(const bench_config *cfg, const ours_result *r, const ly_tensor *input,
                   peer_result *p)
{
    if (!cfg->vs_path) return;
    ly_tensor from_file = {0};
    if (!input->data) {
        if (ly_npy_load(r->input_file, &from_file) != LY_OK) {
            snprintf(p->reason, sizeof p->reason, "cannot read the input again: %s",
                     ly_last_error());
            p->state = PEER_FAILED;
            return;
        }
        input = &from_file;
    }
    ly_model_options mopt = {.threads = cfg->threads};
    ly_model *m = NULL;
    latency l;
    ly_cli_progress("bench: loading %s (--vs)", cfg->vs_path);
    double t0 = ly_cli_now_s();
    if (ly_model_load(cfg->vs_path, &mopt, &m) != LY_OK ||
        (cfg->fused >= 0 && ly_model_set_fused_attention(m, cfg->fused == 1, NULL) != LY_OK)) {
        ly_cli_progress_end();
        snprintf(p->reason, sizeof p->reason, "%s", ly_last_error());
        p->state = PEER_FAILED;
    } else {
        p->load_ms = (ly_cli_now_s() - t0) * 1e3;
        if (time_network(m, input, cfg, &l) != 0) {
            snprintf(p->reason, sizeof p->reason, "ly_model_run: %s", ly_last_error());
            p->state = PEER_FAILED;
        } else {
            p->state = PEER_OK;
            p->median_ms = l.median_ms;
            p->p90_ms = l.p90_ms;
            p->min_ms = l.min_ms;
            p->peak_rss_mib = rss_peak_mib();
        }
        ly_cli_progress_end();
    }
    ly_model_free(m);
    ly_npy_free(&from_file);
}

static void peer_unavailable(peer_result *p, const char *fmt, ...) LY_PRINTF(2, 3);
static void peer_unavailable(peer_result *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->reason, sizeof p->reason, fmt, ap);
    va_end(ap);
    p->state = PEER_UNAVAILABLE;
}

static void run_peer(peer_result *p, char *const argv[])
{
    ly_cli_captured c;
    ly_cli_progress("bench: running the %s peer", p->label);
    int e = ly_cli_run_capture(argv, PEER_TIMEOUT_S, &c);
    ly_cli_progress_end();
    if (e != 0) {
        peer_unavailable(p, "cannot start %s: %s", argv[0], strerror(e));
        return;
    }
    p->json = first_json_object(c.out);
    char why[256];
    ly_cli_last_line(c.err, why, sizeof why);
    if (c.timed_out) {
        p->state = PEER_FAILED;
        snprintf(p->reason, sizeof p->reason, "timed out after %d s", PEER_TIMEOUT_S);
    } else if (!p->json) {
        p->state = PEER_FAILED;
        snprintf(p->reason, sizeof p->reason, "exit status %d, no result: %s", c.exit_code,
                 why[0] ? why : "(no message)");
    } else {
        p->median_ms = json_number_at(p->json, "median_ms");
        p->p90_ms = json_number_at(p->json, "p90_ms");
        p->min_ms = json_number_at(p->json, "min_ms");
        p->load_ms = json_number_at(p->json, "load_ms");
        p->peak_rss_mib = json_number_at(p->json, "peak_rss_mib");
        json_string_at(p->json, "version", p->version, sizeof p->version);
        const char *parity = json_value(p->json, "parity");
        if (!parity || strncmp(parity, "null", 4) == 0)
            p->parity = -1;
        else
            p->parity = c.exit_code == 0;
        p->state = isfinite(p->median_ms) ? PEER_OK : PEER_FAILED;
        if (p->state == PEER_FAILED)
            snprintf(p->reason, sizeof p->reason, "no median_ms in its output");
        else if (p->parity == 0)
            snprintf(p->reason, sizeof p->reason, "parity check failed: %s", why);
    }
    ly_cli_captured_free(&c);
}

static bool probe_ok(char *const argv[])
{
    ly_cli_captured c;
    int e = ly_cli_run_capture(argv, PROBE_TIMEOUT_S, &c);
    bool ok = e == 0 && c.exit_code == 0;
    if (e == 0) ly_cli_captured_free(&c);
    return ok;
}

static bool find_peers_dir(const bench_config *cfg, char *out, size_t size)
{
    if (cfg->peers_dir) {
        snprintf(out, size, "%s", cfg->peers_dir);
        return true;
    }
    /* next to the executable when it sits in <repo>/build/ */
    char exe_based[PATH_MAX + 32] = "";
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char dir[PATH_MAX];
        dirname_of(exe, dir, sizeof dir);
        snprintf(exe_based, sizeof exe_based, "%s/../bench/peers", dir);
    }
    const char *candidates[3] = {getenv("LIBREYOLO_BENCH_PEERS"), "bench/peers",
                                 exe_based[0] ? exe_based : NULL};
    for (int i = 0; i < 3; i++) {
        if (!candidates[i] || !*candidates[i]) continue;
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s/ort_model.js", candidates[i]);
        bool has_ort = ly_cli_file_exists(probe);
        snprintf(probe, sizeof probe, "%s/torch_yolo9.py", candidates[i]);
        if (has_ort || ly_cli_file_exists(probe)) {
            snprintf(out, size, "%s", candidates[i]);
            return true;
        }
    }
    return false;
}

static void default_onnx(const char *model, char *out, size_t size)
{
    snprintf(out, size, "%s", model);
    char *dot = strrchr(out, '.');
    char *slash = strrchr(out, '/');
    if (dot && (!slash || dot > slash)) *dot = '\0';
    size_t len = strlen(out);
    if (len + 6 <= size) memcpy(out + len, ".onnx", 6);
}

typedef struct peer_args {
    char threads[16], runs[16], warmup[16], imgsz[16];
} peer_args;

/* Both peers take the same options: the model, then what we ran with. */
static void run_peer_script(peer_result *p, const char *interpreter, const char *script,
                            const char *model, const peer_args *a, const ours_result *r)
{
    char *argv[16] = {(char *)interpreter, (char *)script,     "--model", (char *)model,
                      "--threads",         (char *)a->threads, "--runs",  (char *)a->runs,
                      "--warmup",          (char *)a->warmup,  "--imgsz", (char *)a->imgsz};
    int n = 12;
    if (r->input_file[0]) {
        argv[n++] = "--input";
        argv[n++] = (char *)r->input_file;
    }
    argv[n] = NULL;
    run_peer(p, argv);
}

static void run_ort(const bench_config *cfg, const char *dir, const ours_result *r,
                    const peer_args *a, peer_result *p)
{
    char script[PATH_MAX + 32], module[PATH_MAX + 64], onnx[PATH_MAX];
    snprintf(script, sizeof script, "%s/ort_model.js", dir);
    snprintf(module, sizeof module, "%s/node_modules/onnxruntime-node/package.json", dir);
    if (cfg->onnx_path)
        snprintf(onnx, sizeof onnx, "%s", cfg->onnx_path);
    else
        default_onnx(cfg->model_path, onnx, sizeof onnx);
    const char *node = getenv("LIBREYOLO_NODE");
    if (!node || !*node) node = "node";
    if (!ly_cli_file_exists(script)) {
        peer_unavailable(p, "%s not found", script);
        return;
    }
    if (!ly_cli_file_exists(module)) {
        peer_unavailable(p,
                         "onnxruntime-node is not installed (cd %s && "
                         "ONNXRUNTIME_NODE_INSTALL=skip npm install)",
                         dir);
        return;
    }
    if (!ly_cli_file_exists(onnx)) {
        peer_unavailable(p, "no ONNX model at %s (use --onnx PATH)", onnx);
        return;
    }
    char *probe[] = {(char *)node, "--version", NULL};
    if (!probe_ok(probe)) {
        peer_unavailable(p, "'%s' cannot be run (set LIBREYOLO_NODE)", node);
        return;
    }
    run_peer_script(p, node, script, onnx, a, r);
}

static void run_torch(const bench_config *cfg, const char *dir, const ours_result *r,
                      const peer_args *a, peer_result *p)
{
    char script[PATH_MAX + 32];
    snprintf(script, sizeof script, "%s/torch_yolo9.py", dir);
    if (!ly_cli_file_exists(script)) {
        peer_unavailable(p, "%s not found", script);
        return;
    }
    const char *env_python = getenv("LIBREYOLO_PYTHON");
    const char *candidates[2] = {"python3", "/usr/bin/python3"};
    int n_candidates = 2;
    if (env_python && *env_python) {
        candidates[0] = env_python;
        n_candidates = 1;
    }
    const char *python = NULL;
    ly_cli_progress("bench: looking for a python3 with torch");
    for (int i = 0; i < n_candidates && !python; i++) {
        char *probe[] = {(char *)candidates[i], "-c", "import torch, numpy", NULL};
        if (probe_ok(probe)) python = candidates[i];
    }
    ly_cli_progress_end();
    if (!python) {
        peer_unavailable(p,
                         "%s cannot import torch and numpy (apt-get install "
                         "python3-torch python3-numpy, or set LIBREYOLO_PYTHON)",
                         n_candidates == 1 ? candidates[0] : "python3, /usr/bin/python3");
        return;
    }
    run_peer_script(p, python, script, cfg->model_path, a, r);
}

/* The peers read the input from a file: write ours when it was generated. */
static bool write_input_file(ours_result *r, const ly_tensor *input, char *tmpdir, size_t size)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, size, "%s/libreyolo-bench-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        tmpdir[0] = '\0';
        return false;
    }
    snprintf(r->input_file, sizeof r->input_file, "%s/input.npy", tmpdir);
    if (ly_npy_save(r->input_file, input) != LY_OK) {
        r->input_file[0] = '\0';
        rmdir(tmpdir);
        tmpdir[0] = '\0';
        return false;
    }
    return true;
}

/* A .pte program a second time with its XNNPACK delegates on XNNPACK's
 * operators and our loops (LIBREYOLO_XNNPACK=operators while it loads and
 * first runs), in this process: what our graph path gains. */
static void run_operators_peer(const bench_config *cfg, const ours_result *r,
                               const ly_tensor *input, peer_result *p)
{
    ly_tensor from_file = {0};
    if (!input->data) {
        if (ly_npy_load(r->input_file, &from_file) != LY_OK) {
            peer_unavailable(p, "cannot read the input again: %s", ly_last_error());
            return;
        }
        input = &from_file;
    }
    const char *was = getenv("LIBREYOLO_XNNPACK");
    char saved[64] = "";
    if (was) snprintf(saved, sizeof saved, "%s", was);
    setenv("LIBREYOLO_XNNPACK", "operators", 1);
    ly_model_options mopt = {.threads = cfg->threads};
    ly_model *m = NULL;
    ly_cli_progress("bench: loading %s with XNNPACK operators", cfg->model_path);
    double t0 = ly_cli_now_s();
    ly_status st = ly_model_load(cfg->model_path, &mopt, &m);
    double load_ms = (ly_cli_now_s() - t0) * 1e3;
    latency l;
    int rc = st == LY_OK ? time_network(m, input, cfg, &l) : 1;
    ly_cli_progress_end();
    if (was)
        setenv("LIBREYOLO_XNNPACK", saved, 1);
    else
        unsetenv("LIBREYOLO_XNNPACK");
    if (st != LY_OK || rc) {
        p->state = PEER_FAILED;
        snprintf(p->reason, sizeof p->reason, "%s", ly_last_error());
    } else {
        p->state = PEER_OK;
        p->median_ms = l.median_ms;
        p->p90_ms = l.p90_ms;
        p->min_ms = l.min_ms;
        p->load_ms = load_ms;
        p->peak_rss_mib = NAN;
        snprintf(p->version, sizeof p->version, "(ours)");
    }
    ly_model_free(m);
    ly_npy_free(&from_file);
}

static void run_peers(const bench_config *cfg, ours_result *r, const ly_tensor *input,
                      peer_result *ort, peer_result *torch)
{
    if (cfg->no_peers) {
        peer_unavailable(ort, "--no-peers");
        peer_unavailable(torch, "--no-peers");
        return;
    }
    if (strcmp(r->info.family, "nanodet") == 0) {
        const char *why = "none for this model (a TF.js graph)";
        peer_unavailable(ort, "%s", why);
        peer_unavailable(torch, "%s", why);
        return;
    }
    char dir[PATH_MAX];
    if (!find_peers_dir(cfg, dir, sizeof dir)) {
        const char *why = "peer scripts not found (looked in $LIBREYOLO_BENCH_PEERS, "
                          "./bench/peers, <exe>/../bench/peers; use --peers DIR)";
        peer_unavailable(ort, "%s", why);
        peer_unavailable(torch, "%s", why);
        return;
    }
    char tmpdir[PATH_MAX] = "";
    if (!r->input_file[0]) write_input_file(r, input, tmpdir, sizeof tmpdir);
    peer_args a;
    snprintf(a.threads, sizeof a.threads, "%d", cfg->threads);
    snprintf(a.runs, sizeof a.runs, "%d", cfg->runs);
    snprintf(a.warmup, sizeof a.warmup, "%d", cfg->warmup);
    snprintf(a.imgsz, sizeof a.imgsz, "%d", r->imgsz);
    run_ort(cfg, dir, r, &a, ort);
    if (r->executorch)
        peer_unavailable(torch, "the PyTorch peer loads checkpoints, not .pte programs");
    else if (strcmp(r->info.family, "yolo9") == 0)
        run_torch(cfg, dir, r, &a, torch);
    else
        peer_unavailable(torch,
                         "the PyTorch peer runs YOLO9 checkpoints (LibreYOLO's %s code is "
                         "not vendored)",
                         r->info.family);
    if (tmpdir[0]) {
        unlink(r->input_file);
        rmdir(tmpdir);
        snprintf(r->input_file, sizeof r->input_file, "%s", "");
    }
}

/* ---- Interleaved rounds ------------------------------------------------------------ */

/* Who a round times: ours, then each peer. */
enum { ROUND_OURS, ROUND_ORT, ROUND_TORCH, ROUND_OPS, ROUND_VS, ROUND_WHO };
static const char *const round_keys[ROUND_WHO] = {"libreyolo", "onnxruntime", "pytorch",
                                                  "xnnpack_operators", "vs_model"};

/* Each round's minimum and median (NAN where a peer did not run or failed). */
typedef struct rounds {
    int n;
    double min_ms[ROUND_WHO][MAX_ROUNDS], median_ms[ROUND_WHO][MAX_ROUNDS];
} rounds;

static void record_one(rounds *rs, int who, int k, double min_ms, double median_ms)
{
    rs->min_ms[who][k] = min_ms;
    rs->median_ms[who][k] = median_ms;
}

static void record_peer(rounds *rs, int who, int k, const peer_result *p)
{
    bool ok = p->state == PEER_OK;
    record_one(rs, who, k, ok ? p->min_ms : NAN, ok ? p->median_ms : NAN);
}

static void record_round(rounds *rs, int k, const latency *ours, const peer_set *p)
{
    record_one(rs, ROUND_OURS, k, ours->min_ms, ours->median_ms);
    record_peer(rs, ROUND_ORT, k, &p->ort);
    record_peer(rs, ROUND_TORCH, k, &p->torch);
    record_peer(rs, ROUND_OPS, k, &p->ops);
    record_peer(rs, ROUND_VS, k, &p->vs);
}

/* Round k after the first: the network alone again (the model loaded anew, as
 * a peer loads its own), --vs's model, then each peer that ran in the first
 * round. */
static int another_round(const bench_config *cfg, ours_result *r, const ly_tensor *input,
                         rounds *rs, int k)
{
    ly_tensor from_file = {0};
    if (!input->data) {
        if (ly_npy_load(r->input_file, &from_file) != LY_OK) {
            fprintf(stderr, "libreyolo bench model: round %d: cannot read the input again: %s\n",
                    k + 1, ly_last_error());
            return 1;
        }
        input = &from_file;
    }
    ly_model_options mopt = {.threads = cfg->threads};
    ly_model *m = NULL;
    ly_cli_progress("bench: round %d of %d: libreyolo", k + 1, cfg->rounds);
    int rc = 0;
    latency ours;
    if (ly_model_load(cfg->model_path, &mopt, &m) != LY_OK ||
        ly_cli_apply_fused("bench model", m, cfg->fused) != 0) {
        ly_cli_progress_end();
        fprintf(stderr, "libreyolo bench model: round %d: %s\n", k + 1, ly_last_error());
        rc = 1;
    } else {
        rc = time_network(m, input, cfg, &ours);
        ly_cli_progress_end();
    }
    ly_model_free(m);
    if (rc == 0) {
        peer_set p;
        peer_set_init(&p, cfg);
        run_vs(cfg, r, input, &p.vs);
        if (r->executorch && isfinite(rs->min_ms[ROUND_OPS][0]))
            run_operators_peer(cfg, r, input, &p.ops);
        run_peers(cfg, r, input, &p.ort, &p.torch);
        record_round(rs, k, &ours, &p);
        peer_set_free(&p);
    }
    ly_npy_free(&from_file);
    return rc;
}

/* The least of the rounds' minima and the median of their medians of `who`;
 * false when any round lacks them (a peer that failed once is not compared). */
static bool round_summary(const rounds *rs, int who, double *min_ms, double *median_ms)
{
    double medians[MAX_ROUNDS];
    *min_ms = INFINITY;
    for (int k = 0; k < rs->n; k++) {
        if (!isfinite(rs->min_ms[who][k]) || !isfinite(rs->median_ms[who][k])) return false;
        if (rs->min_ms[who][k] < *min_ms) *min_ms = rs->min_ms[who][k];
        medians[k] = rs->median_ms[who][k];
    }
    *median_ms = median_of(medians, rs->n);
    return true;
}

static void print_rounds(const rounds *rs)
{
    double our_min, our_median;
    if (rs->n < 2 || !round_summary(rs, ROUND_OURS, &our_min, &our_median)) return;
    printf("\n%d interleaved rounds (ours, then each peer; minimum and median of each round's "
           "runs):\n",
           rs->n);
    for (int who = 0; who < ROUND_WHO; who++) {
        double lo, med;
        if (!round_summary(rs, who, &lo, &med)) continue;
        printf("  %-18s minima", round_keys[who]);
        for (int k = 0; k < rs->n; k++)
            printf(" %.1f", rs->min_ms[who][k]);
        printf("\n  %-18s least %.1f ms, median of medians %.1f ms", "", lo, med);
        if (who != ROUND_OURS)
            printf("; ours / peer: %.3fx (ratio of minima), %.3fx (of medians)", our_min / lo,
                   our_median / med);
        printf("\n");
    }
}

static void json_rounds(FILE *o, const rounds *rs)
{
    double our_min, our_median;
    if (!round_summary(rs, ROUND_OURS, &our_min, &our_median)) return;
    fprintf(o, ", \"rounds\": {\"n\": %d", rs->n);
    for (int who = 0; who < ROUND_WHO; who++) {
        double lo, med;
        if (!round_summary(rs, who, &lo, &med)) continue;
        fprintf(o, ", \"%s\": {\"min_ms\": [", round_keys[who]);
        for (int k = 0; k < rs->n; k++) {
            if (k) fputs(", ", o);
            ly_json_number(o, rs->min_ms[who][k]);
        }
        fputs("], \"median_ms\": [", o);
        for (int k = 0; k < rs->n; k++) {
            if (k) fputs(", ", o);
            ly_json_number(o, rs->median_ms[who][k]);
        }
        fputs("], \"least_ms\": ", o);
        ly_json_number(o, lo);
        fputs(", \"median_of_medians_ms\": ", o);
        ly_json_number(o, med);
        if (who != ROUND_OURS) {
            fputs(", \"ours_over_peer_minima\": ", o);
            ly_json_number(o, our_min / lo);
            fputs(", \"ours_over_peer_medians\": ", o);
            ly_json_number(o, our_median / med);
        }
        fputc('}', o);
    }
    fputc('}', o);
}

/* ---- Report ---------------------------------------------------------------------- */

/* GFLOP of the network at `imgsz` when known (it scales with the pixel count). */
static double network_gflop(const bench_config *cfg, const ours_result *r)
{
    if (cfg->gflop > 0) return cfg->gflop;
    if (strcmp(r->info.family, "yolo9") == 0 && strcmp(r->info.size, "t") == 0)
        return 7.7 * ((double)r->imgsz / 640.0) * ((double)r->imgsz / 640.0);
    return r->graph_gflop;
}

/* ---- One core's FMA peak ----------------------------------------------------------- */

/* Twelve independent FMA chains (more than latency x throughput on current
 * x86 cores), written out so each stays in a register, on one thread; GFLOP/s
 * of `iterations` rounds. Compiled for AVX2/AVX-512 and called only where the
 * CPU has them. */
#define FMA_CHAINS 12
#define FMA_ROUND(fmadd)                                                                           \
    c0 = fmadd(c0, a, b), c1 = fmadd(c1, a, b), c2 = fmadd(c2, a, b), c3 = fmadd(c3, a, b),        \
    c4 = fmadd(c4, a, b), c5 = fmadd(c5, a, b), c6 = fmadd(c6, a, b), c7 = fmadd(c7, a, b),        \
    c8 = fmadd(c8, a, b), c9 = fmadd(c9, a, b), c10 = fmadd(c10, a, b), c11 = fmadd(c11, a, b)
#ifdef HAVE_X86_FMA_PROBE
__attribute__((target("avx2,fma"))) static double fma_avx2_gflops(int64_t iterations)
{
    __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    /* Distinct starting values: equal chains could be merged by the compiler. */
    __m256 c0 = _mm256_set1_ps(0), c1 = _mm256_set1_ps(1), c2 = _mm256_set1_ps(2),
           c3 = _mm256_set1_ps(3), c4 = _mm256_set1_ps(4), c5 = _mm256_set1_ps(5),
           c6 = _mm256_set1_ps(6), c7 = _mm256_set1_ps(7), c8 = _mm256_set1_ps(8),
           c9 = _mm256_set1_ps(9), c10 = _mm256_set1_ps(10), c11 = _mm256_set1_ps(11);
    double t0 = ly_cli_now_s();
    for (int64_t k = 0; k < iterations; k++)
        FMA_ROUND(_mm256_fmadd_ps);
    double t = ly_cli_now_s() - t0;
    __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                               _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
    sum = _mm256_add_ps(sum, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
    volatile float keep = _mm256_cvtss_f32(sum); /* the chains must not be optimised away */
    (void)keep;
    return t > 0 ? (double)iterations * FMA_CHAINS * 8 * 2 / t / 1e9 : 0;
}

__attribute__((target("avx512f"))) static double fma_avx512_gflops(int64_t iterations)
{
    __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    __m512 c0 = _mm512_set1_ps(0), c1 = _mm512_set1_ps(1), c2 = _mm512_set1_ps(2),
           c3 = _mm512_set1_ps(3), c4 = _mm512_set1_ps(4), c5 = _mm512_set1_ps(5),
           c6 = _mm512_set1_ps(6), c7 = _mm512_set1_ps(7), c8 = _mm512_set1_ps(8),
           c9 = _mm512_set1_ps(9), c10 = _mm512_set1_ps(10), c11 = _mm512_set1_ps(11);
    double t0 = ly_cli_now_s();
    for (int64_t k = 0; k < iterations; k++)
        FMA_ROUND(_mm512_fmadd_ps);
    double t = ly_cli_now_s() - t0;
    __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                               _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    sum = _mm512_add_ps(sum, _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)));
    volatile float keep = _mm512_reduce_add_ps(sum);
    (void)keep;
    return t > 0 ? (double)iterations * FMA_CHAINS * 16 * 2 / t / 1e9 : 0;
}
#endif

/* Best of 5 short runs (~10 ms each): other processes only ever slow it down,
 * so the command takes it before and again after the timed runs (and each
 * round) and keeps the best: a neighbour's burst while it is measured no
 * longer inflates the share of the peak. 0 when this CPU has no FMA. */
static double measure_core_gflops(void)
{
    double best = 0;
#ifdef HAVE_X86_FMA_PROBE
    ly_cpu_features cpu;
    if (ly_cpu_features_get(&cpu) != LY_OK || !cpu.avx2 || !cpu.fma) return 0;
    for (int trial = 0; trial < 5; trial++) {
        double g = fma_avx2_gflops(5000000);
        if (g > best) best = g;
        if (cpu.avx512f) {
            g = fma_avx512_gflops(2500000);
            if (g > best) best = g;
        }
    }
#endif
    return best;
}

static void remeasure_peak(bench_config *cfg)
{
    if (!cfg->peak_measured) return;
    ly_cli_progress("bench: measuring one core's FMA peak again");
    double again = measure_core_gflops();
    ly_cli_progress_end();
    if (again > cfg->core_gflops) cfg->core_gflops = again;
}

static void print_peer_row(const peer_result *p, double ours_ms)
{
    if (p->state == PEER_OK) {
        char name[96];
        snprintf(name, sizeof name, "%s %s", p->label, p->version);
        printf("%-26s %9.1f %9.1f %9.1f %9.1f %9.2fx   %s\n", name, p->median_ms, p->p90_ms,
               p->load_ms, p->peak_rss_mib, p->median_ms / ours_ms,
               p->parity == 1   ? "parity ok"
               : p->parity == 0 ? "PARITY FAILED"
                                : "");
    } else {
        printf("%-26s %s: %s\n", p->label, p->state == PEER_FAILED ? "failed" : "not available",
               p->reason);
    }
}

static void print_table(const bench_config *cfg, const ours_result *r, const peer_set *p,
                        const rounds *rs)
{
    printf("libreyolo bench model: %s (%s %s, %" PRId64 " classes), %dx%d, %d thread(s),\n"
           "median/p90 of %d runs after %d warm-up(s); input %s\n\n",
           cfg->model_path, r->info.family, r->info.size, r->info.nc, r->imgsz, r->imgsz,
           cfg->threads, cfg->runs, cfg->warmup, r->input_desc);
    printf("%-26s %9s %9s %9s %9s %10s\n", "network alone", "median ms", "p90 ms", "load ms",
           "peak MiB", "vs ours");
    printf("%-26s %9.1f %9.1f %9.1f %9.1f %9.2fx\n", "libreyolo", r->run.median_ms, r->run.p90_ms,
           r->load_ms, r->peak_rss_mib, 1.0);
    print_peer_row(&p->ort, r->run.median_ms);
    print_peer_row(&p->torch, r->run.median_ms);
    if (p->ops.state != PEER_NOT_RUN) print_peer_row(&p->ops, r->run.median_ms);
    if (p->vs.state != PEER_NOT_RUN) print_peer_row(&p->vs, r->run.median_ms);
    printf("(vs ours = peer median / our median: > 1 means we are faster; peers' peak RSS is\n"
           " their whole process, ours includes the end-to-end line below)\n\n");

    printf("model memory: %.1f MiB resident after load, %.1f MiB after the first runs\n",
           r->rss_model_after_load_mib, r->rss_model_after_warmup_mib);
    if (r->have_predict)
        printf("end to end (ly_model_predict_file %s, %zu detections): median %.1f ms, p90 %.1f "
               "ms\n  (preprocess %.1f + network %.1f + postprocess %.1f ms, medians)\n",
               r->image, r->detections, r->predict.median_ms, r->predict.p90_ms, r->pre_ms,
               r->net_ms, r->post_ms);
    else
        printf("end to end: skipped: %s\n", r->image_skip_reason);

    if (r->have_batch)
        printf("batch of %d (one ly_model_run on [%d, 3, %d, %d]) against %d single runs, "
               "interleaved:\n  %.2f ms per image (min %.2f) against %.2f (min %.2f): %.2fx "
               "the throughput (ratio of medians; of minima %.2fx)\n",
               cfg->batch, cfg->batch, r->imgsz, r->imgsz, cfg->batch, r->batch_per_image.median_ms,
               r->batch_per_image.min_ms, r->single_per_image.median_ms, r->single_per_image.min_ms,
               r->single_per_image.median_ms / r->batch_per_image.median_ms,
               r->single_per_image.min_ms / r->batch_per_image.min_ms);
    else if (cfg->batch > 1)
        printf("batch of %d: skipped: %s\n", cfg->batch, r->batch_skip_reason);

    double gflop = network_gflop(cfg, r);
    if (isfinite(gflop)) {
        double bound_ms = gflop / (cfg->core_gflops * cfg->threads) * 1e3;
        printf("FMA-peak bound: %.2f GFLOP / (%.0f GFLOP/s x %d) = %.1f ms; our median is %.2fx "
               "the bound (%.0f%% of the peak)\n",
               gflop, cfg->core_gflops, cfg->threads, bound_ms, r->run.median_ms / bound_ms,
               100.0 * bound_ms / r->run.median_ms);
        printf("  (one core's FMA peak: %s)\n", cfg->peak_source);
        ly_cpu_features cpu;
        if (ly_cpu_features_get(&cpu) == LY_OK && cpu.amx_bf16)
            printf(
                "  (this CPU has AMX tiles: linear runs on them where it pays, past the FMA peak, "
                "which bounds the other ops only)\n");
    } else {
        printf("FMA-peak bound: unknown network cost (use --gflop G)\n");
    }
    print_rounds(rs);
}

static void json_latency(FILE *to, const latency *l)
{
    fputs("{\"median_ms\": ", to);
    ly_json_number(to, l->median_ms);
    fputs(", \"p90_ms\": ", to);
    ly_json_number(to, l->p90_ms);
    fputs(", \"min_ms\": ", to);
    ly_json_number(to, l->min_ms);
    fputc('}', to);
}

static void json_peer(FILE *to, const peer_result *p, double ours_ms)
{
    fputs("{\"available\": ", to);
    fputs(p->state == PEER_UNAVAILABLE ? "false" : "true", to);
    fputs(", \"ok\": ", to);
    fputs(p->state == PEER_OK ? "true" : "false", to);
    fputs(", \"reason\": ", to);
    ly_json_string(to, p->reason[0] ? p->reason : NULL);
    if (p->state == PEER_OK) {
        fputs(", \"median_ratio_vs_ours\": ", to);
        ly_json_number(to, p->median_ms / ours_ms);
        fputs(", \"parity_ok\": ", to);
        fputs(p->parity == 1 ? "true" : p->parity == 0 ? "false" : "null", to);
    }
    fputs(", \"result\": ", to);
    fputs(p->json ? p->json : "null", to);
    fputc('}', to);
}

static void print_json(const bench_config *cfg, const ours_result *r, const peer_set *p,
                       const rounds *rs)
{
    FILE *o = stdout;
    fputs("{\"model\": ", o);
    ly_json_string(o, cfg->model_path);
    fputs(", \"family\": ", o);
    ly_json_string(o, r->info.family);
    fputs(", \"size\": ", o);
    ly_json_string(o, r->info.size);
    fprintf(o,
            ", \"nc\": %" PRId64 ", \"imgsz\": %d, \"threads\": %d, \"runs\": %d, "
            "\"warmup\": %d, \"input\": ",
            r->info.nc, r->imgsz, cfg->threads, cfg->runs, cfg->warmup);
    ly_json_string(o, r->input_desc);
    fputs(", \"load_ms\": ", o);
    ly_json_number(o, r->load_ms);
    fputs(", \"peak_rss_mib\": ", o);
    ly_json_number(o, r->peak_rss_mib);
    fputs(", \"model_rss_mib\": {\"after_load\": ", o);
    ly_json_number(o, r->rss_model_after_load_mib);
    fputs(", \"after_warmup\": ", o);
    ly_json_number(o, r->rss_model_after_warmup_mib);
    fputs("}, \"run\": ", o);
    json_latency(o, &r->run);
    fputs(", \"predict_file\": ", o);
    if (r->have_predict) {
        fputs("{\"image\": ", o);
        ly_json_string(o, r->image);
        fprintf(o, ", \"detections\": %zu, \"latency\": ", r->detections);
        json_latency(o, &r->predict);
        fputs(", \"preprocess_ms\": ", o);
        ly_json_number(o, r->pre_ms);
        fputs(", \"inference_ms\": ", o);
        ly_json_number(o, r->net_ms);
        fputs(", \"postprocess_ms\": ", o);
        ly_json_number(o, r->post_ms);
        fputs("}", o);
    } else {
        fputs("null, \"predict_file_skipped\": ", o);
        ly_json_string(o, r->image_skip_reason);
    }
    if (r->have_batch) {
        fprintf(o, ", \"batch\": {\"n\": %d, \"per_image\": ", cfg->batch);
        json_latency(o, &r->batch_per_image);
        fputs(", \"single_per_image\": ", o);
        json_latency(o, &r->single_per_image);
        fputs(", \"throughput_ratio\": ", o);
        ly_json_number(o, r->single_per_image.median_ms / r->batch_per_image.median_ms);
        fputs("}", o);
    } else if (cfg->batch > 1) {
        fputs(", \"batch\": null, \"batch_skipped\": ", o);
        ly_json_string(o, r->batch_skip_reason);
    }
    double gflop = network_gflop(cfg, r);
    double bound_ms = gflop / (cfg->core_gflops * cfg->threads) * 1e3;
    fputs(", \"bound\": {\"gflop\": ", o);
    ly_json_number(o, gflop);
    fputs(", \"core_gflops\": ", o);
    ly_json_number(o, cfg->core_gflops);
    fputs(", \"core_gflops_source\": ", o);
    ly_json_string(o, cfg->peak_source);
    fputs(", \"fraction_of_peak\": ", o);
    ly_json_number(o, bound_ms / r->run.median_ms);
    fputs(", \"ms\": ", o);
    ly_json_number(o, bound_ms);
    fputs(", \"ours_over_bound\": ", o);
    ly_json_number(o, r->run.median_ms / bound_ms);
    fputs("}, \"peers\": {\"onnxruntime\": ", o);
    json_peer(o, &p->ort, r->run.median_ms);
    fputs(", \"pytorch\": ", o);
    json_peer(o, &p->torch, r->run.median_ms);
    if (p->ops.state != PEER_NOT_RUN) {
        fputs(", \"xnnpack_operators\": ", o);
        json_peer(o, &p->ops, r->run.median_ms);
    }
    if (p->vs.state != PEER_NOT_RUN) {
        fputs(", \"vs_model\": ", o);
        json_peer(o, &p->vs, r->run.median_ms);
    }
    fputc('}', o);
    if (rs->n > 1) json_rounds(o, rs);
    fputs("}\n", o);
}

/* ---- Entry ----------------------------------------------------------------------- */

int ly_cli_bench_model(int argc, char **argv)
{
    bench_config cfg = {
        .threads = 1, .runs = DEFAULT_RUNS, .warmup = DEFAULT_WARMUP, .fused = -1, .rounds = 1};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        bool ok = true;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            ly_cli_usage_bench_model(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            cfg.json = true;
        } else if (strcmp(a, "--no-image") == 0) {
            cfg.no_image = true;
        } else if (strcmp(a, "--no-peers") == 0) {
            cfg.no_peers = true;
        } else if (strcmp(a, "--model") == 0 && has_value) {
            cfg.model_path = argv[++i];
        } else if (strcmp(a, "--input") == 0 && has_value) {
            cfg.input_path = argv[++i];
        } else if (strcmp(a, "--image") == 0 && has_value) {
            cfg.image_path = argv[++i];
        } else if (strcmp(a, "--onnx") == 0 && has_value) {
            cfg.onnx_path = argv[++i];
        } else if (strcmp(a, "--peers") == 0 && has_value) {
            cfg.peers_dir = argv[++i];
        } else if (strcmp(a, "--vs") == 0 && has_value) {
            cfg.vs_path = argv[++i];
        } else if (strcmp(a, "--imgsz") == 0 && has_value) {
            ok = ly_cli_parse_int(argv[++i], 32, 8192, &cfg.imgsz) && cfg.imgsz % 32 == 0;
        } else if (strcmp(a, "--threads") == 0 && has_value) {
            ok = ly_cli_parse_int(argv[++i], 1, 1024, &cfg.threads);
        } else if (strcmp(a, "--fused-attn") == 0 && has_value) {
            int code = ly_cli_parse_fused("bench model", argv[++i], &cfg.fused);
            if (code) return code;
        } else if (strcmp(a, "--batch") == 0 && has_value) {
            ok = ly_cli_parse_int(argv[++i], 1, 256, &cfg.batch);
        } else if (strcmp(a, "--rounds") == 0 && has_value) {
            ok = ly_cli_parse_int(argv[++i], 1, MAX_ROUNDS, &cfg.rounds);
        } else if (strcmp(a, "--runs") == 0 && has_value) {
            ok = ly_cli_parse_int(argv[++i], 1, 100000, &cfg.runs);
        } else if (strcmp(a, "--warmup") == 0 && has_value) {
            ok = ly_cli_parse_int(argv[++i], 0, 100000, &cfg.warmup);
        } else if (strcmp(a, "--gflop") == 0 && has_value) {
            ok = parse_positive(argv[++i], &cfg.gflop);
        } else if (strcmp(a, "--core-gflops") == 0 && has_value) {
            ok = parse_positive(argv[++i], &cfg.core_gflops);
        } else {
            fprintf(stderr, "libreyolo bench model: unknown or incomplete argument '%s'\n", a);
            ly_cli_usage_bench_model(stderr);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "libreyolo bench model: %s: '%s' is out of range%s\n", a, argv[i],
                    strcmp(a, "--imgsz") == 0 ? " (a multiple of 32 in [32, 8192])" : "");
            return 2;
        }
    }
    if (!cfg.model_path) {
        fprintf(stderr, "libreyolo bench model: --model is required\n");
        ly_cli_usage_bench_model(stderr);
        return 2;
    }
    if (cfg.image_path && !ly_cli_file_exists(cfg.image_path)) {
        fprintf(stderr, "libreyolo bench model: --image %s: no such file\n", cfg.image_path);
        return 2;
    }

    if (cfg.core_gflops > 0) {
        snprintf(cfg.peak_source, sizeof cfg.peak_source, "--core-gflops %g", cfg.core_gflops);
    } else {
        ly_cli_progress("bench: measuring one core's FMA peak");
        cfg.core_gflops = measure_core_gflops();
        ly_cli_progress_end();
        if (cfg.core_gflops > 0) {
            cfg.peak_measured = true;
            snprintf(cfg.peak_source, sizeof cfg.peak_source,
                     "measured here, the best of runs of FMA chains before and after the timings");
        } else {
            cfg.core_gflops = DEFAULT_CORE_GFLOPS;
            snprintf(cfg.peak_source, sizeof cfg.peak_source,
                     "%.0f GFLOP/s, the project's VM (no FMA here to measure)",
                     DEFAULT_CORE_GFLOPS);
        }
    }

    ours_result r;
    memset(&r, 0, sizeof r);
    r.graph_gflop = NAN;
    ly_tensor input;
    memset(&input, 0, sizeof input);
    int rc = measure_ours(&cfg, &r, &input);
    if (rc) {
        ly_tensor_free(&input);
        return rc;
    }
    peer_set peers;
    peer_set_init(&peers, &cfg);
    run_vs(&cfg, &r, &input, &peers.vs);
    remeasure_peak(&cfg);
    if (r.executorch) run_operators_peer(&cfg, &r, &input, &peers.ops);
    run_peers(&cfg, &r, &input, &peers.ort, &peers.torch);
    rounds rs = {.n = 1};
    record_round(&rs, 0, &r.run, &peers);
    for (int k = 1; k < cfg.rounds && rc == 0; k++) {
        rc = another_round(&cfg, &r, &input, &rs, k);
        rs.n = k + 1;
        remeasure_peak(&cfg);
    }
    ly_tensor_free(&input);
    if (rc == 0) {
        if (cfg.json)
            print_json(&cfg, &r, &peers, &rs);
        else
            print_table(&cfg, &r, &peers, &rs);
    }
    peer_set_free(&peers);
    return rc;
}
