#!/usr/bin/env bash
# Builds the kit that scripts/gpu_check.sh runs on the GPU machine (which has no Rust
# toolchain): the doctor, bench and train binaries built with CUDA, stripped, plus the few
# fixture files the parity checks read, packed as target/gpu-kit.tar.xz. Run it here, on the
# CPU machine, from anywhere in the repository:
#
#   scripts/gpu_kit.sh            # ~25 min the first time on 2 cores, then incremental
#
# The kit must stay under the device tool's 64 MiB carry limit (measured: 60.6 MiB, of which
# about 18.5 MB are the three binaries); the script says if it does not.
set -euo pipefail
cd "$(dirname "$0")/.."

FIXTURES=tests/fixtures
BUILD_DIR=${GPU_KIT_TARGET:-target/gpu-kit-build}
STAGE=target/gpu-kit
KIT=target/gpu-kit.tar.xz

# A separate target folder: a CUDA release build never blocks (or invalidates) the CPU builds.
# cudarc loads CUDA at run time; CUDARC_CUDA_VERSION picks the bindings (driver 580 = CUDA 13.0).
CUDARC_CUDA_VERSION=${CUDARC_CUDA_VERSION:-13000} CARGO_TARGET_DIR="$BUILD_DIR" \
    cargo build --release -p segburn --features cuda,wgpu --bin doctor --bin bench --bin train

rm -rf "$STAGE"
mkdir -p "$STAGE/bin" "$STAGE/fixtures/pidnet_s" "$STAGE/fixtures/sam2"
cp "$BUILD_DIR"/release/{doctor,bench,train} "$STAGE/bin/"
strip "$STAGE"/bin/*
if [ -z "${GPU_KIT_NO_FIXTURES:-}" ]; then
    # Weights travel as their key listings: doctor builds the fixtures' formula weights.
    cp "$FIXTURES"/pidnet_s/{state_dict.keys.txt,input.safetensors,outputs.safetensors} \
        "$STAGE/fixtures/pidnet_s/"
    cp "$FIXTURES"/sam2/{prompt_encoder.keys.txt,mask_decoder.keys.txt} "$STAGE/fixtures/sam2/"
    cp "$FIXTURES"/sam2/{inputs.safetensors,outputs_multimask.safetensors} "$STAGE/fixtures/sam2/"
fi
git rev-parse --short HEAD > "$STAGE/COMMIT"
git status --porcelain --untracked-files=no | grep -q . && echo "dirty" >> "$STAGE/COMMIT" || true

tar -C "$STAGE" -cf - . | xz -6 -T0 > "$KIT"
bytes=$(stat -c %s "$KIT")
echo "$KIT: $((bytes / 1024 / 1024)) MiB ($(cat "$STAGE/COMMIT" | tr '\n' ' '))"
if [ "$bytes" -gt $((64 * 1024 * 1024)) ]; then
    echo "warning: over the 64 MiB carry limit; rerun with GPU_KIT_NO_FIXTURES=1 (doctor then skips the fixture parity)" >&2
    exit 1
fi
