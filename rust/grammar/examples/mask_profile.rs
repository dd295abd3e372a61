//! Compiles JSON schemas to grammars and times compile + first mask and the masks along valid
//! instances, for profiling (`valgrind --tool=callgrind`) away from Python. Input: one JSON file
//! (written by `benches/maskbench_dump_cases.py`) `{"vocab": [hex bytes or null], "eos": [ids],
//! "cases": [{"name", "schema", "instances": [[token ids]]}]}`;
//! `cargo run --release -p sglr-grammar --example mask_profile -- CASES [MASKS]` (MASKS: masks
//! timed per instance, default 32; a case whose mask or step fails, e.g. a lexeme past its size
//! bound, is printed with its error and left out). Prints each case's compile time and slowest masks (`QUIET=1`:
//! only the summary over all cases; `SLOW=1`: each case's masks over 1 ms, on stderr; `TRACE=1`: every timed mask with the
//! text before it, on stderr; `REPEAT=N`: each case's instances N times, the last pass timed; `SPLIT=1`:
//! only each case's schema -> grammar time and first-mask time, in ms; `DIGEST=1`: a digest of every
//! timed mask on stdout, to compare two builds' masks).
// The allocator `sglr._core` uses, so timings match the extension's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::Instant;

use sglr_fsm::CompileLimits;
use sglr_grammar::{json_schema_to_grammar, GrammarMatcher, ParserLimits};
use sglr_schema::JsonSchemaOptions;
use sglr_vocab::Vocabulary;

fn hex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

fn main() {
    let path = std::env::args().nth(1).expect("a cases file");
    let timed: usize = std::env::args().nth(2).map_or(32, |n| n.parse().unwrap());
    let input: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let tokens: Vec<Option<Vec<u8>>> =
        input["vocab"].as_array().unwrap().iter().map(|t| t.as_str().map(hex)).collect();
    let token_bytes = tokens.clone();
    let eos = input["eos"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
    let vocabulary = Arc::new(Vocabulary::new(tokens, eos).unwrap());
    let options =
        JsonSchemaOptions { additional_properties_default: true, implied_types: false, ..Default::default() };
    let quiet = std::env::var("QUIET").is_ok();
    let trace = std::env::var("TRACE").is_ok();
    let digest = std::env::var("DIGEST").is_ok();
    let repeat: usize = std::env::var("REPEAT").map_or(1, |n| n.parse().unwrap());
    let mut all_masks: Vec<f64> = Vec::new();
    let mut all_compiles: Vec<f64> = Vec::new();
    for case in input["cases"].as_array().unwrap() {
        let started = Instant::now();
        let grammar = match json_schema_to_grammar(case["schema"].as_str().unwrap(), &options) {
            Ok(grammar) => grammar,
            Err(error) => {
                println!("{}: {error}", case["name"]);
                continue;
            }
        };
        let converted = started.elapsed();
        let matcher = GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default());
        let mut mask = vec![0u32; vocabulary.num_mask_words()];
        let state = matcher.start().unwrap();
        matcher.fill_mask(&state, &vocabulary, &mut mask).unwrap();
        let compile = started.elapsed();
        if std::env::var("SPLIT").is_ok() {
            println!(
                "SPLIT {} {:.2} {:.2}",
                case["name"],
                converted.as_secs_f64() * 1e3,
                (compile - converted).as_secs_f64() * 1e3
            );
            continue;
        }
        let mut masks: Vec<(f64, usize, usize)> = Vec::new();
        let instances = case["instances"].as_array().unwrap();
        let last_pass = (repeat - 1) * instances.len();
        let mut failed = None;
        'passes: for (pass, instance) in instances.iter().cycle().take(repeat * instances.len()).enumerate() {
            // Only the last pass over the instances is kept (REPEAT=N: the others warm the caches).
            let index = pass % instances.len();
            let kept = pass >= last_pass;
            let mut state = matcher.start().unwrap();
            let mut text: Vec<u8> = Vec::new();
            for (step, token) in instance.as_array().unwrap().iter().enumerate() {
                let token = token.as_u64().unwrap() as u32;
                if step < timed {
                    mask.fill(0);
                    let started = Instant::now();
                    if let Err(error) = matcher.fill_mask(&state, &vocabulary, &mut mask) {
                        failed = Some(error);
                        break 'passes;
                    }
                    let micros = started.elapsed().as_secs_f64() * 1e6;
                    if digest && kept {
                        let mut hasher = std::collections::hash_map::DefaultHasher::new();
                        std::hash::Hash::hash(&mask, &mut hasher);
                        println!(
                            "DIGEST {} {index} {step} {:016x}",
                            case["name"],
                            std::hash::Hasher::finish(&hasher)
                        );
                    }
                    if trace && kept {
                        let allowed: u32 = mask.iter().map(|w| w.count_ones()).sum();
                        let tail = &text[text.len().saturating_sub(40)..];
                        eprintln!(
                            "TRACE {} {index} {step} {micros:.1} allowed={allowed} {:?}",
                            case["name"],
                            String::from_utf8_lossy(tail)
                        );
                    }
                    if kept {
                        masks.push((micros, index, step));
                    }
                }
                text.extend(token_bytes[token as usize].as_deref().unwrap_or_default());
                match matcher.advance_token(&mut state, &vocabulary, token) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(error) => {
                        failed = Some(error);
                        break 'passes;
                    }
                }
            }
        }
        if let Some(error) = failed {
            // A case the bench counts as failed (e.g. an automaton past its bound): not timed.
            println!("{}: {error}", case["name"]);
            continue;
        }
        masks.sort_by(|a, b| b.0.total_cmp(&a.0));
        let total: f64 = masks.iter().map(|m| m.0).sum();
        all_masks.extend(masks.iter().map(|m| m.0));
        let over: Vec<_> = masks.iter().filter(|m| m.0 > 1000.0).collect();
        if std::env::var("SLOW").is_ok() && !over.is_empty() {
            eprintln!("{} {} masks over 1 ms: {:?}", case["name"], over.len(), &over[..over.len().min(8)]);
        }
        all_compiles.push(compile.as_secs_f64() * 1e3);
        if quiet {
            continue;
        }
        println!(
            "{}: compile {:.2} ms, {} masks, total {:.0} us, slowest (us, instance, step): {:?}",
            case["name"],
            compile.as_secs_f64() * 1e3,
            masks.len(),
            total,
            &masks[..masks.len().min(6)]
        );
    }
    let percentile = |values: &mut Vec<f64>, q: f64| {
        values.sort_by(f64::total_cmp);
        values
            .get(((values.len() as f64 * q) as usize).min(values.len().saturating_sub(1)))
            .copied()
            .unwrap_or(f64::NAN)
    };
    let (mask_total, compile_total): (f64, f64) = (all_masks.iter().sum(), all_compiles.iter().sum());
    let num_over_50 = all_masks.iter().filter(|&&m| m > 50.0).count();
    println!(
        "{} schemas: compile p50 {:.2} ms p99 {:.2} ms total {:.0} ms; {} masks: p50 {:.1} us p90 {:.1} us p99 {:.1} us \
         over 50 us {num_over_50} total {:.0} ms",
        all_compiles.len(),
        percentile(&mut all_compiles, 0.5),
        percentile(&mut all_compiles, 0.99),
        compile_total,
        all_masks.len(),
        percentile(&mut all_masks, 0.5),
        percentile(&mut all_masks, 0.9),
        percentile(&mut all_masks, 0.99),
        mask_total / 1e3
    );
}
