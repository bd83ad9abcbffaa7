#!/usr/bin/env bash
# The CUDA check on the GPU machine (one H200, driver 580 / CUDA 13, PyTorch, no Rust
# toolchain). Runs the prebuilt binaries of the kit made by scripts/gpu_kit.sh, each under a
# timeout, and writes every log, JSON file and memory trace to $OUT.
#
#   bash scripts/gpu_check.sh                    # every stage, stopping before the deadline
#   bash scripts/gpu_check.sh doctor eval        # some stages
#
# Stages (in this order):
#   doctor      doctor --fixtures: driver/NVRTC, device, kernel check, burn#4445 wide conv2d
#               backward, PIDNet-S and SAM2 forward on CUDA vs the official fixtures
#   eval        eval FPS at 1024x2048, PIDNet S/M/L, F32 and Bf16 (end to end, as eval runs)
#   trainbench  training images/s of PIDNet-S at 1024x1024 batch 12, Bf16 and F32 (no loader)
#   replicas    trainer steps of PIDNet-S, Bf16, 1024x1024 batch 12 on the sample data, plain
#               vs through the data-parallel path on the same GPU (its single-GPU overhead)
#   sam2        SAM2 decoder forward and training step
#   wgpu        the same GPU through Burn's wgpu backend (Vulkan): PIDNet-S eval at 1024x2048
#               and the training step at 1024x1024 batch 12 in F32 and F16, and the SAM2
#               decoder, next to the cuda:0 rows above (needs the NVIDIA Vulkan driver in the
#               container; `doctor` lists the adapters it sees)
#   train       200 steps of PIDNet-S, official recipe, Bf16, 1024x1024 batch 12, on the
#               bundled generated street scenes (scripts/gpu/pidnet_s_bf16_1024_sample.ron)
#   torch       optional: the same eval/train workloads in PyTorch eager + AMP, when
#               PIDNET_OFFICIAL points at a checkout of the official PIDNet code
#
# Environment: KIT (default target/gpu-kit.tar.xz), OUT (default ./gpu-out), DEADLINE
# (seconds for the whole call, default 560: the device tool stops a command at 600).
# Peak GPU memory comes from nvidia-smi, sampled every 100 ms during each stage.
set -u
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=${OUT:-$REPO/gpu-out}
KIT=${KIT:-$REPO/target/gpu-kit.tar.xz}
DEADLINE=${DEADLINE:-560}
STARTED=$(date +%s)
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt

say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $((DEADLINE - ($(date +%s) - STARTED))); }

# ---- the kit ---------------------------------------------------------------------------
WORK=$(mktemp -d)
if [ ! -f "$KIT" ]; then
    say "no kit at $KIT: build it on the CPU machine with scripts/gpu_kit.sh and carry it"
    exit 2
fi
tar -C "$WORK" -xJf "$KIT" || { say "cannot unpack $KIT"; exit 2; }
BIN=$WORK/bin
FIXTURES=$WORK/fixtures
say "segburn GPU check, kit commit $(tr '\n' ' ' < "$WORK/COMMIT"), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
export SEGBURN_COMMIT="$(head -1 "$WORK/COMMIT")"

# ---- CUDA libraries ----------------------------------------------------------------------
# cudarc opens libcuda.so / libnvrtc.so by name. The driver is on the loader path; NVRTC may
# only exist inside PyTorch's wheels (site-packages/nvidia/...): add that folder if needed.
if ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so'; then
    for dir in $(python3 - <<'PY' 2>/dev/null
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
seen = set()
for root in roots:
    for lib in glob.glob(os.path.join(root, "nvidia", "**", "libnvrtc.so*"), recursive=True):
        d = os.path.dirname(lib)
        if d not in seen:
            seen.add(d)
            print(d)
PY
    ) /usr/local/cuda/lib64 /usr/local/cuda-13.0/lib64; do
        if ls "$dir"/libnvrtc.so* >/dev/null 2>&1; then
            export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
            say "NVRTC from $dir"
            # cudarc tries libnvrtc.so and libnvrtc.so.13: give it the unversioned name too.
            if [ ! -e "$dir/libnvrtc.so" ]; then
                mkdir -p "$WORK/lib"
                ln -sf "$(ls "$dir"/libnvrtc.so.* | grep -v builtins | head -1)" "$WORK/lib/libnvrtc.so"
                export LD_LIBRARY_PATH="$WORK/lib:$LD_LIBRARY_PATH"
            fi
            break
        fi
    done
fi
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | tee -a "$SUMMARY"

# ---- running a stage -----------------------------------------------------------------------
# stage NAME TIMEOUT CMD...: runs CMD with stdout+stderr in $OUT/NAME.log, samples GPU memory,
# and records the exit code, the time and the peak memory in the summary.
stage() {
    local name=$1 limit=$2
    shift 2
    local remaining
    remaining=$(left)
    if [ "$remaining" -lt 30 ]; then
        say "[$name] skipped: ${remaining}s left before the deadline (run it in another call)"
        return
    fi
    [ "$limit" -gt "$remaining" ] && limit=$remaining
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 \
        > "$OUT/$name.gpu_memory_mib.txt" 2>/dev/null &
    local sampler=$! begin
    begin=$(date +%s)
    timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    local peak
    peak=$(sort -n "$OUT/$name.gpu_memory_mib.txt" 2>/dev/null | tail -1)
    local verdict="exit $rc"
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && verdict="TIMED OUT after ${limit}s"
    say "[$name] $verdict in $(( $(date +%s) - begin ))s, peak GPU memory ${peak:-n/a} MiB (nvidia-smi, whole GPU)"
}

# ---- the stages ----------------------------------------------------------------------------
run_doctor() {
    stage doctor 150 "$BIN/doctor" --fixtures "$FIXTURES" --json "$OUT/doctor.json"
    grep -E '^\s+\[(FAIL|WARN)\]|cuda:0|CUDA' "$OUT/doctor.log" | tee -a "$SUMMARY"
}
run_eval() {
    stage eval 200 "$BIN/bench" --device cuda:0 --workloads eval --sizes s,m,l \
        --precision f32,bf16 --eval-size 1024,2048 --warmups 3 --reps 10 --json "$OUT/bench_eval.json"
    tail -n 8 "$OUT/eval.log" | tee -a "$SUMMARY"
}
run_trainbench() {
    stage trainbench 200 "$BIN/bench" --device cuda:0 --workloads train --sizes s \
        --precision bf16,f32 --crop 1024,1024 --batch 12 --warmups 2 --reps 5 --json "$OUT/bench_train.json"
    tail -n 8 "$OUT/trainbench.log" | tee -a "$SUMMARY"
}
run_replicas() {
    stage replicas 150 "$BIN/bench" --device cuda:0 --workloads replicas --sizes s \
        --precision bf16 --crop 1024,1024 --batch 12 --warmups 3 --reps 10 \
        --loader-data datasets/sample --json "$OUT/bench_replicas.json"
    grep -E 'replicas|data-parallel path' "$OUT/replicas.log" | tee -a "$SUMMARY"
}
run_sam2() {
    stage sam2 60 "$BIN/bench" --device cuda:0 --workloads sam2 --warmups 3 --reps 20 --json "$OUT/bench_sam2.json"
    tail -n 3 "$OUT/sam2.log" | tee -a "$SUMMARY"
}
run_wgpu() {
    stage wgpu 200 "$BIN/bench" --device wgpu:0 --workloads eval,train,sam2 --sizes s \
        --precision f32,f16 --eval-size 1024,2048 --crop 1024,1024 --batch 12 --warmups 2 \
        --reps 5 --json "$OUT/bench_wgpu.json"
    grep -E 'wgpu|Vulkan' "$OUT/doctor.log" 2>/dev/null | tee -a "$SUMMARY"
    tail -n 10 "$OUT/wgpu.log" | tee -a "$SUMMARY"
}
run_train() {
    stage train 300 "$BIN/train" scripts/gpu/pidnet_s_bf16_1024_sample.ron --quiet \
        --set "train.run_dir=$WORK/run"
    grep -E 'step (10|100|200)/|finished|error' "$OUT/train.log" | tee -a "$SUMMARY"
    cp "$WORK"/run/*.log "$WORK"/run/*.jsonl "$WORK"/run/*.csv "$OUT/" 2>/dev/null || true
}
run_torch() {
    if [ -z "${PIDNET_OFFICIAL:-}" ]; then
        say "[torch] skipped: set PIDNET_OFFICIAL to a checkout of the official PIDNet code (never commit it)"
        return
    fi
    stage torch 200 python3 scripts/torch_pidnet_bench.py --official "$PIDNET_OFFICIAL" \
        --json "$OUT/torch.json"
    tail -n 12 "$OUT/torch.log" | tee -a "$SUMMARY"
}

STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=(doctor eval trainbench sam2 wgpu replicas train torch)
for s in "${STAGES[@]}"; do
    case "$s" in
        doctor | eval | trainbench | replicas | sam2 | wgpu | train | torch) "run_$s" ;;
        *) say "unknown stage $s (doctor eval trainbench replicas sam2 wgpu train torch)" ;;
    esac
done
say "done in $(( $(date +%s) - STARTED ))s; results in $OUT"
rm -rf "$WORK"
