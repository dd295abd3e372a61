//! Constraint FSM benchmarks: compile (time to first mask), warm mask fill, fill + advance per
//! decode step, and the batched fill, on synthetic byte-level vocabularies of 32k and 128k
//! tokens (set `SGLR_BENCH_VOCAB=path` to a file of hex-encoded tokens, one per line and an
//! empty line for a special token, to bench a real one; the last id is taken as EOS).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use sglr_benches::fsm_inputs::{random_walk, schema_patterns, synthetic_vocabulary, vocabulary_from_file};
use sglr_fsm::{fill_bitmasks, CompileLimits, TokenFsm};
use sglr_vocab::Vocabulary;

fn vocabularies() -> Vec<(String, Arc<Vocabulary>)> {
    if let Ok(path) = std::env::var("SGLR_BENCH_VOCAB") {
        return vec![("file".into(), Arc::new(vocabulary_from_file(&path)))];
    }
    [32_000, 128_000]
        .into_iter()
        .map(|size| (format!("{}k", size / 1000), Arc::new(synthetic_vocabulary(size, 7))))
        .collect()
}

fn bench_fsm(c: &mut Criterion) {
    let limits = CompileLimits::default();
    for (vocab_name, vocab) in vocabularies() {
        let mut group = c.benchmark_group(format!("fsm/{vocab_name}"));
        group.sample_size(20);
        let mut words = vec![0i32; vocab.num_mask_words()];
        for (name, pattern) in schema_patterns() {
            group.bench_function(BenchmarkId::new("time_to_first_mask", name), |b| {
                b.iter(|| {
                    vocab.clear_caches();
                    let fsm = TokenFsm::from_regex(&pattern, vocab.clone(), &limits).unwrap();
                    fsm.fill_bitmask(fsm.start_state(), &mut words).unwrap();
                    black_box(&words);
                })
            });
            let fsm = TokenFsm::from_regex(&pattern, vocab.clone(), &limits).unwrap();
            let walk = random_walk(&fsm, 1000, 11);
            group.bench_function(BenchmarkId::new("cold_walk_1000_steps", name), |b| {
                b.iter(|| {
                    vocab.clear_caches();
                    let fsm = TokenFsm::from_regex(&pattern, vocab.clone(), &limits).unwrap();
                    replay(&fsm, &walk, &mut words);
                })
            });
            group.bench_function(BenchmarkId::new("warm_step", name), |b| {
                replay(&fsm, &walk, &mut words);
                let mut at = 0;
                let mut state = fsm.start_state();
                b.iter(|| {
                    if at % walk.len() == 0 {
                        state = fsm.start_state();
                    }
                    let token = walk[at % walk.len()];
                    at += 1;
                    fsm.fill_bitmask(state, &mut words).unwrap();
                    state = match token {
                        Some(token) => fsm.advance(state, token).unwrap(),
                        None => fsm.start_state(),
                    };
                    black_box(state);
                })
            });
            let batch: Vec<(&TokenFsm, u32)> =
                walk_states(&fsm, &walk).into_iter().take(64).map(|s| (&fsm, s)).collect();
            let mut out = vec![0i32; batch.len() * vocab.num_mask_words()];
            group.bench_function(BenchmarkId::new("batch_fill_64", name), |b| {
                b.iter(|| fill_bitmasks(black_box(&batch), &mut out, vocab.num_mask_words()).unwrap())
            });
        }
        group.finish();
    }
}

/// Fill + advance along a walk (`None` restarts at the start state).
fn replay(fsm: &TokenFsm, walk: &[Option<u32>], words: &mut [i32]) {
    let mut state = fsm.start_state();
    for token in walk {
        fsm.fill_bitmask(state, words).unwrap();
        state = match token {
            Some(token) => fsm.advance(state, *token).unwrap(),
            None => fsm.start_state(),
        };
    }
}

fn walk_states(fsm: &TokenFsm, walk: &[Option<u32>]) -> Vec<u32> {
    let mut states = Vec::new();
    let mut state = fsm.start_state();
    for token in walk {
        states.push(state);
        state = match token {
            Some(token) => fsm.advance(state, *token).unwrap(),
            None => fsm.start_state(),
        };
    }
    states
}

criterion_group!(benches, bench_fsm);
criterion_main!(benches);
