//! Frames and chunks built by hand (docs/format/CONTAINERS.md 1.9) for the tests that need a
//! source no reference writes: memcpyed chunks, contiguous frames with chosen metalayers,
//! index entries and vlmeta, and one small frame with every kind of entry.

/// A memcpyed Blosc2 chunk of `data` with the given typesize.
pub(crate) fn memcpyed(data: &[u8], typesize: u8) -> Vec<u8> {
    let n = data.len() as u32;
    let mut c = vec![5, 1, 0x17, typesize];
    c.extend(n.to_le_bytes());
    c.extend(n.max(1).to_le_bytes());
    c.extend((n + 32).to_le_bytes());
    c.extend([0u8; 16]);
    c.extend_from_slice(data);
    c
}

/// Builds a contiguous frame: header (with `metalayers`), chunk area, index, trailer (with
/// `vlmeta` as memcpyed chunks of the given msgpack payloads).
pub(crate) fn build_frame(
    typesize: i32,
    chunksize: i32,
    nbytes: i64,
    area: &[u8],
    index: &[i64],
    metalayers: &[(&str, Vec<u8>)],
    vlmeta: &[(&str, Vec<u8>)],
) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend([0x9e, 0xa8]);
    h.extend(b"b2frame\0");
    h.extend([0xd2, 0, 0, 0, 0]); // header_len, patched
    h.extend([0xcf, 0, 0, 0, 0, 0, 0, 0, 0]); // frame_len, patched
    h.extend([
        0xa4,
        if chunksize == 0 { 0x53 } else { 0x12 },
        0,
        0x55,
        0x02,
    ]);
    h.push(0xd3);
    h.extend(nbytes.to_be_bytes());
    h.push(0xd3);
    h.extend((area.len() as i64).to_be_bytes());
    h.push(0xd2);
    h.extend(typesize.to_be_bytes());
    h.push(0xd2);
    h.extend(0i32.to_be_bytes());
    h.push(0xd2);
    h.extend(chunksize.to_be_bytes());
    h.extend([0xd1, 0, 1, 0xd1, 0, 1]);
    h.push(if vlmeta.is_empty() { 0xc2 } else { 0xc3 });
    h.extend([0xd8, 0x06, 0, 0, 0, 0, 0, 1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(h.len(), 87);
    let names: usize = metalayers.iter().map(|(n, _)| 6 + n.len()).sum();
    h.push(0x93);
    h.push(0xcd);
    h.extend(((7 + names) as u16).to_be_bytes());
    let entries: Vec<(&str, &[u8])> = metalayers.iter().map(|(n, c)| (*n, &c[..])).collect();
    push_offsets_and_contents(&mut h, &entries);
    let header_len = h.len() as i32;
    h[11..15].copy_from_slice(&header_len.to_be_bytes());
    let mut f = h;
    f.extend_from_slice(area);
    if nbytes > 0 {
        let raw: Vec<u8> = index.iter().flat_map(|e| e.to_le_bytes()).collect();
        f.extend(memcpyed(&raw, 8));
    }
    // Trailer.
    let t0 = f.len();
    let names: usize = vlmeta.iter().map(|(n, _)| 6 + n.len()).sum();
    let mut t = vec![0x94, 0x01, 0x93, 0xcd];
    t.extend(((6 + names) as u16).to_be_bytes());
    let chunks: Vec<Vec<u8>> = vlmeta.iter().map(|(_, c)| memcpyed(c, 1)).collect();
    let entries: Vec<(&str, &[u8])> = vlmeta
        .iter()
        .zip(&chunks)
        .map(|((n, _), c)| (*n, &c[..]))
        .collect();
    push_offsets_and_contents(&mut t, &entries);
    let trailer_len = (t.len() + 23) as u32;
    t.push(0xce);
    t.extend(trailer_len.to_be_bytes());
    t.extend([0xd8, 0]);
    t.extend([0u8; 16]);
    f.extend(t);
    let frame_len = f.len() as u64;
    f[16..24].copy_from_slice(&frame_len.to_be_bytes());
    let _ = t0;
    f
}

pub(crate) const ZEROS: i64 = -0x7f00_0000_0000_0000;

/// A small frame: 3 chunks of 40 bytes (typesize 4) + a 20-byte last chunk, one zero chunk,
/// a user metalayer and two vlmetalayers.
pub(crate) fn small_frame() -> (Vec<u8>, Vec<Vec<u8>>) {
    let data: Vec<Vec<u8>> = (0..4u8)
        .map(|i| (0..if i == 3 { 20 } else { 40 }).map(|b| b ^ i).collect())
        .collect();
    let mut area = Vec::new();
    let mut index = Vec::new();
    for (i, d) in data.iter().enumerate() {
        if i == 1 {
            index.push(ZEROS);
            continue;
        }
        index.push(area.len() as i64);
        area.extend(memcpyed(d, 4));
    }
    let f = build_frame(
        4,
        40,
        140,
        &area,
        &index,
        &[("usr", vec![0x92, 0x01, 0x02]), ("junk", vec![0x92, 0x01])],
        &[("unit", vec![0xa1, b'm']), ("n", vec![0x2a])],
    );
    (f, data)
}

/// Appends what a frame holds for its metalayers (header) and vlmetalayers (trailer): a
/// msgpack map from each name to the offset, from the start of `buf`, of its content, then
/// the array of the contents (bin32 each).
fn push_offsets_and_contents(buf: &mut Vec<u8>, entries: &[(&str, &[u8])]) {
    buf.push(0xde);
    buf.extend((entries.len() as u16).to_be_bytes());
    let names: usize = entries.iter().map(|(n, _)| 6 + n.len()).sum();
    let mut off = buf.len() + names + 3;
    for (n, c) in entries {
        buf.push(0xa0 | n.len() as u8);
        buf.extend(n.as_bytes());
        buf.push(0xd2);
        buf.extend((off as i32).to_be_bytes());
        off += 5 + c.len();
    }
    buf.push(0xdc);
    buf.extend((entries.len() as u16).to_be_bytes());
    for (_, c) in entries {
        buf.push(0xc6);
        buf.extend((c.len() as u32).to_be_bytes());
        buf.extend(*c);
    }
}
