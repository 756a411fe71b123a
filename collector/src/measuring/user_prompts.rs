//! `run --prompts FILE.jsonl`: a user's own prompts (docs/METHODOLOGY.md, "Prompts"). One JSON
//! object per line with the text in `"text"` (or `"prompt"`); blank lines are skipped. The
//! prompts' words, in file order and repeated as often as a context needs, replace the
//! built-in prose (`crate::measuring::prompt`), and the builder cuts them to each context's
//! length with the server's tokenizer as it does the prose. The results file names the file
//! and its SHA-256 as the prompt corpus. A file that cannot be used is refused before the run
//! starts (exit 2), naming the flag, the file and the line.

use crate::measuring::error::RunError;
use speedmatrix_schema::{PromptCorpus, PromptOrigin};
use std::path::Path;

/// The most bytes `--prompts` reads (a corpus of prompts, not a data set).
pub const MAX_BYTES: u64 = 256 * 1024 * 1024;

/// A user's prompts, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct UserPrompts {
    /// The words of every prompt, in file order (each prompt's words after the previous one's).
    pub words: Vec<String>,
    /// Where each prompt's words start in `words`.
    pub starts: Vec<usize>,
    /// The corpus record for the results file: the file's name and SHA-256.
    pub corpus: PromptCorpus,
}

impl UserPrompts {
    /// At least `n` words, starting at the prompt `pick` chooses (modulo the number of
    /// prompts) and going on through the file, from its start again when it ends.
    pub fn words(&self, pick: u64, n: usize) -> Vec<String> {
        let start = self.starts[(pick % self.starts.len() as u64) as usize];
        self.words.iter().cycle().skip(start).take(n.max(1)).cloned().collect()
    }
}

/// The text of one line: `Ok(None)` for a blank line, `Err(why)` for a line that holds no
/// prompt.
fn line_text(line: &str) -> Result<Option<String>, String> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
    let obj = v.as_object().ok_or("not a JSON object; write {\"text\": \"…\"}")?;
    let field = ["text", "prompt"].into_iter().find(|k| obj.contains_key(*k)).ok_or_else(|| {
        let keys: Vec<&str> = obj.keys().map(String::as_str).take(5).collect();
        format!(
            "no \"text\" (or \"prompt\") field; its fields: {}",
            if keys.is_empty() { "none".into() } else { keys.join(", ") }
        )
    })?;
    let text = obj[field].as_str().ok_or_else(|| format!("\"{field}\" is not a string"))?;
    if text.split_whitespace().next().is_none() {
        return Err(format!("\"{field}\" is empty"));
    }
    Ok(Some(text.to_string()))
}

/// The prompts of `bytes` (the file's content), named `name`.
///
/// # Errors
/// `why`, with the line number where it is one line's.
pub fn parse(bytes: &[u8], name: &str) -> Result<UserPrompts, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("is not UTF-8 text ({e})"))?;
    let (mut words, mut starts) = (Vec::new(), Vec::new());
    for (i, line) in text.lines().enumerate() {
        if let Some(t) = line_text(line).map_err(|why| format!("line {}: {why}", i + 1))? {
            starts.push(words.len());
            words.extend(t.split_whitespace().map(str::to_string));
        }
    }
    if starts.is_empty() {
        return Err(
            "holds no prompt: give one JSON object per line, e.g. {\"text\": \"Summarise this report: …\"}".into()
        );
    }
    use sha2::Digest;
    let sha256 = sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
    let corpus = PromptCorpus { name: name.to_string(), sha256: Some(sha256), origin: Some(PromptOrigin::UserFile) };
    Ok(UserPrompts { words, starts, corpus })
}

/// `--prompts FILE.jsonl` read and checked.
///
/// # Errors
/// [`RunError::UserPrompts`] naming the file (and the line) and what is wrong.
pub fn load(path: &Path) -> Result<UserPrompts, RunError> {
    let bad = |why: String| RunError::UserPrompts { path: path.to_path_buf(), why };
    let size = std::fs::metadata(path).map_err(|e| bad(format!("cannot be read: {e}")))?.len();
    if size > MAX_BYTES {
        return Err(bad(format!("is {size} bytes, more than the {MAX_BYTES} --prompts reads")));
    }
    let bytes = std::fs::read(path).map_err(|e| bad(format!("cannot be read: {e}")))?;
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    parse(&bytes, &name).map_err(bad)
}

/// A resumed run keeps its prompts: the resumed file's corpus (`file`; `None`: no `--resume`,
/// nothing to keep) and the one this command line gives (`given`, from `--prompts`) must be the
/// same text, or both the built-in prose.
///
/// # Errors
/// [`RunError::ResumePrompts`] saying which was used and what to give.
pub fn same_on_resume(file: Option<&PromptCorpus>, given: Option<&PromptCorpus>) -> Result<(), RunError> {
    let Some(file) = file else { return Ok(()) };
    let user = |c: Option<&PromptCorpus>| c.filter(|c| c.origin == Some(PromptOrigin::UserFile)).cloned();
    match (user(Some(file)), user(given)) {
        (None, None) => Ok(()),
        (Some(f), Some(g)) if f.sha256 == g.sha256 => Ok(()),
        (Some(f), _) => Err(RunError::ResumePrompts(format!(
            "the run's prompts came from --prompts {} (sha256 {}); give that file again with --prompts",
            f.name,
            f.sha256.as_deref().unwrap_or("unknown")
        ))),
        (None, Some(g)) => Err(RunError::ResumePrompts(format!(
            "the run used the built-in prompts, not --prompts {}; leave --prompts out to continue it",
            g.name
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_text_or_prompt_fields_and_skips_blank_lines() {
        let p =
            parse(b"{\"text\": \"one two three\"}\n\n{\"prompt\": \"four five\", \"id\": 7}\n", "mine.jsonl").unwrap();
        assert_eq!(p.words, ["one", "two", "three", "four", "five"]);
        assert_eq!(p.starts, [0, 3]);
        assert_eq!(p.corpus.name, "mine.jsonl");
        assert_eq!(p.corpus.origin, Some(PromptOrigin::UserFile));
        assert_eq!(p.corpus.sha256.as_deref().map(str::len), Some(64));
        // Cut or repeated: from the prompt picked, through the file, around again.
        assert_eq!(p.words(1, 4), ["four", "five", "one", "two"]);
        assert_eq!(p.words(2, 2), ["one", "two"]);
    }

    #[test]
    fn a_resumed_run_keeps_its_prompts() {
        let mine = parse(b"{\"text\": \"a b c\"}\n", "mine.jsonl").unwrap().corpus;
        let other = parse(b"{\"text\": \"d e f\"}\n", "mine.jsonl").unwrap().corpus;
        let prose = crate::measuring::prompt::corpus();
        assert!(same_on_resume(Some(&prose), None).is_ok());
        assert!(same_on_resume(None, Some(&mine)).is_ok(), "no --resume: nothing to keep");
        assert!(same_on_resume(Some(&mine), Some(&mine)).is_ok());
        let e = same_on_resume(Some(&mine), None).unwrap_err().to_string();
        assert!(e.contains("--prompts mine.jsonl") && e.contains("give that file again"), "{e}");
        assert!(same_on_resume(Some(&mine), Some(&other)).is_err(), "same name, other text");
        let e = same_on_resume(Some(&prose), Some(&mine)).unwrap_err().to_string();
        assert!(e.contains("built-in prompts"), "{e}");
    }

    #[test]
    fn a_bad_line_is_named_with_what_is_wrong() {
        let cases: [(&[u8], &str); 6] = [
            (b"{\"text\": \"ok\"}\nnot json\n", "line 2: not JSON"),
            (b"[1, 2]\n", "line 1: not a JSON object"),
            (b"{\"body\": \"x\", \"id\": 1}\n", "line 1: no \"text\" (or \"prompt\") field; its fields: body, id"),
            (b"{\"text\": 5}\n", "line 1: \"text\" is not a string"),
            (b"{\"text\": \"  \"}\n", "line 1: \"text\" is empty"),
            (b"\n\n", "holds no prompt"),
        ];
        for (bytes, want) in cases {
            let e = parse(bytes, "f").unwrap_err();
            assert!(e.starts_with(want), "{e} (want {want})");
        }
        assert!(parse(b"\xff\xfe", "f").unwrap_err().contains("not UTF-8"));
    }
}
