//! The shapes of one 2-D convolution (NCHW input, OIHW weight), shared by the unfolding
//! kernels and the direct kernel.

/// The shapes of one convolution (NCHW input, OIHW weight).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvGeometry {
    pub batch: usize,
    pub in_channels: usize,
    pub in_size: [usize; 2],
    pub out_channels: usize,
    pub kernel: [usize; 2],
    pub out_size: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
}

impl ConvGeometry {
    /// Input channels per group.
    pub(super) fn group_in(&self) -> usize {
        self.in_channels / self.groups
    }

    /// Output channels per group.
    pub(super) fn group_out(&self) -> usize {
        self.out_channels / self.groups
    }

    /// Weight elements per output channel: one row of `cols`.
    pub(super) fn patch(&self) -> usize {
        self.group_in() * self.kernel[0] * self.kernel[1]
    }

    pub(super) fn out_positions(&self) -> usize {
        self.out_size[0] * self.out_size[1]
    }

    pub(super) fn in_positions(&self) -> usize {
        self.in_size[0] * self.in_size[1]
    }

    /// A 1×1 kernel with stride 1 and no padding reads the input as it is: `cols` is the input.
    pub fn is_pointwise(&self) -> bool {
        self.kernel == [1, 1] && self.stride == [1, 1] && self.padding == [0, 0]
    }

    /// Image `n`, group `group` of the input `[N, C, H, W]`.
    pub(super) fn input_range(&self, n: usize, group: usize) -> std::ops::Range<usize> {
        let start = (n * self.in_channels + group * self.group_in()) * self.in_positions();
        start..start + self.group_in() * self.in_positions()
    }

    /// Image `n`, group `group` of the output `[N, O, OH, OW]`.
    pub(super) fn output_range(&self, n: usize, group: usize) -> std::ops::Range<usize> {
        let start = (n * self.out_channels + group * self.group_out()) * self.out_positions();
        start..start + self.group_out() * self.out_positions()
    }

    /// Group `group` of the weight `[O, C / groups, kh, kw]`.
    pub(super) fn weight_range(&self, group: usize) -> std::ops::Range<usize> {
        let start = group * self.group_out() * self.patch();
        start..start + self.group_out() * self.patch()
    }

    /// The input coordinate that output coordinate `o` reads at kernel offset `k` along `axis`
    /// (0: rows, 1: columns), if it is inside the input (not padding).
    pub(super) fn source(&self, axis: usize, o: usize, k: usize) -> Option<usize> {
        (o * self.stride[axis] + k * self.dilation[axis])
            .checked_sub(self.padding[axis])
            .filter(|&i| i < self.in_size[axis])
    }

    /// The output columns whose input column at kernel column `kj` lies inside the input (not
    /// in the padding), and the input column the first of them reads; the others follow at
    /// the stride.
    pub(super) fn inside_columns(&self, kj: usize) -> (std::ops::Range<usize>, usize) {
        let [stride, dilation, padding] = [self.stride[1], self.dilation[1], self.padding[1]];
        let offset = kj * dilation;
        // First ox with ox·stride + offset ≥ padding; last with ox·stride + offset < padding + in_w.
        let start = padding.saturating_sub(offset).div_ceil(stride);
        let end = (self.in_size[1] + padding)
            .checked_sub(offset)
            .map_or(0, |limit| limit.div_ceil(stride))
            .min(self.out_size[1]);
        let start = start.min(end);
        (
            start..end,
            (start * stride + offset).saturating_sub(padding),
        )
    }

    /// The output size the other fields imply (PyTorch's formula).
    pub fn expected_out_size(&self) -> [usize; 2] {
        let axis = |i: usize| {
            let reach = self.dilation[i] * (self.kernel[i] - 1) + 1;
            (self.in_size[i] + 2 * self.padding[i]).saturating_sub(reach) / self.stride[i] + 1
        };
        [axis(0), axis(1)]
    }
}

/// The check every kernel makes before reading `x`.
pub(super) fn check(g: &ConvGeometry, x: &[impl Copy]) {
    assert!(
        g.groups > 0
            && g.in_channels.is_multiple_of(g.groups)
            && g.out_channels.is_multiple_of(g.groups)
    );
    assert_eq!(g.out_size, g.expected_out_size(), "output size of {g:?}");
    assert_eq!(x.len(), g.batch * g.in_channels * g.in_positions());
}
