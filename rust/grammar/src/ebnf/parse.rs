//! Recursive-descent parser for EBNF text; every error carries the line and column.

use crate::ebnf::ast::{Expr, Position, RuleDef};
use crate::error::GrammarError;

/// Largest bound of a `{m,n}` repetition (each copy becomes grammar symbols).
const MAX_REPEAT: u32 = 1000;

struct Parser {
    chars: Vec<char>,
    index: usize,
    line: usize,
    column: usize,
}

pub(crate) fn parse_rules(text: &str) -> Result<Vec<RuleDef>, GrammarError> {
    let mut parser = Parser { chars: text.chars().collect(), index: 0, line: 1, column: 1 };
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
        let body = self.alternation()?;
        Ok(RuleDef { name, at, body })
    }

    fn alternation(&mut self) -> Result<Expr, GrammarError> {
        let mut branches = vec![self.sequence()?];
        while self.peek() == Some('|') {
            self.bump();
            branches.push(self.sequence()?);
        }
        Ok(if branches.len() == 1 {
            branches.pop().expect("one branch")
        } else {
            Expr::Alternation(branches)
        })
    }

    fn sequence(&mut self) -> Result<Expr, GrammarError> {
        let mut items = Vec::new();
        loop {
            self.skip_blank();
            match self.peek() {
                None | Some('|' | ')') => break,
                Some(_) if self.at_rule_start() => break,
                Some(_) => items.push(self.postfixed()?),
            }
        }
        Ok(if items.len() == 1 { items.pop().expect("one item") } else { Expr::Sequence(items) })
    }

    fn postfixed(&mut self) -> Result<Expr, GrammarError> {
        let mut expr = self.atom()?;
        loop {
            let (min, max) = match self.peek() {
                Some('?') => (0, Some(1)),
                Some('*') => (0, None),
                Some('+') => (1, None),
                Some('{') => {
                    self.bump();
                    let bounds = self.bounds()?;
                    expr = Expr::Repeat { inner: Box::new(expr), min: bounds.0, max: bounds.1 };
                    continue;
                }
                _ => return Ok(expr),
            };
            self.bump();
            expr = Expr::Repeat { inner: Box::new(expr), min, max };
        }
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

    fn atom(&mut self) -> Result<Expr, GrammarError> {
        let at = self.position();
        match self.peek() {
            Some('"' | '\'') => self.literal(),
            Some('[') => self.class(),
            Some('/') => self.regex(),
            Some('(') => {
                self.bump();
                let inner = self.alternation()?;
                self.skip_blank();
                if self.bump() != Some(')') {
                    return Err(error_at(at, "unclosed '('"));
                }
                Ok(inner)
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let name = self.identifier().expect("starts with a letter");
                Ok(Expr::Reference { name, at })
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
