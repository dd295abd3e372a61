//! The parsed form of EBNF text, before it becomes rules and lexemes.

/// 1-based line and column of a construct, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    pub line: usize,
    pub column: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expr {
    Sequence(Vec<Expr>),
    Alternation(Vec<Expr>),
    Literal(String),
    /// A character class: negated, and inclusive ranges.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    /// A Lark `/regex/` terminal, used verbatim.
    Regex(String),
    Reference {
        name: String,
        at: Position,
    },
    Repeat {
        inner: Box<Expr>,
        min: u32,
        max: Option<u32>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuleDef {
    pub name: String,
    pub at: Position,
    pub body: Expr,
}
