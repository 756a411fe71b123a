//! The Prometheus text exposition format (0.0.4) and OpenMetrics 1.0 text, read line by line
//! into samples (pure).
//!
//! Servers' `/metrics` come from many exporters, and the formats allow much: samples without
//! any `# TYPE` or `# HELP` line (untyped), several untyped families in a row, samples of one
//! family with different label sets, a timestamp after the value (ms in 0.0.4, s in
//! OpenMetrics), exemplars (`# {trace_id="…"} 1.0`), a counter family `x` whose sample is
//! `x_total`, and OpenMetrics' final `# EOF`. The crates we tried reject part of that
//! (openmetrics-parser: untyped runs, mixed label sets, `x_total` under `# TYPE x counter` in
//! 0.0.4 mode; prometheus-parse: names with `:` such as `vllm:num_requests_running`), so this
//! module reads what the specifications allow, and only what the collector needs: name,
//! labels and value of every sample. Types are not needed (each figure is known by its name),
//! so comments and metadata lines are skipped.

/// One sample line: `name{labels} value [timestamp] [# exemplar]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    /// The metric name as written, e.g. `vllm:generation_tokens_total`.
    pub name: &'a str,
    /// Label names and unescaped values, in order.
    pub labels: Labels<'a>,
    /// The value (`NaN`, `+Inf`, `-Inf` allowed).
    pub value: f64,
}

impl Sample<'_> {
    /// The value of label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
    }
}

/// Why a text is not an exposition: the line and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}: {excerpt}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
    /// The start of the line (≤ 80 characters).
    pub excerpt: String,
}

/// Every sample of `text`, in order. Stops at OpenMetrics' `# EOF`.
///
/// # Errors
/// The first line that is neither blank, a comment, nor a valid sample.
pub fn parse(text: &str) -> Result<Vec<Sample<'_>>, ParseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r').trim_start();
        if line.trim() == "# EOF" {
            break;
        }
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fail = |reason: &str| ParseError {
            line: i + 1,
            reason: reason.to_string(),
            excerpt: crate::text::excerpt(line, 80),
        };
        out.push(sample(line).map_err(fail)?);
    }
    Ok(out)
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    is_name_start(c) || c.is_ascii_digit()
}

/// One sample line (not blank, not a comment).
fn sample(line: &str) -> Result<Sample<'_>, &'static str> {
    if !line.starts_with(is_name_start) {
        return Err("a sample must start with a metric name");
    }
    let end = line.find(|c: char| !is_name_char(c)).unwrap_or(line.len());
    let (name, mut rest) = line.split_at(end);
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let (parsed, after) = label_set(inner)?;
        labels = parsed;
        rest = after;
    }
    let mut fields = rest.split_whitespace();
    let value = fields.next().ok_or("no value after the metric name")?;
    let value = number(value).ok_or("the value is not a number")?;
    match fields.next() {
        None => {}
        Some(ts) if ts.parse::<f64>().is_ok() => {
            if let Some(more) = fields.next() {
                if !more.starts_with('#') {
                    return Err("unexpected text after the timestamp");
                }
            }
        }
        // An OpenMetrics exemplar without a timestamp before it.
        Some(ex) if ex.starts_with('#') => {}
        Some(_) => return Err("unexpected text after the value"),
    }
    Ok(Sample { name, labels, value })
}

/// Label names with their unescaped values.
type Labels<'a> = Vec<(&'a str, String)>;

/// The labels after `{` up to and including the closing `}`; returns them and what follows.
fn label_set(mut s: &str) -> Result<(Labels<'_>, &str), &'static str> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok((labels, after));
        }
        if !s.starts_with(is_name_start) {
            return Err("a label name is missing or malformed, or the label set is not closed with '}'");
        }
        let end = s.find(|c: char| !is_name_char(c)).unwrap_or(s.len());
        let (key, rest) = s.split_at(end);
        let rest = rest.trim_start().strip_prefix('=').ok_or("a label needs '=' after its name")?;
        let rest = rest.trim_start().strip_prefix('"').ok_or("a label value must be in double quotes")?;
        let (value, rest) = quoted(rest)?;
        labels.push((key, value));
        let rest = rest.trim_start();
        s = match rest.strip_prefix(',') {
            Some(r) => r,
            None if rest.starts_with('}') => rest,
            None => return Err("labels must be separated by ',' and the set closed with '}'"),
        };
    }
}

/// A label value after its opening quote: the unescaped value and what follows the closing one.
fn quoted(s: &str) -> Result<(String, &str), &'static str> {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((value, &s[i + 1..])),
            '\\' => match chars.next() {
                Some((_, 'n')) => value.push('\n'),
                Some((_, '\\')) => value.push('\\'),
                Some((_, '"')) => value.push('"'),
                Some((_, other)) => {
                    value.push('\\');
                    value.push(other);
                }
                None => break,
            },
            c => value.push(c),
        }
    }
    Err("a label value is not closed with '\"'")
}

/// A sample value as Go's `ParseFloat` writes them: decimals, exponents, `NaN`, `±Inf`.
fn number(s: &str) -> Option<f64> {
    s.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untyped_runs_of_families_with_timestamps_and_mixed_label_sets() {
        let text = "vllm:num_requests_running{model_name=\"q\"} 3\n\
                    vllm:num_requests_waiting 1 1700000000000\n\
                    \n\
                    foo{a=\"1\"} 2\n\
                    foo 4\n";
        let s = parse(text).unwrap();
        let names: Vec<&str> = s.iter().map(|x| x.name).collect();
        assert_eq!(names, ["vllm:num_requests_running", "vllm:num_requests_waiting", "foo", "foo"]);
        assert_eq!(s[0].label("model_name"), Some("q"));
        assert_eq!((s[1].value, s[3].value), (1.0, 4.0));
    }

    #[test]
    fn openmetrics_with_exemplars_created_and_eof() {
        let text = "# TYPE x counter\n# HELP x Things.\n# UNIT x things\n\
                    x_total{a=\"b\"} 12.0 1.7e9 # {trace_id=\"k\"} 1.0\n\
                    x_created{a=\"b\"} 1.7e9\n\
                    y_bucket{le=\"+Inf\"} 3 # {id=\"z\"} 0.5\n\
                    # EOF\n\
                    this is after the end\n";
        let s = parse(text).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!((s[0].name, s[0].value), ("x_total", 12.0));
        assert_eq!(s[2].label("le"), Some("+Inf"));
    }

    #[test]
    fn escapes_spaces_special_values_and_crlf() {
        let text = "m{ path = \"C:\\\\dir\", msg=\"say \\\"hi\\\"\\n\", } NaN\r\nn +Inf\r\no -Inf\r\np 1e-3\r\n";
        let s = parse(text).unwrap();
        assert_eq!(s[0].label("path"), Some("C:\\dir"));
        assert_eq!(s[0].label("msg"), Some("say \"hi\"\n"));
        assert!(s[0].value.is_nan());
        assert_eq!((s[1].value, s[2].value, s[3].value), (f64::INFINITY, f64::NEG_INFINITY, 0.001));
    }

    #[test]
    fn malformed_lines_are_named_with_their_number() {
        let e = parse("ok 1\nvllm:cache_config_info{block_size=\"16\" 1\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().starts_with("line 2: "), "{e}");
        assert!(parse("<html><body>Not Found</body></html>\n").unwrap_err().reason.contains("metric name"));
        assert!(parse("x one\n").unwrap_err().reason.contains("not a number"));
        assert!(parse("x 1 2 3\n").unwrap_err().reason.contains("after the timestamp"));
        assert!(parse("x{a=\"unterminated} 1\n").is_err());
        assert!(parse("x{a=b} 1\n").unwrap_err().reason.contains("double quotes"));
    }
}
