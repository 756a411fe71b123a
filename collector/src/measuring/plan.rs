//! The test plan (pure): flags + what discovery found → the prefill rows and decode cells to
//! measure, with `max` resolved, contexts that cannot fit kept apart as not run (with the
//! reason, for the results file, and a warning), and over-capacity cells marked
//! (docs/METHODOLOGY.md). The wall-time estimate of a plan is `speedmatrix_schema::estimate`.

use speedmatrix_schema::context::{decode_max, label, ContextArg, K};
use speedmatrix_schema::status::over_capacity;
use speedmatrix_schema::{Capacity, ContextSize, NotRunContext, PlanPhase};

/// What the plan is made from.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanInput {
    /// Decode contexts as asked (`--contexts`).
    pub contexts: Vec<ContextArg>,
    /// Concurrency levels (`--concurrency`), each at least 1 (`RunSpec::from_args` checks).
    pub concurrency: Vec<u32>,
    /// Request rates of the rate cells (`--rates`), requests/s, positive.
    pub rates: Vec<f64>,
    /// A trace is replayed (`--trace`): a plan without contexts still measures it.
    pub trace: bool,
    /// Prefill contexts as asked (`--prefill-contexts`).
    pub prefill_contexts: Vec<ContextArg>,
    /// `max_tokens` per decode request.
    pub max_tokens: u32,
    /// Window per decode cell, s.
    pub window_s: f64,
    /// Server's `max_model_len`, tokens, if known.
    pub max_model_len: Option<u64>,
    /// Server's KV budget, tokens, if known and if the N × (C + max_tokens) rule applies to it.
    pub kv_budget: Option<u64>,
    /// Context per slot, tokens (llama.cpp): a stream whose C + max_tokens exceeds it is over
    /// capacity at any concurrency, and `max` resolves within it.
    pub slot_context: Option<u64>,
    /// `--prefix-share`: each decode cell at each share, and a warm prefill row per share above
    /// 0 (empty: one cell per context and concurrency, cold prefill rows only).
    pub prefix_shares: Vec<f64>,
}

/// One planned decode cell.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCell {
    /// Context.
    pub context: ContextSize,
    /// Streams.
    pub concurrency: u32,
    /// Its prefix share (`--prefix-share`), fraction 0–1.
    pub prefix_share: Option<f64>,
    /// `Some` when over capacity: planned, never run.
    pub over_capacity: Option<Capacity>,
    /// Why, when the reason is not the KV rule's ([`over_capacity_reason`]): a stream longer
    /// than the context per slot.
    ///
    /// [`over_capacity_reason`]: speedmatrix_schema::status::over_capacity_reason
    pub reason: Option<String>,
}

/// The resolved plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Prefill rows, in order.
    pub prefill: Vec<ContextSize>,
    /// Decode contexts (matrix rows).
    pub contexts: Vec<ContextSize>,
    /// Concurrency levels (matrix columns).
    pub concurrency: Vec<u32>,
    /// Decode cells, context-major, then concurrency, then prefix share.
    pub cells: Vec<PlannedCell>,
    /// Prefix shares (`--prefix-share`), ascending; empty without.
    pub prefix_shares: Vec<f64>,
    /// Request rates of the rate cells (one per context and rate, context-major), ascending.
    pub rates: Vec<f64>,
    /// Things the user should know (contexts not run, unknown KV budget).
    pub warnings: Vec<String>,
    /// Contexts asked for that cannot be measured on this server, with the reason (they go
    /// into the results file's `config.not_run_contexts`).
    pub not_run: Vec<NotRunContext>,
}

/// Why no plan could be made (exit code 2).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// `max` needs the server's `max_model_len`, which it does not report.
    #[error("the server does not report max_model_len, so 'max' cannot be resolved; give contexts in tokens (e.g. --contexts 8k,32k)")]
    MaxUnknown,
    /// No asked context fits the server: nothing left to measure; why, context by context.
    #[error("nothing to measure: no asked context fits the server: {}", .why.join("; "))]
    AllDropped {
        /// Each dropped context and its reason (as the plan's warnings word them).
        why: Vec<String>,
    },
}

fn dedup_sorted(mut v: Vec<ContextSize>) -> Vec<ContextSize> {
    v.sort_by_key(|c| c.tokens);
    v.dedup_by_key(|c| c.tokens);
    v
}

/// Resolve the plan.
///
/// # Errors
/// [`PlanError`] when `max` cannot be resolved or nothing remains to measure.
pub fn plan(input: &PlanInput) -> Result<Plan, PlanError> {
    let mut not_run = Vec::new();
    let contexts = decode_contexts(input, &mut not_run)?;
    let prefill = prefill_contexts(input, &mut not_run)?;
    not_run.dedup();
    let mut warnings: Vec<String> = not_run.iter().map(not_run_warning).collect();
    let mut concurrency = input.concurrency.clone();
    concurrency.sort_unstable();
    concurrency.dedup();
    if contexts.is_empty() && prefill.is_empty() && !input.trace {
        // The plan's warnings are printed only with a plan: the error carries them (newcomer
        // trial: "see the warnings above" above nothing).
        return Err(PlanError::AllDropped { why: warnings });
    }
    if input.kv_budget.is_none() && input.slot_context.is_none() && !contexts.is_empty() {
        warnings.push(
            "the server's KV budget is unknown (no cache_config_info, no --kv-budget): no cell is marked over capacity"
                .into(),
        );
    }
    let mut prefix_shares = input.prefix_shares.clone();
    prefix_shares.sort_by(f64::total_cmp);
    prefix_shares.dedup();
    let shares: Vec<Option<f64>> = match prefix_shares.is_empty() {
        true => vec![None],
        false => prefix_shares.iter().map(|s| Some(*s)).collect(),
    };
    let cells = contexts
        .iter()
        .flat_map(|ctx| {
            let shares = &shares;
            concurrency.iter().flat_map(move |&n| {
                shares.iter().map(move |&share| PlannedCell { prefix_share: share, ..planned_cell(input, ctx, n) })
            })
        })
        .collect();
    let mut rates = input.rates.clone();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    Ok(Plan { prefill, contexts, concurrency, cells, prefix_shares, rates, warnings, not_run })
}

/// The warning printed for a context kept as not run.
fn not_run_warning(n: &NotRunContext) -> String {
    let what = match n.phase {
        PlanPhase::Decode => "decode",
        PlanPhase::Prefill => "prefill",
    };
    format!("{what} context {} not run (kept in the results file): {}", n.label, n.reason)
}

/// A context asked for that this server cannot take.
fn skip(phase: PlanPhase, label: String, tokens: Option<u64>, reason: String) -> NotRunContext {
    NotRunContext { phase, label, tokens, reason }
}

/// The longest request the server can hold, tokens: `max_model_len`, within a slot where there
/// are slots.
fn longest_request(input: &PlanInput) -> Option<u64> {
    match (input.max_model_len, input.slot_context) {
        (Some(m), Some(s)) => Some(m.min(s)),
        (m, s) => m.or(s),
    }
}

/// The limit [`longest_request`] applies, in words: a slot's context where it is the smaller
/// (llama.cpp), else the server's `max_model_len` — so the reason names the figure the file
/// records for it (`slot_context_tokens` or `max_model_len`).
fn limit_words(input: &PlanInput, m: u64) -> String {
    match input.slot_context {
        Some(s) if s == m && input.max_model_len.is_none_or(|mml| s < mml) => {
            format!("the server's context per slot {s} (llama.cpp: -c ÷ -np)")
        }
        _ => format!("the server's max_model_len {m}"),
    }
}

/// What would make a decode context of `t` tokens fit a limit of `m`: a smaller `--max-tokens`.
fn fits_with(m: u64, t: u64) -> String {
    match m.saturating_sub(t) {
        0 => String::new(),
        room => format!(" (--max-tokens {room} or less would fit)"),
    }
}

/// The decode contexts, `max` resolved, sorted; those that leave no room for `max_tokens` of
/// output kept in `not_run` with the reason.
fn decode_contexts(input: &PlanInput, not_run: &mut Vec<NotRunContext>) -> Result<Vec<ContextSize>, PlanError> {
    let max_tokens = u64::from(input.max_tokens);
    let mut contexts = Vec::new();
    for arg in &input.contexts {
        match *arg {
            ContextArg::Max => {
                let m = longest_request(input).ok_or(PlanError::MaxUnknown)?;
                match decode_max(m, max_tokens) {
                    Some(t) => contexts.push(ContextSize { label: label(t), tokens: t }),
                    None => not_run.push(skip(
                        PlanPhase::Decode,
                        "max".into(),
                        None,
                        format!("{} leaves no room for {max_tokens} output tokens", limit_words(input, m)),
                    )),
                }
            }
            ContextArg::Tokens(t) => match input.max_model_len {
                Some(m) if t + max_tokens > m => not_run.push(skip(
                    PlanPhase::Decode,
                    label(t),
                    Some(t),
                    format!(
                        "{t} prompt + {max_tokens} output tokens exceed the server's max_model_len {m}{}",
                        fits_with(m, t)
                    ),
                )),
                _ => contexts.push(ContextSize { label: label(t), tokens: t }),
            },
        }
    }
    Ok(dedup_sorted(contexts))
}

/// For a prefill context `t` too long for the server's limit `m` while `max` is asked too and
/// its row carries the same label (the seed's labels round down to thousands: 32,767 tokens is
/// "32K"): that the `max` row measures the longest prompt instead.
fn max_instead(input: &PlanInput, t: u64, m: u64) -> String {
    let max_label = label(m / K * K).replace(',', "");
    let asked = input.prefill_contexts.iter().any(|c| matches!(c, ContextArg::Max));
    match asked && label(t).replace(',', "") == max_label {
        true => format!("; the max row, also labelled {max_label}, measures the longest prompt ({} tokens)", m - 1),
        false => String::new(),
    }
}

/// The prefill contexts, `max` resolved (the longest prompt the server accepts with
/// `max_tokens` 1), sorted; those too long kept in `not_run` with the reason.
fn prefill_contexts(input: &PlanInput, not_run: &mut Vec<NotRunContext>) -> Result<Vec<ContextSize>, PlanError> {
    let mml = longest_request(input);
    let mut prefill = Vec::new();
    for arg in &input.prefill_contexts {
        match *arg {
            // Labelled like the seed ("256K").
            ContextArg::Max => {
                let m = mml.ok_or(PlanError::MaxUnknown)?;
                prefill.push(ContextSize { label: label(m / K * K).replace(',', ""), tokens: m - 1 });
            }
            ContextArg::Tokens(t) => match mml {
                Some(m) if t + 1 > m => not_run.push(skip(
                    PlanPhase::Prefill,
                    label(t),
                    Some(t),
                    format!(
                        "{t} prompt tokens + 1 output token exceed {}{}",
                        limit_words(input, m),
                        max_instead(input, t, m)
                    ),
                )),
                _ => prefill.push(ContextSize { label: label(t), tokens: t }),
            },
        }
    }
    Ok(dedup_sorted(prefill))
}

/// One decode cell: over capacity when one stream exceeds a slot's context, or when N streams
/// exceed the KV budget (the N × (C + max_tokens) rule).
fn planned_cell(input: &PlanInput, ctx: &ContextSize, n: u32) -> PlannedCell {
    let max_tokens = u64::from(input.max_tokens);
    match input.slot_context.and_then(|s| over_capacity(1, ctx.tokens, max_tokens, s)) {
        Some(cap) => PlannedCell {
            context: ctx.clone(),
            concurrency: n,
            prefix_share: None,
            over_capacity: Some(cap),
            reason: Some(format!(
                "each stream needs {} tokens (context + max output), a slot holds {}; not run",
                cap.required_tokens, cap.budget_tokens
            )),
        },
        None => PlannedCell {
            context: ctx.clone(),
            concurrency: n,
            prefix_share: None,
            over_capacity: input.kv_budget.and_then(|b| over_capacity(n, ctx.tokens, max_tokens, b)),
            reason: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedmatrix_schema::context::parse_context;

    fn args(list: &str) -> Vec<ContextArg> {
        list.split(',').map(|s| parse_context(s).unwrap()).collect()
    }

    #[test]
    fn seed_plan_has_the_seed_six_over_capacity_cells() {
        let input = PlanInput {
            rates: vec![],
            trace: false,
            contexts: args("8k,16k,32k,64k,128k,max"),
            concurrency: vec![1, 2, 4, 8, 16, 32, 64, 128],
            prefill_contexts: args("8k,16k,32k,64k,128k,max"),
            max_tokens: 4096,
            window_s: 30.0,
            max_model_len: Some(262_144),
            kv_budget: Some(6_291_456),
            slot_context: None,
            prefix_shares: vec![],
        };
        let p = plan(&input).unwrap();
        let labels: Vec<&str> = p.contexts.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["8K", "16K", "32K", "64K", "128K", "251K"]);
        assert_eq!(p.prefill.last().unwrap().label, "256K");
        assert_eq!(p.prefill.last().unwrap().tokens, 262_143);
        let over: Vec<(String, u32)> = p
            .cells
            .iter()
            .filter(|c| c.over_capacity.is_some())
            .map(|c| (c.context.label.clone(), c.concurrency))
            .collect();
        let expect = [("64K", 128), ("128K", 64), ("128K", 128), ("251K", 32), ("251K", 64), ("251K", 128)];
        assert_eq!(over, expect.map(|(l, n)| (l.to_string(), n)));
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn contexts_that_do_not_fit_are_kept_as_not_run_with_the_reason() {
        let input = PlanInput {
            rates: vec![],
            trace: false,
            contexts: args("1k,8k,max"),
            concurrency: vec![4, 1, 4],
            prefill_contexts: args("1k,4k"),
            max_tokens: 256,
            window_s: 5.0,
            max_model_len: Some(2048),
            kv_budget: None,
            slot_context: None,
            prefix_shares: vec![],
        };
        let p = plan(&input).unwrap();
        assert_eq!(p.contexts.iter().map(|c| c.tokens).collect::<Vec<_>>(), [768, 1024]);
        assert_eq!(p.concurrency, [1, 4]);
        assert_eq!(p.prefill.len(), 1);
        assert!(p.warnings.iter().any(|w| w.contains("decode context 8K not run")));
        assert!(p.warnings.iter().any(|w| w.contains("prefill context 4K not run")));
        let labels: Vec<(PlanPhase, &str, Option<u64>)> =
            p.not_run.iter().map(|n| (n.phase, n.label.as_str(), n.tokens)).collect();
        assert_eq!(labels, [(PlanPhase::Decode, "8K", Some(8192)), (PlanPhase::Prefill, "4K", Some(4096))]);
        assert!(p.not_run[0].reason.contains("exceed the server's max_model_len 2048"), "{:?}", p.not_run);
        assert!(p.warnings.iter().any(|w| w.contains("KV budget is unknown")));
        // A context that fits with fewer output tokens says how many.
        let p = plan(&PlanInput { contexts: args("512"), max_tokens: 4096, ..input.clone() }).unwrap();
        assert!(p.not_run[0].reason.ends_with("(--max-tokens 1536 or less would fit)"), "{:?}", p.not_run);
        assert!(p.warnings[0].contains("--max-tokens 1536 or less"), "the warning says what to do: {:?}", p.warnings);
        assert!(matches!(plan(&PlanInput { max_model_len: None, ..input.clone() }), Err(PlanError::MaxUnknown)));
        // Nothing fits: the error itself says why, context by context (no plan prints its
        // warnings then).
        let none = PlanInput { contexts: args("1k"), prefill_contexts: vec![], max_tokens: 4096, ..input };
        let e = plan(&none).unwrap_err().to_string();
        assert!(
            e.starts_with("nothing to measure: no asked context fits the server: decode context 1K not run"),
            "{e}"
        );
        assert!(e.contains("exceed the server's max_model_len 2048"), "{e}");
    }

    #[test]
    fn llama_slots_make_long_streams_over_capacity_not_many_streams() {
        let input = PlanInput {
            rates: vec![],
            trace: false,
            contexts: args("256,512,1k,max"),
            concurrency: vec![1, 8],
            prefill_contexts: args("512,1k,max"),
            max_tokens: 128,
            window_s: 5.0,
            max_model_len: Some(8192),
            kv_budget: None,
            slot_context: Some(1024),
            prefix_shares: vec![],
        };
        let p = plan(&input).unwrap();
        // `max` resolves within the slot: 1024 − 128 − 1024 leaves nothing, so it is dropped.
        assert_eq!(p.contexts.iter().map(|c| c.tokens).collect::<Vec<_>>(), [256, 512, 1024]);
        assert_eq!(p.prefill.last().unwrap().tokens, 1023);
        for c in &p.cells {
            assert_eq!(c.over_capacity.is_some(), c.context.tokens == 1024, "{c:?}");
        }
        let over = p.cells.iter().find(|c| c.over_capacity.is_some()).unwrap();
        assert!(over.reason.as_deref().unwrap().contains("a slot holds 1024"));
        // A prefill context over the slot names the slot, not max_model_len (8192 in the file).
        let p = plan(&PlanInput { prefill_contexts: args("4k"), ..input.clone() }).unwrap();
        let prefill = p.not_run.iter().find(|n| n.phase == PlanPhase::Prefill).expect("4K not run");
        assert!(prefill.reason.contains("context per slot 1024"), "{:?}", p.not_run);
        assert!(!prefill.reason.contains("max_model_len"), "{:?}", p.not_run);
        let p = plan(&PlanInput { contexts: args("256,max"), max_tokens: 1024, ..input.clone() }).unwrap();
        let max = p.not_run.iter().find(|n| n.label == "max").expect("max not run");
        assert!(max.reason.contains("context per slot 1024"), "{:?}", p.not_run);
        assert!(!p.warnings.iter().any(|w| w.contains("KV budget is unknown")));
    }

    #[test]
    fn prefix_shares_multiply_the_cells_keyed_by_share() {
        let input = PlanInput {
            rates: vec![],
            trace: false,
            contexts: args("1k,2k"),
            concurrency: vec![1, 4],
            prefill_contexts: args("1k"),
            max_tokens: 64,
            window_s: 5.0,
            max_model_len: Some(8192),
            kv_budget: Some(5000),
            slot_context: None,
            prefix_shares: vec![0.9, 0.0, 0.5, 0.9],
        };
        let p = plan(&input).unwrap();
        assert_eq!(p.prefix_shares, [0.0, 0.5, 0.9]);
        assert_eq!(p.cells.len(), 2 * 2 * 3);
        let keys: Vec<(u64, u32, Option<f64>)> =
            p.cells.iter().take(4).map(|c| (c.context.tokens, c.concurrency, c.prefix_share)).collect();
        assert_eq!(keys, [(1024, 1, Some(0.0)), (1024, 1, Some(0.5)), (1024, 1, Some(0.9)), (1024, 4, Some(0.0))]);
        // Over capacity does not depend on the share: 4 × (2,048 + 64) > 5,000 at every share.
        let over: Vec<_> = p.cells.iter().filter(|c| c.over_capacity.is_some()).collect();
        assert_eq!(over.len(), 3);
        assert!(over.iter().all(|c| (c.context.tokens, c.concurrency) == (2048, 4)));
    }
}
