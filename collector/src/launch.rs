//! Run metadata from the host: the server's launch command (read from the local process when
//! the server runs on this machine, or given with `--launch-command`) with every secret
//! replaced by `<redacted>`, and the host's CPU, OS and name.

/// What replaces a secret.
pub const REDACTED: &str = "<redacted>";

/// Flags whose value is a secret (`--api-key KEY` and `--api-key=KEY` alike).
const SECRET_FLAGS: [&str; 8] = [
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
    let mut in_env_prefix = true;
    for arg in argv {
        if hide_next {
            out.push(REDACTED.to_string());
            hide_next = false;
            continue;
        }
        if in_env_prefix {
            if let Some((name, _)) = arg.split_once('=').filter(|(n, _)| !n.starts_with('-') && !n.contains('/')) {
                if is_secret_env(name) {
                    out.push(format!("{name}={REDACTED}"));
                    continue;
                }
                out.push(shell_quote(arg));
                continue;
            }
            in_env_prefix = false;
        }
        if let Some((flag, _)) = arg.split_once('=').filter(|(f, _)| f.starts_with("--")) {
            if is_secret_flag(flag) {
                out.push(format!("{flag}={REDACTED}"));
                continue;
            }
        } else if arg.starts_with("--") && is_secret_flag(arg) {
            hide_next = true;
        }
        out.push(shell_quote(arg));
    }
    out.join(" ")
}

/// Split a command line as a POSIX shell would (quotes and backslashes), for `--launch-command`.
/// Unbalanced quotes keep the rest as one word.
pub fn split_words(line: &str) -> Vec<String> {
    let (mut words, mut cur, mut quote, mut any) = (Vec::new(), String::new(), None::<char>, false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, c) if c.is_whitespace() => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None | Some('"'), '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                    any = true;
                }
            }
            (_, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(cur);
    }
    words
}

/// Whether an argument vector launches an LLM server we know (vLLM, SGLang, llama.cpp).
fn is_server(argv: &[String]) -> bool {
    let joined = argv.join(" ");
    (joined.contains("vllm") && (argv.iter().any(|a| a == "serve") || joined.contains("api_server")))
        || joined.contains("sglang.launch_server")
        || argv.first().is_some_and(|a| a.ends_with("llama-server"))
}

/// The port an argument vector listens on (`--port N` / `--port=N`), else the engine default.
fn port_of(argv: &[String]) -> u16 {
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        if a == "--port" {
            if let Some(p) = it.next().and_then(|p| p.parse().ok()) {
                return p;
            }
        } else if let Some(p) = a.strip_prefix("--port=").and_then(|p| p.parse().ok()) {
            return p;
        }
    }
    if argv.iter().any(|a| a.ends_with("llama-server")) {
        8080
    } else if argv.join(" ").contains("sglang") {
        30000
    } else {
        8000
    }
}

/// The launch command of the server process on this host that listens on `port`, read from
/// `/proc/*/cmdline` (Linux), redacted. `None` when no such process is visible (a remote server,
/// another OS, another user's process).
pub fn local_server_command(port: u16) -> Option<String> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let mut found: Vec<(u32, Vec<String>)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let raw = std::fs::read(e.path().join("cmdline")).ok()?;
            let argv: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            (is_server(&argv) && port_of(&argv) == port).then_some((pid, argv))
        })
        .collect();
    // The lowest pid is the parent when a server forks workers with the same command line.
    found.sort_by_key(|(pid, _)| *pid);
    found.first().map(|(_, argv)| redact_argv(argv))
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
        split_words(s)
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
        assert_eq!(split_words(&line).last().unwrap(), r#"{"method":"mtp","num_speculative_tokens":2}"#);
    }

    #[test]
    fn servers_and_ports_are_recognised() {
        assert!(is_server(&argv("/env/bin/vllm serve m --port 8001")));
        assert!(is_server(&argv("python -m vllm.entrypoints.openai.api_server --model m")));
        assert!(is_server(&argv("python3 -m sglang.launch_server --model-path m")));
        assert!(is_server(&argv("/opt/llama-server -m x.gguf")));
        assert!(!is_server(&argv("vim serve.py")));
        assert_eq!(port_of(&argv("vllm serve m --port 8001")), 8001);
        assert_eq!(port_of(&argv("vllm serve m --port=9000")), 9000);
        assert_eq!(port_of(&argv("vllm serve m")), 8000);
        assert_eq!(port_of(&argv("/opt/llama-server -m x")), 8080);
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
