//! The engine model: a vLLM-V1-shaped continuous-batching scheduler in engine steps, with the
//! server's front end before it; pure and deterministic.
//!
//! What is modelled, and why (the evidence is the seed run; `docs/METHODOLOGY.md` defines the
//! figures):
//!
//! - **Front end.** A request first does per-request work in the server's front end (body
//!   parsing, chat template, tokenization, the engine's intake — ms that grow with the prompt)
//!   and only then reaches the scheduler's waiting queue. A lone request spends the front end's
//!   *latency* there; requests leave it in arrival order no closer together than its *spacing*
//!   (the part of that work done one request at a time). Both are [`FrontendModel`] knots by
//!   prompt length. The seed shows both: a warm 8K prompt alone still waits ~200 ms for its
//!   first token and a warm 251K one ~1 s, although its prefix is cached; and when N warm
//!   streams open at once, their first tokens come one after another at a steady spacing
//!   (~155 ms at 8K, ~445 ms at 251K: the median TTFT of 128 streams at 8K is 10 s) while the
//!   streams already decoding keep their speed — work that blocked engine steps would have
//!   slowed them (the seed's per-request tok/s, which counts TTFT, says it did not). A spacing
//!   larger than the latency is allowed (a real CPU vLLM: a lone warm request's first token in
//!   ~110 ms, eight at once ~370 ms apart); it holds only between requests that are in the front
//!   end together, so a request arriving after the previous one left (a cell's opening stream
//!   after its warm-up) takes the lone latency. The side-by-side part of the latency (beyond the
//!   spacing) grows by `contention_per_running` per request already running: requests that replace finished ones wait about twice as long as
//!   a lone request in the seed. Requests in the front end are not
//!   `waiting` (vLLM's gauge counts the scheduler's queue only).
//! - **Scheduler.** A running set and an FCFS waiting queue; each step has a token budget
//!   (`max_num_batched_tokens`) that decodes take first (1 + K tokens each with K speculative
//!   tokens), then partially prefilled requests, then new requests from the head of the queue
//!   (chunked prefill: a prompt longer than what is left of the budget is prefilled over
//!   several steps, each step sharing the GPU with every decode). New requests are admitted
//!   once per step, at its start. KV blocks are allocated as tokens are scheduled; when a
//!   running request cannot grow, the most recently admitted one is preempted (its blocks
//!   freed, back to the queue head, recomputed later).
//! - **Prefix cache.** A prompt's leading blocks found in the cache skip prefill, in whole
//!   units of `cache_granularity`. vLLM caches attention KV per block, but a hybrid model
//!   (Mamba / linear-attention layers, such as Qwen3.5's Gated DeltaNet) can resume only where
//!   its recurrent state was saved: on the hybrid block grid, whose size vLLM sets so an
//!   attention page is as large as a Mamba state (hundreds to thousands of tokens), so the
//!   uncached tail of a warm prompt is recomputed. The seed fit keeps the KV block (16): a
//!   ~2,000-token tail per warm request at 8K would stall the decodes of every step it shares
//!   (128 requests × 85 ms ≈ 11 s of the 20 s ramp at 8K × 128), which the seed's per-request
//!   tok/s rules out; the warm cost is in the front end.
//! - **Costs.** A step's duration comes from the profile's [`CostModel`]: decodes by batch
//!   size and summed context, plus each prefill chunk `F(end) − F(start)` from the prefill
//!   knots, so chunking never changes a prompt's total.
//!
//! Time is simulated: every figure is in ms on the twin's clock, passed in by the caller. The
//! server drives this model in real time; [`crate::replay`] and the fit drive it in simulated
//! time.
//!
//! [`CostModel`]: super::profile::CostModel
//! [`FrontendModel`]: super::profile::FrontendModel

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
    /// Speculative acceptance of this request's own (ngram speculation, whose drafts come from
    /// the request's text); `None`: the profile's `accept_rate` and the engine's own draws.
    pub spec: Option<SeqSpec>,
}

/// A request's own speculative acceptance: each draft token accepted with probability
/// `accept` (until the first rejection), drawn from a generator seeded by `seed`, so the same
/// text gives the same draws whatever else the engine runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeqSpec {
    /// Probability that a draft token is accepted, 0–1.
    pub accept: f64,
    /// Seed of the request's draws.
    pub seed: u64,
}

/// What speculative decoding did for one request, counted with the engine's counters (one
/// draft per decode step; the tokens of each draft accepted at each position).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SpecTally {
    /// Drafts verified.
    pub drafts: u64,
    /// Draft tokens proposed.
    pub draft_tokens: u64,
    /// Draft tokens accepted.
    pub accepted_tokens: u64,
    /// Draft tokens accepted at each position (from 0).
    pub accepted_per_pos: Vec<u64>,
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

/// What one step will do, as it is scheduled.
struct StepPlan {
    /// Tokens of the step's budget still free.
    budget: u32,
    /// Per running index: the prefill chunk's end, or 0 for a decode, or None (not scheduled).
    slots: Vec<Option<u32>>,
    /// Prefill chunks (start, end).
    prefill: Vec<(u32, u32)>,
    /// Requests decoded.
    decodes: usize,
    /// Their contexts summed (tokens).
    ctx_sum: u64,
    /// Whether a request was preempted (no new admissions then).
    preempted: bool,
    /// Prompt tokens found in the prefix cache by requests admitted in this step.
    cached_cost_tokens: u64,
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
    /// Draft tokens accepted at each position (from 0; `spec_tokens` long).
    pub spec_accepted_per_pos: Vec<u64>,
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
    /// Its own acceptance and draws (ngram speculation), if any.
    spec: Option<(f64, ChaCha8Rng)>,
    /// What speculation did for it so far.
    tally: SpecTally,
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

/// Hashes a `u64` key that is already a well-mixed hash (a block hash) by passing it through.
#[derive(Debug, Default, Clone, Copy)]
struct PassThrough(u64);

impl std::hash::Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// LRU set of cached block hashes.
#[derive(Debug, Default)]
struct PrefixCache {
    blocks: HashMap<u64, u64, std::hash::BuildHasherDefault<PassThrough>>,
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
    /// Forget every cached block (the blocks of running requests stay allocated: only their
    /// reuse by later requests is forgotten).
    fn clear(&mut self) {
        self.blocks.clear();
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

/// A request in the front end: it reaches the waiting queue at `ready_ms`.
#[derive(Debug)]
struct Arriving {
    ready_ms: f64,
    seq: Seq,
}

/// The scheduler state. Deterministic: the same calls give the same steps.
#[derive(Debug)]
pub struct Engine {
    block_size: u32,
    cache_granularity: u32,
    total_blocks: u64,
    free_blocks: u64,
    max_num_seqs: usize,
    max_batched_tokens: u32,
    spec_tokens: u32,
    accept_rate: f64,
    prefix_cache_on: bool,
    cost: super::profile::CostModel,
    frontend: super::profile::FrontendModel,
    /// Requests in the front end, in the order they reach the waiting queue.
    front: VecDeque<Arriving>,
    /// When the last request left (or will leave) the front end (ms).
    last_ready_ms: f64,
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
    cache: PrefixCache,
    rng: ChaCha8Rng,
    /// Counters since start.
    pub counters: Counters,
    /// Requests that left the engine (finished or aborted) with what speculation did for
    /// them, while speculative decoding is on; taken by [`Engine::take_ended`].
    ended: Vec<(u64, SpecTally)>,
}

impl Engine {
    /// A fresh engine for `profile`, its randomness (speculative acceptance) seeded by `seed`.
    pub fn new(profile: &Profile, seed: u64) -> Engine {
        let total = profile.kv_blocks();
        let block_size = profile.block_size.max(1);
        Engine {
            block_size,
            cache_granularity: profile.cache_granularity.max(block_size) / block_size * block_size,
            total_blocks: total,
            free_blocks: total,
            max_num_seqs: profile.max_num_seqs.max(1),
            max_batched_tokens: profile.max_batched_tokens.max(1),
            spec_tokens: profile.spec_tokens,
            accept_rate: profile.accept_rate,
            prefix_cache_on: profile.prefix_cache,
            cost: profile.cost.clone(),
            frontend: profile.frontend.clone(),
            front: VecDeque::new(),
            last_ready_ms: f64::NEG_INFINITY,
            waiting: VecDeque::new(),
            running: Vec::new(),
            cache: PrefixCache { capacity: total as usize, ..Default::default() },
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_e461_e000_0001),
            counters: Counters { spec_accepted_per_pos: vec![0; profile.spec_tokens as usize], ..Counters::default() },
            ended: Vec::new(),
        }
    }

    /// The requests that left the engine since the last call (finished, or aborted wherever
    /// they were), each with what speculative decoding did for it: every draft the counters
    /// hold is in exactly one of them. Empty while speculative decoding is off.
    pub fn take_ended(&mut self) -> Vec<(u64, SpecTally)> {
        std::mem::take(&mut self.ended)
    }

    /// Note that `seq` left the engine (speculative decoding on).
    fn ended(&mut self, seq: Seq) {
        if self.spec_tokens > 0 {
            self.ended.push((seq.id, seq.tally));
        }
    }

    /// Hand a request to the front end at `s.arrival_ms`; it reaches the waiting queue (FCFS)
    /// when its front-end work is done. `output_len` 0 is treated as 1.
    pub fn submit(&mut self, s: Submit) {
        let prompt_len = s.prompt_len.max(1);
        let alone = s.arrival_ms + self.frontend.latency_ms(prompt_len, self.running.len());
        // The spacing holds between requests that are in the front end together (a burst); one
        // that arrives after the previous has left finds it idle and takes the lone latency.
        let behind = self.last_ready_ms > s.arrival_ms;
        let ready_ms =
            if behind { alone.max(self.last_ready_ms + self.frontend.spacing_ms(prompt_len)) } else { alone };
        self.last_ready_ms = ready_ms;
        let seq = Seq {
            id: s.id,
            prompt_len,
            hashes: s.block_hashes,
            output_len: s.output_len.max(1),
            out: 0,
            computed: 0,
            blocks: 0,
            cached: 0,
            started: false,
            spec: s.spec.map(|x| (x.accept.clamp(0.0, 1.0), ChaCha8Rng::seed_from_u64(x.seed))),
            tally: SpecTally::default(),
        };
        self.front.push_back(Arriving { ready_ms, seq });
    }

    /// Empty the prefix cache (vLLM's `reset_prefix_cache`): later prompts find nothing cached
    /// until they are computed again.
    pub fn reset_prefix_cache(&mut self) {
        self.cache.clear();
    }

    /// Drop a request (client gone); frees its blocks. Unknown ids are ignored.
    pub fn abort(&mut self, id: u64) {
        if let Some(i) = self.running.iter().position(|s| s.id == id) {
            let s = self.running.remove(i);
            self.free_blocks += s.blocks;
            self.ended(s);
        } else if let Some(i) = self.waiting.iter().position(|s| s.id == id) {
            if let Some(s) = self.waiting.remove(i) {
                self.ended(s);
            }
        } else if let Some(i) = self.front.iter().position(|a| a.seq.id == id) {
            if let Some(a) = self.front.remove(i) {
                self.ended(a.seq);
            }
        }
    }

    /// The next step at or after `t_ms`, waiting (in simulated time) for the front end when
    /// nothing else can run; `None` when idle.
    pub fn step_from(&mut self, t_ms: f64) -> Option<Step> {
        let mut t = t_ms;
        loop {
            if let Some(s) = self.step(t) {
                return Some(s);
            }
            t = self.next_arrival_ms()?.max(t);
        }
    }

    /// When the next request leaves the front end (ms), if one is there.
    pub fn next_arrival_ms(&self) -> Option<f64> {
        self.front.front().map(|a| a.ready_ms)
    }

    /// Requests the scheduler would count as waiting at `t_ms` (the queue, plus front-end
    /// arrivals due by then that the next step start admits).
    pub fn waiting_at(&self, t_ms: f64) -> usize {
        self.waiting.len() + self.front.iter().take_while(|a| a.ready_ms <= t_ms).count()
    }

    /// Requests still in the front end.
    pub fn num_arriving(&self) -> usize {
        self.front.len()
    }

    /// Move the requests whose front-end work is done by `t_ms` to the waiting queue.
    fn admit_arrivals(&mut self, t_ms: f64) {
        while self.front.front().is_some_and(|a| a.ready_ms <= t_ms) {
            let a = self.front.pop_front().expect("checked");
            self.waiting.push_back(a.seq);
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

    /// True when nothing is running, waiting or in the front end.
    pub fn is_idle(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty() && self.front.is_empty()
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

    /// Plan and run one step starting at `start_ms`. `None` when nothing can be scheduled then
    /// (idle, or every request still in the front end: see [`Engine::next_arrival_ms`]).
    pub fn step(&mut self, start_ms: f64) -> Option<Step> {
        self.admit_arrivals(start_ms);
        if self.running.is_empty() && self.waiting.is_empty() {
            return None;
        }
        let mut plan = self.schedule_running();
        if !plan.preempted {
            self.admit_waiting(&mut plan);
        }
        if plan.prefill.is_empty() && plan.decodes == 0 {
            return None;
        }
        let end_ms = start_ms + self.step_cost_ms(&plan).max(0.001);
        let prefill_tokens = plan.prefill.iter().map(|&(a, b)| b - a).sum();
        let (outputs, finished) = self.apply(&plan);
        self.retire(finished);
        Some(Step { start_ms, end_ms, decode_batch: plan.decodes, prefill_tokens, outputs })
    }

    /// Schedule the running requests under the step's token budget, decodes and partial
    /// prefills in running order, preempting from the end when KV blocks run out.
    fn schedule_running(&mut self) -> StepPlan {
        let k = self.spec_tokens;
        let mut plan = StepPlan {
            budget: self.max_batched_tokens,
            slots: vec![None; self.running.len()],
            prefill: Vec::new(),
            decodes: 0,
            ctx_sum: 0,
            preempted: false,
            cached_cost_tokens: 0,
        };
        let mut i = 0;
        while i < self.running.len() {
            let (needed_blocks, chunk, is_decode) = {
                let s = &self.running[i];
                if s.prefilling() {
                    let chunk = (s.needed() - s.computed).min(plan.budget);
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
                plan.preempted = true;
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
            plan.budget = plan.budget.saturating_sub(chunk);
            if is_decode {
                plan.decodes += 1;
                plan.ctx_sum += s.computed as u64;
                plan.slots[i] = Some(0);
            } else {
                plan.prefill.push((s.computed, s.computed + chunk));
                plan.slots[i] = Some(s.computed + chunk);
            }
            i += 1;
        }
        plan
    }

    /// Admit new requests from the head of the waiting queue (FCFS) while budget, running
    /// slots and KV blocks last, skipping prompt blocks found in the prefix cache in whole
    /// reuse units.
    fn admit_waiting(&mut self, plan: &mut StepPlan) {
        while plan.budget > 0 && self.running.len() < self.max_num_seqs {
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
                // Whole reuse units only, and at least one token is always computed.
                let max_blocks = (needed.saturating_sub(1) / self.block_size) as usize;
                let hit = (hits.min(max_blocks) as u32) * self.block_size;
                hit_tokens = hit / self.cache_granularity * self.cache_granularity;
                computed = hit_tokens;
            }
            let chunk = (needed - computed).min(plan.budget);
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
            plan.cached_cost_tokens += hit_tokens as u64;
            s.computed = computed;
            s.blocks = blocks;
            self.free_blocks -= blocks;
            plan.budget -= chunk;
            plan.prefill.push((computed, computed + chunk));
            plan.slots.push(Some(computed + chunk));
            self.running.push(s);
        }
    }

    /// The step's duration (ms): its decodes, its prefill chunks and its cached prompt tokens.
    fn step_cost_ms(&self, plan: &StepPlan) -> f64 {
        let mut dur = self.cost.decode_ms(plan.decodes, plan.ctx_sum, self.spec_tokens);
        for &(a, b) in &plan.prefill {
            dur += self.cost.prefill_chunk_ms(a, b);
        }
        dur + plan.cached_cost_tokens as f64 * self.cost.cached_ms_per_token
    }

    /// Carry out the plan: prefill chunks advance (a finished prompt emits its first token),
    /// decodes emit one token plus their accepted drafts. Returns the outputs and the ids of
    /// requests that reached their output length.
    fn apply(&mut self, plan: &StepPlan) -> (Vec<Output>, Vec<u64>) {
        let mut outputs = Vec::with_capacity(plan.slots.len());
        let mut finished = Vec::new();
        // Preemption only pops from the end, so `slots` indices still match `running`.
        let slots = &plan.slots[..plan.slots.len().min(self.running.len())];
        for (idx, planned) in slots.iter().enumerate() {
            let output = match *planned {
                Some(end) if end > 0 => self.advance_prefill(idx, end),
                Some(_) => Some(self.decode_one(idx)),
                None => None,
            };
            if let Some(o) = output {
                if o.finished {
                    finished.push(o.id);
                }
                outputs.push(o);
            }
        }
        (outputs, finished)
    }

    /// Prefill running request `idx` up to `end`; its first token when the prompt is done.
    fn advance_prefill(&mut self, idx: usize, end: u32) -> Option<Output> {
        let s = &mut self.running[idx];
        s.computed = end;
        if s.computed < s.needed() {
            return None;
        }
        let first = !s.started;
        s.started = true;
        s.out += 1;
        let (id, cached, done) = (s.id, s.cached, s.out >= s.output_len);
        if first {
            self.counters.prompt_tokens += s.prompt_len as u64;
            if self.prefix_cache_on {
                // The blocks it found cached were touched by the lookup already.
                let full = ((s.prompt_len / self.block_size) as usize).min(s.hashes.len());
                let from = ((s.cached / self.block_size) as usize).min(full);
                let hashes = s.hashes.clone();
                self.cache.insert(&hashes[from..full]);
            }
        }
        self.counters.generation_tokens += 1;
        Some(Output { id, tokens: 1, first, finished: done, cached_tokens: if first { cached } else { 0 } })
    }

    /// Decode running request `idx`: one token plus the drafts accepted (each with the
    /// acceptance rate, until the first rejection), capped at its output length.
    fn decode_one(&mut self, idx: usize) -> Output {
        let k = self.spec_tokens;
        let mut accepted = 0;
        let (rng, p) = match &mut self.running[idx].spec {
            Some((p, rng)) => (rng, *p),
            None => (&mut self.rng, self.accept_rate),
        };
        while accepted < k && rng.random::<f64>() < p {
            accepted += 1;
        }
        if k > 0 {
            count_draft(&mut self.counters, &mut self.running[idx].tally, k, accepted);
        }
        let s = &mut self.running[idx];
        let n = (1 + accepted).min(s.output_len - s.out);
        s.out += n;
        s.computed += n;
        self.counters.generation_tokens += n as u64;
        Output { id: s.id, tokens: n, first: false, finished: s.out >= s.output_len, cached_tokens: 0 }
    }

    /// Free the KV blocks of requests that finished.
    fn retire(&mut self, finished: Vec<u64>) {
        for id in finished {
            if let Some(i) = self.running.iter().position(|s| s.id == id) {
                let s = self.running.remove(i);
                self.free_blocks += s.blocks;
                self.counters.finished_requests += 1;
                self.ended(s);
            }
        }
    }
}

/// Ngram speculation's acceptance for a prompt (`simulate --spec-decode ngram:K`): an ngram
/// drafter proposes the tokens that followed the last few tokens earlier in the text, so it is
/// right more often the more the text repeats itself. The twin's model: `0.1 + 0.8 × r`, where
/// `r` is the share of the prompt's token trigrams that appeared earlier in it (0 for a text
/// that never repeats a trigram: 10 %; 1 for one sentence said over and over: 90 %).
pub fn ngram_acceptance(tokens: &[u32]) -> f64 {
    if tokens.len() < 4 {
        return 0.1;
    }
    let mut seen = std::collections::HashSet::with_capacity(tokens.len());
    let repeated = tokens.windows(3).filter(|w| !seen.insert((w[0], w[1], w[2]))).count();
    0.1 + 0.8 * repeated as f64 / (tokens.len() - 2) as f64
}

/// A request's own seed for its speculative draws: the twin's `seed` and its prompt's tokens
/// (FNV-1a), so the same text draws the same acceptances.
pub fn text_seed(seed: u64, tokens: &[u32]) -> u64 {
    tokens.iter().fold(0xcbf2_9ce4_8422_2325 ^ seed, |h, &t| (h ^ u64::from(t)).wrapping_mul(0x0100_0000_01b3))
}

/// One draft of `k` tokens with its first `accepted` accepted, counted in the engine's counters
/// and in the request's tally alike.
fn count_draft(c: &mut Counters, t: &mut SpecTally, k: u32, accepted: u32) {
    c.spec_drafts += 1;
    c.spec_draft_tokens += u64::from(k);
    c.spec_accepted_tokens += u64::from(accepted);
    t.drafts += 1;
    t.draft_tokens += u64::from(k);
    t.accepted_tokens += u64::from(accepted);
    let k = k as usize;
    if c.spec_accepted_per_pos.len() < k {
        c.spec_accepted_per_pos.resize(k, 0);
    }
    if t.accepted_per_pos.len() < k {
        t.accepted_per_pos.resize(k, 0);
    }
    for pos in 0..accepted as usize {
        c.spec_accepted_per_pos[pos] += 1;
        t.accepted_per_pos[pos] += 1;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::*;

    fn submit(e: &mut Engine, id: u64, t: f64, len: u32, key: u64, out: u32) {
        e.submit(Submit {
            id,
            arrival_ms: t,
            prompt_len: len,
            block_hashes: synthetic_hashes(key, len, 16),
            output_len: out,
            spec: None,
        });
    }

    /// Run until idle from `t`; the time of each request's first token.
    fn drain(e: &mut Engine, mut t: f64) -> (f64, HashMap<u64, f64>) {
        let mut first = HashMap::new();
        while let Some(s) = e.step_from(t) {
            t = s.end_ms;
            for o in s.outputs.iter().filter(|o| o.first) {
                first.insert(o.id, t);
            }
        }
        (t, first)
    }

    fn cold_then_warm(p: &Profile, len: u32) -> (f64, f64) {
        let mut e = Engine::new(p, 1);
        submit(&mut e, 1, 0.0, len, 7, 1);
        let (t, f) = drain(&mut e, 0.0);
        submit(&mut e, 2, t, len, 7, 1);
        let (_, g) = drain(&mut e, t);
        (f[&1], g[&2] - t)
    }

    #[test]
    fn ttft_128k_cold_is_the_seed_row_and_warm_is_the_front_end() {
        let p = Profile::h200_qwen();
        let (cold, warm) = cold_then_warm(&p, 131_072);
        assert!((cold - 7752.0).abs() < 1.0, "cold {cold}");
        // Warm: the front end plus one prefilled token.
        let front = p.frontend.lone_ms(131_072);
        assert!(warm > front && warm < front + 5.0, "warm {warm}, front end {front}");
    }

    /// Hits are counted by the prompt blocks two prompts share from their start (real token
    /// ids through [`block_hashes`]), and a reset forgets them.
    #[test]
    fn hits_count_the_shared_leading_blocks_and_a_reset_forgets_them() {
        let p = Profile::tiny();
        let mut e = Engine::new(&p, 1);
        let prompt = |rest: u32| -> Vec<u32> { (0..700).chain((0..300).map(|i| rest * 1000 + i)).collect() };
        let send = |e: &mut Engine, id: u64, t: f64, tokens: &[u32]| {
            e.submit(Submit {
                id,
                arrival_ms: t,
                prompt_len: tokens.len() as u32,
                block_hashes: Arc::new(block_hashes(tokens, 16)),
                output_len: 1,
                spec: None,
            });
            drain(e, t).0
        };
        let t = send(&mut e, 1, 0.0, &prompt(1));
        assert_eq!((e.counters.prefix_cache_queries, e.counters.prefix_cache_hits), (1000, 0));
        let t = send(&mut e, 2, t, &prompt(2));
        // 700 shared tokens: 43 whole blocks of 16 (688 tokens); the rest differs.
        assert_eq!((e.counters.prefix_cache_queries, e.counters.prefix_cache_hits), (2000, 688));
        e.reset_prefix_cache();
        send(&mut e, 3, t, &prompt(3));
        assert_eq!((e.counters.prefix_cache_queries, e.counters.prefix_cache_hits), (3000, 688));
    }

    #[test]
    fn no_prefix_cache_means_warm_is_cold() {
        let mut p = Profile::h200_qwen();
        p.prefix_cache = false;
        let (cold, warm) = cold_then_warm(&p, 32_768);
        assert!((cold - warm).abs() < 1e-6);
    }

    #[test]
    fn a_coarse_cache_granularity_recomputes_the_tail() {
        let mut p = Profile::tiny();
        p.cost.prefill_knots = vec![(1024, 10_000.0)];
        let (_, fine) = cold_then_warm(&p, 5000);
        p.cache_granularity = 2048;
        let (_, coarse) = cold_then_warm(&p, 5000);
        // 5,000 tokens: 4,992 reused at 16, 4,096 at 2,048 → 904 recomputed at 10 tok/ms.
        assert!((coarse - fine - 0.1 * (904.0 - 8.0)).abs() < 0.5, "fine {fine} coarse {coarse}");
    }

    #[test]
    fn the_serial_front_end_spaces_simultaneous_arrivals() {
        let mut p = Profile::tiny();
        p.frontend = FrontendModel {
            latency_knots: vec![(1000, 120.0)],
            spacing_knots: vec![(1000, 100.0)],
            contention_per_running: 0.0,
        };
        let mut e = Engine::new(&p, 1);
        for id in 0..4 {
            submit(&mut e, id, 0.0, 1000, id, 1);
        }
        assert_eq!(e.num_arriving(), 4);
        assert_eq!(e.num_waiting(), 0, "requests in the front end are not waiting");
        let (_, first) = drain(&mut e, 0.0);
        let mut t: Vec<f64> = first.values().copied().collect();
        t.sort_by(f64::total_cmp);
        for (i, w) in t.windows(2).enumerate() {
            assert!((w[1] - w[0] - 100.0).abs() < 1.0, "gap {i}: {t:?}");
        }
        assert!(t[0] > 120.0 && t[0] < 126.0, "{t:?}");
    }

    #[test]
    fn the_spacing_holds_within_a_burst_and_not_after_the_front_end_emptied() {
        let mut p = Profile::tiny();
        // A spacing larger than the latency, as on a CPU vLLM.
        p.frontend = FrontendModel {
            latency_knots: vec![(1000, 50.0)],
            spacing_knots: vec![(1000, 80.0)],
            contention_per_running: 0.0,
        };
        let mut e = Engine::new(&p, 1);
        submit(&mut e, 0, 0.0, 1000, 0, 1);
        submit(&mut e, 1, 0.0, 1000, 1, 1);
        assert_eq!(e.next_arrival_ms(), Some(50.0));
        e.abort(0);
        assert_eq!(e.next_arrival_ms(), Some(130.0), "the second of a burst: 50 + 80 ms");
        e.abort(1);
        // Arriving at 140 ms, after the previous left (130 ms): the lone latency only.
        submit(&mut e, 2, 140.0, 1000, 2, 1);
        assert_eq!(e.next_arrival_ms(), Some(190.0));
    }

    #[test]
    fn contention_slows_a_request_that_arrives_while_others_run() {
        let mut p = Profile::tiny();
        p.frontend =
            FrontendModel { latency_knots: vec![(1000, 50.0)], spacing_knots: vec![], contention_per_running: 0.5 };
        let mut e = Engine::new(&p, 1);
        for id in 0..2 {
            submit(&mut e, id, 0.0, 1000, id, 1000);
        }
        let mut t = 0.0;
        while e.num_running() < 2 {
            t = e.step_from(t).unwrap().end_ms;
        }
        submit(&mut e, 9, t, 1000, 9, 1);
        assert!((e.next_arrival_ms().unwrap() - t - 100.0).abs() < 1e-9, "50 ms × (1 + 0.5 × 2)");
        e.abort(9);
        assert_eq!(e.num_arriving(), 0);
    }

    #[test]
    fn cells_64k_x_128_wait_and_64k_x_64_fits() {
        let p = Profile::h200_qwen();
        assert_eq!(preemptions_for(&p, 65_536, 64), 0);
        assert!(preemptions_for(&p, 65_536, 128) > 0 || max_running(&p, 65_536, 128) < 128);
    }

    fn preemptions_for(p: &Profile, ctx: u32, n: u64) -> u64 {
        let mut e = Engine::new(p, 1);
        for i in 0..n {
            submit(&mut e, i, 0.0, ctx, 9, 4096);
        }
        drain(&mut e, 0.0);
        e.counters.preemptions
    }

    fn max_running(p: &Profile, ctx: u32, n: u64) -> usize {
        let mut e = Engine::new(p, 1);
        for i in 0..n {
            submit(&mut e, i, 0.0, ctx, 9, 8);
        }
        let (mut t, mut most) = (0.0, 0);
        while let Some(s) = e.step_from(t) {
            t = s.end_ms;
            most = most.max(e.num_running());
        }
        most
    }

    #[test]
    fn over_capacity_cells_preempt_or_wait() {
        let p = Profile::h200_qwen();
        // 128 × 64K prompts need 8.4M tokens of KV: fewer fit than the budget's ~96.
        let fit = (p.kv_tokens / 65_536) as usize;
        let mut e = Engine::new(&p, 1);
        for i in 0..128 {
            submit(&mut e, i, 0.0, 65_536, 9, 8);
        }
        let (mut t, mut most, mut done) = (0.0, 0, 0);
        while let Some(s) = e.step_from(t) {
            t = s.end_ms;
            most = most.max(e.num_running());
            done += s.outputs.iter().filter(|o| o.finished).count();
        }
        assert!(most <= fit, "{most} > {fit}");
        assert_eq!(done, 128, "all finish eventually");
        assert!(e.kv_usage() < 1e-9);
    }

    #[test]
    fn mtp_emits_one_to_three_tokens_and_counts() {
        let p = Profile::h200_qwen();
        let mut e = Engine::new(&p, 42);
        submit(&mut e, 1, 0.0, 100, 1, 2000);
        let mut t = 0.0;
        let mut seen = [0usize; 4];
        let mut total = 0;
        while let Some(s) = e.step_from(t) {
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

    /// Ngram speculation: a repetitive prompt is accepted more than a varied one, each request
    /// draws from its own text's generator, and every draft the counters hold is in exactly
    /// one request's tally — the finished and the aborted alike.
    #[test]
    fn ngram_acceptance_follows_the_text_and_tallies_add_up_to_the_counters() {
        let varied: Vec<u32> = (0..600).collect();
        let repetitive: Vec<u32> = (0..600).map(|i| i % 7).collect();
        assert!((ngram_acceptance(&varied) - 0.1).abs() < 1e-9);
        assert!(ngram_acceptance(&repetitive) > 0.88);
        let mut p = Profile::tiny();
        p.spec_tokens = 3;
        let mut e = Engine::new(&p, 9);
        for (id, text) in [(1, &varied), (2, &repetitive), (3, &repetitive)] {
            e.submit(Submit {
                id,
                arrival_ms: 0.0,
                prompt_len: 600,
                block_hashes: Arc::new(block_hashes(text, 16)),
                output_len: if id == 3 { 10_000 } else { 400 },
                spec: Some(SeqSpec { accept: ngram_acceptance(text), seed: text_seed(9, text) }),
            });
        }
        let mut t = 0.0;
        let mut tallies: HashMap<u64, SpecTally> = HashMap::new();
        let mut steps = 0;
        while let Some(s) = e.step_from(t) {
            t = s.end_ms;
            steps += 1;
            if steps == 150 {
                e.abort(3);
            }
            tallies.extend(e.take_ended());
        }
        assert_eq!(tallies.len(), 3, "each request ended once: {tallies:?}");
        let rate = |id: u64| tallies[&id].accepted_tokens as f64 / tallies[&id].draft_tokens as f64;
        assert!(rate(1) < 0.2 && rate(2) > 0.8, "varied {} repetitive {}", rate(1), rate(2));
        let c = &e.counters;
        let sum = |f: fn(&SpecTally) -> u64| tallies.values().map(f).sum::<u64>();
        assert_eq!(sum(|t| t.drafts), c.spec_drafts);
        assert_eq!(sum(|t| t.draft_tokens), c.spec_draft_tokens);
        assert_eq!(sum(|t| t.accepted_tokens), c.spec_accepted_tokens);
        for k in 0..3 {
            assert_eq!(tallies.values().map(|t| t.accepted_per_pos[k]).sum::<u64>(), c.spec_accepted_per_pos[k]);
        }
        assert!(
            c.spec_accepted_per_pos[0] >= c.spec_accepted_per_pos[1],
            "a later position is accepted only after an earlier one"
        );
    }

    #[test]
    fn deterministic_for_a_seed() {
        let p = Profile::h200_qwen();
        let run = || {
            let mut e = Engine::new(&p, 5);
            for i in 0..4 {
                submit(&mut e, i, 0.0, 8192, 3, 256);
            }
            let mut t = 0.0;
            let mut ends = vec![];
            while let Some(s) = e.step_from(t) {
                t = s.end_ms;
                ends.push((t, s.outputs.len()));
            }
            ends
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn abort_frees_blocks() {
        let p = Profile::tiny();
        let mut e = Engine::new(&p, 1);
        submit(&mut e, 1, 0.0, 1000, 1, 100);
        e.step(0.0).unwrap();
        assert!(e.kv_usage() > 0.0);
        e.abort(1);
        assert!(e.is_idle());
        assert_eq!(e.kv_usage(), 0.0);
    }
}
