#!/usr/bin/env python3
"""PyTorch eager reference timings for the GPU check (scripts/gpu_check.sh, stage `torch`).

Times the official PIDNet code on the same workloads as segburn's `bench`, for a same-machine
ratio: eval FPS at 1x3x1024x2048 (S/M/L, F32 and autocast Bf16) and the training step of
PIDNet-S at 12x3x1024x1024 with the official FullModel loss stack (OHEM CE with class weights
on [p_aux, main] at [0.4, 1.0], boundary BCE x20, BAS-OHEM) + SGD, in F32 and autocast Bf16.

The official code (github.com/XuJiacong/PIDNet) is not part of segburn and must never be
committed here: pass the folder of a checkout with --official. Its `configs` module needs
yacs, so a minimal stand-in with the Cityscapes values is installed before the import.
"""
import argparse
import json
import statistics
import sys
import time
import types

import torch
import torch.nn.functional as F

CLASS_WEIGHTS = [0.8373, 0.918, 0.866, 1.0345, 1.0166, 0.9969, 0.9754, 1.0489, 0.8786, 1.0023,
                 0.9539, 0.9843, 1.1116, 0.9037, 1.0865, 1.0955, 1.0865, 1.1529, 1.0507]
SIZES = {"s": dict(m=2, n=3, planes=32, ppm_planes=96, head_planes=128),
         "m": dict(m=2, n=3, planes=64, ppm_planes=96, head_planes=128),
         "l": dict(m=3, n=4, planes=64, ppm_planes=112, head_planes=256)}


def stand_in_config():
    ns = types.SimpleNamespace
    config = ns(LOSS=ns(BALANCE_WEIGHTS=[0.4, 1.0], SB_WEIGHTS=1.0, USE_OHEM=True,
                        OHEMTHRES=0.9, OHEMKEEP=131072),
                MODEL=ns(NUM_OUTPUTS=2, ALIGN_CORNERS=True),
                TRAIN=ns(IGNORE_LABEL=255))
    module = types.ModuleType("configs")
    module.config = config
    sys.modules["configs"] = module


def timed(fn, warmups, reps):
    for _ in range(warmups):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        runs.append((time.perf_counter() - start) * 1e3)
    return statistics.median(runs), min(runs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--official", required=True, help="checkout of the official PIDNet code")
    parser.add_argument("--json")
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    stand_in_config()
    sys.path.insert(0, args.official)
    from models.pidnet import PIDNet
    from utils.criterion import BondaryLoss, OhemCrossEntropy

    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda:0")
    rows = []

    def record(workload, size, dtype, shape, items, median, minimum, unit):
        peak = torch.cuda.max_memory_allocated() / 2**20
        rows.append(dict(workload=workload, model=f"PIDNet-{size.upper()}", precision=dtype,
                         shape=shape, value=items / (median / 1e3), unit=unit,
                         median_ms=median, min_ms=minimum, peak_allocated_mib=peak))
        print(f"{workload:6} PIDNet-{size.upper()} {dtype:5} {shape:16} {items / (median / 1e3):9.2f} {unit}"
              f"  median {median:8.1f} ms  peak {peak:8.0f} MiB", flush=True)

    for size in "sml":
        model = PIDNet(num_classes=19, augment=False, **SIZES[size]).to(device).eval()
        image = torch.randn(1, 3, 1024, 2048, device=device)
        for dtype in ("f32", "bf16"):
            torch.cuda.reset_peak_memory_stats()

            def eval_step():
                with torch.no_grad(), torch.autocast("cuda", torch.bfloat16, enabled=dtype == "bf16"):
                    logits = model(image)
                    logits = F.interpolate(logits.float(), size=(1024, 2048), mode="bilinear",
                                           align_corners=True)
                    logits.argmax(1).cpu()

            median, minimum = timed(eval_step, args.warmups, args.reps)
            record("eval", size, dtype, "1x3x1024x2048", 1, median, minimum, "FPS")
        del model

    weights = torch.tensor(CLASS_WEIGHTS, device=device)
    sem_loss = OhemCrossEntropy(ignore_label=255, thres=0.9, min_kept=131072, weight=weights)
    bd_loss = BondaryLoss()
    model = PIDNet(num_classes=19, augment=True, **SIZES["s"]).to(device).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    batch = torch.randn(12, 3, 1024, 1024, device=device)
    labels = torch.randint(0, 19, (12, 1024, 1024), device=device)
    labels[:, ::10] = 255
    edges = (torch.rand(12, 1024, 1024, device=device) > 0.9).float()
    for dtype in ("bf16", "f32"):
        torch.cuda.reset_peak_memory_stats()

        def train_step():
            with torch.autocast("cuda", torch.bfloat16, enabled=dtype == "bf16"):
                outputs = model(batch)
            outputs = [F.interpolate(o.float(), size=(1024, 1024), mode="bilinear", align_corners=True)
                       for o in outputs]
            loss_s = sem_loss(outputs[:-1], labels)
            loss_b = bd_loss(outputs[-1], edges)
            filler = torch.ones_like(labels) * 255
            bd_label = torch.where(torch.sigmoid(outputs[-1][:, 0, :, :]) > 0.8, labels, filler)
            loss_sb = sem_loss(outputs[-2], bd_label)
            loss = (loss_s + loss_b + loss_sb).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

        median, minimum = timed(train_step, max(1, args.warmups - 1), max(3, args.reps // 2))
        record("train", "s", dtype, "12x3x1024x1024", 12, median, minimum, "images/s")

    meta = dict(torch=torch.__version__, cuda=torch.version.cuda,
                device=torch.cuda.get_device_name(0), cudnn_benchmark=True)
    print(json.dumps(meta))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(meta=meta, rows=rows), f, indent=2)


if __name__ == "__main__":
    main()
