#!/usr/bin/env node
// ONNX Runtime peer for `libreyolo bench model`: times an ONNX export of the same network.
//
//   node ort_model.js --model LibreYOLO9t_seed0.onnx --threads 1 [--runs 20] [--warmup 3]
//        [--input input.npy] [--reference ref_parkour/] [--dump DIR]
//
// --dump DIR writes each output of a run on the input to DIR/<output name>.npy (float32), for
// comparisons a script makes itself (tools/rtdetr-random-peer.sh).
// Prints one JSON object on stdout:
//   {"runtime": "onnxruntime", "version", "threads", "runs", "median_ms", "p90_ms",
//    "load_ms", "peak_rss_mib", "parity": {...} or null}
// The parity check compares every output that has a <name>.npy in the reference folder (the
// --input's folder when it holds them, else ref_parkour/ next to the model) so a mismatched
// model is not timed unnoticed: YOLO9's `predictions`, the DETR families' `pred_logits` and
// `pred_boxes` (their query rows matched by the nearest box first, since top-k near-ties may
// order queries differently). Its tolerance is looser than the C library's 1e-3: ONNX Runtime
// folds BatchNorm into the convolutions, and on YOLO9t folded fp32 arithmetic lands about
// 1.2e-3 (max|got-ref| / max|ref|) from LibreYOLO's unfused output; a different network would
// be off by orders of magnitude more.
'use strict';

const fs = require('fs');
const path = require('path');

const PARITY_REL = 1e-2;

function usage(msg) {
    process.stderr.write(`ort_model.js: ${msg}\n` +
        'usage: node ort_model.js --model M.onnx [--threads N] [--runs R] [--warmup W] ' +
        '[--imgsz S] [--input X.npy] [--reference DIR] [--no-check] [--dump DIR]\n');
    process.exit(2);
}

function parseArgs(argv) {
    const a = { threads: 1, runs: 20, warmup: 3, imgsz: 640, check: true };
    for (let i = 0; i < argv.length; i++) {
        const key = argv[i];
        const value = () => {
            if (i + 1 >= argv.length) usage(`${key} needs a value`);
            return argv[++i];
        };
        const int = () => {
            const v = Number(value());
            if (!Number.isInteger(v)) usage(`${key} needs an integer`);
            return v;
        };
        if (key === '--model') a.model = value();
        else if (key === '--threads') a.threads = int();
        else if (key === '--runs') a.runs = int();
        else if (key === '--warmup') a.warmup = int();
        else if (key === '--imgsz') a.imgsz = int();
        else if (key === '--input') a.input = value();
        else if (key === '--reference') a.reference = value();
        else if (key === '--no-check') a.check = false;
        else if (key === '--dump') a.dump = value();
        else usage(`unknown option ${key}`);
    }
    if (!a.model) usage('--model is required');
    if (a.threads < 1 || a.runs < 1 || a.warmup < 0) usage('--threads, --runs >= 1, --warmup >= 0');
    return a;
}

// Minimal .npy reader: little-endian float32, C order (what the fixtures are).
function loadNpy(file) {
    const buf = fs.readFileSync(file);
    if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
    const major = buf[6];
    const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
    const start = (major === 1 ? 10 : 12) + headerLen;
    const header = buf.toString('latin1', major === 1 ? 10 : 12, start);
    if (!/'descr':\s*'<f4'/.test(header) || /'fortran_order':\s*True/.test(header)) {
        throw new Error(`${file}: expected little-endian float32 in C order, header ${header.trim()}`);
    }
    const shape = header.match(/'shape':\s*\(([^)]*)\)/)[1].split(',')
        .map((s) => s.trim()).filter((s) => s.length).map(Number);
    const count = shape.reduce((x, y) => x * y, 1);
    const data = new Float32Array(count);
    for (let i = 0; i < count; i++) data[i] = buf.readFloatLE(start + 4 * i);
    return { shape, data };
}

function saveNpy(file, shape, data) {
    let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
    header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
    const head = Buffer.alloc(10 + header.length);
    head.write('\x93NUMPY', 0, 'latin1');
    head[6] = 1;
    head[7] = 0;
    head.writeUInt16LE(header.length, 8);
    head.write(header, 10, 'latin1');
    const body = Buffer.alloc(4 * data.length);
    for (let i = 0; i < data.length; i++) body.writeFloatLE(data[i], 4 * i);
    fs.writeFileSync(file, Buffer.concat([head, body]));
}

function percentile(sorted, q) {
    // nearest rank, as the C side computes it
    const idx = Math.max(0, Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1));
    return sorted[idx];
}

function compare(name, got, ref) {
    if (got.length !== ref.length) {
        return { tensor: name, ok: false, error: `${got.length} elements, expected ${ref.length}` };
    }
    let scale = 0, maxAbs = 0;
    for (let i = 0; i < ref.length; i++) scale = Math.max(scale, Math.abs(ref[i]));
    let elemRel = 0;
    for (let i = 0; i < ref.length; i++) {
        const d = Math.abs(got[i] - ref[i]);
        maxAbs = Math.max(maxAbs, d);
        if (Math.abs(ref[i]) >= 1e-3 * scale) elemRel = Math.max(elemRel, d / Math.abs(ref[i]));
    }
    const rel = scale > 0 ? maxAbs / scale : maxAbs;
    return { tensor: name, ok: rel <= PARITY_REL, max_abs: maxAbs, rel, max_elem_rel: elemRel };
}

// Reorders the [1, Q, k] outputs' rows so that each lands on the reference row whose box
// is nearest (L1): the same query, where top-k near-ties ordered them differently.
function matchQueries(out, refs) {
    const boxes = out.pred_boxes.data, ref = refs.pred_boxes.data, q = ref.length / 4;
    const target = new Int32Array(q);
    for (let i = 0; i < q; i++) {
        let best = 0, bestD = Infinity;
        for (let r = 0; r < q; r++) {
            let d = 0;
            for (let k = 0; k < 4; k++) d += Math.abs(boxes[i * 4 + k] - ref[r * 4 + k]);
            if (d < bestD) { bestD = d; best = r; }
        }
        target[i] = best;
    }
    for (const name of Object.keys(refs)) {
        const src = out[name].data, width = src.length / q, moved = new Float32Array(src.length);
        for (let i = 0; i < q; i++) moved.set(src.subarray(i * width, (i + 1) * width), target[i] * width);
        out[name] = { data: moved };
    }
}

async function main() {
    const args = parseArgs(process.argv.slice(2));
    let ort;
    try {
        ort = require('onnxruntime-node');
    } catch (e) {
        process.stderr.write(`ort_model.js: onnxruntime-node is not installed (${e.message})\n`);
        process.exit(1);
    }
    let version = 'unknown';
    try {
        version = require('onnxruntime-node/package.json').version;
    } catch (e) { /* keep unknown */ }

    let reference = args.reference;
    if (reference === undefined && args.input) {
        const dir = path.dirname(path.resolve(args.input));
        if (fs.readdirSync(dir).some((f) => f.endsWith('.npy') && f !== 'input.npy')) reference = dir;
    }
    if (reference === undefined) {
        const guess = path.join(path.dirname(path.resolve(args.model)), 'ref_parkour');
        if (fs.existsSync(guess)) reference = guess;
    }

    const options = {
        intraOpNumThreads: args.threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
        graphOptimizationLevel: 'all',
        executionProviders: ['cpu'],
    };
    const t0 = process.hrtime.bigint();
    const session = await ort.InferenceSession.create(args.model, options);
    const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
    const inputName = session.inputNames[0];

    const result = {
        runtime: 'onnxruntime', version, threads: args.threads, runs: args.runs,
        warmup: args.warmup, load_ms: loadMs, parity: null,
    };

    let x;
    if (args.input) x = loadNpy(args.input);
    else if (reference) x = loadNpy(path.join(reference, 'input.npy'));
    else {
        // fixed synthetic input: a deterministic pattern in [0, 1)
        const n = 3 * args.imgsz * args.imgsz;
        const data = new Float32Array(n);
        let s = 1;
        for (let i = 0; i < n; i++) { s = (s * 1103515245 + 12345) >>> 0; data[i] = (s >>> 8) / 16777216; }
        x = { shape: [1, 3, args.imgsz, args.imgsz], data };
    }
    const feeds = { [inputName]: new ort.Tensor('float32', x.data, x.shape) };

    if (reference && args.check) {
        const refIn = args.input ? loadNpy(path.join(reference, 'input.npy')) : x;
        const out = await session.run({ [inputName]: new ort.Tensor('float32', refIn.data, refIn.shape) });
        const refs = {};
        for (const name of session.outputNames) {
            const file = path.join(reference, `${name}.npy`);
            if (fs.existsSync(file)) refs[name] = loadNpy(file);
        }
        if ('pred_boxes' in refs && out.pred_boxes) matchQueries(out, refs);
        const checks = Object.keys(refs).map((name) => compare(name, out[name].data, refs[name].data));
        if (checks.length) {
            result.parity = { ok: checks.every((c) => c.ok), checks,
                criterion: `max|got-ref| / max|ref| <= ${PARITY_REL}` };
        }
    }

    if (args.dump) {
        const out = await session.run(feeds);
        fs.mkdirSync(args.dump, { recursive: true });
        for (const name of session.outputNames) {
            saveNpy(path.join(args.dump, `${name}.npy`), out[name].dims, out[name].data);
        }
    }

    const times = [];
    for (let i = 0; i < args.warmup + args.runs; i++) {
        const s = process.hrtime.bigint();
        await session.run(feeds);
        const ms = Number(process.hrtime.bigint() - s) / 1e6;
        if (i >= args.warmup) times.push(ms);
    }
    times.sort((a, b) => a - b);
    result.median_ms = percentile(times, 0.5);
    result.p90_ms = percentile(times, 0.9);
    result.min_ms = times[0];
    result.peak_rss_mib = process.resourceUsage().maxRSS / 1024;
    process.stdout.write(JSON.stringify(result) + '\n');
    if (result.parity && !result.parity.ok) {
        process.stderr.write(`ort_model.js: parity with ${reference} failed\n`);
        process.exit(1);
    }
}

main().catch((e) => {
    process.stderr.write(`ort_model.js: ${e && e.message ? e.message : e}\n`);
    process.exit(1);
});
