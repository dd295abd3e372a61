//! Token strings as tokenizers store them -> the bytes the token stands for.
//!
//! Byte-level BPE (GPT-2, Llama 3, Qwen, ...) stores each byte as one printable character of a
//! fixed 256-character alphabet; sentencepiece stores a space as `▁` and bytes it cannot spell
//! as `<0xNN>` byte-fallback pieces. tiktoken files already hold raw bytes (no decoding).

use crate::error::VocabError;

/// How the token strings of a vocabulary encode their bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenEncoding {
    /// GPT-2 style byte-level alphabet (`Ġ` for space, `Ċ` for newline, ...).
    ByteLevel,
    /// Sentencepiece pieces: `▁` is a space and `<0xNN>` is the raw byte `NN`.
    SentencePiece,
    /// The string's own UTF-8 bytes (added tokens, character-level vocabularies).
    Utf8,
}

impl TokenEncoding {
    /// Parses the names used by the Python binding.
    pub fn from_name(name: &str) -> Result<Self, VocabError> {
        match name {
            "byte_level" => Ok(Self::ByteLevel),
            "sentencepiece" => Ok(Self::SentencePiece),
            "utf8" => Ok(Self::Utf8),
            other => Err(VocabError::InvalidVocabulary(format!(
                "unknown token encoding '{other}' (expected 'byte_level', 'sentencepiece' or 'utf8')"
            ))),
        }
    }

    /// Decodes one token string into its bytes.
    pub fn decode(self, token: &str) -> Result<Vec<u8>, VocabError> {
        match self {
            Self::ByteLevel => decode_byte_level(token),
            Self::SentencePiece => Ok(decode_sentencepiece(token)),
            Self::Utf8 => Ok(token.as_bytes().to_vec()),
        }
    }
}

/// The GPT-2 byte -> character table: printable Latin-1 bytes stand for themselves, the other
/// 68 bytes are shifted to U+0100.. in byte order.
fn byte_level_char(byte: u8) -> char {
    let is_printable = matches!(byte, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if is_printable {
        return char::from(byte);
    }
    let shifted_rank =
        (0..byte).filter(|&b| !matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)).count() as u32;
    char::from_u32(256 + shifted_rank).expect("U+0100..U+0143 are valid chars")
}

/// Inverse of [`byte_level_char`] for one character.
fn byte_level_byte(c: char) -> Option<u8> {
    let code = c as u32;
    if code < 256 {
        let byte = code as u8;
        return matches!(byte, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF).then_some(byte);
    }
    let rank = code.checked_sub(256)?;
    if rank >= 68 {
        return None;
    }
    (0..=255u8).filter(|&b| !matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)).nth(rank as usize)
}

/// Decodes a byte-level BPE token string; a character outside the 256-character alphabet
/// means the string is not byte-level encoded (an added token, say) and is an error.
pub fn decode_byte_level(token: &str) -> Result<Vec<u8>, VocabError> {
    token
        .chars()
        .map(|c| {
            byte_level_byte(c).ok_or_else(|| {
                VocabError::InvalidVocabulary(format!(
                    "token {token:?} has character {c:?} outside the byte-level alphabet"
                ))
            })
        })
        .collect()
}

/// Encodes raw bytes into the byte-level alphabet (used by tests and tools).
pub fn encode_byte_level(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| byte_level_char(b)).collect()
}

/// Decodes a sentencepiece piece: `<0xNN>` is one raw byte, otherwise `▁` becomes a space.
pub fn decode_sentencepiece(piece: &str) -> Vec<u8> {
    if let Some(byte) = parse_byte_fallback(piece) {
        return vec![byte];
    }
    piece.replace('\u{2581}', " ").into_bytes()
}

fn parse_byte_fallback(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_alphabet_roundtrips_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        let encoded = encode_byte_level(&all);
        assert_eq!(encoded.chars().count(), 256);
        assert_eq!(decode_byte_level(&encoded).unwrap(), all);
        // Well-known GPT-2 characters.
        assert_eq!(byte_level_char(b' '), 'Ġ');
        assert_eq!(byte_level_char(b'\n'), 'Ċ');
        assert_eq!(decode_byte_level("Ġhello").unwrap(), b" hello");
    }

    #[test]
    fn byte_level_rejects_foreign_characters() {
        assert!(matches!(decode_byte_level("<think>\u{4e2d}"), Err(VocabError::InvalidVocabulary(_))));
    }

    #[test]
    fn sentencepiece_space_and_byte_fallback() {
        assert_eq!(decode_sentencepiece("\u{2581}the"), b" the");
        assert_eq!(decode_sentencepiece("<0x0A>"), vec![b'\n']);
        assert_eq!(decode_sentencepiece("<0xE4>"), vec![0xE4]);
        // Not a byte-fallback piece: kept as text.
        assert_eq!(decode_sentencepiece("<0xZZ>"), b"<0xZZ>");
        assert_eq!(decode_sentencepiece("<0x123>"), b"<0x123>");
        assert_eq!(decode_sentencepiece("\u{4e2d}"), "\u{4e2d}".as_bytes());
    }
}
