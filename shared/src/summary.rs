//! The header of a run as people read it (the seed page's wording): the title line's
//! subtitle and the Hardware, Engine and Run cards. Pure; `speedmatrix show` and the viewer
//! both print these, so the terminal and the page say the same.

use crate::registry::{self, Style};
use crate::{DecodeTest, GpuSelectionMethod, PrefillMode, Results, ServerPlace};

fn range_label(labels: &[String]) -> String {
    match (labels.first(), labels.last()) {
        (Some(a), Some(b)) if a != b => format!("{a}–{b}"),
        (Some(a), _) => a.clone(),
        _ => "none".into(),
    }
}

/// The line under the title: engine · version · quantization · shape of the matrix · prefill
/// contexts (as the seed page writes it).
pub fn subtitle(r: &Results) -> String {
    let c = &r.config;
    let ctx: Vec<String> = c.contexts.iter().map(|x| x.label.clone()).collect();
    let conc: Vec<String> = c.concurrency.iter().map(u32::to_string).collect();
    let prefill: Vec<String> = c.prefill_contexts.iter().map(|x| x.label.clone()).collect();
    let mut parts = vec![r.engine.name.clone().unwrap_or_else(|| "engine unknown".into())];
    parts.extend(r.engine.version.clone());
    parts.extend(r.engine.quantization.clone());
    let n = |k: usize, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
    if ctx.is_empty() || conc.is_empty() {
        parts.push("no decode matrix".into());
    } else {
        parts.push(format!(
            "{} ({}) × {} ({})",
            n(ctx.len(), "context", "contexts"),
            range_label(&ctx),
            n(conc.len(), "concurrency level", "concurrency levels"),
            range_label(&conc)
        ));
    }
    if !prefill.is_empty() {
        parts.push(format!("prefill at {}", prefill.join(", ")));
    }
    parts.join(" · ")
}

/// One header card: a title and its known label → value pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    /// "Hardware", "Engine", "Run".
    pub title: &'static str,
    /// Only the items the file knows, in display order.
    pub items: Vec<(&'static str, String)>,
}

fn gb(bytes: u64) -> String {
    let g = bytes as f64 / 1e9;
    if (g - g.round()).abs() < 0.05 {
        format!("{g:.0} GB")
    } else {
        format!("{g:.1} GB")
    }
}

fn tokens(v: u64) -> String {
    format!("{} tokens", registry::format_int(v))
}

fn card(title: &'static str, items: Vec<(&'static str, Option<String>)>) -> Card {
    Card { title, items: items.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect() }
}

/// The Hardware, Engine and Run cards, and the Client card when the file records the client
/// machine (the launch command is shown on its own).
pub fn cards(r: &Results) -> Vec<Card> {
    let mut out = vec![hardware_card(r), engine_card(r), run_card(r)];
    out.extend(client_card(r));
    out
}

fn hardware_card(r: &Results) -> Card {
    let h = &r.hardware;
    let mut gpu_names: Vec<String> = h.gpus.iter().map(|g| g.name.clone()).collect();
    gpu_names.dedup();
    let count = h.gpu_count.or((!h.gpus.is_empty()).then_some(h.gpus.len() as u32));
    let per_gpu = h.gpus.first().and_then(|g| g.memory_bytes);
    let vram = h.vram_total_bytes.map(|t| match (count, per_gpu) {
        (Some(n), Some(each)) if n > 1 => format!("{} ({n} × {})", gb(t), gb(each)),
        _ => gb(t),
    });
    let first = h.gpus.first();
    card(
        "Hardware",
        vec![
            ("Type", h.accelerator_type.clone()),
            ("GPU", (!gpu_names.is_empty()).then(|| gpu_names.join(", "))),
            ("GPU count", count.map(|n| n.to_string())),
            ("VRAM", vram),
            ("Driver", first.and_then(|g| g.driver.clone())),
            ("CUDA", first.and_then(|g| g.cuda.clone())),
            ("CPU", h.cpu.clone()),
            ("OS", h.os.clone()),
            ("Host", h.host.clone()),
            ("Server", h.server_location.as_ref().map(|l| format!("{}: {}", place_word(l.place), l.evidence))),
            ("GPUs read", h.gpu_selection.as_ref().map(gpu_selection_text)),
            // Without NVML the selection's detail is the same sentence: said once.
            (
                "GPU telemetry",
                h.gpu_telemetry_note.clone().filter(|n| h.gpu_selection.as_ref().is_none_or(|s| &s.detail != n)),
            ),
        ],
    )
}

fn engine_card(r: &Results) -> Card {
    let e = &r.engine;
    card(
        "Engine",
        vec![
            ("Engine", e.name.clone()),
            ("Version", e.version.clone()),
            ("Quantization", e.quantization.clone()),
            ("Backend", e.backend.clone()),
            ("Repository", e.repository.clone()),
            ("Build", e.build.clone()),
            ("Commit", e.commit.clone()),
            ("Model", e.model.clone()),
            ("Max model length", e.max_model_len.map(tokens)),
            ("KV cache budget", e.kv_budget_tokens.map(tokens)),
            ("Speculative decoding", e.speculative_decoding.clone()),
            (
                "Simulated",
                e.simulated.as_ref().map(|s| match &s.profile {
                    Some(p) => format!("yes — {}, profile {p}", s.by),
                    None => format!("yes — {}", s.by),
                }),
            ),
        ],
    )
}

fn run_card(r: &Results) -> Card {
    let (c, e) = (&r.config, &r.engine);
    let run = &r.run;
    let status = match run.status {
        crate::RunStatus::Running => "Running",
        crate::RunStatus::Complete => "Complete",
        crate::RunStatus::Interrupted => "Interrupted",
        crate::RunStatus::Failed => "Failed",
    };
    card(
        "Run",
        vec![
            ("Status", Some(status.to_string())),
            ("Stopped because", run.reason.clone()),
            ("Started", run.started_at.clone()),
            ("Finished", run.finished_at.clone()),
            ("Served model", e.served_model_name.clone()),
            ("Revision", e.revision.clone()),
            (
                "Benchmark tool",
                Some(match &r.tool.version {
                    Some(v) => format!("{} v{v}", r.tool.name),
                    None => format!("{} (version not recorded)", r.tool.name),
                }),
            ),
            ("Converted by", r.tool.converted_by.clone()),
            (
                "Imported from",
                r.import.as_ref().map(|i| {
                    if i.files.is_empty() {
                        i.format.clone()
                    } else {
                        format!("{} ({})", i.format, i.files.join(", "))
                    }
                }),
            ),
            (
                "Decode test",
                c.decode_test.map(|d| match d {
                    DecodeTest::FixedDuration => "Fixed duration".into(),
                    DecodeTest::FixedRequests => "Fixed requests".into(),
                }),
            ),
            (
                "Prefill mode",
                c.prefill_mode.map(|p| match p {
                    // A mode of measuring rows, said only where there are rows to measure.
                    _ if r.prefill.is_empty() => "No prefill rows in this run".into(),
                    PrefillMode::DecodeWarmup => "Measured during decode warm-up".into(),
                    PrefillMode::Separate => "Separate cold request".into(),
                }),
            ),
            ("Time per measurement", c.window_s.map(|w| format!("{} s", registry::format_number(w, Style::Fixed(0))))),
            ("Max output", c.max_tokens.map(|m| tokens(u64::from(m)))),
            // Only a run of several repeats says so (figures are then means over repeats).
            (
                "Repeats",
                c.repeats.filter(|&n| n > 1).map(|n| format!("{n} per cell, interleaved (means over repeats)")),
            ),
            ("Endpoint", c.endpoint.map(|x| format!("{x:?}").to_lowercase())),
            ("Run id", Some(run.id.clone())),
        ],
    )
}

/// The machine the collector ran on, when recorded (see `Results::client`).
fn client_card(r: &Results) -> Option<Card> {
    let cl = r.client.as_ref()?;
    Some(card(
        "Client",
        vec![
            ("CPU", cl.cpu.clone()),
            ("Cores", cl.cores.map(|n| n.to_string())),
            ("OS", cl.os.clone()),
            ("Host", cl.host.clone()),
        ],
    ))
}

fn place_word(p: ServerPlace) -> &'static str {
    match p {
        ServerPlace::Local => "on this machine",
        ServerPlace::Remote => "remote",
        ServerPlace::Unknown => "not seen on this machine",
    }
}

/// How the run's GPUs were chosen, in words; an assumed choice says so first.
fn gpu_selection_text(s: &crate::GpuSelection) -> String {
    match s.method {
        GpuSelectionMethod::AllAssumed => format!("assumed: {}", s.detail),
        _ => s.detail.clone(),
    }
}

/// Registry columns whose figures come from the GPUs a run read (NVML).
pub const GPU_COLUMNS: [&str; 2] = ["gpu_power_w", "energy_j_per_token"];

/// For a GPU figure (`gpu_power_w`, `energy_j_per_token`) of a run whose GPUs were assumed
/// rather than matched to the server's processes: the words that mark it, e.g. "assumed: all 8
/// GPUs of the host". `None` for other columns and other runs.
pub fn assumed_gpu_mark(r: &Results, column: &str) -> Option<String> {
    let s = r.hardware.gpu_selection.as_ref().filter(|s| s.method == GpuSelectionMethod::AllAssumed)?;
    GPU_COLUMNS.contains(&column).then(|| format!("assumed GPUs: {}", s.detail))
}

/// A list of what a file lacks, with why: figures the server or the source could not give
/// (`Results::missing`), contexts asked for that could not be planned
/// (`Config::not_run_contexts`) and, for imported runs, source fields that did not map
/// (`ImportInfo::unmapped`). `show` and the viewer print these under the cards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gaps {
    /// "Missing figures", "Contexts not run" or "Not imported".
    pub title: &'static str,
    /// One line of explanation under the title.
    pub note: &'static str,
    /// (figure or source field, why / its value), in file order.
    pub rows: Vec<(String, String)>,
}

/// The file's gaps; empty when it lacks nothing it knows of.
pub fn gaps(r: &Results) -> Vec<Gaps> {
    let mut out = Vec::new();
    if !r.missing.is_empty() {
        out.push(Gaps {
            title: "Missing figures",
            note: "Figures this run could not record, and why.",
            rows: r.missing.iter().map(|m| (m.figure.clone(), m.reason.clone())).collect(),
        });
    }
    if !r.config.not_run_contexts.is_empty() {
        out.push(Gaps {
            title: "Contexts not run",
            note: "Contexts that were asked for but cannot be measured on this server: they have no row or cell.",
            rows: r
                .config
                .not_run_contexts
                .iter()
                .map(|n| {
                    let phase = match n.phase {
                        crate::PlanPhase::Prefill => "prefill",
                        crate::PlanPhase::Decode => "decode",
                    };
                    (format!("{phase} context {}", n.label), n.reason.clone())
                })
                .collect(),
        });
    }
    if let Some(i) = r.import.as_ref().filter(|i| !i.unmapped.is_empty()) {
        out.push(Gaps {
            title: "Not imported",
            note: "Fields of the source file that have no place in a speedmatrix results file.",
            rows: i.unmapped.iter().map(|u| (u.field.clone(), u.note.clone())).collect(),
        });
    }
    out
}
