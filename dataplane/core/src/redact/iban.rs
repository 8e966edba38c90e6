//! International bank account numbers (ISO 13616), found as a bank's customers say or type
//! them: the two letters of a country, two check digits, then the country's fixed number of
//! letters and digits, in groups or not (`GB82 WEST 1234 5698 7654 32`, any case). A match
//! must have its country's exact length, end at a word's end and pass the mod-97 check, so
//! a following word is never taken for part of it and a made-up code is kept.

/// The length of an IBAN of each country (SWIFT's IBAN registry).
const LENGTHS: &[(&str, usize)] = &[
    ("AD", 24),
    ("AE", 23),
    ("AL", 28),
    ("AT", 20),
    ("AZ", 28),
    ("BA", 20),
    ("BE", 16),
    ("BG", 22),
    ("BH", 22),
    ("BI", 27),
    ("BR", 29),
    ("BY", 28),
    ("CH", 21),
    ("CR", 22),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DJ", 27),
    ("DK", 18),
    ("DO", 28),
    ("EE", 20),
    ("EG", 29),
    ("ES", 24),
    ("FI", 18),
    ("FK", 18),
    ("FO", 18),
    ("FR", 27),
    ("GB", 22),
    ("GE", 22),
    ("GI", 23),
    ("GL", 18),
    ("GR", 27),
    ("GT", 28),
    ("HN", 28),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IL", 23),
    ("IQ", 23),
    ("IS", 26),
    ("IT", 27),
    ("JO", 30),
    ("KW", 30),
    ("KZ", 20),
    ("LB", 28),
    ("LC", 32),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("LY", 25),
    ("MC", 27),
    ("MD", 24),
    ("ME", 22),
    ("MK", 19),
    ("MN", 20),
    ("MR", 27),
    ("MT", 31),
    ("MU", 30),
    ("NI", 28),
    ("NL", 18),
    ("NO", 15),
    ("OM", 23),
    ("PK", 24),
    ("PL", 28),
    ("PS", 29),
    ("PT", 25),
    ("QA", 29),
    ("RO", 24),
    ("RS", 22),
    ("RU", 33),
    ("SA", 24),
    ("SC", 31),
    ("SD", 18),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
    ("SM", 27),
    ("SO", 23),
    ("ST", 25),
    ("SV", 28),
    ("TL", 23),
    ("TN", 24),
    ("TR", 26),
    ("UA", 29),
    ("VA", 22),
    ("VG", 24),
    ("XK", 20),
    ("YE", 30),
];

/// What finds where an IBAN may start and how far it may reach: a country's letters, two
/// digits, then letters and digits with single spaces between (the check is [`redact`]'s).
pub(super) const CANDIDATE: &str = r"(?i)\b[A-Z]{2}\d{2}(?: ?[A-Z0-9])+";

/// `found` (a [`CANDIDATE`] match) with each IBAN in it replaced by `[redacted:<name>]`.
pub(super) fn redact(found: &str, name: &str) -> String {
    let mut out = String::with_capacity(found.len());
    let mut rest = found;
    while !rest.is_empty() {
        if let Some(len) = iban_at(rest) {
            out.push_str("[redacted:");
            out.push_str(name);
            out.push(']');
            rest = &rest[len..];
        } else {
            // On to the next word (the match holds ASCII letters, digits and spaces only).
            let next = rest.find(' ').map_or(rest.len(), |space| space + 1);
            out.push_str(&rest[..next]);
            rest = &rest[next..];
        }
    }
    out
}

/// The length in bytes of the IBAN at the start of `text`, if one is there.
fn iban_at(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let [a, b, c, d, ..] = bytes else { return None };
    if !(a.is_ascii_alphabetic() && b.is_ascii_alphabetic() && c.is_ascii_digit() && d.is_ascii_digit()) {
        return None;
    }
    let country = [a.to_ascii_uppercase(), b.to_ascii_uppercase()];
    let want = LENGTHS.iter().find(|(code, _)| code.as_bytes() == country).map(|(_, len)| *len)?;
    let mut chars = Vec::with_capacity(want);
    let mut end = 0;
    for (i, byte) in bytes.iter().enumerate() {
        if chars.len() == want {
            break;
        }
        if byte.is_ascii_alphanumeric() {
            chars.push(byte.to_ascii_uppercase());
            end = i + 1;
        } else if !(*byte == b' ' && i > 0 && bytes[i - 1] != b' ') {
            return None;
        }
    }
    // Its exact length, then the end of a word, then the check.
    if chars.len() < want || bytes.get(end).is_some_and(u8::is_ascii_alphanumeric) {
        return None;
    }
    (remainder(&chars) == 1).then_some(end)
}

/// The IBAN's mod-97 remainder: its first four characters moved to the end, letters read
/// as 10 to 35.
fn remainder(chars: &[u8]) -> u32 {
    let (head, tail) = chars.split_at(4.min(chars.len()));
    tail.iter().chain(head).fold(0, |r, &c| {
        if c.is_ascii_digit() { (r * 10 + u32::from(c - b'0')) % 97 } else { (r * 100 + u32::from(c - b'A') + 10) % 97 }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ibans_are_found_whole_with_their_country_length_and_checksum() {
        let r = |text: &str| redact(text, "iban");
        assert_eq!(r("GB82 WEST 1234 5698 7654 32"), "[redacted:iban]");
        assert_eq!(r("GB82WEST12345698765432"), "[redacted:iban]");
        assert_eq!(r("gb82 west 1234 5698 7654 32"), "[redacted:iban]", "as a transcript writes it");
        assert_eq!(r("DE89 3704 0044 0532 0130 00"), "[redacted:iban]");
        assert_eq!(r("FR14 2004 1010 0505 0001 3M02 606"), "[redacted:iban]");
        assert_eq!(r("NL91 ABNA 0417 1643 00"), "[redacted:iban]");
        // A following word stays, even one that looks like a group.
        assert_eq!(r("GB82 WEST 1234 5698 7654 32 then"), "[redacted:iban] then");
        assert_eq!(r("NL91 ABNA 0417 1643 00 NL91 ABNA 0417 1643 00"), "[redacted:iban] [redacted:iban]");
        // A wrong check digit, a wrong length, an unknown country, a word glued on: kept.
        assert_eq!(r("GB82 WEST 1234 5698 7654 33"), "GB82 WEST 1234 5698 7654 33");
        assert_eq!(r("GB82 WEST 1234 5698 7654"), "GB82 WEST 1234 5698 7654");
        assert_eq!(r("ZZ82 WEST 1234 5698 7654 32"), "ZZ82 WEST 1234 5698 7654 32");
        assert_eq!(r("GB82 WEST 1234 5698 7654 32X"), "GB82 WEST 1234 5698 7654 32X");
        assert_eq!(r("AB12"), "AB12");
    }

    #[test]
    fn the_remainder_is_iso_7064_mod_97() {
        let chars = |s: &str| s.bytes().collect::<Vec<u8>>();
        assert_eq!(remainder(&chars("GB82WEST12345698765432")), 1);
        assert_ne!(remainder(&chars("GB83WEST12345698765432")), 1);
    }
}
