//! The nine-step RadixAttention example of the SGLang paper (its Figure 3), replayed through
//! the tree with a KV pool of 42 slots. Two chat sessions, a batch of few-shot queries that
//! share their examples, and self-consistency samples; LRU eviction when the pool is full.
//!
//! Every text segment is a run of distinct stand-in token ids. After each step the test
//! asserts the exact tree shape and exactly which segments were evicted.

use std::collections::BTreeSet;

use sglr_radix::RadixTree;

const CAPACITY: u32 = 42;

/// A named run of stand-in tokens.
#[derive(Clone)]
struct Seg(Vec<u32>);

fn seg(first: u32, len: u32) -> Seg {
    Seg((first..first + len).collect())
}

fn cat(parts: &[&Seg]) -> Vec<u32> {
    parts.iter().flat_map(|s| s.0.iter().copied()).collect()
}

/// A tree plus a free list of slot ids, running requests the way the engine will:
/// match + lock the prompt's prefix, allocate the rest (evicting LRU leaves when the pool is
/// short), insert prompt + output, unlock.
struct Sim {
    tree: RadixTree,
    free: Vec<u32>,
    slot_tokens: Vec<u32>,
    evicted_tokens: BTreeSet<u32>,
}

impl Sim {
    fn new() -> Self {
        Self {
            tree: RadixTree::new(),
            free: (0..CAPACITY).rev().collect(),
            slot_tokens: vec![0; CAPACITY as usize],
            evicted_tokens: BTreeSet::new(),
        }
    }

    fn alloc(&mut self, tokens: &[u32]) -> Vec<u32> {
        if self.free.len() < tokens.len() {
            let freed = self.tree.evict(tokens.len() - self.free.len());
            for &slot in &freed {
                self.evicted_tokens.insert(self.slot_tokens[slot as usize]);
            }
            self.free.extend(freed);
        }
        assert!(self.free.len() >= tokens.len(), "pool exhausted");
        let slots = self.free.split_off(self.free.len() - tokens.len());
        for (&slot, &token) in slots.iter().zip(tokens) {
            self.slot_tokens[slot as usize] = token;
        }
        slots
    }

    /// Runs one prompt with one or more sampled outputs that share its KV.
    fn run(&mut self, prompt: &[u32], outputs: &[&[u32]]) -> BTreeSet<u32> {
        self.evicted_tokens.clear();
        let matched = self.tree.match_prefix(None, prompt);
        self.tree.lock(matched.node).unwrap();
        let mut prompt_slots = matched.slots.clone();
        prompt_slots.extend(self.alloc(&prompt[matched.slots.len()..]));
        let output_slots: Vec<Vec<u32>> = outputs.iter().map(|out| self.alloc(out)).collect();
        for (out, slots) in outputs.iter().zip(output_slots) {
            let tokens: Vec<u32> = prompt.iter().chain(out.iter()).copied().collect();
            let all_slots: Vec<u32> = prompt_slots.iter().chain(&slots).copied().collect();
            let num_cached = self.tree.insert(None, &tokens, &all_slots).unwrap().num_cached;
            assert!(num_cached >= matched.slots.len());
        }
        self.tree.unlock(matched.node).unwrap();
        self.tree.check_invariants().unwrap();
        assert_eq!(self.free.len() + self.tree.total_size(), CAPACITY as usize);
        std::mem::take(&mut self.evicted_tokens)
    }

    fn shape(&self) -> Vec<(usize, Vec<u32>)> {
        self.tree.dump(None).into_iter().map(|v| (v.depth, v.tokens)).collect()
    }
}

fn tokens_of(parts: &[&Seg]) -> BTreeSet<u32> {
    cat(parts).into_iter().collect()
}

#[test]
fn radix_attention_nine_steps() {
    // Chat: system prompt, session 1 (turns 1, 2 and a later message), session 2 (turns 1, 2).
    let sys = seg(100, 6);
    let (u1, a1, u2, a2) = (seg(200, 3), seg(210, 3), seg(220, 10), seg(240, 10));
    let (u3, a3, u4, a4) = (seg(300, 4), seg(310, 4), seg(320, 3), seg(330, 3));
    let (u5, a5) = (seg(400, 6), seg(410, 6));
    // Few-shot: shared examples, four questions, one answer; self-consistency samples.
    let examples = seg(500, 8);
    let (q1, ans1, q2, q3, q4) = (seg(600, 1), seg(610, 1), seg(620, 1), seg(630, 1), seg(640, 1));
    let samples: Vec<Vec<u32>> = (0..3).map(|i| seg(700 + 10 * i, 3).0).collect();

    let mut sim = Sim::new();
    // (1) Initially the tree is empty.
    assert!(sim.shape().is_empty());

    // (2) Session 1, turn 1: system prompt + "Hello!" -> "Hi!" becomes one edge.
    assert!(sim.run(&cat(&[&sys, &u1]), &[&a1.0]).is_empty());
    assert_eq!(sim.shape(), vec![(1, cat(&[&sys, &u1, &a1]))]);

    // (3) Session 1, turn 2 reuses turn 1 and appends a node.
    assert!(sim.run(&cat(&[&sys, &u1, &a1, &u2]), &[&a2.0]).is_empty());
    assert_eq!(sim.shape(), vec![(1, cat(&[&sys, &u1, &a1])), (2, cat(&[&u2, &a2]))]);

    // (4) Session 2 starts: the first edge splits so both sessions share the system prompt.
    assert!(sim.run(&cat(&[&sys, &u3]), &[&a3.0]).is_empty());
    assert_eq!(
        sim.shape(),
        vec![(1, sys.0.clone()), (2, cat(&[&u1, &a1])), (3, cat(&[&u2, &a2])), (2, cat(&[&u3, &a3]))]
    );

    // (5) Session 2 continues; the pool is full, so the LRU leaf (session 1's turn 2) goes.
    let evicted = sim.run(&cat(&[&sys, &u3, &a3, &u4]), &[&a4.0]);
    assert_eq!(evicted, tokens_of(&[&u2, &a2]));
    assert_eq!(
        sim.shape(),
        vec![(1, sys.0.clone()), (2, cat(&[&u1, &a1])), (2, cat(&[&u3, &a3])), (3, cat(&[&u4, &a4]))]
    );

    // (6) A few-shot query shares nothing: the root gets a second child.
    assert!(sim.run(&cat(&[&examples, &q1]), &[&ans1.0]).is_empty());
    let chats = vec![(1, sys.0.clone()), (2, cat(&[&u1, &a1])), (2, cat(&[&u3, &a3])), (3, cat(&[&u4, &a4]))];
    let mut expected = chats.clone();
    expected.push((1, cat(&[&examples, &q1, &ans1])));
    assert_eq!(sim.shape(), expected);

    // (7) A batch of queries with the same examples (prefill only) splits the few-shot edge.
    for q in [&q2, &q3, &q4] {
        assert!(sim.run(&cat(&[&examples, q]), &[&[]]).is_empty());
    }
    let mut expected = chats;
    expected.extend([
        (1, examples.0.clone()),
        (2, cat(&[&q1, &ans1])),
        (2, q2.0.clone()),
        (2, q3.0.clone()),
        (2, q4.0.clone()),
    ]);
    assert_eq!(sim.shape(), expected);

    // (8) Session 1 sends a new message: session 2's nodes are least recently used and go.
    let evicted = sim.run(&cat(&[&sys, &u1, &a1, &u5]), &[&a5.0]);
    assert_eq!(evicted, tokens_of(&[&u3, &a3, &u4, &a4]));
    let few_shot_after_8 = [
        (1, examples.0.clone()),
        (2, cat(&[&q1, &ans1])),
        (2, q2.0.clone()),
        (2, q3.0.clone()),
        (2, q4.0.clone()),
    ];
    let mut expected = vec![(1, sys.0.clone()), (2, cat(&[&u1, &a1])), (3, cat(&[&u5, &a5]))];
    expected.extend(few_shot_after_8);
    assert_eq!(sim.shape(), expected);

    // (9) Self-consistency: three samples for question 2. Making room evicts the other
    // few-shot leaves (question 1 with its answer, questions 3 and 4), nothing else.
    let sample_refs: Vec<&[u32]> = samples.iter().map(Vec::as_slice).collect();
    let evicted = sim.run(&cat(&[&examples, &q2]), &sample_refs);
    assert_eq!(evicted, tokens_of(&[&q1, &ans1, &q3, &q4]));
    let mut expected = vec![(1, sys.0.clone()), (2, cat(&[&u1, &a1])), (3, cat(&[&u5, &a5]))];
    expected.extend([(1, examples.0.clone()), (2, q2.0.clone())]);
    expected.extend(samples.iter().map(|s| (3, s.clone())));
    assert_eq!(sim.shape(), expected);
    assert_eq!(sim.tree.total_size(), CAPACITY as usize);
}
