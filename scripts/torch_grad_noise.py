"""PyTorch's own f32 gradient noise on the real-photo training step of
`shared/fixtures/pipeline/grads.safetensors`, across execution choices that are all correct.

The fixture stores one f32 run (2 threads, oneDNN, NCHW) against the f64 oracle. This script
repeats that step with the official PIDNet code in four configurations (that one, 1 thread,
channels-last memory, oneDNN off), measures each one's rel-L2 error against the stored f64
gradients, and writes them as JSON. `crates/train/tests/pidnet_grads_parity.rs` reads the
result (`crates/train/tests/data/pidnet_grads_pytorch_variants.json`): its f32 bound per
parameter is 3x PyTorch's largest error over these configurations.

    python scripts/torch_grad_noise.py --official PATH/TO/PIDNet --fixtures ../shared/fixtures \
        --out crates/train/tests/data/pidnet_grads_pytorch_variants.json

The official code is not part of segburn: pass a checkout of github.com/XuJiacong/PIDNet.
Needs torch and safetensors.
"""
import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_pidnet_bench as bench  # noqa: E402  (its config stand-in and model sizes)

VARIANTS = {
    "default (2 threads, oneDNN, NCHW)": dict(threads=2, mkldnn=True, channels_last=False),
    "1 thread": dict(threads=1, mkldnn=True, channels_last=False),
    "channels_last": dict(threads=2, mkldnn=True, channels_last=True),
    "oneDNN off": dict(threads=2, mkldnn=False, channels_last=False),
}


def gradients(fx, state_dict, keys, variant, modules):
    PIDNet, BondaryLoss, OhemCrossEntropy = modules
    torch.set_num_threads(variant["threads"])
    torch.backends.mkldnn.enabled = variant["mkldnn"]
    model = PIDNet(num_classes=19, augment=True, **bench.SIZES["s"])
    model.load_state_dict(state_dict)
    model = model.train()
    x = fx["input"]
    if variant["channels_last"]:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    labels = fx["labels"].long()
    sem = OhemCrossEntropy(ignore_label=255, thres=0.9, min_kept=131072,
                           weight=torch.tensor(bench.CLASS_WEIGHTS))
    outputs = [F.interpolate(o, size=(512, 512), mode="bilinear", align_corners=True)
               for o in model(x)]
    loss_s = sem(outputs[:-1], labels)
    loss_b = BondaryLoss()(outputs[-1], fx["bd_gt"].float())
    gated = torch.where(torch.sigmoid(outputs[-1][:, 0]) > 0.8, labels, torch.full_like(labels, 255))
    loss_sb = sem(outputs[-2], gated)
    (loss_s + loss_b + loss_sb).mean().backward()
    params = dict(model.named_parameters())
    return {k: params[k].grad.double().flatten() for k in keys}


def rel_l2(a, b):
    return float((a - b).norm() / b.norm())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--official", required=True)
    parser.add_argument("--fixtures", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    bench.stand_in_config()
    sys.path.insert(0, args.official)
    from models.pidnet import PIDNet
    from utils.criterion import BondaryLoss, OhemCrossEntropy

    fixtures = Path(args.fixtures)
    fx = load_file(str(fixtures / "pipeline" / "grads.safetensors"))
    state_dict = load_file(str(fixtures / "pidnet_s" / "state_dict.safetensors"))
    keys = sorted(k[len("grad64."):] for k in fx if k.startswith("grad64."))
    oracle = {k: fx["grad64." + k].double().flatten() for k in keys}
    result = dict(torch=torch.__version__, variants={})
    for name, variant in VARIANTS.items():
        grads = gradients(fx, state_dict, keys, variant, (PIDNet, BondaryLoss, OhemCrossEntropy))
        errors = {k: rel_l2(grads[k], oracle[k]) for k in keys}
        overall = rel_l2(torch.cat([grads[k] for k in keys]), torch.cat([oracle[k] for k in keys]))
        result["variants"][name] = dict(per_parameter=errors, all=overall)
        print(f"{name:34} all {overall:.3e}  conv1.0.weight {errors['conv1.0.weight']:.3e}  "
              f"seghead_d.conv1.weight {errors['seghead_d.conv1.weight']:.3e}", flush=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
