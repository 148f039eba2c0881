//! The page-store threads: each page stored once, answers sent by whoever stores the last
//! batch they wait for, pages offered for after an answer.

use super::*;
use crate::tree::ReadData;
use std::sync::mpsc::{Receiver, Sender, channel};

fn page(b: u8) -> Pieces {
    Pieces::from(ReadData::Owned(vec![b; PAGE as usize]))
}

use super::super::notify::joined_bytes as joined;

/// What the test thread reports of each store: `(inode, offset, bytes)`.
type Stored = Receiver<(u64, u64, Vec<u8>)>;

/// A pusher of one thread (answers wait at most `wait`) that reports each store as
/// `(inode, offset, bytes)` and is held up on the store of offset 0 until the gate is
/// sent to.
fn gated(wait: Duration) -> (Pusher, Stored, Sender<()>) {
    gated_threads(wait, 1)
}

/// [`gated`] with `threads` storing threads.
fn gated_threads(wait: Duration, threads: usize) -> (Pusher, Stored, Sender<()>) {
    let (tx, rx) = channel();
    let (gate_tx, gate) = channel::<()>();
    let gate = Mutex::new(gate);
    let pusher = Pusher::start_with(wait, threads, move |ino, offset, bytes| {
        if offset == 0 {
            let _ = gate.lock().unwrap().recv();
        }
        tx.send((ino, offset, joined(bytes))).unwrap();
        Ok(())
    })
    .unwrap();
    (pusher, rx, gate_tx)
}

/// Waits (polling, 10 s at most) until the thread is storing something.
fn until_storing(pusher: &Pusher) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while pusher.shared.lock().storing.iter().all(Option::is_none) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The next `n` stores, mapped by `f`.
fn stores<T>(rx: &Stored, n: usize, f: impl Fn((u64, u64, Vec<u8>)) -> T) -> Vec<T> {
    (0..n)
        .map(|_| f(rx.recv_timeout(Duration::from_secs(10)).expect("a store")))
        .collect()
}

/// An answer that does nothing.
fn none() -> Answer {
    Box::new(|| {})
}

/// An answer that reports the name of the thread that sent it.
fn reporting() -> (Answer, Receiver<Option<String>>) {
    let (tx, rx) = channel();
    let answer = Box::new(move || {
        let _ = tx.send(std::thread::current().name().map(str::to_owned));
    });
    (answer, rx)
}

#[test]
fn each_page_is_stored_once_and_a_faulted_page_not_at_all() {
    let (pusher, rx, gate) = gated(WAIT);
    // A batch the thread is held up on, then two faults outrunning it: the second
    // offers pages the first queued, and reads one of them.
    pusher.offer(
        7,
        1 << 20..(1 << 20) + PAGE,
        (vec![(0, page(1))], vec![]),
        none(),
    );
    until_storing(&pusher);
    let p = |o: u64, b| (o * PAGE, page(b));
    let offer = |reading, pages| pusher.offer(7, reading, (pages, vec![]), none());
    offer(10 * PAGE..11 * PAGE, vec![p(11, 2), p(12, 2), p(13, 2)]);
    offer(11 * PAGE..12 * PAGE, vec![p(12, 3), p(13, 3), p(14, 3)]);
    pusher.offer(8, 0..PAGE, (vec![p(12, 4)], vec![]), none());
    gate.send(()).unwrap();
    // Stored in order, each page once: the batch of inode 8 is the last one.
    let got = stores(&rx, 5, |(ino, offset, bytes)| (ino, offset, bytes[0]));
    let want = vec![
        (7, 0, 1),
        (7, 12 * PAGE, 2),
        (7, 13 * PAGE, 2),
        (7, 14 * PAGE, 3),
        (8, 12 * PAGE, 4),
    ];
    assert_eq!(got, want);
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
}

#[test]
fn a_range_of_pages_is_stored_by_runs_without_its_faulted_or_already_queued_pages() {
    let (pusher, rx, gate) = gated(WAIT);
    let range = |first: u64, n: u64| {
        (
            first * PAGE,
            Pieces::from(ReadData::Owned(vec![5u8; (n * PAGE) as usize])),
        )
    };
    // The thread is held up on page 0 while: a fault offers pages 12-15 as one range
    // (the pages after a fault, `FORWARD_MAX`), a fault reads page 14 from the queue,
    // and a fault offers pages 15-17 (15 already queued).
    pusher.offer(
        7,
        1 << 20..(1 << 20) + PAGE,
        (vec![(0, page(1))], vec![]),
        none(),
    );
    until_storing(&pusher);
    pusher.offer(
        7,
        11 * PAGE..12 * PAGE,
        (vec![range(12, 4)], vec![]),
        none(),
    );
    pusher.reading(7, 14 * PAGE..15 * PAGE);
    pusher.offer(
        7,
        14 * PAGE..15 * PAGE,
        (vec![range(15, 3)], vec![]),
        none(),
    );
    gate.send(()).unwrap();
    // (inode, first page, pages): each page once, page 14 not at all.
    let got = stores(&rx, 4, |(ino, offset, bytes)| {
        (ino, offset / PAGE, bytes.len() as u64 / PAGE)
    });
    assert_eq!(got, vec![(7, 0, 1), (7, 12, 2), (7, 15, 1), (7, 16, 2)]);
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
}

#[test]
fn a_page_a_fault_took_out_and_another_queued_again_is_stored_after_its_answer() {
    // One thread, held up on page 0 until told; the store of page 5 waits for the answer
    // of the fault that reads page 5, as the kernel's page lock makes it wait.
    let (tx, rx) = channel();
    let (gate_tx, gate) = channel::<()>();
    let (answer_tx, answer_rx) = channel::<()>();
    let (gate, answer_rx) = (Mutex::new(gate), Mutex::new(answer_rx));
    let pusher = Pusher::start_with(Duration::from_secs(60), 1, move |_, offset, _| {
        if offset == 0 {
            let _ = gate.lock().unwrap().recv();
        }
        if offset == 5 * PAGE {
            let answered = answer_rx
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(10));
            assert!(
                answered.is_ok(),
                "the store of page 5 waited for its fault's answer"
            );
        }
        tx.send(offset / PAGE).unwrap();
        Ok(())
    })
    .unwrap();
    pusher.offer(
        7,
        100 * PAGE..101 * PAGE,
        (vec![(0, page(1))], vec![]),
        none(),
    );
    until_storing(&pusher);
    // A fault queues page 5; a fault reading page 5 takes it out and offers page 20 (its
    // answer waits for that); another fault queues page 5 again.
    pusher.offer(
        7,
        101 * PAGE..102 * PAGE,
        (vec![(5 * PAGE, page(2))], vec![]),
        none(),
    );
    pusher.reading(7, 5 * PAGE..6 * PAGE);
    let answer = Box::new(move || answer_tx.send(()).unwrap());
    pusher.offer(
        7,
        5 * PAGE..6 * PAGE,
        (vec![(20 * PAGE, page(3))], vec![]),
        answer,
    );
    pusher.offer(
        7,
        102 * PAGE..103 * PAGE,
        (vec![(5 * PAGE, page(4))], vec![]),
        none(),
    );
    gate_tx.send(()).unwrap();
    let got: Vec<u64> = (0..3)
        .map(|_| rx.recv_timeout(Duration::from_secs(20)).expect("a store"))
        .collect();
    assert_eq!(got, vec![0, 20, 5]);
}

#[test]
fn a_fault_whose_own_page_is_being_stored_is_answered_at_once_by_its_worker() {
    // An answer left to the threads would wait a minute.
    let (pusher, rx, gate) = gated(Duration::from_secs(60));
    pusher.offer(
        7,
        PAGE * 100..PAGE * 101,
        (vec![(0, page(1))], vec![]),
        none(),
    );
    // The thread is storing page 0 (held up): a fault reading page 0 comes.
    until_storing(&pusher);
    assert_eq!(pusher.shared.lock().storing[0], Some((7, 0..PAGE)));
    pusher.reading(7, 0..PAGE);
    let (answer, answered) = reporting();
    pusher.offer(7, 0..PAGE, (vec![(PAGE, page(2))], vec![]), answer);
    let by = answered.try_recv().expect("answered before offer returned");
    assert_eq!(by, std::thread::current().name().map(str::to_owned));
    gate.send(()).unwrap();
    // Its pages were still handed over.
    let got = stores(&rx, 2, |(ino, offset, _)| (ino, offset));
    assert_eq!(got, vec![(7, 0), (7, PAGE)]);
}

#[test]
fn a_faults_answer_is_sent_by_the_thread_that_stores_its_last_batch() {
    // The bound would end the wait after a minute: the gate, not the bound, must end it.
    let (pusher, rx, gate) = gated_threads(Duration::from_secs(60), 2);
    // Two batches: page 0 (its thread held up) and page 5.
    let (answer, answered) = reporting();
    let pages = vec![(0, page(1)), (5 * PAGE, page(2))];
    pusher.offer(7, 100 * PAGE..101 * PAGE, (pages, vec![]), answer);
    // Page 5 is stored while the other thread is held up on page 0...
    assert_eq!(
        stores(&rx, 1, |(ino, offset, _)| (ino, offset)),
        vec![(7, 5 * PAGE)]
    );
    // ...and the answer still waits for page 0, queued before it.
    assert!(
        answered.recv_timeout(Duration::from_millis(50)).is_err(),
        "answered before page 0 was stored"
    );
    gate.send(()).unwrap();
    let by = answered
        .recv_timeout(Duration::from_secs(10))
        .expect("answered");
    assert_eq!(by.as_deref(), Some("b2fs-push"), "sent by a storing thread");
    assert_eq!(
        stores(&rx, 1, |(ino, offset, _)| (ino, offset)),
        vec![(7, 0)]
    );
}

#[test]
fn pages_offered_for_after_the_answer_are_stored_without_holding_it() {
    // One thread, held up on the store of page 0 (offered for after the answer); the
    // bound would end the wait after a minute.
    let (pusher, rx, gate) = gated(Duration::from_secs(60));
    let (answer, answered) = reporting();
    let now = vec![(PAGE, page(1))];
    let later = vec![(0, page(2)), (2 * PAGE, page(3))];
    pusher.offer(7, 5 * PAGE..6 * PAGE, (now, later), answer);
    // Page 1 is stored, then the answer goes while page 0 is held up.
    assert_eq!(
        stores(&rx, 1, |(ino, offset, _)| (ino, offset)),
        vec![(7, PAGE)]
    );
    let by = answered
        .recv_timeout(Duration::from_secs(10))
        .expect("answered before the later pages were stored");
    assert_eq!(by.as_deref(), Some("b2fs-push"));
    gate.send(()).unwrap();
    let got = stores(&rx, 2, |(ino, offset, bytes)| (ino, offset, bytes[0]));
    assert_eq!(got, vec![(7, 0, 2), (7, 2 * PAGE, 3)]);
}

#[test]
fn a_fault_with_nothing_to_wait_for_is_answered_by_its_worker() {
    let (pusher, _rx, _gate) = gated(Duration::from_secs(60));
    let (answer, answered) = reporting();
    pusher.offer(7, 0..PAGE, (Vec::new(), Vec::new()), answer);
    let by = answered.try_recv().expect("answered before offer returned");
    assert_eq!(by, std::thread::current().name().map(str::to_owned));
}

#[test]
fn batches_count_as_stored_once_every_earlier_one_is() {
    let mut state = State::default();
    state.finish(2);
    state.finish(3);
    assert_eq!(state.done, 0, "batch 1 is still being stored");
    state.finish(1);
    assert_eq!(state.done, 3);
    state.finish(5);
    assert_eq!(state.done, 3);
    assert!(state.finished.contains(&5));
}

#[test]
fn split_cuts_between_ranges_into_batches_of_about_as_many_pages() {
    let r = |first: u64, n: u64| {
        (
            first * PAGE,
            Pieces::from(ReadData::Owned(vec![0u8; (n * PAGE) as usize])),
        )
    };
    let firsts = |batches: Vec<Vec<(u64, Pieces)>>| -> Vec<Vec<u64>> {
        batches
            .into_iter()
            .map(|b| b.into_iter().map(|(o, _)| o / PAGE).collect())
            .collect()
    };
    assert!(split(Vec::new(), 2).is_empty());
    assert_eq!(firsts(split(vec![r(0, 1)], 2)), vec![vec![0]]);
    let below = || (1..=4).map(|k| r(k * 16, 1)).collect::<Vec<_>>();
    assert_eq!(firsts(split(below(), 2)), vec![vec![16, 32], vec![48, 64]]);
    assert_eq!(firsts(split(below(), 1)), vec![vec![16, 32, 48, 64]]);
    // A forward range of 3 pages, then 3 single pages: 6 pages, 3 a batch.
    let mixed = vec![r(1, 3), r(16, 1), r(32, 1), r(48, 1)];
    assert_eq!(firsts(split(mixed, 2)), vec![vec![1], vec![16, 32, 48]]);
}

#[test]
fn an_answer_goes_between_two_stores_once_its_wait_is_over() {
    // One thread, held up on each page until told; answers wait at most 1 ms.
    let (tx, rx) = channel();
    let (gate_tx, gate) = channel::<()>();
    let gate = Mutex::new(gate);
    let wait = Duration::from_millis(1);
    let pusher = Pusher::start_with(wait, 1, move |_, offset, _| {
        let _ = gate.lock().unwrap().recv();
        tx.send(offset).unwrap();
        Ok(())
    })
    .unwrap();
    let (answer, answered) = reporting();
    let t = Instant::now();
    pusher.offer(
        1,
        0..PAGE,
        (vec![(PAGE, page(1)), (2 * PAGE, page(2))], vec![]),
        answer,
    );
    until_storing(&pusher);
    while t.elapsed() <= wait {
        std::thread::sleep(Duration::from_millis(1));
    }
    // The first store ends after the wait is over: the answer goes before the second.
    gate_tx.send(()).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(PAGE));
    let by = answered
        .recv_timeout(Duration::from_secs(10))
        .expect("answered");
    assert_eq!(by.as_deref(), Some("b2fs-push"));
    assert!(rx.try_recv().is_err(), "page 2 is still being stored");
    gate_tx.send(()).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(2 * PAGE));
}

#[test]
fn pages_ahead_are_stored_with_no_answer_and_later_answers_wait_for_them() {
    let (pusher, rx, gate) = gated(Duration::from_secs(10));
    let p = |o: u64, b| (o * PAGE, page(b));
    // The rows ahead of a walk: the thread is held up on page 0, nothing answers.
    pusher.ahead(7, vec![p(0, 1), p(1, 1), p(2, 1)]);
    until_storing(&pusher);
    // A page queued already is not queued again.
    pusher.ahead(7, vec![p(2, 2)]);
    // The walk's next fault (elsewhere, offering nothing) is answered once they are stored,
    // by the thread that stores them.
    let (answer, answered) = reporting();
    pusher.offer(7, 9 * PAGE..10 * PAGE, (vec![], vec![]), answer);
    assert!(
        answered.recv_timeout(Duration::from_millis(100)).is_err(),
        "answered before the pages ahead were stored"
    );
    gate.send(()).unwrap();
    let got = stores(&rx, 3, |(ino, offset, bytes)| (ino, offset, bytes[0]));
    assert_eq!(got, vec![(7, 0, 1), (7, PAGE, 1), (7, 2 * PAGE, 1)]);
    let by = answered.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(by.as_deref(), Some("b2fs-push"));
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
}
