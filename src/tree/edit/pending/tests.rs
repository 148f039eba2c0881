//! The bound on pending chunk buffers, on real bytes in a real spill file: buffers past the
//! budget spill (least recently edited first) and read back as written, patch in place, come
//! back into memory for a length change, are given back when dropped, stay intact when a
//! commit holds them, and a spill that fails changes nothing.

use super::*;
use crate::commit::ChunkBytes;
use crate::reader::ArrayId;

fn id(index: usize) -> ChunkId {
    ChunkId::new(ArrayId(0), index)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// Loads chunk `i` (`len` bytes of `pattern(len, i)`) as a write would, then sets byte 0 to
/// `mark`.
fn write(e: &mut Edits, i: usize, len: usize, mark: u8) -> Result<(), TreeError> {
    if !e.has_chunk(id(i)) {
        e.make_room(len, id(i)).map_err(|err| e.spill_error(err))?;
        e.insert_chunk(id(i), ChunkBuf::loaded(pattern(len, i as u8)));
    }
    let res = e.edit_in_memory(id(i), len, |b, _| {
        b[0] = mark;
        Ok(())
    });
    match &res {
        Ok(()) => {
            let c = e.chunk_mut(id(i)).unwrap();
            c.state = BufState::Edited;
            c.version += 1;
        }
        Err(_) if e.chunk(id(i)).unwrap().state == BufState::Clean => {
            e.remove_chunk(id(i));
        }
        Err(_) => {}
    }
    res
}

fn want(len: usize, i: usize, mark: u8) -> Vec<u8> {
    let mut w = pattern(len, i as u8);
    w[0] = mark;
    w
}

fn whole(e: &Edits, i: usize) -> Vec<u8> {
    e.chunk_window(id(i), 0, u32::MAX).unwrap().unwrap()
}

#[test]
fn past_the_budget_the_least_recent_edits_spill_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let len = 10_000;
    let mut e = Edits::new(2 * len, dir.path().to_path_buf());
    for i in 0..5 {
        write(&mut e, i, len, 200 + i as u8).unwrap();
        assert!(e.stats().memory <= 2 * len, "chunk {i}: {:?}", e.stats());
    }
    let s = e.stats();
    assert_eq!((s.memory, s.spilled_chunks, s.spills), (2 * len, 3, 3));
    assert_eq!(s.peak_memory, 2 * len);
    assert!(s.spilled_bytes >= 3 * len as u64);
    // Chunks 0..3 were edited least recently: in the file; 3 and 4 in memory.
    let spilled: Vec<bool> = (0..5).map(|i| e.chunk(id(i)).unwrap().spilled()).collect();
    assert_eq!(spilled, [true, true, true, false, false]);
    for i in 0..5 {
        assert_eq!(whole(&e, i), want(len, i, 200 + i as u8), "chunk {i}");
        assert_eq!(e.chunk_len(id(i)), Some(len));
        let mut two = [0u8; 2];
        assert!(e.copy_chunk(id(i), len - 2, &mut two).unwrap().unwrap());
        assert_eq!(two, want(len, i, 0)[len - 2..]);
        assert!(!e.copy_chunk(id(i), len - 1, &mut two).unwrap().unwrap());
    }
    assert_eq!(
        e.chunk_window(id(1), 9_990, 100).unwrap().unwrap(),
        pattern(len, 1)[9_990..]
    );
    // A commit reads each back whole.
    let c0 = e.chunk(id(0)).unwrap().clone();
    assert_eq!(c0.bytes().unwrap().as_ref(), want(len, 0, 200).as_slice());
    e.release(vec![c0]);
    assert_eq!(whole(&e, 0), want(len, 0, 200), "still the map's");
}

#[test]
fn a_spilled_chunk_is_patched_in_place_and_comes_back_for_a_length_change() {
    let dir = tempfile::tempdir().unwrap();
    let len = 8192;
    let mut e = Edits::new(len, dir.path().to_path_buf());
    write(&mut e, 0, len, 1).unwrap();
    write(&mut e, 1, len, 2).unwrap();
    assert!(e.chunk(id(0)).unwrap().spilled());
    let v = e.chunk(id(0)).unwrap().version;
    // Overwrite in place: no memory, same file.
    e.patch_spilled(id(0), &[(10, &[9, 9, 9]), (len - 1, &[7])])
        .unwrap()
        .unwrap();
    let mut w = want(len, 0, 1);
    w[10..13].copy_from_slice(&[9, 9, 9]);
    w[len - 1] = 7;
    assert_eq!(whole(&e, 0), w);
    assert_eq!(e.chunk(id(0)).unwrap().version, v + 1);
    assert_eq!(e.stats().memory, len);
    // Past its end, or a chunk in memory: not for this path.
    assert!(e.patch_spilled(id(0), &[(len - 1, &[1, 1])]).is_none());
    assert!(e.patch_spilled(id(1), &[(0, &[1])]).is_none());
    assert!(e.patch_spilled(id(5), &[(0, &[1])]).is_none());
    // Truncation: back into memory (chunk 1 spills to make room), cut, readable.
    e.edit_in_memory(id(0), len, |b, _| {
        b.truncate(100);
        b.shrink_to_fit();
        Ok(())
    })
    .unwrap();
    assert!(!e.chunk(id(0)).unwrap().spilled());
    assert!(e.chunk(id(1)).unwrap().spilled());
    assert_eq!(whole(&e, 0), w[..100]);
    assert_eq!(whole(&e, 1), want(len, 1, 2));
    assert_eq!(e.stats().memory, 100);
    // Dropping buffers gives their memory and their file space back.
    e.remove_chunk(id(1));
    assert_eq!(e.stats().spilled_bytes, 0);
    e.remove_chunk(id(0));
    assert_eq!(e.stats().memory, 0);
    assert!(!e.has_chunks());
}

#[test]
fn clean_buffers_are_dropped_not_spilled() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = Edits::new(100, dir.path().to_path_buf());
    e.insert_chunk(id(0), ChunkBuf::loaded(vec![1; 100]));
    e.make_room(100, id(1)).unwrap();
    assert!(!e.has_chunk(id(0)));
    assert_eq!(e.stats().dropped_clean, 1);
    assert_eq!((e.stats().spills, e.stats().spilled_bytes), (0, 0));
}

#[test]
fn a_chunk_a_commit_holds_is_copied_not_changed_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let len = 4096;
    let mut e = Edits::new(len, dir.path().to_path_buf());
    write(&mut e, 0, len, 1).unwrap();
    write(&mut e, 1, len, 2).unwrap();
    let held: Vec<ChunkBuf> = (0..2).map(|i| e.chunk(id(i)).unwrap().clone()).collect();
    // Spilled and held: not patched in place; the write brings it back (a copy).
    assert!(e.patch_spilled(id(0), &[(0, &[50])]).is_none());
    write(&mut e, 0, len, 51).unwrap();
    // In memory and held: copied on write.
    write(&mut e, 1, len, 52).unwrap();
    assert_eq!(
        held[0].bytes().unwrap().as_ref(),
        want(len, 0, 1).as_slice()
    );
    assert_eq!(
        held[1].bytes().unwrap().as_ref(),
        want(len, 1, 2).as_slice()
    );
    assert_eq!(whole(&e, 0), want(len, 0, 51));
    assert_eq!(whole(&e, 1), want(len, 1, 52));
    e.release(held);
    // Chunk 0 went back into memory and chunk 1 spilled: the held region of chunk 0 is
    // free now, only chunk 1's is used.
    assert_eq!(e.stats().spilled_bytes, len as u64);
}

#[test]
fn a_failed_spill_fails_the_write_and_keeps_every_earlier_edit() {
    let dir = tempfile::tempdir().unwrap();
    let len = 1000;
    let mut e = Edits::new(2 * len, dir.path().to_path_buf());
    write(&mut e, 0, len, 1).unwrap();
    write(&mut e, 1, len, 2).unwrap();
    write(&mut e, 2, len, 3).unwrap(); // chunk 0 spilled
    e.fail_spills(Some(libc::ENOSPC));
    let err = write(&mut e, 3, len, 4).unwrap_err();
    assert_eq!(err.errno(), libc::ENOSPC, "{err}");
    assert!(
        err.to_string().contains(&dir.path().display().to_string()),
        "{err}"
    );
    assert!(!e.has_chunk(id(3)));
    // A patch of a spilled chunk fails the same way.
    let err = e.patch_spilled(id(0), &[(0, &[9])]).unwrap().unwrap_err();
    assert_eq!(err.errno(), libc::ENOSPC);
    e.fail_spills(Some(libc::EIO));
    assert_eq!(write(&mut e, 3, len, 4).unwrap_err().errno(), libc::EIO);
    for i in 0..3 {
        assert_eq!(whole(&e, i), want(len, i, i as u8 + 1), "chunk {i}");
    }
    assert!(e.stats().memory <= 2 * len);
    // Writes to chunks in memory need no room: they still work.
    write(&mut e, 2, len, 33).unwrap();
    e.fail_spills(None);
    write(&mut e, 3, len, 4).unwrap();
    assert_eq!(whole(&e, 3), want(len, 3, 4));
    assert_eq!(whole(&e, 0), want(len, 0, 1));
}
