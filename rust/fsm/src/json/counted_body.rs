//! Token masks of a plain JSON string with length bounds, at a character boundary, without a
//! vocabulary walk.
//!
//! Inside `"…"` with `minLength` / `maxLength`, every character read is a new state (a count),
//! and each state's mask was a walk of the whole vocabulary (about 1 ms at 100k tokens): one
//! such walk per token generated. Yet between characters, what a state allows depends only on
//! how many characters it may still take (`to_max`) and must still take before the closing
//! quote (`to_min`). So the vocabulary is read once ([`CountedBody`], kept by the vocabulary):
//! each token that stays inside the body, with the characters it needs (a character begun but
//! not finished counts), each token that ends right after the closing quote with the characters
//! before it, and each trie node after a closing quote with tokens below (where the string ends
//! part-way through a token). A state's mask is then the tokens needing at most `to_max`
//! (one mask kept per bound), the closing tokens and nodes whose characters lie
//! between `to_min` and `to_max`.

use super::string::json_string_char;
use crate::dfa::DEAD;
use crate::error::FsmError;
use sglr_vocab::Vocabulary;

/// What a plain JSON string body allows, token by token, for one vocabulary.
#[derive(Debug)]
pub struct CountedBody {
    /// Tokens that close the string with their last byte, by the characters before the quote.
    closing: Vec<(u32, u32)>,
    /// Trie nodes right after a closing quote with tokens below, by the characters before it.
    ends: Vec<(u32, u32)>,
    /// Most characters a token inside the body needs: past it, every such token fits.
    max_need: u32,
    /// `masks[b]`: the tokens that stay inside the body from a character boundary needing at
    /// most `b` characters, for `b` up to `max_need` (built together, each from the one before:
    /// a few hundred microseconds per vocabulary).
    masks: Vec<Vec<u32>>,
}

/// The allowed tokens of one counted state.
#[derive(Debug)]
pub struct CountedBodyMask {
    pub words: Vec<u32>,
    /// Trie nodes (ascending) after which the string has ended with more bytes to come.
    pub ends: Vec<u32>,
}

impl CountedBody {
    /// Reads the vocabulary's trie once (a walk of the string body from a character boundary).
    pub fn new(vocabulary: &Vocabulary) -> Result<Self, FsmError> {
        // NOTE: the counted lexeme's own unit (`json_string_counter`), so the table counts what
        // its windows count.
        let unit = json_string_char()?;
        let trie = vocabulary.trie();
        // Tokens that stay inside, by the characters they need (a character begun counts).
        let mut inside = Vec::new();
        let mut closing = Vec::new();
        let mut ends = Vec::new();
        // Per depth: the character's state and the characters completed before it.
        let mut stack: Vec<(u32, u32)> = vec![(unit.start(), 0); trie.max_depth + 1];
        let mut index = 1;
        let end = trie.nodes[0].subtree_end as usize;
        while index < end {
            let node = trie.nodes[index];
            let depth = node.depth as usize;
            let (state, done) = stack[depth - 1];
            let tokens = node.token_start as usize..trie.nodes[index + 1].token_start as usize;
            if state == unit.start() && node.byte == b'"' {
                // The closing quote: the string ends here, whatever follows is the grammar's.
                closing.extend(trie.token_ids[tokens].iter().map(|&token| (done, token)));
                if node.subtree_end as usize > index + 1 {
                    ends.push((done, index as u32));
                }
                index = node.subtree_end as usize;
                continue;
            }
            let next = unit.next(state, node.byte);
            if next == DEAD {
                index = node.subtree_end as usize;
                continue;
            }
            // A character's DFA accepts only where the character is complete (none is a
            // prefix of another), so an accepting state goes back to the boundary.
            let entry = if unit.is_accepting(next) { (unit.start(), done + 1) } else { (next, done) };
            stack[depth] = entry;
            let need = entry.1 + u32::from(entry.0 != unit.start());
            inside.extend(trie.token_ids[tokens].iter().map(|&token| (need, token)));
            index += 1;
        }
        inside.sort_unstable();
        ends.sort_unstable_by_key(|&(_, node)| node);
        let max_need = inside.last().map_or(0, |&(need, _)| need);
        let mut masks: Vec<Vec<u32>> = Vec::with_capacity(max_need as usize + 1);
        let mut words = vec![0u32; vocabulary.num_mask_words()];
        let mut next = 0;
        for bound in 0..=max_need {
            while let Some(&(_, token)) = inside.get(next).filter(|&&(need, _)| need <= bound) {
                words[token as usize >> 5] |= 1 << (token & 31);
                next += 1;
            }
            masks.push(words.clone());
        }
        Ok(Self { closing, ends, max_need, masks })
    }

    /// The tokens allowed at a character boundary with at least `to_min` and at most `to_max`
    /// (`None`: any number of) characters still to come before the closing quote.
    pub fn mask(&self, to_min: usize, to_max: Option<usize>) -> CountedBodyMask {
        let bound = to_max.map_or(self.max_need, |to_max| to_max.min(self.max_need as usize) as u32);
        let mut words = self.masks[bound as usize].clone();
        let fits =
            |chars: u32| chars as usize >= to_min && to_max.is_none_or(|to_max| chars as usize <= to_max);
        for &(chars, token) in &self.closing {
            if fits(chars) {
                words[token as usize >> 5] |= 1 << (token & 31);
            }
        }
        let ends = self.ends.iter().filter(|&&(chars, _)| fits(chars)).map(|&(_, node)| node).collect();
        CountedBodyMask { words, ends }
    }

    pub fn memory_bytes(&self) -> usize {
        (self.closing.capacity() + self.ends.capacity()) * 8
            + self.masks.iter().map(|m| m.capacity() * 4).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dfa::CompileLimits;
    use crate::json::json_string_counter;
    use crate::walk::walk_allowed;

    fn vocabulary() -> Vocabulary {
        let texts = [
            "\"", "a", "ab", "abc", "\",", "a\"", "ab\"}", "\\", "\\n", "\\u00", "\\u00e9", "é", "x\"y", "}",
            "\"\"",
        ];
        let mut tokens: Vec<Option<Vec<u8>>> = texts.iter().map(|t| Some(t.as_bytes().to_vec())).collect();
        tokens.push(Some(vec![0xc3]));
        tokens.push(None);
        let eos = tokens.len() as u32 - 1;
        Vocabulary::new(tokens, vec![eos]).unwrap()
    }

    /// At every count of several bounds, the body's mask is the walk of the counted window's
    /// state, and its ends are the window's accepting nodes with children.
    #[test]
    fn masks_equal_the_counted_walk_at_every_count() {
        let vocabulary = vocabulary();
        let body = CountedBody::new(&vocabulary).unwrap();
        let trie = vocabulary.trie();
        for (min, max) in [(0, Some(3)), (2, Some(2)), (1, None), (0, None), (3, Some(5))] {
            let counted = json_string_counter(min, max, &CompileLimits::default()).unwrap();
            let window = counted.window(trie.max_depth).unwrap();
            let mut state = counted.next(counted.start(), b'"');
            for count in 0..=max.unwrap_or(4) {
                let window_state = counted.window_state(&window, state);
                let mut expected = vec![0u32; vocabulary.num_mask_words()];
                walk_allowed(window.dfa(), trie, window_state, &mut expected, None);
                let to_min = min.saturating_sub(count);
                let to_max = max.map(|max| max - count);
                // The bounds here are below the window's reach: it keeps them as they are.
                assert_eq!(window.words_to_come(window_state), Some((to_min, to_max)));
                let got = body.mask(to_min, to_max);
                assert_eq!(got.words, expected, "bounds {min}..{max:?}, count {count}");
                // Ends by definition: nodes after a closing quote (where the window accepts)
                // with children, on a live path.
                let mut expected_ends = Vec::new();
                for index in 1..trie.nodes.len() - 1 {
                    let node = trie.nodes[index];
                    if node.subtree_end as usize > index + 1 && node.byte == b'"' {
                        let path = path_of(trie, index);
                        let reached = window.dfa().walk(window_state, &path);
                        if reached != DEAD && window.dfa().is_accepting(reached) {
                            expected_ends.push(index as u32);
                        }
                    }
                }
                assert_eq!(got.ends, expected_ends, "bounds {min}..{max:?}, count {count}");
                if max.is_some_and(|max| count == max) {
                    break;
                }
                state = counted.next(state, b'a');
            }
        }
    }

    fn path_of(trie: &sglr_vocab::TokenTrie, target: usize) -> Vec<u8> {
        let mut path = Vec::new();
        for index in 1..=target {
            let node = trie.nodes[index];
            if index == target || node.subtree_end as usize > target {
                path.truncate(node.depth as usize - 1);
                path.push(node.byte);
            }
        }
        path
    }
}
