"""RT-DETR / RT-DETRv2 sizes without a fixture, checked against LibreYOLO's own code (driver: rtdetr-random-peer.sh).

  /usr/bin/python3 -s rtdetr_random_peer.py checkpoint FAMILY SIZE SEED LIBREYOLO_SRC PEERS_KIT OUT.pt
  /usr/bin/python3 -s rtdetr_random_peer.py torch LIBREYOLO_SRC PEERS_KIT CHECKPOINT INPUT.npy OUT_DIR
  /usr/bin/python3 -s rtdetr_random_peer.py compare TORCH_DIR ORT_DIR OURS_DIR

checkpoint: a random-init network built by LibreRTDETR / LibreRTDETRv2(size=SIZE) after torch.manual_seed(SEED),
with the pretrained-backbone download turned off (RTDETR_CONFIGS[SIZE]["backbone_pretrained"] = False: the weights
are random either way). Every norm's statistics and affine (BatchNorm2d and FrozenBatchNorm2d) are then drawn at
random, and so is every tensor LibreYOLO initialises to one value (the box heads' last layers are zero, which
leaves every box on its anchor): at their initial values a wrong fold, eps or box refinement would not show.
Saved as the fixtures are (the "model" state dict plus model_family, size, nc, names, imgsz, ...), so LibreYOLO's
factory and ours read it the same way.

torch: LibreYOLO's network (loaded by its LibreYOLO() factory) on INPUT: pred_logits.npy, pred_boxes.npy, and the
query selection's scores (enc_topk_scores.npy: the 301 best, of the first torch.topk call).

compare: our outputs against ONNX Runtime's (and LibreYOLO's), rows paired one to one by the nearest
(logits / max|logits|, boxes) vector, since rows whose queries score alike may come in another order. A random
network scores its tokens nearly alike (r50m: the 300th and 301st candidate 7e-7 apart), so which query takes the
last rows is fp32 rounding: rows left without a partner within 1e-3 are allowed only as many as the selection
has candidates within 1e-4 of max|score| of the 301st. The figures are max|ours - ort| / max|ort| over the
paired rows; exit 1 above 1e-3.
"""
import glob, os, sys

# stored constants, not weights: kept as built
STORED = ('anchors', 'valid_mask', 'num_points_scale')
TOL = 1e-3


def libreyolo_imports(src, kit):
    sys.path.insert(0, src)
    sys.path.insert(0, kit)
    sys.modules['onnxsim'] = None
    import shims_rtdetr  # noqa: F401  (LibreYOLO's imports on Debian's torch 1.13)


def checkpoint(family, size, seed, src, kit, out):
    libreyolo_imports(src, kit)
    import torch
    from libreyolo.models.rtdetr.model import LibreRTDETR, RTDETR_CONFIGS
    from libreyolo.models.rtdetrv2.model import LibreRTDETRv2
    cls = {'rtdetr': LibreRTDETR, 'rtdetrv2': LibreRTDETRv2}[family]
    RTDETR_CONFIGS[size]['backbone_pretrained'] = False
    torch.manual_seed(int(seed))
    sd = cls(size=size, device='cpu').model.state_dict()
    g = torch.Generator().manual_seed(int(seed) + 1)
    norms = constants = 0
    for k, v in sd.items():
        if not v.is_floating_point():
            continue
        if k.endswith('running_mean') or (k.endswith('.bias') and k[:-5] + '.running_mean' in sd):
            v.copy_(0.1 * torch.randn(v.shape, generator=g))
            norms += 1
        elif k.endswith('running_var'):
            v.copy_(0.5 + torch.rand(v.shape, generator=g))
        elif k.endswith('.weight') and k[:-7] + '.running_var' in sd:
            v.copy_(0.8 + 0.4 * torch.rand(v.shape, generator=g))
        elif v.numel() > 1 and float(v.std()) == 0.0 and not k.endswith(STORED):
            v.add_(0.1 * torch.randn(v.shape, generator=g))
            constants += 1
    torch.save({'model': sd, 'schema_version': '1.0', 'libreyolo_version': '0.0.0.dev0', 'model_family': family,
                'size': size, 'task': 'detect', 'nc': 80, 'names': {i: 'class_%d' % i for i in range(80)},
                'imgsz': 640}, out)
    print('%s-%s seed %s: %d tensors, %d norms and %d constant-initialised tensors drawn at random -> %s'
          % (family, size, seed, len(sd), norms, constants, out))


def run_torch(src, kit, ck, inp, out):
    libreyolo_imports(src, kit)
    import numpy as np
    import torch
    import libreyolo
    net = libreyolo.LibreYOLO(ck, device='cpu').model.eval()
    topk, seen = torch.topk, {}

    def first_topk(x, k, *a, **kw):
        if not seen:
            seen['scores'] = topk(x, k + 1, *a, **kw).values
        return topk(x, k, *a, **kw)
    torch.topk = first_topk
    with torch.no_grad():
        o = net(torch.from_numpy(np.load(inp)))
    torch.topk = topk
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, 'pred_logits.npy'), o['pred_logits'].numpy())
    np.save(os.path.join(out, 'pred_boxes.npy'), o['pred_boxes'].numpy())
    np.save(os.path.join(out, 'enc_topk_scores.npy'), seen['scores'].numpy())


def compare(torch_dir, ort_dir, ours_dir):
    import numpy as np
    from scipy.optimize import linear_sum_assignment
    load = lambda d, n: np.load(os.path.join(d, n))[0]
    # ORT names pred_logits 'output' and pred_boxes by torch's number: told apart by their widths
    ort = {np.load(f).shape[-1]: np.load(f)[0] for f in glob.glob(os.path.join(ort_dir, '*.npy'))}
    ref_l, ref_b = ort[80], ort[4]
    scale = np.abs(ref_l).max()
    scores = load(torch_dir, 'enc_topk_scores.npy')
    q = ref_l.shape[0]
    ties = int((scores[:q] - scores[q] <= 1e-4 * np.abs(scores).max()).sum())
    worst = 0.0
    for name, d in (('ours', ours_dir), ('LibreYOLO (torch)', torch_dir)):
        l, b = load(d, 'pred_logits.npy'), load(d, 'pred_boxes.npy')
        a = np.concatenate([l / scale, b], 1)
        ref = np.concatenate([ref_l / scale, ref_b], 1)
        r, c = linear_sum_assignment(np.abs(a[:, None] - ref[None]).sum(-1))
        gap = np.maximum(np.abs(l[r] - ref_l[c]).max(1) / scale, np.abs(b[r] - ref_b[c]).max(1) / np.abs(ref_b).max())
        paired = gap <= TOL
        el = np.abs(l[r][paired] - ref_l[c][paired]).max() / scale
        eb = np.abs(b[r][paired] - ref_b[c][paired]).max() / np.abs(ref_b).max()
        print('%-18s vs ONNX Runtime: logits %.2g, boxes %.2g of max|ref| over %d of %d rows (%d in another '
              'order); %d without a partner within %g (the selection has %d candidates tied within 1e-4)'
              % (name, el, eb, paired.sum(), q, (r != c).sum(), q - paired.sum(), TOL, ties))
        if name == 'ours':
            worst = max(el, eb) if q - paired.sum() <= ties else float('inf')
    return 0 if worst <= TOL else 1


if __name__ == '__main__':
    cmds = {'checkpoint': (checkpoint, 6), 'torch': (run_torch, 5), 'compare': (compare, 3)}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds or len(sys.argv) != 2 + cmds[sys.argv[1]][1]:
        raise SystemExit('\n'.join(__doc__.strip().splitlines()[2:5]))
    sys.exit(cmds[sys.argv[1]][0](*sys.argv[2:]) or 0)
