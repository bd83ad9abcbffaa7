"""The official SAM2 modules that scripts/torch_cpu_bench.py and scripts/hiera_predict_check.py
run, imported from a checkout of github.com/facebookresearch/sam2 (never committed here) behind
small stand-ins, and built from their classes with the values of the sam2.1 configs (no hydra).
"""
import os
import sys
import types


def import_sam2(folder):
    """The official SAM2 prompt encoder, mask decoder, two-way transformer and training loss.
    `sam2/__init__.py` (hydra), `sam2.utils.misc` (PIL, tqdm) and `training.trainer` (hydra,
    iopath) are replaced: none of them defines anything these workloads run."""
    def package(name, path):
        module = types.ModuleType(name)
        module.__path__ = [path]
        sys.modules[name] = module

    package("sam2", os.path.join(folder, "sam2"))
    # hieradet.py imports iopath's path manager for its optional `weights_path`, unused here.
    for name in ("iopath", "iopath.common"):
        package(name, "")
    file_io = types.ModuleType("iopath.common.file_io")
    file_io.g_pathmgr = None
    sys.modules["iopath.common.file_io"] = file_io
    misc = types.ModuleType("sam2.utils.misc")

    def mask_to_box(_masks):
        raise NotImplementedError("not used by the benchmarked modules")

    misc.mask_to_box = mask_to_box
    sys.modules["sam2.utils.misc"] = misc
    package("training", os.path.join(folder, "training"))
    trainer = types.ModuleType("training.trainer")
    trainer.CORE_LOSS_KEY = "core_loss"
    sys.modules["training.trainer"] = trainer
    from sam2.modeling.sam.mask_decoder import MaskDecoder
    from sam2.modeling.sam.prompt_encoder import PromptEncoder
    from sam2.modeling.sam.transformer import TwoWayTransformer
    from training.loss_fns import MultiStepMultiMasksAndIous
    return PromptEncoder, MaskDecoder, TwoWayTransformer, MultiStepMultiMasksAndIous


# The trunks of sam2.1_hiera_{t,s,b+,l}.yaml (b+ keeps the class defaults but its width).
HIERA_TRUNKS = {
    "t": dict(embed_dim=96, num_heads=1, stages=[1, 2, 7, 2], global_att_blocks=[5, 7, 9],
              window_pos_embed_bkg_spatial_size=[7, 7]),
    "s": dict(embed_dim=96, num_heads=1, stages=[1, 2, 11, 2], global_att_blocks=[7, 10, 13],
              window_pos_embed_bkg_spatial_size=[7, 7]),
    "b+": dict(embed_dim=112, num_heads=2),
    "l": dict(embed_dim=144, num_heads=2, stages=[2, 6, 36, 4], global_att_blocks=[23, 33, 43],
              window_spec=[8, 4, 16, 8], window_pos_embed_bkg_spatial_size=[7, 7]),
}
def hiera_image_encoder(folder, size):
    """The official ImageEncoder of sam2.1_hiera_<size>.yaml, built from its classes directly
    (no hydra): Hiera trunk, FpnNeck (d_model 256, sine position encoding, top-down levels
    [2, 3], nearest), scalp 1."""
    import_sam2(folder)
    from sam2.modeling.backbones.hieradet import Hiera
    from sam2.modeling.backbones.image_encoder import FpnNeck, ImageEncoder
    from sam2.modeling.position_encoding import PositionEmbeddingSine
    trunk = Hiera(**HIERA_TRUNKS[size])
    neck = FpnNeck(
        position_encoding=PositionEmbeddingSine(num_pos_feats=256, normalize=True, scale=None,
                                                temperature=10000),
        d_model=256, backbone_channel_list=trunk.channel_list,  # stage widths, widest first
        fpn_top_down_levels=[2, 3], fpn_interp_model="nearest")
    return ImageEncoder(trunk=trunk, neck=neck, scalp=1)


def sam2_heads(folder, image):
    PromptEncoder, MaskDecoder, TwoWayTransformer, Loss = import_sam2(folder)
    # SAM 2.1's heads (sam2_base._build_sam_heads with the sam2.1 configs) for `image`-pixel
    # inputs.
    prompt_encoder = PromptEncoder(embed_dim=256, image_embedding_size=(image // 16, image // 16),
                                   input_image_size=(image, image), mask_in_chans=16)
    decoder = MaskDecoder(
        num_multimask_outputs=3,
        transformer=TwoWayTransformer(depth=2, embedding_dim=256, mlp_dim=2048, num_heads=8),
        transformer_dim=256, iou_head_depth=3, iou_head_hidden_dim=256,
        use_high_res_features=True, iou_prediction_use_sigmoid=True, pred_obj_scores=True,
        pred_obj_scores_mlp=True, use_multimask_token_for_obj_ptr=True)
    loss = Loss(weight_dict=dict(loss_mask=20, loss_dice=1, loss_iou=1, loss_class=1),
                focal_alpha=0.25, focal_gamma=2, supervise_all_iou=True, iou_use_l1_loss=True,
                pred_obj_scores=True, focal_gamma_obj_score=0.0, focal_alpha_obj_score=-1)
    return prompt_encoder, decoder, loss
