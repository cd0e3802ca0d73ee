# SPDX-License-Identifier: MIT
import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))
SHARED = os.path.normpath(os.path.join(SOURCE, "..", "shared", "testdata"))
IMAGES = [os.path.join(SHARED, "images", f) for f in ("dog.jpg", "giraffe.jpg", "parkour.jpg")]
YOLO9 = os.path.join(SHARED, "yolo9", "LibreYOLO9t_seed0.pt")
VIT = os.path.join(SHARED, "vit", "LibreViTti_seed0.pt")


def cli():
    path = os.environ.get("LIBREYOLO_CLI") or shutil.which("libreyolo")
    if not path:
        pytest.skip("no libreyolo command (LIBREYOLO_CLI)")
    return path


@pytest.fixture(scope="session")
def detector_path():
    """The YOLO9 fixture checkpoint, else the default model when it is cached."""
    if os.path.exists(YOLO9) and all(os.path.exists(p) for p in IMAGES):
        return YOLO9
    pytest.skip("../shared/testdata (the YOLO9 fixture and its images) is absent")


@pytest.fixture(scope="session")
def images():
    return list(IMAGES)


def cli_json(args):
    out = subprocess.run([cli()] + args + ["--json"], check=True, capture_output=True, text=True)
    import json
    return json.loads(out.stdout)
