//! A fiber's name ([`Name`]): kept in the fiber's control block when it is short, boxed
//! only when it is long.
//!
//! A server that names each request's fiber after its client and request (spindle-http
//! does) made one allocation and one free per request for the name alone, through glibc's
//! malloc (`docs/perf/spawn-cost.md`, the name).
//! Names of up to [`Name::INLINE`] bytes now cost a copy.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;

/// Bytes a name can have and still be stored inline: the enum is then 48 bytes, 32 more
/// than the boxed `str` it replaced, which keeps the fiber's header within the four cache
/// lines that the run queue prefetches (module `sched::worker::fiber_queue`).
const INLINE: usize = 46;

/// A fiber's name, as [`Builder::name`](super::Builder::name) takes it: anything a `&str`,
/// `String`, `Box<str>` or `Cow<str>` converts into, or pieces joined with [`Name::concat`].
/// A name of up to [`Name::INLINE`] bytes is stored in the fiber's control block, with no
/// allocation; a longer one is boxed.
///
/// ```
/// use spindle::fiber::Name;
///
/// let name = Name::concat(&["conn ", "10.0.0.7:5000"]);
/// assert_eq!(&*name, "conn 10.0.0.7:5000");
/// assert!(name.is_inline());
/// assert_eq!(&*Name::from("x".repeat(100)), "x".repeat(100));
/// ```
#[derive(Clone)]
pub struct Name(Repr);

#[derive(Clone)]
enum Repr {
    /// `bytes[..len]` is the name: always a whole `str` (or whole `str`s one after the other),
    /// copied byte for byte, so it is valid UTF-8.
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    Heap(Box<str>),
}

impl Name {
    /// The longest name, in bytes, stored without an allocation.
    pub const INLINE: usize = INLINE;

    /// The name made of `pieces` one after the other, built in place: inline when it fits,
    /// else in one allocation of its exact length. Inlined, so that the pieces whose length
    /// the caller's code fixes are copied without a call.
    #[inline]
    pub fn concat(pieces: &[&str]) -> Name {
        let len: usize = pieces.iter().map(|p| p.len()).sum();
        if len <= INLINE {
            let mut bytes = [0u8; INLINE];
            let mut at = 0;
            for piece in pieces {
                bytes[at..at + piece.len()].copy_from_slice(piece.as_bytes());
                at += piece.len();
            }
            // `len <= INLINE` (46) fits a byte.
            Name(Repr::Inline { len: len as u8, bytes })
        } else {
            let mut text = String::with_capacity(len);
            for piece in pieces {
                text.push_str(piece);
            }
            Name(Repr::Heap(text.into_boxed_str()))
        }
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline { len, bytes } => {
                // Never fails (see `Repr::Inline`); checked rather than assumed, since names
                // are read rarely (a dump, an overflow report, `Fiber::name`).
                std::str::from_utf8(&bytes[..usize::from(*len)]).expect("an inline name is whole strs")
            }
            Repr::Heap(text) => text,
        }
    }

    /// Whether the name is stored without an allocation.
    pub fn is_inline(&self) -> bool {
        matches!(self.0, Repr::Inline { .. })
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Name {
        Name::concat(&[text])
    }
}

impl From<&String> for Name {
    fn from(text: &String) -> Name {
        Name::concat(&[text])
    }
}

impl From<String> for Name {
    /// A short name is copied inline (and the `String` freed); a long one keeps its buffer
    /// (shrunk to its length, as `Box<str>` needs).
    fn from(text: String) -> Name {
        if text.len() <= INLINE {
            Name::concat(&[&text])
        } else {
            Name(Repr::Heap(text.into_boxed_str()))
        }
    }
}

impl From<Box<str>> for Name {
    fn from(text: Box<str>) -> Name {
        if text.len() <= INLINE {
            Name::concat(&[&text])
        } else {
            Name(Repr::Heap(text))
        }
    }
}

impl From<Cow<'_, str>> for Name {
    fn from(text: Cow<'_, str>) -> Name {
        match text {
            Cow::Borrowed(text) => Name::from(text),
            Cow::Owned(text) => Name::from(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_inline_and_long_ones_whole() {
        for len in [0, 1, INLINE - 1, INLINE] {
            let text = "a".repeat(len);
            for name in [
                Name::from(text.as_str()),
                Name::from(text.clone()),
                Name::from(text.clone().into_boxed_str()),
            ] {
                assert!(name.is_inline(), "{len} bytes");
                assert_eq!(name.as_str(), text);
            }
        }
        for len in [INLINE + 1, 200] {
            let text = "b".repeat(len);
            let name = Name::from(text.clone());
            assert!(!name.is_inline(), "{len} bytes");
            assert_eq!(name, text.as_str());
        }
    }

    #[test]
    fn concat_joins_pieces_across_the_inline_limit() {
        let pieces = ["spindle-http ", "127.0.0.1:5000", " ", "GET", " ", "/"];
        let name = Name::concat(&pieces);
        assert!(name.is_inline());
        assert_eq!(name, "spindle-http 127.0.0.1:5000 GET /");
        let long = ["é".repeat(20).as_str(), "—", "ü".repeat(10).as_str()].map(str::to_owned);
        let refs: Vec<&str> = long.iter().map(String::as_str).collect();
        let name = Name::concat(&refs);
        assert!(!name.is_inline());
        assert_eq!(name.as_str(), long.concat());
        // Multi-byte characters that end exactly at the inline limit.
        let edge = "é".repeat(INLINE / 2);
        let name = Name::concat(&[&edge]);
        assert!(name.is_inline());
        assert_eq!(name.as_str(), edge);
        assert_eq!(Name::concat(&[]).as_str(), "");
    }

    #[test]
    fn a_name_takes_48_bytes_and_none_costs_nothing_more() {
        assert_eq!(std::mem::size_of::<Name>(), 48);
        assert_eq!(std::mem::size_of::<Option<Name>>(), 48);
    }
}
