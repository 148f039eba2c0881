//! The page-store threads: each page stored once, answers sent by whoever stores the last
//! batch they wait for, pages offered for after an answer.

use super::*;
use crate::tree::ReadData;
use std::collections::HashMap;
use std::sync::Mutex;
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
fn stores<S, T>(rx: &Receiver<S>, n: usize, f: impl Fn(S) -> T) -> Vec<T> {
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
    let storing = pusher.shared.lock().storing[0].clone();
    assert_eq!(storing.map(|(ino, at, _)| (ino, at)), Some((7, 0..PAGE)));
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

/// A page of row `k` (a row is 16 pages: a 2-D array of 8,192 float64 items a row), filled
/// with its row number.
fn row(k: u64) -> (u64, Pieces) {
    (k * 16 * PAGE, page(k as u8))
}

/// A pusher of `threads` threads that reports each store as `(thread, row, first byte)`
/// and holds the store of each row in `gated` until its gate (in the same order) is sent to.
fn rows_gated(threads: usize, gated: &[u64]) -> (Pusher, RowStores, Vec<Sender<()>>) {
    let (tx, rx) = channel();
    let mut gates = HashMap::new();
    let mut senders = Vec::new();
    for &k in gated {
        let (gate_tx, gate) = channel::<()>();
        gates.insert(k * 16 * PAGE, Mutex::new(gate));
        senders.push(gate_tx);
    }
    let pusher = Pusher::start_with(Duration::from_secs(60), threads, move |_, offset, bytes| {
        if let Some(gate) = gates.get(&offset) {
            let _ = gate.lock().unwrap().recv();
        }
        let bytes = joined(bytes);
        assert_eq!(bytes.len(), PAGE as usize);
        tx.send((std::thread::current().id(), offset / PAGE / 16, bytes[0]))
            .unwrap();
        Ok(())
    })
    .unwrap();
    (pusher, rx, senders)
}

/// What [`rows_gated`]'s threads report.
type RowStores = Receiver<(std::thread::ThreadId, u64, u8)>;

#[test]
fn a_faults_nearest_rows_are_stored_in_turn_before_its_answer_and_the_rest_after_it() {
    // Two threads; the store of row 16 (the last before the answer) and of row 17 (the
    // first after it) are held up until told. The bound would end the wait after a minute.
    let (pusher, rx, gates) = rows_gated(2, &[EARLY as u64, EARLY as u64 + 1]);
    let (answer, answered) = reporting();
    let rows: Vec<_> = (1..=64).map(row).collect();
    pusher.offer(7, 0..PAGE, (rows, vec![]), answer);
    // Rows 1-15 are stored, by both threads; the answer waits for row 16.
    let first = stores(&rx, EARLY - 1, |s| s);
    let mut got: Vec<u64> = first.iter().map(|&(_, k, _)| k).collect();
    got.sort_unstable();
    assert_eq!(got, (1..EARLY as u64).collect::<Vec<_>>());
    assert!(
        answered.recv_timeout(Duration::from_millis(50)).is_err(),
        "answered before row 16 was stored"
    );
    gates[0].send(()).unwrap();
    // Once row 16 is stored the answer goes, while row 17 is still held up.
    let by = answered
        .recv_timeout(Duration::from_secs(10))
        .expect("answered before row 17 was stored");
    assert_eq!(by.as_deref(), Some("b2fs-push"));
    gates[1].send(()).unwrap();
    let all: Vec<_> = first
        .into_iter()
        .chain(stores(&rx, 64 - EARLY + 1, |s| s))
        .collect();
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    // Each row once, with its own bytes; each thread took every other row, in order.
    let mut rows: Vec<(u64, u8)> = all.iter().map(|&(_, k, b)| (k, b)).collect();
    rows.sort_unstable();
    assert_eq!(rows, (1..=64).map(|k| (k, k as u8)).collect::<Vec<_>>());
    let odd = all[0].0;
    let odd_rows = all.iter().filter(|s| s.0 == odd).map(|s| s.1);
    let even_rows = all.iter().filter(|s| s.0 != odd).map(|s| s.1);
    let first = all[0].1;
    assert_eq!(
        odd_rows.collect::<Vec<_>>(),
        (0..32).map(|k| first + 2 * k).collect::<Vec<_>>()
    );
    let other = 3 - first;
    assert_eq!(
        even_rows.collect::<Vec<_>>(),
        (0..32).map(|k| other + 2 * k).collect::<Vec<_>>()
    );
}

#[test]
fn a_reader_that_outran_the_rows_stored_after_an_answer_is_told_so_and_waits_for_them() {
    // One thread, held up on row 17 (the first row stored after the answer).
    let (pusher, rx, gates) = rows_gated(1, &[EARLY as u64 + 1]);
    let (answer, answered) = reporting();
    pusher.offer(7, 0..PAGE, ((1..=64).map(row).collect(), vec![]), answer);
    stores(&rx, EARLY, |_| ());
    answered
        .recv_timeout(Duration::from_secs(10))
        .expect("answered after 16 rows");
    // A fault on row 30 (queued, stored after the answer) outran the stores; one on row
    // 5 (stored), on the same row of another file or on a row never offered did not.
    assert!(pusher.reading(7, 30 * 16 * PAGE..(30 * 16 + 1) * PAGE));
    assert!(!pusher.reading(7, 5 * 16 * PAGE..(5 * 16 + 1) * PAGE));
    assert!(!pusher.reading(8, 30 * 16 * PAGE..(30 * 16 + 1) * PAGE));
    assert!(!pusher.reading(7, 100 * 16 * PAGE..(100 * 16 + 1) * PAGE));
    // The fault on row 30 offers nothing; its answer still waits for the rows queued.
    let (answer, answered) = reporting();
    pusher.offer(
        7,
        30 * 16 * PAGE..(30 * 16 + 1) * PAGE,
        Default::default(),
        answer,
    );
    assert!(
        answered.recv_timeout(Duration::from_millis(50)).is_err(),
        "answered while the rows before it were queued"
    );
    gates[0].send(()).unwrap();
    answered
        .recv_timeout(Duration::from_secs(10))
        .expect("answered once the rows are stored");
    // Rows 17-64 stored, without row 30 (the fault's answer fills it).
    let got = stores(&rx, 64 - EARLY - 1, |(_, k, b)| (k, b));
    let want: Vec<_> = (EARLY as u64 + 1..=64)
        .filter(|&k| k != 30)
        .map(|k| (k, k as u8))
        .collect();
    assert_eq!(got, want);
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    // A fault on rows stored before an answer is no overrun either.
    assert!(!pusher.reading(7, 3 * 16 * PAGE..(3 * 16 + 1) * PAGE));
}

#[test]
fn a_page_read_by_a_fault_being_served_is_queued_only_after_its_answer() {
    // One thread; the kernel holds row 2's page locked from its fault's request to its
    // answer, so a store of it meanwhile would wait for that answer (and the answer of a
    // fault that queued it after, for that store).
    let (pusher, rx, _gates) = rows_gated(1, &[]);
    let at = |k: u64| k * 16 * PAGE..k * 16 * PAGE + PAGE;
    assert!(!pusher.reading(7, at(2)));
    // Another reader's fault offers rows 2 and 3: row 2 is left out.
    pusher.offer(7, at(1), (vec![row(2), row(3)], vec![]), none());
    assert_eq!(stores(&rx, 1, |(_, k, b)| (k, b)), vec![(3, 3)]);
    // Row 2's fault is answered; then row 2 may be queued again.
    let (answer, answered) = reporting();
    pusher.offer(7, at(2), Default::default(), answer);
    answered
        .recv_timeout(Duration::from_secs(10))
        .expect("answered");
    pusher.offer(7, at(1), (vec![row(2)], vec![]), none());
    assert_eq!(stores(&rx, 1, |(_, k, b)| (k, b)), vec![(2, 2)]);
    // A fault that failed lets its page be queued again too.
    assert!(!pusher.reading(7, at(4)));
    pusher.offer(7, at(1), (vec![row(4)], vec![]), none());
    pusher.failed(7, at(4));
    pusher.offer(7, at(1), (vec![row(4), row(5)], vec![]), none());
    assert_eq!(stores(&rx, 2, |(_, k, b)| (k, b)), vec![(4, 4), (5, 5)]);
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
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
    // The wait is over while the first store is held up: the answer goes before the
    // second store (sent by the deadline keeper, or by the thread between its stores).
    gate_tx.send(()).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(PAGE));
    let by = answered
        .recv_timeout(Duration::from_secs(10))
        .expect("answered");
    assert!(
        matches!(by.as_deref(), Some("b2fs-push" | "b2fs-deadlines")),
        "answered by {by:?}"
    );
    assert!(rx.try_recv().is_err(), "page 2 is still being stored");
    gate_tx.send(()).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(2 * PAGE));
}

#[test]
fn pages_ahead_are_stored_with_no_answer_and_later_answers_wait_for_them() {
    let (pusher, rx, gate) = gated(Duration::from_secs(10));
    let p = |o: u64, b| (o * PAGE, page(b));
    // The rows ahead of a walk: the thread is held up on page 0, nothing answers.
    pusher.ahead(7, vec![p(0, 1), p(1, 1), p(2, 1)], pusher.epoch());
    until_storing(&pusher);
    // A page queued already is not queued again.
    pusher.ahead(7, vec![p(2, 2)], pusher.epoch());
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

#[test]
fn an_answer_past_its_wait_goes_while_one_thread_is_held_in_a_store_and_the_other_idles() {
    // Two threads: one held up on the store of offset 0 (a page the kernel keeps locked for
    // a read it holds back until answers are sent), the other idle. A fault's answer waits
    // behind that batch: it must still go once its wait is over, sent by the deadline keeper.
    let (pusher, rx, gate) = gated_threads(Duration::from_millis(10), 2);
    pusher.ahead(7, vec![(0, page(1))], pusher.epoch());
    until_storing(&pusher);
    let reading = 9 * PAGE..10 * PAGE;
    assert!(!pusher.reading(7, reading.clone()));
    let (answer, answered) = reporting();
    pusher.offer(7, reading, (vec![], vec![]), answer);
    let by = answered
        .recv_timeout(Duration::from_secs(2))
        .expect("the answer went within its wait while a store was held up");
    assert_eq!(by.as_deref(), Some("b2fs-deadlines"));
    // The held store then completes with its bytes.
    gate.send(()).unwrap();
    assert_eq!(stores(&rx, 1, |s| s), vec![(7, 0, vec![1; PAGE as usize])]);
}

#[test]
fn pages_ahead_leave_out_the_pages_of_a_fault_in_flight() {
    let (pusher, rx, _gate) = gated_threads(WAIT, 2);
    assert!(!pusher.reading(7, 3 * PAGE..4 * PAGE));
    pusher.ahead(
        7,
        vec![(3 * PAGE, page(3)), (4 * PAGE, page(4))],
        pusher.epoch(),
    );
    assert_eq!(
        stores(&rx, 1, |s| s),
        vec![(7, 4 * PAGE, vec![4; PAGE as usize])]
    );
    assert!(
        rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "the page the fault reads was stored"
    );
}

#[test]
fn a_forgotten_inodes_queued_pages_are_dropped_once_its_store_in_progress_ends() {
    let (pusher, rx, gate) = gated(Duration::from_secs(10));
    let p = |o: u64, b| (o * PAGE, page(b));
    // The thread is held up in a store of inode 7 (page 0); more of inode 7 and a page of
    // inode 8 wait behind it.
    pusher.ahead(7, vec![p(0, 1)], pusher.epoch());
    until_storing(&pusher);
    pusher.ahead(7, vec![p(12, 2), p(13, 2)], pusher.epoch());
    pusher.ahead(8, vec![p(12, 3)], pusher.epoch());
    // The source changed: inode 7 is forgotten before the kernel drops its pages. The
    // forget waits for the store in progress (which the kernel would otherwise see after
    // its invalidation).
    let pusher = Arc::new(pusher);
    let forgotten = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let forgetting = {
        let (pusher, forgotten) = (pusher.clone(), forgotten.clone());
        std::thread::spawn(move || {
            pusher.forget([7]);
            forgotten.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !forgotten.load(std::sync::atomic::Ordering::SeqCst),
        "the forget returned while a store of the inode was in progress"
    );
    gate.send(()).unwrap();
    forgetting.join().unwrap();
    // The store in progress ended; the rest of inode 7 was dropped; inode 8's page stays.
    let got = stores(&rx, 2, |(ino, offset, bytes)| (ino, offset, bytes[0]));
    assert_eq!(got, vec![(7, 0, 1), (8, 12 * PAGE, 3)]);
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
}

#[test]
fn pages_read_before_a_forget_are_not_stored_after_it_and_later_ones_are() {
    let (pusher, rx, _gate) = gated_threads(WAIT, 2);
    let p = |o: u64, b| (o * PAGE, page(b));
    // A fault comes, the source changes (forget) before its pages are offered: they may be
    // the version before, so none is stored, but the fault is still answered.
    let since = pusher.epoch();
    let reading = 3 * PAGE..4 * PAGE;
    assert!(!pusher.reading(7, reading.clone()));
    pusher.forget([7]);
    let (answer, answered) = reporting();
    pusher.offer(7, reading, (vec![p(4, 1), p(5, 1)], vec![p(6, 1)]), answer);
    answered
        .recv_timeout(Duration::from_secs(2))
        .expect("the fault was answered");
    // Nor rows ahead of a walk read before the forget.
    pusher.ahead(7, vec![p(7, 1)], since);
    // Another inode's fault, and inode 7's next fault after the forget, are served as ever.
    let reading = 20 * PAGE..21 * PAGE;
    assert!(!pusher.reading(7, reading.clone()));
    pusher.offer(7, reading, (vec![p(21, 2)], vec![]), none());
    pusher.ahead(7, vec![p(22, 2)], pusher.epoch());
    let mut got = stores(&rx, 2, |(ino, offset, bytes)| (ino, offset, bytes[0]));
    got.sort_unstable();
    assert_eq!(got, vec![(7, 21 * PAGE, 2), (7, 22 * PAGE, 2)]);
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
}

#[test]
fn a_fault_whose_read_ends_without_an_offer_no_longer_keeps_its_pages_out() {
    let (pusher, rx, _gate) = gated_threads(WAIT, 2);
    // A fault announced, then its read fails (or panics) before its pages are offered: the
    // guard forgets it as it is dropped, so its page may be offered again.
    assert!(!pusher.reading(7, 3 * PAGE..4 * PAGE));
    drop(Announced::new(&pusher, 7, 3 * PAGE..4 * PAGE));
    pusher.ahead(7, vec![(3 * PAGE, page(3))], pusher.epoch());
    assert_eq!(
        stores(&rx, 1, |s| s),
        vec![(7, 3 * PAGE, vec![3; PAGE as usize])]
    );
    // One offered is not forgotten twice: a second fault on the page stays announced.
    assert!(!pusher.reading(7, 5 * PAGE..6 * PAGE));
    assert!(!pusher.reading(7, 5 * PAGE..6 * PAGE));
    Announced::new(&pusher, 7, 5 * PAGE..6 * PAGE).offered();
    pusher.offer(7, 5 * PAGE..6 * PAGE, (vec![], vec![]), none());
    pusher.ahead(7, vec![(5 * PAGE, page(5))], pusher.epoch());
    assert!(
        rx.recv_timeout(Duration::from_millis(100)).is_err(),
        "a page of a fault still in flight was stored"
    );
}
