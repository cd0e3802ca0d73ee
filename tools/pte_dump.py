#!/usr/bin/env python3
"""Dump an ExecuTorch .pte file as JSON with Debian's flatc, XNNPACK payloads included.

    tools/pte_dump.py weights/LibreYOLO9t.pte [OUT_DIR]

Writes OUT_DIR/<stem>.json (the Program, via docs/schema/program.fbs) and, for every
XnnpackBackend delegate, OUT_DIR/<stem>.delegate<i>.json (its XNNGraph, via
docs/schema/xnnpack.fbs), and prints the extended header and the segment table. Needs flatc
(apt-get install flatbuffers-compiler). Standard library only.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "schema")


def flatc_json(schema, binary, out_dir):
    subprocess.run(
        ["flatc", "--json", "--raw-binary", "--strict-json", "-o", out_dir,
         os.path.join(SCHEMA, schema), "--", binary],
        check=True)
    stem = os.path.splitext(os.path.basename(binary))[0]
    with open(os.path.join(out_dir, stem + ".json")) as f:
        return json.load(f)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    path = sys.argv[1]
    out_dir = sys.argv[2] if len(sys.argv) == 3 else "."
    os.makedirs(out_dir, exist_ok=True)
    data = open(path, "rb").read()
    stem = os.path.splitext(os.path.basename(path))[0]
    print(f"{path}: {len(data)} bytes, identifier {data[4:8]!r}")
    base = 0
    if data[8:12] == b"eh00":
        length, program_size, base = struct.unpack_from("<IQQ", data, 12)
        data_size = struct.unpack_from("<Q", data, 32)[0] if length >= 32 else None
        print(f"  eh00: length {length}, program_size {program_size}, "
              f"segment_base_offset {base}, segment_data_size {data_size}")
    program = flatc_json("program.fbs", path, out_dir)
    print(f"  program -> {os.path.join(out_dir, stem + '.json')}")
    segments = program.get("segments", [])
    for i, s in enumerate(segments):
        print(f"  segment {i}: offset {s.get('offset', 0)}, size {s.get('size', 0)}")
    n = 0
    for plan in program.get("execution_plan", []):
        for d in plan.get("delegates", []):
            if d.get("id") != "XnnpackBackend":
                continue
            ref = d.get("processed", {})
            index = ref.get("index", 0)
            if ref.get("location", "INLINE") == "SEGMENT":
                s = segments[index]
                start = base + s.get("offset", 0)
                blob = data[start:start + s.get("size", 0)]
            else:
                blob = bytes(program["backend_delegate_data"][index].get("data", []))
            if blob[4:8] == b"XH00":
                fb_off, fb_size = struct.unpack_from("<II", blob, 10)
                graph = blob[fb_off:fb_off + fb_size]
            else:
                graph = blob
            with tempfile.TemporaryDirectory() as tmp:
                g = os.path.join(tmp, f"{stem}.delegate{n}.bin")
                with open(g, "wb") as f:
                    f.write(graph)
                flatc_json("xnnpack.fbs", g, out_dir)
            print(f"  {plan.get('name')}: delegate {n} ({len(blob)} bytes) -> "
                  f"{os.path.join(out_dir, f'{stem}.delegate{n}.json')}")
            n += 1


if __name__ == "__main__":
    main()
