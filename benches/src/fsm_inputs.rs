//! Inputs for the FSM benchmarks: vocabularies, patterns and constrained random walks.

use sglr_fsm::TokenFsm;
use sglr_schema::{json_value_to_regex, JsonSchemaOptions};
use sglr_vocab::Vocabulary;

/// Small deterministic generator (no extra dependency).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

/// A byte-level vocabulary of `size` tokens shaped like a BPE one: every single byte, then
/// words and word pieces with optional leading space, digits runs, JSON punctuation pairs and
/// some multi-byte UTF-8; the last id is EOS (special).
pub fn synthetic_vocabulary(size: usize, seed: u64) -> Vocabulary {
    let mut rng = Lcg(seed);
    let mut seen = std::collections::HashSet::new();
    let mut tokens: Vec<Option<Vec<u8>>> = (0..=255u8).map(|b| Some(vec![b])).collect();
    for b in 0..=255u8 {
        seen.insert(vec![b]);
    }
    let punctuation =
        ["\",", "\":", " \"", "{\"", "\"}", "\"]", "[\"", "\n", "  ", "\": \"", "\", \"", "},", "],"];
    for p in punctuation {
        if seen.insert(p.as_bytes().to_vec()) {
            tokens.push(Some(p.as_bytes().to_vec()));
        }
    }
    let letters = b"etaoinshrdlucmfwypvbgkjqxz";
    let multibyte = ["\u{e9}", "\u{fc}", "\u{4e2d}", "\u{6587}", "\u{442}", "\u{1F600}"];
    while tokens.len() < size - 1 {
        let mut token = Vec::new();
        match rng.below(10) {
            0 => (0..1 + rng.below(3)).for_each(|_| token.push(b'0' + rng.below(10) as u8)),
            1 => token.extend_from_slice(multibyte[rng.below(multibyte.len())].as_bytes()),
            _ => {
                if rng.below(2) == 0 {
                    token.push(b' ');
                }
                let len = 2 + rng.below(8);
                for i in 0..len {
                    let letter = letters[rng.below(letters.len()).min(rng.below(letters.len()))];
                    token.push(if i == 0 && rng.below(8) == 0 {
                        letter.to_ascii_uppercase()
                    } else {
                        letter
                    });
                }
                if rng.below(12) == 0 {
                    token.extend_from_slice(punctuation[rng.below(punctuation.len())].as_bytes());
                }
            }
        }
        if seen.insert(token.clone()) {
            tokens.push(Some(token));
        }
    }
    tokens.push(None);
    let eos = (tokens.len() - 1) as u32;
    Vocabulary::new(tokens, vec![eos]).expect("valid synthetic vocabulary")
}

/// Reads hex-encoded tokens, one per line (empty line: special token); the last id is EOS.
pub fn vocabulary_from_file(path: &str) -> Vocabulary {
    let text = std::fs::read_to_string(path).expect("readable vocabulary file");
    let tokens: Vec<Option<Vec<u8>>> = text
        .lines()
        .map(|line| {
            (!line.is_empty()).then(|| {
                (0..line.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&line[i..i + 2], 16).expect("hex"))
                    .collect()
            })
        })
        .collect();
    let eos = (tokens.len() - 1) as u32;
    Vocabulary::new(tokens, vec![eos]).expect("valid vocabulary file")
}

/// The issue's regexes and JSON schemas (as regexes), by name.
pub fn schema_patterns() -> Vec<(&'static str, String)> {
    let flat5 = serde_json::json!({"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"}, "email": {"type": "string"},
        "is_active": {"type": "boolean"}, "score": {"type": "number"}},
        "required": ["name", "age", "email", "is_active", "score"]});
    let nested6 = serde_json::json!({"type": "object", "properties": {
        "id": {"type": "integer"}, "title": {"type": "string"},
        "author": {"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string"}}, "required": ["name", "email"]},
        "tags": {"type": "array", "items": {"type": "string"}}, "published": {"type": "boolean"},
        "rating": {"type": "number"}},
        "required": ["id", "title", "author", "tags", "published", "rating"]});
    let options = JsonSchemaOptions::default();
    vec![
        ("int", r"[-+]?[0-9]+".to_string()),
        ("summary", r#"\{"summary": "[\w\d\s]+\.", "grade": "[ABCD][+-]?"\}"#.to_string()),
        ("flat5", json_value_to_regex(&flat5, &options).expect("schema compiles")),
        ("nested6", json_value_to_regex(&nested6, &options).expect("schema compiles")),
    ]
}

/// A constrained random walk: uniform over allowed tokens, with a 1-in-4 preference for
/// tokens that close strings/containers; `None` marks a restart after EOS.
pub fn random_walk(fsm: &TokenFsm, num_steps: usize, seed: u64) -> Vec<Option<u32>> {
    let mut rng = Lcg(seed);
    let vocab = fsm.vocabulary();
    let mut walk = Vec::with_capacity(num_steps);
    let mut state = fsm.start_state();
    while walk.len() < num_steps {
        let allowed = fsm.allowed_token_ids(state).expect("valid state");
        let closing: Vec<u32> = allowed
            .iter()
            .copied()
            .filter(|&t| {
                vocab.is_eos(t)
                    || vocab.token_bytes(t).is_some_and(|b| b.iter().any(|c| b"\"}],".contains(c)))
            })
            .collect();
        let pool = if !closing.is_empty() && rng.below(4) == 0 { &closing } else { &allowed };
        let token = pool[rng.below(pool.len())];
        if vocab.is_eos(token) {
            walk.push(None);
            state = fsm.start_state();
        } else {
            walk.push(Some(token));
            state = fsm.advance(state, token).expect("allowed token");
        }
    }
    walk
}
