//! Following a prefix (`remote_recheck`): whether a listing is due, whether the prefix changed
//! on the server (a refused read, or a new listing that names other objects, sizes or ETags),
//! and the prefix opened again as the server holds it now, shared by every array reopened
//! from the old one and seeded with the old one's bytes of the objects that did not change.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::listing::{listed, same_listing};
use super::{RemotePrefix, lock, open_prefix_after};
use crate::remote::RemoteOptions;
use crate::remote::client::RemoteError;
use crate::remote::plan::{Following, before_asking};

/// How long a prefix opened again is handed to the next arrays reopened from the old one (one
/// reload reopens every array of the mount within it); later, it is opened again (a reload
/// that failed on a half-uploaded version must not get that listing back for good).
pub(super) const SHARE_NEXT: Duration = Duration::from_secs(1);

impl RemotePrefix {
    /// Follows the prefix: [`ByteTree::poll_changed`] lists it again every `every` (see the
    /// module docs), and [`ByteTree::reopen`] opens it again with `opts`.
    ///
    /// [`ByteTree::poll_changed`]: crate::container::ByteTree::poll_changed
    /// [`ByteTree::reopen`]: crate::container::ByteTree::reopen
    pub fn follow_every(&self, every: Duration, opts: &RemoteOptions) {
        *lock(&self.follow) = Some(Following::new(every, opts));
    }

    /// Whether the follower has a listing due ([`crate::container::ByteTree::asks_now`]).
    pub(super) fn asks_now(&self) -> bool {
        !self.changed.load(Ordering::Relaxed)
            && !self.moved.load(Ordering::Relaxed)
            && lock(&self.follow).as_ref().is_some_and(Following::is_due)
    }

    /// Whether the followed prefix changed on the server: known from a refused read or an
    /// earlier listing, or, with `ask`, listed again now when its interval has passed (a
    /// listing that fails is no change); false when it is not followed. The listing gets
    /// one attempt's time (`remote_timeout`) per page, not a read's retries.
    pub(super) fn poll_changed(&self, ask: bool) -> bool {
        let known = self.changed.load(Ordering::Relaxed) || self.moved.load(Ordering::Relaxed);
        let patience = match before_asking(lock(&self.follow).as_mut(), known, ask) {
            Ok(patience) => patience,
            Err(answer) => return answer,
        };
        let root = self.root.display();
        let now = match listed(&self.client, &root.to_string(), patience) {
            Ok(now) => now,
            Err(e) => {
                log::debug!("{root}/: could not list it again: {e}");
                return false;
            }
        };
        let same = same_listing(&self.objects, &now);
        if !same && !self.moved.swap(true, Ordering::Relaxed) {
            log::info!(
                "{root}/: changed on the server ({} objects listed, were {}): the mount opens \
                 it again",
                now.len(),
                self.objects.len()
            );
        }
        !same
    }

    /// The prefix opened again as the server holds it now, followed as this one is (one
    /// open shared by the callers within [`SHARE_NEXT`]); `None` when this one is not
    /// followed.
    pub(super) fn reopen(&self) -> Option<Result<Arc<RemotePrefix>, RemoteError>> {
        let (every, opts) = {
            let f = lock(&self.follow);
            let f = f.as_ref()?;
            (f.every, f.opts.clone())
        };
        let mut next = lock(&self.next);
        if let Some((_, n)) = next.as_ref().filter(|(at, _)| at.elapsed() < SHARE_NEXT) {
            return Some(Ok(Arc::clone(n)));
        }
        let opened = open_prefix_after(&self.url, &opts, Some(self));
        if let Ok(p) = &opened {
            p.follow_every(every, &opts);
            *next = Some((Instant::now(), Arc::clone(p)));
        }
        Some(opened)
    }

    /// Seeds the cache with the bytes `before` holds of the objects this listing names as
    /// `before`'s did ([`open_prefix_after`]), least recently used first.
    pub(super) fn seed_from(&self, before: &RemotePrefix) {
        for (key, bytes) in before.cache.extents() {
            let Some(old) = usize::try_from(key)
                .ok()
                .and_then(|i| before.objects.get(i))
            else {
                continue;
            };
            let Some(i) = self.find(&old.rel) else {
                continue;
            };
            if same_listing(
                std::slice::from_ref(old),
                std::slice::from_ref(&self.objects[i]),
            ) {
                self.cache.seed(i as u64, bytes);
            }
        }
    }
}
