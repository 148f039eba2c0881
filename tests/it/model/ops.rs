//! The operations the model test drives, and their proptest strategy.

use proptest::prelude::*;
use proptest::sample::Index;

use super::reference::{File, Mode};

/// One step of a case. Handles are chosen among the open ones by `Index`; a step that needs
/// a handle when none is open does nothing.
#[derive(Debug, Clone)]
pub enum Op {
    /// `open(2)` by process `by` (0 or 1).
    Open {
        file: File,
        mode: Mode,
        by: u8,
    },
    /// `pwrite(2)`: `at` is a fraction (of 65,536) of the file's size plus a little, so some
    /// writes land past the end; `whole` writes the file's whole size from 0; `header` keeps
    /// `array.npy`'s header bytes where the write covers them.
    Write {
        h: Index,
        at: u16,
        len: usize,
        whole: bool,
        header: bool,
        seed: u8,
    },
    /// Writes one of [`ATTRS_TEXTS`] at offset 0.
    WriteText {
        h: Index,
        text: usize,
    },
    /// `pread(2)`.
    Read {
        h: Index,
        at: u16,
        len: usize,
    },
    /// `close(2)` of a copy of the descriptor: by its opener, or by another process (a
    /// forked child, a program it was passed to).
    Flush {
        h: Index,
        opener: bool,
    },
    Fsync {
        h: Index,
    },
    /// The last close.
    Release {
        h: Index,
    },
    /// `truncate(2)` by path: `size` is 0, half, the file's size, or one more.
    Truncate {
        file: File,
        size: u8,
    },
    /// An editor's scratch file with one of [`ATTRS_TEXTS`] renamed over `__attrs__`.
    RenameOverAttrs {
        text: usize,
    },
    /// Another writer replaces chunk `chunk` (any chunk of the source) and maybe the
    /// attributes, with b2fs's container commit.
    Foreign {
        chunk: usize,
        seed: u8,
        attrs: Option<u8>,
    },
    /// The follower thread's tick.
    Tick,
    /// fsync of a descriptor cut short by a crash after `steps` durable steps, then the
    /// source mounted again (a read-only descriptor: a crash with no commit in flight).
    Crash {
        h: Index,
        steps: usize,
    },
    /// Every descriptor closed, unmounted and mounted again.
    Remount,
}

/// What `__attrs__` edits write: objects, JSON that is no object, not JSON, nothing.
pub const ATTRS_TEXTS: &[&str] = &[
    "{\"a\": 1}",
    "{\"k\": \"v\", \"n\": [1, 2, 3]}",
    "[1, 2]",
    "not json",
    "",
    "{\"long\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
];

fn file() -> impl Strategy<Value = File> {
    prop_oneof![
        3 => Just(File::Chunk(0)),
        2 => Just(File::Chunk(1)),
        3 => Just(File::Npy),
        2 => Just(File::Attrs),
    ]
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        3 => Just(Mode::Ro),
        2 => Just(Mode::Wo),
        3 => Just(Mode::Rw),
        1 => Just(Mode::WoTrunc),
        1 => Just(Mode::RwTrunc),
    ]
}

fn len() -> impl Strategy<Value = usize> {
    prop_oneof![1usize..16, 16usize..600, 600usize..5000]
}

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (file(), mode(), 0u8..2).prop_map(|(file, mode, by)| Op::Open { file, mode, by }),
        8 => (any::<Index>(), any::<u16>(), len(), prop::bool::weighted(0.25), any::<bool>(), any::<u8>())
            .prop_map(|(h, at, len, whole, header, seed)| Op::Write { h, at, len, whole, header, seed }),
        2 => (any::<Index>(), 0..ATTRS_TEXTS.len()).prop_map(|(h, text)| Op::WriteText { h, text }),
        6 => (any::<Index>(), any::<u16>(), len()).prop_map(|(h, at, len)| Op::Read { h, at, len }),
        4 => (any::<Index>(), any::<bool>()).prop_map(|(h, opener)| Op::Flush { h, opener }),
        2 => any::<Index>().prop_map(|h| Op::Fsync { h }),
        4 => any::<Index>().prop_map(|h| Op::Release { h }),
        2 => (file(), 0u8..4).prop_map(|(file, size)| Op::Truncate { file, size }),
        1 => (0..ATTRS_TEXTS.len()).prop_map(|text| Op::RenameOverAttrs { text }),
        2 => (0usize..8, any::<u8>(), prop::option::weighted(0.3, any::<u8>()))
            .prop_map(|(chunk, seed, attrs)| Op::Foreign { chunk, seed, attrs }),
        1 => Just(Op::Tick),
        1 => (any::<Index>(), 0usize..12).prop_map(|(h, steps)| Op::Crash { h, steps }),
        1 => Just(Op::Remount),
    ]
}
