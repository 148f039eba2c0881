//! Unit tests of `remote/plan.rs`: following (when to ask, and what is known before asking) and chunk extents.

use super::*;

#[test]
fn following_asks_once_per_interval_with_one_attempts_patience() {
    let opts = RemoteOptions {
        timeout: Duration::from_millis(700),
        ..RemoteOptions::default()
    };
    let mut later = Following::new(Duration::from_secs(3600), &opts);
    assert!(!later.is_due());
    assert_eq!(later.ask(), None, "not due: nothing asked, nothing stamped");
    let mut now = Following::new(Duration::ZERO, &opts);
    assert!(now.is_due());
    assert_eq!(now.ask(), Some(Duration::from_millis(700)));
    let mut second = Following::new(Duration::from_millis(50), &opts);
    second.last -= Duration::from_millis(60);
    assert_eq!(second.ask(), Some(Duration::from_millis(700)));
    assert!(!second.is_due(), "asked: due again one interval later");
}

#[test]
fn before_asking_answers_what_it_knows_and_asks_only_when_due() {
    let opts = RemoteOptions {
        timeout: Duration::from_millis(700),
        ..RemoteOptions::default()
    };
    assert_eq!(before_asking(None, true, true), Err(false), "not followed");
    let mut due = Following::new(Duration::ZERO, &opts);
    assert_eq!(
        before_asking(Some(&mut due), true, true),
        Err(true),
        "known"
    );
    assert_eq!(
        before_asking(Some(&mut due), false, false),
        Err(false),
        "not asked for"
    );
    let ask = before_asking(Some(&mut due), false, true);
    assert_eq!(ask, Ok(Duration::from_millis(700)));
    let mut later = Following::new(Duration::from_secs(3600), &opts);
    assert_eq!(
        before_asking(Some(&mut later), false, true),
        Err(false),
        "not due"
    );
}

#[test]
fn extents_find_the_chunk_holding_an_offset() {
    let e = Extents::of_frame(vec![100, 250, 400], 1000);
    assert_eq!(e.find(99), None, "before the first chunk (header)");
    assert_eq!(e.find(100), Some((0, 100..250)));
    assert_eq!(e.find(249), Some((0, 100..250)));
    assert_eq!(e.find(250), Some((1, 250..400)));
    assert_eq!(e.find(999), Some((2, 400..1000)));
    assert_eq!(e.find(1000), None, "past the chunk area (index, trailer)");
    assert_eq!(Extents::of_frame(vec![], 10).find(5), None);
}

#[test]
fn extents_of_several_frames_merge_without_overlaps() {
    let mut e = Extents::of_frame(vec![5000, 6000], 7000);
    e.merge(Extents::of_frame(vec![100, 250], 400));
    // Overlaps the first frame's chunks: left out.
    e.merge(Extents::of_frame(vec![300], 500));
    assert_eq!(e.find(120), Some((0, 100..250)));
    assert_eq!(e.find(300), Some((1, 250..400)));
    assert_eq!(
        e.find(450),
        None,
        "between the frames (index, trailer, zip headers)"
    );
    assert_eq!(e.find(6500), Some((3, 6000..7000)));
    assert_eq!(e.find(7000), None);
}
