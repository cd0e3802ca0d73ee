# SPDX-License-Identifier: MIT
"""Bad prediction options are refused by the Python package with the command's
message word for word (both go through the library's ly_predict_options_check;
tests/test_predict_options.c holds the C API to the same words), and the
classes filter keeps, of the unfiltered result, the listed classes' boxes."""
import json
import subprocess

import pytest

from conftest import cli
from libreyolo_c import LibreYOLO
from libreyolo_c.model import LibreYOLOValueError

# (Python keyword, value, the command's --option and value)
BAD = [
    ("conf", 1.5, "--conf", "1.5"),
    ("conf", float("nan"), "--conf", "nan"),
    ("iou", -0.1, "--iou", "-0.1"),
    ("imgsz", 0, "--imgsz", "0"),
    ("imgsz", 33, "--imgsz", "33"),
    ("imgsz", 40000, "--imgsz", "40000"),
    ("max_det", -1, "--max-det", "-1"),
    ("max_det", 0, "--max-det", "0"),
    ("classes", [-1], "--classes", "[-1]"),
    ("classes", [0, 80], "--classes", "[0,80]"),
]


def command_refusal(model, source, option, value):
    out = subprocess.run(
        [cli(), "predict", "--model", model, "--source", source, f"{option}={value}", "--json"],
        capture_output=True, text=True)
    assert out.returncode == 2, out
    doc = json.loads(out.stdout)
    assert doc["error"] == "config_range_error"
    return doc["message"]


@pytest.mark.parametrize("keyword, value, option, text", BAD)
def test_same_refusal_as_the_command(detector_path, images, keyword, value, option, text):
    m = LibreYOLO(detector_path)
    with pytest.raises(LibreYOLOValueError) as e:
        m.predict(images[0], **{keyword: value})
    assert str(e.value) == command_refusal(detector_path, images[0], option, text)


def test_what_the_c_options_cannot_hold(detector_path, images):
    m = LibreYOLO(detector_path)
    with pytest.raises(LibreYOLOValueError, match="max_det 4294967297: does not fit a C int"):
        m.predict(images[0], max_det=2**32 + 1)  # ctypes would have made it 1
    with pytest.raises(LibreYOLOValueError) as e:
        m.predict(images[0], imgsz=(320, 640))  # the first used to be taken
    assert str(e.value) == command_refusal(detector_path, images[0], "--imgsz", "320x640")
    assert len(m.predict(images[0], imgsz=(320, 320), max_det=1)) <= 1


def test_classes_follow_max_det(detector_path, images):
    m = LibreYOLO(detector_path)
    top = m.predict(images[2], conf=0.05, max_det=5)
    keep = [int(top.boxes.cls[0])]
    some = m.predict(images[2], conf=0.05, max_det=5, classes=keep)
    mask = top.boxes.cls == keep[0]
    assert (some.boxes.xyxy == top.boxes.xyxy[mask]).all()
    assert (some.boxes.conf == top.boxes.conf[mask]).all()
