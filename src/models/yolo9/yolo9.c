/* SPDX-License-Identifier: MIT */
/* LibreYOLO9 from a checkpoint, and its forward pass on the planned graph. */
#include "models/yolo9/build.h"

#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A metadata string, or NULL when the checkpoint has none. */
static ly_status meta_string(const ly_checkpoint *ck, const char *key, const char **value)
{
    ly_status st = ly_checkpoint_meta_string(ck, key, value);
    if (st == LY_E_NOT_FOUND) {
        *value = NULL;
        ly_clear_error();
        return LY_OK;
    }
    return st;
}

static bool one_of(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0) return true;
    return false;
}

/* LibreYOLO's quant manifest (quantized-checkpoints.md 4), checked: the conv
 * recipes run; the others are refused saying why. *recipe stays NULL for a
 * float checkpoint. */
static ly_status read_quant(const ly_checkpoint *ck, ly_conv_quant *q, const char **recipe,
                            const char **state, const char **remainder)
{
    static const char *const linear[] = {"w4a16", "w4a8", "int2", "nvfp4", "mxfp4", NULL};
    static const char *const casts[] = {"fp16", "bf16", NULL};
    const char *kind;
    ly_status st = meta_string(ck, "quant.recipe", recipe);
    if (st != LY_OK) return st;
    if (!*recipe) {
        /* a manifest without a recipe is no quantized checkpoint LibreYOLO writes */
        if (ly_checkpoint_meta_string(ck, "quant", &kind) == LY_E_DTYPE) {
            ly_clear_error();
            return ly_set_error(LY_E_FORMAT,
                                "ly_yolo9_build: the quant manifest has no 'recipe' (expected "
                                "int8 or fp8 for yolo9)");
        }
        ly_clear_error();
        return LY_OK;
    }
    if (one_of(*recipe, linear))
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_yolo9_build: quant recipe '%s' quantizes nn.Linear layers only "
                            "and LibreYOLO9 has none (LibreYOLO refuses it for yolo9: use int8 or "
                            "fp8); this build runs it once a family with Linear layers does",
                            *recipe);
    if (one_of(*recipe, casts))
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_yolo9_build: quant recipe '%s' casts the whole model to half "
                            "precision; this build runs LibreYOLO's int8 and fp8 recipes only",
                            *recipe);
    if (strcmp(*recipe, "int8") != 0 && strcmp(*recipe, "fp8") != 0)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_yolo9_build: unknown quant recipe '%s' (LibreYOLO's for yolo9: "
                            "int8, fp8, fp16, bf16)",
                            *recipe);
    const char *execution = NULL;
    st = meta_string(ck, "quant.execution", &execution);
    if (st == LY_OK) st = meta_string(ck, "quant.state", state);
    if (st == LY_OK) st = meta_string(ck, "quant.remainder", remainder);
    if (st != LY_OK) return st;
    if (execution && strcmp(execution, "simulated") != 0)
        return ly_set_error(LY_E_FORMAT,
                            "ly_yolo9_build: quant manifest: execution is '%s', expected "
                            "'simulated' for recipe %s",
                            execution, *recipe);
    if (!*state) *state = "prepared"; /* save() files carry no state */
    if (strcmp(*state, "prepared") != 0 && strcmp(*state, "finalized") != 0)
        return ly_set_error(LY_E_FORMAT,
                            "ly_yolo9_build: quant manifest: state is '%s', expected 'finalized' "
                            "or none (prepared)",
                            *state);
    q->finalized = strcmp(*state, "finalized") == 0;
    if (q->finalized &&
        (!*remainder || (strcmp(*remainder, "fp16") != 0 && strcmp(*remainder, "fp32") != 0)))
        return ly_set_error(LY_E_FORMAT,
                            "ly_yolo9_build: quant manifest: remainder is '%s', expected 'fp16' "
                            "or 'fp32'",
                            *remainder ? *remainder : "(none)");
    q->recipe = strcmp(*recipe, "int8") == 0 ? LY_QUANT_INT8 : LY_QUANT_FP8;
    st = meta_string(ck, "quant.keep_high_precision", &q->keep);
    return st;
}

ly_status ly_yolo9_build(const ly_checkpoint *ck, ly_yolo9 **out)
{
    if (!ck || !out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_yolo9_build: NULL argument");
    *out = NULL;
    const char *family, *task, *size;
    ly_status st = meta_string(ck, "model_family", &family);
    if (st == LY_OK) st = meta_string(ck, "task", &task);
    if (st == LY_OK) st = meta_string(ck, "size", &size);
    if (st != LY_OK) return st;
    if (family && strcmp(family, "yolo9") != 0)
        return ly_set_error(
            LY_E_UNSUPPORTED,
            "ly_yolo9_build: the checkpoint's model_family is '%s', expected 'yolo9'", family);
    if (task && strcmp(task, "detect") != 0)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "ly_yolo9_build: task '%s' unsupported (only 'detect')", task);
    int64_t nc = -1;
    st = ly_checkpoint_meta_int(ck, "nc", &nc);
    if (st == LY_E_NOT_FOUND) {
        nc = -1;
        ly_clear_error();
    } else if (st != LY_OK) {
        return st;
    }
    ly_conv_quant quant = {0};
    const char *recipe = NULL, *state_name = NULL, *remainder = NULL;
    st = read_quant(ck, &quant, &recipe, &state_name, &remainder);
    if (st != LY_OK) return st;
    ly_state_dict dict;
    st = ly_state_dict_of(ck, &dict);
    if (st != LY_OK) return st;
    ly_yolo9_state state = {.count = dict.count,
                            .at = dict.at,
                            .user = dict.user,
                            .stored_dtype = dict.stored_dtype,
                            .quant = recipe ? &quant : NULL};
    st = ly_yolo9_build_state(&state, size, nc, out);
    if (st != LY_OK || !recipe) return st;
    ly_yolo9 *net = *out;
    snprintf(net->quant_recipe, sizeof net->quant_recipe, "%s", recipe);
    snprintf(net->quant_state, sizeof net->quant_state, "%s", state_name);
    snprintf(net->quant_remainder, sizeof net->quant_remainder, "%s", remainder ? remainder : "");
    int64_t declared;
    if (ly_checkpoint_meta_int(ck, "quant.module_count", &declared) == LY_OK &&
        declared != net->quant_modules)
        ly_log(LY_LOG_WARNING,
               "quant manifest: module_count is %lld, the %s recipe selects %d modules here",
               (long long)declared, recipe, net->quant_modules);
    ly_clear_error();
    return LY_OK;
}

void ly_yolo9_free(ly_yolo9 *net)
{
    if (!net) return;
    ly_graph_free(net->graph);
    free(net);
}

ly_graph *ly_yolo9_release_graph(ly_yolo9 *net)
{
    ly_graph *g = net->graph;
    free(net);
    return g;
}

const char *ly_yolo9_size(const ly_yolo9 *net)
{
    return net ? net->size : "";
}

int64_t ly_yolo9_num_classes(const ly_yolo9 *net)
{
    return net ? net->nc : 0;
}

ly_status ly_yolo9_forward(const ly_yolo9 *net, ly_graph_ctx *ctx, const ly_tensor *input,
                           int threads, ly_tensor outputs[LY_YOLO9_OUTPUTS],
                           const char *names[LY_YOLO9_OUTPUTS])
{
    if (!net || !ctx || !input || !outputs)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_yolo9_forward: NULL argument");
    ly_status st = ly_check_tensor(input, "ly_yolo9_forward: input", LY_F32);
    if (st != LY_OK) return st;
    const int64_t *s = input->shape;
    if (input->ndim != 4 || s[0] != 1 || s[1] != 3 || s[2] < 32 || s[3] < 32 || s[2] % 32 != 0 ||
        s[3] % 32 != 0) {
        char buf[96];
        return ly_set_error(LY_E_SHAPE,
                            "ly_yolo9_forward: input %s, expected [1, 3, H, W] with H and W "
                            "positive multiples of 32",
                            ly_shape_str(input, buf, sizeof buf));
    }
    /* Resolved once here, not by every kernel call. */
    st = ly_graph_run(ctx, 1, input, ly_threads_resolve(threads));
    if (st != LY_OK) return st;
    for (int i = 0; i < LY_YOLO9_OUTPUTS; i++) {
        const char *name;
        st = ly_graph_get_output(ctx, i, &outputs[i], &name);
        if (st != LY_OK) return st;
        if (names) names[i] = name;
    }
    return LY_OK;
}
