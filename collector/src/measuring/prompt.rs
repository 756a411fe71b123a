//! Prompts of exact token counts (`docs/METHODOLOGY.md`, "Prompts").
//!
//! The text is varied natural language from a seeded generator (the corpus
//! `speedmatrix-prose-v1`): repetitive filler would inflate speculative-decoding acceptance. Each
//! prompt starts with a run-unique prefix, so no cache holds it before this run.
//!
//! Lengths are exact where the server has `/tokenize` (vLLM, SGLang, llama.cpp): a binary search
//! over the number of words, counting with the server's own tokenizer and chat template. vLLM
//! and SGLang count a request body (`prompt` or `messages`); llama.cpp counts text
//! (`{"content": …}`), so its chat template is applied first with `/apply-template`, and the
//! count adds the special tokens (BOS) its completion endpoints add. Without `/tokenize`, one
//! probe request calibrates tokens per word from `usage.prompt_tokens`.

use crate::measuring::client::{Client, HttpError};
use serde_json::{json, Value};
use speedmatrix_schema::{Endpoint, PromptCorpus};
use std::time::Duration;

/// Name of the built-in corpus.
pub const CORPUS_NAME: &str = "speedmatrix-prose-v1";

const SUBJECTS: &[&str] = &[
    "The old lighthouse keeper",
    "A young engineer",
    "The river pilot",
    "Our neighbour",
    "The museum guide",
    "A tired baker",
    "The mountain guide",
    "The harbour master",
    "A retired teacher",
    "The night nurse",
    "The village doctor",
    "A curious child",
    "The orchestra conductor",
    "A field biologist",
    "The train driver",
    "The gardener",
    "A travelling musician",
    "The librarian",
    "A ship's cook",
    "The weather forecaster",
];
const VERBS: &[&str] = &[
    "carefully repaired",
    "quietly studied",
    "described",
    "photographed",
    "measured",
    "painted",
    "questioned",
    "remembered",
    "carried",
    "discovered",
    "explained",
    "ignored",
    "followed",
    "rebuilt",
    "sorted",
    "sketched",
    "compared",
    "collected",
    "admired",
    "translated",
];
const OBJECTS: &[&str] = &[
    "a broken compass",
    "the wooden bridge",
    "an unusual map",
    "three copper kettles",
    "the frozen canal",
    "a forgotten letter",
    "the spring harvest",
    "a bright red kite",
    "the cathedral bells",
    "a box of seeds",
    "the marble staircase",
    "an ancient clock",
    "the coastal path",
    "a basket of pears",
    "the iron gate",
    "a stack of journals",
    "the northern glacier",
    "a silver teapot",
    "the crowded market",
    "a pair of boots",
];
const PLACES: &[&str] = &[
    "near the station",
    "before the storm",
    "after supper",
    "in the early morning",
    "beside the harbour",
    "under a grey sky",
    "during the festival",
    "at the edge of town",
    "on the third floor",
    "behind the bakery",
    "across the valley",
    "in the reading room",
    "by the old mill",
    "within an hour",
    "along the canal",
    "through the orchard",
    "at dusk",
    "in late autumn",
    "on a windy afternoon",
    "before anyone noticed",
];
const CLAUSES: &[&str] = &[
    "and nobody could explain why",
    "while the radio played softly",
    "because the winter had been long",
    "although the roads were closed",
    "so that the children could see",
    "as the tide came in",
    "even though it had rained all week",
    "which surprised the visitors",
    "until the lamps were lit",
    "before writing a short report",
    "and then went home for tea",
    "while counting the passing boats",
    "since the old one had been lost",
    "as if it were perfectly normal",
    "and wrote everything down",
];

/// SplitMix64: a tiny, well-known seeded PRNG (deterministic prompts for a given seed).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn pick<'a>(&mut self, list: &'a [&'a str]) -> &'a str {
        list[(self.next() % list.len() as u64) as usize]
    }
}

/// The corpus record for the results file: name and SHA-256 of the word lists.
pub fn corpus() -> PromptCorpus {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for list in [SUBJECTS, VERBS, OBJECTS, PLACES, CLAUSES] {
        for w in list {
            h.update(w.as_bytes());
            h.update(b"\n");
        }
        h.update(b"\x00");
    }
    let hex = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    PromptCorpus { name: CORPUS_NAME.into(), sha256: Some(hex), origin: None }
}

/// At least `words` words of varied prose, deterministic for `seed`.
pub fn prose(seed: u64, words: usize) -> Vec<String> {
    let mut rng = SplitMix(seed);
    let mut out = Vec::with_capacity(words + 32);
    while out.len() < words {
        let sentence = format!(
            "{} {} {} {}, {}.",
            rng.pick(SUBJECTS),
            rng.pick(VERBS),
            rng.pick(OBJECTS),
            rng.pick(PLACES),
            rng.pick(CLAUSES)
        );
        out.extend(sentence.split(' ').map(str::to_string));
    }
    out
}

/// A prompt with the token count the server reported or computed for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// The text (user message for chat, prompt for completions).
    pub text: String,
    /// Tokens as the server counts them (with the chat template for chat), if known.
    pub tokens: Option<u64>,
}

/// How prompt lengths are made exact.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sizer {
    /// The server's `/tokenize` with the request's own body (vLLM, SGLang; exact).
    Tokenize,
    /// llama.cpp's `/tokenize` of text: `/apply-template` for chat first, then `{"content": …,
    /// "add_special": true}` (exact).
    TokenizeText,
    /// Tokens per word measured with a probe request (approximate).
    Calibrated {
        /// Tokens per word, from `usage.prompt_tokens` of the probe.
        tokens_per_word: f64,
        /// Fixed overhead (chat template), tokens.
        overhead: f64,
    },
}

/// Builds prompts for one run.
#[derive(Debug, Clone)]
pub struct PromptBuilder {
    /// The server.
    pub client: Client,
    /// Served model name.
    pub model: String,
    /// Chat or completions.
    pub endpoint: Endpoint,
    /// Run id (the unique prefix).
    pub run_id: String,
    /// Seed of the prose generator.
    pub seed: u64,
    /// How lengths are made exact.
    pub sizer: Sizer,
    /// `--prompts`: the user's prompts, whose words replace the built-in prose.
    pub user: Option<std::sync::Arc<crate::measuring::user_prompts::UserPrompts>>,
}

/// The request body fields that carry a prompt, for chat or completions.
pub fn prompt_fields(endpoint: Endpoint, text: &str) -> Value {
    match endpoint {
        Endpoint::Chat => json!({ "messages": [{ "role": "user", "content": text }] }),
        Endpoint::Completions => json!({ "prompt": text }),
    }
}

fn merge(mut a: Value, b: Value) -> Value {
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), b) {
        a.extend(b);
    }
    a
}

impl PromptBuilder {
    /// Decide the sizer: `/tokenize` when the server has it, else calibrate with one probe.
    ///
    /// # Errors
    /// When neither `/tokenize` nor a probe request works.
    pub async fn new(
        client: Client,
        model: String,
        endpoint: Endpoint,
        run_id: String,
        seed: u64,
    ) -> Result<Self, HttpError> {
        let mut b = PromptBuilder { client, model, endpoint, run_id, seed, sizer: Sizer::Tokenize, user: None };
        // vLLM's and SGLang's form of /tokenize, then llama.cpp's; without either, calibrate.
        for sizer in [Sizer::Tokenize, Sizer::TokenizeText] {
            b.sizer = sizer;
            if b.tokenize("calibration").await.is_ok() {
                return Ok(b);
            }
        }
        let words = prose(seed, 400);
        let small = b.probe_tokens(&words[..50].join(" ")).await?;
        let large = b.probe_tokens(&words[..400].join(" ")).await?;
        let per_word = (large - small).max(1.0) / 350.0;
        b.sizer = Sizer::Calibrated { tokens_per_word: per_word, overhead: (small - 50.0 * per_word).max(0.0) };
        Ok(b)
    }

    /// The prompt tokens the server will count for `text` sent on this builder's endpoint.
    async fn tokenize(&self, text: &str) -> Result<u64, HttpError> {
        let v = match self.sizer {
            Sizer::TokenizeText => {
                let content = match self.endpoint {
                    Endpoint::Chat => self.apply_template(text).await?,
                    Endpoint::Completions => text.to_string(),
                };
                // What llama.cpp's completion endpoints do with a prompt: special tokens added
                // (BOS), special-token text parsed.
                let body = json!({ "content": content, "add_special": true, "parse_special": true });
                self.client.post_json("/tokenize", &body, Duration::from_secs(120)).await?
            }
            _ => {
                let body = merge(json!({ "model": self.model }), prompt_fields(self.endpoint, text));
                self.client.post_json("/tokenize", &body, Duration::from_secs(120)).await?
            }
        };
        v.get("count")
            .and_then(Value::as_u64)
            .or_else(|| v.get("tokens").and_then(Value::as_array).map(|t| t.len() as u64))
            // llama.cpp answers `{"tokens": []}` to a body without `content`: no count, so the
            // builder asks again in llama.cpp's form.
            .filter(|&n| n > 0 || text.is_empty())
            .ok_or_else(|| HttpError::Body { url: "/tokenize".into(), message: format!("no count in {v}") })
    }

    /// The text llama.cpp's chat template makes of a one-message conversation
    /// (`POST /apply-template` → `{"prompt": …}`).
    async fn apply_template(&self, text: &str) -> Result<String, HttpError> {
        let body = merge(json!({ "model": self.model }), prompt_fields(Endpoint::Chat, text));
        let v = self.client.post_json("/apply-template", &body, Duration::from_secs(120)).await?;
        v.get("prompt")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| HttpError::Body { url: "/apply-template".into(), message: format!("no prompt in {v}") })
    }

    /// Without `/tokenize`, a probe's answer with no `usage.prompt_tokens`, or with 0 for its
    /// non-empty prompt (a proxy that fills `usage` with zeros: not a count, and calibrating on
    /// it would build prompts far too long): nothing counts a prompt's tokens, so no prompt can
    /// be cut to a planned context length.
    async fn probe_tokens(&self, text: &str) -> Result<f64, HttpError> {
        let path = match self.endpoint {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
        };
        let body = merge(json!({ "model": self.model, "max_tokens": 1 }), prompt_fields(self.endpoint, text));
        let v = self.client.post_json(path, &body, Duration::from_secs(600)).await?;
        match v.get("usage").and_then(|u| u.get("prompt_tokens")).and_then(Value::as_u64) {
            Some(0) if !text.is_empty() => Err(HttpError::Body { url: path.into(), message: no_prompt_count(true) }),
            Some(t) => Ok(t as f64),
            None => Err(HttpError::Body { url: path.into(), message: no_prompt_count(false) }),
        }
    }

    /// A prompt of `target` tokens whose text starts with the run-unique `tag`
    /// (e.g. "context 8K" or "context 8K stream 3").
    ///
    /// # Errors
    /// When `/tokenize` fails mid-search.
    pub async fn build(&self, tag: &str, target: u64) -> Result<Prompt, HttpError> {
        let prefix = format!(
            "[speedmatrix run {} · {tag}] Read the following notes, then continue the story at length.\n\n",
            self.run_id
        );
        // Enough words for any tokenizer: prose runs at ~1.3 tokens per word.
        let words = self.words(self.seed ^ fnv(tag), (target as usize).saturating_mul(12) / 10 + 64);
        let text_of = |k: usize| format!("{prefix}{}", words[..k].join(" "));
        match self.sizer {
            Sizer::Calibrated { tokens_per_word, overhead } => {
                let k = ((target as f64 - overhead) / tokens_per_word).floor().max(1.0) as usize;
                Ok(Prompt { text: text_of(k.min(words.len())), tokens: None })
            }
            Sizer::Tokenize | Sizer::TokenizeText => self.fit(&text_of, words.len(), target).await,
        }
    }

    /// At least `n` words of prompt text for `seed`: the user's prompts (`--prompts`, from the
    /// prompt the seed picks, repeated as needed), else the built-in prose.
    pub fn words(&self, seed: u64, n: usize) -> Vec<String> {
        match &self.user {
            Some(u) => u.words(seed, n),
            None => prose(seed, n),
        }
    }

    /// The tokens the server counts for `text` (exact with `/tokenize`; with a calibrated
    /// sizer, estimated from its words, and `exact` false).
    ///
    /// # Errors
    /// When `/tokenize` fails.
    pub async fn count(&self, text: &str) -> Result<(u64, bool), HttpError> {
        match self.sizer {
            Sizer::Calibrated { tokens_per_word, overhead } => {
                Ok(((overhead + tokens_per_word * text.split_whitespace().count() as f64).round() as u64, false))
            }
            Sizer::Tokenize | Sizer::TokenizeText => Ok((self.tokenize(text).await?, true)),
        }
    }

    /// The longest of the texts `text_of(0..=max_k)` (longer with `k`) whose count is at most
    /// `target`, closed with up to 8 short words (usually one token each) to reach it: a binary
    /// search on `k` with [`PromptBuilder::count`]. `tokens` is the count (`None` when only
    /// estimated).
    ///
    /// # Errors
    /// When `/tokenize` fails mid-search.
    pub async fn fit(&self, text_of: &dyn Fn(usize) -> String, max_k: usize, target: u64) -> Result<Prompt, HttpError> {
        let (mut lo, mut hi) = (0usize, max_k);
        let (first, exact) = self.count(&text_of(0)).await?;
        let mut best = (0usize, first);
        if best.1 > target {
            return Ok(Prompt { text: text_of(0), tokens: exact.then_some(best.1) });
        }
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let n = self.count(&text_of(mid)).await?.0;
            if n <= target {
                lo = mid;
                best = (mid, n);
            } else {
                hi = mid - 1;
            }
        }
        let mut text = text_of(best.0);
        let mut count = best.1;
        if exact {
            for filler in [" a", " a", " a", " a", " a", " a", " a", " a"] {
                if count >= target {
                    break;
                }
                let n = self.count(&format!("{text}{filler}")).await?.0;
                if n > target {
                    break;
                }
                text.push_str(filler);
                count = n;
            }
        }
        Ok(Prompt { text, tokens: exact.then_some(count) })
    }
}

/// FNV-1a of a tag, to give every prompt its own word sequence.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Why a server whose answers carry no `usage.prompt_tokens` (or 0 for a non-empty prompt:
/// `zero`) and which has no `/tokenize` cannot be measured, and what would let it be.
fn no_prompt_count(zero: bool) -> String {
    let answer = if zero { crate::zero_prompt_count!() } else { "no usage.prompt_tokens in the answer" };
    format!(
        "{answer}, and the server has no /tokenize: speedmatrix cuts every prompt to its context by the \
         server's own token count, so without one it cannot give this server prompts of a planned length — \
         have the server (or the proxy in front of it) send `usage` in non-streamed answers (with the \
         prompt's real count), or serve `/tokenize`"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_is_deterministic_and_varied() {
        let a = prose(7, 2000);
        assert_eq!(a, prose(7, 2000));
        assert_ne!(a, prose(8, 2000));
        // Varied: few repeated 4-word sequences (ngram speculation feeds on repetition).
        let grams: Vec<String> = a.windows(4).map(|w| w.join(" ")).collect();
        let mut unique = grams.clone();
        unique.sort();
        unique.dedup();
        assert!(unique.len() as f64 > 0.5 * grams.len() as f64, "{} of {}", unique.len(), grams.len());
    }

    /// Results files name the corpus by this hash: editing a word list must change the corpus
    /// name too, so this pins the hash of `speedmatrix-prose-v1`.
    #[test]
    fn corpus_hash_is_stable() {
        let c = corpus();
        assert_eq!(c.name, CORPUS_NAME);
        assert_eq!(c.sha256.as_deref(), Some("ccfdbb136b92f981866a769ac34ec09e528e7e8d91702a1c4c132a5a17222d8c"));
    }
}
