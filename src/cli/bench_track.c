/* SPDX-License-Identifier: MIT */
/*
 * `libreyolo bench track`: the ByteTrack update's cost per frame on a made-up
 * scene (D detections per frame: half of them objects that move steadily and
 * stay tracked, half clutter at low scores), against LibreYOLO's own tracker
 * on the same frames when its Python package is importable (the peer
 * bench/peers/libreyolo_track.py; its ids are compared too).
 */
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/cli_util.h"
#include "libreyolo/io.h"
#include "libreyolo/track.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TARGET_MS 0.2 /* issue 37: 100 detections, 50 live tracks */

void ly_cli_usage_bench_track(FILE *to)
{
    fputs("usage: libreyolo bench track [--frames N] [--detections D] [--json] [--no-peers]\n"
          "\n"
          "Times ly_tracker_update per frame on a synthetic scene: D detections a frame (default\n"
          "100), half of them objects moving steadily (so about D/2 live tracks), half clutter\n"
          "scoring 0.1-0.25, for N frames (default 2000); prints the mean and p90 per frame and\n"
          "the ratio to the 0.2 ms target. The peer is LibreYOLO's ByteTracker on the same\n"
          "frames (bench/peers/libreyolo_track.py, with LibreYOLO importable: PYTHONPATH), whose\n"
          "track ids must equal ours.\n",
          to);
}

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s)
{
    return (double)(mix(s) >> 11) / 9007199254740992.0;
}

/* frames x d x 6 float32: x1 y1 x2 y2 conf cls */
static float *make_scene(int frames, int d)
{
    float *scene = malloc((size_t)frames * (size_t)d * 6 * sizeof *scene);
    if (!scene) return NULL;
    uint64_t seed = 37;
    int objects = d / 2;
    double *pos = malloc((size_t)objects * 4 * sizeof *pos);
    if (!pos) {
        free(scene);
        return NULL;
    }
    for (int o = 0; o < objects; o++) {
        pos[4 * o] = unit(&seed) * 1100, pos[4 * o + 1] = unit(&seed) * 600;
        pos[4 * o + 2] = (unit(&seed) - 0.5) * 6, pos[4 * o + 3] = (unit(&seed) - 0.5) * 4;
    }
    for (int f = 0; f < frames; f++)
        for (int i = 0; i < d; i++) {
            float *r = scene + ((size_t)f * (size_t)d + (size_t)i) * 6;
            if (i < objects) {
                double *p = pos + 4 * i;
                p[0] = fmod(p[0] + p[2] + 1200, 1200), p[1] = fmod(p[1] + p[3] + 650, 650);
                r[0] = (float)p[0], r[1] = (float)p[1];
                r[2] = (float)(p[0] + 40 + i % 7), r[3] = (float)(p[1] + 80 + i % 5);
                r[4] = (float)(0.5 + 0.45 * unit(&seed));
            } else {
                r[0] = (float)(unit(&seed) * 1200), r[1] = (float)(unit(&seed) * 650);
                r[2] = r[0] + 10 + (float)(unit(&seed) * 60),
                r[3] = r[1] + 10 + (float)(unit(&seed) * 60);
                r[4] = (float)(0.1 + 0.15 * unit(&seed));
            }
            r[5] = (float)(i % 3);
        }
    free(pos);
    return scene;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int ly_cli_bench_track(int argc, char **argv)
{
    int frames = 2000, d = 100;
    bool json = false, peers = true;
    for (int i = 0; i < argc; i++) {
        const char *v;
        bool missing = false;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            ly_cli_usage_bench_track(stdout);
            return 0;
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--frames", &missing))) {
            if (!ly_cli_parse_int(v, 10, 10000000, &frames))
                return ly_cli_usage_error("bench track", "--frames '%s': expected 10..10000000", v);
        } else if ((v = ly_cli_option_value(argc, argv, &i, "--detections", &missing))) {
            if (!ly_cli_parse_int(v, 2, 100000, &d))
                return ly_cli_usage_error("bench track", "--detections '%s': expected 2..100000",
                                          v);
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--no-peers")) {
            peers = false;
        } else if (missing) {
            return ly_cli_usage_error("bench track", "%s needs a value", argv[i]);
        } else {
            return ly_cli_unknown_argument("bench track", argv[i]);
        }
    }
    float *scene = make_scene(frames, d);
    double *ms = malloc((size_t)frames * sizeof *ms);
    int64_t *ids = malloc((size_t)frames * (size_t)d * sizeof *ids);
    size_t *counts = malloc((size_t)frames * sizeof *counts);
    ly_detection *dets = malloc((size_t)d * sizeof *dets);
    size_t *index = malloc((size_t)d * sizeof *index);
    ly_tracker *t = NULL;
    int code = 0;
    if (!scene || !ms || !ids || !counts || !dets || !index ||
        ly_tracker_create(NULL, &t) != LY_OK) {
        code = ly_cli_fail("bench track", LY_EXIT_FAILURE, "io_error", NULL, "out of memory");
        goto done;
    }
    double live = 0;
    for (int f = 0; f < frames; f++) {
        for (int i = 0; i < d; i++) {
            const float *r = scene + ((size_t)f * (size_t)d + (size_t)i) * 6;
            dets[i] = (ly_detection){{r[0], r[1], r[2], r[3]}, r[4], (int)r[5], NULL};
        }
        double t0 = ly_cli_now_s();
        ly_tracker_update(t, dets, (size_t)d, index, ids + (size_t)f * (size_t)d, &counts[f]);
        ms[f] = (ly_cli_now_s() - t0) * 1e3;
        live += (double)counts[f];
        if (f % 256 == 0) ly_cli_progress("bench track: frame %d/%d", f, frames);
    }
    ly_cli_progress_end();
    double sum = 0;
    for (int f = 0; f < frames; f++)
        sum += ms[f];
    double mean = sum / frames;
    qsort(ms, (size_t)frames, sizeof *ms, compare_double);
    double p90 = ms[(size_t)(0.9 * (frames - 1))], median = ms[(size_t)(frames - 1) / 2];

    /* the peer: LibreYOLO's ByteTracker on the same frames */
    char peer_line[512] = "not run (--no-peers)";
    double peer_mean = NAN;
    int peer_same = -1;
    char script[PATH_MAX];
    if (peers && !ly_cli_find_peer_script("libreyolo_track.py", script, sizeof script))
        snprintf(peer_line, sizeof peer_line, "not available: no bench/peers/libreyolo_track.py");
    else if (peers) {
        const char *tried;
        const char *python = ly_cli_find_python("import numpy, scipy, torch", 60, &tried);
        if (!python) {
            snprintf(peer_line, sizeof peer_line,
                     "not available: no python3 with numpy, scipy and torch (tried %s)", tried);
        } else {
            char dir[] = "/tmp/ly_bench_track_XXXXXX", in[64], out[64];
            if (!mkdtemp(dir)) goto no_peer;
            snprintf(in, sizeof in, "%s/scene.npy", dir);
            snprintf(out, sizeof out, "%s/ids.npy", dir);
            ly_tensor sc = {.data = scene, .dtype = LY_F32, .ndim = 3, .shape = {frames, d, 6}};
            if (ly_npy_save(in, &sc) != LY_OK) goto no_peer;
            char *args[] = {(char *)python, script, in, out, NULL};
            ly_cli_captured c;
            ly_cli_progress("bench track: running LibreYOLO's tracker");
            int e = ly_cli_run_capture(args, 600, &c);
            ly_cli_progress_end();
            if (e == 0 && c.exit_code == 0 && c.out && sscanf(c.out, "%lf", &peer_mean) == 1) {
                ly_tensor theirs;
                peer_same = 0;
                if (ly_npy_load(out, &theirs) == LY_OK) {
                    const int64_t *p =
                        theirs.data; /* per frame: count, then ids, padded to 1 + d */
                    peer_same = theirs.dtype == LY_I64 &&
                                ly_tensor_numel(&theirs) == (int64_t)frames * (1 + d);
                    for (int f = 0; peer_same && f < frames; f++) {
                        const int64_t *row = p + (size_t)f * (size_t)(1 + d);
                        peer_same = row[0] == (int64_t)counts[f];
                        for (size_t k = 0; peer_same && k < counts[f]; k++)
                            peer_same = row[1 + k] == ids[(size_t)f * (size_t)d + k];
                    }
                    ly_npy_free(&theirs);
                }
                snprintf(peer_line, sizeof peer_line, "%.3f ms per frame (%.1fx ours), ids %s",
                         peer_mean, peer_mean / mean, peer_same ? "identical" : "DIFFER");
            } else {
                char why[256] = "";
                if (e == 0) ly_cli_last_line(c.err, why, sizeof why);
                snprintf(peer_line, sizeof peer_line, "failed: %s", why[0] ? why : "no output");
            }
            if (e == 0) ly_cli_captured_free(&c);
            unlink(in);
            unlink(out);
            rmdir(dir);
        }
    }
no_peer:
    if (json) {
        printf(
            "{\"frames\": %d, \"detections\": %d, \"mean_live_tracks\": %.1f, \"mean_ms\": %.5f, "
            "\"median_ms\": %.5f, \"p90_ms\": %.5f, \"target_ms\": %.1f, \"peer_ms\": ",
            frames, d, live / frames, mean, median, p90, TARGET_MS);
        if (isfinite(peer_mean))
            printf("%.5f", peer_mean);
        else
            fputs("null", stdout);
        printf(", \"peer_ids_identical\": %s}\n", peer_same < 0 ? "null"
                                                  : peer_same   ? "true"
                                                                : "false");
    } else {
        printf("libreyolo bench track: %d frames, %d detections each, %.1f tracks reported per "
               "frame on average\n",
               frames, d, live / frames);
        printf("ours                  %.4f ms per frame (median %.4f, p90 %.4f), %.2fx the %.1f ms "
               "target\n",
               mean, median, p90, mean / TARGET_MS, TARGET_MS);
        printf("LibreYOLO ByteTracker %s\n", peer_line);
    }
    if (peer_same == 0) code = LY_EXIT_FAILURE;
done:
    ly_tracker_free(t);
    free(scene), free(ms), free(ids), free(counts), free(dets), free(index);
    return code;
}
