//! Optimizer state as named tensors: `optim.<parameter key>.<buffer>` with PyTorch's buffer
//! names (`momentum_buffer`, `exp_avg`, `exp_avg_sq`, `step`), so a checkpoint's optimizer part
//! can be read without segburn and does not depend on Burn's parameter ids.

use burn::module::AutodiffModule;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::momentum::MomentumState;
use burn::optim::record::AdaptorRecord;
use burn::optim::{
    AdamW, AdamWState, AdaptiveMomentumState, Optimizer, Sgd, SgdState, SimpleOptimizer,
};
use burn::record::{FullPrecisionSettings, Record};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData};

use super::params::ParamInfo;
use segburn_models::tensor_file::NamedTensors;

/// An optimizer whose per-parameter state converts to and from named tensors.
pub trait NamedState<B: Backend>: SimpleOptimizer<B> {
    /// The state's tensors with their buffer names.
    fn state_to_named<const D: usize>(
        state: Self::State<D>,
        device: &B::Device,
    ) -> Vec<(&'static str, TensorData)>;

    /// Rebuilds the state from `buffer name -> data`; `None` when a buffer is missing.
    fn state_from_named<const D: usize>(
        get: &dyn Fn(&str) -> Option<TensorData>,
        device: &B::Device,
    ) -> Option<Self::State<D>>;
}

impl<B: Backend> NamedState<B> for Sgd<B> {
    fn state_to_named<const D: usize>(
        state: SgdState<B, D>,
        device: &B::Device,
    ) -> Vec<(&'static str, TensorData)> {
        // `MomentumState::velocity` is private; its record item is the public way in.
        let Some(momentum) = state.momentum else {
            return Vec::new();
        };
        let item = momentum.into_item::<FullPrecisionSettings>();
        let velocity =
            <Tensor<B, D> as Record<B>>::from_item::<FullPrecisionSettings>(item.velocity, device);
        vec![("momentum_buffer", velocity.into_data())]
    }

    fn state_from_named<const D: usize>(
        get: &dyn Fn(&str) -> Option<TensorData>,
        device: &B::Device,
    ) -> Option<SgdState<B, D>> {
        let velocity = Tensor::from_data(get("momentum_buffer")?, device);
        Some(SgdState::new(Some(MomentumState::new(velocity))))
    }
}

impl<B: Backend> NamedState<B> for AdamW {
    fn state_to_named<const D: usize>(
        state: AdamWState<B, D>,
        _device: &B::Device,
    ) -> Vec<(&'static str, TensorData)> {
        let m = state.momentum;
        vec![
            ("exp_avg", m.moment_1.into_data()),
            ("exp_avg_sq", m.moment_2.into_data()),
            (
                "step",
                TensorData::new(vec![m.time as i64], Vec::<usize>::new()),
            ),
        ]
    }

    fn state_from_named<const D: usize>(
        get: &dyn Fn(&str) -> Option<TensorData>,
        device: &B::Device,
    ) -> Option<AdamWState<B, D>> {
        let time = get("step")?.iter::<i64>().next()? as usize;
        let moment_1 = Tensor::from_data(get("exp_avg")?, device);
        let moment_2 = Tensor::from_data(get("exp_avg_sq")?, device);
        Some(AdamWState::new(AdaptiveMomentumState::new(
            time, moment_1, moment_2,
        )))
    }
}

/// Writes the optimizer's state of `params` as `optim.<key>.<buffer>` tensors.
pub fn export_state<O, M, B>(
    optimizer: &OptimizerAdaptor<O, M, B>,
    params: &[ParamInfo],
    device: &B::Device,
    out: &mut NamedTensors,
) where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    O: NamedState<B::InnerBackend>,
{
    let mut record = optimizer.to_record();
    for param in params {
        let Some(entry) = record.remove(&param.id) else {
            continue;
        };
        let named = match param.rank {
            1 => O::state_to_named::<1>(entry.into_state::<1>(), device),
            2 => O::state_to_named::<2>(entry.into_state::<2>(), device),
            3 => O::state_to_named::<3>(entry.into_state::<3>(), device),
            4 => O::state_to_named::<4>(entry.into_state::<4>(), device),
            _ => continue,
        };
        for (buffer, data) in named {
            let dtype = data_dtype(&data);
            out.insert(
                format!("optim.{}.{buffer}", param.key),
                data.convert_dtype(dtype),
            );
        }
    }
}

/// Float state is stored in f32 (master precision); counters keep their integer type.
fn data_dtype(data: &TensorData) -> burn::tensor::DType {
    if data.dtype.is_float() {
        burn::tensor::DType::F32
    } else {
        data.dtype
    }
}

/// Restores the optimizer's state of `params` from `optim.<key>.<buffer>` tensors. Parameters
/// without saved state (e.g. never stepped) start fresh, as in PyTorch.
pub fn import_state<O, M, B>(
    optimizer: OptimizerAdaptor<O, M, B>,
    params: &[ParamInfo],
    tensors: &NamedTensors,
    device: &B::Device,
) -> OptimizerAdaptor<O, M, B>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    O: NamedState<B::InnerBackend>,
{
    let mut record = <OptimizerAdaptor<O, M, B> as Optimizer<M, B>>::Record::default();
    for param in params {
        let get = |buffer: &str| {
            tensors
                .get(&format!("optim.{}.{buffer}", param.key))
                .cloned()
        };
        let entry = match param.rank {
            1 => O::state_from_named::<1>(&get, device).map(AdaptorRecord::from_state::<1>),
            2 => O::state_from_named::<2>(&get, device).map(AdaptorRecord::from_state::<2>),
            3 => O::state_from_named::<3>(&get, device).map(AdaptorRecord::from_state::<3>),
            4 => O::state_from_named::<4>(&get, device).map(AdaptorRecord::from_state::<4>),
            _ => None,
        };
        if let Some(entry) = entry {
            record.insert(param.id, entry);
        }
    }
    optimizer.load_record(record)
}
