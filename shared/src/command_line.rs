//! A server's launch command read flag by flag: split like a POSIX shell (the `shlex` crate),
//! then positional words and `--flag value` / `--flag=value` pairs in order. The collector reads
//! the port and speculative-decoding settings from it; `diff` compares two of them flag by flag.

/// The value recorded for a flag given without one (`--enforce-eager`).
pub const FLAG_SET: &str = "(set)";

/// A command line as program + positional arguments and flags with their values, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandLine {
    /// The program and every word that is not a flag or a flag's value.
    pub positional: Vec<String>,
    /// `(--flag, value)` in order; [`FLAG_SET`] for a flag without value. A flag given twice
    /// appears twice.
    pub flags: Vec<(String, String)>,
}

/// Whether a word is a flag (`-m`, `--port`, `--port=8000`) rather than a value; negative
/// numbers (`-1`) are values.
fn is_flag(word: &str) -> bool {
    word.starts_with('-') && word.len() > 1 && word.parse::<f64>().is_err()
}

impl CommandLine {
    /// Split `line` like a shell would (quotes, backslashes) and read its flags; `None` when the
    /// quotes do not balance.
    pub fn parse(line: &str) -> Option<CommandLine> {
        shlex::split(line).map(|words| CommandLine::from_words(&words))
    }

    /// Read the flags of an argument vector (already split, e.g. `/proc/PID/cmdline`). A flag
    /// takes the next word as its value unless that word is itself a flag.
    pub fn from_words(words: &[String]) -> CommandLine {
        let mut out = CommandLine::default();
        let mut i = 0;
        while i < words.len() {
            let w = &words[i];
            if !is_flag(w) {
                out.positional.push(w.clone());
            } else if let Some((flag, value)) = w.split_once('=') {
                out.flags.push((flag.to_string(), value.to_string()));
            } else {
                match words.get(i + 1).filter(|next| !is_flag(next)) {
                    Some(value) => {
                        out.flags.push((w.clone(), value.clone()));
                        i += 1;
                    }
                    None => out.flags.push((w.clone(), FLAG_SET.into())),
                }
            }
            i += 1;
        }
        out
    }

    /// The value of the first `flag` (`--port`), if the command gives it.
    pub fn value(&self, flag: &str) -> Option<&str> {
        self.flags.iter().find(|(f, _)| f == flag).map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_values_and_positionals_in_order() {
        let c = CommandLine::parse(
            r#"vllm serve Qwen/Q --port=8001 --tp 2 --enforce-eager --speculative-config '{"method": "mtp"}' -m x --seed -1"#,
        )
        .unwrap();
        assert_eq!(c.positional, ["vllm", "serve", "Qwen/Q"]);
        assert_eq!(c.value("--port"), Some("8001"));
        assert_eq!(c.value("--tp"), Some("2"));
        assert_eq!(c.value("--enforce-eager"), Some(FLAG_SET));
        assert_eq!(c.value("--speculative-config"), Some(r#"{"method": "mtp"}"#));
        assert_eq!(c.value("-m"), Some("x"));
        assert_eq!(c.value("--seed"), Some("-1"), "a negative number is a value");
        assert_eq!(c.value("--host"), None);
    }

    #[test]
    fn unbalanced_quotes_are_no_command_line() {
        assert_eq!(CommandLine::parse("vllm serve 'm"), None);
        assert_eq!(CommandLine::parse(""), Some(CommandLine::default()));
    }
}
