"""The toy-size SAM2 rows (16x16 embedding) and the Hiera rows of scripts/torch_cpu_bench.py,
with the official modules of scripts/torch_sam2_modules.py (see torch_cpu_bench.py's docstring
for what each row runs and which `bench` row it stands beside)."""
import torch
import torch.nn.functional as F

from torch_sam2_modules import hiera_image_encoder, sam2_heads

SAM2_IMAGE = 256
SAM2_TRAIN_BATCH = 4
HIERA_SIDE = 1024


def sam2_batch(n):
    return dict(
        coords=torch.rand(n, 2, 2) * 255.0,
        labels=torch.tensor([[1, 0]]).repeat(n, 1),
        boxes=torch.tensor([[40.0, 50.0, 200.0, 220.0]]).repeat(n, 1),
        image_embeddings=torch.randn(n, 256, 16, 16),
        high_res=[torch.randn(n, 32, 64, 64), torch.randn(n, 64, 32, 32)],
        targets=(torch.randn(n, 256, 256) > 0.5).float(),
    )


def sam2_decode(prompt_encoder, decoder, batch):
    sparse, dense = prompt_encoder((batch["coords"], batch["labels"]), batch["boxes"], None)
    return decoder(batch["image_embeddings"], prompt_encoder.get_dense_pe(), sparse, dense,
                   multimask_output=True, repeat_image=False,
                   high_res_features=batch["high_res"])


def sam2_decoder_forward(args):
    prompt_encoder, decoder, _ = sam2_heads(args.sam2, SAM2_IMAGE)
    batch = sam2_batch(1)
    with torch.no_grad():
        sparse, dense = prompt_encoder((batch["coords"], batch["labels"]), batch["boxes"], None)
        dense_pe = prompt_encoder.get_dense_pe()

    def step():
        with torch.no_grad():
            decoder(batch["image_embeddings"], dense_pe, sparse, dense, multimask_output=True,
                    repeat_image=False, high_res_features=batch["high_res"])

    return "SAM2 decoder forward", "1x256x16x16", step


def sam2_train_step(args):
    prompt_encoder, decoder, loss = sam2_heads(args.sam2, SAM2_IMAGE)
    n = SAM2_TRAIN_BATCH
    batch = sam2_batch(n)

    params = list(prompt_encoder.parameters()) + list(decoder.parameters())

    def step():
        for p in params:  # fresh gradients each step, as segburn's backward() returns them
            p.grad = None
        masks, ious, _, object_scores = sam2_decode(prompt_encoder, decoder, batch)
        masks = F.interpolate(masks, size=(SAM2_IMAGE, SAM2_IMAGE), mode="bilinear",
                              align_corners=False)
        outputs = dict(multistep_pred_multimasks_high_res=[masks], multistep_pred_ious=[ious],
                       multistep_object_score_logits=[object_scores])
        losses = loss([outputs], batch["targets"].unsqueeze(0))
        losses["core_loss"].backward()

    return "SAM2 train step", f"{n}x256x16x16", step


def hiera_encoder_forward(args, size):
    encoder = hiera_image_encoder(args.sam2, size).eval()
    image = torch.randn(1, 3, HIERA_SIDE, HIERA_SIDE)

    def step():
        with torch.no_grad():
            encoder(image)

    return (f"Hiera-{size.upper()} encoder forward", f"1x3x{HIERA_SIDE}x{HIERA_SIDE}", step)


def hiera_finetune_step(args, size, frozen):
    encoder = hiera_image_encoder(args.sam2, size)
    prompt_encoder, decoder, loss = sam2_heads(args.sam2, HIERA_SIDE)
    no_mem_embed = torch.nn.Parameter(torch.zeros(1, 1, 256))
    torch.nn.init.trunc_normal_(no_mem_embed, std=0.02)
    encoder.requires_grad_(not frozen)
    trained = [no_mem_embed, *prompt_encoder.parameters(), *decoder.parameters()]
    if not frozen:
        trained += list(encoder.parameters())
    optimizer = torch.optim.AdamW(trained, lr=1e-5)
    side = float(HIERA_SIDE)
    image = torch.randn(1, 3, HIERA_SIDE, HIERA_SIDE)
    coords = torch.tensor([[[0.3 * side, 0.4 * side], [0.7 * side, 0.6 * side]]])
    labels = torch.tensor([[1, 0]])
    boxes = torch.tensor([[0.1 * side, 0.2 * side, 0.8 * side, 0.9 * side]])
    targets = (torch.rand(1, HIERA_SIDE, HIERA_SIDE) > 0.5).float()

    def step():
        # SAM2Base.forward_image + directly_add_no_mem_embed, then the heads.
        with torch.set_grad_enabled(not frozen):
            levels = encoder(image)["backbone_fpn"]
        high_res = [decoder.conv_s0(levels[0]), decoder.conv_s1(levels[1])]
        embedding = levels[2] + no_mem_embed.view(1, 256, 1, 1)
        sparse, dense = prompt_encoder((coords, labels), boxes, None)
        masks, ious, _, object_scores = decoder(
            embedding, prompt_encoder.get_dense_pe(), sparse, dense, multimask_output=True,
            repeat_image=False, high_res_features=high_res)
        masks = F.interpolate(masks, size=(HIERA_SIDE, HIERA_SIDE), mode="bilinear",
                              align_corners=False)
        outputs = dict(multistep_pred_multimasks_high_res=[masks], multistep_pred_ious=[ious],
                       multistep_object_score_logits=[object_scores])
        losses = loss([outputs], targets.unsqueeze(0))
        optimizer.zero_grad(set_to_none=True)
        losses["core_loss"].backward()
        optimizer.step()

    what = "frozen" if frozen else "full"
    return (f"Hiera-{size.upper()} finetune step ({what})", f"1x3x{HIERA_SIDE}x{HIERA_SIDE}",
            step)
