/* SPDX-License-Identifier: MIT */
/* ByteTrack against LibreYOLO's own: ../shared/testdata/track/track_seed0.json
 * (3 synthetic sequences x 6 configs, 160 frames each; the "ties" config has
 * thresholds of 1 so that the assignment's tie-breaking decides) replayed
 * frame by frame, every (detection index, track id) pair identical; the
 * assignment against SciPy's answers by hand; the config's refusals in
 * LibreYOLO's words; a static scene keeps its ids; a soak keeps memory flat. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "test_util.h"

#include "libreyolo/track.h"
#include "track/lsap.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FIXTURE LY_SHARED_DIR "/testdata/track/track_seed0.json"

static void apply_config(ly_track_config *c, const cJSON *overrides)
{
    const cJSON *item;
    cJSON_ArrayForEach(item, overrides)
    {
        const char *k = item->string;
        double v = cJSON_IsBool(item) ? (cJSON_IsTrue(item) ? 1 : 0) : item->valuedouble;
        if (!strcmp(k, "track_high_thresh"))
            c->track_high_thresh = v;
        else if (!strcmp(k, "track_low_thresh"))
            c->track_low_thresh = v;
        else if (!strcmp(k, "new_track_thresh"))
            c->new_track_thresh = v;
        else if (!strcmp(k, "match_thresh"))
            c->match_thresh = v;
        else if (!strcmp(k, "match_thresh_low"))
            c->match_thresh_low = v;
        else if (!strcmp(k, "match_thresh_unconfirmed"))
            c->match_thresh_unconfirmed = v;
        else if (!strcmp(k, "track_buffer"))
            c->track_buffer = (int)v;
        else if (!strcmp(k, "frame_rate"))
            c->frame_rate = (int)v;
        else if (!strcmp(k, "fuse_score"))
            c->fuse_score = v != 0;
        else if (!strcmp(k, "minimum_consecutive_frames"))
            c->minimum_consecutive_frames = (int)v;
        else
            fail_msg("unknown config key %s", k);
    }
}

static void test_replay_fixture(void **state)
{
    (void)state;
    char *text = ly_test_read_text(FIXTURE);
    if (!text) {
        print_message("skipped: %s is absent (the shared fixture is not here)\n", FIXTURE);
        skip();
    }
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    const cJSON *scenario;
    int checked = 0, pairs = 0;
    cJSON_ArrayForEach(scenario, cJSON_GetObjectItem(root, "scenarios"))
    {
        const cJSON *frames = cJSON_GetObjectItem(scenario, "frames");
        const cJSON *config;
        cJSON_ArrayForEach(config, cJSON_GetObjectItem(scenario, "configs"))
        {
            ly_track_config cfg;
            ly_track_config_init(&cfg);
            apply_config(&cfg, cJSON_GetObjectItem(config, "config"));
            ly_tracker *t;
            assert_int_equal(ly_tracker_create(&cfg, &t), LY_OK);
            const cJSON *want = cJSON_GetObjectItem(config, "tracked");
            for (int f = 0; f < cJSON_GetArraySize(frames); f++) {
                const cJSON *rows = cJSON_GetArrayItem(frames, f);
                int n = cJSON_GetArraySize(rows);
                ly_detection d[64];
                size_t index[64], count;
                int64_t id[64];
                assert_true(n <= 64);
                for (int i = 0; i < n; i++) {
                    const cJSON *r = cJSON_GetArrayItem(rows, i);
                    for (int k = 0; k < 4; k++)
                        d[i].xyxy[k] = (float)cJSON_GetArrayItem(r, k)->valuedouble;
                    d[i].conf = (float)cJSON_GetArrayItem(r, 4)->valuedouble;
                    d[i].cls = (int)cJSON_GetArrayItem(r, 5)->valuedouble;
                    d[i].name = NULL;
                }
                assert_int_equal(ly_tracker_update(t, d, (size_t)n, index, id, &count), LY_OK);
                const cJSON *expect = cJSON_GetArrayItem(want, f);
                bool same = (int)count == cJSON_GetArraySize(expect);
                for (size_t k = 0; same && k < count; k++) {
                    const cJSON *pair = cJSON_GetArrayItem(expect, (int)k);
                    same = (int)index[k] == cJSON_GetArrayItem(pair, 0)->valueint &&
                           id[k] == cJSON_GetArrayItem(pair, 1)->valueint;
                }
                if (!same) {
                    char *e = cJSON_PrintUnformatted(expect);
                    print_message("scenario %s, config %s, frame %d: expected %s, got",
                                  cJSON_GetObjectItem(scenario, "name")->valuestring,
                                  config->string, f, e);
                    for (size_t k = 0; k < count; k++)
                        print_message(" [%zu, %lld]", index[k], (long long)id[k]);
                    print_message("\n");
                    free(e);
                    fail();
                }
                pairs += (int)count;
            }
            ly_tracker_free(t);
            checked++;
        }
    }
    print_message("replayed %d sequences (scenario x config), %d tracked pairs: identical\n",
                  checked, pairs);
    assert_int_equal(checked, 18);
    cJSON_Delete(root);
    free(text);
}

/* SciPy's answers, ties included (scipy 1.10 linear_sum_assignment). */
static void test_lsap_like_scipy(void **state)
{
    (void)state;
    size_t r[8], c[8], n;
    /* a constant matrix: the identity */
    double flat[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(ly_lsap_solve(3, 3, flat, r, c, &n), LY_OK);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(r[i], i);
        assert_int_equal(c[i], i);
    }
    /* scipy: [[4, 1, 3], [2, 0, 5], [3, 2, 2]] -> rows 0 1 2, cols 1 0 2 */
    double m[9] = {4, 1, 3, 2, 0, 5, 3, 2, 2};
    assert_int_equal(ly_lsap_solve(3, 3, m, r, c, &n), LY_OK);
    assert_int_equal(c[0], 1);
    assert_int_equal(c[1], 0);
    assert_int_equal(c[2], 2);
    /* more rows than columns (transposed inside): rows sorted, each column once */
    double tall[6] = {1, 1, 1, 1, 1, 1}; /* 3 x 2 of ones: scipy gives rows 0 1, cols 0 1 */
    assert_int_equal(ly_lsap_solve(3, 2, tall, r, c, &n), LY_OK);
    assert_int_equal(n, 2);
    assert_int_equal(r[0], 0);
    assert_int_equal(c[0], 0);
    assert_int_equal(r[1], 1);
    assert_int_equal(c[1], 1);
    double bad[4] = {1, NAN, 0, 1};
    assert_int_equal(ly_lsap_solve(2, 2, bad, r, c, &n), LY_E_INVALID_ARGUMENT);
}

static void test_config_refusals(void **state)
{
    (void)state;
    ly_track_config c;
    ly_track_config_init(&c);
    assert_int_equal(ly_track_config_check(&c), LY_OK);
    c.frame_rate = 0;
    assert_int_equal(ly_track_config_check(&c), LY_E_INVALID_ARGUMENT);
    assert_string_equal(ly_last_error(), "frame_rate must be > 0, got 0");
    ly_track_config_init(&c);
    c.track_high_thresh = 2;
    assert_int_equal(ly_track_config_check(&c), LY_E_INVALID_ARGUMENT);
    assert_string_equal(ly_last_error(), "track_high_thresh must be in [0, 1], got 2.0");
    ly_track_config_init(&c);
    c.track_high_thresh = 0.1, c.track_low_thresh = 0.2;
    assert_int_equal(ly_track_config_check(&c), LY_E_INVALID_ARGUMENT);
    assert_string_equal(ly_last_error(),
                        "track_high_thresh (0.1) must be >= track_low_thresh (0.2)");
    ly_track_config_init(&c);
    c.minimum_consecutive_frames = 0;
    assert_int_equal(ly_track_config_check(&c), LY_E_INVALID_ARGUMENT);
    ly_tracker *t = (ly_tracker *)&t;
    assert_int_equal(ly_tracker_create(&c, &t), LY_E_INVALID_ARGUMENT);
    assert_null(t);
}

static char last_warning[512];

static void keep_warning(ly_log_level level, const char *message, void *user)
{
    (void)level, (void)user;
    snprintf(last_warning, sizeof last_warning, "%s", message);
}

/* A static scene: the same boxes every frame keep their ids; an empty frame
 * reports nothing; reset starts the ids again; a NaN box is dropped. */
static void test_static_scene(void **state)
{
    (void)state;
    ly_tracker *t;
    assert_int_equal(ly_tracker_create(NULL, &t), LY_OK);
    ly_detection d[3] = {{{10, 10, 50, 90}, 0.9f, 0, NULL},
                         {{200, 40, 260, 160}, 0.8f, 2, NULL},
                         {{400, 300, 420, 330}, 0.6f, 5, NULL}};
    size_t index[3], count;
    int64_t id[3];
    for (int f = 0; f < 20; f++) {
        assert_int_equal(ly_tracker_update(t, d, 3, index, id, &count), LY_OK);
        assert_int_equal(count, 3);
        for (size_t k = 0; k < 3; k++)
            assert_int_equal(id[k], (int64_t)index[k] + 1);
    }
    assert_int_equal(ly_tracker_update(t, NULL, 0, NULL, NULL, &count), LY_OK);
    assert_int_equal(count, 0);
    d[1].xyxy[2] = NAN;
    ly_set_log_handler(keep_warning, NULL, LY_LOG_WARNING);
    assert_int_equal(ly_tracker_update(t, d, 3, index, id, &count), LY_OK);
    ly_set_log_handler(NULL, NULL, LY_LOG_WARNING);
    assert_non_null(strstr(last_warning, "1 detection with a box or score that is not finite"));
    for (size_t k = 0; k < count; k++)
        assert_int_not_equal(index[k], 1);
    assert_int_equal(ly_tracker_reset(t), LY_OK);
    d[1].xyxy[2] = 260;
    assert_int_equal(ly_tracker_update(t, d, 3, index, id, &count), LY_OK);
    assert_int_equal(count, 3);
    assert_int_equal(id[0], 1);
    ly_tracker_free(t);
}

/* Boxes with negative sizes and scores outside [0, 1] go through as
 * LibreYOLO's arithmetic takes them (no refusal, no crash); a frame of 2,000
 * detections finishes. */
static void test_odd_detections(void **state)
{
    (void)state;
    ly_tracker *t;
    assert_int_equal(ly_tracker_create(NULL, &t), LY_OK);
    ly_detection d[4] = {{{50, 50, 10, 10}, 0.9f, 0, NULL},
                         {{0, 0, 30, 30}, 1.5f, 1, NULL},
                         {{100, 100, 140, 170}, -0.2f, 2, NULL},
                         {{200, 200, 200, 260}, 0.7f, 3, NULL}};
    size_t index[2000], count;
    int64_t id[2000];
    for (int f = 0; f < 5; f++)
        assert_int_equal(ly_tracker_update(t, d, 4, index, id, &count), LY_OK);
    ly_tracker_free(t);
    assert_int_equal(ly_tracker_create(NULL, &t), LY_OK);
    ly_detection *many = malloc(2000 * sizeof *many);
    assert_non_null(many);
    uint64_t seed = 3;
    for (int f = 0; f < 3; f++) {
        for (int i = 0; i < 2000; i++) {
            float x = (float)(ly_test_splitmix64(&seed) % 1800),
                  y = (float)(ly_test_splitmix64(&seed) % 1000);
            many[i] = (ly_detection){{x, y, x + 30, y + 50},
                                     0.1f + (float)(ly_test_splitmix64(&seed) % 900) / 1000.0f,
                                     0,
                                     NULL};
        }
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        assert_int_equal(ly_tracker_update(t, many, 2000, index, id, &count), LY_OK);
        clock_gettime(CLOCK_MONOTONIC, &b);
        print_message("2000 detections, frame %d: %zu tracked, %.1f ms\n", f + 1, count,
                      (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) * 1e-6);
    }
    free(many);
    ly_tracker_free(t);
}

static size_t rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE) / 1024;
}

/* Random detections for many frames: resident memory stays flat
 * (LIBREYOLO_TRACK_SOAK=N frames; 3000 by default). */
static void test_soak(void **state)
{
    (void)state;
    const char *env = getenv("LIBREYOLO_TRACK_SOAK");
    long frames = env && *env ? atol(env) : 3000;
    ly_tracker *t;
    assert_int_equal(ly_tracker_create(NULL, &t), LY_OK);
    uint64_t seed = 7;
    ly_detection d[100];
    size_t index[100], count;
    int64_t id[100];
    size_t after_warmup = 0;
    for (long f = 0; f < frames; f++) {
        size_t n = (size_t)(ly_test_splitmix64(&seed) % 100);
        for (size_t i = 0; i < n; i++) {
            float x = (float)(ly_test_splitmix64(&seed) % 1200),
                  y = (float)(ly_test_splitmix64(&seed) % 650);
            float w = 10 + (float)(ly_test_splitmix64(&seed) % 80),
                  h = 10 + (float)(ly_test_splitmix64(&seed) % 80);
            d[i] = (ly_detection){
                {x, y, x + w, y + h}, (float)(ly_test_splitmix64(&seed) % 1000) / 1000.0f, 0, NULL};
        }
        assert_int_equal(ly_tracker_update(t, d, n, index, id, &count), LY_OK);
        if (f == frames / 10) after_warmup = rss_kib();
    }
    size_t end = rss_kib();
    ly_tracker_free(t);
    print_message("soak: %ld frames, resident %zu KiB after a tenth, %zu KiB at the end\n", frames,
                  after_warmup, end);
#if defined(LY_SANITIZED) || defined(__SANITIZE_ADDRESS__)
    /* ASan keeps freed memory in quarantine: resident memory grows by design */
    print_message("skipped: the flat-memory check (a sanitizer build)\n");
    (void)end;
#else
    assert_true(end <= after_warmup + 1024);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lsap_like_scipy), cmocka_unit_test(test_config_refusals),
        cmocka_unit_test(test_static_scene),    cmocka_unit_test(test_replay_fixture),
        cmocka_unit_test(test_odd_detections),  cmocka_unit_test(test_soak),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
