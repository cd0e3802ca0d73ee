/* SPDX-License-Identifier: MIT */
/* Video: clips written here with the libraries (MJPEG in AVI, H.264 and
 * MPEG-4 part 2 in MP4) read back frame for frame, against OpenCV's
 * VideoCapture where python3-opencv is installed; vid_stride; the writer's
 * atomic file; and every way a source can be wrong, each with a status and a
 * message naming it, none hanging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka needs the three above first. */
#include <cmocka.h>

#include "test_util.h"

#include "libreyolo/video.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PARKOUR LY_SHARED_DIR "/testdata/images/parkour.jpg"
#define YOLO9 LY_SHARED_DIR "/testdata/yolo9/LibreYOLO9t_seed0.pt"
#define W 320
#define H 240
#define FRAMES 12

static bool video_built(void)
{
    bool on = false;
    ly_video_available(&on);
    if (!on) print_message("skipped: this build has no video (FFmpeg's libraries)\n");
    return on;
}

/* Frame k of the test clips: a window moving across the fixture photo where
 * it is here, else moving shapes on a gradient. */
static void make_frame(ly_image *im, int k)
{
    static ly_image photo;
    static bool tried;
    if (!tried) {
        tried = true;
        if (ly_image_load(PARKOUR, &photo) != LY_OK) photo.pixels = NULL;
    }
    if (!im->pixels) assert_int_equal(ly_image_alloc(im, W, H), LY_OK);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t *p = im->pixels + 3 * ((size_t)y * W + (size_t)x);
            if (photo.pixels) {
                int sx = (x * 2 + 16 * k) % photo.width, sy = (y * 2) % photo.height;
                memcpy(p, photo.pixels + 3 * ((size_t)sy * (size_t)photo.width + (size_t)sx), 3);
            } else {
                bool box = x > 20 + 10 * k && x < 120 + 10 * k && y > 60 && y < 180;
                p[0] = box ? 230 : (uint8_t)(x * 255 / W);
                p[1] = box ? 40 : (uint8_t)(y * 255 / H);
                p[2] = (uint8_t)(box ? 60 : (x + y + 7 * k) & 255);
            }
        }
}

static void write_clip(const char *path, const char *codec, double fps, int frames)
{
    ly_video_writer *w;
    assert_int_equal(ly_video_writer_open(path, W, H, fps, codec, &w), LY_OK);
    /* nothing at the path until the writer closes */
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);
    ly_image im = {0};
    for (int k = 0; k < frames; k++) {
        make_frame(&im, k);
        assert_int_equal(ly_video_write(w, &im), LY_OK);
    }
    ly_image_free(&im);
    assert_int_equal(ly_video_writer_close(w), LY_OK);
    assert_int_equal(stat(path, &st), 0);
}

static bool have_encoder(const char *path, const char *codec)
{
    ly_video_writer *w;
    if (ly_video_writer_open(path, W, H, 25, codec, &w) != LY_OK) {
        print_message("skipped: no %s encoder in this build (%s)\n", codec, ly_last_error());
        return false;
    }
    ly_video_writer_discard(w);
    return true;
}

/* Every frame of `path`, concatenated. */
static uint8_t *read_all(const char *path, const ly_video_options *opt, int *count,
                         int64_t *indices, double *times)
{
    ly_video_reader *r;
    assert_int_equal(ly_video_open(path, opt, &r), LY_OK);
    uint8_t *all = malloc((size_t)FRAMES * W * H * 3);
    assert_non_null(all);
    ly_image im = {0};
    ly_video_frame at;
    bool got;
    int n = 0;
    ly_status st;
    while ((st = ly_video_read(r, &im, &at, &got)) == LY_OK && got) {
        assert_true(n < FRAMES);
        assert_int_equal(im.width, W);
        assert_int_equal(im.height, H);
        memcpy(all + (size_t)n * W * H * 3, im.pixels, (size_t)W * H * 3);
        if (indices) indices[n] = at.index;
        if (times) times[n] = at.time_s;
        n++;
    }
    assert_int_equal(st, LY_OK);
    ly_image_free(&im);
    ly_video_close(r);
    *count = n;
    return all;
}

/* The python3 that has cv2 (Debian's python3-opencv), or NULL. */
static const char *python_with_opencv(void)
{
    static const char *const candidates[] = {"/usr/bin/python3", "python3"};
    for (size_t i = 0; i < 2; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "%s -c 'import cv2' >/dev/null 2>&1", candidates[i]);
        if (system(cmd) == 0) return candidates[i];
    }
    return NULL;
}

/* The clip's frames as OpenCV gives them equal ours byte for byte (else the
 * largest difference is printed and the test fails). */
static void compare_with_opencv(const char *path, const uint8_t *ours, int n)
{
    const char *python = python_with_opencv();
    if (!python) {
        print_message("skipped: the OpenCV comparison (no python3 with cv2: python3-opencv)\n");
        return;
    }
    char raw[512], cmd[1536];
    ly_test_scratch_path("opencv.rgb", raw, sizeof raw);
    snprintf(cmd, sizeof cmd, "%s %s/video_frames_opencv.py '%s' '%s'", python, LY_TOOLS_DIR, path,
             raw);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int frames = 0, w = 0, h = 0;
    assert_int_equal(fscanf(p, "%d %d %d", &frames, &w, &h), 3);
    assert_int_equal(pclose(p), 0);
    assert_int_equal(frames, n);
    assert_int_equal(w, W);
    assert_int_equal(h, H);
    size_t bytes = (size_t)n * W * H * 3;
    uint8_t *theirs = malloc(bytes);
    assert_non_null(theirs);
    FILE *f = fopen(raw, "rb");
    assert_non_null(f);
    assert_int_equal(fread(theirs, 1, bytes, f), bytes);
    fclose(f);
    unlink(raw);
    int worst = 0;
    for (size_t i = 0; i < bytes; i++) {
        int d = abs((int)ours[i] - (int)theirs[i]);
        if (d > worst) worst = d;
    }
    if (worst) print_message("%s: largest difference from OpenCV: %d\n", path, worst);
    assert_int_equal(worst, 0);
    free(theirs);
}

static void round_trip(const char *name, const char *codec, const char *want_codec,
                       const char *want_container)
{
    if (!video_built()) skip();
    char path[512];
    ly_test_scratch_path(name, path, sizeof path);
    if (codec && !have_encoder(path, codec)) skip();
    write_clip(path, codec, 25, FRAMES);

    ly_video_reader *r;
    assert_int_equal(ly_video_open(path, NULL, &r), LY_OK);
    ly_video_info info;
    assert_int_equal(ly_video_get_info(r, &info), LY_OK);
    assert_int_equal(info.width, W);
    assert_int_equal(info.height, H);
    assert_true(info.fps > 24.99 && info.fps < 25.01);
    assert_int_equal(info.frame_count, FRAMES);
    assert_false(info.live);
    assert_string_equal(info.codec, want_codec);
    assert_non_null(strstr(info.container, want_container));
    ly_video_close(r);

    int n;
    int64_t idx[FRAMES];
    double t[FRAMES];
    uint8_t *all = read_all(path, NULL, &n, idx, t);
    assert_int_equal(n, FRAMES);
    for (int k = 0; k < n; k++) {
        assert_int_equal(idx[k], k);
        assert_true(t[k] > k / 25.0 - 1e-6 && t[k] < k / 25.0 + 1e-6);
    }
    /* the frames are the clip's: near the frames written (lossy codecs) */
    ly_image im = {0};
    make_frame(&im, 5);
    double sum = 0;
    for (size_t i = 0; i < (size_t)W * H * 3; i++)
        sum += abs((int)im.pixels[i] - (int)all[(size_t)5 * W * H * 3 + i]);
    ly_image_free(&im);
    assert_true(sum / (W * H * 3) < 12.0);
    compare_with_opencv(path, all, n);
    free(all);

    /* vid_stride: frames 0, 3, 6, 9 with their own numbers and times */
    ly_video_options opt;
    ly_video_options_init(&opt);
    opt.vid_stride = 3;
    uint8_t *strided = read_all(path, &opt, &n, idx, t);
    assert_int_equal(n, 4);
    for (int k = 0; k < n; k++) {
        assert_int_equal(idx[k], 3 * k);
        assert_true(t[k] > 3 * k / 25.0 - 1e-6 && t[k] < 3 * k / 25.0 + 1e-6);
    }
    free(strided);
}

static void test_mjpeg_avi(void **state)
{
    (void)state;
    round_trip("clip.avi", "mjpeg", "mjpeg", "avi");
}

static void test_h264_mp4(void **state)
{
    (void)state;
    round_trip("clip_h264.mp4", "libx264", "h264", "mp4");
}

static void test_mp4v_default(void **state)
{
    (void)state;
    /* no codec named: MPEG-4 part 2, LibreYOLO's mp4v */
    round_trip("clip_mp4v.mp4", NULL, "mpeg4", "mp4");
}

/* An image sequence (FFmpeg's pattern): the frames in number order, the
 * default rate. */
static void test_image_sequence(void **state)
{
    (void)state;
    if (!video_built()) skip();
    bool codecs = false;
    ly_image_codecs(&codecs);
    if (!codecs) {
        print_message("skipped: this build writes no PNG\n");
        skip();
    }
    char dir[512], path[600], pattern[600];
    ly_test_scratch_path("seq", dir, sizeof dir);
    mkdir(dir, 0755);
    ly_image im = {0};
    for (int k = 0; k < 5; k++) {
        make_frame(&im, k);
        snprintf(path, sizeof path, "%s/f%03d.png", dir, k);
        assert_int_equal(ly_image_save(path, &im, 95), LY_OK);
    }
    snprintf(pattern, sizeof pattern, "%s/f%%03d.png", dir);
    bool is_video;
    assert_int_equal(ly_video_is_source(pattern, &is_video), LY_OK);
    assert_true(is_video);
    ly_video_reader *r;
    assert_int_equal(ly_video_open(pattern, NULL, &r), LY_OK);
    ly_image got_frame = {0};
    bool got;
    int n = 0;
    while (ly_video_read(r, &got_frame, NULL, &got) == LY_OK && got) {
        make_frame(&im, n++);
        /* PNG is lossless, and the conversion back to RGB exact for RGB24 */
        assert_memory_equal(got_frame.pixels, im.pixels, (size_t)W * H * 3);
    }
    assert_int_equal(n, 5);
    ly_image_free(&got_frame);
    ly_image_free(&im);
    ly_video_close(r);
    for (int k = 0; k < 5; k++) {
        snprintf(path, sizeof path, "%s/f%03d.png", dir, k);
        unlink(path);
    }
}

static void test_writer_refusals(void **state)
{
    (void)state;
    if (!video_built()) skip();
    char path[512];
    ly_test_scratch_path("refused.mp4", path, sizeof path);
    ly_video_writer *w;
    assert_int_equal(ly_video_writer_open(path, 0, H, 25, NULL, &w), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_video_writer_open(path, W, H, 0.0, NULL, &w), LY_E_INVALID_ARGUMENT);
    assert_int_equal(ly_video_writer_open(path, W, H, 25, "no-such-codec", &w), LY_E_UNSUPPORTED);
    assert_non_null(strstr(ly_last_error(), "no-such-codec"));
    char odd[512];
    ly_test_scratch_path("clip.unknown-ext", odd, sizeof odd);
    assert_int_equal(ly_video_writer_open(odd, W, H, 25, NULL, &w), LY_E_UNSUPPORTED);
    assert_int_equal(ly_video_writer_open("/nonexistent-dir/x.mp4", W, H, 25, NULL, &w), LY_E_IO);
    assert_non_null(strstr(ly_last_error(), "/nonexistent-dir/x.mp4"));

    /* a frame of another size; discarding leaves nothing */
    assert_int_equal(ly_video_writer_open(path, W, H, 25, NULL, &w), LY_OK);
    const char *codec;
    assert_int_equal(ly_video_writer_codec(w, &codec), LY_OK);
    assert_string_equal(codec, "mpeg4");
    ly_image small;
    assert_int_equal(ly_image_alloc(&small, W / 2, H), LY_OK);
    memset(small.pixels, 0, (size_t)W / 2 * H * 3);
    assert_int_equal(ly_video_write(w, &small), LY_E_SHAPE);
    ly_image_free(&small);
    ly_video_writer_discard(w);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);
    /* and no temporary file either */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", ly_test_scratch());
    assert_int_not_equal(system(cmd), 0);
}

static void expect_open_fails(const char *source, const ly_video_options *opt, ly_status want,
                              const char *words)
{
    ly_video_reader *r = (ly_video_reader *)&r;
    assert_int_equal(ly_video_open(source, opt, &r), want);
    assert_null(r);
    assert_non_null(strstr(ly_last_error(), words));
}

static void test_bad_sources(void **state)
{
    (void)state;
    if (!video_built()) skip();
    char path[512];
    expect_open_fails(ly_test_scratch_path("absent.mp4", path, sizeof path), NULL, LY_E_NOT_FOUND,
                      "absent.mp4");
    /* a camera that is not there */
    expect_open_fails("97", NULL, LY_E_NOT_FOUND, "/dev/video97");
    /* text named .mp4 */
    ly_test_scratch_path("text.mp4", path, sizeof path);
    FILE *f = fopen(path, "w");
    fputs("this is not a video\n", f);
    fclose(f);
    expect_open_fails(path, NULL, LY_E_FORMAT, "text.mp4");

    /* an MP4 cut in half: its index (at the end) is gone */
    char clip[512], cut[512];
    ly_test_scratch_path("whole.mp4", clip, sizeof clip);
    write_clip(clip, NULL, 25, FRAMES);
    ly_test_scratch_path("cut.mp4", cut, sizeof cut);
    struct stat st;
    assert_int_equal(stat(clip, &st), 0);
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "head -c %lld '%s' > '%s'", (long long)st.st_size / 2, clip, cut);
    assert_int_equal(system(cmd), 0);
    expect_open_fails(cut, NULL, LY_E_FORMAT, "cut.mp4");

    /* an AVI cut in half: the frames before the cut, then the end (OpenCV's
     * reading too), in bounded time */
    char avi[512], cut_avi[512];
    ly_test_scratch_path("whole.avi", avi, sizeof avi);
    write_clip(avi, "mjpeg", 25, FRAMES);
    ly_test_scratch_path("cut.avi", cut_avi, sizeof cut_avi);
    assert_int_equal(stat(avi, &st), 0);
    snprintf(cmd, sizeof cmd, "head -c %lld '%s' > '%s'", (long long)st.st_size / 2, avi, cut_avi);
    assert_int_equal(system(cmd), 0);
    ly_video_reader *r;
    assert_int_equal(ly_video_open(cut_avi, NULL, &r), LY_OK);
    ly_image im = {0};
    bool got;
    int n = 0;
    ly_status s;
    while ((s = ly_video_read(r, &im, NULL, &got)) == LY_OK && got)
        n++;
    assert_true(s == LY_OK || s == LY_E_FORMAT);
    assert_true(n > 0 && n < FRAMES);
    ly_image_free(&im);
    ly_video_close(r);

    /* garbage in the middle of an AVI: packets that do not decode are skipped */
    char bad[512];
    ly_test_scratch_path("corrupt.avi", bad, sizeof bad);
    snprintf(cmd, sizeof cmd,
             "cp '%s' '%s' && printf '\\377\\377\\377\\377garbage%%.0s' $(seq 200) | dd of='%s' "
             "bs=1 seek=%lld conv=notrunc status=none",
             avi, bad, bad, (long long)st.st_size / 2);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(ly_video_open(bad, NULL, &r), LY_OK);
    n = 0;
    while ((s = ly_video_read(r, &im, NULL, &got)) == LY_OK && got)
        n++;
    assert_true(s == LY_OK || s == LY_E_FORMAT);
    assert_true(n > 0 && n <= FRAMES);
    ly_image_free(&im);
    ly_video_close(r);

    /* a 16K frame size (a YUV4MPEG2 header): refused before a pixel is decoded */
    ly_test_scratch_path("huge.y4m", path, sizeof path);
    f = fopen(path, "w");
    fputs("YUV4MPEG2 W15360 H8640 F30:1 Ip A1:1 C420jpeg\nFRAME\n", f);
    for (int i = 0; i < 4096; i++)
        fputc(16, f);
    fclose(f);
    expect_open_fails(path, NULL, LY_E_UNSUPPORTED, "15360x8640");

    /* a bad vid_stride and timeout */
    ly_video_options opt;
    ly_video_options_init(&opt);
    opt.vid_stride = 0;
    expect_open_fails(clip, &opt, LY_E_INVALID_ARGUMENT, "vid_stride");
}

/* A listening socket on 127.0.0.1 at a free port, and its http:// URL. */
static int listen_on_loopback(char *url, size_t size)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(fd, 4), 0);
    socklen_t len = sizeof addr;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    snprintf(url, size, "http://127.0.0.1:%d/live.mp4", ntohs(addr.sin_port));
    return fd;
}

/* A server that accepts the connection and never answers: open gives up
 * after the timeout, naming the stream. */
static void test_stalled_stream(void **state)
{
    (void)state;
    if (!video_built()) skip();
    char url[128];
    int fd =
        listen_on_loopback(url, sizeof url); /* the kernel completes the handshake; nobody reads */
    ly_video_options opt;
    ly_video_options_init(&opt);
    opt.timeout_ms = 300;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ly_video_reader *r;
    assert_int_equal(ly_video_open(url, &opt, &r), LY_E_IO);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_non_null(strstr(ly_last_error(), url));
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    assert_true(seconds < 10.0); /* bounded, not a hang (not a timing assertion) */
    close(fd);
}

/* ---- The command on video ------------------------------------------------ */

/* The command's whole stdout; its exit code in *code. */
static char *run_cli(const char *args, int *code)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "LIBREYOLO_THREADS=1 '%s' %s 2>/dev/null", LY_CLI_PATH, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    size_t got;
    while ((got = fread(out + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (n + 1 == cap) {
            cap *= 2;
            out = realloc(out, cap);
            assert_non_null(out);
        }
    }
    out[n] = '\0';
    int status = pclose(p);
    *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
}

/* The "detections" array of the JSON line at `line`, and where the line ends. */
static char *detections_of(const char *line, const char **next)
{
    const char *end = strchr(line, '\n');
    assert_non_null(end);
    *next = end + 1;
    const char *d = strstr(line, "\"detections\": [");
    assert_true(d && d < end);
    const char *close = strstr(d, "]}], ");
    const char *empty = strstr(d, "[]");
    const char *stop = empty == d + 14 ? empty + 2 : close ? close + 3 : NULL;
    assert_true(stop && stop < end);
    return strndup(d, (size_t)(stop - d));
}

static bool have_yolo9(void)
{
    struct stat st;
    if (stat(YOLO9, &st) == 0) return true;
    print_message("skipped: %s is absent (the shared fixture is not here)\n", YOLO9);
    return false;
}

/* The JSON line at `line` is frame k's of the 25 fps clip. */
static void expect_frame_line(const char *line, int k)
{
    char want[64];
    snprintf(want, sizeof want, "\"frame\": %d, \"timestamp\": %.6f", k, k / 25.0);
    const char *eol = strchr(line, '\n');
    assert_non_null(eol);
    assert_true(strstr(line, want) && strstr(line, want) < eol);
}

/* predict on the clip: one JSON line per frame with its number and time, the
 * detections those of predict on the same frames written out as PNG files;
 * vid_stride; the annotated video saved as the clip's container and codec. */
static void test_cli_predict_video(void **state)
{
    (void)state;
    if (!video_built() || !have_yolo9()) skip();
    char clip[512], frames[512], path[600], args[3000];
    ly_test_scratch_path("cli.avi", clip, sizeof clip);
    write_clip(clip, "mjpeg", 25, FRAMES);
    ly_test_scratch_path("cli_frames", frames, sizeof frames);
    mkdir(frames, 0755);
    ly_video_reader *r;
    assert_int_equal(ly_video_open(clip, NULL, &r), LY_OK);
    ly_image im = {0};
    bool got;
    int n = 0;
    while (ly_video_read(r, &im, NULL, &got) == LY_OK && got) {
        snprintf(path, sizeof path, "%s/f%02d.png", frames, n++);
        assert_int_equal(ly_image_save(path, &im, 95), LY_OK);
    }
    ly_image_free(&im);
    ly_video_close(r);
    assert_int_equal(n, FRAMES);

    int code;
    snprintf(args, sizeof args, "predict model='%s' source='%s' --jsonl", YOLO9, clip);
    char *video = run_cli(args, &code);
    assert_int_equal(code, 0);
    snprintf(args, sizeof args, "predict model='%s' source='%s' --jsonl", YOLO9, frames);
    char *images = run_cli(args, &code);
    assert_int_equal(code, 0);
    const char *v = video, *im_line = images;
    for (int k = 0; k < FRAMES; k++) {
        expect_frame_line(v, k);
        char *a = detections_of(v, &v), *b = detections_of(im_line, &im_line);
        assert_string_equal(a, b);
        free(a);
        free(b);
    }
    assert_int_equal(*v, '\0');
    free(video);
    free(images);

    /* batch=5: frames in fives (the last call two) through one network call, each line in
     * order with its number and time, as many detections as one by one (the
     * scores may move in the last bits: test_batch holds them to 1e-5) */
    snprintf(args, sizeof args, "predict model='%s' source='%s' --jsonl conf=0.05", YOLO9, clip);
    char *single = run_cli(args, &code);
    assert_int_equal(code, 0);
    snprintf(args, sizeof args, "predict model='%s' source='%s' --jsonl conf=0.05 batch=5", YOLO9,
             clip);
    char *batched = run_cli(args, &code);
    assert_int_equal(code, 0);
    const char *s1 = single, *s4 = batched;
    for (int k = 0; k < FRAMES; k++) {
        expect_frame_line(s4, k);
        char *a = detections_of(s4, &s4), *b = detections_of(s1, &s1);
        int na = 0, nb = 0;
        for (const char *p = a; (p = strstr(p, "class_id")); p++)
            na++;
        for (const char *p = b; (p = strstr(p, "class_id")); p++)
            nb++;
        assert_int_equal(na, nb);
        free(a);
        free(b);
    }
    assert_int_equal(*s4, '\0');
    free(single);
    free(batched);

    /* vid_stride=5: frames 0, 5, 10; LibreYOLO's line for people */
    snprintf(args, sizeof args, "predict model='%s' source='%s' vid_stride=5", YOLO9, clip);
    char *human = run_cli(args, &code);
    assert_int_equal(code, 0);
    assert_non_null(strstr(human, "image 1/3 cli.avi: 320x240 "));
    assert_non_null(strstr(human, "image 3/3 cli.avi: 320x240 "));
    assert_null(strstr(human, "image 4/"));
    free(human);

    /* save: <project>/predict/cli.avi, MJPEG as the source, every frame */
    char project[512];
    ly_test_scratch_path("cli_runs", project, sizeof project);
    snprintf(args, sizeof args, "predict model='%s' source='%s' save project='%s'", YOLO9, clip,
             project);
    char *saved = run_cli(args, &code);
    assert_int_equal(code, 0);
    snprintf(path, sizeof path, "Results saved to %s/predict", project);
    assert_non_null(strstr(saved, path));
    free(saved);
    snprintf(path, sizeof path, "%s/predict/cli.avi", project);
    assert_int_equal(ly_video_open(path, NULL, &r), LY_OK);
    ly_video_info info;
    ly_video_get_info(r, &info);
    assert_string_equal(info.codec, "mjpeg");
    assert_int_equal(info.width, W);
    assert_int_equal(info.height, H);
    n = 0;
    while (ly_video_read(r, &im, NULL, &got) == LY_OK && got)
        n++;
    assert_int_equal(n, FRAMES);
    ly_image_free(&im);
    ly_video_close(r);

    /* a video that is not there: LibreYOLO's words and exit code */
    snprintf(args, sizeof args, "predict model='%s' source='%s/absent.mp4'", YOLO9,
             ly_test_scratch());
    free(run_cli(args, &code));
    assert_int_equal(code, 3);
}

/* Ctrl-C during predict ... save: the command stops, says so, exits 130 and
 * leaves a video that plays, with the frames done. */
static void test_cli_interrupt_keeps_video(void **state)
{
    (void)state;
    if (!video_built() || !have_yolo9()) skip();
    char clip[512], project[512], model[600], source[600], proj_arg[600];
    ly_test_scratch_path("long.avi", clip, sizeof clip);
    write_clip(clip, "mjpeg", 25, 400);
    ly_test_scratch_path("int_runs", project, sizeof project);
    snprintf(model, sizeof model, "model=%s", YOLO9);
    snprintf(source, sizeof source, "source=%s", clip);
    snprintf(proj_arg, sizeof proj_arg, "project=%s", project);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        setenv("LIBREYOLO_THREADS", "1", 1);
        execl(LY_CLI_PATH, LY_CLI_PATH, "predict", model, source, "save", proj_arg, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *out = fdopen(fds[0], "r");
    char line[4096];
    int lines = 0;
    while (lines < 3 && fgets(line, sizeof line, out))
        lines++;
    assert_int_equal(lines, 3);
    kill(pid, SIGINT);
    while (fgets(line, sizeof line, out))
        if (strncmp(line, "image ", 6) == 0) lines++;
    fclose(out);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 130);
    char path[700];
    snprintf(path, sizeof path, "%s/predict/long.avi", project);
    ly_video_reader *r;
    assert_int_equal(ly_video_open(path, NULL, &r), LY_OK);
    ly_image im = {0};
    bool got;
    int n = 0;
    while (ly_video_read(r, &im, NULL, &got) == LY_OK && got)
        n++;
    ly_image_free(&im);
    ly_video_close(r);
    assert_int_equal(n, lines);
    assert_true(n < 400);
}

/* A server that accepts and hangs up at once: open fails naming the stream. */
static void *accept_and_close(void *arg)
{
    int fd = *(int *)arg;
    for (int k = 0; k < 8; k++) {
        int c = accept(fd, NULL, NULL);
        if (c < 0) break;
        close(c);
    }
    return NULL;
}

static void test_disconnected_stream(void **state)
{
    (void)state;
    if (!video_built()) skip();
    char url[128];
    int fd = listen_on_loopback(url, sizeof url);
    pthread_t server;
    assert_int_equal(pthread_create(&server, NULL, accept_and_close, &fd), 0);
    ly_video_options opt;
    ly_video_options_init(&opt);
    opt.timeout_ms = 2000;
    ly_video_reader *r;
    ly_status st = ly_video_open(url, &opt, &r);
    assert_true(st == LY_E_IO || st == LY_E_FORMAT);
    assert_non_null(strstr(ly_last_error(), url));
    shutdown(fd, SHUT_RDWR);
    close(fd);
    pthread_join(server, NULL);
}

static void test_is_source(void **state)
{
    (void)state;
    const char *yes[] = {"clip.mp4",
                         "a/b/CLIP.AVI",
                         "x.gif",
                         "x.webm",
                         "0",
                         "2",
                         "/dev/video1",
                         "rtsp://cam/stream",
                         "https://host/v.mp4?x=1",
                         "frames/%04d.png",
                         "http://host/live.m3u8"};
    const char *no[] = {"photo.jpg", "https://host/a.jpg", "folder", "", "12345", "a.txt"};
    bool v;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        assert_int_equal(ly_video_is_source(yes[i], &v), LY_OK);
        if (!v) print_message("%s\n", yes[i]);
        assert_true(v);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        assert_int_equal(ly_video_is_source(no[i], &v), LY_OK);
        if (v) print_message("%s\n", no[i]);
        assert_false(v);
    }
}

static void test_without_ffmpeg(void **state)
{
    (void)state;
    bool on = true;
    assert_int_equal(ly_video_available(&on), LY_OK);
    if (on) return; /* the refusal below is a build's without FFmpeg */
    ly_video_reader *r;
    assert_int_equal(ly_video_open("clip.mp4", NULL, &r), LY_E_UNSUPPORTED);
    assert_non_null(strstr(ly_last_error(), "not supported in this build"));
    assert_non_null(strstr(ly_last_error(), "clip.mp4"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_is_source),         cmocka_unit_test(test_without_ffmpeg),
        cmocka_unit_test(test_mjpeg_avi),         cmocka_unit_test(test_h264_mp4),
        cmocka_unit_test(test_mp4v_default),      cmocka_unit_test(test_writer_refusals),
        cmocka_unit_test(test_image_sequence),    cmocka_unit_test(test_bad_sources),
        cmocka_unit_test(test_stalled_stream),    cmocka_unit_test(test_disconnected_stream),
        cmocka_unit_test(test_cli_predict_video), cmocka_unit_test(test_cli_interrupt_keeps_video),
    };
    return cmocka_run_group_tests(tests, ly_test_scratch_setup, ly_test_scratch_teardown);
}
