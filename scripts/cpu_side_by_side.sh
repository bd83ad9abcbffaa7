#!/usr/bin/env bash
# segburn vs PyTorch on the same CPU, the same workloads, in one run (issue 13).
#
# Usage:
#   scripts/cpu_side_by_side.sh --pidnet DIR --sam2 DIR
#       [--parts pidnet,sam2,hiera,sam2-real,train-e2e,video] [--e2e-workers 0,2]
#       [--sizes s,m,l] [--hiera-sizes t,s] [--reps N] [--warmups N] [--hiera-reps N]
#       [--hiera-warmups N] [--real-reps N] [--real-warmups N] [--video-reps N]
#       [--video-frames N] [--threads N] [--python PY] [--out DIR]
#
#   --pidnet DIR   checkout of github.com/XuJiacong/PIDNet (never committed here; only needed
#                  for the pidnet and train-e2e parts)
#   --sam2 DIR     checkout of github.com/facebookresearch/sam2 (never committed here; for the
#                  sam2, hiera, sam2-real and video parts)
#   --parts        which groups of rows (default pidnet,sam2,hiera; sam2-real is opt-in: it
#                  takes minutes a run on 2 threads; so is train-e2e, the end-to-end training
#                  runs of scripts/train_e2e_bench.py: the official tools/train.py against
#                  `segburn train`, the quickstart's 72 steps per run, about 5 minutes; and so
#                  is video, scripts/sam2_video_bench.py: the official SAM2VideoPredictor
#                  against `track-sam2`, Hiera-T at 1024x1024 on a 16-frame clip, 2 objects:
#                  about 4 minutes a run for PyTorch and 30 for segburn on 2 threads, 2026-12-07)
#   --e2e-workers  loader workers of the train-e2e runs, both sides (default 0,2)
#   --sizes        PIDNet sizes (default s,m,l)
#   --hiera-sizes  SAM 2.1 sizes of the hiera part: t,s,b+,l (default t,s)
#   --reps N       timed runs per row, both sides (default 5; the median is reported)
#   --warmups N    untimed runs before timing, both sides (default 2)
#   --hiera-reps N, --hiera-warmups N
#                  the same for the hiera rows (default 3 and 1: a 1024x1024 step takes seconds)
#   --real-reps N, --real-warmups N
#                  the same for the sam2-real rows (default 3 and 1: one everything pass decodes
#                  1024 clicks)
#   --video-reps N, --video-frames N
#                  runs per side of the video part, alternating sides (default 3; the median is
#                  reported), and the frames of its synthetic 480x640 clip (default 16)
#   --threads N    compute threads, both sides (default 2): torch.set_num_threads(N) and
#                  RAYON_NUM_THREADS=N for segburn
#   --python PY    a Python with PyTorch (default: $PYTHON, else python3)
#   --out DIR      where the JSON files go (default target/side-by-side)
#
# It builds `bench` and the gemm_peak example (cargo build --release --workspace), runs
# scripts/torch_cpu_bench.py (official code, one fresh process per row) and then segburn's
# `bench` on the same rows, records the load average before and after each side, and prints a
# table with both median times and the ratio segburn / PyTorch per row (below 1: segburn is
# faster), and peak RSS where both sides measure it; then each row's achieved FLOP rate on both
# sides (the row's FLOPs as torch's flop counter counts the official model, over each side's
# time) against the machine's plain f32 2048^3 product (torch.mm, and segburn's gemm by the
# gemm_peak example of crates/kernels). Everything is written to DIR/side-by-side.json (the
# inputs: DIR/torch.json and DIR/segburn-*.json).
#
# The rows (see scripts/torch_cpu_bench.py for what each one runs):
#   PIDNet-X eval forward 1x3x512x1024 and train step 2x3x256x512   <-> bench pidnet --size x
#   SAM2 decoder forward (batch 1) and train step (batch 4)          <-> bench --workloads sam2
#   PIDNet-S train step 2x3x512x512, peak RSS                        <-> bench --workloads train
#                                                        --sizes s --crop 512,512 --batch 2
#   SAM 2.1 Hiera-X encoder forward 1x3x1024x1024, fine-tuning step   <-> bench --workloads hiera
#     at batch 1 with the encoder frozen / trainable (+ peak RSS)         --hiera-sizes x
#   SAM 2.1 real size (part sam2-real):                              <-> bench --workloads sam2-real
#     prompt encoder + mask decoder on one 64x64 embedding (1024x1024 input, high-res features),
#     multimask, 1 click and 64 one-click objects sharing the embedding (one "segment
#     everything" batch; prompt encoding included, click mapping and the upscale to the image
#     not); one segment-everything pass with Hiera-T on a 1024x1024 image at the official
#     defaults (32x32 clicks, batches of 64; preprocessing, encoder, decoder batches, filters,
#     NMS, RLE), with the masks each side kept. PyTorch writes the pass's model (official
#     random init, IoU-head bias +4: with these weights no mask is kept, see
#     scripts/torch_sam2_real.py) and image to DIR/sam2-real/ and segburn loads the same files
#     (--sam2-checkpoint, --sam2-image).
# Measure on a quiet machine: other programs on the cores slow both sides, unevenly (PyTorch's
# OpenMP threads spin at barriers and suffer more from preemption than Rayon's). On a loaded
# machine, OMP_WAIT_POLICY=PASSIVE scripts/cpu_side_by_side.sh ... is the fairer setting (the
# table says when it was set); on a quiet one keep the default, which is what PyTorch users get.
set -euo pipefail

cd "$(dirname "$0")/.."
pidnet="" sam2="" parts="pidnet,sam2,hiera" e2e_workers="0,2" sizes="s,m,l" hiera_sizes="t,s"
reps=5 warmups=2 hiera_reps=3 hiera_warmups=1 real_reps=3 real_warmups=1 threads=2
video_reps=3 video_frames=16
python="${PYTHON:-python3}" out="target/side-by-side"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --pidnet) pidnet="$2"; shift 2 ;;
        --sam2) sam2="$2"; shift 2 ;;
        --parts) parts="$2"; shift 2 ;;
        --e2e-workers) e2e_workers="$2"; shift 2 ;;
        --sizes) sizes="$2"; shift 2 ;;
        --hiera-sizes) hiera_sizes="$2"; shift 2 ;;
        --hiera-reps) hiera_reps="$2"; shift 2 ;;
        --hiera-warmups) hiera_warmups="$2"; shift 2 ;;
        --real-reps) real_reps="$2"; shift 2 ;;
        --real-warmups) real_warmups="$2"; shift 2 ;;
        --video-reps) video_reps="$2"; shift 2 ;;
        --video-frames) video_frames="$2"; shift 2 ;;
        --reps) reps="$2"; shift 2 ;;
        --warmups) warmups="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --python) python="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
has_part() { [[ ",$parts," == *",$1,"* ]]; }
if { has_part pidnet || has_part train-e2e; } && [[ -z "$pidnet" ]]; then
    echo "error: --pidnet DIR is required for the pidnet and train-e2e parts (a checkout of the official code)" >&2
    exit 2
fi
if { has_part sam2 || has_part hiera || has_part sam2-real || has_part video; } && [[ -z "$sam2" ]]; then
    echo "error: --sam2 DIR is required for the sam2, hiera, sam2-real and video parts (a checkout of the official code)" >&2
    exit 2
fi
torch_flags=()
[[ -n "$pidnet" ]] && torch_flags+=(--pidnet "$pidnet")
[[ -n "$sam2" ]] && torch_flags+=(--sam2 "$sam2")
mkdir -p "$out"
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# --workspace: the same feature set as the tests, so this reuses their build instead of
# rebuilding Burn with the features of one crate.
cargo build --release --workspace --bin bench --bin train --bin track-sam2 --example gemm_peak
# The row-by-row parts (all but train-e2e and video, which run on their own below).
row_parts="$(tr ',' '\n' <<< "$parts" | grep -vxE 'train-e2e|video' | paste -sd, -)" || true
bench="${CARGO_TARGET_DIR:-target}/release/bench"
gemm_peak="${CARGO_TARGET_DIR:-target}/release/examples/gemm_peak"

if [[ -n "$row_parts" ]]; then
    echo "== PyTorch (load $(loadavg))"
    "$python" scripts/torch_cpu_bench.py "${torch_flags[@]}" --parts "$row_parts" --sizes "$sizes" \
        --hiera-sizes "$hiera_sizes" --reps "$reps" --warmups "$warmups" \
        --hiera-reps "$hiera_reps" --hiera-warmups "$hiera_warmups" --real-reps "$real_reps" \
        --real-warmups "$real_warmups" --sam2-real-inputs "$out/sam2-real" --threads "$threads" \
        --json "$out/torch.json"

    echo "== segburn (load $(loadavg))"
    segburn_load_before="$(loadavg)"
    export RAYON_NUM_THREADS="$threads"
    # The machine's plain f32 product, the reference of the FLOP-rate table.
    "$gemm_peak" --threads "$threads" --json "$out/segburn-gemm.json"
    if has_part pidnet; then
        for size in ${sizes//,/ }; do
            "$bench" pidnet --size "$size" --reps "$reps" --warmups "$warmups" \
                --json "$out/segburn-pidnet-$size.json"
        done
        "$bench" --workloads train --sizes s --crop 512,512 --batch 2 --reps "$reps" \
            --warmups "$warmups" --json "$out/segburn-memory.json"
    fi
    if has_part sam2; then
        "$bench" --workloads sam2 --reps "$reps" --warmups "$warmups" --json "$out/segburn-sam2.json"
    fi
    if has_part hiera; then
        # One process per size: each size's peak RSS is its own, not what the allocator kept from
        # the size before (within a size the rows grow: forward, frozen step, trainable step).
        for size in ${hiera_sizes//,/ }; do
            "$bench" --workloads hiera --hiera-sizes "$size" --reps "$hiera_reps" \
                --warmups "$hiera_warmups" --json "$out/segburn-hiera-$size.json"
        done
    fi
    if has_part sam2-real; then
        # The everything pass's model and image, as torch_cpu_bench.py wrote them just above.
        "$bench" --workloads sam2-real --reps "$real_reps" --warmups "$real_warmups" \
            --sam2-checkpoint "$out/sam2-real/sam2.1_hiera_t_bench.pt" \
            --sam2-image "$out/sam2-real/image_1024.png" --json "$out/segburn-sam2-real.json"
    fi
    segburn_load_after="$(loadavg)"

    python3 scripts/side_by_side_report.py "$out" --sizes "$sizes" --parts "$row_parts" \
        --hiera-sizes "$hiera_sizes" --threads "$threads" \
        --segburn-load "$segburn_load_before" "$segburn_load_after" \
        --commit "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo -dirty)"
fi

if has_part train-e2e; then
    echo "== end-to-end training, official tools/train.py vs segburn train (load $(loadavg))"
    "$python" scripts/train_e2e_bench.py --pidnet "$pidnet" --workers "$e2e_workers" \
        --threads "$threads" --train "${CARGO_TARGET_DIR:-target}/release/train" \
        --json "$out/train-e2e.json"
fi

if has_part video; then
    echo "== video tracking, official SAM2VideoPredictor vs segburn track-sam2 (load $(loadavg))"
    "$python" scripts/sam2_video_bench.py --sam2 "$sam2" --reps "$video_reps" \
        --frames "$video_frames" --threads "$threads" \
        --track "${CARGO_TARGET_DIR:-target}/release/track-sam2" --out "$out/video" \
        --json "$out/video.json"
fi
