#!/usr/bin/env python3
"""End-to-end training speed, the number a user sees: the official PIDNet `tools/train.py` and
segburn's `train` on the same data with the same recipe, images per second over the whole run,
data loading included, validation excluded (the `train-e2e` part of scripts/cpu_side_by_side.sh).

The official side runs `tools/train.py` itself (its `main`, the official dataset class with its
OpenCV augmentation and Canny edges, its DataLoader, OHEM, boundary losses, SGD and poly LR) on
the bundled sample dataset written as Cityscapes list files, in a fresh process per run, with
what it needs to run on a CPU and nothing else changed:
- `.cuda()` on tensors and modules returns them unchanged, `torch.cuda.device_count()` is 1 and
  `nn.DataParallel` is a plain wrapper (train.py hard-codes all three);
- `utils.function.validate` is skipped (validation is excluded on both sides); the time runs
  from the first call of `utils.function.train` (one epoch, DataLoader start included) to the
  end of the last epoch's checkpoint (`torch.save` of model and optimizer after every epoch, as
  segburn writes one per epoch; the final `final_state.pt` after it is not counted);
- tensorboardX is a no-op writer (not installed here), `np.int` is `int` (removed from NumPy,
  used by the last line of train.py);
- no ImageNet weights: an empty ImageNet-style file (segburn's quickstart starts from random
  weights too).
Its recipe is the quickstart's: PIDNet-S, 19 classes, crops 256x256 from base size 512 with the
official multi-scale 0.5-2.0 and flip, batch 4, 6 epochs of the 48 training images (72 steps),
OHEM 0.9 / 5000, lr 0.01, poly, SGD momentum 0.9, weight decay 5e-4. The official Cityscapes
class weights stay (the quickstart's are uniform: the same work). The segburn side runs
`train configs/quickstart.ron` with validation off and the same number of loader workers; its
time is the run's own (`finished at step N in X s`: from the loader's start to the end of the
last epoch's checkpoint, which segburn writes durably, with fsync).

Needs, besides PyTorch and NumPy: opencv-python(-headless) and yacs (the official code's).
Writes JSON with one row per loader-worker count.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

STEPS_PER_EPOCH = 12  # 48 training images, batch 4, drop_last
BATCH = 4


def write_official_inputs(work, data, epochs, workers):
    """The Cityscapes list files, an empty ImageNet file and the yacs config in `work`."""
    os.makedirs(os.path.join(work, "list"), exist_ok=True)
    link = os.path.join(work, "cityscapes")
    if not os.path.exists(link):
        os.symlink(os.path.abspath(data), link)
    for split in ("train", "val"):
        lines = []
        images = os.path.join(data, "leftImg8bit", split)
        for city in sorted(os.listdir(images)):
            for name in sorted(os.listdir(os.path.join(images, city))):
                stem = name[: -len("_leftImg8bit.png")]
                lines.append(f"leftImg8bit/{split}/{city}/{name} "
                             f"gtFine/{split}/{city}/{stem}_gtFine_labelIds.png")
        with open(os.path.join(work, "list", f"{split}.lst"), "w") as f:
            f.write("\n".join(lines) + "\n")
    import torch
    imagenet = os.path.join(work, "imagenet_none.pth.tar")
    torch.save({"state_dict": {}}, imagenet)
    cfg = os.path.join(work, "quickstart.yaml")
    with open(cfg, "w") as f:
        f.write(f"""GPUS: (0,)
OUTPUT_DIR: '{work}/output'
LOG_DIR: '{work}/log'
WORKERS: {workers}
PRINT_FREQ: 10
DATASET:
  DATASET: cityscapes
  ROOT: '{work}/'
  TEST_SET: 'list/val.lst'
  TRAIN_SET: 'list/train.lst'
  NUM_CLASSES: 19
MODEL:
  NAME: pidnet_small
  NUM_OUTPUTS: 2
  PRETRAINED: '{imagenet}'
LOSS:
  USE_OHEM: true
  OHEMTHRES: 0.9
  OHEMKEEP: 5000
  BALANCE_WEIGHTS: [0.4, 1.0]
  SB_WEIGHTS: 1.0
TRAIN:
  IMAGE_SIZE: [256, 256]
  BASE_SIZE: 512
  BATCH_SIZE_PER_GPU: {BATCH}
  SHUFFLE: true
  BEGIN_EPOCH: 0
  END_EPOCH: {epochs}
  RESUME: false
  OPTIMIZER: sgd
  LR: 0.01
  WD: 0.0005
  MOMENTUM: 0.9
  NESTEROV: false
  FLIP: true
  MULTI_SCALE: true
  IGNORE_LABEL: 255
  SCALE_FACTOR: 16
TEST:
  IMAGE_SIZE: [512, 256]
  BASE_SIZE: 512
  BATCH_SIZE_PER_GPU: 1
""")
    return cfg


def official_child(pidnet, cfg, threads):
    """Runs the official tools/train.py on the CPU (see the module text) and prints its timing."""
    import types

    import numpy as np
    import torch

    torch.set_num_threads(threads)
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.nn.Module.cuda = lambda self, *a, **k: self
    torch.cuda.device_count = lambda: 1

    class OneProcess(torch.nn.Module):
        def __init__(self, module, device_ids=None, **_):
            super().__init__()
            self.module = module

        def forward(self, *args, **kwargs):
            return self.module(*args, **kwargs)

    torch.nn.DataParallel = OneProcess

    class NullWriter:
        def __init__(self, *_, **__):
            pass

        def add_scalar(self, *_, **__):
            pass

        def close(self):
            pass

    tensorboard = types.ModuleType("tensorboardX")
    tensorboard.SummaryWriter = NullWriter
    sys.modules["tensorboardX"] = tensorboard
    np.int = int
    tools = os.path.join(pidnet, "tools")
    sys.path[:0] = [tools, pidnet]
    import utils.function as function

    # The run's time: from the first epoch's start to the end of the last epoch's checkpoint
    # (train.py saves model + optimizer after every epoch, as segburn does).
    times = {"epochs": 0}
    official_train, official_save = function.train, torch.save

    def timed_train(*args, **kwargs):
        times.setdefault("start", time.perf_counter())
        official_train(*args, **kwargs)
        times["epochs"] += 1

    def timed_save(obj, path, *args, **kwargs):
        official_save(obj, path, *args, **kwargs)
        if str(path).endswith("checkpoint.pth.tar"):
            times["last_checkpoint"] = time.perf_counter()

    function.train = timed_train
    torch.save = timed_save
    function.validate = lambda *_, **__: (0.0, 0.0, np.zeros(19))
    sys.argv = [os.path.join(tools, "train.py"), "--cfg", cfg, "--seed", "304"]
    import runpy
    runpy.run_path(sys.argv[0], run_name="__main__")
    seconds = times["last_checkpoint"] - times["start"]
    print("E2E " + json.dumps({"epochs": times["epochs"], "seconds": seconds}))


def run_official(args, workers, work):
    cfg = write_official_inputs(work, args.data, args.epochs, workers)
    command = [sys.executable, __file__, "--official-child", cfg, "--pidnet", args.pidnet,
               "--threads", str(args.threads)]
    output = subprocess.run(command, capture_output=True, text=True, cwd=work)
    lines = [l for l in output.stdout.splitlines() if l.startswith("E2E ")]
    if output.returncode != 0 or not lines:
        sys.exit(f"error: the official train.py failed (exit {output.returncode}):\n"
                 f"{output.stdout[-3000:]}\n{output.stderr[-3000:]}")
    result = json.loads(lines[-1][4:])
    if result["epochs"] != args.epochs:
        sys.exit(f"error: the official run trained {result['epochs']} epochs, not {args.epochs}")
    return result["seconds"]


def run_segburn(args, workers, work):
    run_dir = json.dumps(os.path.join(work, f"segburn-{workers}"))
    sets = [f"data.train_loader.num_workers={workers}", f"train.epochs={args.epochs}",
            "train.validate_at_end=false", "train.validate_every_epochs=0",
            f"train.run_dir={run_dir}"]
    command = [args.train, "configs/quickstart.ron"]
    for s in sets:
        command += ["--set", s]
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    output = subprocess.run(command, capture_output=True, text=True, env=env)
    found = re.search(r"finished at step (\d+) in ([0-9.]+) s", output.stdout + output.stderr)
    if output.returncode != 0 or not found:
        sys.exit(f"error: segburn train failed (exit {output.returncode}):\n"
                 f"{output.stdout[-3000:]}\n{output.stderr[-3000:]}")
    steps = int(found.group(1))
    if steps != args.epochs * STEPS_PER_EPOCH:
        sys.exit(f"error: segburn trained {steps} steps, not {args.epochs * STEPS_PER_EPOCH}")
    return float(found.group(2))


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pidnet", required=True, help="checkout of the official PIDNet code")
    parser.add_argument("--data", default="datasets/sample")
    parser.add_argument("--train", default="target/release/train", help="segburn's train binary")
    parser.add_argument("--workers", default="0,2", help="loader workers, both sides")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", required=False)
    parser.add_argument("--official-child", metavar="CFG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.official_child:
        official_child(args.pidnet, args.official_child, args.threads)
        return
    rows = []
    images = args.epochs * STEPS_PER_EPOCH * BATCH
    with tempfile.TemporaryDirectory(prefix="train-e2e ") as work:
        for workers in [int(w) for w in args.workers.split(",")]:
            row = {"workers": workers, "images": images}
            row["torch_load_before"] = loadavg()
            row["torch_s"] = run_official(args, workers, os.path.join(work, f"official {workers}"))
            row["segburn_load_before"] = loadavg()
            row["segburn_s"] = run_segburn(args, workers, work)
            row["load_after"] = loadavg()
            row["torch_images_per_s"] = images / row["torch_s"]
            row["segburn_images_per_s"] = images / row["segburn_s"]
            row["ratio"] = row["segburn_s"] / row["torch_s"]
            print(f"workers {workers}: PyTorch {row['torch_s']:.1f} s "
                  f"({row['torch_images_per_s']:.2f} img/s), segburn {row['segburn_s']:.1f} s "
                  f"({row['segburn_images_per_s']:.2f} img/s), segburn / PyTorch "
                  f"{row['ratio']:.2f}x", flush=True)
            rows.append(row)
    if args.json:
        import torch
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        meta = {"torch": torch.__version__, "segburn_commit": commit, "threads": args.threads,
                "epochs": args.epochs, "batch": BATCH, "crop": [256, 256]}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
