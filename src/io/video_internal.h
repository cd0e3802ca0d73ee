/* SPDX-License-Identifier: MIT */
/* How a video source's name reads (internal; src/io/video.c): shared by
 * ly_video_is_source and the FFmpeg reader that opens it. */
#ifndef LY_IO_VIDEO_INTERNAL_H
#define LY_IO_VIDEO_INTERNAL_H

#include <stdbool.h>

/* A printf-style frame number: %d or %0Nd (FFmpeg's image2 pattern). */
bool ly_video_frame_pattern(const char *source);
/* A camera number as OpenCV's VideoCapture(0) takes it: 1 to 3 digits. */
bool ly_video_camera_index(const char *source);

#endif
