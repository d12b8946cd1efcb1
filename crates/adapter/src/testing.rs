//! Helpers for adapters' tests: mutation of valid inputs for property tests.

/// Applies `edits` to `bytes`: each `(position, byte)` overwrites, deletes or inserts at `position` (modulo the
/// length), chosen by `byte % 3`. Property tests feed random edits of valid inputs to parsers this way.
pub fn mutate(mut bytes: Vec<u8>, edits: &[(usize, u8)]) -> Vec<u8> {
    for &(at, byte) in edits {
        if bytes.is_empty() {
            break;
        }
        let at = at % bytes.len();
        match byte % 3 {
            0 => bytes[at] = byte,
            1 => {
                bytes.remove(at);
            }
            _ => bytes.insert(at, byte),
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overwrites_deletes_and_inserts() {
        assert_eq!(mutate(b"abc".to_vec(), &[(1, 3)]), vec![b'a', 3, b'c'], "3 % 3 == 0 overwrites");
        assert_eq!(mutate(b"abc".to_vec(), &[(4, 1)]), b"ac".to_vec(), "position 4 is 1 modulo 3; 1 % 3 deletes");
        assert_eq!(mutate(b"abc".to_vec(), &[(0, 2)]), vec![2, b'a', b'b', b'c']);
        assert_eq!(mutate(Vec::new(), &[(0, 1)]), Vec::<u8>::new());
    }
}
