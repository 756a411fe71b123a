//! Twin profiles: the engine's cost model and limits, fitted to a measured run.
//!
//! # `h200-qwen3.5-122b`: the fit
//!
//! Source: the seed run, transcribed from its published page into
//! `tests/fixtures/h200-qwen3.5-122b-vllm.json` (Qwen3.5-122B-A10B-GPTQ-Int4,
//! vLLM 0.26.1rc1.dev638+g52be12cfa, 2 × H200 NVL, MTP with 2 speculative tokens).
//!
//! - **Prefill**: the cost of computing prompt tokens `[0, L)` is `F(L) = L ÷ r(L)`, with
//!   `r(L)` (tok/s) interpolated linearly between the seed's prefill rows (8K 22.5K, 16K 22.8K,
//!   32K 22.1K, 64K 20.2K, 128K 16.6K, 251K 12.2K, 256K 12.0K, each row's TTFT ÷ its tokens,
//!   so the rows are reproduced exactly). A chunk `[s, e)` of chunked prefill costs
//!   `F(e) − F(s)`, so a cold prompt alone on the engine takes exactly the seed's TTFT
//!   (128K: 7,752 ms) however it is chunked. Prompt tokens found in the prefix cache cost
//!   0.0032 ms each (fitted to the seed's warm decode-cell TTFTs: 128K ≈ 600 ms, 251K ≈ 980 ms).
//! - **Decode**: one engine step over a batch of `B` decoding requests whose contexts sum to
//!   `S` tokens takes `t = 7.80 + (0.1158·B + 1.640·√B)·(1+K)/3 + 2.338·S/10⁶` ms, where `K` is
//!   the number of speculative tokens (2 in the seed). Each request emits `1 + a` tokens per
//!   step, `a` the accepted drafts: each draft is accepted with probability 0.7 until the first
//!   rejection, so a step emits 2.19 tokens on average (K = 2). The coefficients are a weighted
//!   least-squares fit of the seed's 42 valid decode cells, each cell's step time taken as
//!   `N × 2.19 ÷ total tok/s` with `S = N × (C + 2,048)` (streams sit half way through their
//!   4,096 output tokens on average). With `K = 0` a step emits one token and the per-request
//!   terms shrink to a third — an assumption, the seed has no such run.
//! - **KV cache**: 6,291,456 tokens (393,216 blocks of 16). The over-capacity rule
//!   `N × (C + 4,096) > budget` then marks exactly the seed's six over-capacity cells
//!   (64K×128, 128K×64, 128K×128, 251K×32/64/128): any budget in [4,718,592, 8,355,840) does.
//!   The twin does not share KV blocks between requests (the prefix cache saves compute, not
//!   memory), so every cell the rule admits runs all N at once and the others make requests
//!   wait.
//! - **Limits**: 1,024 running requests, 8,192 tokens per step (chunked prefill) — vLLM's
//!   defaults for the OpenAI server on large GPUs (assumed; the launch command sets neither).
//! - **Output hand-out**: 0.005 ms per request and step (an assumption: the seed does not show
//!   it; at 128 streams the last output of a step leaves 0.64 ms after the first).
//!
//! ## Residuals (twin − seed) ÷ seed, computed with the pure engine model
//!
//! Each decode cell is simulated as the seed measured it: one warm-up request, then N streams
//! sharing its prompt, `max_tokens` 4,096, `ignore_eos`, a stream replaced as soon as it ends,
//! a 30 s window opened once all N are decoding (see `engine::simulate_decode_cell` and the
//! test `residual_table_within_15_percent`, which prints this table with `--nocapture`).
//!
//! ```text
//! total tok/s, twin (residual vs seed)
//! ctx  |      1        |      2        |      4        |      8         |      16        |      32        |      64        |  128
//!   8K | 228.6 (-3.6%) | 420.1 (-2.7%) | 755.7 (+1.8%) | 1293.4 (-1.0%) | 2123.6 (+5.0%) | 3272.9 (-1.5%) | 4733.8 (+2.2%) | 6424.7 (+1.3%)
//!  16K | 227.9 (-4.8%) | 417.5 (-2.5%) | 747.9 (+4.2%) | 1269.5 (-1.6%) | 2085.7 (+4.5%) | 3184.4 (-1.0%) | 4546.4 (+1.8%) | 6085.9 (+1.4%)
//!  32K | 226.4 (-3.4%) | 412.7 (-3.4%) | 733.1 (-4.2%) | 1224.6 (-3.3%) | 2012.7 (+2.3%) | 3018.0 (-1.2%) | 4216.8 (+1.7%) | 5503.1 (+1.6%)
//!  64K | 224.0 (-0.8%) | 403.3 (-2.3%) | 704.6 (-3.9%) | 1139.4 (-5.2%) | 1880.6 (-2.2%) | 2733.1 (-1.2%) | 3674.1 (+2.3%) | over capacity
//! 128K | 219.0 (+0.2%) | 386.9 (-1.0%) | 649.9 (+0.4%) | 1084.5 (+1.7%) | 1662.0 (-2.9%) | 2296.7 (-0.5%) | over capacity  | over capacity
//! 251K | 209.5 (+5.8%) | 357.4 (+0.6%) | 558.4 (-6.3%) |  970.8 (-0.6%) | 1363.7 (-1.4%) | over capacity  | over capacity  | over capacity
//!
//! worst |residual| 6.3 % (251K × 4); over-capacity cells: the twin admits fewer than N and
//! the rest wait (64K × 128: at most 96 of 128 hold their prompts).
//!
//! prefill TTFT (cold, ms), twin = seed on every row (the rows are the interpolation's knots):
//! 8K 363, 16K 713, 32K 1,462, 64K 3,189, 128K 7,752, 251K 20,633, 256K 21,515.
//! ```
//!
//! # `tiny`
//!
//! Small and fast for tests and the lag benchmark: 32,768-token context, a 4M-token KV cache,
//! 1,024 running requests at most, prefill at 200K tok/s, decode steps of
//! `2 + 0.1·B + 0.5·S/10⁶` ms (a batch of 1,024 short requests: ≈ 104 ms), no speculative
//! decoding by default, outputs handed out at 0.02 ms per request (1,024 outputs of a step
//! leave over ≈ 20 ms).

/// The cost model of one engine: how long prefill and decode steps take (ms).
#[derive(Debug, Clone, PartialEq)]
pub struct CostModel {
    /// Prefill speed knots: (prompt length in tokens, prompt tok/s for a cold prompt of that
    /// length alone on the engine). Sorted by length; interpolated linearly, clamped outside.
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
        let k = &self.prefill_knots;
        let x = len as f64;
        if k.is_empty() {
            return 10_000.0;
        }
        if x <= k[0].0 as f64 {
            return k[0].1;
        }
        for w in k.windows(2) {
            let (x0, y0) = (w[0].0 as f64, w[0].1);
            let (x1, y1) = (w[1].0 as f64, w[1].1);
            if x <= x1 {
                return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
            }
        }
        k[k.len() - 1].1
    }

    /// `F(L)`: time (ms) to prefill tokens `[0, len)` of a cold prompt alone.
    pub fn prefill_total_ms(&self, len: u32) -> f64 {
        if len == 0 {
            return 0.0;
        }
        len as f64 / self.prefill_rate(len) * 1000.0
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
        let scale = (1 + spec_tokens) as f64 / (1 + self.fit_spec_tokens) as f64;
        self.step_base_ms
            + (self.per_seq_ms * b + self.per_sqrt_seq_ms * b.sqrt()) * scale
            + self.per_mtok_context_ms * context_tokens as f64 / 1e6
    }
}

/// A named profile: what the twin announces and how its engine behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Profile name as given to `--profile`.
    pub name: &'static str,
    /// Served model name (`/v1/models` id, `model` in chunks).
    pub served_name: String,
    /// The model path reported as `root` in `/v1/models`.
    pub root: String,
    /// Engine version reported by `/version`.
    pub engine_version: String,
    /// Longest prompt + output in tokens.
    pub max_model_len: u32,
    /// KV cache block size (tokens).
    pub block_size: u32,
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
    /// The cost model.
    pub cost: CostModel,
}

/// Names accepted by [`Profile::by_name`].
pub const PROFILE_NAMES: &[&str] = &["h200-qwen3.5-122b", "tiny"];

/// An unknown profile name (`--profile`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown profile `{0}` (known: {known})", known = PROFILE_NAMES.join(", "))]
pub struct UnknownProfile(pub String);

/// The seed's prefill rows: (prompt tokens, TTFT in ms). 251K = 257,024 tokens.
pub const SEED_PREFILL: &[(u32, f64)] = &[
    (8_192, 363.0),
    (16_384, 713.0),
    (32_768, 1_462.0),
    (65_536, 3_189.0),
    (131_072, 7_752.0),
    (257_024, 20_633.0),
    (262_144, 21_515.0),
];

/// The seed's decode contexts (tokens) in row order.
pub const SEED_CONTEXTS: &[u32] = &[8_192, 16_384, 32_768, 65_536, 131_072, 257_024];
/// The seed's concurrency levels in column order.
pub const SEED_CONCURRENCY: &[usize] = &[1, 2, 4, 8, 16, 32, 64, 128];
/// The seed's decode matrix, total tok/s; `None` = over capacity.
pub const SEED_DECODE_TPS: &[[Option<f64>; 8]; 6] = &[
    [Some(237.1), Some(431.6), Some(742.7), Some(1306.0), Some(2023.2), Some(3321.5), Some(4632.0), Some(6342.6)],
    [Some(239.3), Some(428.2), Some(717.5), Some(1290.8), Some(1995.5), Some(3217.3), Some(4467.3), Some(6004.6)],
    [Some(234.4), Some(427.4), Some(765.3), Some(1266.5), Some(1966.8), Some(3055.0), Some(4145.6), Some(5413.9)],
    [Some(225.8), Some(413.0), Some(733.5), Some(1202.3), Some(1923.6), Some(2766.4), Some(3592.5), None],
    [Some(218.5), Some(390.8), Some(647.1), Some(1066.2), Some(1710.9), Some(2307.8), None, None],
    [Some(198.0), Some(355.4), Some(596.0), Some(977.0), Some(1382.8), None, None, None],
];

impl Profile {
    /// Look a profile up by name.
    pub fn by_name(name: &str) -> Result<Profile, UnknownProfile> {
        match name {
            "h200-qwen3.5-122b" | "h200" => Ok(Profile::h200_qwen()),
            "tiny" => Ok(Profile::tiny()),
            other => Err(UnknownProfile(other.to_string())),
        }
    }

    /// The H200 / Qwen3.5-122B profile fitted to the seed (see the module docs).
    pub fn h200_qwen() -> Profile {
        Profile {
            name: "h200-qwen3.5-122b",
            served_name: "qwen".into(),
            root: "Qwen/Qwen3.5-122B-A10B-GPTQ-Int4".into(),
            engine_version: "0.26.1rc1.dev638+g52be12cfa".into(),
            max_model_len: 262_144,
            block_size: 16,
            kv_tokens: 6_291_456,
            max_num_seqs: 1024,
            max_batched_tokens: 8192,
            spec_tokens: 2,
            accept_rate: 0.7,
            prefix_cache: true,
            output_ms_per_request: 0.005,
            cost: CostModel {
                prefill_knots: SEED_PREFILL.iter().map(|&(len, ttft)| (len, len as f64 / (ttft / 1000.0))).collect(),
                cached_ms_per_token: 0.0032,
                step_base_ms: 7.80,
                per_seq_ms: 0.1158,
                per_sqrt_seq_ms: 1.640,
                per_mtok_context_ms: 2.338,
                fit_spec_tokens: 2,
            },
        }
    }

    /// A small, fast profile for tests and benchmarks.
    pub fn tiny() -> Profile {
        Profile {
            name: "tiny",
            served_name: "tiny".into(),
            root: "speedmatrix/tiny-twin".into(),
            engine_version: "0.26.1rc1.dev638+g52be12cfa".into(),
            max_model_len: 32_768,
            block_size: 16,
            kv_tokens: 4_194_304,
            max_num_seqs: 1024,
            max_batched_tokens: 8192,
            spec_tokens: 0,
            accept_rate: 0.7,
            prefix_cache: true,
            output_ms_per_request: 0.02,
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
        self.kv_tokens / self.block_size as u64
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
    fn prefill_reproduces_seed_rows() {
        let p = Profile::h200_qwen();
        for &(len, ttft) in SEED_PREFILL {
            let got = p.cost.prefill_total_ms(len);
            assert!((got - ttft).abs() < 0.5, "{len}: {got} vs {ttft}");
            // Chunking does not change the total.
            let chunked: f64 = (0..len).step_by(8192).map(|s| p.cost.prefill_chunk_ms(s, (s + 8192).min(len))).sum();
            assert!((chunked - ttft).abs() < 0.5, "{len}: chunked {chunked}");
        }
    }

    #[test]
    fn kv_budget_marks_exactly_the_seed_over_capacity_cells() {
        let p = Profile::h200_qwen();
        for (row, &c) in SEED_CONTEXTS.iter().enumerate() {
            for (col, &n) in SEED_CONCURRENCY.iter().enumerate() {
                let over = n as u64 * (c as u64 + 4096) > p.kv_tokens;
                assert_eq!(over, SEED_DECODE_TPS[row][col].is_none(), "{c} x {n}");
            }
        }
        assert_eq!(p.kv_tokens % p.block_size as u64, 0);
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
    }
}
