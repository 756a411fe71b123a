//! `speedmatrix report RUN.json [B.json] -o report.html`: one self-contained HTML file — the
//! embedded viewer's page with its CSS, its JavaScript and its WebAssembly (gzip, base64; the
//! browser's own `DecompressionStream` unpacks it) inlined, and
//! the run(s) inlined as JSON — that opens from `file://` with no server and no network. With two
//! runs it opens as the diff view (A = the first, B = the second).
//!
//! [`one_file_report`] is pure (viewer files + runs → the HTML text); [`run`] is the edge. The
//! viewer finds the runs in `<script type="application/json" id="speedmatrix-run-a">` (and `-b`)
//! elements, each with its file name in `data-name`.

use crate::cli::ReportArgs;
use crate::command::{CommandError, Failure};
use crate::files::FileError;
use crate::site::publish::viewer_files;
use base64::Engine as _;
use std::path::{Path, PathBuf};

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// One run, or two (a diff), are what a report holds.
    #[error("report takes one results file, or two to open as a diff (A B); {given} were given")]
    RunCount {
        /// How many were given.
        given: usize,
    },
    /// `-o` names one of the input files.
    #[error("-o {}: that is one of the results files; give the report another name, e.g. -o report.html", .0.display())]
    OverwritesInput(PathBuf),
    /// This binary was built without a `dist/`, or one this code cannot inline.
    #[error("this speedmatrix carries no viewer it can inline ({0}); rebuild it from a full checkout")]
    Viewer(String),
    /// A run cannot be read, or the report cannot be written.
    #[error(transparent)]
    File(#[from] FileError),
}

impl CommandError for ReportError {
    fn failure(&self) -> Failure {
        match self {
            ReportError::File(e) => e.failure(),
            ReportError::Viewer(_) => Failure::Working,
            _ => Failure::BadInput,
        }
    }
}

/// Write the report and print where it is.
///
/// # Errors
/// [`ReportError`] for a wrong number of files, an `-o` that is an input, an unreadable or
/// invalid results file (naming it), or a report that cannot be written.
pub fn run(args: &ReportArgs) -> Result<(), ReportError> {
    if !(1..=2).contains(&args.files.len()) {
        return Err(ReportError::RunCount { given: args.files.len() });
    }
    if let Some(input) = args.files.iter().find(|f| crate::measuring::spec::same_file(f, &args.out)) {
        return Err(ReportError::OverwritesInput(input.clone()));
    }
    let mut runs = Vec::new();
    for path in &args.files {
        let (_, results) = crate::files::read_results_bytes(path)?;
        // The migrated run, compact: the page reads the current schema either way.
        let json =
            serde_json::to_string(&results).map_err(|source| FileError::Encode { path: path.to_path_buf(), source })?;
        runs.push(EmbeddedRun { name: file_name(path), json });
    }
    let html = one_file_report(viewer_files(), &runs).map_err(ReportError::Viewer)?;
    crate::files::write_bytes_atomic(&args.out, html.as_bytes())?;
    let what = if runs.len() == 2 { "a diff of two runs" } else { "one run" };
    println!(
        "report written: {} ({what}, {} KB; opens from file:// with no server)",
        args.out.display(),
        html.len() / 1000
    );
    Ok(())
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "standard input".into())
}

/// A run to inline: its file name (shown by the page) and its JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedRun {
    /// The file name the page shows.
    pub name: String,
    /// The results file as JSON.
    pub json: String,
}

/// The report page: the viewer's `index.html` with every stylesheet and the module script
/// inlined, the wasm as base64 (decoded and instantiated by the inlined script), and the runs.
///
/// # Errors
/// A one-line reason when the viewer files are not the shape scripts/build-viewer.sh writes (no `index.html`, a
/// stylesheet, script or wasm it names is absent).
pub fn one_file_report(files: &[(&str, &[u8])], runs: &[EmbeddedRun]) -> Result<String, String> {
    let file = |name: &str| files.iter().find(|(p, _)| *p == name).map(|(_, b)| *b);
    let text = |name: &str| -> Result<String, String> {
        let bytes = file(name).ok_or_else(|| format!("dist/ has no {name}"))?;
        String::from_utf8(bytes.to_vec()).map_err(|_| format!("dist/{name} is not UTF-8"))
    };
    let index = text("index.html")?;
    let head_end = index.find("</head>").ok_or("dist/index.html has no </head>")?;
    let body = index[head_end..].to_string();
    let mut out = String::with_capacity(2_000_000);
    for line in index[..head_end].split_inclusive('\n') {
        // build-viewer.sh writes one tag per line for styles; the module script spans lines up to </script>.
        if let Some(href) = attr(line, "rel=\"stylesheet\"", "href") {
            let css = text(href.trim_start_matches("./"))?;
            out.push_str(&format!("<style>\n{}\n</style>\n", css.replace("</style", "<\\/style")));
        } else if line.contains("<script type=\"module\">") {
            break;
        } else {
            out.push_str(line);
        }
    }
    let js_name = files
        .iter()
        .map(|(p, _)| *p)
        .find(|p| p.ends_with(".js") && !p.contains('/'))
        .ok_or("dist/ has no JavaScript module")?;
    let wasm_name = files
        .iter()
        .map(|(p, _)| *p)
        .find(|p| p.ends_with("_bg.wasm") && !p.contains('/'))
        .ok_or("dist/ has no wasm")?;
    let js = text(js_name)?;
    if js.contains("</script") || !js.contains("__wbg_init as default") {
        return Err(format!("dist/{js_name} is not a wasm-bindgen module this code can inline"));
    }
    let wasm = base64::engine::general_purpose::STANDARD.encode(gzip(file(wasm_name).unwrap_or_default())?);
    for (run, id) in runs.iter().zip(["speedmatrix-run-a", "speedmatrix-run-b"]) {
        out.push_str(&format!(
            "<script type=\"application/json\" id=\"{id}\" data-name=\"{}\">{}</script>\n",
            html_attr(&run.name),
            script_safe(&run.json)
        ));
    }
    out.push_str(&format!("<script type=\"application/octet-stream\" id=\"speedmatrix-wasm\">{wasm}</script>\n"));
    out.push_str("<script type=\"module\">\n");
    out.push_str(&js);
    out.push_str(
        "\nconst speedmatrixGz = Uint8Array.from(atob(document.getElementById('speedmatrix-wasm').textContent), (c) => c.charCodeAt(0));\n\
         const speedmatrixWasm = await new Response(new Blob([speedmatrixGz]).stream().pipeThrough(new DecompressionStream('gzip'))).arrayBuffer();\n\
         await __wbg_init({ module_or_path: speedmatrixWasm });\n</script>\n",
    );
    // The body, without the preload links of the files now inlined.
    out.push_str(&body);
    Ok(out)
}

/// `bytes` gzip-compressed (the wasm shrinks to about 40 %, so the seed's report stays near
/// 0.7 MB instead of 1.6 MB with plain base64).
fn gzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Write as _;
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(bytes).and_then(|()| z.finish()).map_err(|e| format!("cannot compress the wasm: {e}"))
}

/// The value of `name="…"` in an HTML tag line that contains `marker`.
fn attr<'a>(line: &'a str, marker: &str, name: &str) -> Option<&'a str> {
    if !line.contains(marker) {
        return None;
    }
    let start = line.find(&format!("{name}=\""))? + name.len() + 2;
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

/// JSON made safe inside a `<script>` element: `<` written as `\u003c` (only inside strings in
/// JSON, where it means the same), so no `</script>` in a label or a reason can end it.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
}

/// Text made safe inside a double-quoted HTML attribute.
fn html_attr(s: &str) -> String {
    s.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEX: &str = "<!DOCTYPE html>\n<html>\n<head>\n<title>t</title>\n\
        <link rel=\"stylesheet\" href=\"./style-1.css\" integrity=\"x\"/>\n\
        <script type=\"module\">\nimport init from './v-1.js';\nawait init({ module_or_path: './v-1_bg.wasm' });\n</script>\n\
        <link rel=\"modulepreload\" href=\"./v-1.js\"></head>\n<body><noscript>n</noscript></body>\n</html>\n";
    const JS: &str = "async function __wbg_init(m) {}\nexport { initSync, __wbg_init as default };\n";

    fn files() -> Vec<(&'static str, &'static [u8])> {
        vec![
            ("index.html", INDEX.as_bytes()),
            ("style-1.css", b"body { color: red }"),
            ("v-1.js", JS.as_bytes()),
            ("v-1_bg.wasm", b"\0asm"),
        ]
    }

    #[test]
    fn the_page_inlines_styles_script_wasm_and_runs_and_names_no_file() {
        let run = EmbeddedRun { name: "a \"b\".json".into(), json: r#"{"label":"</script><b>"}"#.into() };
        let html = one_file_report(&files(), &[run]).unwrap();
        assert!(html.contains("<style>\nbody { color: red }\n</style>"), "{html}");
        assert!(html.contains(JS) && html.contains("await __wbg_init({ module_or_path: speedmatrixWasm })"));
        let b64 = html.split("id=\"speedmatrix-wasm\">").nth(1).and_then(|t| t.split("</script>").next()).unwrap();
        let gz = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
        let mut wasm = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz.as_slice()), &mut wasm).unwrap();
        assert_eq!(wasm, b"\0asm", "the wasm, gzip-compressed, as base64");
        assert!(html.contains(
            r#"id="speedmatrix-run-a" data-name="a &quot;b&quot;.json">{"label":"\u003c/script>\u003cb>"}</script>"#
        ));
        for gone in ["href=\"./", "import init", "modulepreload", "speedmatrix-run-b"] {
            assert!(!html.contains(gone), "{gone} left in {html}");
        }
        assert_eq!(html.matches("</script>").count(), 3, "run, wasm, module: a label cannot end a script early");
    }

    #[test]
    fn a_viewer_of_another_shape_is_refused_with_why() {
        let mut f = files();
        f.retain(|(p, _)| *p != "style-1.css");
        assert_eq!(one_file_report(&f, &[]).unwrap_err(), "dist/ has no style-1.css");
        let mut f = files();
        f[2].1 = b"export default function init() {}";
        assert!(one_file_report(&f, &[]).unwrap_err().contains("not a wasm-bindgen module"));
    }
}
