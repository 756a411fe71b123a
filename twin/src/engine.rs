//! The engine model: a continuous-batching scheduler in engine steps, pure and deterministic.
//!
//! Shaped after vLLM's V1 scheduler: a running set and an FCFS waiting queue; each step has a
//! token budget (`max_batched_tokens`) that decodes take first (1 + K tokens each with K
//! speculative tokens), then partially prefilled requests, then new requests from the head of
//! the queue (chunked prefill). A prompt's leading full blocks found in the prefix cache skip
//! prefill. KV blocks are allocated as tokens are scheduled; when a running request cannot
//! grow, the most recently admitted one is preempted (its blocks freed, back to the queue
//! head, recomputed later). A step's duration comes from the profile's [`CostModel`].
//!
//! Time is simulated: every figure is in ms on the twin's clock, passed in by the caller. The
//! server drives this model in real time; tests and the fit drive it in simulated time.
//!
//! [`CostModel`]: super::profile::CostModel

use super::profile::Profile;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// A request handed to the engine.
#[derive(Debug, Clone)]
pub struct Submit {
    /// Unique request number.
    pub id: u64,
    /// Arrival time (ms, twin clock).
    pub arrival_ms: f64,
    /// Prompt length (tokens).
    pub prompt_len: u32,
    /// Hash chain of the prompt's full KV blocks (block `i` hashes blocks `0..=i`); the prefix
    /// cache key.
    pub block_hashes: Arc<Vec<u64>>,
    /// Tokens to generate before the request ends (≥ 1).
    pub output_len: u32,
}

/// What one request got from one step.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// Request number.
    pub id: u64,
    /// Tokens emitted in this step (0 only for an aborted request, never reported).
    pub tokens: u32,
    /// True for the request's first token (end of its prefill).
    pub first: bool,
    /// True when the request has emitted all its tokens.
    pub finished: bool,
    /// Prompt tokens served from the prefix cache (set with `first`).
    pub cached_tokens: u32,
}

/// One engine step.
#[derive(Debug, Clone)]
pub struct Step {
    /// Start (ms, twin clock).
    pub start_ms: f64,
    /// End (ms): the planned time of every output of this step.
    pub end_ms: f64,
    /// Requests decoded in this step.
    pub decode_batch: usize,
    /// Prompt tokens prefilled in this step.
    pub prefill_tokens: u32,
    /// Tokens emitted.
    pub outputs: Vec<Output>,
}

/// Counters in vLLM's sense (`vllm:*_total`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    /// Prompt tokens of requests whose prefill finished.
    pub prompt_tokens: u64,
    /// Generated tokens.
    pub generation_tokens: u64,
    /// Prompt tokens looked up in the prefix cache.
    pub prefix_cache_queries: u64,
    /// Prompt tokens found in the prefix cache.
    pub prefix_cache_hits: u64,
    /// Preemptions (recompute).
    pub preemptions: u64,
    /// Speculative drafts (one per decoding request per step).
    pub spec_drafts: u64,
    /// Draft tokens proposed.
    pub spec_draft_tokens: u64,
    /// Draft tokens accepted.
    pub spec_accepted_tokens: u64,
    /// Requests finished.
    pub finished_requests: u64,
}

#[derive(Debug, Clone)]
struct Seq {
    id: u64,
    prompt_len: u32,
    hashes: Arc<Vec<u64>>,
    output_len: u32,
    /// Tokens emitted so far.
    out: u32,
    /// Tokens whose KV is computed (prompt + generated), counted from 0 again after preemption.
    computed: u32,
    /// Blocks held.
    blocks: u64,
    /// Prompt tokens the prefix cache served at the first admission.
    cached: u32,
    /// Whether the first token has been emitted.
    started: bool,
}

impl Seq {
    /// Tokens that must be in the KV cache before the request can decode.
    fn needed(&self) -> u32 {
        self.prompt_len + self.out.saturating_sub(1)
    }
    fn prefilling(&self) -> bool {
        self.computed < self.needed()
    }
}

/// LRU set of cached block hashes.
#[derive(Debug, Default)]
struct PrefixCache {
    blocks: HashMap<u64, u64>,
    tick: u64,
    capacity: usize,
}

impl PrefixCache {
    fn hits(&mut self, hashes: &[u64]) -> usize {
        self.tick += 1;
        let mut n = 0;
        for h in hashes {
            match self.blocks.get_mut(h) {
                Some(t) => {
                    *t = self.tick;
                    n += 1;
                }
                None => break,
            }
        }
        n
    }
    fn insert(&mut self, hashes: &[u64]) {
        self.tick += 1;
        for &h in hashes {
            self.blocks.insert(h, self.tick);
        }
        if self.blocks.len() > self.capacity {
            // Evict the least recently used tenth.
            let mut ticks: Vec<u64> = self.blocks.values().copied().collect();
            ticks.sort_unstable();
            let cut = ticks[(self.blocks.len() - self.capacity).max(self.capacity / 10).min(ticks.len() - 1)];
            self.blocks.retain(|_, t| *t > cut);
        }
    }
}

/// The scheduler state. Deterministic: the same calls give the same steps.
#[derive(Debug)]
pub struct Engine {
    block_size: u32,
    total_blocks: u64,
    free_blocks: u64,
    max_num_seqs: usize,
    max_batched_tokens: u32,
    spec_tokens: u32,
    accept_rate: f64,
    prefix_cache_on: bool,
    cost: super::profile::CostModel,
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
    cache: PrefixCache,
    rng: ChaCha8Rng,
    /// Counters since start.
    pub counters: Counters,
}

impl Engine {
    /// A fresh engine for `profile`, its randomness (speculative acceptance) seeded by `seed`.
    pub fn new(profile: &Profile, seed: u64) -> Engine {
        let total = profile.kv_blocks();
        Engine {
            block_size: profile.block_size.max(1),
            total_blocks: total,
            free_blocks: total,
            max_num_seqs: profile.max_num_seqs.max(1),
            max_batched_tokens: profile.max_batched_tokens.max(1),
            spec_tokens: profile.spec_tokens,
            accept_rate: profile.accept_rate,
            prefix_cache_on: profile.prefix_cache,
            cost: profile.cost.clone(),
            waiting: VecDeque::new(),
            running: Vec::new(),
            cache: PrefixCache { capacity: total as usize, ..Default::default() },
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_e461_e000_0001),
            counters: Counters::default(),
        }
    }

    /// Queue a request (FCFS). `output_len` 0 is treated as 1.
    pub fn submit(&mut self, s: Submit) {
        self.waiting.push_back(Seq {
            id: s.id,
            prompt_len: s.prompt_len.max(1),
            hashes: s.block_hashes,
            output_len: s.output_len.max(1),
            out: 0,
            computed: 0,
            blocks: 0,
            cached: 0,
            started: false,
        });
    }

    /// Drop a request (client gone); frees its blocks. Unknown ids are ignored.
    pub fn abort(&mut self, id: u64) {
        if let Some(i) = self.running.iter().position(|s| s.id == id) {
            let s = self.running.remove(i);
            self.free_blocks += s.blocks;
        } else if let Some(i) = self.waiting.iter().position(|s| s.id == id) {
            self.waiting.remove(i);
        }
    }

    /// Requests running (admitted, holding KV).
    pub fn num_running(&self) -> usize {
        self.running.len()
    }

    /// Requests waiting in the queue.
    pub fn num_waiting(&self) -> usize {
        self.waiting.len()
    }

    /// True when nothing is running or waiting.
    pub fn is_idle(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty()
    }

    /// Fraction of KV blocks in use, 0…1.
    pub fn kv_usage(&self) -> f64 {
        if self.total_blocks == 0 {
            return 0.0;
        }
        (self.total_blocks - self.free_blocks) as f64 / self.total_blocks as f64
    }

    fn blocks_for(&self, tokens: u32) -> u64 {
        (tokens as u64).div_ceil(self.block_size as u64)
    }

    fn preempt_last(&mut self) {
        if let Some(mut s) = self.running.pop() {
            self.free_blocks += s.blocks;
            s.blocks = 0;
            s.computed = 0;
            self.counters.preemptions += 1;
            self.waiting.push_front(s);
        }
    }

    /// Plan and run one step starting at `start_ms`. `None` when idle or when nothing can be
    /// scheduled.
    pub fn step(&mut self, start_ms: f64) -> Option<Step> {
        if self.is_idle() {
            return None;
        }
        let k = self.spec_tokens;
        let mut budget = self.max_batched_tokens;
        // (index into running after scheduling, chunk tokens, is_decode)
        let mut prefill: Vec<(u64, u32, u32)> = Vec::new(); // id, start, end
        let mut decode_ids: Vec<u64> = Vec::new();
        let mut ctx_sum: u64 = 0;
        let mut preempted = false;
        let mut i = 0;
        while i < self.running.len() {
            let (needed_blocks, chunk, is_decode) = {
                let s = &self.running[i];
                if s.prefilling() {
                    let chunk = (s.needed() - s.computed).min(budget);
                    if chunk == 0 {
                        i += 1;
                        continue;
                    }
                    (self.blocks_for(s.computed + chunk), chunk, false)
                } else {
                    (self.blocks_for(s.computed + 1 + k), 1 + k, true)
                }
            };
            let extra = needed_blocks.saturating_sub(self.running[i].blocks);
            let mut self_preempted = false;
            while self.free_blocks < extra {
                preempted = true;
                if self.running.len() - 1 == i {
                    self.preempt_last();
                    self_preempted = true;
                    break;
                }
                self.preempt_last();
            }
            if self_preempted {
                break;
            }
            self.free_blocks -= extra;
            let s = &mut self.running[i];
            s.blocks += extra;
            budget = budget.saturating_sub(chunk);
            if is_decode {
                decode_ids.push(s.id);
                ctx_sum += s.computed as u64;
            } else {
                prefill.push((s.id, s.computed, s.computed + chunk));
            }
            i += 1;
        }
        let mut cached_cost_tokens: u64 = 0;
        if !preempted {
            while budget > 0 && self.running.len() < self.max_num_seqs {
                let Some(front) = self.waiting.front() else {
                    break;
                };
                let fresh = front.computed == 0;
                let needed = front.needed();
                let mut computed = 0u32;
                let mut hit_tokens = 0u32;
                if fresh && self.prefix_cache_on {
                    let hashes = front.hashes.clone();
                    let hits = self.cache.hits(&hashes);
                    // Whole blocks only, and at least one token is always computed.
                    let max_blocks = (needed.saturating_sub(1) / self.block_size) as usize;
                    hit_tokens = (hits.min(max_blocks) as u32) * self.block_size;
                    computed = hit_tokens;
                }
                let chunk = (needed - computed).min(budget);
                let blocks = self.blocks_for(computed + chunk);
                if blocks > self.free_blocks {
                    break;
                }
                let mut s = self.waiting.pop_front().expect("front exists");
                if !s.started {
                    self.counters.prefix_cache_queries += s.prompt_len as u64;
                    self.counters.prefix_cache_hits += hit_tokens as u64;
                    s.cached = hit_tokens;
                }
                cached_cost_tokens += hit_tokens as u64;
                s.computed = computed;
                s.blocks = blocks;
                self.free_blocks -= blocks;
                budget -= chunk;
                prefill.push((s.id, computed, computed + chunk));
                self.running.push(s);
            }
        }
        if prefill.is_empty() && decode_ids.is_empty() {
            return None;
        }
        // Cost.
        let mut dur = self.cost.decode_ms(decode_ids.len(), ctx_sum, k);
        let mut prefill_tokens = 0;
        for &(_, a, b) in &prefill {
            dur += self.cost.prefill_chunk_ms(a, b);
            prefill_tokens += b - a;
        }
        dur += cached_cost_tokens as f64 * self.cost.cached_ms_per_token;
        let end_ms = start_ms + dur.max(0.001);
        // Apply.
        let mut outputs = Vec::new();
        let decode_set: std::collections::HashSet<u64> = decode_ids.iter().copied().collect();
        let prefill_map: HashMap<u64, u32> = prefill.iter().map(|&(id, _, b)| (id, b)).collect();
        let mut finished = Vec::new();
        for idx in 0..self.running.len() {
            let id = self.running[idx].id;
            if let Some(&end) = prefill_map.get(&id) {
                let s = &mut self.running[idx];
                s.computed = end;
                if s.computed >= s.needed() {
                    let first = !s.started;
                    s.started = true;
                    s.out += 1;
                    if first {
                        self.counters.prompt_tokens += s.prompt_len as u64;
                        if self.prefix_cache_on {
                            let full = (s.prompt_len / self.block_size) as usize;
                            let hashes = s.hashes.clone();
                            self.cache.insert(&hashes[..full.min(hashes.len())]);
                        }
                    }
                    self.counters.generation_tokens += 1;
                    let done = s.out >= s.output_len;
                    outputs.push(Output {
                        id,
                        tokens: 1,
                        first,
                        finished: done,
                        cached_tokens: if first { s.cached } else { 0 },
                    });
                    if done {
                        finished.push(id);
                    }
                }
            } else if decode_set.contains(&id) {
                let mut accepted = 0;
                while accepted < k && self.rng.random::<f64>() < self.accept_rate {
                    accepted += 1;
                }
                if k > 0 {
                    self.counters.spec_drafts += 1;
                    self.counters.spec_draft_tokens += k as u64;
                    self.counters.spec_accepted_tokens += accepted as u64;
                }
                let s = &mut self.running[idx];
                let n = (1 + accepted).min(s.output_len - s.out);
                s.out += n;
                s.computed += n;
                self.counters.generation_tokens += n as u64;
                let done = s.out >= s.output_len;
                outputs.push(Output { id, tokens: n, first: false, finished: done, cached_tokens: 0 });
                if done {
                    finished.push(id);
                }
            }
        }
        for id in finished {
            if let Some(i) = self.running.iter().position(|s| s.id == id) {
                let s = self.running.remove(i);
                self.free_blocks += s.blocks;
                self.counters.finished_requests += 1;
            }
        }
        Some(Step { start_ms, end_ms, decode_batch: decode_ids.len(), prefill_tokens, outputs })
    }
}

/// Hash chain of a prompt's full blocks from its token ids (block `i` covers tokens
/// `i·bs .. (i+1)·bs`, and its hash includes every block before it).
pub fn block_hashes(tokens: &[u32], block_size: u32) -> Vec<u64> {
    let bs = block_size.max(1) as usize;
    let mut out = Vec::with_capacity(tokens.len() / bs);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for block in tokens.chunks_exact(bs) {
        for &t in block {
            h ^= t as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
            h ^= h >> 29;
        }
        out.push(h);
    }
    out
}

/// Synthetic block hashes for a prompt identified by `key` (same key = same prompt), for
/// simulations that have no text.
pub fn synthetic_hashes(key: u64, prompt_len: u32, block_size: u32) -> Arc<Vec<u64>> {
    let n = (prompt_len / block_size.max(1)) as u64;
    Arc::new(
        (0..n)
            .map(|i| {
                let mut x = key.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i.wrapping_mul(0xbf58_476d_1ce4_e5b9);
                x ^= x >> 31;
                x.wrapping_mul(0x94d0_49bb_1331_11eb)
            })
            .collect(),
    )
}

/// TTFT (ms) of one cold request of `len` prompt tokens and one output token, alone on a fresh
/// engine (the seed's prefill row).
pub fn cold_ttft_ms(profile: &Profile, len: u32) -> f64 {
    let mut e = Engine::new(profile, 0);
    e.submit(Submit {
        id: 1,
        arrival_ms: 0.0,
        prompt_len: len,
        block_hashes: synthetic_hashes(len as u64, len, profile.block_size),
        output_len: 1,
    });
    let mut t = 0.0;
    while let Some(s) = e.step(t) {
        t = s.end_ms;
    }
    t
}

/// Result of simulating one sustained-decode cell.
#[derive(Debug, Clone, PartialEq)]
pub struct CellSim {
    /// Total output tok/s inside the window (None when the N streams never all ran).
    pub total_tps: Option<f64>,
    /// Mean tok/s of one stream over the window (None as above).
    pub per_request_tps: Option<f64>,
    /// Median TTFT (ms) of the N streams that open the cell.
    pub ttft_ms_p50: f64,
    /// Most requests waiting at once.
    pub max_waiting: usize,
    /// Most requests running at once.
    pub max_running: usize,
    /// Cold TTFT (ms) of the warm-up request (the prefill row).
    pub warmup_ttft_ms: f64,
}

/// Simulate a sustained-decode cell the way the seed measured it: one warm-up
/// request of `context` prompt tokens and `max_tokens: 1`, then `n` streams sharing that prompt
/// with `max_tokens` output each, each replaced at once when it ends; a window of `window_ms`
/// opens when all `n` have their first token and none waits. Gives up after `limit_ms` of
/// simulated time without readiness (the cell does not fit).
pub fn simulate_decode_cell(
    profile: &Profile,
    seed: u64,
    context: u32,
    n: usize,
    max_tokens: u32,
    window_ms: f64,
) -> CellSim {
    let limit_ms = 120_000.0;
    let mut e = Engine::new(profile, seed);
    let hashes = synthetic_hashes(seed ^ context as u64, context, profile.block_size);
    let mut next_id = 0u64;
    let mut submit = |e: &mut Engine, t: f64, out: u32| {
        next_id += 1;
        e.submit(Submit {
            id: next_id,
            arrival_ms: t,
            prompt_len: context,
            block_hashes: hashes.clone(),
            output_len: out,
        });
        next_id
    };
    // Warm-up.
    submit(&mut e, 0.0, 1);
    let mut t = 0.0;
    let mut warmup_ttft_ms = 0.0;
    while let Some(s) = e.step(t) {
        t = s.end_ms;
        if s.outputs.iter().any(|o| o.first) {
            warmup_ttft_ms = t;
        }
    }
    let t0 = t;
    let mut arrivals: HashMap<u64, f64> = HashMap::new();
    let mut opening: Vec<u64> = Vec::new();
    for _ in 0..n {
        let id = submit(&mut e, t0, max_tokens);
        arrivals.insert(id, t0);
        opening.push(id);
    }
    let mut ttfts: Vec<f64> = Vec::new();
    let mut started = 0usize;
    let mut window: Option<(f64, f64)> = None;
    let mut tokens_in_window: u64 = 0;
    let (mut max_waiting, mut max_running) = (0, 0);
    while let Some(s) = e.step(t) {
        t = s.end_ms;
        max_waiting = max_waiting.max(e.num_waiting());
        max_running = max_running.max(e.num_running());
        if let Some((ws, we)) = window {
            if t > ws && t <= we {
                tokens_in_window += s.outputs.iter().map(|o| o.tokens as u64).sum::<u64>();
            }
            if t > we {
                break;
            }
        }
        for o in &s.outputs {
            if o.first && opening.contains(&o.id) {
                ttfts.push(t - arrivals[&o.id]);
                started += 1;
            }
            if o.finished {
                submit(&mut e, t, max_tokens);
            }
        }
        if window.is_none() && started >= n && e.num_waiting() == 0 {
            window = Some((t, t + window_ms));
        }
        if window.is_none() && t - t0 > limit_ms {
            break;
        }
    }
    ttfts.sort_by(|a, b| a.total_cmp(b));
    let ttft_ms_p50 = if ttfts.is_empty() { f64::NAN } else { ttfts[ttfts.len() / 2] };
    let total = window.map(|_| tokens_in_window as f64 / (window_ms / 1000.0));
    CellSim {
        total_tps: total,
        per_request_tps: total.map(|x| x / n as f64),
        ttft_ms_p50,
        max_waiting,
        max_running,
        warmup_ttft_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::*;

    fn cold_then_warm(p: &Profile, len: u32) -> (f64, f64) {
        let mut e = Engine::new(p, 1);
        let h = synthetic_hashes(7, len, p.block_size);
        let mut ttft = [0.0; 2];
        let mut t = 0.0;
        for (i, slot) in ttft.iter_mut().enumerate() {
            let arrival = t;
            e.submit(Submit {
                id: i as u64,
                arrival_ms: arrival,
                prompt_len: len,
                block_hashes: h.clone(),
                output_len: 1,
            });
            while let Some(s) = e.step(t) {
                t = s.end_ms;
                if s.outputs.iter().any(|o| o.first) {
                    *slot = t - arrival;
                }
            }
        }
        (ttft[0], ttft[1])
    }

    #[test]
    fn ttft_128k_cold_and_warm() {
        let (cold, warm) = cold_then_warm(&Profile::h200_qwen(), 131_072);
        assert!((cold - 7800.0).abs() <= 0.15 * 7800.0, "cold {cold}");
        assert!(warm < 1000.0, "warm {warm}");
        assert!(warm > 0.0);
    }

    #[test]
    fn no_prefix_cache_means_warm_is_cold() {
        let mut p = Profile::h200_qwen();
        p.prefix_cache = false;
        let (cold, warm) = cold_then_warm(&p, 32_768);
        assert!((cold - warm).abs() < 1e-6);
    }

    #[test]
    fn one_stream_at_8k_decodes_at_240() {
        let c = simulate_decode_cell(&Profile::h200_qwen(), 3, 8192, 1, 4096, 30_000.0);
        let tps = c.total_tps.unwrap();
        assert!((tps - 240.0).abs() <= 0.15 * 240.0, "{tps}");
    }

    #[test]
    fn streams_128_at_8k_give_6300() {
        let c = simulate_decode_cell(&Profile::h200_qwen(), 3, 8192, 128, 4096, 10_000.0);
        let tps = c.total_tps.unwrap();
        assert!((tps - 6300.0).abs() <= 0.15 * 6300.0, "{tps}");
        assert_eq!(c.max_running, 128);
    }

    #[test]
    fn cells_64k_x_128_wait_and_64k_x_64_fits() {
        let p = Profile::h200_qwen();
        let over = simulate_decode_cell(&p, 3, 65_536, 128, 4096, 5_000.0);
        assert!(over.max_waiting > 0);
        assert!(over.max_running < 128, "{}", over.max_running);
        let fits = simulate_decode_cell(&p, 3, 65_536, 64, 4096, 5_000.0);
        assert_eq!(fits.max_waiting, 0);
        assert!(fits.total_tps.is_some());
        assert_eq!(e_preemptions_for(&p, 65_536, 64), 0);
    }

    fn e_preemptions_for(p: &Profile, ctx: u32, n: usize) -> u64 {
        let mut e = Engine::new(p, 1);
        let h = synthetic_hashes(9, ctx, p.block_size);
        for i in 0..n as u64 {
            e.submit(Submit { id: i, arrival_ms: 0.0, prompt_len: ctx, block_hashes: h.clone(), output_len: 4096 });
        }
        let mut t = 0.0;
        while let Some(s) = e.step(t) {
            t = s.end_ms;
        }
        e.counters.preemptions
    }

    #[test]
    fn over_capacity_cells_preempt_or_wait() {
        let p = Profile::h200_qwen();
        // 128 × 64K prompts need 8.4M tokens of KV: at most 96 can hold their prompts.
        let mut e = Engine::new(&p, 1);
        let h = synthetic_hashes(9, 65_536, p.block_size);
        for i in 0..128 {
            e.submit(Submit { id: i, arrival_ms: 0.0, prompt_len: 65_536, block_hashes: h.clone(), output_len: 8 });
        }
        let mut t = 0.0;
        let mut max_running = 0;
        let mut done = 0;
        while let Some(s) = e.step(t) {
            t = s.end_ms;
            max_running = max_running.max(e.num_running());
            done += s.outputs.iter().filter(|o| o.finished).count();
        }
        assert!(max_running <= 96, "{max_running}");
        assert_eq!(done, 128, "all finish eventually");
        assert!(e.kv_usage() < 1e-9);
    }

    #[test]
    fn mtp_emits_one_to_three_tokens_and_counts() {
        let p = Profile::h200_qwen();
        let mut e = Engine::new(&p, 42);
        e.submit(Submit {
            id: 1,
            arrival_ms: 0.0,
            prompt_len: 100,
            block_hashes: synthetic_hashes(1, 100, 16),
            output_len: 2000,
        });
        let mut t = 0.0;
        let mut seen = [0usize; 4];
        let mut total = 0;
        while let Some(s) = e.step(t) {
            t = s.end_ms;
            for o in s.outputs {
                total += o.tokens;
                if !o.finished {
                    seen[o.tokens as usize] += 1;
                }
            }
        }
        assert_eq!(total, 2000);
        assert!(seen[1] > 0 && seen[2] > 0 && seen[3] > 0, "{seen:?}");
        let c = &e.counters;
        assert_eq!(c.generation_tokens, 2000);
        assert!(c.spec_drafts > 0 && c.spec_draft_tokens == 2 * c.spec_drafts);
        let rate = c.spec_accepted_tokens as f64 / c.spec_draft_tokens as f64;
        assert!((0.45..0.7).contains(&rate), "{rate}");
    }

    #[test]
    fn deterministic_for_a_seed() {
        let p = Profile::h200_qwen();
        let a = simulate_decode_cell(&p, 5, 8192, 4, 256, 1_000.0);
        let b = simulate_decode_cell(&p, 5, 8192, 4, 256, 1_000.0);
        assert_eq!(a, b);
    }

    #[test]
    fn abort_frees_blocks() {
        let p = Profile::tiny();
        let mut e = Engine::new(&p, 1);
        e.submit(Submit {
            id: 1,
            arrival_ms: 0.0,
            prompt_len: 1000,
            block_hashes: synthetic_hashes(1, 1000, 16),
            output_len: 100,
        });
        e.step(0.0).unwrap();
        assert!(e.kv_usage() > 0.0);
        e.abort(1);
        assert!(e.is_idle());
        assert_eq!(e.kv_usage(), 0.0);
    }

    /// The fit's residual table (printed with `--nocapture`); every valid cell within ±15 %.
    #[test]
    fn residual_table_within_15_percent() {
        let p = Profile::h200_qwen();
        let mut worst: f64 = 0.0;
        println!("total tok/s (twin, residual vs seed)");
        for (row, &c) in SEED_CONTEXTS.iter().enumerate() {
            let mut line = format!("{:>5}K", c / 1024);
            for (col, &n) in SEED_CONCURRENCY.iter().enumerate() {
                let seed = SEED_DECODE_TPS[row][col];
                let sim = match seed {
                    Some(_) => simulate_decode_cell(&p, 11, c, n, 4096, 30_000.0),
                    None => {
                        line.push_str("  | over capacity  ");
                        continue;
                    }
                };
                let tps = sim.total_tps.expect("valid cell runs");
                let r = tps / seed.unwrap() - 1.0;
                worst = worst.max(r.abs());
                line.push_str(&format!("  | {tps:7.1} {:+5.1}%", r * 100.0));
            }
            println!("{line}");
        }
        for &(len, ttft) in SEED_PREFILL {
            let twin = cold_ttft_ms(&p, len);
            println!("prefill {len}: twin {twin:.0} ms, seed {ttft} ms");
            assert!((twin / ttft - 1.0).abs() < 0.01);
        }
        println!("worst residual {:.1}%", worst * 100.0);
        assert!(worst <= 0.15, "{worst}");
    }
}
