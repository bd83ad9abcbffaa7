#!/usr/bin/env python3
"""The table of scripts/cpu_side_by_side.sh: pairs the rows of scripts/torch_cpu_bench.py's JSON
with those of segburn's `bench` JSON files, prints both median times and the ratio
segburn / PyTorch per row (below 1: segburn is faster), the peak RSS of both where both measure
it, and writes everything to DIR/side-by-side.json. Standard library only.

Inputs in DIR: torch.json, and for the parts that were run: segburn-pidnet-X.json
(`bench pidnet --size x --json`) and segburn-memory.json (`bench --workloads train --sizes s
--crop 512,512 --batch 2 --json`); segburn-sam2.json (`bench --workloads sam2 --json`);
segburn-hiera-X.json (`bench --workloads hiera --hiera-sizes x --json`); segburn-sam2-real.json
(`bench --workloads sam2-real --sam2-checkpoint F --sam2-image F --json`), whose everything
pass is followed by a line with the masks each side kept, masks kept/s and candidates/s;
optionally segburn-gemm.json (the gemm_peak example), for the FLOP-rate table (each row's FLOPs
from torch.json over each side's time, against both sides' plain 2048^3 product).
"""
import argparse
import json
import os
import sys


def load(folder, name):
    path = os.path.join(folder, name)
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as error:
        sys.exit(f"error: cannot read {path}: {error}")


def suite_row(report, key, path):
    """The row of a `bench` suite report whose key is `key`."""
    for row in report["rows"]:
        if row["key"] == key:
            return row
    sys.exit(f"error: {path} has no row {key!r} (rows: {[r['key'] for r in report['rows']]})")


def segburn_rows(folder, sizes, parts, hiera_sizes):
    """Row id (as torch_cpu_bench.py names them) -> (median ms, peak RSS bytes or None, and
    for the everything pass the masks it kept)."""
    rows = {}

    def suite_rows(name, pairs):
        report = load(folder, name)
        for row_id, key in pairs:
            row = suite_row(report, key, name)
            rows[row_id] = (row["median_ms"], row["peak_memory_bytes"])

    if "pidnet" in parts:
        for size in sizes:
            report = load(folder, f"segburn-pidnet-{size}.json")
            eval_row, train_row = report["rows"]
            rows[f"pidnet-{size}-eval"] = (eval_row["timing"]["median_ms"], None)
            rows[f"pidnet-{size}-train"] = (train_row["timing"]["median_ms"], None)
        suite_rows("segburn-memory.json",
                   [("pidnet-s-train-512", "train/PIDNet-S/f32/2x3x512x512")])
    if "sam2" in parts:
        suite_rows("segburn-sam2.json",
                   [("sam2-decoder", "sam2/decoder-fwd/f32/1x256x16x16"),
                    ("sam2-train", "sam2/train-step/f32/4x256x16x16")])
    if "sam2-real" in parts:
        name = "segburn-sam2-real.json"
        suite_rows(name, [(f"sam2-real-decoder-{p}", f"sam2-real/decoder+prompts x{p}/f32/"
                                                     f"{p}x256x64x64") for p in (1, 64)])
        report = load(folder, name)
        every = suite_row(report, "sam2-real/everything Hiera-T/f32/1x3x1024x1024", name)
        kept = suite_row(report, "sam2-real/everything Hiera-T kept/f32/1x3x1024x1024", name)
        rows["sam2-real-everything"] = (every["median_ms"], every["peak_memory_bytes"],
                                        round(kept["value"] * kept["median_ms"] / 1e3))
    for size in hiera_sizes if "hiera" in parts else []:
        suite_rows(f"segburn-hiera-{size}.json", [
            (f"hiera-{size}-{row}", f"hiera/Hiera-{size.upper()} {what}/f32/1x3x1024x1024")
            for row, what in (("encoder", "encoder-fwd"), ("finetune-frozen", "finetune-frozen"),
                              ("finetune-full", "finetune-full"))])
    return rows


def load_gemm(folder):
    """segburn-gemm.json (the gemm_peak example), or None when it was not run."""
    path = os.path.join(folder, "segburn-gemm.json")
    return load(folder, "segburn-gemm.json") if os.path.exists(path) else None


def print_flop_rates(table, torch_gemm_gflops, segburn_gemm):
    """Each row's achieved GFLOP/s on both sides (the row's FLOPs as PyTorch's counter counts
    them, over each side's median time) against each side's plain 2048^3 product."""
    rows = [r for r in table if r.get("flops")]
    if not rows:
        return
    peaks = []
    if torch_gemm_gflops:
        peaks.append(f"torch.mm {torch_gemm_gflops:.0f}")
    if segburn_gemm:
        peaks.append(f"segburn's gemm {segburn_gemm['gflops']:.0f}")
    print(f"\nachieved FLOP rate (FLOPs of the official model as torch's FlopCounterMode counts "
          f"them / median time); plain f32 2048^3 product: {', '.join(peaks) or '?'} GFLOP/s")
    print(f"{'workload':38} {'GFLOP':>8} {'PyTorch GFLOP/s':>16} {'segburn GFLOP/s':>16}")
    for r in rows:
        gflop = r["flops"] / 1e9
        r["torch_gflops_per_s"] = gflop / (r["torch_median_ms"] / 1e3)
        r["segburn_gflops_per_s"] = gflop / (r["segburn_median_ms"] / 1e3)
        print(f"{r['workload']:38} {gflop:8.1f} {r['torch_gflops_per_s']:16.1f} "
              f"{r['segburn_gflops_per_s']:16.1f}")


def load_text(values):
    return " ".join(f"{v:.2f}" for v in values) if values else "?"


def mib(value):
    return f"{value / 2**20:.0f}" if value is not None else "-"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="the --out folder of cpu_side_by_side.sh")
    parser.add_argument("--sizes", default="s,m,l", help="PIDNet sizes that were run")
    parser.add_argument("--parts", default="pidnet,sam2,hiera",
                        help="the groups of rows that were run")
    parser.add_argument("--hiera-sizes", default="t,s", help="SAM 2.1 sizes that were run")
    parser.add_argument("--threads", type=int, default=2, help="threads both sides used")
    parser.add_argument("--segburn-load", nargs=2, metavar=("BEFORE", "AFTER"),
                        help="load averages around the segburn runs ('1m 5m 15m')")
    parser.add_argument("--commit", default="unknown", help="segburn commit that was measured")
    args = parser.parse_args()
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]

    torch = load(args.folder, "torch.json")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    hiera_sizes = [s.strip() for s in args.hiera_sizes.split(",") if s.strip()]
    segburn = segburn_rows(args.folder, sizes, parts, hiera_sizes)
    meta = torch["meta"]
    table = []
    for row in torch["rows"]:
        if row["row"] not in segburn:
            continue
        seg_ms, seg_peak, *seg_kept = segburn[row["row"]]
        if "masks_kept" in row:
            every = dict(candidates=row["candidates"], torch_masks_kept=row["masks_kept"],
                         segburn_masks_kept=seg_kept[0])
        table.append(dict(
            row=row["row"], workload=row["name"], shape=row["shape"],
            torch_median_ms=row["median_ms"], segburn_median_ms=seg_ms,
            ratio=seg_ms / row["median_ms"],
            torch_peak_rss_bytes=row["peak_rss_bytes"],
            torch_rss_after_import_bytes=row.get("rss_after_import_bytes"),
            segburn_peak_rss_bytes=seg_peak, flops=row.get("flops"),
            **(every if "masks_kept" in row else {})))

    print(f"\nsegburn {args.commit} vs PyTorch {meta['torch']}, {args.threads} threads each, "
          f"{meta['reps']} timed runs after {meta['warmups']} warm-ups (medians)"
          + (f"; Hiera rows {meta['hiera_reps']} after {meta['hiera_warmups']}"
             if "hiera" in parts and "hiera_reps" in meta else "")
          + (f"; sam2-real rows {meta['real_reps']} after {meta['real_warmups']}"
             if "sam2-real" in parts and "real_reps" in meta else ""))
    segburn_load = args.segburn_load or ["?", "?"]
    print(f"load average (1/5/15 min): PyTorch {load_text(meta['load_average_before'])} -> "
          f"{load_text(meta['load_average_after'])}; segburn {segburn_load[0]} -> {segburn_load[1]}")
    if meta.get("omp_wait_policy", "(default)") != "(default)":
        print(f"PyTorch ran with OMP_WAIT_POLICY={meta['omp_wait_policy']}")
    print(f"{'workload':38} {'shape':13} {'PyTorch ms':>10} {'segburn ms':>10} {'ratio':>6}  "
          f"{'peak RSS MiB: PyTorch (import) / segburn':>40}")
    for r in table:
        memory = ""
        if r["segburn_peak_rss_bytes"] is not None:
            memory = (f"{mib(r['torch_peak_rss_bytes'])} ({mib(r['torch_rss_after_import_bytes'])})"
                      f" / {mib(r['segburn_peak_rss_bytes'])}")
        print(f"{r['workload']:38} {r['shape']:13} {r['torch_median_ms']:10.1f} "
              f"{r['segburn_median_ms']:10.1f} {r['ratio']:5.2f}x  {memory:>40}")
    print("ratio = segburn / PyTorch time (below 1: segburn is faster); (import) = PyTorch's "
          "resident size right after `import torch`")
    print_flop_rates(table, meta.get("gemm_2048_gflops"), load_gemm(args.folder))
    for r in table:
        if r["row"] == "pidnet-s-train-512" and r["segburn_peak_rss_bytes"]:
            torch_peak, seg_peak = r["torch_peak_rss_bytes"], r["segburn_peak_rss_bytes"]
            above_import = torch_peak - (r["torch_rss_after_import_bytes"] or 0)
            print(f"peak RSS of the PIDNet-S train step at {r['shape']}: segburn {mib(seg_peak)} "
                  f"MiB, PyTorch {mib(torch_peak)} MiB ({mib(above_import)} MiB above its "
                  f"import): segburn / PyTorch = {seg_peak / torch_peak:.2f}x")

    for r in table:
        if "candidates" in r:
            side = {who: f"{r[f'{who}_masks_kept']} masks kept "
                         f"({r[f'{who}_masks_kept'] / r[f'{who}_median_ms'] * 1e3:.1f}/s), "
                         f"{r['candidates'] / r[f'{who}_median_ms'] * 1e3:.1f} candidates/s"
                    for who in ("torch", "segburn")}
            print(f"segment everything, same weights and image: PyTorch {side['torch']}; "
                  f"segburn {side['segburn']} (candidates = clicks x 3, weight-independent)")

    out = os.path.join(args.folder, "side-by-side.json")
    with open(out, "w") as f:
        json.dump(dict(commit=args.commit, threads=args.threads, torch=meta,
                       segburn_load_average=args.segburn_load,
                       segburn_gemm=load_gemm(args.folder), rows=table), f, indent=2)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
