//! Figures derived from a decode cell and its run's header instead of measured: total tok/s
//! per GPU (the hardware card's GPU count), tokens per joule (the cell's GPU energy) and cost per
//! million output tokens (a GPU-hour price the reader gives). The registry lists them in
//! [`crate::registry::DERIVED`]; `docs/METHODOLOGY.md` defines them. The run comparison of the
//! page, its capacity table and `speedmatrix show --slo` all compute them here.
//!
//! A figure that cannot be derived is `None`, and [`missing_reason`] says why (no GPU count, no
//! energy reading, no price) — never 0 or a guess.

use crate::model::{DecodeCell, Results};
use crate::table::Row;

/// Seconds in an hour: a GPU-hour price ÷ this is the price of one GPU-second.
const SECONDS_PER_HOUR: f64 = 3600.0;

/// The GPUs serving the model, from the hardware card: `hardware.gpu_count` (NVML's selection,
/// or `run --gpu-count`), else the number of GPUs in the NVML inventory.
///
/// # Errors
/// Why there is no count, in words for a table note: the card has neither (a remote server
/// measured without `--gpu-count`, an imported run), or it says 0.
pub fn gpu_count(r: &Results) -> Result<u32, String> {
    let h = &r.hardware;
    match h.gpu_count.or((!h.gpus.is_empty()).then_some(h.gpus.len() as u32)) {
        Some(0) => Err("the hardware card says 0 GPUs".into()),
        Some(n) => Ok(n),
        None => Err("the hardware card has no GPU count (measure with `run --gpu-count N`)".into()),
    }
}

/// `value` shared out over `gpus` GPUs.
pub fn per_gpu(value: f64, gpus: u32) -> f64 {
    value / f64::from(gpus.max(1))
}

/// A cell's total tok/s per GPU; `None` when the cell has no total tok/s.
pub fn total_tps_per_gpu(cell: &DecodeCell, gpus: u32) -> Option<f64> {
    cell.total_tps.filter(|v| v.is_finite()).map(|v| per_gpu(v, gpus))
}

/// A cell's output tokens per joule of GPU energy: 1 ÷ its energy per token; `None` without
/// an energy reading (no NVML, a remote server) or when it is 0.
pub fn tokens_per_joule(cell: &DecodeCell) -> Option<f64> {
    cell.energy_j_per_token.filter(|j| j.is_finite() && *j > 0.0).map(|j| 1.0 / j)
}

/// What a million output tokens cost at `total_tps` on `gpus` GPUs priced `price_per_gpu_hour`
/// each: price × GPUs ÷ (tok/s × 3,600 s) × 10⁶, in the price's currency. `None` for a
/// throughput of 0 (nothing was produced) or a price that is negative or not a number.
pub fn cost_per_million_tokens(total_tps: f64, gpus: u32, price_per_gpu_hour: f64) -> Option<f64> {
    let ok = total_tps.is_finite() && total_tps > 0.0 && price_per_gpu_hour.is_finite() && price_per_gpu_hour >= 0.0;
    ok.then(|| price_per_gpu_hour * f64::from(gpus) / (total_tps * SECONDS_PER_HOUR) * 1e6)
}

/// What a derived figure needs besides the cell: the run's GPU count and the price typed in.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Basis {
    /// GPUs serving the model ([`gpu_count`]), when known.
    pub gpus: Option<u32>,
    /// Price of one GPU-hour, when given.
    pub price_per_gpu_hour: Option<f64>,
}

impl Basis {
    /// The basis of run `r` at this price.
    pub fn of(r: &Results, price_per_gpu_hour: Option<f64>) -> Basis {
        Basis { gpus: gpu_count(r).ok(), price_per_gpu_hour }
    }
}

/// A figure of a decode cell by id: any column of the measurement table (`total_tps`,
/// `ttft_ms_p50`) or a derived metric (`total_tps_per_gpu`, `tokens_per_joule`,
/// `cost_per_million_tokens`); `None` when the cell lacks it or the id is unknown.
pub fn cell_value(cell: &DecodeCell, id: &str, basis: Basis) -> Option<f64> {
    match id {
        "total_tps_per_gpu" => total_tps_per_gpu(cell, basis.gpus?),
        "tokens_per_joule" => tokens_per_joule(cell),
        "cost_per_million_tokens" => cost_per_million_tokens(cell.total_tps?, basis.gpus?, basis.price_per_gpu_hour?),
        _ => Row::Decode(cell).value_of(id),
    }
}

/// Why run `r` has none of derived figure `id`, in words for a table note; `None` when it can
/// have it (or the id is not a derived metric).
pub fn missing_reason(r: &Results, id: &str, price_per_gpu_hour: Option<f64>) -> Option<String> {
    match id {
        "total_tps_per_gpu" => gpu_count(r).err(),
        "tokens_per_joule" => (!r.decode.iter().any(|c| tokens_per_joule(c).is_some())).then(|| {
            let note = r.hardware.gpu_telemetry_note.as_deref().unwrap_or("no cell has an energy reading");
            format!("no GPU energy (NVML): {note}")
        }),
        "cost_per_million_tokens" => match (gpu_count(r), price_per_gpu_hour) {
            (Err(e), _) => Some(e),
            (Ok(_), None) => Some("no GPU-hour price given".into()),
            (Ok(_), Some(_)) => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CellStatus;

    fn seed() -> Results {
        crate::load_results(include_bytes!("../../tests/fixtures/h200-qwen3.5-122b-vllm.json")).expect("the seed loads")
    }

    fn cell(r: &Results, ctx: u64, n: u32) -> &DecodeCell {
        r.decode.iter().find(|c| c.context.tokens == ctx && c.concurrency == n).expect("a cell")
    }

    #[test]
    fn per_gpu_figures_use_the_hardware_card() {
        let r = seed();
        assert_eq!(gpu_count(&r), Ok(2));
        let c = cell(&r, 8192, 128);
        assert_eq!(total_tps_per_gpu(c, 2), Some(3171.3));
        let basis = Basis::of(&r, Some(2.5));
        assert_eq!(cell_value(c, "total_tps_per_gpu", basis), Some(3171.3));
        assert_eq!(cell_value(c, "total_tps", basis), Some(6342.6));
        assert_eq!(cell_value(c, "ttft_ms_p50", basis), Some(10187.0));
        assert_eq!(cell_value(cell(&r, 65536, 128), "total_tps_per_gpu", basis), None, "over capacity");
        // Without a count (an import, a remote server): no figure, and why.
        let mut anon = r.clone();
        anon.hardware.gpu_count = None;
        anon.hardware.gpus.clear();
        assert!(gpu_count(&anon).unwrap_err().contains("--gpu-count"));
        assert_eq!(cell_value(cell(&anon, 8192, 128), "total_tps_per_gpu", Basis::of(&anon, None)), None);
        assert!(missing_reason(&anon, "total_tps_per_gpu", None).unwrap().contains("no GPU count"));
        assert_eq!(missing_reason(&r, "total_tps_per_gpu", None), None);
        // The inventory counts when gpu_count is absent.
        let mut listed = r.clone();
        listed.hardware.gpu_count = None;
        assert_eq!(gpu_count(&listed), Ok(2));
        listed.hardware.gpu_count = Some(0);
        assert!(gpu_count(&listed).is_err());
    }

    #[test]
    fn cost_per_million_tokens_from_a_gpu_hour_price() {
        // 2 GPUs at 2.50 an hour = 5.00 an hour = 0.0013889 a second; at 6,342.6 tok/s a
        // million tokens take 157.664 s: 0.218978.
        let cost = cost_per_million_tokens(6342.6, 2, 2.5).unwrap();
        assert!((cost - 0.218_978).abs() < 1e-6, "{cost}");
        assert_eq!(cost_per_million_tokens(1000.0, 1, 3.6), Some(1.0));
        assert_eq!(cost_per_million_tokens(0.0, 1, 3.6), None);
        assert_eq!(cost_per_million_tokens(100.0, 1, -1.0), None);
        assert_eq!(cost_per_million_tokens(100.0, 1, f64::NAN), None);
        let r = seed();
        let c = cell(&r, 8192, 1);
        assert_eq!(cell_value(c, "cost_per_million_tokens", Basis::of(&r, None)), None, "no price");
        let v = cell_value(c, "cost_per_million_tokens", Basis::of(&r, Some(3.6))).unwrap();
        assert!((v - 2.0 / 237.1 * 1e3).abs() < 1e-9, "{v}");
        assert_eq!(missing_reason(&r, "cost_per_million_tokens", None).as_deref(), Some("no GPU-hour price given"));
        assert_eq!(missing_reason(&r, "cost_per_million_tokens", Some(1.0)), None);
    }

    #[test]
    fn tokens_per_joule_where_energy_exists() {
        let mut r = seed();
        assert!(missing_reason(&r, "tokens_per_joule", None).unwrap().starts_with("no GPU energy"));
        let i = r.decode.iter().position(|c| c.status == CellStatus::Valid).unwrap();
        r.decode[i].energy_j_per_token = Some(0.25);
        assert_eq!(tokens_per_joule(&r.decode[i]), Some(4.0));
        assert_eq!(cell_value(&r.decode[i], "tokens_per_joule", Basis::default()), Some(4.0));
        assert_eq!(missing_reason(&r, "tokens_per_joule", None), None);
        r.decode[i].energy_j_per_token = Some(0.0);
        assert_eq!(tokens_per_joule(&r.decode[i]), None, "0 J per token is no reading, not infinity");
    }
}
