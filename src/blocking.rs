//! A hint that the calling thread is about to block: wait for another thread (a chunk another
//! thread decodes, a remote fetch, a backing file being filled), or run a long job (a whole
//! chunk's decode, a commit). A thread pool that serves many callers on few threads (the FUSE
//! workers, see `fuse::turns`) registers a hook on each of its threads and hands its queue to
//! another thread meanwhile.
//!
//! The layers that block (cache, reader, remote, tree) call [`will_block`] without knowing who
//! listens; on a thread without a hook it costs one thread-local read.

use std::cell::RefCell;
use std::sync::Arc;

/// What a thread pool runs when one of its threads is about to block.
pub type Hook = Arc<dyn Fn() + Send + Sync>;

thread_local! {
    static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// Tells this thread's pool (if it registered a hook) that this thread is about to block.
pub fn will_block() {
    let hook = HOOK.with_borrow(|h| h.clone());
    if let Some(hook) = hook {
        hook();
    }
}

/// Sets (or with `None` removes) the hook [`will_block`] runs on this thread.
pub fn set_hook(hook: Option<Hook>) {
    HOOK.with_borrow_mut(|h| *h = hook);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn the_hook_runs_on_its_own_thread_only() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        set_hook(Some(Arc::new(move || {
            c.fetch_add(1, Ordering::Relaxed);
        })));
        will_block();
        std::thread::spawn(will_block).join().unwrap();
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        set_hook(None);
        will_block();
        assert_eq!(calls.load(Ordering::Relaxed), 1);
    }
}
