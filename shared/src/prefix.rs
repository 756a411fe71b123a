//! Prefix-share cells (`--prefix-share`, `docs/METHODOLOGY.md`, "Prefix caching"): the share
//! flag's values, how cells and rows are keyed and named by share, and the judgement of a
//! measured prefix-cache hit rate against the planned share. Pure.

/// How far a measured hit rate may be from the planned share before the row or cell says why,
/// fraction (10 points).
pub const TOLERANCE: f64 = 0.10;

/// The largest share accepted: a prompt needs a unique rest.
pub const MAX_SHARE: f64 = 0.99;

/// One `--prefix-share` value: `0`, or a percentage such as `50%` (`0.5` is refused: is it
/// half a percent or half the prompt?), as a fraction 0–0.99.
///
/// # Errors
/// What is wrong, naming the value (the caller adds the flag).
pub fn parse_share(s: &str) -> Result<f64, String> {
    let t = s.trim();
    if t == "0" {
        return Ok(0.0);
    }
    let Some(num) = t.strip_suffix('%') else {
        return Err(format!("`{t}` is no share: write percentages of the prompt, e.g. --prefix-share 0,50%,90%"));
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        format!("`{t}` is no percentage: write shares from 0 to {}%, e.g. --prefix-share 0,50%,90%", MAX_SHARE * 100.0)
    })?;
    if !v.is_finite() || !(0.0..=MAX_SHARE * 100.0).contains(&v) {
        return Err(format!(
            "`{t}` is outside 0%…{max}%: each prompt needs a unique rest after its shared prefix; give shares from 0 to {max}%, e.g. --prefix-share 0,50%,90%",
            max = MAX_SHARE * 100.0
        ));
    }
    Ok((v * 100.0).round() / 10_000.0)
}

/// A share list, deduplicated and ascending.
///
/// # Errors
/// The first value [`parse_share`] refuses.
pub fn parse_shares(list: &str) -> Result<Vec<f64>, String> {
    let mut v = list.split(',').map(parse_share).collect::<Result<Vec<f64>, String>>()?;
    v.sort_by(f64::total_cmp);
    v.dedup();
    Ok(v)
}

/// A share as people read it: `50%`, `12.5%`.
pub fn share_label(share: f64) -> String {
    let pct = share * 100.0;
    if (pct - pct.round()).abs() < 1e-9 {
        format!("{}%", pct.round())
    } else {
        format!("{pct:.1}%")
    }
}

/// The key a share gives a cell or row beside its context (and concurrency): basis points, so
/// shares compare exactly; `None` for a cell without a share.
pub fn key(share: Option<f64>) -> Option<u32> {
    share.map(|s| (s * 10_000.0).round() as u32)
}

/// The cell's or row's name suffix: ` · prefix 50%`, nothing without a share.
pub fn name_suffix(share: Option<f64>) -> String {
    share.map(|s| format!(" · prefix {}", share_label(s))).unwrap_or_default()
}

/// A prefix-share row's or cell's hit rate with the plan beside it and the source:
/// `89.6% hit (plan 90%, Prometheus)`; `hit rate unknown (plan 90%)` without a source. The
/// terminal (`show`) and the page print it.
pub fn hit_rate_text(share: f64, figures: Option<&crate::PrefixCacheFigures>) -> String {
    let plan = share_label(share);
    let pct =
        |m: f64| crate::registry::PREFIX_CACHE.iter().find(|x| x.id == "prefix_cache_hit_rate").map(|x| x.display(m));
    match figures.and_then(|f| Some((pct(f.measured_hit_rate?)?, f.hit_rate_source))) {
        Some((m, src)) => format!("{m} hit (plan {plan}, {})", src.map_or("?", crate::HitRateSource::words)),
        None => format!("hit rate unknown (plan {plan})"),
    }
}

/// A replay's prefix cache in words: `Prefix cache: ideal reuse 61.2% (trace: …) · measured
/// hit rate 60.8% (Prometheus) · cache reset (POST /reset_prefix_cache).`; `None` for a replay
/// the file gives no prefix cache for. The terminal (`show`) and the page print it.
pub fn trace_cache_text(t: &crate::TraceRow) -> Option<String> {
    let f = t.prefix_cache.as_ref()?;
    let pct = |id: &str, v: f64| {
        crate::registry::PREFIX_CACHE.iter().find(|x| x.id == id).map_or_else(|| "—".to_string(), |x| x.display(v))
    };
    let measured = match (f.measured_hit_rate, f.hit_rate_source) {
        (Some(m), src) => format!(
            "measured hit rate {} ({})",
            pct("prefix_cache_hit_rate", m),
            src.map_or("?", crate::HitRateSource::words)
        ),
        (None, _) => "measured hit rate unknown (the row's missing figures say why)".into(),
    };
    let start = match f.cache_start {
        crate::CacheStart::Reset => format!("cache reset ({})", f.cache_start_detail),
        crate::CacheStart::Salted => "prompts salted (no reset)".to_string(),
    };
    Some(format!(
        "Prefix cache: ideal reuse {} (trace: blocks sent earlier in the slice, {} of {} prompt tokens) · {measured} · {start}.",
        pct("trace_ideal_reuse", f.ideal_reuse),
        f.ideal_reused_tokens,
        f.trace_prompt_tokens
    ))
}

/// The part of a row's or cell's `reason` that says why its measured hit rate is off the plan
/// (the note [`off_plan_note`] wrote, from `prefix cache:` on); `None` when it has none.
pub fn off_plan_reason(reason: Option<&str>) -> Option<&str> {
    let r = reason?;
    r.find("prefix cache: measured hit rate").map(|i| &r[i..])
}

/// The share of a prompt of `prompt_tokens` a cache of whole `block` tokens can serve when its
/// first `share` is cached: the prefix cut down to whole blocks.
pub fn block_ceiling(share: f64, prompt_tokens: u64, block: u64) -> f64 {
    if prompt_tokens == 0 || block == 0 {
        return share;
    }
    let prefix = (share * prompt_tokens as f64).floor() as u64;
    (prefix / block * block) as f64 / prompt_tokens as f64
}

/// Hits ÷ queries, rounded to 4 decimals; `None` without queries.
pub fn hit_rate(hits: u64, queries: u64) -> Option<f64> {
    (queries > 0).then(|| ((hits.min(queries) as f64 / queries as f64) * 10_000.0).round() / 10_000.0)
}

/// What may explain a hit rate off its plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    /// Whether the server says its prefix cache is on (vLLM `cache_config_info`
    /// `enable_prefix_caching`, SGLang `disable_radix_cache`); `None` when it does not say.
    pub caching_on: Option<bool>,
    /// The server's cache block, tokens, when it says.
    pub block_tokens: Option<u64>,
    /// The prompt length the requests had, tokens.
    pub prompt_tokens: Option<u64>,
    /// The largest KV-cache usage during the cell, fraction 0–1 (Prometheus).
    pub kv_usage_max: Option<f64>,
    /// Preemptions during the cell (Prometheus).
    pub preemptions: Option<u64>,
    /// The cache was reset before (not salted).
    pub reset: bool,
}

/// The note of a row or cell whose measured hit rate is more than [`TOLERANCE`] from its
/// planned share: how far, and what may explain it from `e`. `None` within the tolerance.
pub fn off_plan_note(planned: f64, measured: f64, e: &Evidence) -> Option<String> {
    let gap = measured - planned;
    if gap.abs() <= TOLERANCE + 1e-9 {
        return None;
    }
    let head = format!(
        "prefix cache: measured hit rate {} is {:.0} points {} the planned share {}",
        share_label(measured),
        gap.abs() * 100.0,
        if gap < 0.0 { "below" } else { "above" },
        share_label(planned)
    );
    let mut why: Vec<String> = vec![];
    if gap > 0.0 {
        why.push(match e.reset {
            true => "more of each prompt was served from cache than planned: the server may match text the plan counts as unique (a chat template's first block), or its reset did not empty the cache".into(),
            false => "more of each prompt was served from cache than planned, though its prompts were salted: the server may match text the plan counts as unique (a chat template's first block)".into(),
        });
        return Some(format!("{head}: {}", why.join("; ")));
    }
    let mut why = below_reasons(planned, e);
    if why.is_empty() {
        why.push(unexplained(e));
    }
    Some(format!("{head}: {}", why.join("; ")))
}

/// What the evidence says of a hit rate below a plan of `planned`: prefix caching off, cache
/// blocks that cut the prefix, eviction under load (KV-cache usage at 90 % or more,
/// preemptions). Empty when the evidence names none.
pub fn below_reasons(planned: f64, e: &Evidence) -> Vec<String> {
    let mut why: Vec<String> = vec![];
    if e.caching_on == Some(false) {
        why.push("the server reports its prefix caching off".into());
    }
    if let (Some(b), Some(p)) = (e.block_tokens, e.prompt_tokens) {
        let ceiling = block_ceiling(planned, p, b);
        if planned - ceiling > TOLERANCE {
            why.push(format!(
                "the server caches whole blocks of {b} tokens, which cut the prefix to {} of this prompt",
                share_label(ceiling)
            ));
        }
    }
    let kv_full = e.kv_usage_max.filter(|u| *u >= 0.9);
    let preempted = e.preemptions.filter(|p| *p > 0);
    if kv_full.is_some() || preempted.is_some() {
        let mut load = vec![];
        if let Some(u) = kv_full {
            load.push(format!("KV-cache usage reached {}", share_label((u * 1000.0).round() / 1000.0)));
        }
        if let Some(p) = preempted {
            load.push(format!("{p} preemptions"));
        }
        why.push(format!("the cache may have evicted the prefix under load ({})", load.join(", ")));
    }
    why
}

/// The possibilities a low hit rate leaves when the evidence names no reason.
pub fn unexplained(e: &Evidence) -> String {
    match e.caching_on {
        Some(true) => "the server reports prefix caching on, so it may have evicted the prefix under load, or its cache blocks cut it".into(),
        _ => "prefix caching may be off on the server, the prefix evicted under load, or cut by the server's cache blocks".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_parse_as_percentages() {
        assert_eq!(parse_shares("0,50%,90%,50%").unwrap(), vec![0.0, 0.5, 0.9]);
        assert_eq!(parse_share("12.5%").unwrap(), 0.125);
        assert!(parse_share("0.5").unwrap_err().contains("percentage"));
        assert!(parse_share("100%").unwrap_err().contains("unique rest"));
        assert!(parse_share("-5%").is_err());
        assert!(parse_share("abc%").unwrap_err().contains("no percentage"));
        assert_eq!(share_label(0.9), "90%");
        assert_eq!(share_label(0.125), "12.5%");
        assert_eq!(name_suffix(Some(0.5)), " · prefix 50%");
        assert_eq!(key(Some(0.5)), Some(5000));
    }

    #[test]
    fn blocks_cut_the_prefix() {
        // 90 % of 1,000 tokens = 900 → 896 in blocks of 16.
        assert_eq!(block_ceiling(0.9, 1000, 16), 0.896);
        assert_eq!(block_ceiling(0.5, 100, 64), 0.0);
        assert_eq!(hit_rate(450, 1000), Some(0.45));
        assert_eq!(hit_rate(1, 0), None);
    }

    #[test]
    fn an_off_plan_rate_says_why() {
        assert_eq!(off_plan_note(0.9, 0.85, &Evidence::default()), None);
        let off = Evidence { caching_on: Some(false), ..Evidence::default() };
        let n = off_plan_note(0.9, 0.0, &off).unwrap();
        assert!(n.contains("0% is 90 points below the planned share 90%"), "{n}");
        assert!(n.contains("prefix caching off"), "{n}");
        let blocks = Evidence { block_tokens: Some(512), prompt_tokens: Some(1000), ..Evidence::default() };
        let n = off_plan_note(0.5, 0.0, &blocks).unwrap();
        assert!(n.contains("whole blocks of 512 tokens"), "{n}");
        let load = Evidence { kv_usage_max: Some(0.97), preemptions: Some(3), ..Evidence::default() };
        let n = off_plan_note(0.9, 0.4, &load).unwrap();
        assert!(n.contains("evicted") && n.contains("3 preemptions"), "{n}");
        let n = off_plan_note(0.5, 0.3, &Evidence::default()).unwrap();
        assert!(n.contains("may be off"), "{n}");
        let n = off_plan_note(0.0, 0.5, &Evidence { reset: true, ..Evidence::default() }).unwrap();
        assert!(n.contains("above") && n.contains("reset"), "{n}");
    }
}
