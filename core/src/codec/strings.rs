//! JSON strings at the byte level, for the writers and readers of this
//! crate: a string written as serde_json escapes it ([`write_str`]), the
//! run of bytes at a string's start that needs no escape found eight
//! bytes at a time ([`plain_len`], also what the scanner and the
//! tool-result reader use to find a string's end), and integers' digits.

/// The two digits of 00 to 99, in order.
const PAIRS: [u8; 200] = {
    let mut pairs = [0u8; 200];
    let mut n = 0;
    while n < 100 {
        pairs[2 * n] = b'0' + (n / 10) as u8;
        pairs[2 * n + 1] = b'0' + (n % 10) as u8;
        n += 1;
    }
    pairs
};

/// Appends the decimal digits of `n`, two at a time, for each width the
/// writers need (`u64` for ids and most integers; `u128` for the rest).
macro_rules! write_digits {
    ($($name:ident: $t:ty, $len:literal;)*) => {$(
        pub(crate) fn $name(out: &mut impl Sink, mut n: $t) {
            let mut buf = [0u8; $len];
            let mut i = buf.len();
            while n >= 10 {
                let pair = (n % 100) as usize * 2;
                n /= 100;
                i -= 2;
                buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
                if n == 0 {
                    // The pair was the leading digits (10 to 99).
                    out.put_ascii(&buf[i..]);
                    return;
                }
            }
            i -= 1;
            buf[i] = b'0' + n as u8;
            out.put_ascii(&buf[i..]);
        }
    )*};
}

write_digits! {
    write_u64: u64, 20;
    write_u128: u128, 39;
}

/// Appends `s` as a JSON string literal (quotes included), escaped as
/// `serde_json` escapes it: runs without anything to escape are found
/// sixteen and eight bytes at a time, the last few bytes one at a time,
/// and copied whole (a string without any, in one piece).
pub(crate) fn write_str(out: &mut impl Sink, s: &str) {
    let bytes = s.as_bytes();
    let mut i = plain_len(bytes);
    if i == bytes.len() {
        // Nothing to escape (keys, names, most texts): in one piece.
        out.put_quoted(s);
        return;
    }
    out.reserve(bytes.len() + 2);
    out.put_ascii(b"\"");
    let mut start = 0;
    while let Some(&b) = bytes.get(i) {
        out.put_run(s, start, i);
        i += 1;
        start = i;
        match b {
            b'"' => out.put_ascii(b"\\\""),
            b'\\' => out.put_ascii(b"\\\\"),
            b'\n' => out.put_ascii(b"\\n"),
            b'\r' => out.put_ascii(b"\\r"),
            b'\t' => out.put_ascii(b"\\t"),
            0x08 => out.put_ascii(b"\\b"),
            0x0c => out.put_ascii(b"\\f"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.put_ascii(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xf)],
                ]);
            }
        }
        i += plain_len(&bytes[i..]);
    }
    out.put_run(s, start, bytes.len());
    out.put_ascii(b"\"");
}

/// Where the writers put JSON text: a line's bytes (`Vec<u8>`), or a
/// `String` (params, which are kept as text without checking them as
/// UTF-8 again: only whole `str`s and ASCII go in).
pub(crate) trait Sink {
    /// Appends ASCII bytes (only ASCII: a `String` takes each as a char).
    fn put_ascii(&mut self, ascii: &[u8]);
    /// Appends `s[start..end]`, which starts and ends at an ASCII byte
    /// or an end of `s` (so it is whole UTF-8).
    fn put_run(&mut self, s: &str, start: usize, end: usize);
    /// Room for `n` more bytes.
    fn reserve(&mut self, n: usize);
    /// Appends `s` between quotes (it needs no escape).
    #[inline]
    fn put_quoted(&mut self, s: &str) {
        self.reserve(s.len() + 2);
        self.put_ascii(b"\"");
        self.put_run(s, 0, s.len());
        self.put_ascii(b"\"");
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn put_ascii(&mut self, ascii: &[u8]) {
        self.extend_from_slice(ascii);
    }
    #[inline]
    fn put_run(&mut self, s: &str, start: usize, end: usize) {
        self.extend_from_slice(&s.as_bytes()[start..end]);
    }
    #[inline]
    fn reserve(&mut self, n: usize) {
        Vec::reserve(self, n);
    }
}

impl Sink for String {
    #[inline]
    fn put_ascii(&mut self, ascii: &[u8]) {
        debug_assert!(ascii.is_ascii());
        if let [b] = ascii {
            self.push(char::from(*b));
        } else {
            // ASCII is UTF-8: this check cannot fail.
            self.push_str(std::str::from_utf8(ascii).unwrap_or_default());
        }
    }
    #[inline]
    fn put_run(&mut self, s: &str, start: usize, end: usize) {
        self.push_str(s.get(start..end).unwrap_or_default());
    }
    #[inline]
    fn reserve(&mut self, n: usize) {
        String::reserve(self, n);
    }
}

/// The bytes a JSON string escapes: control characters, `"` and `\`.
const ESCAPED: [bool; 256] = super::byte_table!(|c| c < 0x20 || c == b'"' || c == b'\\');

/// The bytes of `word` (eight of a string, little-endian) that are a
/// control character, `"` or `\` (bytes of 0x80 and above never are):
/// each one's high bit set. Exact up to the first such byte (borrows may
/// mark bytes after it).
fn escape_mask(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = word ^ (ONES * b'"' as u64);
    let backslash = word ^ (ONES * b'\\' as u64);
    let zero = |x: u64| x.wrapping_sub(ONES) & !x;
    (below_space | zero(quote) | zero(backslash)) & HIGH
}

/// How many bytes at the start of `bytes` a JSON string holds as they
/// are (no control character, `"` or `\\`): sixteen at a time, then the
/// last few in one or two overlapping words (no byte loop: keys and names
/// are short, and a text's tail is what is left of it).
#[inline]
pub(crate) fn plain_len(bytes: &[u8]) -> usize {
    let n = bytes.len();
    let mut i = 0;
    // Sixteen bytes a step while they last: one test of all sixteen, and
    // where the first to escape is only in the sixteen that hold one.
    while let Some(p) = bytes.get(i..).and_then(|r| r.first_chunk::<16>()) {
        if !all_plain(p) {
            if let Some(at) = first_marked(p) {
                return i + at;
            }
        }
        i += 16;
    }
    if i == n {
        return n;
    }
    if let Some(last) = bytes.last_chunk::<16>() {
        // The last sixteen, over bytes already known plain: the first byte
        // marked is in the tail.
        if all_plain(last) {
            return n;
        }
        return first_marked(last).map_or(n, |at| n - 16 + at);
    }
    short_plain_len(bytes)
}

/// Whether none of the sixteen bytes of `p` is one to escape. A byte is
/// one when `b ^ b'"'`, `b ^ b'\\'` or `b & 0xe0` is zero, so the least
/// of the three is zero: written byte by byte and branch-free, which the
/// compiler makes a few vector instructions for all sixteen (with SSE2,
/// which every x86-64 has: two `pxor`, a `pand`, two `pminub`, a
/// compare and a mask), about half of what the two words take.
#[inline(always)]
fn all_plain(p: &[u8; 16]) -> bool {
    let mut plain = true;
    for &b in p {
        plain &= (b ^ b'"').min(b ^ b'\\').min(b & 0xe0) != 0;
    }
    plain
}

/// Where the first byte to escape is in `p`, if any.
#[inline]
fn first_marked(p: &[u8; 16]) -> Option<usize> {
    let (a, b) = p.split_at(8);
    let word = |w: &[u8]| u64::from_le_bytes(w.try_into().unwrap_or([b' '; 8]));
    let (a, b) = (escape_mask(word(a)), escape_mask(word(b)));
    if a | b == 0 {
        return None;
    }
    // The first marked byte (those after it may be marked by a borrow).
    let (at, mask) = if a != 0 { (0, a) } else { (8, b) };
    Some(at + (mask.trailing_zeros() / 8) as usize)
}

/// [`plain_len`] of fewer than sixteen bytes: the first and last eight
/// (or four) overlapping, or the bytes of one to three in spaces.
fn short_plain_len(bytes: &[u8]) -> usize {
    let n = bytes.len();
    let u32_at = |at: usize| {
        bytes
            .get(at..at + 4)
            .and_then(|w| w.try_into().ok())
            .map_or(0, u32::from_le_bytes)
    };
    let (first, last) = if let (Some(a), Some(b)) = (bytes.first_chunk(), bytes.last_chunk()) {
        (
            escape_mask(u64::from_le_bytes(*a)),
            escape_mask(u64::from_le_bytes(*b)),
        )
    } else if n >= 4 {
        let both = u64::from(u32_at(0)) | u64::from(u32_at(n - 4)) << 32;
        let mask = escape_mask(both);
        // The first four's marks are exact; the last four's count only
        // when the first four are plain (then no borrow reaches them).
        (mask & 0xffff_ffff, mask >> 32 << 32)
    } else if n > 0 {
        // Bytes 0, n/2 and n-1 (all of them for n <= 3), the rest spaces.
        let word = 0x2020_2020_2020_2020 & !0xff_ffff
            | u64::from(bytes[0])
            | u64::from(bytes[n / 2]) << 8
            | u64::from(bytes[n - 1]) << 16;
        if escape_mask(word) == 0 {
            return n;
        }
        return bytes
            .iter()
            .position(|&b| ESCAPED[usize::from(b)])
            .unwrap_or(n);
    } else {
        return 0;
    };
    match (first, last) {
        (0, 0) => n,
        (0, mask) if n >= 8 => n - 8 + (mask.trailing_zeros() / 8) as usize,
        (0, mask) => n - 4 + (mask.trailing_zeros() / 8 - 4) as usize,
        (mask, _) => (mask.trailing_zeros() / 8) as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every number to 100,000 and each power of ten and its neighbours
    /// (where the pairs and the odd leading digit meet).
    #[test]
    fn small_numbers_and_powers_of_ten_are_written_whole() {
        let powers = (0..20)
            .map(|e| 10u64.pow(e))
            .flat_map(|p| [p - 1, p, p + 1]);
        for n in (0..=100_000).chain(powers).chain([u64::MAX]) {
            let mut out = Vec::new();
            write_u64(&mut out, n);
            assert_eq!(String::from_utf8(out).unwrap(), n.to_string());
            let mut out = Vec::new();
            write_u128(&mut out, u128::from(n) * 1_000_000_007);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                (u128::from(n) * 1_000_000_007).to_string()
            );
        }
    }

    /// Every byte value at every place of sixteen: the vector test and
    /// the escape table agree.
    #[test]
    fn all_plain_agrees_with_the_table_for_every_byte() {
        for b in 0..=255u8 {
            for at in 0..16 {
                let mut p = [b'a'; 16];
                p[at] = b;
                assert_eq!(
                    all_plain(&p),
                    !ESCAPED[usize::from(b)],
                    "byte {b:#x} at {at}"
                );
            }
        }
    }

    /// Every length to 40, with each kind of byte to escape (and the
    /// plain neighbours of the masks' edges: space, `!`, `#`, `[`, `]`,
    /// 0x7f, 0x80, 0xff) at every position, twice over: the first one
    /// counts.
    #[test]
    fn plain_len_finds_the_first_byte_to_escape_at_every_length() {
        let want = |b: &[u8]| {
            b.iter()
                .position(|&c| ESCAPED[usize::from(c)])
                .unwrap_or(b.len())
        };
        for n in 0..40 {
            for fill in [b'a', b' ', b'!', b'#', b'[', b']', 0x7f, 0x80, 0xff] {
                let mut b = vec![fill; n];
                assert_eq!(plain_len(&b), want(&b), "n {n} fill {fill}");
                for at in 0..n {
                    for esc in [0u8, 0x01, 0x1f, b'"', b'\\'] {
                        b[at] = esc;
                        assert_eq!(plain_len(&b), at, "n {n} at {at} esc {esc}");
                        for later in at + 1..n {
                            b[later] = b'"';
                            assert_eq!(plain_len(&b), at, "n {n} at {at} later {later}");
                            b[later] = fill;
                        }
                        b[at] = fill;
                    }
                }
            }
        }
    }

    proptest! {
        /// Long plain runs with an escape anywhere (the eight-byte steps,
        /// the byte-at-a-time tail and every escape form).
        #[test]
        fn any_string_is_written_as_serde_json_writes_it(
            s in "([a-z \u{e9}\u{1f600}]{0,20}[\x00-\x1f\"\\\\]?){0,6}"
        ) {
            let mut out = Vec::new();
            write_str(&mut out, &s);
            prop_assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&s).unwrap());
        }

        #[test]
        fn plain_len_stops_at_the_first_byte_to_escape(
            s in "[a-z \u{e9}\u{1f600}]{0,30}([\x00-\x1f\"\\\\][a-z\"]{0,9})?"
        ) {
            let want = s.bytes().position(|b| b < 0x20 || b == b'"' || b == b'\\').unwrap_or(s.len());
            prop_assert_eq!(plain_len(s.as_bytes()), want);
        }

        #[test]
        fn digits_are_written_as_serde_json_writes_them(n in any::<u64>(), m in any::<u128>()) {
            let mut out = Vec::new();
            write_u64(&mut out, n);
            prop_assert_eq!(String::from_utf8(out).unwrap(), n.to_string());
            let mut out = Vec::new();
            write_u128(&mut out, m);
            prop_assert_eq!(String::from_utf8(out).unwrap(), m.to_string());
        }
    }
}
