#!/usr/bin/env python3
"""Video tracking speed, SAM 2.1 Hiera-T at full size (1024x1024 input): the official
`SAM2VideoPredictor` against segburn's `track-sam2` on the same clip, weights and CPU threads,
back to back in one run (the `video` part of scripts/cpu_side_by_side.sh).

Prepared once under OUT (a fresh process):
- OUT/weights.safetensors: the formula weights (scripts/fixtures/formula_weights.py) of the
  official key listing tests/fixtures/listings/state_dict_sam2.1_hiera_t.txt, checked equal to
  the state dict of the official `build_sam2_video_predictor("configs/sam2.1/sam2.1_hiera_t.yaml")`,
  with one override stored in the file: the object-score head's output bias
  (`sam_mask_decoder.pred_obj_score_head.layers.2.bias`) raised by --obj-score-shift, so that
  both objects stay "present" on every frame (with the plain formula weights every tracked frame
  is "absent": a cheaper path, and not the one real weights take). Both sides load this file.
- OUT/frames/00000.jpg...: a synthetic clip (default 16 frames of 480x640, DAVIS-like), a
  textured background and two moving ellipses, JPEG quality 90, as the video fixture's clip
  (scripts/fixtures/sam2_video_cases/clip.py) at twice its size.

Prompts, both sides, on frame 0: object 1 one positive click at its ellipse's centre, object 2 a
box around its ellipse; then one forward propagation over the whole clip.
- official (a fresh process per run, torch.set_num_threads(THREADS)): build the predictor and
  `load_state_dict(strict=True)` from OUT/weights.safetensors (not timed); times (a) init_state
  (frame loading, and the official warm-up: frame 0's image encoder), (b) the two
  add_new_points_or_box, (c) propagate_in_video, the generator consumed, each yield's masks
  turned into a per-pixel id map (the highest positive logit's object: what segburn writes).
  Hole filling is skipped (its CUDA extension is not built on a CPU; the official code warns).
- segburn: `track-sam2 --checkpoint OUT/weights.safetensors --frames OUT/frames --prompt ...
  --fill-holes 0 --no-overlays` with RAYON_NUM_THREADS=THREADS; its OUT/.../tracking.json gives
  the propagation's seconds (frames/s; the palette PNG per frame written inside it) and the
  frame decoding's (its prompts are not timed on their own).
The frames per second of both are frames / propagation seconds (the prompted frame counted,
as the official generator yields it). Runs alternate sides (official first on even runs);
medians and the ratio segburn / official of seconds per frame (below 1: segburn is faster).
Each run's load average before and after, and peak RSS of each process (/usr/bin/time -v where
it exists, else getrusage of the children, which is the largest child so far). The two sides'
last-frame masks are compared per object (IoU of the object's pixels in the id maps).

Run from the repository root with a Python that has torch, numpy, safetensors, Pillow, hydra-core
and iopath (scripts/cpu_side_by_side.sh --parts video does it):

    /opt/refgen/bin/python scripts/sam2_video_bench.py --sam2 /path/to/sam2 \
        --track target/release/track-sam2 --out target/side-by-side/video --reps 3
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LISTING = os.path.join(ROOT, "tests/fixtures/listings/state_dict_sam2.1_hiera_t.txt")
CONFIG = "configs/sam2.1/sam2.1_hiera_t.yaml"
OBJ_SCORE_BIAS = "sam_mask_decoder.pred_obj_score_head.layers.2.bias"
H, W, CONTRAST, JPEG_QUALITY = 480, 640, 0.15, 90
# (cx, cy, rx, ry) at frame 0, (dx, dy) per frame, RGB colour (clip.py's, twice the size).
ELLIPSES = [
    ((200.0, 220.0, 96.0, 76.0), (8.0, 4.0), (225, 40, 40)),
    ((450.0, 300.0, 84.0, 68.0), (-6.0, -2.0), (40, 200, 60)),
]


def prompts():
    """Object 1: a click at its centre; object 2: a box around it (frame 0, video pixels)."""
    (cx, cy, _, _), _, _ = ELLIPSES[0]
    (bx, by, rx, ry), _, _ = ELLIPSES[1]
    return [cx, cy], [bx - rx - 4, by - ry - 4, bx + rx + 4, by + ry + 4]


def import_official(sam2):
    sys.path[:0] = [os.path.join(HERE, "fixtures")]
    from sam2_hiera_cases.official import import_official as imp

    return imp(sam2)


def official_predictor():
    from sam2.build_sam import build_sam2_video_predictor

    return build_sam2_video_predictor(CONFIG, None, device="cpu", mode="eval")


def prepare(args):
    """The weights file and the clip (see the module text)."""
    import numpy as np
    from PIL import Image
    from safetensors.torch import save_file

    import_official(args.sam2)
    from formula_weights import fnv1a64, formula_state_dict, read_listing, splitmix64, state_dict_listing

    listing = [(k, list(s), d) for k, s, d in read_listing(LISTING)]
    if state_dict_listing(official_predictor().state_dict()) != listing:
        raise SystemExit(f"the official video predictor's state dict is not {LISTING}")
    state = formula_state_dict(listing)
    state[OBJ_SCORE_BIAS] = state[OBJ_SCORE_BIAS] + args.obj_score_shift
    save_file({k: v.contiguous() for k, v in state.items()}, os.path.join(args.out, "weights.safetensors"))
    frames = os.path.join(args.out, "frames")
    shutil.rmtree(frames, ignore_errors=True)
    os.makedirs(frames)
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    noise = (splitmix64(fnv1a64("sam2_video_bench.noise"), H * W * 3) >> np.uint64(59)).astype(
        np.int64).reshape(H, W, 3) * 25 // 31 - 12
    for t in range(args.frames):
        img = np.stack([110 + 90 * x / (W - 1), 80 + 110 * y / (H - 1),
                        170 - 60 * (x + y) / (W + H - 2)], axis=-1)
        img += 20.0 * (np.sin(x / 18.0) * np.cos(y / 26.0))[..., None]
        for (cx, cy, rx, ry), (dx, dy), colour in ELLIPSES:
            img[((x - cx - dx * t) / rx) ** 2 + ((y - cy - dy * t) / ry) ** 2 <= 1.0] = colour
        base = np.clip(np.floor(img) + noise, 0, 255)
        mean = np.array([0.485, 0.456, 0.406]) * 255
        low = np.clip(np.round(mean + CONTRAST * (base - base.mean(axis=(0, 1)))), 0, 255)
        Image.fromarray(low.astype(np.uint8)).save(os.path.join(frames, f"{t:05d}.jpg"),
                                                   quality=JPEG_QUALITY, subsampling=2)


def id_map(logits, obj_ids):
    """[objects,1,h,w] logits -> uint8 ids (the highest positive logit's object, 0 if none)."""
    import numpy as np

    values = logits[:, 0].float().numpy()
    best = values.argmax(axis=0)
    ids = np.array(obj_ids, dtype=np.uint8)[best]
    ids[values.max(axis=0) <= 0] = 0
    return ids


def official(args):
    """One official run (a fresh process): prints its JSON and saves the last frame's ids."""
    import numpy as np
    import torch
    from safetensors.torch import load_file

    torch.set_num_threads(args.threads)
    import_official(args.sam2)
    t0 = time.perf_counter()
    predictor = official_predictor()
    predictor.load_state_dict(load_file(os.path.join(args.out, "weights.safetensors")), strict=True)
    predictor.eval()
    load_seconds = time.perf_counter() - t0
    click, box = prompts()
    scores = []
    with torch.inference_mode():
        t0 = time.perf_counter()
        state = predictor.init_state(video_path=os.path.join(args.out, "frames"))
        t1 = time.perf_counter()
        predictor.add_new_points_or_box(state, frame_idx=0, obj_id=1,
                                        points=np.array([click], dtype=np.float32),
                                        labels=np.array([1], dtype=np.int32))
        predictor.add_new_points_or_box(state, frame_idx=0, obj_id=2,
                                        box=np.array(box, dtype=np.float32))
        t2 = time.perf_counter()
        count, last = 0, None
        for frame, obj_ids, masks in predictor.propagate_in_video(state):
            last = id_map(masks, obj_ids)
            count += 1
        t3 = time.perf_counter()
        for per_obj in state["output_dict_per_obj"].values():
            for kind in ("cond_frame_outputs", "non_cond_frame_outputs"):
                scores += [float(o["object_score_logits"].min()) for o in per_obj[kind].values()]
    np.save(args.ids, last)
    print(json.dumps({
        "load_seconds": load_seconds, "init_state_seconds": t1 - t0, "prompt_seconds": t2 - t1,
        "propagate_seconds": t3 - t2, "frames": count, "frames_per_second": count / (t3 - t2),
        "min_object_score_logit": min(scores),
        "torch": torch.__version__, "threads": torch.get_num_threads(),
    }))


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(v) for v in f.read().split()[:3]]


def timed(cmd, env=None):
    """Runs cmd; (stdout, wall seconds, peak RSS MiB)."""
    use_time = os.access("/usr/bin/time", os.X_OK)
    full = ["/usr/bin/time", "-v"] + cmd if use_time else cmd
    t0 = time.perf_counter()
    p = subprocess.run(full, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"failed: {' '.join(cmd)}")
    if use_time:
        kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
    else:
        kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return p.stdout, wall, kb / 1024


def run_official(args, rep):
    ids = os.path.join(args.out, f"official-ids-{rep}.npy")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "official", "--sam2", args.sam2,
           "--out", args.out, "--threads", str(args.threads), "--ids", ids]
    before = loadavg()
    stdout, wall, rss = timed(cmd)
    row = json.loads(stdout.strip().splitlines()[-1])
    row.update(wall_seconds=wall, peak_rss_mib=rss, load_before=before, load_after=loadavg())
    return row, ids


def run_segburn(args, rep):
    import numpy as np
    from PIL import Image

    click, box = prompts()
    out = os.path.join(args.out, f"segburn-{rep}")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [args.track, "--checkpoint", os.path.join(args.out, "weights.safetensors"),
           "--frames", os.path.join(args.out, "frames"),
           "--prompt", f"0:1:points={click[0]},{click[1]},1",
           "--prompt", "0:2:box=" + ",".join(str(v) for v in box),
           "--out", out, "--no-overlays", "--fill-holes", "0"]
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    before = loadavg()
    _, wall, rss = timed(cmd, env)
    with open(os.path.join(out, "tracking.json")) as f:
        row = json.load(f)
    row.update(wall_seconds=wall, peak_rss_mib=rss, load_before=before, load_after=loadavg())
    last = f"{args.frames - 1:05d}.png"
    return row, np.array(Image.open(os.path.join(out, "masks", last)))


def iou(a, b, obj):
    inter, union = ((a == obj) & (b == obj)).sum(), ((a == obj) | (b == obj)).sum()
    return float(inter / union) if union else 1.0


def orchestrate(args):
    import numpy as np

    os.makedirs(args.out, exist_ok=True)
    print(f"== video: preparing the weights and the clip in {args.out} (load {loadavg()})", flush=True)
    subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "prepare", "--sam2",
                    args.sam2, "--out", args.out, "--frames", str(args.frames),
                    "--obj-score-shift", str(args.obj_score_shift)], check=True)
    runs = {"official": [], "segburn": []}
    agreement = []
    for rep in range(args.reps):
        order = ["official", "segburn"] if rep % 2 == 0 else ["segburn", "official"]
        masks = {}
        for side in order:
            if side == "official":
                row, ids = run_official(args, rep)
                masks[side] = np.load(ids)
            else:
                row, masks[side] = run_segburn(args, rep)
            runs[side].append(row)
            print(f"run {rep} {side}: {row['frames_per_second']:.3f} frames/s, "
                  f"peak RSS {row['peak_rss_mib']:.0f} MiB, load {row['load_before']} -> "
                  f"{row['load_after']}", flush=True)
        agreement.append({f"obj{o}": iou(masks["official"], masks["segburn"], o) for o in (1, 2)})
        agreement[-1]["pixels_equal"] = float((masks["official"] == masks["segburn"]).mean())
    med = {side: statistics.median(r["frames_per_second"] for r in rows) for side, rows in runs.items()}
    result = {
        "workload": f"SAM 2.1 Hiera-T 1024x1024, formula weights (object-score bias "
                    f"+{args.obj_score_shift}), {args.frames} frames {H}x{W} JPEG, 2 objects "
                    f"(click, box) on frame 0, one forward propagation",
        "threads": args.threads, "reps": args.reps,
        "official_fps_median": med["official"], "segburn_fps_median": med["segburn"],
        "ratio_seconds_per_frame_segburn_over_official": med["official"] / med["segburn"],
        "official_peak_rss_mib_max": max(r["peak_rss_mib"] for r in runs["official"]),
        "segburn_peak_rss_mib_max": max(r["peak_rss_mib"] for r in runs["segburn"]),
        "last_frame_iou": agreement,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "runs": runs,
    }
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
    print(f"\nSAM 2.1 Hiera-T video tracking, {args.frames} frames {H}x{W}, 2 objects, "
          f"{args.threads} threads, median of {args.reps}")
    print(f"{'side':<10}{'frames/s':>10}{'s/frame':>10}{'init/decode s':>15}{'peak RSS MiB':>14}")
    for side, rows in runs.items():
        first = statistics.median(r.get("init_state_seconds", r.get("decode_seconds")) for r in rows)
        print(f"{side:<10}{med[side]:>10.3f}{1 / med[side]:>10.2f}{first:>15.2f}"
              f"{max(r['peak_rss_mib'] for r in rows):>14.0f}")
    print(f"ratio segburn / official (s per frame): "
          f"{result['ratio_seconds_per_frame_segburn_over_official']:.3f}")
    print(f"last-frame IoU per run: {agreement}")
    print(f"official min object score logit: "
          f"{min(r['min_object_score_logit'] for r in runs['official']):.3f} (> 0: present)")
    print(f"-> {args.json}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sam2", required=True, help="checkout of facebookresearch/sam2")
    p.add_argument("--track", default="target/release/track-sam2", help="segburn's track-sam2")
    p.add_argument("--out", default="target/side-by-side/video")
    p.add_argument("--json", help="result file (default OUT/../video.json)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--frames", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--obj-score-shift", type=float, default=1.5)
    p.add_argument("--child", choices=["prepare", "official"], help=argparse.SUPPRESS)
    p.add_argument("--ids", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.sam2 = os.path.abspath(args.sam2)
    args.json = args.json or os.path.join(os.path.dirname(os.path.abspath(args.out)), "video.json")
    sys.path.insert(0, os.path.join(HERE, "fixtures"))
    if args.child == "prepare":
        prepare(args)
    elif args.child == "official":
        official(args)
    else:
        orchestrate(args)


if __name__ == "__main__":
    main()
