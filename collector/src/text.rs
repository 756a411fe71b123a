//! Text from files and servers made safe for one terminal line: results files, source files and
//! server answers may hold ANSI escapes, bells or line breaks, and none of them may reach the
//! terminal raw or break a one-line error.

/// What a control character becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    /// Its escape (`\u{1b}`, `\n`).
    Escape,
    /// A space for line breaks and tabs, `�` for any other.
    Replace,
}

fn one_line(s: &str, control: Control) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match control {
            _ if !c.is_control() => out.push(c),
            Control::Escape => out.extend(c.escape_default()),
            Control::Replace if c.is_whitespace() => out.push(' '),
            Control::Replace => out.push('\u{fffd}'),
        }
    }
    out
}

/// Text from a file or a server as a report shows it: line breaks and tabs become spaces, other
/// control characters (ANSI escapes, bells) `�`.
pub fn clean(s: &str) -> String {
    one_line(s, Control::Replace)
}

/// An error message as one terminal line: control characters are written as their escapes
/// (`\u{1b}`, `\n`), so the message still shows exactly which key or value is wrong.
pub fn escaped(s: &str) -> String {
    one_line(s, Control::Escape)
}

/// At most `max` characters of [`clean`]ed, trimmed text, with `…` where it was cut: a server's
/// answer or a source field's value inside a message.
pub fn excerpt(s: &str, max: usize) -> String {
    let t = clean(s);
    let t = t.trim();
    if t.chars().count() > max {
        format!("{}…", t.chars().take(max).collect::<String>())
    } else {
        t.to_string()
    }
}

/// `e` and its sources, each once, in one line (`a: b: c`), without reqwest's "error sending
/// request for url (URL)": every error that carries this text names the URL already ("cannot
/// reach URL: …").
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    if let Some(rest) = s.strip_prefix("error sending request for url (") {
        if let Some(i) = rest.find(')') {
            s = format!("error sending the request{}", &rest[i + 1..]);
        }
    }
    let mut src = e.source();
    while let Some(inner) = src {
        let t = inner.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_never_survive() {
        let evil = "a\u{1b}[31mb\r\nc\td\u{7}";
        assert_eq!(clean(evil), "a\u{fffd}[31mb  c d\u{fffd}");
        assert_eq!(escaped(evil), "a\\u{1b}[31mb\\r\\nc\\td\\u{7}");
        assert_eq!(escaped("plain \"quoted\" é"), "plain \"quoted\" é", "only control characters change");
    }

    #[test]
    fn excerpts_are_short_single_lines() {
        assert_eq!(excerpt("  {\"error\":\n \"x\"}  ", 300), "{\"error\":  \"x\"}");
        assert_eq!(excerpt(&"é".repeat(400), 300), format!("{}…", "é".repeat(300)));
        assert_eq!(excerpt("abc", 3), "abc");
    }
}
