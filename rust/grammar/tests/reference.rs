//! A naive recognizer for test grammars: fixed-point over spans (CYK without normal form),
//! independent of the Earley parser. Lexemes are checked with the `regex` crate.

use sglr_grammar::{Grammar, Symbol};

pub struct Reference<'g> {
    grammar: &'g Grammar,
    lexemes: Vec<regex::bytes::Regex>,
}

impl<'g> Reference<'g> {
    pub fn new(grammar: &'g Grammar) -> Self {
        let lexemes = (0..grammar.num_lexemes() as u32)
            .map(|l| {
                regex::bytes::Regex::new(&format!("^(?:{})$", grammar.lexeme_pattern(l).unwrap())).unwrap()
            })
            .collect();
        Self { grammar, lexemes }
    }

    /// Whether the grammar's start symbol (rule 0's left-hand side) derives `text`.
    pub fn accepts(&self, text: &[u8]) -> bool {
        let n = text.len();
        let num_nonterminals = (0..self.grammar.num_rules() as u32)
            .map(|r| self.grammar.rule(r).lhs as usize + 1)
            .max()
            .unwrap();
        let mut derives = vec![vec![vec![false; n + 1]; n + 1]; num_nonterminals];
        let mut changed = true;
        while changed {
            changed = false;
            for rule in (0..self.grammar.num_rules() as u32).map(|r| self.grammar.rule(r)) {
                for i in 0..=n {
                    for j in i..=n {
                        if !derives[rule.lhs as usize][i][j] && self.sequence(&rule.rhs, text, i, j, &derives)
                        {
                            derives[rule.lhs as usize][i][j] = true;
                            changed = true;
                        }
                    }
                }
            }
        }
        derives[self.grammar.rule(0).lhs as usize][0][n]
    }

    fn sequence(&self, rhs: &[Symbol], text: &[u8], i: usize, j: usize, derives: &[Vec<Vec<bool>>]) -> bool {
        let Some((first, rest)) = rhs.split_first() else { return i == j };
        (i..=j).any(|k| {
            let head = match *first {
                Symbol::Lexeme(l) => self.lexemes[l as usize].is_match(&text[i..k]),
                Symbol::Nonterminal(a) => derives[a as usize][i][k],
            };
            head && self.sequence(rest, text, k, j, derives)
        })
    }
}
