//! Time spent in the stages of SAM2's mask decoder forward on Flex, at the `bench --workloads
//! sam2` sizes (batch 1, 16×16 image embedding, 256×256 prompts, multimask).
//! `cargo run --release -p segburn-models --example sam2_profile -- [reps]`

use std::time::Instant;

use burn::backend::Flex;
use burn::tensor::{Distribution, Tensor};
use segburn_kernels as kernels;
use segburn_models::nn::conv_transpose2d_in_input_dtype;
use segburn_models::sam2::{
    HighResFeatures, MaskDecoderConfig, MaskDecoderInput, PromptEncoderConfig, Sam2Config,
};

fn median_ms(reps: usize, mut run: impl FnMut()) -> f64 {
    run();
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    // On a pool thread, as `bench` and the tools run it: parallel ops then queue their pieces
    // on this thread instead of waking a worker from outside the pool.
    rayon::scope(|_| profile());
}

fn profile() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let device = Default::default();
    let model = Sam2Config::new(
        PromptEncoderConfig::new([16, 16], [256, 256]),
        MaskDecoderConfig::new(),
    )
    .init::<Flex>(&device);
    let random = |shape: [usize; 4]| {
        Tensor::<Flex, 4>::random(shape, Distribution::Normal(0.0, 1.0), &device)
    };
    let decoder = &model.sam_mask_decoder;
    let sparse = Tensor::<Flex, 3>::random([1, 4, 256], Distribution::Normal(0.0, 1.0), &device);
    let input = MaskDecoderInput {
        image_embeddings: random([1, 256, 16, 16]),
        image_pe: model.sam_prompt_encoder.get_dense_pe(),
        sparse_prompt_embeddings: sparse,
        dense_prompt_embeddings: random([1, 256, 16, 16]),
        high_res_features: Some(HighResFeatures {
            feat_s0: random([1, 32, 64, 64]),
            feat_s1: random([1, 64, 32, 32]),
        }),
    };
    let whole = median_ms(reps, || {
        let out = decoder
            .forward(input.clone(), true)
            .expect("well-formed input");
        let _ = out.masks.into_data();
    });
    let tokens = Tensor::<Flex, 3>::random([1, 10, 256], Distribution::Normal(0.0, 1.0), &device);
    let transformer = median_ms(reps, || {
        let (q, k) = decoder.transformer.forward(
            input.image_embeddings.clone(),
            input.image_pe.clone(),
            tokens.clone(),
        );
        let _ = (q.into_data(), k.into_data());
    });
    let keys = Tensor::<Flex, 3>::random([1, 256, 256], Distribution::Normal(0.0, 1.0), &device);
    let layer = &decoder.transformer.layers[1];
    let self_attn = median_ms(reps, || {
        let _ = layer
            .self_attn
            .forward(tokens.clone(), tokens.clone(), tokens.clone())
            .into_data();
    });
    let token_to_image = median_ms(reps, || {
        let _ = layer
            .cross_attn_token_to_image
            .forward(tokens.clone(), keys.clone(), keys.clone())
            .into_data();
    });
    let image_to_token = median_ms(reps, || {
        let _ = layer
            .cross_attn_image_to_token
            .forward(keys.clone(), tokens.clone(), tokens.clone())
            .into_data();
    });
    let mlp = median_ms(reps, || {
        let _ = layer.mlp.forward(tokens.clone()).into_data();
    });
    let norm = median_ms(reps, || {
        let _ = layer.norm4.forward(keys.clone()).into_data();
    });
    let (conv0, norm1, _, conv3, _) = &decoder.output_upscaling;
    let src = random([1, 256, 16, 16]);
    let up0 = conv_transpose2d_in_input_dtype(conv0, src.clone());
    let up3_in = random([1, 64, 32, 32]);
    let conv_transpose0 = median_ms(reps, || {
        let _ = conv_transpose2d_in_input_dtype(conv0, src.clone()).into_data();
    });
    let layer_norm_2d = median_ms(reps, || {
        let _ = norm1.forward(up0.clone()).into_data();
    });
    let gelu_64 = median_ms(reps, || {
        let _ = kernels::gelu(up0.clone()).into_data();
    });
    let conv_transpose3 = median_ms(reps, || {
        let _ = conv_transpose2d_in_input_dtype(conv3, up3_in.clone()).into_data();
    });
    let one_token = Tensor::<Flex, 3>::random([1, 1, 256], Distribution::Normal(0.0, 1.0), &device);
    let hypernetworks = median_ms(reps, || {
        for mlp in &decoder.output_hypernetworks_mlps {
            let _ = mlp.forward(one_token.clone()).into_data();
        }
    });
    let iou_in = Tensor::<Flex, 2>::random([1, 256], Distribution::Normal(0.0, 1.0), &device);
    let iou_head = median_ms(reps, || {
        let _ = decoder
            .iou_prediction_head
            .forward(iou_in.clone())
            .into_data();
    });
    let hyper_in = Tensor::<Flex, 3>::random([1, 4, 32], Distribution::Normal(0.0, 1.0), &device);
    let upscaled =
        Tensor::<Flex, 3>::random([1, 32, 4096], Distribution::Normal(0.0, 1.0), &device);
    let mask_product = median_ms(reps, || {
        let _ = hyper_in.clone().matmul(upscaled.clone()).into_data();
    });
    println!("SAM2 mask decoder forward, batch 1, medians of {reps}:");
    println!("  whole decoder            {whole:8.2} ms");
    println!("  two-way transformer      {transformer:8.2} ms");
    println!("  one self-attention       {self_attn:8.2} ms");
    println!("  one token->image attn    {token_to_image:8.2} ms");
    println!("  one image->token attn    {image_to_token:8.2} ms");
    println!("  one MLP (10 tokens)      {mlp:8.2} ms");
    println!("  one LayerNorm (256 tok)  {norm:8.2} ms");
    println!("  upscaling ConvT 256->64  {conv_transpose0:8.2} ms");
    println!("  LayerNorm2d 64x32x32     {layer_norm_2d:8.2} ms");
    println!("  GELU 64x32x32            {gelu_64:8.2} ms");
    println!("  upscaling ConvT 64->32   {conv_transpose3:8.2} ms");
    println!("  4 hypernetwork MLPs      {hypernetworks:8.2} ms");
    println!("  IoU head                 {iou_head:8.2} ms");
    println!("  masks product 4x32x4096  {mask_product:8.2} ms");
}
