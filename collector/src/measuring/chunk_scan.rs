//! One pass over a streamed chunk's JSON that checks it is JSON and reads the few fields the
//! measurement needs ([`scan`]), pure: the client's hot path (every chunk of every stream).
//!
//! A full parse builds, or at least deserializes into structs, every key and string of every
//! chunk (`id`, `object`, `created`, `model`, `index`, `logprobs`, …); this reads them once,
//! byte by byte, keeping only: the top-level `id`, whether `object` is `"error"` or an `error` or
//! `timings` key is present, the first choice's `delta.content` / `text` / `delta.reasoning` /
//! `delta.reasoning_content` (empty or not), `delta.tool_calls` (an array, empty or not) and
//! `finish_reason`, and `usage.prompt_tokens`, `usage.completion_tokens` and
//! `usage.prompt_tokens_details.cached_tokens`.
//!
//! It gives `None` — and the caller reads the payload as a `serde_json::Value` instead, which
//! gives the same answer for every payload the scan reads (unit- and property-tested in
//! `wire.rs` and `fuzz.rs`) — for anything it does not read itself: not JSON, not an object, an
//! error or `timings`, a field it reads with another type than the usual one, a duplicated field
//! it reads, an escaped key, an escaped `id` or `finish_reason` it must copy out, a number that
//! is no `u64` where a count is read, nesting deeper than [`MAX_DEPTH`].

/// What a chunk of the common shape says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields {
    /// The completion's `id`.
    pub id: Option<String>,
    /// `choices` has a first element.
    pub has_choice: bool,
    /// Its delta's `content` or its `text` is a non-empty string.
    pub content: bool,
    /// Content, reasoning (`reasoning`, `reasoning_content`) or a non-empty `tool_calls`.
    pub has_text: bool,
    /// Its `finish_reason`.
    pub finish_reason: Option<String>,
    /// `usage.prompt_tokens`.
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens`.
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens`.
    pub cached_tokens: Option<u64>,
}

/// Nesting the scan follows; deeper payloads go to the full parser.
pub const MAX_DEPTH: usize = 64;

/// The fields of a chunk of the common shape, `None` for anything else (see the module docs).
/// `want_id`: copy the `id` out (a stream's first chunk names it; the rest repeat it).
pub fn scan(data: &str, want_id: bool) -> Option<Fields> {
    let mut s = Scanner { text: data, b: data.as_bytes(), i: 0 };
    let mut f = Fields::default();
    s.ws();
    s.top(&mut f, want_id)?;
    s.ws();
    (s.i == s.b.len()).then_some(f)
}

/// The bytes that end a run of plain text in a JSON string: the closing quote, a backslash, and
/// the control characters JSON does not allow unescaped.
const STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Where the run of plain string text that starts at `i` ends: the index of the first byte in
/// [`STRING_STOP`], or `b.len()`. Eight bytes at a time while eight are left (one `u64`, a
/// branch-free test of each byte — the strings of a chunk are short, keys and a token's text,
/// where a vectorised search costs more to set up than it saves), then byte by byte through the
/// table.
#[inline(always)]
fn plain_run(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // A byte of `x` is zero → its high bit in `zero(x)`; bytes above the lowest such byte may be
    // flagged falsely (a borrow), the lowest is exact — and only the lowest is used.
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    while let Some(word) = b.get(i..i + 8) {
        let x = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
        let quote = zero(x ^ (ONES * u64::from(b'"')));
        let backslash = zero(x ^ (ONES * u64::from(b'\\')));
        // Below 0x20: subtracting 0x20 borrows into the high bit of a byte that had it clear.
        let control = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
        let stop = quote | backslash | control;
        if stop != 0 {
            return i + (stop.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() && !STRING_STOP[usize::from(b[i])] {
        i += 1;
    }
    i
}

/// What a string value was, without unescaping it.
#[derive(Clone, Copy)]
enum Str<'a> {
    /// No escape sequence: the text itself.
    Plain(&'a str),
    /// It has escape sequences (valid ones); `empty` is false (an escape is a character).
    Escaped,
}

impl Str<'_> {
    fn nonempty(self) -> bool {
        match self {
            Str::Plain(s) => !s.is_empty(),
            Str::Escaped => true,
        }
    }
}

/// Which of the fields read so far were seen (a second one sends the payload to the full parser,
/// which knows what a duplicate means).
#[derive(Default)]
struct Seen(u32);

impl Seen {
    fn first(&mut self, bit: u32) -> Option<()> {
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        Some(())
    }
}

struct Scanner<'a> {
    /// The chunk, for slicing strings out of it (already UTF-8: nothing to check again).
    text: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string (the opening quote next): its text when it has no escape sequence. Validates
    /// escapes and refuses control characters, as JSON does.
    // Inlined into its callers (a key, a value, a skipped value): called some 18 times per
    // chunk, its call's register saves cost as much as the scan of a short key.
    #[inline(always)]
    fn string(&mut self) -> Option<Str<'a>> {
        self.eat(b'"')?;
        let start = self.i;
        let mut escaped = false;
        loop {
            let i = plain_run(self.b, self.i);
            self.i = i;
            match *self.b.get(i)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    self.i += 1;
                    match self.peek()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                        b'u' => {
                            self.i += 1;
                            self.unicode_escape()?;
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
        let end = self.i;
        self.i += 1;
        if escaped {
            return Some(Str::Escaped);
        }
        // Between two ASCII quotes of a `&str`: whole characters, so the slice is text.
        self.text.get(start..end).map(Str::Plain)
    }

    /// The four hex digits after `\u`; a leading surrogate must be followed by `\uDC00`–`\uDFFF`,
    /// and a trailing one cannot stand alone (as a JSON string read into text requires).
    fn unicode_escape(&mut self) -> Option<()> {
        let unit = self.hex4()?;
        match unit {
            0xD800..=0xDBFF => {
                if !self.b.get(self.i..)?.starts_with(b"\\u") {
                    return None;
                }
                self.i += 2;
                (0xDC00..=0xDFFF).contains(&self.hex4()?).then_some(())
            }
            0xDC00..=0xDFFF => None,
            _ => Some(()),
        }
    }

    fn hex4(&mut self) -> Option<u16> {
        let h = std::str::from_utf8(self.b.get(self.i..self.i + 4)?).ok()?;
        let v = u16::from_str_radix(h, 16).ok()?;
        if !h.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        self.i += 4;
        Some(v)
    }

    /// A key (no escapes: an escaped key goes to the full parser) and its colon.
    fn key(&mut self) -> Option<&'a str> {
        match self.string()? {
            Str::Plain(k) => {
                self.eat(b':')?;
                Some(k)
            }
            Str::Escaped => None,
        }
    }

    /// `null` next (consumed) or not (nothing consumed).
    fn null(&mut self) -> Option<bool> {
        self.ws();
        if self.b.get(self.i..)?.starts_with(b"null") {
            self.i += 4;
            return Some(true);
        }
        Some(false)
    }

    /// A string or `null`.
    fn opt_string(&mut self) -> Option<Option<Str<'a>>> {
        if self.null()? {
            return Some(None);
        }
        self.string().map(Some)
    }

    /// A non-negative integer that fits `u64` (no fraction, no exponent), or `null`.
    fn opt_u64(&mut self) -> Option<Option<u64>> {
        if self.null()? {
            return Some(None);
        }
        let start = self.i;
        let mut n: u64 = 0;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.i += 1;
        }
        let len = self.i - start;
        if len == 0 || (len > 1 && self.b[start] == b'0') {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.peek() {
            return None;
        }
        Some(Some(n))
    }

    /// Any JSON value, checked and skipped.
    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' => self.object(|s, _| s.skip(depth + 1)),
            b'[' => self.array(|s, _| s.skip(depth + 1)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b.get(self.i..)?.starts_with(word).then(|| self.i += word.len())
    }

    /// A number by JSON's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        let digits = |s: &mut Self| {
            let start = s.i;
            while let Some(b'0'..=b'9') = s.peek() {
                s.i += 1;
            }
            (s.i > start).then_some(())
        };
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        if self.peek() == Some(b'0') {
            self.i += 1;
        } else {
            digits(self)?;
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            digits(self)?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            digits(self)?;
        }
        Some(())
    }

    /// An object (the `{` next): `member(self, key)` reads each member's value.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.list(b'{', b'}', |s, _| {
            let k = s.key()?;
            member(s, k)
        })
    }

    /// An array (the `[` next): `element(self, index)` reads each element.
    fn array(&mut self, element: impl FnMut(&mut Self, usize) -> Option<()>) -> Option<()> {
        self.list(b'[', b']', element)
    }

    /// `open`, then items separated by commas (`item(self, index)` reads each), then `close`.
    fn list(&mut self, open: u8, close: u8, mut item: impl FnMut(&mut Self, usize) -> Option<()>) -> Option<()> {
        self.eat(open)?;
        self.ws();
        if self.peek()? == close {
            self.i += 1;
            return Some(());
        }
        let mut n = 0;
        loop {
            item(self, n)?;
            n += 1;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                c if c == close => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// The chunk itself.
    fn top(&mut self, f: &mut Fields, want_id: bool) -> Option<()> {
        let mut seen = Seen::default();
        let (mut choice, mut content, mut reasoning, mut tool) = (false, false, false, false);
        self.object(|s, k| match k {
            "id" => {
                seen.first(1)?;
                if let Some(id) = s.opt_string()? {
                    if want_id {
                        f.id = Some(match id {
                            Str::Plain(t) => t.to_string(),
                            Str::Escaped => return None,
                        });
                    }
                }
                Some(())
            }
            "object" => {
                seen.first(2)?;
                match s.opt_string()? {
                    Some(Str::Plain("error")) | Some(Str::Escaped) => None,
                    _ => Some(()),
                }
            }
            "error" | "timings" => None,
            "choices" => {
                seen.first(4)?;
                if s.null()? {
                    return Some(());
                }
                s.array(|s, n| {
                    if n > 0 {
                        return s.skip(2);
                    }
                    choice = true;
                    s.choice(f, &mut content, &mut reasoning, &mut tool)
                })
            }
            "usage" => {
                seen.first(8)?;
                if s.null()? {
                    return Some(());
                }
                s.usage(f)
            }
            _ => s.skip(1),
        })?;
        f.has_choice = choice;
        f.content = content;
        f.has_text = content || reasoning || tool;
        Some(())
    }

    /// The first choice: `text`, `finish_reason` and `delta`.
    fn choice(&mut self, f: &mut Fields, content: &mut bool, reasoning: &mut bool, tool: &mut bool) -> Option<()> {
        let mut seen = Seen::default();
        self.object(|s, k| match k {
            "text" => {
                seen.first(1)?;
                *content |= s.opt_string()?.is_some_and(Str::nonempty);
                Some(())
            }
            "finish_reason" => {
                seen.first(2)?;
                f.finish_reason = match s.opt_string()? {
                    None => None,
                    Some(Str::Plain(r)) => Some(r.to_string()),
                    Some(Str::Escaped) => return None,
                };
                Some(())
            }
            "delta" => {
                seen.first(4)?;
                if s.null()? {
                    return Some(());
                }
                s.delta(content, reasoning, tool)
            }
            _ => s.skip(2),
        })
    }

    /// A choice's `delta`: `content`, `reasoning`, `reasoning_content`, `tool_calls`.
    fn delta(&mut self, content: &mut bool, reasoning: &mut bool, tool: &mut bool) -> Option<()> {
        let mut seen = Seen::default();
        self.object(|s, k| match k {
            "content" => {
                seen.first(1)?;
                *content |= s.opt_string()?.is_some_and(Str::nonempty);
                Some(())
            }
            "reasoning" | "reasoning_content" => {
                seen.first(if k == "reasoning" { 2 } else { 4 })?;
                *reasoning |= s.opt_string()?.is_some_and(Str::nonempty);
                Some(())
            }
            "tool_calls" => {
                seen.first(8)?;
                if s.null()? {
                    return Some(());
                }
                s.array(|s, _| {
                    *tool = true;
                    s.skip(4)
                })
            }
            _ => s.skip(3),
        })
    }

    /// `usage`: the prompt's and the completion's tokens, and the prompt's cached tokens.
    fn usage(&mut self, f: &mut Fields) -> Option<()> {
        let mut seen = Seen::default();
        self.object(|s, k| match k {
            "prompt_tokens" => {
                seen.first(1)?;
                f.prompt_tokens = s.opt_u64()?;
                Some(())
            }
            "completion_tokens" => {
                seen.first(2)?;
                f.completion_tokens = s.opt_u64()?;
                Some(())
            }
            "prompt_tokens_details" => {
                seen.first(4)?;
                if s.null()? {
                    return Some(());
                }
                let mut inner = Seen::default();
                s.object(|s, k| match k {
                    "cached_tokens" => {
                        inner.first(1)?;
                        f.cached_tokens = s.opt_u64()?;
                        Some(())
                    }
                    _ => s.skip(3),
                })
            }
            _ => s.skip(2),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{plain_run, STRING_STOP};

    /// The table, byte by byte: what [`plain_run`] must agree with.
    fn by_table(b: &[u8], mut i: usize) -> usize {
        while i < b.len() && !STRING_STOP[usize::from(b[i])] {
            i += 1;
        }
        i
    }

    /// Every start in texts of every length to 20 with one or two bytes of interest anywhere in
    /// them (the stop bytes, their neighbours, and bytes with the high bit set, which the word
    /// test must not take for control characters), over fillers plain and multi-byte.
    #[test]
    fn the_word_at_a_time_run_ends_where_the_table_says() {
        let odd =
            [0x00, 0x01, 0x1f, 0x20, 0x21, b'"', 0x23, b'\\', 0x5b, 0x5d, 0x7f, 0x80, 0x9f, 0xa2, 0xc3, 0xdc, 0xff];
        for filler in [b'a', 0xa9, 0x7f] {
            for len in 0..=20 {
                for p in 0..len {
                    for &x in &odd {
                        for q in [None, Some(len - 1), Some(p / 2)] {
                            let mut b = vec![filler; len];
                            b[p] = x;
                            if let Some(q) = q {
                                b[q] = if x == b'"' { 0x05 } else { b'"' };
                            }
                            for start in 0..=len {
                                assert_eq!(plain_run(&b, start), by_table(&b, start), "{b:?} from {start}");
                            }
                        }
                    }
                }
            }
        }
    }
}
