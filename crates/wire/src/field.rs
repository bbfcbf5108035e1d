//! Big-endian field access that never panics.
//!
//! Views check their length once (`check_len`); these helpers still guard
//! every access so that a view built with `new_unchecked` over a short buffer
//! reads zeros and drops writes instead of panicking on network input.

/// A byte range within a structure.
pub type Field = core::ops::Range<usize>;

#[inline]
pub(crate) fn get_u8(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

#[inline]
pub(crate) fn set_u8(b: &mut [u8], i: usize, v: u8) {
    if let Some(dst) = b.get_mut(i) {
        *dst = v;
    }
}

#[inline]
pub(crate) fn get_u16(b: &[u8], f: Field) -> u16 {
    match b.get(f) {
        Some(&[a, c]) => u16::from_be_bytes([a, c]),
        _ => 0,
    }
}

#[inline]
pub(crate) fn get_u32(b: &[u8], f: Field) -> u32 {
    match b.get(f) {
        Some(&[a, c, d, e]) => u32::from_be_bytes([a, c, d, e]),
        _ => 0,
    }
}

#[inline]
pub(crate) fn get_u64(b: &[u8], f: Field) -> u64 {
    match b.get(f) {
        Some(s) if s.len() == 8 => s.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)),
        _ => 0,
    }
}

#[inline]
pub(crate) fn set_u64(b: &mut [u8], f: Field, v: u64) {
    if let Some(dst) = b.get_mut(f)
        && dst.len() == 8
    {
        dst.copy_from_slice(&v.to_be_bytes());
    }
}

#[inline]
pub(crate) fn get_i32(b: &[u8], f: Field) -> i32 {
    get_u32(b, f) as i32
}

#[inline]
pub(crate) fn set_u16(b: &mut [u8], f: Field, v: u16) {
    if let Some(dst) = b.get_mut(f)
        && dst.len() == 2
    {
        dst.copy_from_slice(&v.to_be_bytes());
    }
}

#[inline]
pub(crate) fn set_u32(b: &mut [u8], f: Field, v: u32) {
    if let Some(dst) = b.get_mut(f)
        && dst.len() == 4
    {
        dst.copy_from_slice(&v.to_be_bytes());
    }
}

#[inline]
pub(crate) fn set_i32(b: &mut [u8], f: Field, v: i32) {
    set_u32(b, f, v as u32);
}

/// Zeroes `f` (clamped to the buffer).
#[inline]
pub(crate) fn zero(b: &mut [u8], f: Field) {
    let end = f.end.min(b.len());
    if f.start < end {
        b[f.start..end].fill(0);
    }
}

/// Shifts a field map by `base` bytes (for structures embedded at an offset).
pub(crate) const fn at(base: usize, f: Field) -> Field {
    (base + f.start)..(base + f.end)
}
