/* SPDX-License-Identifier: MIT */
/*
 * ly_model_export: LibreYOLO's ExecuTorch exporter (executorch.md A1-A4):
 * options checked in upstream's order with its messages, strict capture of
 * the model's graph, lowering to a .pte with the XNNPACK delegate, the
 * sidecar, and the atomic commit of the pair. Nothing is written before every
 * check and the whole lowering have passed.
 */
#include "libreyolo/export.h"

#include "core/core.h"
#include "export/lower.h"
#include "graph/graph.h"
#include "models/export_support.h"
#include "models/recipe.h"
#include "pte/commit.h"
#include "pte/sidecar.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

ly_status ly_export_options_init(ly_export_options *o)
{
    if (!o) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_export_options_init: options is NULL");
    memset(o, 0, sizeof *o);
    o->batch = 1;
    return LY_OK;
}

/* Python's repr() of a str, for messages that quote upstream's {x!r}. */
static void py_repr(const char *s, char *out, size_t size)
{
    char quote = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
    size_t n = 0;
    if (size < 4) return;
    out[n++] = quote;
    for (const char *p = s; *p && n + 6 < size; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '\\' || c == (unsigned char)quote) {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c == '\n') {
            out[n++] = '\\', out[n++] = 'n';
        } else if (c == '\t') {
            out[n++] = '\\', out[n++] = 't';
        } else if (c < 0x20 || c == 0x7F) {
            n += (size_t)snprintf(out + n, size - n, "\\x%02x", c);
        } else {
            out[n++] = (char)c;
        }
    }
    out[n++] = quote;
    out[n] = '\0';
}

static void lower_copy(const char *s, char *out, size_t size)
{
    size_t i = 0;
    for (; s[i] && i + 1 < size; i++)
        out[i] = (char)tolower((unsigned char)s[i]);
    out[i] = '\0';
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* weights/<stem>.pte (A1 step 5). */
static ly_status default_output(const ly_model_desc *d, const char *model_path, char *out,
                                size_t size)
{
    char stem[512] = "";
    if (model_path && (ends_with(model_path, ".pt") || ends_with(model_path, ".pth") ||
                       ends_with(model_path, ".safetensors"))) {
        const char *base = strrchr(model_path, '/');
        base = base ? base + 1 : model_path;
        const char *dot = strrchr(base, '.');
        snprintf(stem, sizeof stem, "%.*s", (int)(dot - base), base);
    }
    if (!*stem) {
        const char *prefix = d->recipe->file_prefix;
        bool task_suffix = strcmp(d->task, "detect") != 0;
        if (prefix && *d->size)
            snprintf(stem, sizeof stem, "%s%s%s%s", prefix, d->size, task_suffix ? "-" : "",
                     task_suffix ? d->task : "");
        else
            snprintf(stem, sizeof stem, "%s_%s", d->recipe->family, *d->size ? d->size : "model");
    }
    if ((size_t)snprintf(out, size, "weights/%s.pte", stem) >= size)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_export: output path too long");
    return LY_OK;
}

static void tuple_text(const int64_t *v, size_t n, char *out, size_t size)
{
    size_t k = (size_t)snprintf(out, size, "(");
    for (size_t i = 0; i < n && k < size; i++)
        k += (size_t)snprintf(out + k, size - k, "%s%lld", i ? ", " : "", (long long)v[i]);
    if (k < size) snprintf(out + k, size - k, n == 1 ? ",)" : ")");
}

typedef struct resolved {
    int64_t h, w;
    bool msda_custom; /* ms_deform_attn as our operator, not its portable form */
    char output[4096];
} resolved;

/* A1 steps 1-5, in upstream's order. */
static ly_status validate(const ly_model_desc *d, const ly_export_options *o, resolved *r)
{
    const char *fn = "ly_model_export";
    const char *format = o->format ? o->format : "executorch";
    const ly_export_format_info *f = ly_export_find_format(format);
    if (!f) {
        char q[160];
        py_repr(format, q, sizeof q);
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: Unsupported export format %s. This build exports: executorch.", fn,
                            q);
    }
    /* 1. ExecuTorchExporter.__call__ */
    if (o->batch != 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: ExecuTorch v1 requires batch=1, got batch=%d.", fn, o->batch);
    if (o->dynamic)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: ExecuTorch v1 requires dynamic=False.", fn);
    /* 3. _validate */
    bool half = o->half, int8 = o->int8;
    if (half && int8) {
        ly_log(LY_LOG_WARNING, "Both half=True and int8=True specified. Using INT8 precision.");
        half = false;
    }
    if (half)
        return ly_set_error(LY_E_UNSUPPORTED, "%s: EXECUTORCH FP16 export is not supported.", fn);
    if (int8)
        return ly_set_error(LY_E_UNSUPPORTED, "%s: EXECUTORCH INT8 export is not supported.", fn);
    /* A quantized model exports only as LibreYOLO's finalized .pt: to any
     * other format it is an int8=True export, refused in those words. */
    if (d->quant_recipe[0])
        return ly_set_error(LY_E_UNSUPPORTED,
                            "%s: EXECUTORCH INT8 export is not supported. (the model is "
                            "quantized: recipe %s, %s)",
                            fn, d->quant_recipe, d->quant_state);
    /* 4. _preflight */
    char delegate[64];
    lower_copy(o->delegate ? o->delegate : "xnnpack", delegate, sizeof delegate);
    if (strcmp(delegate, "xnnpack") != 0) {
        char q[160];
        py_repr(delegate, q, sizeof q);
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: ExecuTorch v1 supports delegate='xnnpack' only, got %s.", fn, q);
    }
    ly_export_tier tier;
    const char *reason = NULL;
    ly_status st = ly_export_support(d->recipe->family, d->task, f->name, &tier, &reason, NULL);
    if (st != LY_OK) return st;
    if (tier == LY_EXPORT_BLOCKED)
        return ly_set_error(LY_E_UNSUPPORTED, "%s: %s %s export to executorch is blocked: %s", fn,
                            d->recipe->family, d->task, reason);
    if (o->nms)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "%s: EXECUTORCH embedded NMS export is not supported.", fn);
    /* ours: how deformable attention is written (not an option of LibreYOLO's) */
    if (o->msda) {
        char form[64];
        lower_copy(o->msda, form, sizeof form);
        if (strcmp(form, "portable") != 0 && strcmp(form, "custom") != 0) {
            char q[160];
            py_repr(o->msda, q, sizeof q);
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "%s: msda must be 'portable' or 'custom', got %s.", fn, q);
        }
        r->msda_custom = strcmp(form, "custom") == 0;
    }
    /* 5. _resolve_params */
    if (o->device) {
        char device[64];
        lower_copy(o->device, device, sizeof device);
        if (strcmp(device, "auto") != 0 && strcmp(device, "cpu") != 0)
            return ly_set_error(LY_E_INVALID_ARGUMENT,
                                "%s: ExecuTorch XNNPACK export requires device='cpu'.", fn);
    }
    char given[160];
    if (!o->imgsz || o->imgsz_len == 0) {
        r->h = r->w = d->imgsz;
        snprintf(given, sizeof given, "%lld", (long long)d->imgsz);
    } else if (o->imgsz_len == 1) {
        r->h = r->w = o->imgsz[0];
        snprintf(given, sizeof given, "%lld", (long long)o->imgsz[0]);
    } else if (o->imgsz_len == 2) {
        r->h = o->imgsz[0];
        r->w = o->imgsz[1];
        tuple_text(o->imgsz, 2, given, sizeof given);
    } else {
        tuple_text(o->imgsz, o->imgsz_len < 8 ? o->imgsz_len : 8, given, sizeof given);
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: imgsz tuple must be (height, width), got %s", fn, given);
    }
    if (r->h <= 0 || r->w <= 0)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: imgsz values must be positive, got %s.", fn,
                            given);
    if (d->stride > 0 && (r->h % d->stride != 0 || r->w % d->stride != 0))
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "%s: imgsz %s must be divisible by %lld for %s (its largest stride).",
                            fn, given, (long long)d->stride, d->recipe->family);
    if (r->h > 16384 || r->w > 16384)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: imgsz %s is larger than 16384.", fn, given);
    if (r->h != r->w) {
        if (d->recipe->rectangular)
            return ly_set_error(LY_E_UNSUPPORTED,
                                "%s: Rectangular imgsz export is not validated for format "
                                "'executorch'.",
                                fn);
        return ly_set_error(LY_E_UNSUPPORTED,
                            "%s: Rectangular imgsz export is currently supported for YOLO9-family, "
                            "HRNet, NAFNet, and Real-ESRGAN exports only.",
                            fn);
    }
    if (d->stride == 0 && r->h != d->imgsz)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "%s: imgsz %s: %s models export at their native size %lld only.", fn,
                            given, d->recipe->family, (long long)d->imgsz);
    if (o->output_path) {
        if (!*o->output_path)
            return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: output_path is empty", fn);
        if ((size_t)snprintf(r->output, sizeof r->output, "%s", o->output_path) >= sizeof r->output)
            return ly_set_error(LY_E_INVALID_ARGUMENT, "%s: output_path is too long", fn);
        return LY_OK;
    }
    return default_output(d, o->model_path, r->output, sizeof r->output);
}

/* The graph's shapes inferred for [1, 3, h, w] and the graph lowered; capture
 * keeps the accelerated providers out of what the lowering runs (the FOLD
 * ops' references). */
static ly_status capture(const ly_model_desc *d, int64_t h, int64_t w, bool msda_custom,
                         ly_lower_result *lowered)
{
    ly_graph *own = NULL;
    if (d->recipe->capture_graph) {
        ly_status st = d->recipe->capture_graph(d, h, w, &own);
        if (st != LY_OK) return ly_error_prefix(st, "ly_model_export");
    }
    ly_graph *g = own ? own : d->engine->graph ? d->engine->graph(d->engine_data) : NULL;
    if (!g)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_model_export: the %s model has no graph to capture for export",
                            d->recipe->family);
    ly_status st = ly_kernels_capture_begin();
    if (st != LY_OK) {
        ly_graph_free(own);
        return st;
    }
    ly_tensor input = {.dtype = LY_F32, .ndim = 4, .shape = {1, 3, h, w}};
    ly_tensor *shapes = calloc((size_t)ly_graph_value_count(g) + 1, sizeof *shapes);
    st = shapes ? ly_graph_infer(g, 1, &input, shapes)
                : ly_set_error(LY_E_NO_MEMORY, "ly_model_export: out of memory");
    if (st == LY_OK) {
        /* A recipe may keep only its leading outputs (YOLO9: the decoded
         * predictions, as LibreYOLO's export head). */
        int keep[LY_MODEL_MAX_OUTPUTS];
        ly_lower_options lo = {0};
        int n = d->recipe->export_outputs;
        if (n > 0 && n <= LY_MODEL_MAX_OUTPUTS) {
            for (int i = 0; i < n; i++)
                keep[i] = i;
            lo.outputs = keep;
            lo.n_outputs = n;
        }
        ly_graph *portable = NULL;
        if (!msda_custom) st = ly_export_msda_portable(g, shapes, &portable);
        if (st == LY_OK && portable) {
            ly_tensor *more =
                realloc(shapes, ((size_t)ly_graph_value_count(portable) + 1) * sizeof *shapes);
            if (more) shapes = more;
            st = more ? ly_graph_infer(portable, 1, &input, shapes)
                      : ly_set_error(LY_E_NO_MEMORY, "ly_model_export: out of memory");
        }
        if (st == LY_OK) st = ly_export_lower(portable ? portable : g, shapes, &lo, lowered);
        ly_graph_free(portable);
    }
    free(shapes);
    ly_graph_free(own);
    ly_status end = ly_kernels_capture_end();
    if (st == LY_OK && end != LY_OK) {
        free(lowered->program);
        lowered->program = NULL;
        st = end;
    }
    if (st != LY_OK) return ly_error_prefix(st, "ly_model_export");
    return LY_OK;
}

/* The sidecar of A2 for this model and program. */
static ly_status sidecar_text(const ly_model_desc *d, int64_t h, int64_t w, int partitions,
                              char **text, size_t *len)
{
    ly_sidecar s = {.h = h,
                    .w = w,
                    .nc = d->nc,
                    .names = d->names,
                    .libreyolo_version = ly_version(),
                    .delegate_partitions = partitions,
                    .crop_pct = d->recipe->crop_pct,
                    .interpolation = d->recipe->interpolation};
    snprintf(s.family, sizeof s.family, "%s", d->recipe->family);
    snprintf(s.size, sizeof s.size, "%s", d->size);
    snprintf(s.task, sizeof s.task, "%s", d->task);
    return ly_sidecar_write(&s, text, len);
}

ly_status ly_model_export(ly_model *model, const ly_export_options *options, char *out_path,
                          size_t out_size)
{
    if (!model) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_model_export: model is NULL");
    if (out_path && out_size) out_path[0] = '\0';
    ly_export_options defaults;
    ly_export_options_init(&defaults);
    const ly_export_options *o = options ? options : &defaults;
    const ly_model_desc *d = ly_model_desc_of(model);
    resolved *r = calloc(1, sizeof *r);
    if (!r) return ly_set_error(LY_E_NO_MEMORY, "ly_model_export: out of memory");
    ly_status st = validate(d, o, r);
    if (st == LY_OK && out_path && out_size && strlen(r->output) + 1 > out_size)
        st = ly_set_error(LY_E_INVALID_ARGUMENT,
                          "ly_model_export: out_path holds %zu bytes, %s needs %zu", out_size,
                          r->output, strlen(r->output) + 1);
    ly_lower_result lowered = {0};
    char *sidecar = NULL;
    size_t sidecar_len = 0;
    if (st == LY_OK) st = capture(d, r->h, r->w, r->msda_custom, &lowered);
    if (st == LY_OK)
        st = sidecar_text(d, r->h, r->w, lowered.delegate_partitions, &sidecar, &sidecar_len);
    if (st == LY_OK)
        st = ly_pte_commit_pair(r->output, lowered.program, lowered.size, sidecar, sidecar_len);
    if (st == LY_OK) {
        ly_log(LY_LOG_INFO, "Export complete: %s", r->output);
        if (out_path && out_size) snprintf(out_path, out_size, "%s", r->output);
    }
    free(lowered.program);
    free(sidecar);
    free(r);
    return st;
}
