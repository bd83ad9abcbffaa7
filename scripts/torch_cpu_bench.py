#!/usr/bin/env python3
"""PyTorch CPU timings of the official code on exactly the workloads of segburn's CPU `bench`.

The other half of scripts/cpu_side_by_side.sh (which runs segburn's `bench` right after and
prints the ratios). Each row runs in a fresh subprocess, so that its peak resident memory is
its own: the whole process's VmHWM (/proc/self/status), as segburn's bench reports it. The JSON
also gives the resident size right after `import torch` (rss_after_import_bytes), torch's share.

Rows:
  pidnet-X-eval       PIDNet-X eval forward of the inference graph (augment=False, eval mode,
                      no_grad), 1x3x512x1024: `bench pidnet --size x`, first row.
  pidnet-X-train      PIDNet-X training step, 2x3x256x512: forward (augment=True), the official
                      FullModel loss (upsampling to the labels, OHEM CE with the Cityscapes class
                      weights on [p_aux, main] at [0.4, 1.0], boundary BCE x20, BAS-OHEM; its
                      pixel accuracy included), backward, SGD (momentum 0.9, wd 5e-4):
                      `bench pidnet --size x`, second row.
  pidnet-s-train-512  the same step for PIDNet-S at 2x3x512x512, for its peak RSS:
                      `bench --workloads train --sizes s --crop 512,512 --batch 2`.
  sam2-decoder        SAM 2.1 mask decoder forward, batch 1, multimask, high-res features,
                      prompt embeddings made outside the timing (16x16 embedding, 256x256 image):
                      `bench --workloads sam2`, first row.
  sam2-train          prompt encoder + mask decoder + bilinear 64->256 + the SAM2 training loss
                      (MultiStepMultiMasksAndIous with the released weights 20/1/1/1) + backward,
                      batch 4, no optimizer step: `bench --workloads sam2`, second row.

  hiera-X-encoder     SAM 2.1 Hiera-X image encoder (trunk + FpnNeck, scalp 1) forward, eval,
                      no_grad, 1x3x1024x1024: `bench --workloads hiera --hiera-sizes x`, first
                      row of the size.
  hiera-X-finetune-frozen / hiera-X-finetune-full
                      a fine-tuning step at batch 1, 1024x1024: encoder (under no_grad when
                      frozen) -> conv_s0/conv_s1 and no_mem_embed -> prompt encoder (two clicks
                      and a box) + mask decoder (multimask) -> bilinear 256->1024 -> the SAM2 loss
                      -> backward -> AdamW step: the second and third rows of the size.
                      X is t, s, b+ or l (--hiera-sizes; the Hiera rows have their own
                      --hiera-reps / --hiera-warmups, as one 1024x1024 step takes seconds).

  sam2-real-decoder-1 / sam2-real-decoder-64
                      SAM 2.1 prompt encoder + mask decoder at the real size: one 64x64 image
                      embedding shared by 1 or 64 one-click objects, multimask, as "segment
                      everything" decodes a batch: `bench --workloads sam2-real`, rows 1-2.
  sam2-real-everything
                      one SAM2AutomaticMaskGenerator pass (official defaults, Hiera-T) on a
                      1024x1024 image, with the masks it kept: rows 3-4 (candidates/s and masks
                      kept/s of the same pass). The sam2-real rows have --real-reps /
                      --real-warmups; scripts/torch_sam2_real.py says exactly what they run and
                      how the everything row's weights and image are shared with segburn.

Each row but sam2-real also reports its FLOPs (`flops`: one more untimed run under
torch.utils.flop_counter.FlopCounterMode, 2 per multiply-add of products, convolutions and
attentions), and the JSON's meta gives torch.mm's GFLOP/s on 2048x2048 f32 matrices at the same
threads (`gemm_2048_gflops`): the report turns both into each row's achieved FLOP rate.

Inputs are made as segburn's bench makes them: uniform images, the same synthetic block labels
(~10 % ignore pixels) and boundary map, two clicks (positive, negative) and one box per object.
Weights are PyTorch's default initialisation (speed does not depend on their values).

The official code is not part of segburn and must never be committed here: pass checkouts with
--pidnet (github.com/XuJiacong/PIDNet) and --sam2 (github.com/facebookresearch/sam2). Their
package-level imports need yacs / hydra / PIL / tqdm, which these workloads do not use: small
stand-ins are installed in sys.modules before the import, so only the modules that define the
measured layers and losses load.

Example:
  python scripts/torch_cpu_bench.py --pidnet ~/PIDNet --sam2 ~/sam2 --sizes s,m,l \\
      --reps 5 --warmups 2 --threads 2 --json torch-cpu.json
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

import torch

# The GPU script's Cityscapes class weights, PIDNet constructor arguments per size and `configs`
# stand-in (this folder is on sys.path when a script in it runs; no __pycache__ left in it).
sys.dont_write_bytecode = True
from torch_pidnet_bench import CLASS_WEIGHTS, SIZES as PIDNET_SIZES, stand_in_config
from torch_sam2_modules import HIERA_TRUNKS
from torch_sam2_bench import (hiera_encoder_forward, hiera_finetune_step, sam2_decoder_forward,
                              sam2_train_step)
import torch_sam2_real

EVAL_HW = (512, 1024)
TRAIN_NHW = (2, 256, 512)
MEMORY_NHW = (2, 512, 512)


# --- measurement helpers -------------------------------------------------------------------

def status_bytes(field):
    """A `kB` field of /proc/self/status (VmHWM: peak resident, VmRSS: current), or None."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss_bytes():
    """This process's peak resident memory: VmHWM, else getrusage (kB on Linux)."""
    peak = status_bytes("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def load_average():
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def timed(step, warmups, reps):
    """Wall-clock ms of `reps` runs after `warmups` untimed ones, summarised as segburn's
    bench does (median = the upper middle of the sorted runs)."""
    for _ in range(warmups):
        step()
    runs = []
    for _ in range(reps):
        start = time.perf_counter()
        step()
        runs.append((time.perf_counter() - start) * 1e3)
    ordered = sorted(runs)
    return dict(runs_ms=runs, median_ms=ordered[len(ordered) // 2], min_ms=ordered[0])


def count_flops(step):
    """FLOPs of one run of `step` as torch.utils.flop_counter counts them: 2 per multiply-add
    of the matrix products, convolutions and attentions (forward and backward; a backward
    attention's count includes its recomputed scores), nothing for element-wise work.

    FlopCounterMode itself also tracks modules, with hooks that fail on the SAM2 heads' train
    step ("Expected gradient function to be set"); this mode applies its per-op formulas only.
    """
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class Counter(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            formula = flop_registry.get(func._overloadpacket)
            if formula is not None:
                Counter.total += formula(*args, **kwargs, out_val=out)
            return out

    with Counter():
        step()
    return Counter.total


def gemm_peak_gflops(threads, size=2048, reps=9, warmups=2):
    """GFLOP/s of torch.mm on two f32 `size`x`size` matrices (median of `reps`): the peak the
    rows' FLOP rates are compared against (segburn's side: the gemm_peak example)."""
    torch.set_num_threads(threads)
    a, b = torch.rand(size, size), torch.rand(size, size)
    for _ in range(warmups):
        torch.mm(a, b)
    runs = []
    for _ in range(reps):
        start = time.perf_counter()
        torch.mm(a, b)
        runs.append(time.perf_counter() - start)
    return 2 * size ** 3 / sorted(runs)[reps // 2] / 1e9


# --- official code, imported behind stand-ins ----------------------------------------------

def import_pidnet(folder):
    """The official PIDNet model, losses and FullModel; `configs` (yacs) is replaced by the
    Cityscapes values the losses read."""
    stand_in_config()
    sys.path.insert(0, folder)
    from models.pidnet import PIDNet
    from utils.criterion import BondaryLoss, OhemCrossEntropy
    from utils.utils import FullModel
    return PIDNet, OhemCrossEntropy, BondaryLoss, FullModel


# --- inputs as segburn's bench makes them ----------------------------------------------------

def synthetic_targets(n, h, w, classes=19):
    """segburn's `synthetic_targets`: class blocks of 16x16 with ~1/20 ignore blocks, and a 0/1
    boundary map where a pixel differs from its right or lower neighbour."""
    b = torch.arange(n).view(n, 1, 1)
    y = torch.arange(h).view(1, h, 1) // 16
    x = torch.arange(w).view(1, 1, w) // 16
    labels = (b * 7 + y * 5 + x * 3) % (classes + 1)
    labels = torch.where(labels == classes, torch.full_like(labels, 255), labels)
    edges = torch.zeros(n, h, w)
    differs = (labels[:, :-1, :-1] != labels[:, :-1, 1:]) | (labels[:, :-1, :-1] != labels[:, 1:, :-1])
    edges[:, :-1, :-1] = differs.float()
    return labels, edges


# --- workloads -------------------------------------------------------------------------------

def pidnet_eval(args, size):
    PIDNet, _, _, _ = import_pidnet(args.pidnet)
    model = PIDNet(num_classes=19, augment=False, **PIDNET_SIZES[size]).eval()
    image = torch.rand(1, 3, *EVAL_HW)

    def step():
        with torch.no_grad():
            model(image)

    return f"PIDNet-{size.upper()} eval forward", "1x3x{}x{}".format(*EVAL_HW), step


def pidnet_train(args, size, nhw):
    PIDNet, OhemCrossEntropy, BondaryLoss, FullModel = import_pidnet(args.pidnet)
    model = PIDNet(num_classes=19, augment=True, **PIDNET_SIZES[size]).train()
    sem_loss = OhemCrossEntropy(ignore_label=255, thres=0.9, min_kept=131072,
                                weight=torch.tensor(CLASS_WEIGHTS))
    full = FullModel(model, sem_loss, BondaryLoss())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    n, h, w = nhw
    image = torch.rand(n, 3, h, w)
    labels, edges = synthetic_targets(n, h, w)

    def step():
        # The official train loop: FullModel, mean, zero_grad, backward, step.
        losses, _, _, _ = full(image, labels, edges)
        optimizer.zero_grad(set_to_none=True)
        losses.mean().backward()
        optimizer.step()

    return (f"PIDNet-{size.upper()} train step (full loss+SGD)", f"{n}x3x{h}x{w}", step)


def workloads(sizes, hiera_sizes=()):
    """Row id -> function(args) returning (name, shape, step), in run order."""
    rows = {}
    for size in sizes:
        rows[f"pidnet-{size}-eval"] = lambda a, s=size: pidnet_eval(a, s)
        rows[f"pidnet-{size}-train"] = lambda a, s=size: pidnet_train(a, s, TRAIN_NHW)
    rows["pidnet-s-train-512"] = lambda a: pidnet_train(a, "s", MEMORY_NHW)
    rows["sam2-decoder"] = sam2_decoder_forward
    rows["sam2-train"] = sam2_train_step
    for size in hiera_sizes:
        rows[f"hiera-{size}-encoder"] = lambda a, s=size: hiera_encoder_forward(a, s)
        rows[f"hiera-{size}-finetune-frozen"] = lambda a, s=size: hiera_finetune_step(a, s, True)
        rows[f"hiera-{size}-finetune-full"] = lambda a, s=size: hiera_finetune_step(a, s, False)
    rows.update(torch_sam2_real.workloads())
    return rows


def part(row):
    """The --parts group of a row id."""
    return "sam2-real" if row.startswith("sam2-real-") else row.split("-")[0]


def repeats(args, row):
    """(warm-ups, timed runs) of a row: the Hiera and sam2-real rows have their own."""
    if row.startswith("hiera-"):
        return args.hiera_warmups, args.hiera_reps
    if part(row) == "sam2-real":
        return args.real_warmups, args.real_reps
    return args.warmups, args.reps


# --- driver ----------------------------------------------------------------------------------

def run_worker(args):
    """One row in this (fresh) process; prints one `RESULT {json}` line."""
    # What the process holds before any workload: the Python interpreter and torch's libraries
    # (a CUDA-enabled wheel maps and touches more of them than a CPU-only one).
    rss_after_import = status_bytes("VmRSS")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    name, shape, step = workloads(args.sizes, args.hiera_sizes)[args.worker](args)
    result = dict(row=args.worker, name=name, shape=shape,
                  rss_after_import_bytes=rss_after_import)
    result.update(timed(step, *repeats(args, args.worker)))
    result.update(getattr(step, "extra", dict)())  # e.g. the masks an everything pass kept
    result["peak_rss_bytes"] = peak_rss_bytes()
    if part(args.worker) != "sam2-real":
        # One more run, untimed, to count the row's floating-point work (after the peak RSS:
        # the counter keeps nothing large, but it is not what the row measures).
        result["flops"] = count_flops(step)
    result["threads"] = torch.get_num_threads()
    print("RESULT " + json.dumps(result), flush=True)


def run_all(args):
    rows = [r for r in workloads(args.sizes, args.hiera_sizes)
            if (args.rows is None or r in args.rows) and part(r) in args.parts]
    meta = dict(torch=torch.__version__, threads=args.threads,
                cpu_capability=torch.backends.cpu.get_cpu_capability(),
                omp_wait_policy=os.environ.get("OMP_WAIT_POLICY", "(default)"),
                warmups=args.warmups, reps=args.reps, hiera_warmups=args.hiera_warmups,
                hiera_reps=args.hiera_reps, real_warmups=args.real_warmups,
                real_reps=args.real_reps, load_average_before=load_average(),
                gemm_2048_gflops=gemm_peak_gflops(args.threads))
    print(f"torch.mm f32 2048x2048x2048 at {args.threads} threads: "
          f"{meta['gemm_2048_gflops']:.1f} GFLOP/s", flush=True)
    if "sam2-real-everything" in rows:
        # The same weights and pixels for segburn's bench, which reads them after this run.
        for path in torch_sam2_real.write_inputs(args.sam2, args.sam2_real_inputs):
            print(f"wrote {path}", flush=True)
    print(f"PyTorch {meta['torch']}, torch.set_num_threads({args.threads}), "
          f"CPU capability {meta['cpu_capability']}, {args.reps} timed runs after "
          f"{args.warmups} warm-ups ({args.hiera_reps} after {args.hiera_warmups} for Hiera, "
          f"{args.real_reps} after {args.real_warmups} for sam2-real)",
          flush=True)
    print(f"{'row':20} {'workload':42} {'shape':14} {'median ms':>10} {'min ms':>10} "
          f"{'peak RSS MiB':>12}", flush=True)
    results = []
    for row in rows:
        command = [sys.executable, os.path.abspath(__file__), "--worker", row]
        command += forwarded_flags(args)
        done = subprocess.run(command, capture_output=True, text=True)
        lines = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
        if done.returncode != 0 or not lines:
            sys.exit(f"row {row} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        result = json.loads(lines[-1][len("RESULT "):])
        results.append(result)
        print(f"{row:20} {result['name']:42} {result['shape']:14} {result['median_ms']:10.1f} "
              f"{result['min_ms']:10.1f} {result['peak_rss_bytes'] / 2**20:12.0f}", flush=True)
    meta["load_average_after"] = load_average()
    if args.json:
        with open(args.json, "w") as out:
            json.dump(dict(meta=meta, rows=results), out, indent=2)
        print(f"results written to {args.json}")


def forwarded_flags(args):
    flags = ["--sizes", ",".join(args.sizes), "--reps", str(args.reps),
             "--warmups", str(args.warmups), "--threads", str(args.threads),
             "--hiera-sizes", ",".join(args.hiera_sizes), "--hiera-reps", str(args.hiera_reps),
             "--hiera-warmups", str(args.hiera_warmups), "--real-reps", str(args.real_reps),
             "--real-warmups", str(args.real_warmups),
             "--sam2-real-inputs", args.sam2_real_inputs]
    for name in ("pidnet", "sam2"):
        if getattr(args, name):
            flags += [f"--{name}", getattr(args, name)]
    return flags


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="PyTorch CPU timings and peak RSS of the official PIDNet and SAM2 code on "
                    "the workloads of segburn's CPU `bench` (one fresh process per row).")
    parser.add_argument("--pidnet", metavar="DIR",
                        help="checkout of github.com/XuJiacong/PIDNet (needed for pidnet-* rows)")
    parser.add_argument("--sam2", metavar="DIR",
                        help="checkout of github.com/facebookresearch/sam2 (needed for sam2-* rows)")
    parser.add_argument("--sizes", default="s,m,l",
                        help="PIDNet sizes for the eval/train rows, comma-separated (default s,m,l)")
    parser.add_argument("--hiera-sizes", default="t,s",
                        help="SAM 2.1 sizes for the hiera-* rows, comma-separated: t,s,b+,l "
                             "(default t,s)")
    parser.add_argument("--parts", default="pidnet,sam2,hiera",
                        help="which groups of rows, comma-separated: pidnet, sam2, hiera, "
                             "sam2-real (default pidnet,sam2,hiera)")
    parser.add_argument("--rows", help="only these row ids, comma-separated (default: all; "
                                       "ids are listed in this script's docstring)")
    parser.add_argument("--hiera-reps", type=int, default=3,
                        help="timed runs per hiera-* row (default 3)")
    parser.add_argument("--hiera-warmups", type=int, default=1,
                        help="untimed runs before timing a hiera-* row (default 1)")
    parser.add_argument("--real-reps", type=int, default=3,
                        help="timed runs per sam2-real-* row (default 3)")
    parser.add_argument("--real-warmups", type=int, default=1,
                        help="untimed runs before timing a sam2-real-* row (default 1)")
    parser.add_argument("--sam2-real-inputs", metavar="DIR", default="target/sam2-real",
                        help="where sam2-real-everything's checkpoint and image are written "
                             "(for segburn's bench too; default target/sam2-real)")
    parser.add_argument("--reps", type=int, default=5, help="timed runs per row (median reported)")
    parser.add_argument("--warmups", type=int, default=2, help="untimed runs before timing")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    parser.add_argument("--json", metavar="FILE", help="also write the results to this file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.sizes = [s.strip().lower() for s in args.sizes.split(",") if s.strip()]
    if bad := [s for s in args.sizes if s not in PIDNET_SIZES]:
        parser.error(f"--sizes: unknown PIDNet size {bad[0]!r}; use s, m or l")
    args.hiera_sizes = [s.strip().lower() for s in args.hiera_sizes.split(",") if s.strip()]
    if bad := [s for s in args.hiera_sizes if s not in HIERA_TRUNKS]:
        parser.error(f"--hiera-sizes: unknown SAM 2.1 size {bad[0]!r}; use t, s, b+ or l")
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if bad := [p for p in args.parts if p not in ("pidnet", "sam2", "hiera", "sam2-real")]:
        parser.error(f"--parts: unknown part {bad[0]!r}; use pidnet, sam2, hiera, sam2-real")
    known = workloads(args.sizes, args.hiera_sizes)
    if args.rows is not None:
        args.rows = [r.strip() for r in args.rows.split(",") if r.strip()]
        if bad := [r for r in args.rows if r not in known]:
            parser.error(f"--rows: unknown row {bad[0]!r}; choose from {', '.join(known)}")
    if (min(args.reps, args.hiera_reps, args.real_reps, args.threads) < 1
            or min(args.warmups, args.hiera_warmups, args.real_warmups) < 0):
        parser.error("--reps, --hiera-reps, --real-reps and --threads must be at least 1, the "
                     "warm-ups at least 0")
    if args.worker is not None and args.worker not in known:
        parser.error(f"--worker {args.worker}: unknown row")
    wanted = [args.worker] if args.worker else args.rows if args.rows is not None else [
        r for r in known if part(r) in args.parts]
    for flag, prefixes in (("pidnet", ("pidnet-",)), ("sam2", ("sam2-", "hiera-"))):
        folder = getattr(args, flag)
        if any(r.startswith(prefixes) for r in wanted) and not folder:
            parser.error(f"--{flag} DIR is needed for the {'/'.join(prefixes)}* rows (or leave "
                         f"them out with --parts or --rows)")
        if folder and not os.path.isdir(folder):
            parser.error(f"--{flag} {folder}: no such folder")
    return args


def main():
    args = parse_args()
    if args.worker:
        run_worker(args)
    else:
        run_all(args)


if __name__ == "__main__":
    main()
