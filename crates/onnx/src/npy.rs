//! NumPy `.npy` files (format 1.0, little-endian, C order): how the reference inputs and the
//! engine's logits reach `tools/onnx_check.py` with nothing but numpy on the other side.

use std::path::Path;

use crate::error::{Error, Result};

/// A type a `.npy` file can hold.
pub trait NpyElement: Copy {
    /// The numpy dtype descriptor.
    const DESCR: &'static str;
    /// Little-endian bytes.
    fn le_bytes(self, out: &mut Vec<u8>);
}

impl NpyElement for f32 {
    const DESCR: &'static str = "<f4";
    fn le_bytes(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl NpyElement for i64 {
    const DESCR: &'static str = "<i8";
    fn le_bytes(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// The bytes of a `.npy` file holding `data` with `shape`.
///
/// # Panics
/// If `data` does not have `shape`'s number of elements.
pub fn npy_bytes<T: NpyElement>(shape: &[usize], data: &[T]) -> Vec<u8> {
    assert_eq!(shape.iter().product::<usize>(), data.len(), "npy data does not match its shape");
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_text = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}", T::DESCR);
    // magic (6) + version (2) + header length (2) + header, padded to 64 bytes, ending in \n.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len() * 8);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for &v in data {
        v.le_bytes(&mut out);
    }
    out
}

/// Writes a `.npy` file atomically.
pub fn write_npy<T: NpyElement>(path: &Path, shape: &[usize], data: &[T]) -> Result<()> {
    trackgnn_trackml::atomic::write(path, &npy_bytes(shape, data))
        .map_err(|source| Error::Io { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_aligned_and_describe_the_data() {
        let b = npy_bytes(&[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let header = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
        assert!(header.contains("'descr': '<f4'") && header.contains("'shape': (2, 3)") && header.ends_with('\n'));
        assert_eq!(b.len(), 10 + hlen + 24);
        assert_eq!(&b[10 + hlen..10 + hlen + 4], &1.0f32.to_le_bytes());
        let b = npy_bytes(&[3], &[7i64, 8, 9]);
        let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert!(std::str::from_utf8(&b[10..10 + hlen]).unwrap().contains("'shape': (3,)"));
    }
}
