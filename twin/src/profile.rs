//! Twin profiles: an engine's limits and cost model.
//!
//! A profile says what the twin announces (model, version, `max_model_len`, KV budget) and how
//! its engine spends time: the front end's per-request work, prefill chunks and decode steps
//! (see [`crate::engine`] for how they are scheduled). Profiles are not typed in here: they are
//! fitted to a measured run by [`crate::fit`], which also has [`Profile::by_name`] and
//! [`Profile::h200_qwen`].
//!
//! - `h200-qwen3.5-122b` is the fit of the seed run (`tests/fixtures/h200-qwen3.5-122b-vllm.json`,
//!   Qwen3.5-122B-A10B GPTQ-Int4 under vLLM 0.26 on 2 × H200 NVL with MTP), built when first
//!   asked for. Its residual table — every prefill row and decode cell of the seed, simulated
//!   the way the seed measured it — is printed by
//!   `speedmatrix simulate --profile h200-qwen3.5-122b --residuals` and checked by the test
//!   `residuals_of_the_seed_fit` in `twin/tests/residuals.rs`: each figure within ±15 % of the
//!   twin's median over 20 replay seeds, except a TTFT median that the seed's tool took over
//!   opening streams and the requests that replaced finished ones (cells of 2 to 16 streams
//!   with requests completed). That median is one draw that turns on when a few replacements
//!   happened to arrive (two within the front end's spacing of each other queue there), so it
//!   is checked against the twin's 5–95 % range over the seeds, widened by ±15 %; no
//!   deterministic model puts every such draw within ±15 % of its median without being tuned
//!   to the draws: a replay of the twin itself, measured the seed's way and judged against the
//!   twin's own medians, has every mixed median within ±15 % in 2 % of draws (the table's last
//!   line; see [`crate::replay`]).
//! - `tiny` is small and fast for tests and the lag benchmark: 32,768-token context, a
//!   4M-token KV cache, 1,024 running requests at most, prefill at 200K tok/s, decode steps of
//!   `2 + 0.1·B + 0.5·S/10⁶` ms, no front-end cost, no speculative decoding, outputs handed out
//!   0.02 ms apart.

/// Linear interpolation between `(x, y)` knots sorted by `x`, flat outside them; 0 without
/// knots.
pub fn interpolate(knots: &[(u32, f64)], x: u32) -> f64 {
    let Some(first) = knots.first() else {
        return 0.0;
    };
    let x = f64::from(x);
    if x <= f64::from(first.0) {
        return first.1;
    }
    for w in knots.windows(2) {
        let (x0, y0) = (f64::from(w[0].0), w[0].1);
        let (x1, y1) = (f64::from(w[1].0), w[1].1);
        if x <= x1 {
            return if x1 > x0 { y0 + (y1 - y0) * (x - x0) / (x1 - x0) } else { y1 };
        }
    }
    knots[knots.len() - 1].1
}

/// The server's per-request work before a request reaches the scheduler (ms), by prompt length.
///
/// A lone request spends the *latency* there (parsing the body, the chat template,
/// tokenization, the engine's intake), longer while the server streams other requests' outputs;
/// and requests leave one after another, in arrival order, no closer than the *spacing* (the
/// part of that work done one request at a time). A request enters the scheduler's waiting
/// queue when it leaves.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FrontendModel {
    /// (prompt tokens, ms) of a lone request's latency, interpolated linearly, flat outside.
    pub latency_knots: Vec<(u32, f64)>,
    /// (prompt tokens, ms) of the least time between two requests leaving, interpolated
    /// linearly, flat outside.
    pub spacing_knots: Vec<(u32, f64)>,
    /// Slow-down of the side-by-side part of the latency per request already running (0.2: it
    /// takes twice as long for a request that arrives while 5 others run).
    pub contention_per_running: f64,
}

impl FrontendModel {
    /// Latency of a prompt of `len` tokens arriving while `running` requests are in the engine:
    /// the part done side by side (the latency beyond the spacing) slows by
    /// `contention_per_running` per running request; the one-at-a-time part does not.
    pub fn latency_ms(&self, len: u32, running: usize) -> f64 {
        let lone = interpolate(&self.latency_knots, len).max(0.0);
        let side_by_side = (lone - self.spacing_ms(len)).max(0.0);
        lone + side_by_side * self.contention_per_running.max(0.0) * running as f64
    }

    /// Least time between a request of `len` prompt tokens leaving and the one before it.
    pub fn spacing_ms(&self, len: u32) -> f64 {
        interpolate(&self.spacing_knots, len).max(0.0)
    }

    /// Front-end time of a lone request (nothing running, nothing ahead of it).
    pub fn lone_ms(&self, len: u32) -> f64 {
        self.latency_ms(len, 0)
    }
}

/// The cost model of one engine: how long prefill and decode steps take (ms).
#[derive(Debug, Clone, PartialEq)]
pub struct CostModel {
    /// Prefill speed knots: (prompt length in tokens, prompt tok/s of the engine computing a
    /// cold prompt of that length alone, front end excluded). Sorted by length; interpolated
    /// linearly, flat outside.
    pub prefill_knots: Vec<(u32, f64)>,
    /// Cost of one prompt token served from the prefix cache (ms).
    pub cached_ms_per_token: f64,
    /// Fixed cost of a step that decodes at least one request (ms).
    pub step_base_ms: f64,
    /// Decode cost per request in the batch (ms), at `fit_spec_tokens` speculative tokens.
    pub per_seq_ms: f64,
    /// Decode cost per √(requests in the batch) (ms), at `fit_spec_tokens`.
    pub per_sqrt_seq_ms: f64,
    /// Decode cost per million tokens of context summed over the batch (ms).
    pub per_mtok_context_ms: f64,
    /// Speculative tokens the per-request terms were fitted at (they scale with `(1+K)/(1+this)`).
    pub fit_spec_tokens: u32,
}

impl CostModel {
    /// Prompt tok/s of a cold prompt of `len` tokens (interpolated between the knots).
    pub fn prefill_rate(&self, len: u32) -> f64 {
        if self.prefill_knots.is_empty() {
            return 10_000.0;
        }
        interpolate(&self.prefill_knots, len).max(1e-3)
    }

    /// `F(L)`: time (ms) to prefill tokens `[0, len)` of a cold prompt alone.
    pub fn prefill_total_ms(&self, len: u32) -> f64 {
        if len == 0 {
            return 0.0;
        }
        f64::from(len) / self.prefill_rate(len) * 1000.0
    }

    /// Time (ms) to prefill the chunk `[start, end)` of a prompt: `F(end) − F(start)`, never
    /// negative.
    pub fn prefill_chunk_ms(&self, start: u32, end: u32) -> f64 {
        (self.prefill_total_ms(end) - self.prefill_total_ms(start)).max(0.0)
    }

    /// Time (ms) of the decode part of a step: `batch` requests whose contexts sum to
    /// `context_tokens`, verifying `spec_tokens` drafts each.
    pub fn decode_ms(&self, batch: usize, context_tokens: u64, spec_tokens: u32) -> f64 {
        if batch == 0 {
            return 0.0;
        }
        let b = batch as f64;
        let scale = f64::from(1 + spec_tokens) / f64::from(1 + self.fit_spec_tokens);
        self.step_base_ms
            + (self.per_seq_ms * b + self.per_sqrt_seq_ms * b.sqrt()) * scale
            + self.per_mtok_context_ms * context_tokens as f64 / 1e6
    }
}

/// A profile: what the twin announces and how its engine behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Profile name (`--profile`, or `fit:FILE` for `--fit FILE`).
    pub name: String,
    /// Served model name (`/v1/models` id, `model` in chunks).
    pub served_name: String,
    /// The model path reported as `root` in `/v1/models`.
    pub root: String,
    /// The vLLM version the twin imitates; `/version` reports it with [`crate::TWIN_SUFFIX`].
    pub engine_version: String,
    /// Longest prompt + output in tokens.
    pub max_model_len: u32,
    /// KV cache block size (tokens).
    pub block_size: u32,
    /// Granularity (tokens) at which a cached prompt prefix can be reused: the block size for
    /// attention-only models; hybrid models keep their recurrent state only at coarser
    /// boundaries (see [`crate::engine`]). A multiple of `block_size`.
    pub cache_granularity: u32,
    /// KV cache capacity (tokens); a multiple of `block_size`.
    pub kv_tokens: u64,
    /// Most requests running at once (vLLM `max_num_seqs`).
    pub max_num_seqs: usize,
    /// Token budget of one engine step (vLLM `max_num_batched_tokens`), chunked prefill.
    pub max_batched_tokens: u32,
    /// Speculative tokens per step (MTP); 0 turns speculative decoding off.
    pub spec_tokens: u32,
    /// Probability that a draft token is accepted (each, until the first rejection).
    pub accept_rate: f64,
    /// Whether the prefix cache is on.
    pub prefix_cache: bool,
    /// Time the API server spends handing out one request's output of a step (ms): a step's
    /// outputs leave one after another, the i-th at `step end + i × this`.
    pub output_ms_per_request: f64,
    /// The front end's per-request work.
    pub frontend: FrontendModel,
    /// The cost model.
    pub cost: CostModel,
}

/// Names accepted by [`Profile::by_name`].
pub const PROFILE_NAMES: &[&str] = &["h200-qwen3.5-122b", "tiny"];

/// An unknown profile name (`--profile`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown profile `{0}` (known: {known})", known = PROFILE_NAMES.join(", "))]
pub struct UnknownProfile(pub String);

/// The seed run's results file, embedded: the h200 profile is its fit.
pub const SEED_RESULTS: &str = include_str!("../../tests/fixtures/h200-qwen3.5-122b-vllm.json");

impl Profile {
    /// A small, fast profile for tests and benchmarks.
    pub fn tiny() -> Profile {
        Profile {
            name: "tiny".into(),
            served_name: "tiny".into(),
            root: "speedmatrix/tiny-twin".into(),
            engine_version: "0.26.1rc1.dev638+g52be12cfa".into(),
            max_model_len: 32_768,
            block_size: 16,
            cache_granularity: 16,
            kv_tokens: 4_194_304,
            max_num_seqs: 1024,
            max_batched_tokens: 8192,
            spec_tokens: 0,
            accept_rate: 0.7,
            prefix_cache: true,
            output_ms_per_request: 0.02,
            frontend: FrontendModel::default(),
            cost: CostModel {
                prefill_knots: vec![(1024, 200_000.0)],
                cached_ms_per_token: 0.0001,
                step_base_ms: 2.0,
                per_seq_ms: 0.1,
                per_sqrt_seq_ms: 0.0,
                per_mtok_context_ms: 0.5,
                fit_spec_tokens: 0,
            },
        }
    }

    /// KV cache capacity in blocks.
    pub fn kv_blocks(&self) -> u64 {
        self.kv_tokens / u64::from(self.block_size.max(1))
    }

    /// Mean tokens a decoding request emits per step: `1 + α + α² + … + α^K`.
    pub fn mean_tokens_per_step(&self) -> f64 {
        (0..=self.spec_tokens).map(|k| self.accept_rate.powi(k as i32)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_is_linear_between_knots_and_flat_outside() {
        let k = [(100, 1.0), (200, 3.0)];
        assert_eq!(interpolate(&k, 50), 1.0);
        assert_eq!(interpolate(&k, 150), 2.0);
        assert_eq!(interpolate(&k, 400), 3.0);
        assert_eq!(interpolate(&[], 7), 0.0);
    }

    #[test]
    fn chunking_does_not_change_a_prefill() {
        let c = Profile::h200_qwen().cost;
        for len in [8192u32, 65_536, 257_024] {
            let whole = c.prefill_total_ms(len);
            let chunked: f64 = (0..len).step_by(8192).map(|s| c.prefill_chunk_ms(s, (s + 8192).min(len))).sum();
            assert!((chunked - whole).abs() < 1e-6, "{len}: chunked {chunked} vs {whole}");
        }
    }

    #[test]
    fn frontend_stages_and_contention() {
        let f = FrontendModel {
            latency_knots: vec![(1000, 10.0), (2000, 20.0)],
            spacing_knots: vec![(1000, 5.0)],
            contention_per_running: 0.5,
        };
        assert_eq!(f.latency_ms(1500, 0), 15.0);
        // 10 ms side by side (15 − the 5 ms spacing), slowed by 0.5 per running request.
        assert_eq!(f.latency_ms(1500, 2), 25.0);
        // A spacing beyond the latency: nothing is done side by side, nothing slows.
        let g = FrontendModel { latency_knots: vec![(1000, 3.0)], ..f.clone() };
        assert_eq!(g.latency_ms(1000, 4), 3.0);
        assert_eq!(f.spacing_ms(9999), 5.0);
        assert_eq!(f.lone_ms(1000), 10.0);
        assert_eq!(FrontendModel::default().lone_ms(123), 0.0);
    }

    #[test]
    fn decode_step_grows_with_batch_and_context() {
        let c = Profile::h200_qwen().cost;
        assert!(c.decode_ms(2, 16_384, 2) > c.decode_ms(1, 16_384, 2));
        assert!(c.decode_ms(2, 32_768, 2) > c.decode_ms(2, 16_384, 2));
        assert!(c.decode_ms(1, 8192, 0) < c.decode_ms(1, 8192, 2));
        assert_eq!(c.decode_ms(0, 0, 2), 0.0);
    }

    #[test]
    fn unknown_profile_is_an_error() {
        let e = Profile::by_name("nope").unwrap_err();
        assert_eq!(e.to_string(), "unknown profile `nope` (known: h200-qwen3.5-122b, tiny)");
        assert_eq!(Profile::by_name("tiny").unwrap().name, "tiny");
        assert_eq!(Profile::by_name("h200").unwrap().name, "h200-qwen3.5-122b");
    }
}
