//! The session of a run: what every measurement shares ([`Session`]) — the connection pool and
//! clock, the server's facts, the prompt builder and what each context has warmed (prompts,
//! cold TTFT, llama.cpp slots), the request bodies and single requests of prefill rows and
//! warm-ups, the results held and their file, the log, the progress bar and the live state.
//! Measurements (the `measurement` module's kinds) issue their requests through it; the
//! sequencer (`run`) saves through it.

use crate::files::FileError;
use crate::measuring::client::{request_body, Client, Clock, StreamCtl, StreamRecord};
use crate::measuring::discovery::ServerInfo;
use crate::measuring::error::{CellError, RunError};
use crate::measuring::live_state::Publisher;
use crate::measuring::prompt::{prompt_fields, Prompt, PromptBuilder};
use crate::measuring::spec::RunSpec;
use serde_json::{json, Value};
use speedmatrix_schema::estimate::{duration_text, remaining, Basis, Estimate};
use speedmatrix_schema::progress::Current;
use speedmatrix_schema::registry::format_int;
use speedmatrix_schema::{AcceptedDifference, ContextSize, Endpoint, Results};
use std::collections::HashMap;
use tokio::sync::watch;

/// What every measurement of a run shares: the server (client, clock, facts), the prompts and
/// what is warmed, the results held and their file, the log, the progress bar and the live
/// state.
pub struct Session {
    pub(crate) client: Client,
    pub(crate) clock: Clock,
    pub(crate) info: ServerInfo,
    /// `/metrics` answered Prometheus text at discovery: scrape it during cells.
    pub(crate) has_metrics: bool,
    /// Whether `/metrics` answers now; nothing waits for it while it fails.
    pub(crate) metrics_health: crate::measuring::scrape::Health,
    /// The failure of `/metrics` was said on the terminal.
    metrics_failure_said: bool,
    /// The longest output any request of the run produced, tokens, once one ran past
    /// `--max-tokens` (the over-capacity rule then counts it instead).
    pub(crate) longest_output: Option<u64>,
    /// Per context (tokens): the note on its prompt's real length ([`Session::prompt_check`]).
    prompt_notes: HashMap<u64, String>,
    prompts: PromptBuilder,
    /// The results file as measured so far (saved after every row and cell).
    pub(crate) results: Results,
    /// `/v1/chat/completions` or `/v1/completions`.
    pub(crate) path: &'static str,
    pub(crate) spec: RunSpec,
    pub(crate) progress: indicatif::ProgressBar,
    /// The live state (results so far, the row or cell being measured), published for the
    /// terminal bar and the live page.
    pub(crate) live: Publisher,
    /// Warmed prompts by context tokens (stream index for distinct prompts).
    warm: HashMap<(u64, usize), Prompt>,
    /// TTFT of each context's first (cold) request, ms.
    cold_ttft: HashMap<u64, f64>,
    /// Per context: how many of the server's slots hold its shared prompt (llama.cpp keeps a
    /// prompt cache per slot; absent means the one warm-up request's slot).
    slots_warmed: HashMap<u64, u32>,
    /// The server's speculative-decoding counters (drafts, draft tokens) when the run started.
    pub(crate) spec_start: Option<(f64, f64)>,
    /// The same counters as the last decode cell's last scrape read them.
    pub(crate) spec_latest: Option<(f64, f64)>,
    /// NVML readings on their own thread; `None` without GPUs (`hardware.gpu_telemetry_note`).
    pub(crate) gpu: Option<crate::measuring::gpu::Sampler>,
    /// Header differences accepted on `--resume` (`--accept-change`), recorded on every row and
    /// cell measured now.
    pub(crate) accepted: Vec<AcceptedDifference>,
    /// When measuring began, and the estimate of all of it then, s.
    pub(crate) started: (std::time::Instant, f64),
    /// Whether the estimate still rests on an assumed prompt rate / readiness / answer pace (a
    /// line says so when a measurement replaces one).
    pub(crate) assumed: (bool, bool, bool),
    /// Why the server's prefix cache cannot be reset, once a reset failed (later rows and
    /// cells salt their prompts without asking again).
    reset_refused: Option<String>,
    /// The server's answer to a warm-up pinned with llama.cpp's `id_slot`, once it refused the
    /// field (a strict proxy in front of llama.cpp): later warm-ups leave it out, and the cells
    /// whose streams take several slots say their slots were not pinned.
    slots_unpinned: std::sync::OnceLock<String>,
}

impl Session {
    /// The session of a run whose results file is `results` (fresh, or the `--resume` one with
    /// the header differences `accepted`): the clock started, NVML sampled on its own thread
    /// (`gpus`), the prompt builder calibrated, the live state and the progress bar made.
    ///
    /// # Errors
    /// [`RunError::Prompts`] when prompts of exact lengths cannot be made.
    pub(crate) async fn start(
        spec: RunSpec,
        (client, info, has_metrics): (Client, ServerInfo, bool),
        (results, accepted): (Results, Vec<AcceptedDifference>),
        gpus: Option<crate::measuring::gpu::Gpus>,
    ) -> Result<Session, RunError> {
        let clock = Clock::start();
        let gpu = gpus.map(|g| crate::measuring::gpu::Sampler::start(g, clock));
        let seed = spec.seed.unwrap_or(0x5eed);
        let mut prompts =
            PromptBuilder::new(client.clone(), info.model.clone(), spec.endpoint, results.run.id.clone(), seed)
                .await
                .map_err(RunError::Prompts)?;
        prompts.user = spec.prompts.clone();
        let (live, _) = Publisher::new(&results);
        let planned = live.progress().planned as u64;
        let progress = if spec.quiet { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(planned) };
        // The message is the progress model's whole line (count, row or cell, phase, time left).
        progress.set_style(
            indicatif::ProgressStyle::with_template("{bar:30} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Ok(Session {
            path: match spec.endpoint {
                Endpoint::Chat => "/v1/chat/completions",
                Endpoint::Completions => "/v1/completions",
            },
            has_metrics,
            metrics_health: Default::default(),
            metrics_failure_said: false,
            longest_output: None,
            prompt_notes: HashMap::new(),
            client,
            clock,
            info,
            prompts,
            results,
            spec,
            progress,
            live,
            warm: HashMap::new(),
            cold_ttft: HashMap::new(),
            slots_warmed: HashMap::new(),
            spec_start: None,
            spec_latest: None,
            gpu,
            accepted,
            started: (std::time::Instant::now(), 0.0),
            assumed: (true, true, true),
            reset_refused: None,
            slots_unpinned: std::sync::OnceLock::new(),
        })
    }

    /// Forget every warmed prompt: the server restarted, so its prefix cache is empty.
    pub(crate) fn forget_warm(&mut self) {
        self.warm.clear();
    }

    /// The estimate of what is left, from what this run has measured so far.
    fn estimate_left(&self) -> Estimate {
        let warm: Vec<u64> = self.warm.keys().map(|(t, _)| *t).collect();
        remaining(&self.results, &warm)
    }

    /// Publish what is being measured now (`None` between rows and cells) and redraw the bar.
    pub(crate) fn show(&self, current: Option<Current>) {
        let warm: std::collections::BTreeSet<u64> = self.warm.keys().map(|(t, _)| *t).collect();
        self.live.current(current, warm.into_iter().collect());
        self.redraw();
    }

    /// The terminal bar, from the same progress model as the live page.
    fn redraw(&self) {
        let p = self.live.progress();
        self.progress.set_length(p.planned as u64);
        self.progress.set_position(p.done as u64);
        self.progress.set_message(p.line());
    }

    /// When a measurement has just replaced an assumption of the estimate (the first prefill
    /// row gives the prompt rate, the first decode cell the readiness), a line with the
    /// corrected estimate of the whole run.
    pub(crate) fn estimate_corrected(&mut self) {
        let e = self.estimate_left();
        let now =
            (e.prompt_tps.1 == Basis::Assumed, e.readiness.1 == Basis::Assumed, e.answer_pace.1 == Basis::Assumed);
        let mut learnt = vec![];
        if self.assumed.0 && !now.0 {
            learnt.push(format!("prompt {} tok/s measured", format_int(e.prompt_tps.0.round() as u64)));
        }
        if self.assumed.1 && !now.1 {
            let r = e.readiness.0;
            learnt.push(format!("readiness {:.1} s + {:.2} s per stream measured", r.base_s, r.per_stream_s));
        }
        if self.assumed.2 && !now.2 && e.conversations_s > 0.0 {
            let p = e.answer_pace.0;
            learnt.push(format!(
                "answers at {:.1} ms + {:.1} ms per session per token measured",
                p.base_ms, p.per_stream_ms
            ));
        }
        self.assumed = (self.assumed.0 && now.0, self.assumed.1 && now.1, self.assumed.2 && now.2);
        if !learnt.is_empty() {
            let spent = self.started.0.elapsed().as_secs_f64();
            self.log(format!(
                "estimate: wall time ≈ {} ({} so far + {} left; {})",
                duration_text(spent + e.total_s),
                duration_text(spent),
                duration_text(e.total_s),
                learnt.join(", ")
            ));
        }
    }

    /// A line for the user: above the progress bar, or on stderr when it is hidden.
    pub(crate) fn log(&self, line: String) {
        if self.progress.is_hidden() {
            say!("{line}");
        } else {
            self.progress.println(line);
        }
    }

    /// Write the results file, then publish what it holds.
    pub(crate) fn save(&self) -> Result<(), FileError> {
        crate::files::write_atomic(&self.spec.out, &self.results)?;
        self.live.results(&self.results);
        self.redraw();
        Ok(())
    }

    /// A known prefix-cache state before a prefix-share row or cell: the server's cache reset
    /// where its engine offers a way, else salted prompts (the reason kept, and said once).
    pub(crate) async fn cache_start(&mut self) -> crate::measuring::cache_start::Start {
        use crate::measuring::cache_start::Start;
        use speedmatrix_schema::CacheStart;
        if let Some(why) = &self.reset_refused {
            return Start { how: CacheStart::Salted, detail: why.clone() };
        }
        let Some(reset) = self.info.kind.adapter().cache_reset(&self.info.facts) else {
            let why = format!(
                "the server ({}) offers no way to reset its prefix cache: the prompts carry text unique to this row or cell",
                self.info.kind.id()
            );
            self.reset_refused = Some(why.clone());
            return Start { how: CacheStart::Salted, detail: why };
        };
        for path in &reset.paths {
            let answer = self.client.post_empty(path, std::time::Duration::from_secs(60)).await;
            let failed = match answer {
                Ok(body) => crate::measuring::cache_start::refused(&body).map(|e| (e, "")),
                Err(e) => Some((e.to_string(), crate::measuring::cache_start::hint(self.info.kind))),
            };
            if let Some((e, hint)) = failed {
                let why = format!(
                    "{} failed ({e}){hint}: the prompts carry text unique to this row or cell instead",
                    reset.label
                );
                self.log(format!("note: prefix cache: {why}"));
                self.reset_refused = Some(why.clone());
                return Start { how: CacheStart::Salted, detail: why };
            }
        }
        Start { how: CacheStart::Reset, detail: reset.label }
    }

    /// The run's prompt builder (a trace replay builds its own prompts with it).
    pub(crate) fn prompt_builder(&self) -> &PromptBuilder {
        &self.prompts
    }

    /// The streamed request for `prompt`.
    pub(crate) fn body(&self, prompt: &str, max_tokens: u32) -> Value {
        let mut b = json!({
            "model": self.info.model,
            "stream": true,
            "stream_options": crate::measuring::client::stream_options(),
            "max_tokens": max_tokens,
            "ignore_eos": true,
        });
        if let (Some(obj), Value::Object(p)) = (b.as_object_mut(), prompt_fields(self.prompts.endpoint, prompt)) {
            obj.extend(p);
            if let Some(t) = self.spec.temperature {
                obj.insert("temperature".into(), json!(t));
            }
            if let Some(s) = self.spec.seed {
                obj.insert("seed".into(), json!(s));
            }
        }
        b
    }

    /// One request to completion (prefill rows, warm-ups).
    pub(crate) async fn single(&self, prompt: &str, max_tokens: u32) -> StreamRecord {
        self.single_body(self.body(prompt, max_tokens)).await
    }

    /// A warm-up of one `max_tokens: 1` request that puts `prompt` in slot `slot` of a server
    /// with a prompt cache per slot (llama.cpp's `id_slot`). Without it the slot is llama.cpp's
    /// choice: a warm-up that ends before the next one arrives frees its slot, which then holds
    /// the prompt best and takes the next one too, so on a busy machine several "per slot"
    /// warm-ups filled one slot and the cell's other streams prefilled the whole prompt (a CI
    /// run: 512 × 4 opening TTFT p50 2,960 ms against a cold prefill of 3,305 ms).
    ///
    /// A server that refuses the field (HTTP 400 to it: a proxy that rejects unknown body
    /// fields) gets the warm-up again without it, and no later warm-up of the run carries it:
    /// the per-slot warm-up is then best effort ([`Session::slot_note`]).
    pub(crate) async fn warm_slot(&self, prompt: &str, slot: Option<u32>) -> StreamRecord {
        let body = self.body(prompt, 1);
        let pin = slot.filter(|_| self.info.facts.slots.is_some() && self.slots_unpinned.get().is_none());
        let Some(i) = pin else { return self.single_body(body).await };
        let mut pinned = body.clone();
        if let Some(obj) = pinned.as_object_mut() {
            obj.insert("id_slot".into(), json!(i));
        }
        let record = self.single_body(pinned).await;
        let Some(refusal) = record.error.as_deref().filter(|e| refuses_id_slot(e)) else { return record };
        if self.slots_unpinned.set(refusal.to_string()).is_ok() {
            self.log(format!(
                "note: the server refused llama.cpp's id_slot ({refusal}): warm-ups go without it, so which slot holds a warmed prompt is the server's choice"
            ));
        }
        self.single_body(body).await
    }

    /// The note of a cell whose `n` streams take several slots of a server that refused
    /// `id_slot` ([`Session::warm_slot`]): its per-slot warm-up was best effort.
    pub(crate) fn slot_note(&self, n: u32) -> Option<String> {
        let slots = self.info.facts.slots?.min(n);
        let refusal = self.slots_unpinned.get().filter(|_| slots > 1)?;
        Some(format!(
            "slots not pinned: the server refused llama.cpp's id_slot ({refusal}), so the warm-up of {slots} slots was sent without it and some streams may have prefilled their prompt again"
        ))
    }

    async fn single_body(&self, body: Value) -> StreamRecord {
        let (_keep, cancel) = watch::channel(false);
        let ctl = StreamCtl {
            clock: self.clock,
            stall: self.spec.stall,
            cancel,
            id: 0,
            events: None,
            live_tokens: None,
            keep_text: false,
            gate: None,
        };
        self.client.stream(self.path, &request_body(&body), ctl).await
    }

    /// One `/metrics` reading, awaited (only between measurements, at most
    /// [`crate::measuring::scrape::HOLD_TIMEOUT`]), when the server has one that answers.
    pub(crate) async fn scrape(&self) -> Option<crate::measuring::scrape::Scrape> {
        match self.has_metrics {
            true => crate::measuring::scrape::hold_scrape(&self.client, self.clock, &self.metrics_health).await,
            false => None,
        }
    }

    /// Keep the longest output of `records` when it ran past `--max-tokens` (see
    /// [`Session::longest_output`]).
    pub(crate) fn outputs_measured<'a>(&mut self, records: impl IntoIterator<Item = &'a StreamRecord>) {
        let ended = crate::measuring::endings::ended(records);
        if let Some(l) = speedmatrix_schema::endings::longest_past(&ended, self.spec.max_tokens) {
            self.longest_output = Some(self.longest_output.map_or(l, |o| o.max(l)));
        }
    }

    /// After a measurement: when `/metrics` failed, the results file's `missing` says so (one
    /// entry, kept up to date) and the terminal once.
    pub(crate) fn note_metrics_health(&mut self) {
        let Some(entry) = self.metrics_health.missing() else { return };
        if !self.metrics_failure_said {
            self.metrics_failure_said = true;
            self.log(format!("note: {}", entry.reason));
        }
        let prefix = crate::measuring::scrape::MISSING_PREFIX;
        self.results.missing.retain(|m| !(m.figure == entry.figure && m.reason.starts_with(prefix)));
        self.results.missing.push(entry);
    }

    /// A prompt of `ctx` for the stream `tag` describes, of exact length where the server can
    /// tell.
    pub(crate) async fn build_prompt(&self, tag: &str, ctx: &ContextSize) -> Result<Prompt, CellError> {
        self.prompts.build(tag, ctx.tokens).await.map_err(CellError::Prompt)
    }

    /// Remember a context's warmed prompt (stream `i`) and, for the context's first request,
    /// its cold TTFT.
    pub(crate) fn warmed(&mut self, ctx: &ContextSize, i: usize, prompt: Prompt, ttft_ms: Option<f64>) {
        self.warm.insert((ctx.tokens, i), prompt);
        if let Some(t) = ttft_ms {
            self.cold_ttft.entry(ctx.tokens).or_insert(t);
        }
    }

    /// TTFT of the context's first (cold) request, ms.
    pub(crate) fn cold_ttft(&self, ctx: &ContextSize) -> Option<f64> {
        self.cold_ttft.get(&ctx.tokens).copied()
    }

    /// The warmed prompt of stream `i` of a context (stream 0 is the shared one), warming it
    /// with one `max_tokens: 1` request first when no prefill row did.
    pub(crate) async fn warm_prompt(&mut self, ctx: &ContextSize, i: usize) -> Result<Prompt, CellError> {
        if let Some(p) = self.warm.get(&(ctx.tokens, i)) {
            return Ok(p.clone());
        }
        let tag = if i == 0 { format!("context {}", ctx.label) } else { format!("context {} stream {i}", ctx.label) };
        let p = self.build_prompt(&tag, ctx).await?;
        let rec = self.single(&p.text, 1).await;
        if let Some(e) = rec.error {
            return Err(CellError::WarmUp(e));
        }
        let served = rec.served_prompt_tokens().or(p.tokens);
        self.prompt_check(ctx, served, p.tokens);
        let p = Prompt { tokens: served, ..p };
        self.warmed(ctx, i, p.clone(), rec.ttft_ms());
        Ok(p)
    }

    /// Put the shared prompt of `ctx` into the prompt cache of every slot that `n` streams will
    /// take (llama.cpp keeps one cache per slot, so one warm-up warms one slot and the other
    /// opening streams would prefill the whole prompt inside their TTFT): as many `max_tokens: 1`
    /// requests at once as slots are needed, each taking its own idle slot. Nothing for servers
    /// without slots (vLLM and SGLang share one prefix cache) or once enough slots hold it.
    pub(crate) async fn warm_slots(&mut self, ctx: &ContextSize, prompt: &Prompt, n: u32) -> Result<(), CellError> {
        let want = self.info.facts.slots.map_or(1, |slots| slots.min(n));
        if want <= self.slots_warmed.get(&ctx.tokens).copied().unwrap_or(1) {
            return Ok(());
        }
        let warm_ups = (0..want).map(|i| self.warm_slot(&prompt.text, Some(i)));
        let records = futures_util::future::join_all(warm_ups).await;
        if let Some(e) = records.into_iter().find_map(|r| r.error) {
            return Err(CellError::WarmUp(e));
        }
        self.slots_warmed.insert(ctx.tokens, want);
        Ok(())
    }

    /// `engine.speculative_decoding` from the server's counters, where the launch command did
    /// not give it (a server in a container, behind a tunnel, or started some other way): the
    /// draft tokens proposed per draft since the run started
    /// ([`crate::measuring::launch::speculative_decoding_from_counters`]), read from the last
    /// cell's own scrapes (no request of its own).
    pub(crate) fn speculation_from_counters(&mut self) {
        let Some((drafts, tokens)) = self.spec_start.filter(|_| self.results.engine.speculative_decoding.is_none())
        else {
            return;
        };
        let Some((d, t)) = self.spec_latest else { return };
        self.results.engine.speculative_decoding =
            crate::measuring::launch::speculative_decoding_from_counters(d - drafts, t - tokens);
    }

    /// The note of a context whose prompt's real length (`served`) is more than 1 % off its
    /// target (naming `/tokenize`'s count `sized` when the server's usage disagrees with it),
    /// warned once per context and kept for its rows and cells
    /// ([`speedmatrix_schema::context::prompt_length_note`]).
    pub(crate) fn prompt_check(
        &mut self,
        ctx: &ContextSize,
        served: Option<u64>,
        sized: Option<u64>,
    ) -> Option<String> {
        let note = speedmatrix_schema::context::prompt_length_note(ctx.tokens, served, sized)?;
        if self.prompt_notes.insert(ctx.tokens, note.clone()).is_none() {
            self.log(format!("warning: context {}: {note}", ctx.label));
        }
        Some(note)
    }

    /// The prompt-length note of a context, once its prompt was sent ([`Session::prompt_check`]).
    pub(crate) fn prompt_note(&self, ctx: &ContextSize) -> Option<String> {
        self.prompt_notes.get(&ctx.tokens).cloned()
    }
}

/// Whether a warm-up's error is the server refusing `id_slot`: HTTP 400 to a request carrying
/// it (what a proxy that rejects unknown fields answers, e.g. `Unrecognized request argument
/// supplied: id_slot`), or another 4xx naming the field.
fn refuses_id_slot(error: &str) -> bool {
    error.contains("answered HTTP 400") || (error.contains("answered HTTP 4") && error.contains("id_slot"))
}

#[cfg(test)]
mod tests {
    use super::refuses_id_slot;

    #[test]
    fn a_400_or_a_4xx_naming_id_slot_is_a_refusal_of_the_field() {
        let proxy = r#"http://127.0.0.1:8080/v1/chat/completions answered HTTP 400: {"error":{"message":"Unrecognized request argument supplied: id_slot"}}"#;
        assert!(refuses_id_slot(proxy));
        assert!(refuses_id_slot("http://h/v1/completions answered HTTP 422: unknown field `id_slot`"));
        assert!(!refuses_id_slot("http://h/v1/completions answered HTTP 422: bad temperature"));
        assert!(!refuses_id_slot("http://h/v1/completions answered HTTP 503: loading model"));
        assert!(!refuses_id_slot("cannot reach http://h/v1/completions: connection refused"));
    }
}
