/* SPDX-License-Identifier: MIT */
/*
 * Video readers and writers (libreyolo/video.h) on FFmpeg's libraries.
 *
 * Frames are converted as OpenCV's FFmpeg capture converts them (its
 * retrieveFrame): a libswscale context from the decoder's pixel format at the
 * coded size to BGR24 with SWS_BICUBIC, into a buffer aligned to 32, then B and
 * R swapped, which is cvtColor(BGR2RGB). Converting straight to RGB24 would
 * take other code paths in libswscale and may round differently.
 *
 * Every wait that FFmpeg does (opening, reading) is bounded by an interrupt
 * callback with a deadline, so a stream that stalls fails after the timeout
 * rather than hanging, and ly_video_cancel ends a wait at once.
 */
#include "io/video_backend.h"

#include <libavcodec/avcodec.h>
#include <libavdevice/avdevice.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The library's services, through the host table (video_backend.h). */
static const ly_video_host *host;
#define ly_set_error host->set_error
#define ly_log host->log
#define ly_image_alloc host->image_alloc
#define ly_image_free host->image_free
#define ly_image_pixel_limit host->pixel_limit
#define ly_atomic_file_begin host->atomic_begin
#define ly_atomic_file_commit host->atomic_commit
#define ly_atomic_file_abort host->atomic_abort
#define ly_video_frame_pattern host->frame_pattern
#define ly_video_camera_index host->camera_index

/* OpenCV gives up on a stream after this many packets in a row without a
 * picture (its max_number_of_attempts): a corrupt file ends, never spins. */
#define MAX_PACKETS_WITHOUT_FRAME 4096

struct ly_video_reader {
    char *source; /* as the caller named it, for messages */
    AVFormatContext *format;
    AVCodecContext *decoder;
    AVPacket *packet;
    AVFrame *picture, *bgr;
    struct SwsContext *sws;
    int stream;
    int stride;
    int timeout_ms;
    uint64_t max_pixels;
    bool live, draining, ended;
    double fps;
    int64_t frame_count;
    int64_t decoded;          /* frames decoded so far: the next frame's index */
    int64_t undecodable;      /* packets skipped because they did not decode */
    struct timespec deadline; /* of the current wait */
    atomic_bool cancelled;
};

struct ly_video_writer {
    char *path;
    ly_atomic_file file;
    bool file_open;
    AVFormatContext *format;
    AVCodecContext *encoder;
    AVStream *st;
    AVFrame *picture;
    AVPacket *packet;
    struct SwsContext *sws;
    int width, height;
    int64_t next_pts;
};

/* ---- FFmpeg's log --------------------------------------------------------- */

/* FFmpeg prints to stderr by default (x264's statistics, a demuxer's notes);
 * this library reports through its own errors and log instead: FFmpeg's lines
 * appear at LIBREYOLO_LOG=debug. */
static void forward_log(void *avcl, int level, const char *fmt, va_list args)
{
    (void)avcl;
    if (level > AV_LOG_WARNING) return;
    char line[1024];
    vsnprintf(line, sizeof line, fmt, args);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    if (n) ly_log(LY_LOG_DEBUG, "ffmpeg: %s", line);
}

static void init_once(void)
{
    av_log_set_callback(forward_log);
    avdevice_register_all();
}

static void ffmpeg_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_once);
}

static const char *av_error_text(int code, char *buf, size_t size)
{
    if (av_strerror(code, buf, size) < 0) snprintf(buf, size, "error %d", code);
    return buf;
}

/* ---- Reader --------------------------------------------------------------- */

static void arm_deadline(ly_video_reader *r)
{
    clock_gettime(CLOCK_MONOTONIC, &r->deadline);
    r->deadline.tv_sec += r->timeout_ms / 1000;
    r->deadline.tv_nsec += (long)(r->timeout_ms % 1000) * 1000000L;
    if (r->deadline.tv_nsec >= 1000000000L)
        r->deadline.tv_sec++, r->deadline.tv_nsec -= 1000000000L;
}

static bool past_deadline(const ly_video_reader *r)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > r->deadline.tv_sec ||
           (now.tv_sec == r->deadline.tv_sec && now.tv_nsec > r->deadline.tv_nsec);
}

static int interrupt_cb(void *opaque)
{
    ly_video_reader *r = opaque;
    return atomic_load(&r->cancelled) || past_deadline(r);
}

/* Why a wait ended early: cancelled, or the timeout. */
static ly_status wait_failed(const ly_video_reader *r, const char *doing)
{
    if (atomic_load(&r->cancelled))
        return ly_set_error(LY_E_IO, "video %s: %s: cancelled", r->source, doing);
    return ly_set_error(LY_E_IO, "video %s: %s: nothing received for %d ms (the timeout)",
                        r->source, doing, r->timeout_ms);
}

static bool is_network(const char *s)
{
    static const char *const schemes[] = {"http://", "https://", "rtsp://", "rtsps://",
                                          "rtmp://", "udp://",   "tcp://",  "srt://"};
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (strncasecmp(s, schemes[i], strlen(schemes[i])) == 0) return true;
    return false;
}

static ly_status ff_close(ly_video_reader *r)
{
    if (!r) return LY_OK;
    sws_freeContext(r->sws);
    av_frame_free(&r->bgr);
    av_frame_free(&r->picture);
    av_packet_free(&r->packet);
    avcodec_free_context(&r->decoder);
    avformat_close_input(&r->format);
    free(r->source);
    free(r);
    return LY_OK;
}

static ly_status open_failed(ly_video_reader *r, ly_status st)
{
    ff_close(r);
    return st;
}

static ly_status check_size(const ly_video_reader *r, int width, int height)
{
    if (width <= 0 || height <= 0)
        return ly_set_error(LY_E_FORMAT, "video %s: the stream states no frame size (%dx%d)",
                            r->source, width, height);
    uint64_t pixels = (uint64_t)width * (uint64_t)height;
    if (r->max_pixels && pixels > r->max_pixels)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "video %s: frames of %dx%d = %llu pixels are more than the limit of "
                            "%llu (LIBREYOLO_MAX_IMAGE_PIXELS, PIL's by default): refused before "
                            "decoding; set LIBREYOLO_MAX_IMAGE_PIXELS to a larger count, or 0 for "
                            "no limit",
                            r->source, width, height, (unsigned long long)pixels,
                            (unsigned long long)r->max_pixels);
    return LY_OK;
}

static ly_status ff_open(const char *source, const ly_video_options *options, ly_video_reader **out)
{
    if (!source || !out) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_video_open: NULL argument");
    *out = NULL;
    ly_video_options opt = {.vid_stride = 1, .timeout_ms = 10000}; /* ly_video_options_init's */
    if (options) opt = *options;
    if (opt.vid_stride < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "video %s: vid_stride %d: expected >= 1", source,
                            opt.vid_stride);
    if (opt.timeout_ms < 1)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "video %s: timeout %d ms: expected >= 1", source,
                            opt.timeout_ms);
    if (!opt.max_pixels) {
        ly_status st = ly_image_pixel_limit(&opt.max_pixels);
        if (st != LY_OK) return st;
    }
    ffmpeg_init();

    /* What FFmpeg opens: a camera's device with the V4L2 demuxer, else the name. */
    char device[64];
    const char *url = source;
    const AVInputFormat *input_format = NULL;
    bool camera = ly_video_camera_index(source) || strncmp(source, "/dev/video", 10) == 0;
    if (camera) {
        if (ly_video_camera_index(source)) {
            snprintf(device, sizeof device, "/dev/video%s", source);
            url = device;
        }
        if (access(url, F_OK) != 0)
            return ly_set_error(LY_E_NOT_FOUND,
                                "camera %s: %s does not exist (no such V4L2 device)", source, url);
        input_format = av_find_input_format("video4linux2");
        if (!input_format)
            return ly_set_error(LY_E_UNSUPPORTED,
                                "camera %s: this build's libavdevice has no V4L2 input", source);
    } else if (!is_network(source) && !ly_video_frame_pattern(source)) {
        struct stat sb;
        if (stat(source, &sb) != 0)
            return ly_set_error(LY_E_NOT_FOUND, "video %s: no such file", source);
        if (S_ISDIR(sb.st_mode))
            return ly_set_error(LY_E_FORMAT, "video %s: is a folder, not a video", source);
    }

    ly_video_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->source = strdup(source))) {
        free(r);
        return ly_set_error(LY_E_NO_MEMORY, "video %s: out of memory", source);
    }
    r->stride = opt.vid_stride;
    r->timeout_ms = opt.timeout_ms;
    r->max_pixels = opt.max_pixels;
    r->live = camera || (is_network(source) && strncasecmp(source, "http", 4) != 0);
    atomic_init(&r->cancelled, false);

    char err[256];
    if (!(r->format = avformat_alloc_context()))
        return open_failed(r, ly_set_error(LY_E_NO_MEMORY, "video %s: out of memory", source));
    r->format->interrupt_callback = (AVIOInterruptCB){interrupt_cb, r};
    AVDictionary *dict = NULL;
    if (is_network(source)) {
        char us[32];
        snprintf(us, sizeof us, "%lld", (long long)opt.timeout_ms * 1000);
        av_dict_set(&dict, "rw_timeout", us, 0);
        if (strncasecmp(source, "rtsp", 4) == 0) av_dict_set(&dict, "timeout", us, 0);
    }
    arm_deadline(r);
    int ret = avformat_open_input(&r->format, url, input_format, &dict);
    av_dict_free(&dict);
    if (ret < 0) {
        /* avformat_open_input frees the context on failure */
        r->format = NULL;
        if (ret == AVERROR_EXIT) return open_failed(r, wait_failed(r, "opening"));
        ly_status st = is_network(source) ? LY_E_IO : LY_E_FORMAT;
        if (ret == AVERROR(ENOENT)) st = LY_E_NOT_FOUND;
        return open_failed(r, ly_set_error(st, "video %s: cannot open it: %s", source,
                                           av_error_text(ret, err, sizeof err)));
    }
    /* A size the header states is checked before any picture is decoded. */
    for (unsigned i = 0; i < r->format->nb_streams; i++) {
        const AVCodecParameters *par = r->format->streams[i]->codecpar;
        if (par->codec_type != AVMEDIA_TYPE_VIDEO || par->width <= 0 || par->height <= 0) continue;
        ly_status size_ok = check_size(r, par->width, par->height);
        if (size_ok != LY_OK) return open_failed(r, size_ok);
    }
    arm_deadline(r);
    if ((ret = avformat_find_stream_info(r->format, NULL)) < 0) {
        if (ret == AVERROR_EXIT) return open_failed(r, wait_failed(r, "reading its streams"));
        return open_failed(r, ly_set_error(LY_E_FORMAT, "video %s: cannot read its streams: %s",
                                           source, av_error_text(ret, err, sizeof err)));
    }
    const AVCodec *codec = NULL;
    r->stream = av_find_best_stream(r->format, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (r->stream < 0)
        return open_failed(
            r, ly_set_error(LY_E_FORMAT, "video %s: %s", source,
                            r->stream == AVERROR_DECODER_NOT_FOUND
                                ? "no decoder for its video stream in this build's libavcodec"
                                : "holds no video stream"));
    AVStream *st = r->format->streams[r->stream];
    ly_status size_ok = check_size(r, st->codecpar->width, st->codecpar->height);
    if (size_ok != LY_OK) return open_failed(r, size_ok);
    if (!(r->decoder = avcodec_alloc_context3(codec)) ||
        avcodec_parameters_to_context(r->decoder, st->codecpar) < 0)
        return open_failed(r, ly_set_error(LY_E_NO_MEMORY, "video %s: out of memory", source));
    r->decoder->pkt_timebase = st->time_base;
    /* One decoding thread: the same pictures as frame threads give, and the
     * CPUs stay with the model. */
    r->decoder->thread_count = 1;
    if ((ret = avcodec_open2(r->decoder, codec, NULL)) < 0)
        return open_failed(r,
                           ly_set_error(LY_E_FORMAT, "video %s: cannot open its %s decoder: %s",
                                        source, codec->name, av_error_text(ret, err, sizeof err)));
    if (!(r->packet = av_packet_alloc()) || !(r->picture = av_frame_alloc()) ||
        !(r->bgr = av_frame_alloc()))
        return open_failed(r, ly_set_error(LY_E_NO_MEMORY, "video %s: out of memory", source));

    AVRational rate = st->avg_frame_rate.num > 0 ? st->avg_frame_rate : st->r_frame_rate;
    r->fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0.0;
    if (!(r->fps > 0) || !isfinite(r->fps)) r->fps = 30.0; /* LibreYOLO's default */
    r->frame_count = -1;
    if (!r->live) {
        if (st->nb_frames > 0) {
            r->frame_count = st->nb_frames;
        } else {
            double seconds = r->format->duration > 0 ? (double)r->format->duration / AV_TIME_BASE
                             : st->duration > 0      ? (double)st->duration * av_q2d(st->time_base)
                                                     : 0.0;
            if (seconds > 0) r->frame_count = (int64_t)floor(seconds * r->fps + 0.5);
        }
    }
    *out = r;
    return LY_OK;
}

static ly_status ff_get_info(const ly_video_reader *r, ly_video_info *info)
{
    if (!r || !info) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_video_get_info: NULL argument");
    *info = (ly_video_info){.width = r->decoder->width,
                            .height = r->decoder->height,
                            .fps = r->fps,
                            .frame_count = r->frame_count,
                            .live = r->live,
                            .codec = r->decoder->codec->name,
                            .container = r->format->iformat->name};
    return LY_OK;
}

static ly_status ff_cancel(ly_video_reader *r)
{
    if (!r) return LY_E_INVALID_ARGUMENT; /* async-signal-safe: no message */
    atomic_store(&r->cancelled, true);
    return LY_OK;
}

/* The decoded picture as OpenCV's BGR24, then RGB into `frame`. */
static ly_status convert(ly_video_reader *r, ly_image *frame)
{
    AVFrame *p = r->picture;
    ly_status size_ok = check_size(r, p->width, p->height);
    if (size_ok != LY_OK) return size_ok;
    int w = r->decoder->coded_width > 0 ? r->decoder->coded_width : p->width;
    int h = r->decoder->coded_height > 0 ? r->decoder->coded_height : p->height;
    r->sws = sws_getCachedContext(r->sws, w, h, (enum AVPixelFormat)p->format, w, h,
                                  AV_PIX_FMT_BGR24, SWS_BICUBIC, NULL, NULL, NULL);
    if (!r->sws)
        return ly_set_error(LY_E_UNSUPPORTED, "video %s: cannot convert %s pictures to RGB",
                            r->source, av_get_pix_fmt_name((enum AVPixelFormat)p->format));
    if (r->bgr->width != w || r->bgr->height != h || !r->bgr->data[0]) {
        av_frame_unref(r->bgr);
        r->bgr->format = AV_PIX_FMT_BGR24;
        r->bgr->width = w;
        r->bgr->height = h;
        if (av_frame_get_buffer(r->bgr, 32) < 0)
            return ly_set_error(LY_E_NO_MEMORY, "video %s: out of memory for a %dx%d frame",
                                r->source, w, h);
    }
    sws_scale(r->sws, (const uint8_t *const *)p->data, p->linesize, 0, p->height, r->bgr->data,
              r->bgr->linesize);
    int out_w = p->width < w ? p->width : w, out_h = p->height < h ? p->height : h;
    if (!frame->pixels || frame->width != out_w || frame->height != out_h) {
        ly_image_free(frame);
        ly_status st = ly_image_alloc(frame, out_w, out_h);
        if (st != LY_OK) return st;
    }
    for (int y = 0; y < out_h; y++) {
        const uint8_t *src = r->bgr->data[0] + (size_t)y * (size_t)r->bgr->linesize[0];
        uint8_t *dst = frame->pixels + (size_t)y * (size_t)out_w * 3;
        for (int x = 0; x < out_w; x++) {
            dst[3 * x] = src[3 * x + 2];
            dst[3 * x + 1] = src[3 * x + 1];
            dst[3 * x + 2] = src[3 * x];
        }
    }
    return LY_OK;
}

static ly_status ff_read(ly_video_reader *r, ly_image *frame, ly_video_frame *at, bool *got)
{
    if (!r || !frame || !got)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_video_read: NULL argument");
    *got = false;
    char err[256];
    int64_t without_frame = 0;
    while (!r->ended) {
        int ret = avcodec_receive_frame(r->decoder, r->picture);
        if (ret == 0) {
            int64_t index = r->decoded++;
            without_frame = 0;
            if (index % r->stride != 0) {
                av_frame_unref(r->picture);
                continue;
            }
            ly_status st = convert(r, frame);
            if (st == LY_OK && at) {
                int64_t ts = r->picture->best_effort_timestamp;
                AVStream *s = r->format->streams[r->stream];
                int64_t start = s->start_time != AV_NOPTS_VALUE ? s->start_time : 0;
                at->index = index;
                at->time_s = ts != AV_NOPTS_VALUE ? (double)(ts - start) * av_q2d(s->time_base)
                                                  : (double)index / r->fps;
            }
            av_frame_unref(r->picture);
            if (st == LY_OK) *got = true;
            return st;
        }
        if (ret == AVERROR_EOF) {
            r->ended = true;
            break;
        }
        if (ret != AVERROR(EAGAIN))
            return ly_set_error(LY_E_FORMAT, "video %s: frame %lld does not decode: %s", r->source,
                                (long long)r->decoded, av_error_text(ret, err, sizeof err));
        if (r->draining) { /* a decoder that wants more after the end: done */
            r->ended = true;
            break;
        }
        if (atomic_load(&r->cancelled)) return wait_failed(r, "reading");
        arm_deadline(r);
        ret = av_read_frame(r->format, r->packet);
        if (ret == AVERROR_EOF ||
            (ret < 0 && r->format->pb && avio_feof(r->format->pb) && ret != AVERROR_EXIT)) {
            r->draining = true;
            avcodec_send_packet(r->decoder, NULL); /* flush the frames it holds */
            continue;
        }
        if (ret == AVERROR_EXIT) return wait_failed(r, "reading");
        if (ret < 0)
            return ly_set_error(
                r->live ? LY_E_IO : LY_E_FORMAT, "video %s: reading after frame %lld failed: %s%s",
                r->source, (long long)r->decoded, av_error_text(ret, err, sizeof err),
                r->live ? " (the stream ended or disconnected)" : " (a truncated or corrupt file)");
        if (r->packet->stream_index != r->stream) {
            av_packet_unref(r->packet);
            continue;
        }
        ret = avcodec_send_packet(r->decoder, r->packet);
        av_packet_unref(r->packet);
        if (ret < 0 && ret != AVERROR(EAGAIN)) {
            r->undecodable++;
            ly_log(LY_LOG_WARNING,
                   "video %s: a packet after frame %lld does not decode (%s): skipped", r->source,
                   (long long)r->decoded, av_error_text(ret, err, sizeof err));
        }
        if (++without_frame > MAX_PACKETS_WITHOUT_FRAME)
            return ly_set_error(LY_E_FORMAT,
                                "video %s: %d packets in a row after frame %lld gave no picture: "
                                "corrupt, or not a video this build decodes",
                                r->source, MAX_PACKETS_WITHOUT_FRAME, (long long)r->decoded);
    }
    return LY_OK;
}

/* ---- Writer --------------------------------------------------------------- */

static void writer_free(ly_video_writer *w)
{
    sws_freeContext(w->sws);
    av_frame_free(&w->picture);
    av_packet_free(&w->packet);
    avcodec_free_context(&w->encoder);
    if (w->format) {
        if (w->format->pb) avio_closep(&w->format->pb);
        avformat_free_context(w->format);
    }
    if (w->file_open) ly_atomic_file_abort(&w->file);
    free(w->path);
    free(w);
}

static ly_status ff_writer_discard(ly_video_writer *w)
{
    if (w) writer_free(w);
    return LY_OK;
}

static ly_status writer_failed(ly_video_writer *w, ly_status st)
{
    writer_free(w);
    return st;
}

static const AVCodec *find_encoder(const char *name)
{
    const AVCodec *c = avcodec_find_encoder_by_name(name);
    if (c) return c;
    const AVCodecDescriptor *d = avcodec_descriptor_get_by_name(name);
    return d ? avcodec_find_encoder(d->id) : NULL;
}

/* Whether `format` can hold `id` (1: yes; a negative answer: it keeps no list). */
static bool container_takes(const AVOutputFormat *format, enum AVCodecID id)
{
    return avformat_query_codec(format, id, FF_COMPLIANCE_NORMAL) != 0;
}

static ly_status ff_writer_open(const char *path, int width, int height, double fps,
                                const char *codec_name, ly_video_writer **out)
{
    if (!path || !out)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_video_writer_open: NULL argument");
    *out = NULL;
    if (width <= 0 || height <= 0 || width > 65535 || height > 65535)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "video %s: frame size %dx%d: expected 1..65535",
                            path, width, height);
    if (!(fps > 0) || !isfinite(fps) || fps > 1000)
        return ly_set_error(LY_E_INVALID_ARGUMENT,
                            "video %s: %g frames per second: expected a "
                            "rate in (0, 1000]",
                            path, fps);
    ffmpeg_init();
    const AVOutputFormat *format = av_guess_format(NULL, path, NULL);
    if (!format || format->video_codec == AV_CODEC_ID_NONE)
        return ly_set_error(LY_E_UNSUPPORTED,
                            "video %s: no container for this extension in this build "
                            "(.mp4, .avi, .mkv and .mov are)",
                            path);
    const AVCodec *codec = NULL;
    if (codec_name) {
        codec = find_encoder(codec_name);
        if (!codec || codec->type != AVMEDIA_TYPE_VIDEO)
            return ly_set_error(LY_E_UNSUPPORTED, "video %s: no %s video encoder in this build",
                                path, codec_name);
    } else {
        codec = container_takes(format, AV_CODEC_ID_MPEG4) ? avcodec_find_encoder(AV_CODEC_ID_MPEG4)
                                                           : NULL;
        if (!codec) codec = avcodec_find_encoder(format->video_codec);
        if (!codec)
            return ly_set_error(LY_E_UNSUPPORTED, "video %s: no encoder for the %s container", path,
                                format->name);
    }
    if (!container_takes(format, codec->id))
        return ly_set_error(LY_E_UNSUPPORTED, "video %s: the %s container cannot hold %s video",
                            path, format->name, codec->name);

    ly_video_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return ly_set_error(LY_E_NO_MEMORY, "video %s: out of memory", path);
    }
    w->width = width, w->height = height;
    ly_status st = ly_atomic_file_begin(&w->file, w->path, w->path);
    if (st != LY_OK) return writer_failed(w, st);
    w->file_open = true;
    char err[256];
    int ret = avformat_alloc_output_context2(&w->format, format, NULL, w->file.tmp);
    if (ret < 0 || !(w->st = avformat_new_stream(w->format, NULL)) ||
        !(w->encoder = avcodec_alloc_context3(codec)) || !(w->picture = av_frame_alloc()) ||
        !(w->packet = av_packet_alloc()))
        return writer_failed(w, ly_set_error(LY_E_NO_MEMORY, "video %s: out of memory", path));
    AVRational rate = av_d2q(fps, 65535);
    AVCodecContext *e = w->encoder;
    e->width = width;
    e->height = height;
    e->time_base = av_inv_q(rate);
    e->framerate = rate;
    e->pix_fmt = codec->pix_fmts ? codec->pix_fmts[0] : AV_PIX_FMT_YUV420P;
    e->thread_count = 1; /* the same file from every run */
    e->gop_size = 12;
    if (codec->id == AV_CODEC_ID_H264) {
        av_opt_set(e->priv_data, "preset", "veryfast", 0);
        av_opt_set(e->priv_data, "crf", "20", 0);
    } else {
        /* fixed quality (qscale 3) rather than libavcodec's 200 kbit/s default */
        e->flags |= AV_CODEC_FLAG_QSCALE;
        e->global_quality = FF_QP2LAMBDA * 3;
    }
    if (format->flags & AVFMT_GLOBALHEADER) e->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    if ((ret = avcodec_open2(e, codec, NULL)) < 0)
        return writer_failed(w, ly_set_error(LY_E_UNSUPPORTED,
                                             "video %s: cannot open the %s encoder: %s", path,
                                             codec->name, av_error_text(ret, err, sizeof err)));
    if (avcodec_parameters_from_context(w->st->codecpar, e) < 0)
        return writer_failed(w, ly_set_error(LY_E_NO_MEMORY, "video %s: out of memory", path));
    w->st->time_base = e->time_base;
    w->st->avg_frame_rate = rate;
    if ((ret = avio_open(&w->format->pb, w->file.tmp, AVIO_FLAG_WRITE)) < 0)
        return writer_failed(w, ly_set_error(LY_E_IO, "video %s: cannot write %s: %s", path,
                                             w->file.tmp, av_error_text(ret, err, sizeof err)));
    if ((ret = avformat_write_header(w->format, NULL)) < 0)
        return writer_failed(w, ly_set_error(LY_E_IO, "video %s: cannot write the header: %s", path,
                                             av_error_text(ret, err, sizeof err)));
    w->picture->format = e->pix_fmt;
    w->picture->width = width;
    w->picture->height = height;
    if (av_frame_get_buffer(w->picture, 32) < 0)
        return writer_failed(w, ly_set_error(LY_E_NO_MEMORY, "video %s: out of memory", path));
    w->sws = sws_getContext(width, height, AV_PIX_FMT_RGB24, width, height, e->pix_fmt, SWS_BICUBIC,
                            NULL, NULL, NULL);
    if (!w->sws)
        return writer_failed(w, ly_set_error(LY_E_UNSUPPORTED, "video %s: cannot convert RGB to %s",
                                             path, av_get_pix_fmt_name(e->pix_fmt)));
    *out = w;
    return LY_OK;
}

static ly_status ff_writer_codec(const ly_video_writer *w, const char **codec)
{
    if (!w || !codec)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_video_writer_codec: NULL argument");
    *codec = w->encoder->codec->name;
    return LY_OK;
}

/* Send `picture` (NULL: the end) and write every packet the encoder has ready. */
static ly_status encode(ly_video_writer *w, const AVFrame *picture)
{
    char err[256];
    int ret = avcodec_send_frame(w->encoder, picture);
    if (ret < 0)
        return ly_set_error(LY_E_IO, "video %s: encoding failed: %s", w->path,
                            av_error_text(ret, err, sizeof err));
    for (;;) {
        ret = avcodec_receive_packet(w->encoder, w->packet);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return LY_OK;
        if (ret < 0)
            return ly_set_error(LY_E_IO, "video %s: encoding failed: %s", w->path,
                                av_error_text(ret, err, sizeof err));
        av_packet_rescale_ts(w->packet, w->encoder->time_base, w->st->time_base);
        w->packet->stream_index = w->st->index;
        ret = av_interleaved_write_frame(w->format, w->packet);
        av_packet_unref(w->packet);
        if (ret < 0)
            return ly_set_error(LY_E_IO, "video %s: writing failed: %s", w->path,
                                av_error_text(ret, err, sizeof err));
    }
}

static ly_status ff_write(ly_video_writer *w, const ly_image *frame)
{
    if (!w || !frame || !frame->pixels)
        return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_video_write: NULL argument");
    if (frame->width != w->width || frame->height != w->height)
        return ly_set_error(LY_E_SHAPE, "video %s: a %dx%d frame for a %dx%d video", w->path,
                            frame->width, frame->height, w->width, w->height);
    if (av_frame_make_writable(w->picture) < 0)
        return ly_set_error(LY_E_NO_MEMORY, "video %s: out of memory", w->path);
    const uint8_t *src[1] = {frame->pixels};
    int src_stride[1] = {w->width * 3};
    sws_scale(w->sws, src, src_stride, 0, w->height, w->picture->data, w->picture->linesize);
    w->picture->pts = w->next_pts++;
    return encode(w, w->picture);
}

static ly_status ff_writer_close(ly_video_writer *w)
{
    if (!w) return ly_set_error(LY_E_INVALID_ARGUMENT, "ly_video_writer_close: NULL writer");
    char err[256];
    ly_status st = encode(w, NULL);
    int ret;
    if (st == LY_OK && (ret = av_write_trailer(w->format)) < 0)
        st = ly_set_error(LY_E_IO, "video %s: cannot finish the file: %s", w->path,
                          av_error_text(ret, err, sizeof err));
    if (st == LY_OK && (ret = avio_closep(&w->format->pb)) < 0)
        st = ly_set_error(LY_E_IO, "video %s: cannot finish the file: %s", w->path,
                          av_error_text(ret, err, sizeof err));
    if (st == LY_OK) {
        w->file_open = false;
        st = ly_atomic_file_commit(&w->file);
    }
    writer_free(w);
    return st;
}

/* ---- The module's entry --------------------------------------------------- */

__attribute__((visibility("default"))) const ly_video_backend *
ly_video_backend_init(const ly_video_host *h)
{
    static const ly_video_backend backend = {.version = LY_VIDEO_BACKEND_VERSION,
                                             .open = ff_open,
                                             .get_info = ff_get_info,
                                             .read = ff_read,
                                             .cancel = ff_cancel,
                                             .close = ff_close,
                                             .writer_open = ff_writer_open,
                                             .writer_codec = ff_writer_codec,
                                             .write = ff_write,
                                             .writer_close = ff_writer_close,
                                             .writer_discard = ff_writer_discard};
    if (!h || h->version != LY_VIDEO_BACKEND_VERSION) return NULL;
    host = h;
    ffmpeg_init();
    return &backend;
}
