//! Recursive-descent parser for EBNF text; every error carries the line and column.

use crate::ebnf::ast::{Expr, Position, RuleDef};
use crate::error::GrammarError;

/// Largest bound of a `{m,n}` repetition (each copy becomes grammar symbols).
const MAX_REPEAT: u32 = 1000;
/// Deepest nesting of groups, and of expressions inside expressions (a repetition of a
/// repetition, an alternation in a sequence): the parser, the lowering and the tree's drop all
/// recurse along it, so hostile text must not overflow the stack.
pub(crate) const MAX_NESTING: usize = 100;

struct Parser {
    chars: Vec<char>,
    index: usize,
    line: usize,
    column: usize,
    open_groups: usize,
}

/// An expression and how deeply it nests (a literal: 1).
type Nested = (Expr, usize);

pub(crate) fn parse_rules(text: &str) -> Result<Vec<RuleDef>, GrammarError> {
    let mut parser = Parser { chars: text.chars().collect(), index: 0, line: 1, column: 1, open_groups: 0 };
    let mut rules = Vec::new();
    parser.skip_blank();
    while !parser.at_end() {
        rules.push(parser.rule()?);
        parser.skip_blank();
    }
    if rules.is_empty() {
        return Err(parser.error("the grammar has no rules"));
    }
    Ok(rules)
}

impl Parser {
    fn at_end(&self) -> bool {
        self.index >= self.chars.len()
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.index).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.index + offset).copied()
    }

    fn position(&self) -> Position {
        Position { line: self.line, column: self.column }
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.index += 1;
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn error(&self, message: impl Into<String>) -> GrammarError {
        error_at(self.position(), message)
    }

    /// Skips whitespace (newlines included) and `#` / `//` comments.
    fn skip_blank(&mut self) {
        loop {
            match self.peek() {
                Some(c) if c.is_whitespace() => {
                    self.bump();
                }
                Some('#') => self.skip_line(),
                Some('/') if self.peek_at(1) == Some('/') => self.skip_line(),
                _ => return,
            }
        }
    }

    fn skip_line(&mut self) {
        while self.peek().is_some_and(|c| c != '\n') {
            self.bump();
        }
    }

    fn identifier(&mut self) -> Option<String> {
        let first = self.peek()?;
        if !(first.is_ascii_alphabetic() || first == '_') {
            return None;
        }
        let mut name = String::new();
        while let Some(c) =
            self.peek().filter(|&c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        {
            name.push(c);
            self.bump();
        }
        Some(name)
    }

    /// Whether a rule header (`name ::=` or `name :`) starts here; consumes nothing.
    fn at_rule_start(&mut self) -> bool {
        let saved = (self.index, self.line, self.column);
        if matches!(self.peek(), Some('?' | '!')) {
            self.bump();
        }
        let found = self.identifier().is_some() && {
            while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
                self.bump();
            }
            self.definition_operator_length() > 0
        };
        (self.index, self.line, self.column) = saved;
        found
    }

    /// Length of `::=` or `:` (not `::`) at the cursor, else 0.
    fn definition_operator_length(&self) -> usize {
        match (self.peek(), self.peek_at(1), self.peek_at(2)) {
            (Some(':'), Some(':'), Some('=')) => 3,
            (Some(':'), Some(':'), _) => 0,
            (Some(':'), _, _) => 1,
            _ => 0,
        }
    }

    fn rule(&mut self) -> Result<RuleDef, GrammarError> {
        if self.peek() == Some('%') {
            return Err(self.error("directives such as %import and %ignore are not supported"));
        }
        // Lark's inline / keep-all modifiers do not change the language.
        if matches!(self.peek(), Some('?' | '!')) {
            self.bump();
        }
        let at = self.position();
        let name = self.identifier().ok_or_else(|| self.error("expected a rule name"))?;
        while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
            self.bump();
        }
        let operator = self.definition_operator_length();
        if operator == 0 {
            return Err(self.error(format!("expected '::=' or ':' after rule name '{name}'")));
        }
        for _ in 0..operator {
            self.bump();
        }
        let (body, _) = self.alternation()?;
        Ok(RuleDef { name, at, body })
    }

    fn alternation(&mut self) -> Result<Nested, GrammarError> {
        let (first, mut depth) = self.sequence()?;
        let mut branches = vec![first];
        while self.peek() == Some('|') {
            self.bump();
            let (branch, branch_depth) = self.sequence()?;
            branches.push(branch);
            depth = depth.max(branch_depth);
        }
        if branches.len() == 1 {
            return Ok((branches.pop().expect("one branch"), depth));
        }
        self.nest(Expr::Alternation(branches), depth)
    }

    fn sequence(&mut self) -> Result<Nested, GrammarError> {
        let mut items = Vec::new();
        let mut depth = 0;
        loop {
            self.skip_blank();
            match self.peek() {
                None | Some('|' | ')') => break,
                Some(_) if self.at_rule_start() => break,
                Some(_) => {
                    let (item, item_depth) = self.postfixed()?;
                    items.push(item);
                    depth = depth.max(item_depth);
                }
            }
        }
        if items.len() == 1 {
            return Ok((items.pop().expect("one item"), depth));
        }
        self.nest(Expr::Sequence(items), depth)
    }

    fn postfixed(&mut self) -> Result<Nested, GrammarError> {
        let (mut expr, mut depth) = self.atom()?;
        loop {
            let (min, max) = match self.peek() {
                Some('?') => (0, Some(1)),
                Some('*') => (0, None),
                Some('+') => (1, None),
                Some('{') => {
                    self.bump();
                    let bounds = self.bounds()?;
                    (expr, depth) = self
                        .nest(Expr::Repeat { inner: Box::new(expr), min: bounds.0, max: bounds.1 }, depth)?;
                    continue;
                }
                _ => return Ok((expr, depth)),
            };
            self.bump();
            (expr, depth) = self.nest(Expr::Repeat { inner: Box::new(expr), min, max }, depth)?;
        }
    }

    /// `expr` over children nested `inner_depth` deep, refused past [`MAX_NESTING`].
    fn nest(&self, expr: Expr, inner_depth: usize) -> Result<Nested, GrammarError> {
        if inner_depth >= MAX_NESTING {
            return Err(self.error(format!("expressions nest deeper than {MAX_NESTING} levels")));
        }
        Ok((expr, inner_depth + 1))
    }

    /// `m}`, `m,}` or `m,n}` after the `{`.
    fn bounds(&mut self) -> Result<(u32, Option<u32>), GrammarError> {
        let min = self.number()?.ok_or_else(|| self.error("expected a repetition count"))?;
        let max = if self.peek() == Some(',') {
            self.bump();
            self.number()?
        } else {
            Some(min)
        };
        if self.bump() != Some('}') {
            return Err(self.error("expected '}' to close the repetition"));
        }
        if max.is_some_and(|max| max < min) {
            return Err(self.error(format!("repetition {{{min},{}}} has max < min", max.unwrap_or(0))));
        }
        Ok((min, max))
    }

    fn number(&mut self) -> Result<Option<u32>, GrammarError> {
        let mut digits = String::new();
        while let Some(c) = self.peek().filter(char::is_ascii_digit) {
            digits.push(c);
            self.bump();
        }
        if digits.is_empty() {
            return Ok(None);
        }
        match digits.parse::<u32>() {
            Ok(n) if n <= MAX_REPEAT => Ok(Some(n)),
            _ => Err(self.error(format!("repetition count {digits} exceeds {MAX_REPEAT}"))),
        }
    }

    fn atom(&mut self) -> Result<Nested, GrammarError> {
        let at = self.position();
        match self.peek() {
            Some('"' | '\'') => Ok((self.literal()?, 1)),
            Some('[') => Ok((self.class()?, 1)),
            Some('/') => Ok((self.regex()?, 1)),
            Some('(') => {
                if self.open_groups >= MAX_NESTING {
                    return Err(self.error(format!("groups nest deeper than {MAX_NESTING} levels")));
                }
                self.bump();
                self.open_groups += 1;
                let inner = self.alternation()?;
                self.open_groups -= 1;
                self.skip_blank();
                if self.bump() != Some(')') {
                    return Err(error_at(at, "unclosed '('"));
                }
                Ok(inner)
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let name = self.identifier().expect("starts with a letter");
                Ok((Expr::Reference { name, at }, 1))
            }
            Some(c) => Err(self.error(format!("unexpected character {c:?}"))),
            None => Err(self.error("unexpected end of grammar")),
        }
    }

    fn literal(&mut self) -> Result<Expr, GrammarError> {
        let at = self.position();
        let quote = self.bump().expect("a quote");
        let mut text = String::new();
        loop {
            match self.bump() {
                None | Some('\n') => return Err(error_at(at, "unterminated string literal")),
                Some(c) if c == quote => break,
                Some('\\') => text.push(self.escape()?),
                Some(c) => text.push(c),
            }
        }
        // Lark's case-insensitive flag would change the language: refuse it.
        if self.peek() == Some('i') && !self.peek_at(1).is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(self.error("case-insensitive literals (\"...\"i) are not supported"));
        }
        Ok(Expr::Literal(text))
    }

    /// The character of an escape after its backslash.
    fn escape(&mut self) -> Result<char, GrammarError> {
        let at = self.position();
        let c = self.bump().ok_or_else(|| self.error("unterminated escape"))?;
        let digits = match c {
            'n' => return Ok('\n'),
            'r' => return Ok('\r'),
            't' => return Ok('\t'),
            '0' => return Ok('\0'),
            '\\' | '"' | '\'' | '[' | ']' | '-' | '/' | '^' => return Ok(c),
            'x' => 2,
            'u' => 4,
            'U' => 8,
            _ => return Err(error_at(at, format!("unknown escape '\\{c}'"))),
        };
        let mut value = 0u32;
        for _ in 0..digits {
            let digit =
                self.bump().and_then(|d| d.to_digit(16)).ok_or_else(|| error_at(at, "bad hex escape"))?;
            value = value * 16 + digit;
        }
        char::from_u32(value)
            .ok_or_else(|| error_at(at, format!("\\{c} escape {value:#x} is not a character")))
    }

    fn class(&mut self) -> Result<Expr, GrammarError> {
        let at = self.position();
        self.bump();
        let negated = self.peek() == Some('^');
        if negated {
            self.bump();
        }
        let mut ranges = Vec::new();
        loop {
            let low = match self.bump() {
                None | Some('\n') => return Err(error_at(at, "unterminated character class")),
                Some(']') => break,
                Some('\\') => self.escape()?,
                Some(c) => c,
            };
            let high = if self.peek() == Some('-') && self.peek_at(1).is_some_and(|c| c != ']') {
                self.bump();
                match self.bump() {
                    Some('\\') => self.escape()?,
                    Some(c) => c,
                    None => return Err(error_at(at, "unterminated character class")),
                }
            } else {
                low
            };
            if high < low {
                return Err(error_at(at, format!("character range {low:?}-{high:?} is reversed")));
            }
            ranges.push((low, high));
        }
        if ranges.is_empty() {
            return Err(error_at(at, "empty character class"));
        }
        Ok(Expr::Class { negated, ranges })
    }

    fn regex(&mut self) -> Result<Expr, GrammarError> {
        let at = self.position();
        self.bump();
        let mut pattern = String::new();
        loop {
            match self.bump() {
                None | Some('\n') => return Err(error_at(at, "unterminated /regex/")),
                Some('/') => break,
                Some('\\') if self.peek() == Some('/') => {
                    self.bump();
                    pattern.push('/');
                }
                Some('\\') => {
                    pattern.push('\\');
                    pattern.push(self.bump().ok_or_else(|| error_at(at, "unterminated /regex/"))?);
                }
                Some(c) => pattern.push(c),
            }
        }
        if self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            return Err(self.error("regex flags are not supported"));
        }
        if let Err(e) = regex_syntax::ParserBuilder::new().nest_limit(64).build().parse(&pattern) {
            return Err(error_at(at, format!("invalid regex /{pattern}/: {e}")));
        }
        Ok(Expr::Regex(pattern))
    }
}

pub(crate) fn error_at(at: Position, message: impl Into<String>) -> GrammarError {
    GrammarError::Syntax { line: at.line, column: at.column, message: message.into() }
}
