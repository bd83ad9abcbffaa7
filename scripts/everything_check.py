#!/usr/bin/env python3
"""Full-size check of `predict-sam2 --everything` against the official
`SAM2AutomaticMaskGenerator`: the same checkpoint and image must give the same set of masks
(matched one to one by mask IoU >= 0.99). The fixture test (`crates/models/tests/
sam2_automatic.rs`) covers the reduced model only; this runs the real SAM 2.1 Hiera-T (1024²
input, real depths, the 7->256 position-embedding resize) through the whole generator.

1. Builds the official SAM2Base of configs/sam2.1/sam2.1_hiera_<size>.yaml with `build_sam2`
   and the formula weights of scripts/fixtures/formula_weights.py (key listing
   tests/fixtures/listings/state_dict_sam2.1_hiera_<size>.txt, checked), and saves it as the
   official files are: torch.save({"model": state_dict}).
2. Runs the official generator on the image (output_mode="uncompressed_rle") with the
   stand-ins of scripts/fixtures/sam2_automatic.py for torchvision's transforms and NMS (this
   Python lacks torchvision). Hooks record every candidate before the filters (click,
   predicted IoU, stability score, box) and every NMS decision, so that any mask kept on one
   side only can be explained.
3. Runs `predict-sam2 --checkpoint that.pt IMAGE --everything` with the same options.
4. Decodes both sides' RLEs (official counts, segburn's compressed COCO strings), matches the
   masks, prints the counts, each official mask's best IoU, the largest score differences of
   matched masks, each unmatched mask with its scores' distances to the thresholds, and the
   wall-clock time of each side (informative only: a shared machine).

Why these defaults: the official random init gives |mask logit| < 0.5 (every stability score
0) and masks whose boxes all span the image (box NMS keeps one). The formula weights on the
low-contrast synthetic image of tests/fixtures/sam2_hiera/image.png give strong logits and
varied masks. Their 3072 candidates (32x32 clicks, 3 masks each) leave gaps in the scores:
pred IoU 0.95031 keeps 46 (nearest candidate 1.4e-4 away, 580x the largest difference
measured between the two sides), stability 0.97456 then 45 (nearest 6.1e-4 away, 5x the
largest measured difference, 1.2e-4: a pixel at a logit of +-1 in a 10k-pixel mask). Their
boxes are few (55 distinct over all candidates), so any NMS threshold below 1 keeps 3-10
masks with box IoUs within 1e-3 of some thresholds; --box-nms-thresh 1.0 (NMS runs, drops
nothing) keeps them all; the NMS itself is checked by the fixture test. Exit 1 when a
candidate lies within the margins of a threshold (choose others), or when the sets differ by
a mask whose deciding score (predicted IoU, stability, NMS box IoU) is not within the margins
of its threshold.

Needs torch, numpy and PIL; the official code is a checkout passed with --sam2 (never
committed). From the repository root, after `cargo build --release --bin predict-sam2`:
  /opt/refgen/bin/python scripts/everything_check.py --sam2 ~/official/sam2
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
from PIL import Image

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "fixtures"))
from sam2_automatic import batched_nms, install_ops_stand_in  # noqa: E402
from sam2_hiera_cases.model import build_model  # noqa: E402
from sam2_hiera_cases.official import import_official  # noqa: E402

ROOT = os.path.join(HERE, "..")
IMAGE = os.path.join(ROOT, "tests", "fixtures", "sam2_hiera", "image.png")


def official_model(off, size):
    """The official SAM2Base of sam2.1_hiera_<size>.yaml with the formula weights, checked
    against the committed key listing."""
    listing = os.path.join(ROOT, "tests", "fixtures", "listings",
                           f"state_dict_sam2.1_hiera_{size}.txt")
    model, _ = build_model(off, f"configs/sam2.1/sam2.1_hiera_{size}.yaml", [],
                           listing_in=listing)
    return model


def run_official(model, image, settings):
    """The official records, every candidate (point, predicted IoU, stability, box) and the
    NMS calls (boxes, scores, kept indices, threshold), and the seconds the generator took
    without the recording."""
    import sam2.automatic_mask_generator as amg
    from sam2.utils.amg import batched_mask_to_box, calculate_stability_score

    generator = amg.SAM2AutomaticMaskGenerator(model, output_mode="uncompressed_rle", **settings)
    candidates, nms_calls, last, extra = [], [], {}, [0.0]
    predict, process = generator.predictor._predict, generator._process_batch

    def predict_hook(*args, **kwargs):
        last["out"] = predict(*args, **kwargs)
        return last["out"]

    def process_hook(points, im_size, crop_box, orig_size, normalize=False):
        data = process(points, im_size, crop_box, orig_size, normalize=normalize)
        start = time.perf_counter()
        masks, ious, _ = last.pop("out")
        masks, ious = masks.flatten(0, 1), ious.flatten(0, 1)
        stability = calculate_stability_score(masks, generator.mask_threshold,
                                              generator.stability_score_offset)
        boxes = batched_mask_to_box(masks > generator.mask_threshold)
        per_point = len(ious) // len(points)
        for i in range(len(ious)):
            x, y = points[i // per_point]
            candidates.append(dict(point=(float(x) + crop_box[0], float(y) + crop_box[1]),
                                   predicted_iou=float(ious[i]),
                                   stability_score=float(stability[i]),
                                   box=[int(v) for v in boxes[i]]))
        extra[0] += time.perf_counter() - start
        return data

    def nms_hook(boxes, scores, idxs, iou_threshold):
        keep = batched_nms(boxes, scores, idxs, iou_threshold)
        nms_calls.append((boxes.float().numpy(), scores.numpy(), keep.tolist(), iou_threshold))
        return keep

    generator.predictor._predict, generator._process_batch = predict_hook, process_hook
    amg.batched_nms = nms_hook
    start = time.perf_counter()
    records = generator.generate(image)
    seconds = time.perf_counter() - start - extra[0]
    return records, candidates, nms_calls, seconds


def nms_margins(nms_calls):
    """For each NMS input (keyed by its score and box): the largest box IoU with a box kept
    before it (the decision: dropped when above the threshold) and the threshold."""
    out = {}
    for boxes, scores, keep, threshold in nms_calls:
        if threshold >= 1.0:
            continue  # a box IoU is never above 1: nothing to decide
        order = sorted(range(len(scores)), key=lambda i: -scores[i])  # stable, as the NMS
        rank = {i: r for r, i in enumerate(order)}
        area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        for j in range(len(scores)):
            before = [i for i in keep if rank[i] < rank[j]]
            worst = 0.0
            for i in before:
                w = max(0.0, min(boxes[i, 2], boxes[j, 2]) - max(boxes[i, 0], boxes[j, 0]))
                h = max(0.0, min(boxes[i, 3], boxes[j, 3]) - max(boxes[i, 1], boxes[j, 1]))
                union = area[i] + area[j] - w * h
                worst = max(worst, float(w * h / union) if union > 0 else 0.0)
            key = (float(scores[j]), tuple(int(v) for v in boxes[j]))
            out[key] = (worst, threshold)
    return out


def run_segburn(args, checkpoint, settings, folder):
    flags = ["--points-per-side", settings["points_per_side"],
             "--points-per-batch", settings["points_per_batch"],
             "--pred-iou-thresh", settings["pred_iou_thresh"],
             "--stability-score-thresh", settings["stability_score_thresh"],
             "--box-nms-thresh", settings["box_nms_thresh"],
             "--crop-n-layers", settings["crop_n_layers"]]
    command = [args.predict, "--checkpoint", checkpoint, args.image, "--everything",
               *[str(v) for v in flags], "--out", folder]
    start = time.perf_counter()
    run = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    print(run.stdout + run.stderr, end="")
    if run.returncode != 0:
        sys.exit(f"predict-sam2 failed (exit {run.returncode}): {' '.join(command)}")
    stem = os.path.splitext(os.path.basename(args.image))[0]
    with open(os.path.join(folder, f"{stem}_masks.json"), encoding="utf-8") as f:
        return json.load(f), seconds


def coco_counts(text):
    """pycocotools' rleFrString: 5-bit groups, continuation bit 0x20, sign bit 0x10, each count
    after the second stored as the difference to the one two before."""
    counts, pos = [], 0
    while pos < len(text):
        value, shift, more = 0, 0, True
        while more:
            c = ord(text[pos]) - 48
            value |= (c & 0x1F) << (5 * shift)
            more = bool(c & 0x20)
            pos, shift = pos + 1, shift + 1
            if not more and c & 0x10:
                value |= -1 << (5 * shift)
        counts.append(value + (counts[-2] if len(counts) > 2 else 0))
    return counts


def decode(segmentation):
    """An RLE (counts from a 0-run, column-major, as COCO) as a flat row-major bool mask."""
    h, w = segmentation["size"]
    counts = segmentation["counts"]
    if isinstance(counts, str):
        counts = coco_counts(counts)
    flat = np.repeat(np.arange(len(counts)) % 2 == 1, counts)
    assert flat.size == h * w, f"RLE of {flat.size} pixels for {h}x{w}"
    return flat.reshape(w, h).T.reshape(-1)


def match(ours, theirs, min_iou):
    """Mask IoU matrix and a one-to-one matching (greedy, best IoU first, >= min_iou)."""
    a = np.stack([decode(r["segmentation"]) for r in ours]).astype(np.float32)
    b = np.stack([decode(r["segmentation"]) for r in theirs]).astype(np.float32)
    inter = a @ b.T
    iou = inter / (a.sum(1)[:, None] + b.sum(1)[None, :] - inter)
    pairs, used_a, used_b = {}, set(), set()
    for flat in np.argsort(-iou, axis=None):
        i, j = np.unravel_index(flat, iou.shape)
        if iou[i, j] < min_iou:
            break
        if i not in used_a and j not in used_b:
            pairs[int(i)] = int(j)
            used_a.add(i)
            used_b.add(j)
    return iou, pairs


def explain(candidate, nms, settings):
    """The decisions a candidate went through and its distance to each threshold (positive:
    passed); the official decision comes first."""
    p = candidate["predicted_iou"] - settings["pred_iou_thresh"]
    s = candidate["stability_score"] - settings["stability_score_thresh"]
    steps = [("pred_iou", p)]
    if p > 0:
        steps.append(("stability", s))
        if s >= 0 and nms is not None:
            steps.append(("nms box IoU", nms[1] - nms[0]))
    return steps


def describe(steps):
    return ", ".join(f"{name} {'+' if d >= 0 else ''}{d:.2e}" for name, d in steps)


def excused(steps, margins):
    return any(abs(d) <= margins[name] for name, d in steps)


def click_key(point):
    return round(float(point[0]), 3), round(float(point[1]), 3)


def closest_to_thresholds(candidates, nms, settings):
    """How near the official candidates come to each decision they reach."""
    tp, ts = settings["pred_iou_thresh"], settings["stability_score_thresh"]
    return {
        "pred_iou": min(abs(c["predicted_iou"] - tp) for c in candidates),
        "stability": min((abs(c["stability_score"] - ts) for c in candidates
                          if c["predicted_iou"] > tp), default=float("inf")),
        "nms box IoU": min((abs(t - w) for w, t in nms.values() if t < 1.0),
                           default=float("inf")),
    }


def report_unmatched(ours, theirs, iou, pairs, by_point, settings, margins):
    """Prints each mask found on one side only; returns whether all of them are excused."""
    ok = True
    for j, r in enumerate(theirs):
        if j in pairs.values():
            continue
        c = next(c for c in by_point[click_key(r["point_coords"][0])]
                 if c["predicted_iou"] == r["predicted_iou"])
        steps = explain(c, c["nms"], settings)
        print(f"official mask {j} only (best IoU {iou[:, j].max(initial=0):.4f}, area "
              f"{r['area']}, click {r['point_coords'][0]}): {describe(steps)}")
        ok &= excused(steps, margins)
    for i, r in enumerate(ours):
        if i in pairs:
            continue
        # The official candidate of the same click whose box is closest to this mask's.
        x, y, w, h = r["bbox"]
        near = min(by_point.get(click_key(r["point_coords"][0]), []), default=None,
                   key=lambda c: np.abs(np.array(c["box"]) - [x, y, x + w, y + h]).sum())
        ours_steps = explain(r, None, settings)
        text = (f"predict-sam2 mask {i} only (best IoU {iou[i].max(initial=0):.4f}, area "
                f"{r['area']}, click {r['point_coords'][0]}): its scores {describe(ours_steps)}")
        if near is None:
            print(text + "; no official candidate at this click")
            ok = False
            continue
        steps = explain(near, near["nms"], settings)
        print(text + f"; official candidate (box {near['box']}): {describe(steps)}")
        ok &= excused(steps, margins) or excused(ours_steps, margins)
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sam2", required=True, metavar="DIR",
                        help="checkout of github.com/facebookresearch/sam2")
    parser.add_argument("--size", default="t", choices=["t", "s", "b+", "l"])
    parser.add_argument("--predict", default=os.path.join(ROOT, "target", "release",
                                                          "predict-sam2"))
    parser.add_argument("--image", default=IMAGE, help="an RGB PNG (default: %(default)s)")
    parser.add_argument("--points-per-side", type=int, default=32)
    parser.add_argument("--points-per-batch", type=int, default=64)
    parser.add_argument("--pred-iou-thresh", type=float, default=0.95031)
    parser.add_argument("--stability-score-thresh", type=float, default=0.97456)
    parser.add_argument("--box-nms-thresh", type=float, default=1.0)
    parser.add_argument("--crop-n-layers", type=int, default=0)
    parser.add_argument("--min-iou", type=float, default=0.99, help="mask IoU of a match")
    # Above the largest differences measured on matched masks (2.4e-7 and 1.2e-4).
    parser.add_argument("--iou-margin", type=float, default=1e-5,
                        help="a predicted IoU this close to its threshold may flip")
    parser.add_argument("--stability-margin", type=float, default=2e-4,
                        help="a stability score this close to its threshold may flip")
    parser.add_argument("--keep", metavar="DIR", help="keep the checkpoint and outputs here")
    args = parser.parse_args()
    torch.set_num_threads(2)
    settings = dict(points_per_side=args.points_per_side, points_per_batch=args.points_per_batch,
                    pred_iou_thresh=args.pred_iou_thresh,
                    stability_score_thresh=args.stability_score_thresh,
                    box_nms_thresh=args.box_nms_thresh, crop_n_layers=args.crop_n_layers)
    # A box IoU moves by whole pixels of a box edge (1 px of a 100 px box: 0.01).
    margins = {"pred_iou": args.iou_margin, "stability": args.stability_margin,
               "nms box IoU": 0.01}

    off = import_official(args.sam2)
    install_ops_stand_in()
    warnings.filterwarnings("ignore", category=UserWarning)
    model = official_model(off, args.size)
    image = np.asarray(Image.open(args.image).convert("RGB"))
    with tempfile.TemporaryDirectory(prefix="segburn everything check ") as scratch:
        folder = args.keep or scratch
        os.makedirs(folder, exist_ok=True)
        checkpoint = os.path.join(folder, f"sam2.1_hiera_{args.size} formula.pt")
        torch.save({"model": model.state_dict()}, checkpoint)
        theirs, candidates, nms_calls, their_seconds = run_official(model, image, settings)
        ours, our_seconds = run_segburn(args, checkpoint, settings, folder)

    nms = nms_margins(nms_calls)
    by_point = {}
    for c in candidates:
        by_point.setdefault(click_key(c["point"]), []).append(c)
        c["nms"] = nms.get((c["predicted_iou"], tuple(c["box"])))
    closest = closest_to_thresholds(candidates, nms, settings)
    print(f"image {args.image} ({image.shape[1]}x{image.shape[0]}), {settings}")
    print(f"official: {len(candidates)} candidates, {len(theirs)} masks, {their_seconds:.1f} s "
          f"(generate, without the recording; torch {torch.__version__}, 2 threads)")
    print(f"predict-sam2: {len(ours)} masks, {our_seconds:.1f} s (whole process, checkpoint "
          "load included)")
    print("nearest candidate to each threshold: "
          + ", ".join(f"{k} {v:.2e}" for k, v in closest.items())
          + "; margins: " + ", ".join(f"{k} {v:.0e}" for k, v in margins.items()))
    ok = all(v > margins[k] for k, v in closest.items())
    if not ok:
        print("FAIL: a candidate lies within the margins of a threshold; choose thresholds in "
              "a gap of the scores")

    if ours and theirs:
        iou, pairs = match(ours, theirs, args.min_iou)
    else:
        iou, pairs = np.zeros((len(ours), len(theirs))), {}
    if pairs:
        matched = sorted(iou[i, j] for i, j in pairs.items())
        diffs = {k: max(abs(ours[i][k] - theirs[j][k]) for i, j in pairs.items())
                 for k in ("predicted_iou", "stability_score")}
        same_click = sum(np.allclose(ours[i]["point_coords"], theirs[j]["point_coords"])
                         for i, j in pairs.items())
        print(f"{len(pairs)} matched (mask IoU >= {args.min_iou}): IoU min {matched[0]:.5f}, "
              f"median {matched[len(matched) // 2]:.5f}; same click {same_click}/{len(pairs)}; "
              f"largest difference: predicted IoU {diffs['predicted_iou']:.1e}, stability "
              f"{diffs['stability_score']:.1e}")
        if diffs["predicted_iou"] > margins["pred_iou"] or \
                diffs["stability_score"] > margins["stability"]:
            print("note: matched scores differ by more than the margins; widen them")
    if theirs:
        print("best IoU per official mask: "
              + " ".join(f"{v:.4f}" for v in iou.max(axis=0, initial=0)))
    ok &= report_unmatched(ours, theirs, iou, pairs, by_point, settings, margins)
    if args.keep:
        print(f"checkpoint and predict-sam2's files in {folder}")
    same = len(pairs) == len(ours) == len(theirs)
    print("OK: the same masks" if ok and same else "OK: differences within the margins" if ok
          else "FAIL: the mask sets differ")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
