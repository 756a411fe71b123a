//! Run metadata from the host: the server's launch command (read from the local process when
//! the server runs on this machine, or given with `--launch-command`) with every secret
//! replaced by `<redacted>`, and the host's CPU, OS and name.

use speedmatrix_schema::command_line::{CommandLine, FLAG_SET};

/// What replaces a secret.
pub const REDACTED: &str = "<redacted>";

/// Flags whose value is a secret (`--api-key KEY` and `--api-key=KEY` alike).
pub(crate) const SECRET_FLAGS: [&str; 8] = [
    "--api-key",
    "--hf-token",
    "--token",
    "--password",
    "--secret",
    "--auth-token",
    "--access-token",
    "--ssl-keyfile-password",
];

/// Words that make an environment variable's value a secret (`HF_TOKEN=…`, `OPENAI_API_KEY=…`).
const SECRET_WORDS: [&str; 5] = ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD"];

fn is_secret_flag(flag: &str) -> bool {
    let f = flag.to_ascii_lowercase().replace('_', "-");
    SECRET_FLAGS.contains(&f.as_str()) || f.ends_with("-api-key") || f.ends_with("-token") || f.ends_with("-password")
}

fn is_secret_env(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    !n.is_empty()
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && SECRET_WORDS.iter().any(|w| n.split('_').any(|part| part == *w) || n.ends_with(w))
}

/// Whether a value looks like a credential whatever flag or variable carries it: a Hugging Face
/// token (`hf_…`), an OpenAI-style key (`sk-…`), a GitHub token (`ghp_…`, `github_pat_…`).
fn looks_like_secret(value: &str) -> bool {
    ["hf_", "sk-", "ghp_", "gho_", "github_pat_", "xoxb-", "AKIA"].iter().any(|p| {
        value.strip_prefix(p).is_some_and(|rest| {
            rest.len() >= 16 && rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
    })
}

/// Quote an argument for a POSIX shell when it needs it (`'{"method":"mtp"}'`).
fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// The argument vector as one shell-quoted line with every secret replaced by `<redacted>`:
/// the value after a secret flag (`--api-key KEY`, `--api-key=KEY`, `--hf-token …`) and the
/// value of a secret-looking `NAME=value` environment assignment before the command.
pub fn redact_argv(argv: &[String]) -> String {
    let mut out = Vec::with_capacity(argv.len());
    let mut hide_next = false;
    for arg in argv {
        if hide_next {
            out.push(REDACTED.to_string());
            hide_next = false;
            continue;
        }
        match arg.split_once('=') {
            // `--api-key=KEY`, `--anything=sk-…`
            Some((flag, value)) if flag.starts_with('-') && (is_secret_flag(flag) || looks_like_secret(value)) => {
                out.push(format!("{flag}={REDACTED}"));
                continue;
            }
            // `--env=HF_TOKEN=…` (docker, podman): the flag's value is itself an assignment.
            Some((flag, value))
                if flag.starts_with('-')
                    && value.split_once('=').is_some_and(|(name, v)| is_secret_env(name) || looks_like_secret(v)) =>
            {
                let name = value.split_once('=').map_or("", |(name, _)| name);
                out.push(format!("{flag}={name}={REDACTED}"));
                continue;
            }
            // `HF_TOKEN=…` anywhere: before the command, after `env`, `docker run -e`, `--env`.
            Some((name, value))
                if !name.starts_with('-')
                    && !name.contains('/')
                    && (is_secret_env(name) || looks_like_secret(value)) =>
            {
                out.push(format!("{name}={REDACTED}"));
                continue;
            }
            Some(_) => {}
            None if arg.starts_with("--") && is_secret_flag(arg) => hide_next = true,
            None if looks_like_secret(arg) => {
                out.push(REDACTED.to_string());
                continue;
            }
            None => {}
        }
        out.push(shell_quote(arg));
    }
    out.join(" ")
}

/// `line` with every occurrence of `secret` (e.g. the API key this run was given) replaced by
/// `<redacted>`: a last guard for secrets in shapes no rule above knows. Keys shorter than 4
/// characters are left alone (they would match ordinary words).
pub fn scrub(line: &str, secret: Option<&str>) -> String {
    match secret.filter(|k| k.len() >= 4) {
        Some(k) => line.replace(k, REDACTED),
        None => line.to_string(),
    }
}

/// The file name of a program: `/usr/bin/ssh` → `ssh`; `python3 -m litellm` → `litellm`.
pub fn program_name(argv: &[String]) -> String {
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
    let first = argv.first().map(|a| base(a)).unwrap_or_default();
    let interpreted = first.starts_with("python") || first == "node" || first == "uv" || first == "uvx";
    match argv.iter().position(|a| a == "-m") {
        Some(i) if interpreted => argv.get(i + 1).map_or(first, |m| m.split('.').next().unwrap_or(m).to_string()),
        _ if interpreted => argv.iter().skip(1).find(|a| !a.starts_with('-')).map_or(first, |a| base(a)),
        _ => first,
    }
}

/// Whether an argument vector launches an LLM server we know: vLLM, SGLang, llama.cpp, the twin,
/// and other engines people serve OpenAI APIs with (Ollama, TGI, LMDeploy, TensorRT-LLM,
/// mistral.rs, llamafile, KoboldCpp, Aphrodite, MLC LLM, LocalAI, llama-cpp-python). vLLM's
/// renamed processes (`VLLM::EngineCore`) count too, and the twin (`speedmatrix simulate`) under
/// whatever name its binary was built, e.g. `speedmatrix-under-test`.
pub fn is_server(argv: &[String]) -> bool {
    let joined = argv.join(" ");
    let program = program_name(argv);
    let first = argv.first().map(String::as_str).unwrap_or_default();
    (joined.contains("vllm") && (argv.iter().any(|a| a == "serve") || joined.contains("api_server")))
        || first.starts_with("VLLM::")
        || joined.contains("sglang.launch_server")
        || (program == "sglang" && argv.iter().any(|a| a == "serve"))
        || (program.starts_with("speedmatrix") && argv.get(1).is_some_and(|a| a == "simulate" || a == "demo"))
        || [
            "llama-server",
            "ollama",
            "text-generation-launcher",
            "text-generation-router",
            "lmdeploy",
            "trtllm-serve",
            "tritonserver",
            "mistralrs-server",
            "llamafile",
            "koboldcpp",
            "aphrodite",
            "mlc_llm",
            "local-ai",
            "llama_cpp",
        ]
        .contains(&program.as_str())
}

/// The argument vector of a process (`/proc/PID/cmdline`), if visible.
pub fn argv_of(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let argv: Vec<String> =
        raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    (!argv.is_empty()).then_some(argv)
}

/// The parent of a process (`/proc/PID/stat`), if visible.
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "PID (comm) STATE PPID …"; comm may hold spaces, so split after the last ')'.
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// The top process of the server that `pid` belongs to: up from `pid` while the parent is a
/// server process too (TGI's router under its launcher, a vLLM API server under `vllm serve`).
/// Its argument vector is the launch command.
pub fn server_root(pid: u32) -> u32 {
    let mut root = pid;
    while let Some(parent) = parent_of(root).filter(|&p| p > 1) {
        if !argv_of(parent).is_some_and(|a| is_server(&a)) {
            break;
        }
        root = parent;
    }
    root
}

/// A server process on this host, found by the listening socket of the URL (see
/// [`crate::measuring::locate`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LocalServer {
    /// The server's process and every process below it (workers, engine cores): the GPU
    /// sampler matches these against NVML's compute processes.
    pub pids: Vec<u32>,
    /// Its launch command, as one shell line: the engine-relevant environment (`VLLM_*`,
    /// `CUDA_VISIBLE_DEVICES`, `HF_*`, …) as `NAME=value` prefixes, then the argument vector;
    /// every secret replaced by `<redacted>`.
    pub command: String,
}

/// Environment variables that change how an engine runs, recorded with the launch command.
const ENGINE_ENV_PREFIXES: [&str; 14] = [
    "VLLM_",
    "SGLANG_",
    "LLAMA_",
    "GGML_",
    "CUDA_",
    "NCCL_",
    "NVIDIA_",
    "HF_",
    "HUGGING_FACE_",
    "TORCH_",
    "PYTORCH_",
    "OMP_",
    "TOKENIZERS_",
    "OPENAI_",
];

/// The engine-relevant `NAME=value` pairs of a process environment (`/proc/PID/environ`
/// bytes), sorted by name.
fn engine_env(environ: &[u8]) -> Vec<String> {
    let mut vars: Vec<String> = environ
        .split(|b| *b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok())
        .filter(|kv| {
            kv.split_once('=').is_some_and(|(name, _)| ENGINE_ENV_PREFIXES.iter().any(|p| name.starts_with(p)))
        })
        .map(str::to_string)
        .collect();
    vars.sort();
    vars
}

/// The local server `root` (its argument vector `argv`, its process tree `pids`): its launch
/// command with the engine-relevant environment, redacted.
pub fn local_server(root: u32, argv: &[String], pids: &[u32]) -> LocalServer {
    let env = std::fs::read(format!("/proc/{root}/environ")).map(|e| engine_env(&e)).unwrap_or_default();
    let line: Vec<String> = env.into_iter().chain(argv.iter().cloned()).collect();
    LocalServer { pids: pids.to_vec(), command: redact_argv(&line) }
}

/// Every process below `root`, from the parent pid in `/proc/PID/stat`.
pub fn descendants(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            Some((pid, parent_of(pid)?))
        })
        .collect();
    let mut out = vec![];
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(child, parent) in &parents {
            if parent == p && !out.contains(&child) {
                out.push(child);
                frontier.push(child);
            }
        }
    }
    out
}

/// Speculative decoding as the launch command sets it (vLLM `--speculative-config JSON`, or
/// `--speculative-model M` / SGLang `--speculative-algorithm A`), e.g. "ngram, 3 tokens";
/// `None` when the command sets none.
pub fn speculative_decoding(command: &str) -> Option<String> {
    let line = CommandLine::parse(command)?;
    let value = |flag: &str| line.value(flag).filter(|v| *v != FLAG_SET).map(str::to_string);
    if let Some(cfg) = value("--speculative-config") {
        let v: serde_json::Value = serde_json::from_str(&cfg).ok()?;
        let method = v["method"].as_str().or_else(|| v["model"].as_str()).unwrap_or("draft model");
        return Some(match v["num_speculative_tokens"].as_u64() {
            Some(k) => format!("{method}, {k} tokens"),
            None => method.to_string(),
        });
    }
    let k = value("--num-speculative-tokens").or_else(|| value("--speculative-num-steps"));
    let with_k = |what: String| match &k {
        Some(k) => format!("{what}, {k} tokens"),
        None => what,
    };
    value("--speculative-algorithm").or_else(|| value("--speculative-model")).map(with_k)
}

/// Least drafts before the counters say how many tokens a draft proposes.
const MIN_DRAFTS: f64 = 10.0;

/// Speculative decoding as the server's counters show it: `draft_tokens` proposed over `drafts`
/// (vLLM's and llama.cpp's `spec_decode_num_draft_tokens` ÷ `spec_decode_num_drafts`, deltas
/// over the run) is the tokens each draft proposes — vLLM's `num_speculative_tokens`. `None`
/// before [`MIN_DRAFTS`] drafts (a server that does not speculate never counts one).
pub fn speculative_decoding_from_counters(drafts: f64, draft_tokens: f64) -> Option<String> {
    if !(drafts >= MIN_DRAFTS && draft_tokens.is_finite() && draft_tokens > 0.0) {
        return None;
    }
    let k = draft_tokens / drafts;
    let per_draft = if (k - k.round()).abs() < 0.05 { format!("{k:.0}") } else { format!("{k:.2}") };
    Some(format!("{per_draft} tokens per draft (Prometheus: draft tokens ÷ drafts)"))
}

/// The host's CPU model name (`/proc/cpuinfo`), if readable.
pub fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let model = info.lines().find_map(|l| {
        l.strip_prefix("model name").map(|r| r.trim_start_matches([' ', '\t', ':']).trim().to_string())
    })?;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    Some(if cores > 0 { format!("{model} ({cores} cores)") } else { model })
}

/// The host name, if known.
pub fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// Replace home-directory paths (`/home/alice/…`, `/root/…`, `/Users/bob/…`) by `~` (for
/// `--redact-host`).
pub fn redact_home(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    // The earliest home prefix left in the text: "/home/NAME" and "/Users/NAME" become "~",
    // as does "/root".
    let next =
        |rest: &str| ["/home/", "/Users/", "/root"].into_iter().filter_map(|p| rest.find(p).map(|i| (i, p))).min();
    while let Some((at, prefix)) = next(rest) {
        out.push_str(&rest[..at]);
        let after = &rest[at + prefix.len()..];
        let skip = if prefix == "/root" { 0 } else { after.find(['/', ' ', '"', '\'']).unwrap_or(after.len()) };
        out.push('~');
        rest = &after[skip..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        shlex::split(s).expect("balanced quotes")
    }

    #[test]
    fn secrets_are_redacted_in_every_form() {
        let cmd = argv(
            r#"HF_TOKEN=hf_abc CUDA_VISIBLE_DEVICES=0,1 vllm serve Qwen/Q --api-key sk-1 --hf-token=hf_x --port 8000 --speculative-config '{"method":"mtp","num_speculative_tokens":2}'"#,
        );
        let line = redact_argv(&cmd);
        assert_eq!(
            line,
            r#"HF_TOKEN=<redacted> CUDA_VISIBLE_DEVICES=0,1 vllm serve Qwen/Q --api-key <redacted> --hf-token=<redacted> --port 8000 --speculative-config '{"method":"mtp","num_speculative_tokens":2}'"#
        );
        assert!(!line.contains("sk-1") && !line.contains("hf_abc") && !line.contains("hf_x"));
        // Quoting round-trips: splitting the line gives the (redacted) words back.
        assert_eq!(argv(&line).last().unwrap(), r#"{"method":"mtp","num_speculative_tokens":2}"#);
    }

    #[test]
    fn secret_looking_values_are_redacted_under_any_name() {
        let line = redact_argv(&argv(
            "MY_HUB=hf_abcdefghijklmnopqrstu VLLM_USE_V1=1 vllm serve m --auth sk-proj-abcdefghijklmnop12 --x=ghp_abcdefghijklmnop1234 --port 8000",
        ));
        assert_eq!(line, "MY_HUB=<redacted> VLLM_USE_V1=1 vllm serve m --auth <redacted> --x=<redacted> --port 8000");
        assert!(!looks_like_secret("sk-1"), "too short to be a key");
        assert!(!looks_like_secret("Qwen/Qwen3-8B"));
    }

    #[test]
    fn secrets_after_env_and_docker_flags_are_redacted() {
        let line = redact_argv(&argv(
            "docker run -e VLLM_API_KEY=sk-SECRETKEY1234567890abcdef -e HF_TOKEN=tok999 --env MY_PASSWORD=pw123 -e A=1 vllm/vllm-openai --api-key k",
        ));
        assert_eq!(
            line,
            "docker run -e VLLM_API_KEY=<redacted> -e HF_TOKEN=<redacted> --env MY_PASSWORD=<redacted> -e A=1 vllm/vllm-openai --api-key <redacted>"
        );
        let line = redact_argv(&argv("env VLLM_API_KEY=topsecret123 python -m vllm.entrypoints.openai.api_server"));
        assert_eq!(line, "env VLLM_API_KEY=<redacted> python -m vllm.entrypoints.openai.api_server");
        assert_eq!(scrub("x --key-file-contents abcd1234 y", Some("abcd1234")), "x --key-file-contents <redacted> y");
        assert_eq!(scrub("a b", Some("b")), "a b", "too short to scrub");
    }

    #[test]
    fn the_engine_environment_is_kept_and_the_rest_dropped() {
        let environ = b"PATH=/usr/bin\0VLLM_CPU_KVCACHE_SPACE=1\0HF_TOKEN=hf_secretsecretsecret12\0HOME=/root\0CUDA_VISIBLE_DEVICES=0,1\0";
        let env = engine_env(environ);
        assert_eq!(env, ["CUDA_VISIBLE_DEVICES=0,1", "HF_TOKEN=hf_secretsecretsecret12", "VLLM_CPU_KVCACHE_SPACE=1"]);
        let line = redact_argv(&env.into_iter().chain(argv("vllm serve m")).collect::<Vec<_>>());
        assert_eq!(line, "CUDA_VISIBLE_DEVICES=0,1 HF_TOKEN=<redacted> VLLM_CPU_KVCACHE_SPACE=1 vllm serve m");
    }

    #[test]
    fn the_test_process_tree_is_found() {
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let below = descendants(me);
        let _ = child.kill();
        let _ = child.wait();
        assert!(below.contains(&child.id()), "{below:?}");
    }

    #[test]
    fn servers_are_recognised() {
        assert!(is_server(&argv("/env/bin/vllm serve m --port 8001")));
        assert!(is_server(&argv("python -m vllm.entrypoints.openai.api_server --model m")));
        assert!(is_server(&argv("VLLM::EngineCore")));
        assert!(is_server(&argv("python3 -m sglang.launch_server --model-path m")));
        assert!(is_server(&argv("/opt/llama-server -m x.gguf")));
        assert!(is_server(&argv("/usr/local/bin/ollama serve")));
        assert!(is_server(&argv("text-generation-router --port 8080")));
        assert!(is_server(&argv("python3 -m llama_cpp.server --model x.gguf")));
        assert!(!is_server(&argv("vim serve.py")));
        assert!(is_server(&argv("/x/target/debug/speedmatrix simulate --port 9000")));
        assert!(is_server(&argv("/x/target/debug/speedmatrix-under-test simulate --port 9000")));
        assert!(!is_server(&argv("/x/speedmatrix/bin/other simulate")), "a folder of that name is no binary");
        assert!(is_server(&argv("speedmatrix demo -o /tmp/d")), "the demo serves its twin in-process");
        assert!(!is_server(&argv("speedmatrix run --url http://x")));
        assert!(!is_server(&argv("ssh -L 8000:h:8000 bastion")));
    }

    #[test]
    fn this_process_is_seen_with_its_parent() {
        let me = std::process::id();
        assert!(argv_of(me).is_some_and(|a| !a.is_empty()));
        assert!(parent_of(me).is_some());
        assert_eq!(server_root(me), me, "a test binary is no server, so its own root");
    }

    #[test]
    fn speculative_decoding_is_read_from_the_launch_command() {
        let ngram = r#"vllm serve m --speculative-config '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}'"#;
        assert_eq!(speculative_decoding(ngram).as_deref(), Some("ngram, 3 tokens"));
        let eq = r#"vllm serve m --speculative-config='{"method":"mtp","num_speculative_tokens":2}'"#;
        assert_eq!(speculative_decoding(eq).as_deref(), Some("mtp, 2 tokens"));
        let sg = "python -m sglang.launch_server --speculative-algorithm EAGLE --speculative-num-steps 3";
        assert_eq!(speculative_decoding(sg).as_deref(), Some("EAGLE, 3 tokens"));
        assert_eq!(speculative_decoding("vllm serve m --port 8000"), None);
        // Without a launch command: the server's counters.
        let k2 = speculative_decoding_from_counters(500.0, 1000.0);
        assert_eq!(k2.as_deref(), Some("2 tokens per draft (Prometheus: draft tokens ÷ drafts)"));
        assert_eq!(speculative_decoding_from_counters(40.0, 110.0).as_deref().map(|s| &s[..4]), Some("2.75"));
        assert_eq!(speculative_decoding_from_counters(3.0, 6.0), None, "too few drafts");
        assert_eq!(speculative_decoding_from_counters(0.0, 0.0), None, "a server that does not speculate");
        assert_eq!(speculative_decoding_from_counters(f64::NAN, 6.0), None);
    }

    #[test]
    fn home_paths_are_hidden() {
        assert_eq!(
            redact_home(r#""/home/alice/env/bin/vllm" serve /root/models/q"#),
            r#""~/env/bin/vllm" serve ~/models/q"#
        );
        assert_eq!(redact_home("$HOME/x"), "$HOME/x");
    }
}
