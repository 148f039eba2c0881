//! Unit tests of [`super::ChunkCache`]: budget, single-flight loads, scan resistance.

use super::*;
use std::sync::Barrier;
use std::sync::atomic::AtomicUsize;
use std::thread;
use std::time::Duration;

fn val(n: usize, b: u8) -> Vec<u8> {
    vec![b; n]
}

#[test]
fn cache_bytes_accounted_on_insert_and_replace() {
    let c = ChunkCache::new(100);
    c.insert(1u32, Arc::new(val(30, 1)));
    c.insert(2, Arc::new(val(20, 2)));
    assert_eq!(c.bytes(), 50);
    c.insert(1, Arc::new(val(10, 3)));
    assert_eq!(c.bytes(), 30);
    assert_eq!(c.len(), 2);
    assert_eq!(c.get(&1).unwrap()[0], 3);
}

#[test]
fn cache_over_budget_evicts_least_recently_used() {
    let c = ChunkCache::new(100);
    c.insert(1u32, Arc::new(val(40, 1)));
    c.insert(2, Arc::new(val(40, 2)));
    assert!(c.get(&1).is_some()); // 2 is now the LRU
    c.insert(3, Arc::new(val(40, 3)));
    assert_eq!(c.bytes(), 80);
    assert!(c.get(&2).is_none());
    assert!(c.get(&1).is_some());
    assert!(c.get(&3).is_some());
    assert_eq!(c.stats().evictions, 1);
}

#[test]
fn cache_over_budget_evicts_streamed_entries_before_the_least_recently_used() {
    let c = ChunkCache::new(300);
    for k in 1..=3u32 {
        c.insert(k, Arc::new(val(100, k as u8)));
    }
    c.streamed(&3); // the newest entry, but read once
    c.insert(4, Arc::new(val(100, 4)));
    assert!(c.get(&3).is_none(), "the streamed entry makes room");
    assert!(c.get(&1).is_some(), "the least recently used one stays");
    // Room for a decode, too: again the streamed entry goes first.
    c.streamed(&4);
    let _buf = c.buffer(100);
    assert!(c.get(&4).is_none());
    assert!(c.get(&1).is_some() && c.get(&2).is_some());
}

#[test]
fn cache_values_loaded_ahead_are_evicted_last_until_read() {
    let c = ChunkCache::new(300);
    let ok = |b: u8| move || Ok::<_, ()>(val(100, b));
    c.load_ahead(1u32, ok(1)).unwrap();
    c.get_or_load(2, ok(2)).unwrap();
    c.get_or_load(3, ok(3)).unwrap();
    c.get_or_load(4, ok(4)).unwrap(); // over budget: 1 is the oldest, but not read yet
    assert!(
        c.contains_or_loading(&1),
        "a value loaded ahead outlives older reads"
    );
    assert!(!c.contains_or_loading(&2));
    assert!(c.get(&1).is_some()); // read now: an ordinary entry from here on
    for k in 5..=7u32 {
        c.get_or_load(k, ok(k as u8)).unwrap();
    }
    assert!(
        !c.contains_or_loading(&1),
        "once read it ages like any other"
    );
    // When everything left was loaded ahead, the oldest of those goes.
    let d = ChunkCache::new(200);
    for k in 1..=3u32 {
        d.load_ahead(k, ok(k as u8)).unwrap();
    }
    assert!(!d.contains_or_loading(&1) && d.contains_or_loading(&3));
}

#[test]
fn cache_value_larger_than_budget_is_returned_not_cached() {
    let c = ChunkCache::new(10);
    let v = c.get_or_load(7u32, || Ok::<_, ()>(val(11, 9))).unwrap();
    assert_eq!(v.len(), 11);
    assert!(c.is_empty());
    assert_eq!(c.bytes(), 0);
}

#[test]
fn cache_error_is_not_cached() {
    let c = ChunkCache::<u32>::new(100);
    assert_eq!(c.get_or_load(1, || Err::<Vec<u8>, _>("bad")), Err("bad"));
    assert!(c.is_empty());
    let v = c.get_or_load(1, || Ok::<_, &str>(val(5, 1))).unwrap();
    assert_eq!(v.len(), 5);
    assert_eq!(c.stats().loads, 2);
}

#[test]
fn cache_buffer_makes_room_and_recycles_evicted_buffers() {
    let c = ChunkCache::new(100);
    c.insert(1u32, Arc::new(val(50, 1)));
    c.insert(2, Arc::new(val(50, 2)));
    let buf = c.buffer(50);
    assert_eq!(buf.len(), 50);
    // Room was made before the decode, and the evicted buffer was reused.
    assert_eq!(c.bytes(), 50);
    assert_eq!(c.stats().recycled, 1);
    c.insert(3, Arc::new(buf));
    assert_eq!(c.bytes(), 100);
}

#[test]
fn cache_buffer_held_by_reader_is_not_recycled() {
    let c = ChunkCache::new(50);
    c.insert(1u32, Arc::new(val(50, 1)));
    let held = c.get(&1).unwrap();
    let buf = c.buffer(50);
    assert_eq!(c.stats().recycled, 0);
    assert_eq!(held[0], 1, "a reader's bytes survive eviction");
    assert_eq!(buf.len(), 50);
}

#[test]
fn cache_concurrent_cold_reads_load_once() {
    let c = Arc::new(ChunkCache::<u32>::new(1 << 20));
    let calls = Arc::new(AtomicUsize::new(0));
    let n = 8;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let (c, calls, barrier) = (c.clone(), calls.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                c.get_or_load(42, || {
                    calls.fetch_add(1, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(50));
                    Ok::<_, ()>(val(1000, 4))
                })
                .unwrap()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().len(), 1000);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(c.stats().loads, 1);
}

#[test]
fn cache_waiters_retry_after_failed_load() {
    let c = Arc::new(ChunkCache::<u32>::new(1 << 20));
    let calls = Arc::new(AtomicUsize::new(0));
    let n = 4;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let (c, calls, barrier) = (c.clone(), calls.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                c.get_or_load(1, || {
                    let k = calls.fetch_add(1, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(20));
                    if k == 0 { Err(()) } else { Ok(val(10, 1)) }
                })
                .is_ok()
            })
        })
        .collect();
    let oks = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|ok| *ok)
        .count();
    // Exactly the first loader failed; everyone else got the value from one more load.
    assert_eq!(oks, n - 1);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn cache_panicking_loader_wakes_waiters() {
    let c = Arc::new(ChunkCache::<u32>::new(1 << 20));
    let c2 = c.clone();
    let t = thread::spawn(move || {
        let _ = c2.get_or_load(5, || -> Result<Vec<u8>, ()> {
            thread::sleep(Duration::from_millis(50));
            panic!("loader panics")
        });
    });
    thread::sleep(Duration::from_millis(10));
    let v = c.get_or_load(5, || Ok::<_, ()>(val(3, 3))).unwrap();
    assert_eq!(v.len(), 3);
    assert!(t.join().is_err());
}

/// Loads `key` through a recycled-or-fresh buffer filled with `b`, as the tree does.
fn load(c: &ChunkCache<u32>, key: u32, n: usize, b: u8) -> Bytes {
    c.get_or_load(key, || {
        let mut buf = c.buffer(n);
        buf.fill(b);
        Ok::<_, ()>(buf)
    })
    .unwrap()
}

#[test]
fn cache_streamed_entries_are_evicted_first_and_their_buffers_reused() {
    // A scan of 40 entries through a budget that could hold 100: without the streaming
    // rule all 40 would stay; with it only the last STREAM_KEEP do, and every buffer
    // after the first few is a recycled one.
    let c = ChunkCache::<u32>::new(100 * 64);
    for k in 0..40 {
        let v = load(&c, k, 64, k as u8);
        assert!(v.iter().all(|&x| x == k as u8), "entry {k} has stale bytes");
        drop(v);
        c.streamed(&k);
    }
    assert!(
        (STREAM_MIN..=STREAM_KEEP).contains(&c.len()),
        "{} streamed entries kept",
        c.len()
    );
    assert_eq!(c.bytes(), c.len() * 64);
    let st = c.stats();
    assert!(st.recycled >= 40 - STREAM_KEEP as u64 - 2, "{st:?}");
    for k in 40 - STREAM_MIN as u32..40 {
        assert!(
            c.get(&k).is_some(),
            "the newest streamed entries stay ({k})"
        );
    }
}

#[test]
fn cache_streamed_entry_read_again_or_streamed_twice_is_kept() {
    let c = ChunkCache::<u32>::new(100 * 64);
    load(&c, 0, 64, 0);
    c.streamed(&0);
    assert!(c.get(&0).is_some()); // a second reader: now an ordinary entry
    for k in 1..=10 {
        load(&c, k, 64, 1);
        c.streamed(&k);
    }
    assert!(c.get(&0).is_some(), "a re-read streamed entry was evicted");
    assert!(c.get(&1).is_none(), "an old streamed entry was kept");
    // Entry 1 streamed again while its ghost is remembered: kept from now on.
    load(&c, 1, 64, 2);
    c.streamed(&1);
    for k in 11..=20 {
        load(&c, k, 64, 1);
        c.streamed(&k);
    }
    assert_eq!(
        c.get(&1).unwrap()[0],
        2,
        "a twice-streamed entry was evicted"
    );
    // A third pass over it (and over the re-read entry 0) does not demote them again.
    c.streamed(&1);
    c.streamed(&0);
    for k in 21..=30 {
        load(&c, k, 64, 1);
        c.streamed(&k);
    }
    assert_eq!(
        c.get(&1).unwrap()[0],
        2,
        "a reused entry was demoted by streaming"
    );
    assert!(
        c.get(&0).is_some(),
        "a re-read entry was demoted by streaming"
    );
    assert!(c.len() <= STREAM_KEEP + 2, "{} entries", c.len());
    // Removing a streamed entry forgets it (no stale key left behind to evict later).
    c.remove(&30);
    assert!(c.get(&30).is_none());
    assert_eq!(c.get(&0).unwrap()[0], 0);
}

#[test]
fn cache_knows_which_evicted_entries_were_streamed_lately() {
    let c = ChunkCache::<u32>::new(100 * 64);
    for k in 0..20 {
        load(&c, k, 64, 1);
        c.streamed(&k);
    }
    // Streamed entries are evicted in order (their buffers serve the next loads): the ones
    // before `gone` are ghosts, the last of them evicted during the last few loads.
    let gone = (0..20).find(|k| c.contains_or_loading(k)).unwrap();
    assert!(gone > 5, "{gone}");
    assert!(c.streamed_lately(&(gone - 1), 8));
    assert!(!c.streamed_lately(&0, 8), "evicted more than 8 loads ago");
    assert!(c.streamed_lately(&0, 20));
    assert!(!c.streamed_lately(&gone, 100), "cached, not a ghost");
    assert!(!c.streamed_lately(&99, 100), "never seen");
    // Ten more loads later, the newest ghost is no longer recent.
    for k in 100..110 {
        load(&c, k, 64, 1);
    }
    assert!(!c.streamed_lately(&(gone - 1), 8));
    assert!(c.streamed_lately(&(gone - 1), 16));
    // A ghost streamed again is a second pass: no longer a ghost.
    load(&c, 0, 64, 2);
    c.streamed(&0);
    assert!(!c.streamed_lately(&0, 100));
}
