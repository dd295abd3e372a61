//! Byte classes: bytes every state treats alike share one class, so a table row holds one
//! entry per class.

use super::ByteDfa;

/// Byte classes, their number, each class's size and its smallest byte.
pub(crate) type ByteClasses = ([u8; 256], usize, Vec<u16>, Vec<u8>);

/// `base`'s byte classes with every byte `own` picks in a class of its own, numbered in order
/// of first byte (as [`classes_by_signature`] would number them, in one pass over the bytes).
pub(crate) fn classes_refined(base: &ByteDfa, own: impl Fn(u8) -> bool) -> ByteClasses {
    let mut classes = [0u8; 256];
    let mut by_base_class = [u16::MAX; 256];
    let mut num_classes = 0usize;
    for byte in 0..=255u8 {
        let base_class = base.class_of(byte) as usize;
        let class = if own(byte) {
            num_classes += 1;
            num_classes - 1
        } else {
            if by_base_class[base_class] == u16::MAX {
                by_base_class[base_class] = num_classes as u16;
                num_classes += 1;
            }
            by_base_class[base_class] as usize
        };
        classes[byte as usize] = class as u8;
    }
    let (class_len, class_byte) = class_members(&classes, num_classes);
    (classes, num_classes, class_len, class_byte)
}

/// Bytes with equal signatures share a class (numbered in order of first appearance).
pub(crate) fn classes_by_signature<S: PartialEq>(signature: impl Fn(u8) -> S) -> ByteClasses {
    let mut classes = [0u8; 256];
    let mut signatures: Vec<S> = Vec::new();
    for byte in 0..=255u8 {
        let own = signature(byte);
        let class = match signatures.iter().position(|s| *s == own) {
            Some(class) => class,
            None => {
                signatures.push(own);
                signatures.len() - 1
            }
        };
        // At most 256 signatures over 256 bytes: the last index is 255.
        classes[byte as usize] = class as u8;
    }
    let num_classes = signatures.len();
    let (class_len, class_byte) = class_members(&classes, num_classes);
    (classes, num_classes, class_len, class_byte)
}

/// Byte classes of a product: bytes every part treats alike share one. Returns the classes,
/// their number, each class's size and one byte of each.
pub(super) fn product_classes(parts: &[&ByteDfa]) -> ByteClasses {
    classes_by_signature(|byte| parts.iter().map(|d| d.classes[byte as usize]).collect::<Vec<u8>>())
}

/// Byte classes of a hand-built number automaton: digit d is class d, the bytes of `extra` come
/// next (classes 10, 11, ...), every other byte is the last class. Returns (classes, number of
/// classes, bytes per class, a byte of each class).
pub(super) fn digit_classes(extra: &[u8]) -> ([u8; 256], usize, Vec<u16>, Vec<u8>) {
    let num_classes = 11 + extra.len();
    let mut classes = [(num_classes - 1) as u8; 256];
    for digit in 0..10u8 {
        classes[(b'0' + digit) as usize] = digit;
    }
    for (offset, &byte) in extra.iter().enumerate() {
        classes[byte as usize] = 10 + offset as u8;
    }
    let (class_len, class_byte) = class_members(&classes, num_classes);
    (classes, num_classes, class_len, class_byte)
}

/// How many bytes each class holds, and one byte of each (the lowest).
pub(crate) fn class_members(classes: &[u8; 256], num_classes: usize) -> (Vec<u16>, Vec<u8>) {
    let mut class_len = vec![0u16; num_classes];
    let mut class_byte = vec![0u8; num_classes];
    for byte in (0..=255u8).rev() {
        let class = classes[byte as usize] as usize;
        class_len[class] += 1;
        class_byte[class] = byte;
    }
    (class_len, class_byte)
}
