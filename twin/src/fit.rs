//! The fit: an engine [`Profile`] from a results file, so the twin can stand in for the server
//! that run measured (`speedmatrix simulate --fit RUN.json`; the `h200-qwen3.5-122b` profile
//! is the fit of the seed run).
//!
//! The procedure, in order (each step uses only what the file holds; what it lacks is a
//! default, listed in [`Fit::notes`]):
//!
//! 1. **Identity and limits** from the engine section: served name, model, version,
//!    `max_model_len`, speculative tokens (`speculative_decoding` or the launch command),
//!    `--max-num-batched-tokens`, `--no-enable-prefix-caching`, `max_running_requests` (else
//!    `--max-num-seqs`). A step's outputs are handed out 0.03 ms apart per request (vLLM's API
//!    server turns each request's output into an SSE chunk in turn: 4 ms for 128 streams); no
//!    results file shows it.
//! 2. **KV budget**: the recorded budget; else one that the plan's rule
//!    `N × (context + max_tokens) > budget` turns into exactly the file's over-capacity cells
//!    (the geometric middle of the allowed range, rounded to a power-of-two multiple).
//!    Either way, at least one request the server took: `max_model_len`, the longest prefill
//!    row, each measured cell's prompt + `max_tokens` (vLLM does not start without room for
//!    one `max_model_len` request; a smaller budget would hold a request forever), with a note.
//! 3. **Decode steps**: every valid cell gives a step time `N × m ÷ total tok/s` (`m` the
//!    tokens a request emits per step with speculative decoding, `1 + α + … + α^K`) at a
//!    batch of N whose contexts sum to `N × (prompt + max_tokens ÷ 2)`; the step model
//!    `base + a·N + b·√N + c·context` is a non-negative least-squares fit of those, weighted
//!    by relative error.
//! 4. **Front end**: per context, a lone warm request's TTFT (the 1-stream cell) and the
//!    spacing of the opening streams' first tokens (cells whose TTFT median is over the
//!    opening streams only: `(median − lone) ÷ (rank of the median − 1)`) give the latency
//!    (the lone TTFT less the engine's time for the uncached tail) and the spacing. The
//!    slow-down of the latency while other requests run is the value (0…1, to 0.025) whose
//!    replay best matches the TTFT of cells with replacement requests in them. Last, a
//!    context's spacing whose replay misses those opening-stream medians by more than 2 % on
//!    average is moved (secant steps on replays) to within 0.5 %: the stage estimate counts
//!    the engine's own prefills and decode steps between first tokens as front-end time (a
//!    real CPU vLLM run's 8-stream TTFT, `tests/fixtures/vllm-cpu-smollm2-135m.json`, replayed
//!    17.4 % high, +0.1 % after); the seed's contexts are all within 2 % and keep theirs.
//! 5. **Prefill**: each prefill row's cold TTFT minus the front end is the engine's time to
//!    compute that prompt; prompt tok/s knots follow.
//! 6. **Rate cells** ([`crate::rate_fit`]): a file's open-loop rate cells add decode-step rows
//!    to step 3 (TPOT at a light prefill load), and give the front end and prefill of step 4
//!    and 5 where no 1-stream decode cell or prefill row does (each context's lowest-rate
//!    TTFT): a file of rate cells alone gives a profile.

use crate::profile::{CostModel, FrontendModel, Profile, UnknownProfile};
use crate::rate_fit;
use crate::replay::{replay_cell, CellPlan, Procedure};
use speedmatrix_schema::{CellStatus, DecodeCell, Results};
use std::fmt;
use std::sync::OnceLock;

/// A fitted profile and what the fit had to assume.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// The profile.
    pub profile: Profile,
    /// Values the file did not give, with what was used instead.
    pub notes: Vec<String>,
}

/// Why a results file cannot be fitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FitError {
    /// No prefill row with a TTFT.
    NoPrefill,
    /// No measured decode cell with total tok/s.
    NoDecode,
    /// The file does not record the run's `max_tokens` (an import whose source lacked it).
    NoMaxTokens,
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FitError::NoPrefill => f.write_str(
                "the run has no prefill row with a TTFT and no valid rate cell with one; a fit needs at least one (measure with --prefill-contexts)",
            ),
            FitError::NoDecode => f.write_str(
                "the run has no measured decode cell with total tok/s and no valid rate cell with TPOT at a light prefill load; a fit needs at least one",
            ),
            FitError::NoMaxTokens => f.write_str(
                "the run does not record config.max_tokens (its source did not give it); a fit needs the output limit the requests ran with",
            ),
        }
    }
}

impl std::error::Error for FitError {}

/// Fit a profile to `results` (see the module docs for the procedure).
///
/// # Errors
/// [`FitError`] when the file has no prefill row, no measured decode cell or no `max_tokens`.
pub fn fit(results: &Results) -> Result<Fit, FitError> {
    if results.config.max_tokens.is_none() {
        return Err(FitError::NoMaxTokens);
    }
    let mut notes = Vec::new();
    let mut p = identity(results, &mut notes);
    p.kv_tokens = kv_budget(results, p.block_size, &mut notes);
    p.kv_tokens = kv_floor(results, &p, p.kv_tokens, &mut notes);
    let cells: Vec<&DecodeCell> = results
        .decode
        .iter()
        .filter(|c| c.status == CellStatus::Valid && c.total_tps.is_some_and(|t| t > 0.0))
        .collect();
    // Rate cells (crate::rate_fit): the front end and prefill from each context's lowest
    // rate, decode steps from the cells with little prefill load.
    let low_load = rate_fit::low_load_ttft(results);
    let rate_frontend = rate_fit::frontend_ms(&low_load);
    let rate_rows =
        rate_fit::decode_rows(results, p.mean_tokens_per_step(), max_tokens(results), rate_frontend.unwrap_or(0.0));
    if cells.is_empty() && rate_rows.is_empty() {
        return Err(FitError::NoDecode);
    }
    if !results.prefill.iter().any(|r| r.ttft_ms.is_some_and(|t| t > 0.0)) && low_load.is_empty() {
        return Err(FitError::NoPrefill);
    }
    if !rate_rows.is_empty() {
        notes.push(format!(
            "decode steps: {} from decode cells, {} from rate cells (TPOT with little prefill load)",
            cells.len(),
            rate_rows.len()
        ));
    }
    p.cost = decode_cost(&p, &cells, max_tokens(results), &rate_rows);
    let procedure = Procedure::of(results);
    // Front end and prefill depend on each other only through a lone warm request's engine
    // time (a few ms): two passes settle it.
    for _ in 0..2 {
        p.frontend = frontend(&p, procedure, &results.decode, &mut notes);
        if p.frontend.latency_knots.is_empty() && !low_load.is_empty() {
            let f = rate_frontend.unwrap_or_else(|| {
                notes.push(
                    "front end: rate cells at one context cannot tell it from prefill; counted as prefill (0 ms)"
                        .into(),
                );
                0.0
            });
            p.frontend.latency_knots = low_load.iter().map(|&(len, _)| (len, f)).collect();
        }
        p.cost.prefill_knots = prefill_knots(&p, results, &mut notes);
        let f = p.frontend.lone_ms(low_load.first().map_or(0, |x| x.0));
        for (len, tps) in rate_fit::prefill_knots(&low_load, f) {
            if !p.cost.prefill_knots.iter().any(|k| k.0 == len) {
                p.cost.prefill_knots.push((len, tps));
            }
        }
        p.cost.prefill_knots.sort_by_key(|k| k.0);
    }
    p.frontend.contention_per_running = contention(&p, procedure, results);
    // The spacing's stage estimate counts the engine's time between first tokens as the front
    // end's, and the contention moves the opening streams too: refine it by replay, last.
    refine_spacing(&mut p, procedure, results);
    let mut seen = std::collections::HashSet::new();
    notes.retain(|n| seen.insert(n.clone()));
    Ok(Fit { profile: p, notes })
}

// The named profiles, one of which is a fit: here, so that `profile` does not depend on the fit.
impl Profile {
    /// Look a profile up by name.
    pub fn by_name(name: &str) -> Result<Profile, UnknownProfile> {
        match name {
            "h200-qwen3.5-122b" | "h200" => Ok(Profile::h200_qwen()),
            "tiny" => Ok(Profile::tiny()),
            other => Err(UnknownProfile(other.to_string())),
        }
    }

    /// The H200 / Qwen3.5-122B profile: the fit of the seed run (computed once per process).
    pub fn h200_qwen() -> Profile {
        static FITTED: OnceLock<Profile> = OnceLock::new();
        FITTED
            .get_or_init(|| {
                let seed = speedmatrix_schema::load_results(crate::profile::SEED_RESULTS.as_bytes())
                    .expect("the embedded seed fixture is a valid results file");
                let mut p = fit(&seed).expect("the seed fixture has what a fit needs").profile;
                p.name = "h200-qwen3.5-122b".into();
                p
            })
            .clone()
    }
}

/// The run's `max_tokens` ([`fit`] refuses a file without it).
fn max_tokens(r: &Results) -> u32 {
    r.config.max_tokens.unwrap_or_default()
}

/// Step 1: what the twin announces and its limits.
fn identity(r: &Results, notes: &mut Vec<String>) -> Profile {
    let e = &r.engine;
    let launch = e.launch_command.as_deref().unwrap_or("");
    let spec_tokens = e
        .speculative_decoding
        .as_deref()
        .and_then(first_number)
        .or_else(|| flag_number(launch, "num_speculative_tokens"))
        .unwrap_or(0);
    let rates: Vec<f64> = r.decode.iter().filter_map(|c| c.spec_accept_rate).collect();
    let accept_rate = if rates.is_empty() {
        if spec_tokens > 0 {
            notes.push("speculative acceptance not recorded: each draft token accepted with p = 0.7".into());
        }
        0.7
    } else {
        // Accepted ÷ drafted = (α + … + α^K) ÷ K; solve for α by bisection.
        per_token_acceptance(rates.iter().sum::<f64>() / rates.len() as f64, spec_tokens.max(1))
    };
    let longest = r.decode.iter().map(|c| c.context.tokens).chain(r.prefill.iter().map(|p| p.context.tokens)).max();
    let max_model_len = match e.max_model_len {
        Some(m) => m,
        None => {
            let m = longest.unwrap_or(32_768) + u64::from(max_tokens(r)) + 1;
            notes.push(format!("max_model_len not recorded: {m} (longest context + max_tokens)"));
            m
        }
    };
    let max_num_seqs = e
        .max_running_requests
        .map(|m| m as usize)
        .or_else(|| flag_number(launch, "max-num-seqs").map(|m| m as usize))
        .filter(|m| *m > 0)
        .unwrap_or_else(|| {
            notes.push("max_num_seqs not recorded: 1,024 (vLLM's default on large GPUs)".into());
            1024
        });
    let max_batched_tokens = flag_number(launch, "max-num-batched-tokens").filter(|m| *m > 0).unwrap_or_else(|| {
        notes.push("max_num_batched_tokens not in the launch command: 8,192 (vLLM's default for the OpenAI server on large GPUs)".into());
        8192
    });
    let served = e.served_model_name.clone().or_else(|| e.model.clone()).unwrap_or_else(|| "model".into());
    Profile {
        name: format!("fit:{}", r.run.id),
        root: e.model.clone().unwrap_or_else(|| served.clone()),
        served_name: served,
        engine_version: e.version.clone().unwrap_or_else(|| "unknown".into()),
        max_model_len: u32::try_from(max_model_len).unwrap_or(u32::MAX),
        block_size: 16,
        cache_granularity: 16,
        kv_tokens: 0,
        max_num_seqs,
        max_batched_tokens,
        spec_tokens,
        accept_rate,
        prefix_cache: !launch.contains("--no-enable-prefix-caching"),
        output_ms_per_request: 0.03,
        frontend: FrontendModel::default(),
        cost: CostModel {
            prefill_knots: vec![],
            cached_ms_per_token: 0.0,
            step_base_ms: 0.0,
            per_seq_ms: 0.0,
            per_sqrt_seq_ms: 0.0,
            per_mtok_context_ms: 0.0,
            fit_spec_tokens: spec_tokens,
        },
    }
}

fn first_number(s: &str) -> Option<u32> {
    let digits: String = s.chars().skip_while(|c| !c.is_ascii_digit()).take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The number after `name` in a launch command (`--name N`, `--name=N`, `"name": N`).
fn flag_number(launch: &str, name: &str) -> Option<u32> {
    let at = launch.find(name)? + name.len();
    let rest = launch[at..].trim_start_matches(|c: char| c == '"' || c == ':' || c == '=' || c.is_whitespace());
    first_number(rest.get(..rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len()))?)
}

/// α such that (α + α² + … + α^K) ÷ K = `rate`.
fn per_token_acceptance(rate: f64, k: u32) -> f64 {
    let f = |a: f64| (1..=k).map(|i| a.powi(i as i32)).sum::<f64>() / f64::from(k);
    let (mut lo, mut hi) = (0.0, 1.0);
    for _ in 0..50 {
        let mid = (lo + hi) / 2.0;
        if f(mid) < rate.clamp(0.0, 1.0) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// Step 2: the KV budget.
/// The KV budget at least what one request of the run took: vLLM does not start when its KV
/// cache cannot hold one `max_model_len` request, and every prefill row and measured cell's
/// request was served. A budget below that (recorded as 0, or bounded only by small cells)
/// would leave the twin holding a request it can never schedule; it is raised, with a note.
fn kv_floor(r: &Results, p: &Profile, budget: u64, notes: &mut Vec<String>) -> u64 {
    let prefill = r.prefill.iter().filter(|row| row.status == CellStatus::Valid);
    let rows = prefill.map(|row| row.prompt_tokens.unwrap_or(row.context.tokens) + 1);
    let cells = r.decode.iter().filter(|c| c.status.is_measured()).map(|c| c.context.tokens + u64::from(max_tokens(r)));
    let rates = rate_fit::longest_request(r, max_tokens(r));
    let floor = rows.chain(cells).chain(rates).chain([u64::from(p.max_model_len)]).max().unwrap_or(0);
    let block = u64::from(p.block_size.max(1));
    let floor = floor.div_ceil(block) * block;
    if budget >= floor {
        return budget;
    }
    notes.push(format!(
        "KV budget {budget} tokens holds less than one request the server took (max_model_len or the longest \
         measured request): {floor} tokens"
    ));
    floor
}

fn kv_budget(r: &Results, block: u32, notes: &mut Vec<String>) -> u64 {
    if let Some(b) = r.engine.kv_budget_tokens {
        return b / u64::from(block) * u64::from(block);
    }
    let need = |c: &DecodeCell| u64::from(c.concurrency) * (c.context.tokens + u64::from(max_tokens(r)));
    let fits = r.decode.iter().filter(|c| c.status.is_measured()).map(need).max().unwrap_or(0);
    let over = r.decode.iter().filter(|c| c.status == CellStatus::OverCapacity).map(need).min();
    let budget = match over {
        Some(hi) if hi > fits => {
            // Inside [fits, hi): the geometric middle, rounded to a multiple of the largest power
            // of two that keeps it there.
            let mid = ((fits.max(1) as f64) * (hi as f64)).sqrt();
            let mut unit = 1u64 << 40;
            while unit > 1 && unit * 4 > hi - fits {
                unit /= 2;
            }
            let b = ((mid / unit as f64).round() as u64).max(1) * unit;
            b.clamp(fits, hi - 1)
        }
        _ => {
            let b = fits.max(1) * 2;
            notes.push(format!(
                "KV budget not recorded and no over-capacity cell bounds it: {b} tokens (twice the largest cell)"
            ));
            b
        }
    };
    budget / u64::from(block) * u64::from(block)
}

/// Step 3: the decode step model.
fn decode_cost(p: &Profile, cells: &[&DecodeCell], max_tokens: u32, rate_rows: &[([f64; 4], f64)]) -> CostModel {
    let m = p.mean_tokens_per_step();
    let mut rows: Vec<([f64; 4], f64)> = cells
        .iter()
        .filter_map(|c| {
            let n = f64::from(c.concurrency);
            let tps = c.total_tps?;
            let prompt = c.prompt_tokens.unwrap_or(c.context.tokens) as f64;
            let step = n * m / tps * 1000.0;
            let ctx = n * (prompt + f64::from(max_tokens) / 2.0) / 1e6;
            Some(([1.0, n, n.sqrt(), ctx], step))
        })
        .collect();
    rows.extend_from_slice(rate_rows);
    let coef = nonnegative_least_squares(&rows);
    CostModel {
        prefill_knots: vec![],
        cached_ms_per_token: 0.0,
        step_base_ms: coef[0],
        per_seq_ms: coef[1],
        per_sqrt_seq_ms: coef[2],
        per_mtok_context_ms: coef[3],
        fit_spec_tokens: p.spec_tokens,
    }
}

/// Least squares of relative error over every subset of the terms, keeping the best whose
/// coefficients are all ≥ 0 (four terms: sixteen small solves).
fn nonnegative_least_squares(rows: &[([f64; 4], f64)]) -> [f64; 4] {
    let mut best: Option<(f64, [f64; 4])> = None;
    for mask in 1u32..16 {
        let idx: Vec<usize> = (0..4).filter(|i| mask & (1 << i) != 0).collect();
        let k = idx.len();
        let mut a = vec![vec![0.0; k + 1]; k];
        for (x, y) in rows {
            let w = 1.0 / (y * y).max(1e-12);
            for (i, &ii) in idx.iter().enumerate() {
                for (j, &jj) in idx.iter().enumerate() {
                    a[i][j] += w * x[ii] * x[jj];
                }
                a[i][k] += w * x[ii] * y;
            }
        }
        let Some(sol) = solve(a) else { continue };
        if sol.iter().any(|v| *v < 0.0 || !v.is_finite()) {
            continue;
        }
        let mut c = [0.0; 4];
        for (i, &ii) in idx.iter().enumerate() {
            c[ii] = sol[i];
        }
        let err: f64 = rows
            .iter()
            .map(|(x, y)| {
                let m: f64 = (0..4).map(|i| c[i] * x[i]).sum();
                ((m - y) / y).powi(2)
            })
            .sum();
        if best.as_ref().is_none_or(|(e, _)| err < *e - 1e-12) {
            best = Some((err, c));
        }
    }
    best.map_or([rows.first().map_or(10.0, |r| r.1), 0.0, 0.0, 0.0], |b| b.1)
}

/// Gaussian elimination with partial pivoting on an augmented matrix; `None` when singular.
fn solve(mut a: Vec<Vec<f64>>) -> Option<Vec<f64>> {
    let n = a.len();
    for col in 0..n {
        let piv = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() < 1e-12 * a.iter().map(|r| r[col].abs()).fold(0.0, f64::max).max(1e-300) {
            return None;
        }
        a.swap(col, piv);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (x, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *x -= f * p;
                }
            }
        }
    }
    Some((0..n).map(|i| a[i][n] / a[i][i]).collect())
}

/// Rank (1-based, fractional for an interpolated median) of a median among `n` values.
fn median_rank(procedure: Procedure, n: u32) -> f64 {
    match procedure {
        Procedure::Speedmatrix => f64::from(n.div_ceil(2)),
        Procedure::LlmInferenceBench => f64::from(n + 1) / 2.0,
    }
}

/// Whether a cell's TTFT median is over its opening streams only.
fn opening_only(procedure: Procedure, c: &DecodeCell) -> bool {
    match procedure {
        Procedure::Speedmatrix => true,
        Procedure::LlmInferenceBench => c.completed_requests == Some(0),
    }
}

/// Step 4 (stages; the contention is fitted later by replay).
fn frontend(p: &Profile, procedure: Procedure, decode: &[DecodeCell], notes: &mut Vec<String>) -> FrontendModel {
    let ttft = |c: &DecodeCell| c.ttft_ms.as_ref().and_then(|d| d.p50).filter(|_| c.status.is_measured());
    let mut contexts: Vec<(u32, f64)> = decode
        .iter()
        .filter(|c| c.concurrency == 1)
        .filter_map(|c| Some((c.prompt_tokens.unwrap_or(c.context.tokens) as u32, ttft(c)?)))
        .collect();
    contexts.sort_by_key(|c| c.0);
    contexts.dedup_by_key(|c| c.0);
    let mut serial: Vec<(u32, f64)> = Vec::new();
    for &(len, lone) in &contexts {
        let (mut sum, mut ranks) = (0.0, 0.0);
        for c in decode.iter().filter(|c| c.prompt_tokens.unwrap_or(c.context.tokens) as u32 == len) {
            let Some(t) = ttft(c) else { continue };
            if c.concurrency < 2 || !opening_only(procedure, c) {
                continue;
            }
            sum += t - lone;
            ranks += median_rank(procedure, c.concurrency) - 1.0;
        }
        if ranks > 0.0 {
            if sum < 0.0 {
                notes.push(format!(
                    "{len}-token prompts: the run's TTFT with several streams is below its 1-stream TTFT \
                     ({lone:.0} ms); the twin's streams cannot start sooner together than alone, so those \
                     cells replay high"
                ));
            }
            serial.push((len, (sum / ranks).max(0.0)));
        }
    }
    let spacing_at = |len: u32| crate::profile::interpolate(&serial, len);
    // A lone request's front-end latency: its TTFT less the engine's own time for it.
    let latency = contexts.iter().map(|&(len, lone)| (len, (lone - lone_engine_ms(p, len)).max(0.0))).collect();
    let spacing =
        if serial.is_empty() { vec![] } else { contexts.iter().map(|&(len, _)| (len, spacing_at(len))).collect() };
    FrontendModel { latency_knots: latency, spacing_knots: spacing, contention_per_running: 0.0 }
}

/// Step 4, refined: where the replay's TTFT median of a context's cells of 2 or more streams
/// whose median is over the opening streams only is more than 2 % off the run's on average
/// (mean log ratio), that context's spacing is moved until it is within 0.5 % (at most six
/// more replays per cell; the best spacing seen is kept, so it never ends further off than
/// the estimate). The stage estimate `(median − lone) ÷ (rank − 1)` counts every millisecond
/// between first tokens as the front end's; the engine's own prefills and the decode steps of
/// the streams already running take some of it (a CPU vLLM run's 8-stream TTFT replayed 17 %
/// high without this).
fn refine_spacing(p: &mut Profile, procedure: Procedure, r: &Results) {
    for knot in 0..p.frontend.spacing_knots.len() {
        let len = p.frontend.spacing_knots[knot].0;
        let targets: Vec<(CellPlan, f64)> = r
            .decode
            .iter()
            .filter(|c| c.status == CellStatus::Valid && c.concurrency > 1 && opening_only(procedure, c))
            .filter(|c| c.prompt_tokens.unwrap_or(c.context.tokens) as u32 == len)
            .filter_map(|c| {
                let plan = CellPlan {
                    prompt_len: len,
                    concurrency: c.concurrency as usize,
                    window_ms: c.window_s.or(r.config.window_s)? * 1000.0,
                    max_tokens: max_tokens(r),
                };
                Some((plan, c.ttft_ms.as_ref()?.p50.filter(|t| *t > 0.0)?))
            })
            .collect();
        if targets.is_empty() {
            continue;
        }
        let start = p.frontend.spacing_knots[knot].1;
        let mut log_error = |spacing: f64| -> Option<f64> {
            p.frontend.spacing_knots[knot].1 = spacing;
            let logs: Option<Vec<f64>> = targets
                .iter()
                .map(|(plan, want)| Some((replay_cell(p, procedure, *plan, 1).ttft_ms? / want).ln()))
                .collect();
            logs.map(|l| l.iter().sum::<f64>() / l.len() as f64)
        };
        // A stage estimate whose replay is within 2 % on average is kept as it is (the seed's:
        // −0.8 … +0.7 %); one further off is moved to within 0.5 %.
        let best = match log_error(start) {
            Some(e) if e.abs() > 0.02 => secant_root(&mut log_error, (start, e), 0.005, 6),
            _ => start,
        };
        p.frontend.spacing_knots[knot].1 = best;
    }
}

/// A root of `f` (a spacing where the replay's mean log ratio is 0) by the secant method from
/// `first` (a point and its value, already evaluated) and a second point 10 % away, kept
/// non-negative; stops within `tolerance` or after `evaluations` more, giving the best point
/// seen.
fn secant_root(f: &mut impl FnMut(f64) -> Option<f64>, first: (f64, f64), tolerance: f64, evaluations: usize) -> f64 {
    let mut seen = vec![first];
    for _ in 0..evaluations {
        let &[.., (x1, y1)] = seen.as_slice() else { break };
        if y1.abs() <= tolerance {
            break;
        }
        let x = match seen.as_slice() {
            [.., (x0, y0), _] if (y1 - y0).abs() > 1e-12 => (x1 - y1 * (x1 - x0) / (y1 - y0)).max(0.0),
            // The first step, or a flat stretch: 10 % against the sign of the error (a longer
            // spacing makes the later streams' first tokens later).
            _ => (x1 * if y1 > 0.0 { 0.9 } else { 1.1 }).max(0.5),
        };
        let Some(y) = f(x) else { break };
        seen.push((x, y));
    }
    seen.iter().min_by(|a, b| a.1.abs().total_cmp(&b.1.abs())).map_or(first.0, |s| s.0)
}

/// Engine time of a lone warm request: its uncached tail (and one prefilled token).
fn lone_engine_ms(p: &Profile, len: u32) -> f64 {
    if p.cost.prefill_knots.is_empty() {
        return 0.0;
    }
    let g = p.cache_granularity.max(1);
    let hit = if p.prefix_cache { len.saturating_sub(1) / g * g } else { 0 };
    p.cost.prefill_chunk_ms(hit, len)
}

/// Step 5: prefill knots from the cold rows.
fn prefill_knots(p: &Profile, r: &Results, notes: &mut Vec<String>) -> Vec<(u32, f64)> {
    let mut knots: Vec<(u32, f64)> = r
        .prefill
        .iter()
        .filter(|row| row.status == CellStatus::Valid)
        .filter_map(|row| {
            let ttft = row.ttft_ms.filter(|t| *t > 0.0)?;
            let len = row.prompt_tokens.unwrap_or(row.context.tokens) as u32;
            let mut engine = ttft - p.frontend.lone_ms(len);
            if engine < 0.05 * ttft {
                notes.push(format!(
                    "prefill {}: the front end fitted from the decode cells takes most of its {ttft:.0} ms; the engine gets 5 %",
                    row.context.label
                ));
                engine = 0.05 * ttft;
            }
            Some((len, f64::from(len) / (engine / 1000.0)))
        })
        .collect();
    knots.sort_by_key(|k| k.0);
    knots.dedup_by_key(|k| k.0);
    knots
}

/// The contention that best matches cells whose TTFT includes replacement requests.
fn contention(p: &Profile, procedure: Procedure, r: &Results) -> f64 {
    let targets: Vec<(CellPlan, f64, bool)> = r
        .decode
        .iter()
        .filter(|c| c.status == CellStatus::Valid && c.concurrency > 1)
        .filter_map(|c| {
            let plan = CellPlan {
                prompt_len: c.prompt_tokens.unwrap_or(c.context.tokens) as u32,
                concurrency: c.concurrency as usize,
                window_ms: c.window_s.or(r.config.window_s)? * 1000.0,
                max_tokens: max_tokens(r),
            };
            match procedure {
                // The replacements' own TTFT.
                Procedure::Speedmatrix => Some((plan, c.ttft_in_window_ms.as_ref()?.p50?, true)),
                Procedure::LlmInferenceBench => {
                    (c.completed_requests.unwrap_or(0) > 0).then_some((plan, c.ttft_ms.as_ref()?.p50?, false))
                }
            }
        })
        .collect();
    if targets.is_empty() {
        return 0.0;
    }
    let error = |kappa: f64| -> f64 {
        let mut q = p.clone();
        q.frontend.contention_per_running = kappa;
        targets
            .iter()
            .map(|(plan, want, replacements)| {
                let c = replay_cell(&q, procedure, *plan, 1);
                let got = if *replacements { c.ttft_replacement_ms } else { c.ttft_ms };
                got.map_or(4.0, |g| (g / want).ln().powi(2))
            })
            .sum()
    };
    // A coarse grid over 0…1, then its neighbourhood in steps of 0.025.
    let mut best = (f64::INFINITY, 0.0);
    for kappa in (0..=10).map(|i| f64::from(i) * 0.1).chain([0.0]) {
        let e = error(kappa);
        if e < best.0 - 1e-12 {
            best = (e, kappa);
        }
    }
    let centre = best.1;
    for kappa in [-0.05, -0.025, 0.025, 0.05].map(|d| centre + d).into_iter().filter(|k| *k >= 0.0) {
        let e = error(kappa);
        if e < best.0 - 1e-12 {
            best = (e, kappa);
        }
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_from_launch_commands() {
        let l = r#"vllm serve m --max-num-batched-tokens 2048 --speculative-config '{"method":"mtp","num_speculative_tokens":3}'"#;
        assert_eq!(flag_number(l, "max-num-batched-tokens"), Some(2048));
        assert_eq!(flag_number(l, "num_speculative_tokens"), Some(3));
        assert_eq!(flag_number("--max-num-batched-tokens=512", "max-num-batched-tokens"), Some(512));
        assert_eq!(flag_number("vllm serve m", "max-num-batched-tokens"), None);
        assert_eq!(first_number("mtp, 2 speculative tokens"), Some(2));
    }

    #[test]
    fn acceptance_inverts_the_mean_accept_rate() {
        // α = 0.7, K = 2: (0.7 + 0.49) ÷ 2 = 0.595.
        assert!((per_token_acceptance(0.595, 2) - 0.7).abs() < 1e-6);
        assert!((per_token_acceptance(0.5, 1) - 0.5).abs() < 1e-6);
    }

    #[test]
    fn least_squares_recovers_a_step_model_and_never_goes_negative() {
        let truth = [5.0, 0.2, 1.0, 3.0];
        let rows: Vec<([f64; 4], f64)> = [(1.0, 0.01), (4.0, 0.1), (16.0, 0.5), (64.0, 2.0), (8.0, 1.5)]
            .iter()
            .map(|&(n, ctx): &(f64, f64)| {
                let x = [1.0, n, n.sqrt(), ctx];
                (x, (0..4).map(|i| truth[i] * x[i]).sum())
            })
            .collect();
        let c = nonnegative_least_squares(&rows);
        for i in 0..4 {
            assert!((c[i] - truth[i]).abs() < 1e-6, "{c:?}");
        }
        // Decreasing step times cannot be fitted with non-negative per-request terms.
        let rows = vec![([1.0, 1.0, 1.0, 0.0], 10.0), ([1.0, 4.0, 2.0, 0.0], 8.0), ([1.0, 9.0, 3.0, 0.0], 6.0)];
        assert!(nonnegative_least_squares(&rows).iter().all(|v| *v >= 0.0));
    }

    fn seed() -> Results {
        speedmatrix_schema::load_results(crate::profile::SEED_RESULTS.as_bytes()).unwrap()
    }

    #[test]
    fn the_seed_budget_marks_exactly_its_over_capacity_cells() {
        let s = seed();
        let budget = kv_budget(&s, 16, &mut vec![]);
        for c in &s.decode {
            let over =
                speedmatrix_schema::status::over_capacity(c.concurrency, c.context.tokens, 4096, budget).is_some();
            assert_eq!(over, c.status == CellStatus::OverCapacity, "{} × {}", c.context.label, c.concurrency);
        }
        assert_eq!(budget % 16, 0);
    }

    fn cpu_run() -> Results {
        let text = include_str!("../../tests/fixtures/vllm-cpu-smollm2-135m.json");
        speedmatrix_schema::load_results(text.as_bytes()).unwrap()
    }

    #[test]
    fn max_num_seqs_comes_from_a_vllm_launch_command() {
        let mut r = cpu_run();
        assert_eq!(fit(&r).unwrap().profile.max_num_seqs, 1024, "vLLM's default when nothing says");
        let launch = r.engine.launch_command.take().unwrap();
        r.engine.launch_command = Some(format!("{launch} --max-num-seqs 4"));
        let f = fit(&r).unwrap();
        assert_eq!(f.profile.max_num_seqs, 4);
        assert!(!f.notes.iter().any(|n| n.contains("max_num_seqs")), "{:?}", f.notes);
    }

    #[test]
    fn a_kv_budget_below_one_request_is_raised_to_what_the_server_took() {
        // Recorded as 0 or 992 tokens while the run served 2,048-token requests: the twin
        // would hold every request forever. vLLM starts only with room for max_model_len.
        for recorded in [0, 992] {
            let mut r = cpu_run();
            r.engine.kv_budget_tokens = Some(recorded);
            let f = fit(&r).unwrap();
            assert_eq!(f.profile.kv_tokens, 2048, "{recorded}");
            assert!(f.notes.iter().any(|n| n.contains(&format!("KV budget {recorded} tokens"))), "{:?}", f.notes);
        }
        // Estimated from one small cell, without a recorded budget: at least the longest prefill row.
        let mut r = seed();
        r.engine.kv_budget_tokens = None;
        r.decode.retain(|c| c.context.tokens == 8192 && c.concurrency == 1);
        assert!(fit(&r).unwrap().profile.kv_tokens >= 262_144);
        // The seed's own budget is far above the floor and unchanged by it.
        let f = fit(&seed()).unwrap();
        assert!(!f.notes.iter().any(|n| n.contains("holds less than one request")), "{:?}", f.notes);
    }

    #[test]
    fn streams_together_faster_than_alone_are_named() {
        let mut r = cpu_run();
        let lone = r.decode.iter().find(|c| c.context.tokens == 128 && c.concurrency == 1).unwrap().clone();
        let eight = r.decode.iter_mut().find(|c| c.context.tokens == 128 && c.concurrency == 8).unwrap();
        eight.ttft_ms = lone.ttft_ms.map(|mut d| {
            d.p50 = d.p50.map(|t| t / 2.0);
            d.min = None;
            d
        });
        let f = fit(&r).unwrap();
        assert!(
            f.notes.iter().any(|n| n.starts_with("128-token prompts: the run's TTFT with several streams")),
            "{:?}",
            f.notes
        );
        assert!(!fit(&cpu_run()).unwrap().notes.iter().any(|n| n.contains("several streams")));
    }

    #[test]
    fn the_seed_fit_reads_its_engine() {
        let f = fit(&seed()).unwrap();
        let p = &f.profile;
        assert_eq!((p.served_name.as_str(), p.spec_tokens, p.max_model_len), ("qwen", 2, 262_144));
        assert_eq!(p.engine_version, "0.26.1rc1.dev638+g52be12cfa");
        assert!(f.notes.iter().any(|n| n.contains("speculative acceptance")), "{:?}", f.notes);
        // Every prefill knot is faster than the row's TTFT alone (the front end is taken out).
        for (len, rate) in &p.cost.prefill_knots {
            let row = seed().prefill.iter().find(|r| r.context.tokens as u32 == *len).unwrap().prompt_tps.unwrap();
            assert!(*rate > row, "{len}: {rate} vs {row}");
        }
        assert!(p.frontend.spacing_ms(8192) > 100.0 && p.frontend.spacing_ms(257_024) > p.frontend.spacing_ms(8192));
    }

    #[test]
    fn a_file_without_prefill_or_decode_is_refused() {
        let mut s = seed();
        s.prefill.clear();
        assert_eq!(fit(&s).unwrap_err(), FitError::NoPrefill);
        let mut s = seed();
        s.decode.clear();
        assert_eq!(fit(&s).unwrap_err(), FitError::NoDecode);
        assert!(FitError::NoPrefill.to_string().contains("--prefill-contexts"));
    }
}
