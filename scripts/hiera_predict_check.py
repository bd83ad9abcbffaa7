#!/usr/bin/env python3
"""Full-size check of `predict-sam2` with an official-layout SAM 2.1 checkpoint against the
official PyTorch modules (the reduced fixture model of the tests cannot cover the 1024x1024
input, the real depths and the 7->256 position-embedding resize).

1. Builds the official image model of sam2.1_hiera_<size>.yaml from its classes (as
   scripts/torch_sam2_modules.py: Hiera, FpnNeck, PromptEncoder, MaskDecoder), with random
   weights (seed 0) and perturbed position embeddings (their official init is zero), and saves
   it as the official checkpoints are: torch.save({"model": state_dict}), one video-memory
   tensor included.
2. Runs `predict-sam2 --checkpoint that.pt` on fixtures/sam2_hiera/image.png with one click.
3. Runs SAM2ImagePredictor's steps with the official modules on the same pixels
   (pipeline.safetensors:image_u8): antialiased bilinear resize to 1024x1024, normalisation,
   encoder, conv_s0/conv_s1, + no_mem_embed, prompt encoder, decoder (multimask), bilinear
   resize to the image; keeps the mask of the highest predicted IoU.
4. Prints how many pixels of predict-sam2's mask PNG differ and the IoUs of both; fails if a
   pixel whose official logit is not within 1e-3 of 0 differs.

Needs torch and numpy; the official code is a checkout passed with --sam2 (never committed).
Example:
  python scripts/hiera_predict_check.py --sam2 ~/official/sam2 --size t \\
      --predict target/release/predict-sam2
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True
from torch_sam2_modules import HIERA_TRUNKS, hiera_image_encoder, sam2_heads

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures")
SIDE = 1024


def official_model(args):
    encoder = hiera_image_encoder(args.sam2, args.size).eval()
    prompt_encoder, decoder, _ = sam2_heads(args.sam2, SIDE)
    state = {}
    for prefix, module in (("image_encoder.", encoder), ("sam_prompt_encoder.", prompt_encoder),
                           ("sam_mask_decoder.", decoder)):
        state.update({prefix + k: v for k, v in module.state_dict().items()})
    state["no_mem_embed"] = torch.randn(1, 1, 256) * 0.02
    state["no_obj_ptr"] = torch.zeros(1, 256)  # a video-memory tensor, as official files have
    for key in ("image_encoder.trunk.pos_embed", "image_encoder.trunk.pos_embed_window"):
        state[key] = torch.randn_like(state[key]) * 0.5
    for prefix, module in (("image_encoder.", encoder), ("sam_prompt_encoder.", prompt_encoder),
                           ("sam_mask_decoder.", decoder)):
        module.load_state_dict({k[len(prefix):]: v for k, v in state.items()
                                if k.startswith(prefix)}, strict=True)
    return encoder, prompt_encoder.eval(), decoder.eval(), state


def image_u8():
    """pipeline.safetensors:image_u8, the pixels of sam2_hiera/image.png."""
    path = os.path.join(FIXTURES, "sam2_hiera", "pipeline.safetensors")
    raw = open(path, "rb").read()
    size = struct.unpack("<Q", raw[:8])[0]
    info = json.loads(raw[8:8 + size])["image_u8"]
    start, end = info["data_offsets"]
    return np.frombuffer(raw[8 + size + start:8 + size + end], np.uint8).reshape(info["shape"])


def read_gray_png(path):
    """An 8-bit greyscale PNG (what predict-sam2 writes), with the standard row filters."""
    raw = open(path, "rb").read()
    pos, data, width, height = 8, b"", 0, 0
    while pos < len(raw):
        length = struct.unpack(">I", raw[pos:pos + 4])[0]
        kind, body = raw[pos + 4:pos + 8], raw[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert (depth, colour) == (8, 0), "expected an 8-bit greyscale PNG"
        elif kind == b"IDAT":
            data += body
        pos += 12 + length
    data = zlib.decompress(data)
    out = np.zeros((height, width), np.int64)
    previous = np.zeros(width, np.int64)
    for y in range(height):
        kind = data[y * (width + 1)]
        line = np.frombuffer(data[y * (width + 1) + 1:(y + 1) * (width + 1)], np.uint8)
        row = np.zeros(width, np.int64)
        for x in range(width):
            a = row[x - 1] if x else 0
            b, c = previous[x], previous[x - 1] if x else 0
            if kind == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                predictor = a if pa <= pb and pa <= pc else b if pb <= pc else c
            else:
                predictor = (0, a, b, (a + b) // 2)[kind]
            row[x] = (int(line[x]) + predictor) & 255
        out[y], previous = row, row
    return out


def official_mask(model, rgb, click):
    encoder, prompt_encoder, decoder, state = model
    height, width, _ = rgb.shape
    image = torch.from_numpy(rgb.copy()).permute(2, 0, 1).float()[None] / 255.0
    image = F.interpolate(image, (SIDE, SIDE), mode="bilinear", align_corners=False,
                          antialias=True)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    with torch.no_grad():
        levels = encoder((image - mean) / std)["backbone_fpn"]
        high_res = [decoder.conv_s0(levels[0]), decoder.conv_s1(levels[1])]
        embedding = levels[2] + state["no_mem_embed"].view(1, 256, 1, 1)
        coords = torch.tensor([[[click[0] / width * SIDE, click[1] / height * SIDE]]])
        sparse, dense = prompt_encoder((coords, torch.tensor([[1]])), None, None)
        masks, ious, _, _ = decoder(embedding, prompt_encoder.get_dense_pe(), sparse, dense,
                                    multimask_output=True, repeat_image=False,
                                    high_res_features=high_res)
        masks = F.interpolate(masks, (height, width), mode="bilinear", align_corners=False)
    best = int(ious[0].argmax())
    return masks[0, best].numpy(), ious[0].tolist()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sam2", required=True, metavar="DIR",
                        help="checkout of github.com/facebookresearch/sam2")
    parser.add_argument("--size", default="t", choices=sorted(HIERA_TRUNKS))
    parser.add_argument("--predict", default=os.path.join("target", "release", "predict-sam2"),
                        help="the predict-sam2 binary")
    parser.add_argument("--click", default="150,110", help="x,y of the positive click")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = official_model(args)
    click = [float(v) for v in args.click.split(",")]
    with tempfile.TemporaryDirectory(prefix="segburn hiera check ") as folder:
        checkpoint = os.path.join(folder, f"sam2.1_hiera_{args.size} random.pt")
        torch.save({"model": model[3]}, checkpoint)
        image = os.path.join(FIXTURES, "sam2_hiera", "image.png")
        run = subprocess.run([args.predict, "--checkpoint", checkpoint, image, "--points",
                              f"{args.click},1", "--out", folder], capture_output=True, text=True)
        print(run.stdout + run.stderr, end="")
        if run.returncode != 0:
            sys.exit(f"predict-sam2 failed (exit {run.returncode})")
        ours = read_gray_png(os.path.join(folder, "image_mask.png")) > 0
    logits, ious = official_mask(model, image_u8(), click)
    reference = logits > 0
    differ = reference != ours
    # f32 noise may flip a pixel whose logit is within rounding of 0, nothing else.
    near_zero = np.abs(logits) < 1e-3
    print(f"official modules: IoUs {[round(v, 4) for v in ious]}, mask {int(reference.sum())} px; "
          f"predict-sam2: {int(ours.sum())} px; {int(differ.sum())} of {ours.size} pixels "
          f"differ ({int((differ & near_zero).sum())} of them with |logit| < 1e-3)")
    sys.exit(1 if (differ & ~near_zero).any() else 0)


if __name__ == "__main__":
    main()
