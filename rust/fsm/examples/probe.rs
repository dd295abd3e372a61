use sglr_fsm::*;
use std::sync::Arc;
use std::time::Instant;

fn load(path: &str) -> Vec<Option<Vec<u8>>> {
    let data = std::fs::read(path).unwrap();
    let n = u32::from_le_bytes(data[0..4].try_into().unwrap()) as usize;
    let mut at = 4;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = i32::from_le_bytes(data[at..at + 4].try_into().unwrap());
        at += 4;
        if len < 0 {
            out.push(None);
        } else {
            out.push(Some(data[at..at + len as usize].to_vec()));
            at += len as usize;
        }
    }
    out
}

fn main() {
    let t = Instant::now();
    let tokens = load("/tmp/cl100k.bin");
    let vocab = Arc::new(Vocabulary::new(tokens, vec![100257]).unwrap());
    println!("vocab build {:?}", t.elapsed());
    let patterns: Vec<String> = std::env::args()
        .skip(1)
        .map(|a| {
            if let Some(f) = a.strip_prefix('@') {
                std::fs::read_to_string(f).unwrap()
            } else {
                a
            }
        })
        .collect();
    for p in &patterns {
        phases(p);
        let t = Instant::now();
        let fsm = TokenFsm::from_regex(p, vocab.clone(), &CompileLimits::default()).unwrap();
        let dfa_t = t.elapsed();
        let mut out = vec![0i32; vocab.num_mask_words()];
        fsm.fill_bitmask(fsm.start_state(), &mut out).unwrap();
        let first = t.elapsed();
        let t2 = Instant::now();
        let n = fsm.build_all(usize::MAX);
        let all = t2.elapsed();
        let st = fsm.stats();
        println!(
            "{}: dfa {:?} first mask {:?} all({n} token states of {}) {:?} mem {} KB dense {}",
            p.chars().take(40).collect::<String>(),
            dfa_t,
            first,
            st.num_states,
            all,
            st.memory_bytes / 1024,
            st.num_dense_rows
        );
    }
}

#[allow(dead_code)]
pub fn phases(p: &str) {
    use regex_automata::dfa::{dense, StartKind};
    use regex_automata::nfa::thompson::{self, WhichCaptures};
    use regex_automata::MatchKind;
    let t = Instant::now();
    let hir = regex_syntax::ParserBuilder::new()
        .nest_limit(1000)
        .build()
        .parse(p)
        .unwrap();
    let t1 = t.elapsed();
    let nfa = thompson::Compiler::new()
        .configure(thompson::Config::new().which_captures(WhichCaptures::None))
        .build_from_hir(&hir)
        .unwrap();
    let t2 = t.elapsed();
    let dfa = dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Anchored)
                .accelerate(false)
                .minimize(false),
        )
        .build_from_nfa(&nfa)
        .unwrap();
    let t3 = t.elapsed();
    println!(
        "parse {:?} nfa {:?} ({} states) dfa {:?} ({} bytes)",
        t1,
        t2 - t1,
        nfa.states().len(),
        t3 - t2,
        dfa.memory_usage()
    );
}
