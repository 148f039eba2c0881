//! Large byte buffers (decompressed and compressed chunks) whose first touch is cheap.
//!
//! On the target VMs fresh memory is slow to touch: every 4 KiB page the process faults in for
//! the first time is zeroed by the kernel at 0.3-0.9 GB/s (the hypervisor backs the page on
//! that first write). A sequential read of a 1 GiB frame faults in some 70 MiB of chunk
//! buffers before the cache starts recycling them, and `perf` put 10-17% of all samples of a
//! cold pass in the kernel's `clear_page` for them. Buffers of at least [`HUGE_PAGE`] bytes
//! are therefore advised for transparent huge pages (`MADV_HUGEPAGE`; the machines run THP in
//! `madvise` mode), which the kernel faults in 2 MiB at a time. Measured in alternating runs
//! of the cold sequential read (`BENCHMARKS.md`): less daemon CPU per GiB and a higher rate.
//!
//! Smaller buffers of 64 KiB or more (a small read's decoded block) are faulted in with one
//! `MADV_POPULATE_WRITE` call rather than a fault per page (BENCHMARKS.md, session 12).
//!
//! Buffers stay plain `Vec<u8>`: the advice changes how the kernel backs the pages, never
//! their contents, and an allocation the kernel cannot back with huge pages simply gets
//! 4 KiB pages.

/// The kernel's page: the granule of its page cache, of what an `mmap` reader faults in, and so
/// of the pages b2fs offers and caches for small reads (4 KiB on the x86-64 and arm64 kernels
/// b2fs runs on).
pub const PAGE: usize = 4096;

/// Size of an x86-64 transparent huge page; smaller buffers are allocated the ordinary way.
pub const HUGE_PAGE: usize = 2 << 20;

/// A zero-filled buffer of `len` bytes, advised for huge pages when it is large.
///
/// A large buffer is not touched here: it is allocated zeroed (`calloc`, which takes fresh
/// pages from the kernel and does not write them) and advised before its first write, so its
/// pages are faulted in by whoever writes them first: each byte of a fresh chunk buffer is
/// written once (by the decode) rather than twice, and a chunk decoded on two threads faults
/// its two halves on two cores (BENCHMARKS.md, session 16).
pub fn zeroed(len: usize) -> Vec<u8> {
    let buf = vec![0u8; len];
    if len >= HUGE_PAGE {
        advise_huge(&buf);
    } else if len >= POPULATE_MIN {
        populate(&buf);
    }
    buf
}

/// Smallest buffer [`zeroed`] faults in with one call (a 128 KiB block of a small read's
/// block cache is the case it is for).
const POPULATE_MIN: usize = 64 << 10;

/// Faults in the whole pages inside `buf` for writing with one call (`MADV_POPULATE_WRITE`,
/// Linux 5.14) instead of one page fault per page at the first write: a fresh 128 KiB
/// block buffer otherwise takes 32 faults while the block is decoded into it. A kernel
/// without it (`EINVAL`) leaves the pages to fault in as before.
fn populate(buf: &[u8]) {
    let start = buf.as_ptr() as usize;
    let (lo, hi) = (
        start.next_multiple_of(PAGE),
        (start + buf.len()) / PAGE * PAGE,
    );
    if hi > lo {
        // SAFETY: [lo, hi) lies inside `buf`'s allocation. MADV_POPULATE_WRITE only makes
        // the kernel back those pages now rather than at their first write: their contents
        // (zeros from the allocator, or whatever it reused) are not changed. Errors are
        // harmless and ignored.
        unsafe {
            libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_POPULATE_WRITE);
        }
    }
}

/// Grows `buf` to at least `len` bytes; never shrinks it. When it has to reallocate, the
/// old contents are **not** kept (callers of this overwrite what they use: reused read
/// buffers), which saves copying megabytes into memory that is about to be overwritten.
/// The new bytes read as zero.
pub fn grow_discarding(buf: &mut Vec<u8>, len: usize) {
    if buf.len() >= len {
        return;
    }
    if buf.capacity() >= len {
        buf.resize(len, 0);
        return;
    }
    // Room for later, slightly larger chunks, so that growth is not paid chunk after chunk.
    let cap = len.saturating_add(len / 8);
    *buf = Vec::new(); // free the old allocation first: the allocator may reuse it
    let mut fresh = Vec::with_capacity(cap);
    if cap >= HUGE_PAGE {
        advise_huge(&fresh);
    }
    fresh.resize(len, 0);
    *buf = fresh;
}

/// Advises the whole 2 MiB-aligned pages inside `buf`'s allocation (its capacity) for huge
/// pages. Before their first write: pages faulted in already keep their size.
fn advise_huge(buf: &Vec<u8>) {
    let start = buf.as_ptr() as usize;
    let end = start.saturating_add(buf.capacity());
    let (lo, hi) = (
        start.next_multiple_of(HUGE_PAGE),
        end / HUGE_PAGE * HUGE_PAGE,
    );
    if hi > lo {
        // SAFETY: [lo, hi) lies inside the allocation `buf` owns (its capacity). MADV_HUGEPAGE
        // only tells the kernel how to back those pages; it never changes their contents or
        // whether they are mapped, so no Rust-visible memory changes. A failure (no THP in
        // this kernel) leaves ordinary pages, which is harmless: the result is ignored.
        unsafe {
            libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
        }
    }
}

/// A buffer for the bytes of one read that are assembled rather than cut from a cache (a
/// 1 MiB read of an N-dim `array.npy` is hundreds of runs of eight chunks), taken from a small
/// process-wide pool and given back when dropped (after the reply was written). A fresh
/// zeroed megabyte per read costs a `memset`, and fresh pages whenever the allocator hands
/// out new ones: 4-6% of the daemon's CPU in a `np.load` (BENCHMARKS.md, session 13).
#[derive(Debug)]
pub struct Reused(Vec<u8>);

/// Buffers the pool keeps (a few FUSE threads each hold one while they answer).
const REUSED_KEEP: usize = 4;

/// Buffers smaller than this are allocated the ordinary way and not kept.
const REUSED_MIN: usize = 64 << 10;

/// Larger buffers are not kept (the pool's memory stays within 4 x 4 MiB).
const REUSED_MAX: usize = 4 << 20;

static REUSED: parking_lot::Mutex<Vec<Vec<u8>>> = parking_lot::Mutex::new(Vec::new());

impl Reused {
    /// A buffer of `len` bytes whose contents are **unspecified** (bytes of an earlier read,
    /// or zeros): the caller overwrites every byte before the buffer is read.
    pub fn take(len: usize) -> Reused {
        if (REUSED_MIN..=REUSED_MAX).contains(&len) {
            let mut pool = REUSED.lock();
            if let Some(i) = pool.iter().position(|b| b.capacity() >= len) {
                let mut buf = pool.swap_remove(i);
                drop(pool);
                if buf.len() >= len {
                    buf.truncate(len);
                } else {
                    buf.resize(len, 0);
                }
                return Reused(buf);
            }
        }
        Reused(vec![0u8; len])
    }
}

impl std::ops::Deref for Reused {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::DerefMut for Reused {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

impl Drop for Reused {
    fn drop(&mut self) {
        let cap = self.0.capacity();
        if (REUSED_MIN..=REUSED_MAX).contains(&cap) {
            let mut pool = REUSED.lock();
            if pool.len() < REUSED_KEEP {
                pool.push(std::mem::take(&mut self.0));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reused_buffers_have_the_length_asked_and_come_back() {
        let mut a = Reused::take(300 << 10);
        a.fill(7);
        let at = a.as_ptr();
        drop(a);
        // Another test's buffers may be in the pool: take them all and look for ours.
        let got: Vec<Reused> = (0..REUSED_KEEP).map(|_| Reused::take(200 << 10)).collect();
        assert!(got.iter().all(|b| b.len() == 200 << 10));
        assert!(
            got.iter().any(|b| b.as_ptr() == at && b[0] == 7),
            "reused, not cleared"
        );
        let small = Reused::take(100);
        assert_eq!(&small[..], &[0u8; 100][..]);
    }

    #[test]
    fn zeroed_buffers_are_zero_and_exact_length() {
        for len in [0, 1, 4096, HUGE_PAGE - 1, HUGE_PAGE, 3 * HUGE_PAGE + 17] {
            let b = zeroed(len);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0), "len {len}");
        }
    }

    #[test]
    fn a_large_zeroed_buffer_is_not_faulted_in_until_written() {
        // Above glibc's largest mmap threshold (32 MiB): always fresh pages from the kernel.
        let len = 40 << 20;
        let mut buf = zeroed(len);
        let resident = |buf: &[u8]| {
            let start = buf.as_ptr() as usize / PAGE * PAGE;
            let span = buf.as_ptr() as usize + buf.len() - start;
            let mut pages = vec![0u8; span.div_ceil(PAGE)];
            // SAFETY: [start, start + span) is mapped (it holds `buf`, rounded down to its
            // page); mincore only reports residency into `pages`, one byte per page.
            let r = unsafe { libc::mincore(start as *mut libc::c_void, span, pages.as_mut_ptr()) };
            assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
            pages.iter().filter(|&&p| p & 1 != 0).count()
        };
        // At most the allocator's header page (and a huge page around it).
        assert!(
            resident(&buf) * PAGE <= HUGE_PAGE,
            "{} pages resident",
            resident(&buf)
        );
        buf[len / 2] = 1;
        assert!(resident(&buf) >= 1);
        assert_eq!(buf.iter().map(|&b| usize::from(b)).sum::<usize>(), 1);
    }

    #[test]
    fn grow_discarding_only_grows_and_keeps_contents_when_it_need_not_reallocate() {
        let mut b = Vec::with_capacity(100);
        b.extend_from_slice(&[7u8; 10]);
        grow_discarding(&mut b, 50);
        assert_eq!(b.len(), 50);
        assert_eq!(&b[..10], &[7u8; 10], "fits the capacity: contents kept");
        assert!(b[10..].iter().all(|&x| x == 0));
        grow_discarding(&mut b, 20);
        assert_eq!(b.len(), 50, "never shrinks");
        grow_discarding(&mut b, 3 * HUGE_PAGE);
        assert_eq!(b.len(), 3 * HUGE_PAGE);
        assert!(b.capacity() >= 3 * HUGE_PAGE + 3 * HUGE_PAGE / 8);
        assert!(
            b.iter().all(|&x| x == 0),
            "reallocated: zero, old contents dropped"
        );
    }
}
