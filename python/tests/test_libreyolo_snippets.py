# SPDX-License-Identifier: MIT
"""LibreYOLO's documented Python, run unchanged but for the import line and the
model and image paths (and a local server's URL for the web one).

The snippets are those of LibreYOLO's README at c41461e (its quickstart) and of
its v1.2.0 documentation, the docs of that library version (libreyolo.com,
the website repository's src/app/[locale]/docs/v1.2.0/page.jsx): the
introduction, the quickstart (YOLO9, RF-DETR, saving, a directory), prediction
(basic, every parameter, the input formats, working with results, class
filtering), export, and the API reference's Results and Boxes. What this
library does not do is refused with its reason where the snippet asks for it
(ONNX and the other PyTorch exports, S3/GCS sources, CUDA): those lines sit
in pytest.raises. Classification has no snippet in those docs; its Results
are in test_results.py.
"""
import functools
import http.server
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from conftest import IMAGES, SHARED, YOLO9

RFDETR = os.path.join(SHARED, "rfdetr", "LibreRFDETRn_seed0.pt")


@pytest.fixture(autouse=True)
def in_scratch(tmp_path, monkeypatch):
    """The snippets save into runs/ and out/ of the working directory."""
    if not (os.path.exists(YOLO9) and all(os.path.exists(p) for p in IMAGES)):
        pytest.skip("../shared/testdata (the YOLO9 fixture and its images) is absent")
    monkeypatch.chdir(tmp_path)
    os.symlink(IMAGES[2], "image.jpg")
    os.symlink(IMAGES[0], "photo.jpg")
    os.mkdir("images")
    for path in IMAGES:
        os.symlink(path, os.path.join("images", os.path.basename(path)))


@pytest.fixture()
def model():
    from libreyolo_c import LibreYOLO
    return LibreYOLO(YOLO9)


def test_readme_quickstart():
    from libreyolo_c import LibreYOLO, SAMPLE_IMAGE

    model = LibreYOLO(YOLO9)
    result = model(SAMPLE_IMAGE, save=True)
    assert os.path.isfile(result.saved_path)


def test_introduction(capsys):
    from libreyolo_c import LibreYOLO, SAMPLE_IMAGE

    # Default: YOLO9 detection
    model = LibreYOLO(YOLO9)
    result = model(SAMPLE_IMAGE, conf=0.25, save=True)

    print(f"Detected {len(result)} objects")
    print(result.boxes.xyxy)
    print(result.saved_path)
    assert "runs/detect/predict/sample.jpg" in capsys.readouterr().out


def test_quickstart_yolo9_and_rfdetr(capsys):
    from libreyolo_c import LibreYOLO, SAMPLE_IMAGE

    # Use the official checkpoint name and let the factory resolve the details
    model = LibreYOLO(YOLO9)

    # Run on a single image (SAMPLE_IMAGE ships with the package)
    result = model(SAMPLE_IMAGE)

    print(f"Found {len(result)} objects")
    print(result.boxes.xyxy)   # bounding boxes (N, 4)
    print(result.boxes.conf)   # confidence scores (N,)
    print(result.boxes.cls)    # class IDs (N,)

    if os.path.exists(RFDETR):
        # Same factory, same call shape - just point at an RF-DETR checkpoint
        model = LibreYOLO(RFDETR)
        result = model(SAMPLE_IMAGE)

        print(f"Found {len(result)} objects")
        print(result.boxes.xyxy)
    assert capsys.readouterr().out.startswith("Found ")


def test_quickstart_save_and_directory(model, capsys):
    from libreyolo_c import SAMPLE_IMAGE

    result = model(SAMPLE_IMAGE, save=True)
    print(result.saved_path)   # e.g. runs/detect/predict/parkour.jpg

    results = model("images/", save=True, batch=4)
    for r in results:
        print(f"{r.path}: {len(r)} detections")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "runs/detect/predict/sample.jpg" and len(lines) == 1 + len(IMAGES)
    assert os.path.isfile("runs/detect/predict/dog.jpg")  # one folder per process, as LibreYOLO


def test_prediction_parameters(model):
    result = model("image.jpg")

    result = model(
        "image.jpg",
        conf=0.25,            # confidence threshold (default: 0.25)
        iou=0.45,             # NMS IoU threshold (default: 0.45)
        imgsz=640,            # input size override (default: model's native)
        device="auto",        # "auto", "cpu", "mps", "0", "cuda:0", ...
        classes=[0, 2, 5],    # filter to specific class IDs (default: all)
        max_det=300,          # max detections per image (default: 300)
        augment=False,        # test-time augmentation where implemented
        save=True,            # save annotated image (default: False)
        batch=4,              # directory batch size
        stream=False,         # video only: yield frame results instead of a list
        vid_stride=1,         # video only: process every N-th frame
        show=False,           # video only: display annotated frames
        tiling=False,         # large-image tiled detection
        overlap_ratio=0.2,    # tile overlap ratio
        output_path="out/",   # where to save (default: runs/detect/predict*/)
        color_format="auto",  # "auto", "rgb", or "bgr"
        output_file_format="png",  # output format: "jpg", "png", "webp"
    )
    assert result.saved_path == os.path.join("out", "image.png")
    assert set(np.asarray(result.boxes.cls).astype(int)) <= {0, 2, 5}


def test_input_formats(model):
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(http.server.SimpleHTTPRequestHandler, directory="."))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/photo.jpg"
    try:
        # File path (string or pathlib.Path)
        result = model("photo.jpg")
        result = model(Path("photo.jpg"))

        # URL
        result = model(url)
        with pytest.raises(NotImplementedError, match="S3"):
            result = model("s3://bucket/image.jpg")
        with pytest.raises(NotImplementedError, match="Google Cloud Storage"):
            result = model("gs://bucket/image.jpg")
    finally:
        server.shutdown()
        server.server_close()

    # PIL Image
    try:
        from PIL import Image
        img = Image.open("photo.jpg")
        result = model(img)
    except ImportError:
        pass

    # NumPy array (HWC or CHW, RGB or BGR, uint8 or float32)
    arr = np.random.randint(0, 255, (480, 640, 3), dtype=np.uint8)
    result = model(arr)

    # OpenCV (BGR) - specify color_format
    try:
        import cv2
        frame = cv2.imread("photo.jpg")
        result = model(frame, color_format="bgr")
    except ImportError:
        pass

    # PyTorch tensor (CHW or NCHW)
    try:
        import torch
        tensor = torch.randn(3, 640, 640)
        result = model(tensor)
    except ImportError:
        pass

    # Raw bytes
    with open("photo.jpg", "rb") as f:
        result = model(f.read())

    # BytesIO
    from io import BytesIO
    result = model(BytesIO(open("photo.jpg", "rb").read()))

    # Directory of images
    results = model("images/", batch=4)
    assert len(results) == len(IMAGES)


def test_working_with_results(model):
    result = model("image.jpg")

    # Number of detections
    len(result)  # e.g., 5

    # Bounding boxes in xyxy format (x1, y1, x2, y2)
    result.boxes.xyxy        # tensor of shape (N, 4)

    # Bounding boxes in xywh format (center_x, center_y, width, height)
    result.boxes.xywh        # tensor of shape (N, 4)

    # Confidence scores
    result.boxes.conf        # tensor of shape (N,)

    # Class IDs
    result.boxes.cls         # tensor of shape (N,)

    # Combined data: [x1, y1, x2, y2, conf, cls]
    # Tracking adds a track_id column before conf/cls.
    result.boxes.data        # shape (N, 6), or (N, 7) when tracked

    # Metadata
    result.orig_shape        # (height, width) of original image
    result.path              # source file path (or None)
    result.names             # {0: "person", 1: "bicycle", ...}

    # Move to CPU / convert to numpy
    result_cpu = result.cpu()
    boxes_np = result.boxes.numpy()
    assert result.boxes.data.shape == (len(result), 6) and len(boxes_np) == len(result_cpu)
    assert result.orig_shape == (852, 1280) and result.path == "image.jpg"

    # Only detect people (class 0) and cars (class 2)
    result = model("image.jpg", classes=[0, 2])
    assert set(np.asarray(result.boxes.cls).astype(int)) <= {0, 2}


def test_export(model):
    from libreyolo_c import LibreYOLO

    # ONNX (default), and the other formats LibreYOLO writes through PyTorch
    for fmt in (None, "torchscript", "tensorrt", "openvino", "ncnn", "coreml"):
        with pytest.raises(ValueError, match="This build exports: executorch"):
            model.export() if fmt is None else model.export(format=fmt)

    path = model.export(
        format="executorch",      # this library's format
        output_path="model.pte",  # output file (auto-generated if None)
        imgsz=640,                # input resolution (default: model's native)
        batch=1,                  # batch size for static graph
        device=None,              # device to trace on (default: model's current device)
        half=False,               # export in FP16
        int8=False,               # INT8 quantization (TensorRT / OpenVINO only)
        verbose=False,            # verbose logging
    )
    with pytest.raises(NotImplementedError, match="half=True"):
        model.export(format="executorch", half=True)

    # Load - names and nb_classes auto-populated
    pte_model = LibreYOLO(path)
    print(pte_model.names)       # {0: "person", 1: "bicycle", ...}
    result = pte_model("image.jpg", conf=0.25, iou=0.45, save=True)
    print(result.boxes.xyxy)
    assert pte_model.names == model.names


def test_api_reference(model):
    from libreyolo_c import Boxes, Results

    r = model("image.jpg")
    result = Results(
        boxes=r.boxes,
        orig_shape=r.orig_shape,  # (height, width)
        path=r.path,
        names=r.names,
        speed=r.speed,
    )
    len(result)          # number of detections
    result.cpu()         # copy with tensors on CPU
    with pytest.raises(NotImplementedError, match="CPU"):
        result.cuda()    # copy with tensors on CUDA
    result.numpy()       # copy with numpy arrays
    result.summary()     # list[dict] with boxes, masks, gaze, and track_id when present
    result.to_json()     # JSON string from summary()

    boxes = Boxes(r.boxes.xyxy, r.boxes.conf, r.boxes.cls)

    boxes.xyxy           # (N, 4) tensor - x1, y1, x2, y2
    boxes.xywh           # (N, 4) tensor - cx, cy, w, h
    boxes.conf           # (N,) tensor - confidence scores
    boxes.cls            # (N,) tensor - class IDs
    boxes.id             # (N,) track IDs when tracking, else None
    boxes.is_track       # True when track IDs are attached
    boxes.data           # (N, 6) [xyxy, conf, cls], or (N, 7) with track IDs

    len(boxes)           # number of boxes
    boxes.cpu()          # copy on CPU
    boxes.numpy()        # copy as numpy arrays
    assert len(boxes) == len(result) and result.summary() == r.summary()
