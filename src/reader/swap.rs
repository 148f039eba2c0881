//! The one swappable cell of b2fs: a value replaced as a whole when what it describes changes
//! (a commit, another writer's change), while every reader keeps the version it got. Used for
//! an array's live version ([`super::live::LiveArray`]), the mounted collection, and the NPY
//! views of arrays and tables.

use std::sync::Arc;

use parking_lot::RwLock;

/// A value replaced as a whole; [`Swap::get`] hands out the current version, which stays
/// valid (and unchanged) for as long as its holder keeps it.
#[derive(Debug)]
pub struct Swap<T>(RwLock<Arc<T>>);

impl<T> Swap<T> {
    /// A cell holding `value` (a `T` or an `Arc<T>` already shared).
    pub fn new(value: impl Into<Arc<T>>) -> Swap<T> {
        Swap(RwLock::new(value.into()))
    }

    /// The current version.
    pub fn get(&self) -> Arc<T> {
        self.0.read().clone()
    }

    /// `f` of the current version, without taking a reference to it (the lock is held for
    /// `f`'s length: keep it short).
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.0.read())
    }

    /// Replaces the value: later [`Swap::get`]s see `value`; earlier holders keep theirs.
    pub fn set(&self, value: impl Into<Arc<T>>) {
        let value = value.into();
        // The old version is dropped after the lock is released (its drop may be long: an
        // array's mapping, a collection's members).
        let _old = std::mem::replace(&mut *self.0.write(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_keep_their_version_across_a_set() {
        let cell: Swap<Vec<u8>> = Swap::new(vec![1u8, 2, 3]);
        let before = cell.get();
        cell.set(vec![9u8]);
        assert_eq!(*before, vec![1, 2, 3]);
        assert_eq!(*cell.get(), vec![9]);
        assert_eq!(cell.with(|v| v.len()), 1);
        let shared = Arc::new(vec![7u8; 4]);
        cell.set(shared.clone());
        assert!(Arc::ptr_eq(&cell.get(), &shared));
        assert_eq!(Arc::strong_count(&before), 1);
    }
}
