"""The real-size SAM 2.1 rows of scripts/torch_cpu_bench.py (the `sam2-real` part), with the
official code, beside `bench --workloads sam2-real`:

  sam2-real-decoder-1 / sam2-real-decoder-64
      prompt encoder + mask decoder of SAM 2.1 on ONE 64x64 image embedding (1024x1024 input,
      high-res features [1,32,256,256] and [1,64,128,128]), 1 or 64 objects of one foreground
      click each (the first clicks of the 32x32 "segment everything" grid, model frame),
      multimask: exactly SAM2ImagePredictor._predict's prompt encoder and decoder calls, with
      repeat_image=True for 64 objects (the embedding is shared, as the generator decodes a
      batch). Not included: mapping the clicks to the model frame and the bilinear upscale of
      the [P,3,256,256] logits to the image (the everything row has them). Random weights.
  sam2-real-everything
      one SAM2AutomaticMaskGenerator.generate on a 1024x1024 RGB image with SAM 2.1 Hiera-T at
      the official defaults (points_per_side 32, points_per_batch 64: 1024 clicks, 3072
      candidate masks; IoU 0.8, stability 0.95, box NMS 0.7, no crops, no m2m), output mode
      uncompressed_rle (segburn's records hold the same RLE): preprocessing, encoder, 16
      decoder batches, upscaling, filters, NMS and RLE. The JSON row also has masks_kept.

The everything row's model and image are files that segburn's bench loads too, so both sides
run the same weights on the same pixels: `write_inputs` makes them once (SAM2Base built by the
official build_sam2 from configs/sam2.1/sam2.1_hiera_t.yaml, official random init under seed 0,
saved as the released checkpoints are: torch.save({"model": state_dict}); a synthetic image).
One change to the init: the IoU head's last bias is +4 (sigmoid 0.98), so that every candidate
passes the IoU filter and the stability score is computed for all 3072 masks at 1024x1024, as
for the many a trained model lets through (under the plain init none passes, and the
post-processing would cost nothing). No mask of a random init is stable (its mask logits are
about +-0.06, and made larger they are noise whose RLE has ~10^5 runs a mask, which would
measure Python lists, not SAM), so with these weights both sides keep 0 masks, and boxes, NMS
and RLE run on none: this row under-states the post-processing of a trained model, which keeps
tens of smooth masks. The candidates per second figure is the weight-independent one.

torchvision is missing here: its three transforms come from
scripts/fixtures/sam2_hiera_cases/official.py, and `batched_nms` / `box_area` are stand-ins
below (NMS vectorised in torch: one row of the IoU matrix per kept box, as torchvision's CPU
kernel does in C++, so the official side is not slowed by a Python double loop).
"""
import os
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True
from torch_sam2_modules import sam2_heads  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")

SIDE = 1024
EMBEDDING = SIDE // 16
POINTS_PER_SIDE = 32
POINTS_PER_BATCH = 64
CANDIDATES = POINTS_PER_SIDE**2 * 3
CONFIG = "configs/sam2.1/sam2.1_hiera_t.yaml"
CHECKPOINT = "sam2.1_hiera_t_bench.pt"
IMAGE = "image_1024.png"
DECODER_PROMPTS = (1, 64)


def grid_clicks(count):
    """The first `count` clicks of upstream's build_point_grid(32) times 1024, row by row."""
    offset = 1 / (2 * POINTS_PER_SIDE)
    axis = np.linspace(offset, 1 - offset, POINTS_PER_SIDE) * SIDE
    return [[float(axis[k % POINTS_PER_SIDE]), float(axis[k // POINTS_PER_SIDE])]
            for k in range(count)]


def decoder_forward(args, prompts):
    prompt_encoder, decoder, _ = sam2_heads(args.sam2, SIDE)
    prompt_encoder.eval()
    decoder.eval()
    embedding = torch.randn(1, 256, EMBEDDING, EMBEDDING)
    high_res = [torch.randn(1, 32, 4 * EMBEDDING, 4 * EMBEDDING),
                torch.randn(1, 64, 2 * EMBEDDING, 2 * EMBEDDING)]
    coords = torch.tensor(grid_clicks(prompts)).view(prompts, 1, 2)
    labels = torch.ones(prompts, 1, dtype=torch.int)

    def step():
        # SAM2ImagePredictor._predict: prompt encoder, then the decoder on the shared embedding.
        with torch.no_grad():
            sparse, dense = prompt_encoder((coords, labels), None, None)
            decoder(embedding, prompt_encoder.get_dense_pe(), sparse, dense,
                    multimask_output=True, repeat_image=prompts > 1,
                    high_res_features=high_res)

    return (f"SAM2 prompt enc+decoder, {prompts} click(s)", f"{prompts}x256x64x64", step)


def box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def batched_nms(boxes, scores, idxs, iou_threshold):
    """torchvision's NMS for one category (all the generator uses without crops): boxes by
    descending score (stable), each kept box suppresses later ones of IoU above the threshold."""
    if len(torch.unique(idxs)) > 1:
        raise NotImplementedError("the stand-in handles one category")
    order = torch.sort(scores, descending=True, stable=True).indices
    b = boxes.float()[order]
    area = box_area(b)
    top_left = torch.max(b[:, None, :2], b[None, :, :2])
    bottom_right = torch.min(b[:, None, 2:], b[None, :, 2:])
    wh = (bottom_right - top_left).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    iou = inter / (area[:, None] + area[None, :] - inter)
    suppressed = torch.zeros(len(order), dtype=torch.bool)
    keep = []
    for rank in range(len(order)):
        if suppressed[rank]:
            continue
        keep.append(rank)
        suppressed |= iou[rank] > iou_threshold
    return order[torch.tensor(keep, dtype=torch.int64)]


def import_generator(folder):
    """The official build_sam2 and generator, behind the torchvision stand-ins."""
    import types

    if FIXTURES not in sys.path:
        sys.path.append(FIXTURES)
    from sam2_hiera_cases.official import import_official
    off = import_official(folder)
    package = sys.modules.setdefault("torchvision", types.ModuleType("torchvision"))
    if "torchvision.ops.boxes" not in sys.modules:
        ops, boxes = types.ModuleType("torchvision.ops"), types.ModuleType("torchvision.ops.boxes")
        boxes.batched_nms, boxes.box_area = batched_nms, box_area
        ops.boxes, package.ops = boxes, ops
        sys.modules["torchvision.ops"], sys.modules["torchvision.ops.boxes"] = ops, boxes
    from sam2.automatic_mask_generator import SAM2AutomaticMaskGenerator
    return off.build_sam2, SAM2AutomaticMaskGenerator


def synthetic_image():
    """1024x1024 RGB: a colour gradient, eight ellipses of flat colour and +-12 of noise."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:SIDE, 0:SIDE].astype(np.float64)
    image = np.stack([60 + 150 * x / SIDE, 40 + 170 * y / SIDE, 200 - 120 * (x + y) / (2 * SIDE)],
                     axis=-1)
    for _ in range(8):
        cx, cy = rng.uniform(100, SIDE - 100, 2)
        rx, ry = rng.uniform(40, 220, 2)
        image[((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 <= 1] = rng.uniform(0, 255, 3)
    image += rng.integers(-12, 13, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def write_inputs(sam2, folder):
    """Writes the everything row's checkpoint and image into `folder` (see the docstring)."""
    from PIL import Image

    build_sam2, _ = import_generator(sam2)
    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(0)
    model = build_sam2(CONFIG, None, device="cpu", mode="eval")
    with torch.no_grad():
        model.sam_mask_decoder.iou_prediction_head.layers[-1].bias.fill_(4.0)
    torch.save({"model": model.state_dict()}, os.path.join(folder, CHECKPOINT))
    Image.fromarray(synthetic_image()).save(os.path.join(folder, IMAGE))
    return os.path.join(folder, CHECKPOINT), os.path.join(folder, IMAGE)


def everything(args):
    from PIL import Image

    build_sam2, Generator = import_generator(args.sam2)
    folder = args.sam2_real_inputs
    model = build_sam2(CONFIG, os.path.join(folder, CHECKPOINT), device="cpu", mode="eval")
    image = np.asarray(Image.open(os.path.join(folder, IMAGE)).convert("RGB"))
    generator = Generator(model, points_per_side=POINTS_PER_SIDE,
                          points_per_batch=POINTS_PER_BATCH, output_mode="uncompressed_rle")
    kept = []

    def step():
        kept.append(len(generator.generate(image)))

    step.extra = lambda: dict(masks_kept=kept[-1], candidates=CANDIDATES)
    return ("SAM2.1 Hiera-T segment everything", f"1x3x{SIDE}x{SIDE}", step)


def workloads():
    """Row id -> function(args) returning (name, shape, step), in run order."""
    rows = {f"sam2-real-decoder-{p}": (lambda a, p=p: decoder_forward(a, p))
            for p in DECODER_PROMPTS}
    rows["sam2-real-everything"] = everything
    return rows
