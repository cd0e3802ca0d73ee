/* SPDX-License-Identifier: MIT */
/*
 * The shifted-window machinery (src/models/common/windows.h): the relative
 * position index and the shift masks of a 224 input against LibreYOLO's
 * (../shared/testdata/swin/ref_dog; skipped without it), the shifted
 * blocks' token orders (roll and partition as one gather), the window
 * partition and its reverse as graph nodes against their index formulas, the relative position bias
 * gathered from a table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "detr_util.h"
#include "graph/graph.h"
#include "libreyolo/checkpoint.h"
#include "libreyolo/io.h"
#include "models/common/windows.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REF LY_SHARED_DIR "/testdata/swin/ref_dog"

static bool have_fixture(void)
{
    struct stat st;
    if (stat(REF "/relative_position_index.npy", &st) == 0) return true;
    print_message("skipped: the fixture %s is absent\n", REF);
    return false;
}

static void test_relative_index(void **state)
{
    (void)state;
    int64_t idx[49 * 49];
    ly_window_relative_index(7, idx);
    assert_int_equal(idx[0], 84);
    if (!have_fixture()) skip();
    ly_tensor want;
    ly_test_load_npy(REF, "relative_position_index", &want);
    assert_int_equal(want.dtype, LY_I64);
    assert_int_equal(ly_tensor_numel(&want), 49 * 49);
    assert_memory_equal(want.data, idx, sizeof idx);
    ly_npy_free(&want);
}

/* Stages of a 224 input: 56, 28, 14 and 7 (one window: shifted all the same). */
static void test_shift_masks(void **state)
{
    (void)state;
    if (!have_fixture()) skip();
    static const int64_t sizes[4] = {56, 28, 14, 7};
    for (int s = 0; s < 4; s++) {
        int64_t windows = (sizes[s] / 7) * (sizes[s] / 7), n = windows * 49 * 49;
        float *mask = malloc((size_t)n * sizeof *mask);
        assert_non_null(mask);
        ly_window_shift_mask(sizes[s], sizes[s], 7, 3, mask);
        char name[32];
        snprintf(name, sizeof name, "shift_mask_stage%d", s);
        ly_tensor want;
        ly_test_load_npy(REF, name, &want);
        assert_int_equal(want.dtype, LY_F32);
        assert_int_equal(ly_tensor_numel(&want), n);
        int64_t masked = 0;
        for (int64_t i = 0; i < n; i++) {
            masked += mask[i] != 0.0f;
            if (mask[i] != ((const float *)want.data)[i])
                fail_msg("stage %d: mask element %lld is %g, LibreYOLO's %g", s, (long long)i,
                         mask[i], ((const float *)want.data)[i]);
        }
        if (s == 3) assert_int_equal(masked, 1776); /* of 2401 (spec §3.2) */
        ly_npy_free(&want);
        free(mask);
    }
}

/* On a [2, 14, 21, 3] map of distinct values (window 7, shift 3): the shifted
 * order gathers the map rolled by -3 into 7x7 windows (torch.roll, then
 * window_partition, at their index formulas) and its inverse gathers them
 * back; the unshifted partition and its reverse at theirs and back to x; the
 * gathers between a block's windows and the next's, shifted and back. */
static void test_roll_partition_reverse(void **state)
{
    (void)state;
    enum { B = 2, H = 14, W = 21, C = 3, WS = 7, SHIFT = 3 };
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_builder b = {.g = g, .what = "windows test", .st = LY_OK};
    ly_graph_value x = LY_GRAPH_NONE, order[4];
    assert_int_equal(ly_graph_input(g, "x", LY_F32, 4, &x), LY_OK);
    ly_build_shifted_window_order(&b, H, W, WS, SHIFT, order);
    int64_t tokens[3] = {B, H * W, C};
    ly_gather_params rows = {.axis = 1};
    ly_graph_value in[2] = {ly_build_reshape(&b, "tokens", x, 3, tokens), order[0]};
    ly_graph_value shifted = ly_build_node(&b, LY_OP_INDEX_SELECT, "roll", 2, in, &rows);
    ly_graph_value out[2] = {shifted, order[1]};
    ly_graph_value unshifted = ly_build_node(&b, LY_OP_INDEX_SELECT, "unroll", 2, out, &rows);
    ly_graph_value windows = ly_build_window_partition(&b, "partition", x, B, H, W, C, WS);
    ly_graph_value back = ly_build_window_reverse(&b, "reverse", windows, B, H, W, C, WS);
    /* between consecutive blocks: windows -> shifted and shifted -> windows */
    int64_t windows_as_tokens[3] = {B, H * W, C};
    ly_graph_value w_in[2] = {ly_build_reshape(&b, "w", windows, 3, windows_as_tokens), order[2]};
    ly_graph_value w_to_s = ly_build_node(&b, LY_OP_INDEX_SELECT, "w_to_s", 2, w_in, &rows);
    ly_graph_value s_in[2] = {shifted, order[3]};
    ly_graph_value s_to_w = ly_build_node(&b, LY_OP_INDEX_SELECT, "s_to_w", 2, s_in, &rows);
    assert_int_equal(b.st, LY_OK);
    assert_int_equal(ly_graph_output(g, shifted, "shifted"), LY_OK);
    assert_int_equal(ly_graph_output(g, unshifted, "unshifted"), LY_OK);
    assert_int_equal(ly_graph_output(g, windows, "windows"), LY_OK);
    assert_int_equal(ly_graph_output(g, back, "back"), LY_OK);
    assert_int_equal(ly_graph_output(g, w_to_s, "w_to_s"), LY_OK);
    assert_int_equal(ly_graph_output(g, s_to_w, "s_to_w"), LY_OK);
    ly_tensor input;
    int64_t shape[4] = {B, H, W, C};
    assert_int_equal(ly_tensor_alloc(&input, LY_F32, 4, shape), LY_OK);
    float *v = input.data;
    for (int64_t i = 0; i < B * H * W * C; i++)
        v[i] = (float)i;
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    if (ly_graph_run(ctx, 1, &input, 1) != LY_OK) fail_msg("%s", ly_last_error());
    ly_tensor t[6];
    for (int o = 0; o < 6; o++)
        assert_int_equal(ly_graph_get_output(ctx, o, &t[o], NULL), LY_OK);
    assert_int_equal(memcmp(t[4].data, t[0].data, sizeof(float) * B * H * W * C), 0);
    assert_int_equal(memcmp(t[5].data, t[2].data, sizeof(float) * B * H * W * C), 0);
    assert_int_equal(t[2].ndim, 3);
    assert_int_equal(t[2].shape[0], B * (H / WS) * (W / WS));
    assert_int_equal(t[2].shape[1], WS * WS);
    const float *sv = t[0].data, *uv = t[1].data, *wv = t[2].data, *bv = t[3].data;
#define AT(b_, y_, x_, c_) ((((b_)*H + (y_)) * W + (x_)) * C + (c_))
    for (int64_t bb = 0; bb < B; bb++)
        for (int64_t y = 0; y < H; y++)
            for (int64_t xx = 0; xx < W; xx++)
                for (int64_t c = 0; c < C; c++) {
                    /* torch.roll by -SHIFT: rolled[i] = x[(i + SHIFT) mod n] */
                    int64_t sy = (y + SHIFT) % H, sx = (xx + SHIFT) % W;
                    int64_t win = (bb * (H / WS) + y / WS) * (W / WS) + xx / WS;
                    int64_t at = (win * WS * WS + (y % WS) * WS + xx % WS) * C + c;
                    assert_true(sv[at] == v[AT(bb, sy, sx, c)]);
                    assert_true(wv[at] == v[AT(bb, y, xx, c)]);
                    assert_true(uv[AT(bb, y, xx, c)] == v[AT(bb, y, xx, c)]);
                    assert_true(bv[AT(bb, y, xx, c)] == v[AT(bb, y, xx, c)]);
                }
#undef AT
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
    ly_tensor_free(&input);
}

/* A safetensors file of one f32 tensor "table" [rows, cols] = values. */
static unsigned char *table_file(int64_t rows, int64_t cols, const float *values, size_t *size)
{
    char header[160];
    int len =
        snprintf(header, sizeof header,
                 "{\"table\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[0,%lld]}}",
                 (long long)rows, (long long)cols, (long long)(rows * cols * 4));
    size_t data = (size_t)(rows * cols) * sizeof(float);
    *size = 8 + (size_t)len + data;
    unsigned char *f = malloc(*size);
    assert_non_null(f);
    uint64_t n = (uint64_t)len;
    for (int i = 0; i < 8; i++)
        f[i] = (unsigned char)(n >> (8 * i));
    memcpy(f + 8, header, (size_t)len);
    memcpy(f + 8 + len, values, data);
    return f;
}

static void test_relative_bias(void **state)
{
    (void)state;
    enum { WS = 7, HEADS = 3, N = WS * WS, ROWS = (2 * WS - 1) * (2 * WS - 1) };
    float table[ROWS * HEADS];
    for (int i = 0; i < ROWS * HEADS; i++)
        table[i] = 0.5f * (float)i - 7.0f;
    size_t size;
    unsigned char *file = table_file(ROWS, HEADS, table, &size);
    ly_checkpoint *ck;
    assert_int_equal(ly_checkpoint_open_buffer(file, size, "table.safetensors", &ck), LY_OK);
    ly_graph *g;
    assert_int_equal(ly_graph_create(&g), LY_OK);
    ly_builder b = {.g = g, .ck = ck, .what = "windows test", .st = LY_OK};
    ly_graph_value zeros = LY_GRAPH_NONE;
    assert_int_equal(ly_graph_input(g, "zeros", LY_F32, 4, &zeros), LY_OK);
    ly_graph_value bias = ly_build_relative_bias(&b, "table", WS, HEADS);
    bias = ly_build_binary(&b, LY_OP_ADD, "scores", zeros, bias); /* as scores take it */
    if (b.st != LY_OK) fail_msg("%s", ly_last_error());
    assert_int_equal(ly_graph_output(g, bias, "bias"), LY_OK);
    ly_tensor input;
    int64_t shape[4] = {1, HEADS, N, N};
    assert_int_equal(ly_tensor_alloc(&input, LY_F32, 4, shape), LY_OK);
    memset(input.data, 0, sizeof(float) * HEADS * N * N);
    ly_graph_ctx *ctx;
    assert_int_equal(ly_graph_ctx_create(g, &ctx), LY_OK);
    if (ly_graph_run(ctx, 1, &input, 1) != LY_OK) fail_msg("%s", ly_last_error());
    ly_tensor got;
    assert_int_equal(ly_graph_get_output(ctx, 0, &got, NULL), LY_OK);
    assert_int_equal(ly_tensor_numel(&got), HEADS * N * N);
    int64_t idx[N * N];
    ly_window_relative_index(WS, idx);
    const float *gv = got.data;
    for (int h = 0; h < HEADS; h++)
        for (int k = 0; k < N * N; k++)
            assert_true(gv[h * N * N + k] == table[idx[k] * HEADS + h]);
    ly_graph_ctx_free(ctx);
    ly_graph_free(g);
    ly_tensor_free(&input);
    assert_int_equal(ly_checkpoint_close(ck), LY_OK);
    free(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relative_index),
        cmocka_unit_test(test_shift_masks),
        cmocka_unit_test(test_roll_partition_reverse),
        cmocka_unit_test(test_relative_bias),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
