#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The frames of a video as LibreYOLO reads them: OpenCV's VideoCapture (its
FFmpeg backend), then cvtColor(BGR2RGB), every frame appended as raw RGB bytes
to OUT. Prints "<frames> <width> <height>". test_video compares these bytes
with ly_video_read's.

usage: video_frames_opencv.py VIDEO OUT
"""
import sys

import cv2


def main():
    video, out = sys.argv[1], sys.argv[2]
    cap = cv2.VideoCapture(video, cv2.CAP_FFMPEG)
    if not cap.isOpened():
        sys.exit(f"cannot open {video}")
    n, w, h = 0, 0, 0
    with open(out, "wb") as f:
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            rgb = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
            h, w = rgb.shape[:2]
            f.write(rgb.tobytes())
            n += 1
    cap.release()
    print(n, w, h)


if __name__ == "__main__":
    main()
