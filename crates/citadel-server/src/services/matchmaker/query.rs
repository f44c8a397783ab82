//! The match query language (`services.md` §3.3): a hand-written tokenizer
//! and recursive-descent parser that turns query text into an [`Expr`], and
//! the evaluation of an [`Expr`] against a ticket's [`Props`].
//!
//! Grammar (AND binds tighter than OR; keywords are case-insensitive):
//!
//! ```text
//! query      := "" | or
//! or         := and ( "OR" and )*
//! and        := primary ( "AND" primary )*
//! primary    := "(" or ")" | IDENT OP literal
//! OP         := "==" | "!=" | "<" | "<=" | ">" | ">="
//! literal    := STRING | NUMBER      (strings only with == and !=)
//! ```
//!
//! What it is not: it knows nothing of tickets or the queue. It depends on
//! `std` only, so the fuzz target (`fuzz/fuzz_targets/match_query.rs`)
//! compiles this very file. Call order: [`parse`] once per ticket, then
//! [`Expr::matches`] per candidate.

use std::collections::BTreeMap;
use std::fmt;

/// A property value: a string or a finite number.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// UTF-8 text.
    Str(String),
    /// A finite number.
    Num(f64),
}

/// A ticket's properties, by key.
pub type Props = BTreeMap<String, Value>;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Every child holds (two or more children).
    And(Vec<Expr>),
    /// Any child holds (two or more children).
    Or(Vec<Expr>),
    /// `key op value`.
    Cmp {
        /// Property name.
        key: String,
        /// Operator.
        op: Op,
        /// Literal compared with.
        value: Value,
    },
}

impl Expr {
    /// Whether `props` satisfy the query. A missing property or a type
    /// mismatch makes that comparison false (`!=` included).
    pub fn matches(&self, props: &Props) -> bool {
        match self {
            Expr::And(children) => children.iter().all(|c| c.matches(props)),
            Expr::Or(children) => children.iter().any(|c| c.matches(props)),
            Expr::Cmp { key, op, value } => match (props.get(key), value) {
                (Some(Value::Str(have)), Value::Str(want)) => match op {
                    Op::Eq => have == want,
                    Op::Ne => have != want,
                    _ => false,
                },
                (Some(Value::Num(have)), Value::Num(want)) => match op {
                    Op::Eq => have == want,
                    Op::Ne => have != want,
                    Op::Lt => have < want,
                    Op::Le => have <= want,
                    Op::Gt => have > want,
                    Op::Ge => have >= want,
                },
                _ => false,
            },
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) => write!(f, "\"{s}\""),
            Value::Num(n) => write!(f, "{n}"),
        }
    }
}

/// The canonical text of a query: parsing it gives the same [`Expr`].
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, children: &[Expr], sep: &str| {
            for (i, child) in children.iter().enumerate() {
                if i > 0 {
                    f.write_str(sep)?;
                }
                // Only an OR inside an AND needs parentheses.
                match child {
                    Expr::Or(_) if sep == " AND " => write!(f, "({child})")?,
                    _ => write!(f, "{child}")?,
                }
            }
            Ok(())
        };
        match self {
            Expr::And(children) => list(f, children, " AND "),
            Expr::Or(children) => list(f, children, " OR "),
            Expr::Cmp { key, op, value } => write!(f, "{key} {} {value}", op.text()),
        }
    }
}

/// Why a query was refused: `at byte <offset>: <what>`. The owner prefixes
/// it with `invalid match query: `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    /// Byte offset into the query text.
    pub at: usize,
    /// What was wrong there.
    pub what: String,
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.at, self.what)
    }
}

impl std::error::Error for QueryError {}

/// Bounds of one parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest query text, in bytes.
    pub max_bytes: usize,
    /// Deepest parenthesis nesting.
    pub max_depth: usize,
}

#[derive(Debug, Clone, PartialEq)]
enum Token<'a> {
    Ident(&'a str),
    And,
    Or,
    Op(Op),
    Str(&'a str),
    Num(f64),
    Open,
    Close,
    End,
}

fn describe(token: &Token<'_>) -> String {
    match token {
        Token::Ident(s) => format!("identifier `{s}`"),
        Token::And => "`AND`".into(),
        Token::Or => "`OR`".into(),
        Token::Op(op) => format!("`{}`", op.text()),
        Token::Str(_) => "a string".into(),
        Token::Num(_) => "a number".into(),
        Token::Open => "`(`".into(),
        Token::Close => "`)`".into(),
        Token::End => "the end of the query".into(),
    }
}

struct Lexer<'a> {
    text: &'a str,
    pos: usize,
}

fn err<T>(at: usize, what: impl Into<String>) -> Result<T, QueryError> {
    Err(QueryError {
        at,
        what: what.into(),
    })
}

impl<'a> Lexer<'a> {
    /// The next token and where it starts.
    fn next(&mut self) -> Result<(usize, Token<'a>), QueryError> {
        let bytes = self.text.as_bytes();
        while self.pos < bytes.len() && bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        let start = self.pos;
        let Some(&b) = bytes.get(start) else {
            return Ok((start, Token::End));
        };
        let two = |second: u8| bytes.get(start + 1) == Some(&second);
        let (len, token) = match b {
            b'(' => (1, Token::Open),
            b')' => (1, Token::Close),
            b'=' if two(b'=') => (2, Token::Op(Op::Eq)),
            b'!' if two(b'=') => (2, Token::Op(Op::Ne)),
            b'<' if two(b'=') => (2, Token::Op(Op::Le)),
            b'>' if two(b'=') => (2, Token::Op(Op::Ge)),
            b'<' => (1, Token::Op(Op::Lt)),
            b'>' => (1, Token::Op(Op::Gt)),
            b'=' => return err(start, "`=` is not an operator (use `==`)"),
            b'"' => {
                let Some(end) = self.text[start + 1..].find('"') else {
                    return err(start, "unterminated string");
                };
                let body = &self.text[start + 1..start + 1 + end];
                (end + 2, Token::Str(body))
            }
            b'-' | b'0'..=b'9' | b'.' => {
                let digits = bytes[start + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit() || **c == b'.')
                    .count();
                let text = &self.text[start..start + 1 + digits];
                let value: f64 = match text.parse() {
                    Ok(v) if text.bytes().any(|c| c.is_ascii_digit()) => v,
                    _ => return err(start, format!("invalid number `{text}`")),
                };
                if !value.is_finite() {
                    return err(start, "number must be finite");
                }
                (text.len(), Token::Num(value))
            }
            b if b.is_ascii_alphabetic() || b == b'_' => {
                let len = bytes[start..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_' || **c == b'.')
                    .count();
                let word = &self.text[start..start + len];
                let token = if word.eq_ignore_ascii_case("and") {
                    Token::And
                } else if word.eq_ignore_ascii_case("or") {
                    Token::Or
                } else {
                    Token::Ident(word)
                };
                (len, token)
            }
            _ => {
                let c = self.text[start..].chars().next().unwrap_or('?');
                return err(
                    start,
                    format!("unexpected character `{}`", c.escape_debug()),
                );
            }
        };
        self.pos = start + len;
        Ok((start, token))
    }
}

/// Adds `child` to an OR (`or`) or AND list, splicing a nested list of the
/// same operator so that `(a AND b) AND c` is one three-way AND.
fn push_flat(children: &mut Vec<Expr>, child: Expr, or: bool) {
    match child {
        Expr::Or(inner) if or => children.extend(inner),
        Expr::And(inner) if !or => children.extend(inner),
        other => children.push(other),
    }
}

struct Parser<'a> {
    lexer: Lexer<'a>,
    ahead: (usize, Token<'a>),
    depth: usize,
    max_depth: usize,
}

impl<'a> Parser<'a> {
    fn bump(&mut self) -> Result<(usize, Token<'a>), QueryError> {
        let next = self.lexer.next()?;
        Ok(std::mem::replace(&mut self.ahead, next))
    }

    fn or(&mut self) -> Result<Expr, QueryError> {
        let mut children = Vec::new();
        push_flat(&mut children, self.and()?, true);
        while self.ahead.1 == Token::Or {
            self.bump()?;
            push_flat(&mut children, self.and()?, true);
        }
        Ok(if children.len() == 1 {
            children.remove(0)
        } else {
            Expr::Or(children)
        })
    }

    fn and(&mut self) -> Result<Expr, QueryError> {
        let mut children = Vec::new();
        push_flat(&mut children, self.primary()?, false);
        while self.ahead.1 == Token::And {
            self.bump()?;
            push_flat(&mut children, self.primary()?, false);
        }
        Ok(if children.len() == 1 {
            children.remove(0)
        } else {
            Expr::And(children)
        })
    }

    fn primary(&mut self) -> Result<Expr, QueryError> {
        let (at, token) = self.bump()?;
        match token {
            Token::Open => {
                self.depth += 1;
                if self.depth > self.max_depth {
                    return err(at, format!("nesting deeper than {}", self.max_depth));
                }
                let inner = self.or()?;
                let (close_at, close) = self.bump()?;
                if close != Token::Close {
                    return err(
                        close_at,
                        format!("expected `)`, found {}", describe(&close)),
                    );
                }
                self.depth -= 1;
                Ok(inner)
            }
            Token::Ident(key) => {
                let (op_at, op) = self.bump()?;
                let Token::Op(op) = op else {
                    return err(
                        op_at,
                        format!("expected a comparison operator, found {}", describe(&op)),
                    );
                };
                let (lit_at, literal) = self.bump()?;
                let value = match literal {
                    Token::Num(n) => Value::Num(n),
                    Token::Str(s) if matches!(op, Op::Eq | Op::Ne) => Value::Str(s.to_owned()),
                    Token::Str(_) => {
                        return err(
                            lit_at,
                            format!("`{}` cannot compare strings (only == and !=)", op.text()),
                        );
                    }
                    other => {
                        return err(
                            lit_at,
                            format!("expected a string or a number, found {}", describe(&other)),
                        );
                    }
                };
                Ok(Expr::Cmp {
                    key: key.to_owned(),
                    op,
                    value,
                })
            }
            other => err(
                at,
                format!(
                    "expected a property name or `(`, found {}",
                    describe(&other)
                ),
            ),
        }
    }
}

/// Parses `text`; `Ok(None)` for an empty (or all-whitespace) query, which
/// accepts anyone.
pub fn parse(text: &str, limits: Limits) -> Result<Option<Expr>, QueryError> {
    if text.len() > limits.max_bytes {
        return err(
            limits.max_bytes,
            format!("query longer than {} bytes", limits.max_bytes),
        );
    }
    if text.trim().is_empty() {
        return Ok(None);
    }
    let mut lexer = Lexer { text, pos: 0 };
    let ahead = lexer.next()?;
    let mut parser = Parser {
        lexer,
        ahead,
        depth: 0,
        max_depth: limits.max_depth,
    };
    let expr = parser.or()?;
    match &parser.ahead {
        (_, Token::End) => Ok(Some(expr)),
        (at, other) => err(*at, format!("unexpected {}", describe(other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_bytes: 1024,
        max_depth: 8,
    };

    fn props(pairs: &[(&str, Value)]) -> Props {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    fn q(text: &str) -> Expr {
        parse(text, LIMITS).unwrap().unwrap()
    }

    fn fails(text: &str) -> String {
        parse(text, LIMITS).unwrap_err().to_string()
    }

    #[test]
    fn precedence_parentheses_and_keywords() {
        let e = q(r#"mode == "ranked" and (skill >= 1200 OR region == "jp")"#);
        assert_eq!(
            e.to_string(),
            r#"mode == "ranked" AND (skill >= 1200 OR region == "jp")"#
        );
        let e = q("a == 1 OR b == 2 AND c == 3");
        assert!(matches!(&e, Expr::Or(c) if c.len() == 2 && matches!(c[1], Expr::And(_))));
        assert_eq!(parse("  ", LIMITS), Ok(None));
        assert_eq!(q("x.y_z >= -1.5").to_string(), "x.y_z >= -1.5");
        assert_eq!(
            q("(a == 1 AND b == 2) AND (c == 3 OR (d == 4 OR e == 5))").to_string(),
            "a == 1 AND b == 2 AND (c == 3 OR d == 4 OR e == 5)"
        );
    }

    #[test]
    fn evaluation_missing_and_mismatched_are_false() {
        let p = props(&[
            ("mode", Value::Str("ranked".into())),
            ("skill", Value::Num(1300.0)),
        ]);
        assert!(q(r#"mode == "ranked" AND skill >= 1200"#).matches(&p));
        assert!(!q(r#"mode == "casual" OR skill < 1200"#).matches(&p));
        assert!(!q("region != 3").matches(&p), "missing");
        assert!(!q(r#"region != "eu""#).matches(&p), "missing");
        assert!(!q("mode == 1").matches(&p), "mismatch");
        assert!(!q(r#"skill != "x""#).matches(&p), "mismatch");
        assert!(q("skill != 1").matches(&p));
        assert!(q("skill > 1299.5 AND skill <= 1300 AND skill == 1300").matches(&p));
    }

    #[test]
    fn errors_say_where_and_what() {
        assert_eq!(
            fails("mode = 1"),
            "at byte 5: `=` is not an operator (use `==`)"
        );
        assert_eq!(
            fails(r#"mode >= "x""#),
            "at byte 8: `>=` cannot compare strings (only == and !=)"
        );
        assert_eq!(fails(r#"mode == "x"#), "at byte 8: unterminated string");
        assert_eq!(
            fails("(a == 1"),
            "at byte 7: expected `)`, found the end of the query"
        );
        assert_eq!(fails("a == 1 b"), "at byte 7: unexpected identifier `b`");
        assert_eq!(
            fails("a == 1 AND"),
            "at byte 10: expected a property name or `(`, found the end of the query"
        );
        assert_eq!(fails("a == 1.2.3"), "at byte 5: invalid number `1.2.3`");
        assert_eq!(fails("a == -"), "at byte 5: invalid number `-`");
        assert_eq!(
            fails(&format!("a == 1{}", "0".repeat(400))),
            "at byte 5: number must be finite"
        );
        assert_eq!(fails("a == é"), "at byte 5: unexpected character `é`");
        assert_eq!(
            fails("a b"),
            "at byte 2: expected a comparison operator, found identifier `b`"
        );
        assert_eq!(
            fails("NOT a == 1"),
            "at byte 4: expected a comparison operator, found identifier `a`"
        );
        assert_eq!(fails(&"(".repeat(9)), "at byte 8: nesting deeper than 8");
        assert_eq!(
            fails(&"a".repeat(1025)),
            "at byte 1024: query longer than 1024 bytes"
        );
    }

    proptest::proptest! {
        /// What the fuzz target checks, on a token-shaped alphabet: no
        /// panic, and an accepted query prints to text that parses back.
        #[test]
        fn parse_never_panics_and_round_trips(text in "[ab.c_ ()\"=!<>0-9.AaNnDdOoRr-]{0,60}") {
            if let Ok(Some(expr)) = parse(&text, LIMITS) {
                let wide = Limits { max_bytes: usize::MAX, max_depth: LIMITS.max_depth };
                proptest::prop_assert_eq!(parse(&expr.to_string(), wide), Ok(Some(expr)));
            }
        }
    }

    #[test]
    fn strings_have_no_escapes() {
        let e = q(r#"name == "a\""#);
        let p = props(&[("name", Value::Str("a\\".into()))]);
        assert!(e.matches(&p));
    }
}
