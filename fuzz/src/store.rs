//! The `store_open` target: a python-blosc2 store (`.b2z` zip, and the same members as a
//! `.b2d` directory) opened as a collection, every group's attributes and every leaf opened
//! both ways (`Leaf::open`, `Leaf::open_head`) and touched as `frame_open` touches a frame.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use b2fs::container::store::{self, Collection, Group, Node, Opened};
use b2fs::container::{ByteSource, Container};

use super::source::{self, Kind};

/// Most leaves of one store that are opened (a zip may list 65,535 members).
const MAX_LEAVES: usize = 48;

/// A zip held in memory, opened through [`store::open_store_bytes`] as a remote `.b2z` is.
#[derive(Debug)]
struct Memory(Vec<u8>);

impl ByteSource for Memory {
    fn name(&self) -> &str {
        "memory.b2z"
    }
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn mtime(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let start = usize::try_from(offset).map_err(std::io::Error::other)?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| self.0.get(start..end))
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// Opens `data` as a `.b2z` store from a file and from memory, and its stored members as a
/// `.b2d` directory store; walks each collection that opens.
pub fn store_open(data: &[u8]) {
    let dir = super::scratch().join("store");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    if let Some(p) = source::write(&dir, Kind::Zip, data)
        && let Ok(Opened::Collection(c)) = store::open_any(&p)
    {
        walk(&c);
    }
    if let Ok(c) = store::open_store_bytes(Arc::new(Memory(data.to_vec()))) {
        walk(&c);
    }
    if let Some(p) = source::write(&dir, Kind::Dir, data)
        && let Ok(Opened::Collection(c)) = store::open_any(&p)
    {
        walk(&c);
    }
}

/// Every group's attributes, every leaf (up to [`MAX_LEAVES`]) opened and touched.
fn walk(c: &Collection) {
    let _ = (c.path(), c.form(), c.marker(), c.leaves_opened());
    if let Some(z) = c.zip() {
        for i in 0..z.names().len().min(MAX_LEAVES) {
            let _ = z.window(i);
        }
        let _ = z.find("embed.b2e");
    }
    let mut budget = MAX_LEAVES;
    group(c.root(), &mut budget, 0);
    for l in c.leaves().into_iter().take(4) {
        let _ = c.find(l.key());
        let _ = c.group(l.key());
    }
}

fn group(g: &Group, budget: &mut usize, depth: usize) {
    let _ = g.attrs();
    if let Some(carrier) = g.carrier() {
        let _ = carrier.open();
    }
    for child in &g.children {
        if *budget == 0 {
            return;
        }
        match child {
            Node::Group(sub) if depth < 16 => group(sub, budget, depth + 1),
            Node::Group(_) => {}
            Node::Leaf(l) => {
                *budget -= 1;
                let _ = (l.name(), l.key(), l.location(), l.store_path());
                if let Ok(c) = l.open() {
                    touch(c);
                }
                let _ = l.special();
                if let Ok(c) = l.open_head() {
                    touch(&c);
                }
            }
            Node::Store(s) => walk(s),
        }
    }
}

fn touch(c: &Container) {
    super::touch(c);
}

/// Whether `p` is a store `store_open` would open (for the replay test's sanity check).
pub fn opens_as_store(p: &Path) -> bool {
    matches!(store::open_any(p), Ok(Opened::Collection(_)))
}
