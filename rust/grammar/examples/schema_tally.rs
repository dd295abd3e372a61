//! Tallies how the regex and grammar schema compilers treat every MaskBench schema file (compile only,
//! no vocabulary): `cargo run --release -p sglr-grammar --example schema_tally [DIR]`; `SHOW=1` prints
//! each refusal and error.
use std::collections::BTreeMap;

use sglr_fsm::FsmError;
use sglr_grammar::{json_schema_to_grammar, GrammarError};
use sglr_schema::{json_schema_to_regex, JsonSchemaOptions};

fn main() {
    let dir = std::env::args().nth(1).unwrap_or("/work/shared/data/maskbench-dev".into());
    let options =
        JsonSchemaOptions { additional_properties_default: true, implied_types: false, ..Default::default() };
    let mut regex: BTreeMap<String, usize> = BTreeMap::new();
    let mut grammar: BTreeMap<String, usize> = BTreeMap::new();
    let mut both: BTreeMap<String, usize> = BTreeMap::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        let text = std::fs::read_to_string(&path).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let schema = value["schema"].to_string();
        let r = match json_schema_to_regex(&schema, &options) {
            Ok(_) => "ok".to_string(),
            Err(FsmError::UnsupportedSchema { keyword, .. }) => format!("refused {keyword}"),
            Err(FsmError::AutomatonTooLarge { .. }) => "too_large".into(),
            Err(e) => format!("error {}", e.to_string().chars().take(40).collect::<String>()),
        };
        let g = match json_schema_to_grammar(&schema, &options) {
            Ok(_) => "ok".to_string(),
            Err(GrammarError::Schema(FsmError::UnsupportedSchema { keyword, reason, .. })) => {
                if std::env::var("SHOW").is_ok() {
                    eprintln!("{} {keyword}: {reason}", path.display());
                }
                format!("refused {keyword}")
            }
            Err(GrammarError::Schema(FsmError::AutomatonTooLarge { .. })) => "too_large".into(),
            Err(e) => {
                if std::env::var("SHOW").is_ok() {
                    eprintln!("{} ERR {}", path.display(), {
                        let t = e.to_string();
                        let n = t.chars().count();
                        t.chars().skip(n.saturating_sub(150)).collect::<String>()
                    });
                }
                format!("error {}", e.to_string().chars().take(40).collect::<String>())
            }
        };
        *regex.entry(r.clone()).or_default() += 1;
        *grammar.entry(g.clone()).or_default() += 1;
        let combined = if r == "ok" { "ok".to_string() } else { g };
        *both.entry(combined).or_default() += 1;
    }
    for (name, map) in [("regex", regex), ("grammar", grammar), ("combined", both)] {
        let mut v: Vec<_> = map.into_iter().collect();
        v.sort_by_key(|b| std::cmp::Reverse(b.1));
        println!("{name}: {v:?}");
    }
}
