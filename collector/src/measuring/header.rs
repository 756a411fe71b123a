//! The header of a new results file ([`fresh_results`]): every planned row and cell `not_run`
//! (or `over_capacity`), the run's id and start, the engine as discovery found it, the config
//! (the plan and how it is measured), and what this machine tells about the host
//! ([`host_facts`]: where the server runs, its launch command, the hardware card, the GPUs
//! chosen for telemetry, the client machine). `--resume` compares this header with the file's.

use crate::measuring::discovery::ServerInfo;
use crate::measuring::plan::Plan;
use crate::measuring::prompt::corpus;
use crate::measuring::spec::RunSpec;
use speedmatrix_schema::status::over_capacity_reason;
use speedmatrix_schema::*;

/// Now, as the results file writes times (RFC 3339, UTC).
pub(crate) fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// A run-unique id: start time in ns and the process id, base 36.
fn new_run_id() -> String {
    let ns = time::OffsetDateTime::now_utc().unix_timestamp_nanos() as u128;
    let mut n = ns ^ (u128::from(std::process::id()) << 64);
    let mut s = String::new();
    while n > 0 {
        s.push(char::from_digit((n % 36) as u32, 36).unwrap_or('0'));
        n /= 36;
    }
    s.chars().rev().collect()
}

/// `run.notes`: the user's `--notes`, then the collector's note on the model it chose when the
/// server lists several (`model: …`), one per line.
fn run_notes(user: Option<&str>, model: Option<&str>) -> Option<String> {
    let model = model.map(|m| format!("model: {m}"));
    let lines: Vec<&str> = user.into_iter().chain(model.as_deref()).collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// A new results file for `plan`: every prefill row and decode cell planned (`not_run`, or
/// `over_capacity` with the shortfall), the contexts that do not fit (`not_run_contexts`), the
/// header from discovery and the host.
pub(crate) fn fresh_results(info: &ServerInfo, plan: &Plan, spec: &RunSpec, host: &Host) -> Results {
    // Each context's cold row, then its warm rows (one per prefix share above 0).
    let warm: Vec<f64> = plan.prefix_shares.iter().copied().filter(|s| *s > 0.0).collect();
    let prefill = plan
        .prefill
        .iter()
        .flat_map(|c| std::iter::once(None).chain(warm.iter().map(|s| Some(*s))).map(move |share| (c, share)))
        .map(|(c, share)| PrefillRow {
            prefix_share: share,
            ..PrefillRow::new(c.clone(), CellStatus::NotRun, Some("pending".into()))
        })
        .collect();
    // Conversations (`--turns`) take the decode cells' places.
    let decode = plan
        .cells
        .iter()
        .filter(|_| spec.turns.is_none())
        .map(|p| {
            let mut c = crate::measuring::measure::blank_cell(&p.context, p.concurrency);
            c.prefix_share = p.prefix_share;
            if let Some(cap) = p.over_capacity {
                c.status = CellStatus::OverCapacity;
                c.reason = Some(p.reason.clone().unwrap_or_else(|| over_capacity_reason(&cap)));
                c.capacity = Some(cap);
            }
            c
        })
        .collect();
    Results {
        schema: SCHEMA_NAME.into(),
        schema_version: SCHEMA_VERSION,
        tool: Tool { name: "speedmatrix".into(), version: Some(env!("CARGO_PKG_VERSION").into()), converted_by: None },
        run: RunInfo {
            id: new_run_id(),
            started_at: Some(now_rfc3339()),
            finished_at: None,
            status: RunStatus::Running,
            reason: None,
            label: spec.label.clone(),
            notes: run_notes(spec.notes.as_deref(), info.model_note.as_deref()),
        },
        hardware: host.hardware.clone(),
        engine: engine_header(info, host),
        config: run_config(plan, spec),
        prefill,
        decode,
        rates: planned_rates(plan, spec),
        rate_at_slo: vec![],
        traces: spec.trace.iter().map(|t| crate::measuring::trace::planned_row(t, spec.max_in_flight)).collect(),
        conversations: crate::measuring::conversation::planned(plan, spec),
        client: Some(host.client.clone()),
        missing: info.facts.missing.iter().chain(&host.missing).cloned().chain(spec_missing(info, host)).collect(),
        import: None,
    }
}

/// The rate cells of the plan, context-major, then prefix share (`--prefix-share`; none
/// without), then rate ascending: a context's cells of one share are measured in rate order, so
/// a saturated rate skips that share's higher rates.
fn planned_rates(plan: &Plan, spec: &RunSpec) -> Vec<RateCell> {
    let shares: Vec<Option<f64>> = match plan.prefix_shares.is_empty() {
        true => vec![None],
        false => plan.prefix_shares.iter().map(|s| Some(*s)).collect(),
    };
    let mut cells = Vec::with_capacity(plan.contexts.len() * shares.len() * plan.rates.len());
    for ctx in &plan.contexts {
        for &share in &shares {
            for &r in &plan.rates {
                let mut c = RateCell::new(ctx.clone(), r, spec.arrival, spec.max_in_flight);
                c.prefix_share = share;
                cells.push(c);
            }
        }
    }
    cells
}

/// Speculative decoding the launch command sets but `/metrics` does not count, as the file's
/// `missing` entry.
fn spec_missing(info: &ServerInfo, host: &Host) -> Option<MissingFigure> {
    let speculating = host.launch_command.as_deref().and_then(crate::measuring::launch::speculative_decoding);
    crate::measuring::engine::speculation_uncounted(speculating.as_deref(), info.facts.counts_speculation)
}

/// The results file's `engine`: what discovery found, and the launch command the host gave.
fn engine_header(info: &ServerInfo, host: &Host) -> Engine {
    Engine {
        name: Some(info.kind.id().to_string()),
        version: info.facts.version.clone(),
        served_model_name: Some(info.model.clone()),
        model: info.root.clone(),
        max_model_len: info.facts.max_model_len,
        kv_budget_tokens: info.facts.kv_budget.map(|(b, _)| b),
        kv_budget_source: info.facts.kv_budget.map(|(_, s)| s),
        launch_command: host.launch_command.clone(),
        speculative_decoding: host.launch_command.as_deref().and_then(crate::measuring::launch::speculative_decoding),
        slots: info.facts.slots,
        slot_context_tokens: info.facts.slot_context,
        max_running_requests: info.facts.max_running,
        simulated: info.simulated.clone(),
        ..Engine::default()
    }
}

/// The results file's `config`: the plan and how it is measured.
fn run_config(plan: &Plan, spec: &RunSpec) -> Config {
    Config {
        contexts: plan.contexts.clone(),
        concurrency: plan.concurrency.clone(),
        prefill_contexts: plan.prefill.clone(),
        window_s: Some(spec.window.as_secs_f64()),
        max_tokens: Some(spec.max_tokens),
        endpoint: Some(spec.endpoint),
        ignore_eos: Some(true),
        temperature: spec.temperature,
        seed: spec.seed,
        prompt_corpus: Some(spec.prompts.as_ref().map_or_else(corpus, |p| p.corpus.clone())),
        prompt_sharing: Some(if spec.distinct_prompts { PromptSharing::Distinct } else { PromptSharing::Shared }),
        prefill_mode: Some(PrefillMode::DecodeWarmup),
        decode_test: Some(DecodeTest::FixedDuration),
        stall_timeout_s: Some(spec.stall.as_secs_f64()),
        not_run_contexts: plan.not_run.clone(),
        server_url: (!spec.redact_host).then(|| spec.url.as_str().to_string()),
        repeats: (spec.repeat > 1).then_some(spec.repeat),
        rates: plan.rates.clone(),
        rate_slo: spec.slo,
        rate_search: spec.rate_search,
        rate_keep_going: spec.keep_going,
        trace: spec.trace.as_ref().map(|t| t.source.clone()),
        prefix_shares: plan.prefix_shares.clone(),
    }
}

/// What this machine can tell about the server: the hardware card (CPU, OS, host name and the
/// NVML GPU inventory when the server runs here), the launch command, the GPU sampler, and the
/// client machine (always).
pub(crate) struct Host {
    hardware: Hardware,
    launch_command: Option<String>,
    /// The server's GPUs on NVML, for the sampler (none when they are not seen here).
    pub(crate) gpus: Option<crate::measuring::gpu::Gpus>,
    client: ClientMachine,
    /// Header figures the host could not give, with the reason (the launch command of a server
    /// that is not on this machine).
    missing: Vec<MissingFigure>,
}

impl Host {
    /// No host facts (the dry run's preview of the plan).
    pub(crate) fn none() -> Host {
        Host {
            hardware: Hardware::default(),
            launch_command: None,
            gpus: None,
            client: ClientMachine::default(),
            missing: vec![],
        }
    }
}

/// This machine, as the client: CPU, cores, OS, host name (not with `--redact-host`).
fn client_machine(spec: &RunSpec) -> ClientMachine {
    ClientMachine {
        cpu: crate::measuring::launch::cpu_model(),
        cores: u32::try_from(crate::measuring::selfcheck::cores()).ok(),
        os: Some(std::env::consts::OS.into()),
        host: if spec.redact_host { None } else { crate::measuring::launch::host_name() },
    }
}

/// Look at the host: where the server runs (the owner of the URL's listening socket, see
/// [`crate::measuring::locate`]); `--launch-command` or the local server's own (secrets
/// redacted, home paths too with `--redact-host`); this machine's CPU, OS and name on the
/// hardware card only when the server runs here; NVML unless `--no-gpu` or the server is not
/// here, in which case `hardware.gpu_telemetry_note` says why there are no GPU figures.
pub(crate) fn host_facts(spec: &RunSpec) -> Host {
    use crate::measuring::launch;
    use crate::measuring::locate::{locate, Found};
    let found = locate(spec.url.url());
    let server = match &found {
        Found::Local { root, argv, pids, .. } => Some(launch::local_server(*root, argv, pids)),
        _ => None,
    };
    let launch = match &spec.launch_command {
        // `RunSpec::from_args` made sure a shell can split it.
        Some(line) => shlex::split(line).map(|words| launch::redact_argv(&words)),
        None => server.as_ref().map(|s| s.command.clone()),
    };
    let redact = |c: String| if spec.redact_host { launch::redact_home(&c) } else { c };
    let launch_command = launch.map(|c| redact(launch::scrub(&c, spec.api_key.as_deref())));
    let client = client_machine(spec);
    let local = server.is_some();
    let mut hardware = if local {
        Hardware { os: client.os.clone(), cpu: client.cpu.clone(), host: client.host.clone(), ..Hardware::default() }
    } else {
        Hardware::default()
    };
    let mut evidence = found.evidence().to_string();
    if spec.redact_host {
        if let Some(h) = spec.url.host() {
            evidence = redact(evidence.replace(h, "<host>"));
        }
    }
    hardware.server_location = Some(ServerLocation { place: found.place(), evidence: evidence.clone() });
    if local {
        say!("server: on this machine — {evidence}");
    } else {
        say!("server: not on this machine — {evidence}; its hardware is not recorded (this machine is recorded as the client)");
    }
    let (gpus, selection) = gpu_selection(spec, server.as_ref().map(|s| s.pids.as_slice()), &mut hardware);
    hardware.gpu_selection = Some(selection);
    if let Some(n) = spec.gpu_count {
        if hardware.gpu_count.is_some_and(|seen| seen != n) {
            say!("GPUs: {n} serve the model (--gpu-count), of the {} NVML sees", hardware.gpus.len());
        }
        hardware.gpu_count = Some(n);
    }
    // Only a server on this machine has a process to read its command from.
    let missing = if launch_command.is_none() {
        vec![MissingFigure {
            figure: "engine.launch_command".into(),
            reason: format!("the server is not on this machine ({evidence}), so its command line cannot be read; give --launch-command"),
        }]
    } else {
        vec![]
    };
    Host { hardware, launch_command, gpus, client, missing }
}

/// Choose the server's GPUs and fill the hardware card's GPU inventory: the local server's
/// processes on NVML (or all GPUs of the host, assumed), none with `--no-gpu` or a server not
/// here (then `hardware.gpu_telemetry_note` says why).
fn gpu_selection(
    spec: &RunSpec,
    server_pids: Option<&[u32]>,
    hardware: &mut Hardware,
) -> (Option<crate::measuring::gpu::Gpus>, GpuSelection) {
    let none = |detail: &str| GpuSelection { method: GpuSelectionMethod::None, detail: detail.into() };
    let opened = if spec.no_gpu {
        Err(none("skipped (--no-gpu)"))
    } else if let Some(pids) = server_pids {
        crate::measuring::gpu::open(pids).map_err(|e| e.selection())
    } else {
        Err(none("the server is not on this host: NVML here cannot see its GPUs (no GPU figures)"))
    };
    match opened {
        Ok(g) => {
            hardware.gpus = g.inventory();
            hardware.gpu_count = Some(hardware.gpus.len() as u32);
            hardware.vram_total_bytes = hardware.gpus.iter().map(|g| g.memory_bytes).sum();
            hardware.accelerator_type = Some("NVIDIA GPU".into());
            let assumed = if g.selection.method == GpuSelectionMethod::AllAssumed { " (assumed)" } else { "" };
            say!(
                "GPUs{assumed}: {} — {}",
                g.selection.detail,
                hardware.gpus.iter().map(|g| g.name.as_str()).collect::<Vec<_>>().join(", ")
            );
            let selection = g.selection.clone();
            (Some(g), selection)
        }
        Err(s) => {
            hardware.gpu_telemetry_note = Some(s.detail.clone());
            (None, s)
        }
    }
}
