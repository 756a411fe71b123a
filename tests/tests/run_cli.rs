//! `speedmatrix run` input errors: a run that cannot start exits 2 with one actionable line and
//! writes no results file. (Measuring is tested against the twin and a real vLLM.)

use std::process::Command;

fn run(args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let o = Command::new(support::bin())
        .arg("run")
        .args(args)
        .arg("-o")
        .arg(&out)
        .env_remove("SPEEDMATRIX_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    assert!(!out.exists(), "no results file when the run cannot start");
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn unreachable_server_names_the_flag() {
    // Port 9 (discard) on loopback: nothing listens there on these machines.
    let (code, err) = run(&["--url", "http://127.0.0.1:9", "--quiet"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("error: cannot reach http://127.0.0.1:9/v1/models"), "{err}");
    assert!(err.contains("is --url right?"), "{err}");
    // The URL once: reqwest's "error sending request for url (URL)" is not repeated after it.
    assert_eq!(err.matches("127.0.0.1:9").count(), 1, "{err}");
}

#[test]
fn https_to_a_plain_http_server_names_the_http_url() {
    // Newcomer trial: `--url https://` to vLLM (plain HTTP unless started with --ssl-certfile)
    // gave rustls' "InvalidContentType" and "is the server running?".
    let (_twin, url) = support::twin::twin(&["--profile", "tiny"]);
    let https = url.replacen("http://", "https://", 1);
    let (code, err) = run(&["--url", &https, "--quiet"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&format!("the server answers plain HTTP, not TLS: use --url {url}")), "{err}");
}

#[test]
fn bad_flag_values_are_named() {
    let (code, err) = run(&["--duration", "soon"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--duration \"soon\" is not a duration; write e.g. 30s"), "{err}");
    let (code, err) = run(&["--contexts", "8k,huge"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--contexts: 'huge' is not a context size"), "{err}");
    let (code, err) = run(&["--stall-timeout", "0s"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--stall-timeout must be longer than 0"), "{err}");
}

#[test]
fn a_bare_small_context_is_taken_as_tokens_with_a_note() {
    // Newcomer trial: `--contexts 8` ran 8-token prompts without a word.
    let (code, err) =
        run(&["--url", "http://127.0.0.1:9", "--contexts", "8,16k", "--prefill-contexts", "64", "--quiet"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("note: --contexts 8 is 8 tokens; for 8,192 tokens write 8k\n"), "{err}");
    assert!(err.contains("note: --prefill-contexts 64 is 64 tokens; for 65,536 tokens write 64k\n"), "{err}");
    assert!(!err.contains("16k is"), "a suffixed size gets no note: {err}");
}

#[test]
fn values_that_cannot_measure_anything_are_refused() {
    let (code, err) = run(&["--max-tokens", "0"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--max-tokens") && err.contains("0"), "{err}");
    let (code, err) = run(&["--temperature", "nan"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--temperature NaN: give a finite number"), "{err}");
    // A negative value reaches the range check, not clap's "unexpected argument '-1'".
    let (code, err) = run(&["--temperature", "-1"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--temperature -1: give a finite number ≥ 0"), "{err}");
    // "-5s" too: taken as the value (clap would say "unexpected argument '-5'", naming no flag).
    for d in ["1ms", "100y", "inf", "-5s"] {
        let (code, err) = run(&["--duration", d]);
        assert_eq!(code, Some(2), "{d}: {err}");
        assert!(err.contains("--duration"), "{d}: {err}");
    }
}

#[test]
fn credentials_in_the_url_are_refused_without_echoing_them() {
    let (code, err) = run(&["--url", "http://alice:hunter2secret@127.0.0.1:9", "--quiet"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("credentials in the URL") && err.contains("--api-key"), "{err}");
    assert!(!err.contains("hunter2secret"), "{err}");
    assert!(err.contains("http://<redacted>@127.0.0.1:9"), "the marker reads as written: {err}");
    // A URL without its scheme gets the fix, not "is the server running?".
    let (code, err) = run(&["--url", "127.0.0.1:9", "--quiet"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--url 127.0.0.1:9: give the scheme too, e.g. --url http://127.0.0.1:9"), "{err}");
}

#[test]
fn a_scheme_other_than_http_is_named_not_doubled() {
    let (code, err) = run(&["--url", "ftp://x/", "--quiet"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--url ftp://x/: only http:// and https:// are supported, not ftp://"), "{err}");
    assert!(!err.contains("http://ftp://"), "no doubled scheme: {err}");
}

/// `run -o out` against port 9, where nothing answers: its exit code and stderr.
fn run_to_dead_port(out: &std::path::Path) -> (Option<i32>, String) {
    let o = Command::new(support::bin())
        .args(["run", "--url", "http://127.0.0.1:9", "--quiet", "-o"])
        .arg(out)
        .output()
        .unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn an_existing_results_file_is_not_overwritten_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    std::fs::write(&out, "precious").unwrap();
    let (code, err) = run_to_dead_port(&out);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("the file exists; continue it with --resume") && err.contains("--force"), "{err}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "precious");
}

#[test]
fn flags_are_checked_before_the_server_is_asked() {
    // Port 9: nothing answers there, so an error naming the flag was found before any request.
    for extra in [&[][..], &["--dry-run"][..]] {
        let (code, err) =
            run(&[&["--url", "http://127.0.0.1:9", "--concurrency", "1,0", "--quiet"][..], extra].concat());
        assert_eq!(code, Some(2), "{extra:?}: {err}");
        assert_eq!(err.trim_end(), "error: --concurrency values must be at least 1", "{extra:?}");
    }
}

#[test]
fn a_folder_as_o_is_refused_before_the_server_is_asked() {
    // Newcomer trial: it read as "the file exists … overwrite it with --force", and with
    // --force the run probed the server before "Is a directory".
    let dir = tempfile::tempdir().unwrap();
    let (code, err) = run_to_dead_port(dir.path());
    assert_eq!(code, Some(2), "{err}");
    let want = format!("error: -o {}: is a folder; give the results file's name, e.g. -o ", dir.path().display());
    assert!(err.starts_with(&want), "{err}");
}

#[test]
fn an_output_folder_that_cannot_be_written_is_refused_before_the_server_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("no-such-folder").join("r.json");
    let (code, err) = run_to_dead_port(&out);
    // Exit 1, as when the first save failed: a file that cannot be written (docs/CLI.md, "Exit codes").
    assert_eq!(code, Some(1), "{err}");
    assert!(err.starts_with(&format!("error: cannot write {}: ", out.display())), "{err}");
    assert!(!err.contains("cannot reach"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing is left behind");
}

/// `speedmatrix run ARGS` with the open-files limits set to `soft`/`hard` first (`ulimit -n`).
fn run_with_file_limit(soft: u64, hard: u64, args: &[&str]) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(support::bin());
    cmd.arg("run").args(args);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    cmd.output().unwrap()
}

#[test]
fn a_concurrency_beyond_the_open_files_limit_is_refused_before_the_server_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let args = ["--url", "http://127.0.0.1:9", "--concurrency", "1,300", "--quiet", "-o", out.to_str().unwrap()];
    let o = run_with_file_limit(256, 256, &args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: --concurrency 300: the run needs about 364 open files (one per stream, plus 64) and this process may open 256"),
        "{err}"
    );
    assert!(err.contains("ulimit -n 364") && !err.contains("cannot reach"), "{err}");
    assert!(!out.exists());
}

#[test]
fn the_collector_raises_its_own_soft_open_files_limit() {
    // A soft limit of 64 cannot hold 100 streams; the hard limit can, and the run raises to it.
    let (_twin, url) = support::twin::twin(&["--profile", "tiny"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let args = ["--url", &url, "--contexts", "128", "--prefill-contexts", "none", "--concurrency", "100"];
    let rest = ["--duration", "1s", "--max-tokens", "32", "--quiet", "-o", out.to_str().unwrap()];
    let o = run_with_file_limit(64, 4096, &[&args[..], &rest[..]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let cell = &r["decode"][0];
    assert_eq!(cell["concurrency"], 100);
    assert_eq!(cell["status"], "valid", "{cell:#}");
    let requests = cell["requests"].as_array().unwrap();
    assert!(requests.len() >= 100, "every stream opened: {}", requests.len());
    let failed: Vec<&serde_json::Value> = requests.iter().filter(|q| !q["error"].is_null()).collect();
    assert!(failed.is_empty(), "no stream failed for want of a file: {failed:?}");
}
