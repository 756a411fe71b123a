//! The twin's tokenizer and filler text. `/tokenize`, `usage` and the streamed text agree
//! because all three use this module.
//!
//! A token is an optional run of whitespace followed by one unit: a run of up to
//! [`MAX_WORD_CHARS`] alphanumeric characters (Unicode: `café`, `日本` are one unit), a
//! special token `<|…|>`, or any other single character. Whitespace at the very end of a text
//! is one more token. Token ids are a hash of the token's text (vocabulary of [`VOCAB`]).

/// Longest alphanumeric run in one token (characters); longer words split.
pub const MAX_WORD_CHARS: usize = 12;
/// Vocabulary size token ids fall into (Qwen3.5's, for realism).
pub const VOCAB: u32 = 151_936;

/// Split `text` into token spans (byte ranges).
fn spans(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut it = text.char_indices().peekable();
    while let Some(&(start, _)) = it.peek() {
        // Leading whitespace.
        while let Some(&(_, c)) = it.peek() {
            if c.is_whitespace() {
                it.next();
            } else {
                break;
            }
        }
        let Some(&(unit_start, c)) = it.peek() else {
            out.push((start, text.len()));
            break;
        };
        let rest = &text[unit_start..];
        if let Some(inner) = rest.strip_prefix("<|") {
            if let Some(close) = inner.find("|>").filter(|&i| i <= 32) {
                let end = unit_start + 2 + close + 2;
                while let Some(&(i, _)) = it.peek() {
                    if i < end {
                        it.next();
                    } else {
                        break;
                    }
                }
                out.push((start, end));
                continue;
            }
        }
        if c.is_alphanumeric() {
            let mut n = 0;
            let mut end = unit_start;
            while let Some(&(i, c)) = it.peek() {
                if c.is_alphanumeric() && n < MAX_WORD_CHARS {
                    end = i + c.len_utf8();
                    n += 1;
                    it.next();
                } else {
                    break;
                }
            }
            out.push((start, end));
        } else {
            it.next();
            out.push((start, unit_start + c.len_utf8()));
        }
    }
    out
}

/// Number of tokens in `text`.
pub fn count(text: &str) -> usize {
    spans(text).len()
}

/// Token ids of `text`.
pub fn encode(text: &str) -> Vec<u32> {
    spans(text).into_iter().map(|(a, b)| token_id(&text[a..b])).collect()
}

fn token_id(tok: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in tok.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h % VOCAB
}

/// Filler words the twin generates; each is one token, some are multi-byte in UTF-8 (so a
/// frame split at a random byte offset can fall inside a character).
pub const FILLER: &[&str] = &[
    "the", "model", "speed", "token", "matrix", "decode", "prefill", "cache", "batch", "stream", "latency", "café",
    "naïve", "über", "日本", "señor", "value", "steady", "window", "measure", "engine", "prompt", "reply", "signal",
    "queue", "kernel", "tensor", "layer", "Ωmega", "ß",
];

/// Text of generated tokens `from..from + n` of a request whose text is seeded by `key`.
/// Token 0 has no leading space, every later token is `" word"`, so the concatenation of all
/// pieces tokenizes back to exactly the number of tokens generated.
pub fn filler(key: u64, from: u32, n: u32) -> String {
    let mut s = String::with_capacity(n as usize * 8);
    for i in from..from + n {
        let mut x = key ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        if i > 0 {
            s.push(' ');
        }
        s.push_str(FILLER[(x % FILLER.len() as u64) as usize]);
    }
    s
}

/// One chat message as the twin reads it.
#[derive(Debug, Clone)]
pub struct Message {
    /// `system`, `user`, `assistant`, `tool`.
    pub role: String,
    /// Text content (content parts concatenated).
    pub content: String,
}

/// Render chat messages with a Qwen-style template:
/// `<|im_start|>ROLE\nCONTENT<|im_end|>\n` per message, then `<|im_start|>assistant\n` when
/// `add_generation_prompt`.
pub fn chat_template(messages: &[Message], add_generation_prompt: bool) -> String {
    let mut s = String::new();
    for m in messages {
        s.push_str("<|im_start|>");
        s.push_str(&m.role);
        s.push('\n');
        s.push_str(&m.content);
        s.push_str("<|im_end|>\n");
    }
    if add_generation_prompt {
        s.push_str("<|im_start|>assistant\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_words_punctuation_and_specials() {
        assert_eq!(count(""), 0);
        assert_eq!(count("hello"), 1);
        assert_eq!(count("hello world"), 2);
        assert_eq!(count("hello, world!"), 4);
        assert_eq!(count("  x  "), 2);
        assert_eq!(count("<|im_start|>user\nhi<|im_end|>"), 4);
        assert_eq!(count("abcdefghijklmnop"), 2);
        assert_eq!(count("café 日本"), 2);
        assert_eq!(encode("a b").len(), 2);
        assert_eq!(encode("same"), encode("same"));
    }

    #[test]
    fn filler_pieces_tokenize_to_their_count() {
        let mut all = String::new();
        let mut total = 0;
        for (from, n) in [(0u32, 1u32), (1, 3), (4, 2), (6, 1), (7, 40)] {
            let piece = filler(99, from, n);
            assert_eq!(count(&piece), n as usize, "{piece:?}");
            all.push_str(&piece);
            total += n as usize;
        }
        assert_eq!(count(&all), total);
        assert!(all.len() > all.chars().count(), "has multi-byte characters");
    }

    #[test]
    fn chat_template_adds_overhead() {
        let m = vec![Message { role: "user".into(), content: "hello there".into() }];
        let t = chat_template(&m, true);
        assert!(t.ends_with("<|im_start|>assistant\n"));
        // <|im_start|> user \nhello " there" <|im_end|> \n<|im_start|> assistant \n
        assert_eq!(count(&t), 8);
    }
}
