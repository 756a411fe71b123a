//! The other tools' result files by format: which format a JSON file is (by the fields each
//! always has), the file it is in words, its `--from` value, and the `import` command that
//! converts it. [`crate::files`] uses it to name that command when such a file is given where
//! a results file belongs.

use crate::cli::ImportFrom;
use serde_json::Value;

/// The file a format reads, in words.
pub(crate) fn what(from: ImportFrom) -> &'static str {
    match from {
        ImportFrom::LlmInferenceBench => "llm-inference-bench's benchmark_results.json",
        ImportFrom::VllmBench => "a `vllm bench serve --save-result` file",
    }
}

/// The format of another tool's result file, by the fields each always has; `None` for
/// anything else. Used to point a file given where a results file belongs to `import`.
pub fn detect(json: &Value) -> Option<ImportFrom> {
    let has = |p: &str| json.pointer(p).is_some();
    if has("/metadata/context_lengths") && has("/results") {
        Some(ImportFrom::LlmInferenceBench)
    } else if has("/completed") && (has("/request_throughput") || has("/backend")) {
        Some(ImportFrom::VllmBench)
    } else {
        None
    }
}

/// `speedmatrix import FILE --from F -o RUN.json`: the command that converts `file`, given
/// where a results file belongs.
pub fn import_hint(name: &str, from: ImportFrom) -> String {
    format!("{name} is {}, not a speedmatrix results file; convert it first: speedmatrix import {name} --from {} -o RUN.json", what(from), flag(from))
}

/// The `--from` value of a format.
pub(crate) fn flag(from: ImportFrom) -> &'static str {
    match from {
        ImportFrom::LlmInferenceBench => "llm-inference-bench",
        ImportFrom::VllmBench => "vllm-bench",
    }
}
