/* LibreYOLO9 from a checkpoint, and its forward pass on the planned graph. */
#include "models/yolo9/build.h"

#include "core/core.h"

#include <stdlib.h>
#include <string.h>

static ly_status checkpoint_at(void *user, size_t index, const char **name, ly_tensor *view)
{
    return ly_checkpoint_tensor_at(user, index, name, view);
}

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
    ly_yolo9_state state = {.at = checkpoint_at, .user = (void *)ck};
    st = ly_checkpoint_tensor_count(ck, &state.count);
    if (st != LY_OK) return st;
    return ly_yolo9_build_state(&state, size, nc, out);
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
