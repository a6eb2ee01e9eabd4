//! A CSV file in memory: its bytes, its header and a row iterator over field slices.
//!
//! The whole file is read (or decompressed) into one buffer; rows are then split in place, so
//! parsing allocates nothing per row. Every error names the file, the 1-based line and the
//! column (from the header).
//!
//! The dialect is the one the TrackML files use: comma separated, no quoting, one header line.
//! Tolerated: CRLF line endings, a missing final newline, blank lines (skipped), a UTF-8 BOM,
//! spaces around values, extra columns (ignored) and any column order.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The gzip magic bytes; files are recognised by content, not by name.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The most bytes a gzip CSV may decompress to (1 GiB): far above any TrackML file (a μ=200 event's
/// cells are tens of MB), far below what a gzip bomb (up to ~1000× its size) would allocate.
pub const MAX_DECOMPRESSED_BYTES: u64 = 1 << 30;

/// Reads a whole file into memory, decompressing it if it is gzip (at most
/// [`MAX_DECOMPRESSED_BYTES`]).
///
/// A missing file is [`Error::MissingFile`]; a gzip file that decompresses to more than the
/// cap is [`Error::Inconsistent`]; other failures are [`Error::Io`].
pub(crate) fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    read_bytes_capped(path, MAX_DECOMPRESSED_BYTES)
}

/// [`read_bytes`] with a decompressed-size cap of `cap` bytes.
fn read_bytes_capped(path: &Path, cap: u64) -> Result<Vec<u8>> {
    let raw = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::missing(path),
        _ => Error::io(path, e),
    })?;
    if !raw.starts_with(&GZIP_MAGIC) {
        return Ok(raw);
    }
    // The trailer's ISIZE (uncompressed size mod 2^32 of the last member) is a good capacity
    // hint; cap it so a corrupt trailer cannot ask for absurd memory.
    let hint = raw
        .len()
        .checked_sub(4)
        .map(|i| u32::from_le_bytes(raw[i..].try_into().unwrap()) as usize)
        .unwrap_or(0)
        .min(raw.len().saturating_mul(64))
        .min(cap as usize);
    let mut out = Vec::with_capacity(hint + 1);
    // One byte past the cap tells a file of exactly `cap` bytes from a larger one.
    flate2::bufread::MultiGzDecoder::new(&raw[..])
        .take(cap + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::io(path, e))?;
    if out.len() as u64 > cap {
        return Err(Error::Inconsistent {
            path: path.to_path_buf(),
            message: format!(
                "gzip data decompresses to more than {cap} bytes ({} compressed): not a TrackML CSV (a gzip bomb?); \
                 refused",
                raw.len()
            ),
        });
    }
    Ok(out)
}

/// One CSV file in memory with its parsed header.
pub(crate) struct Table {
    path: PathBuf,
    bytes: Vec<u8>,
    names: Vec<String>,
    header_text: String,
    header_line: u64,
    data_start: usize,
}

impl Table {
    /// Reads `path` (plain or gzip) and parses its header.
    pub(crate) fn open(path: &Path) -> Result<Table> {
        let bytes = read_bytes(path)?;
        Table::from_bytes(path, bytes)
    }

    /// Parses the header of CSV `bytes` that came from `path`.
    pub(crate) fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Table> {
        let mut pos = if bytes.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
        let mut line = 0u64;
        while pos < bytes.len() {
            line += 1;
            let end = line_end(&bytes, pos);
            let text = trim_cr(&bytes[pos..end]);
            let next = (end + 1).min(bytes.len());
            if text.trim_ascii().is_empty() {
                pos = next;
                continue;
            }
            let names = text
                .split(|&b| b == b',')
                .map(|f| {
                    let f = f.trim_ascii();
                    let f = f.strip_prefix(b"\"").and_then(|f| f.strip_suffix(b"\"")).unwrap_or(f);
                    String::from_utf8_lossy(f).into_owned()
                })
                .collect();
            return Ok(Table {
                path: path.to_path_buf(),
                header_text: String::from_utf8_lossy(text).into_owned(),
                names,
                header_line: line,
                data_start: next,
                bytes,
            });
        }
        Err(Error::EmptyFile { path: path.to_path_buf() })
    }

    /// The file this table was read from.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The number of bytes of CSV text (uncompressed).
    pub(crate) fn byte_len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The index of column `name`, if the header has it (the first one if repeated).
    pub(crate) fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The indices of the columns `names`, or [`Error::MissingColumn`] for the first absent.
    pub(crate) fn require<const N: usize>(&self, names: [&str; N]) -> Result<[usize; N]> {
        let mut out = [0; N];
        for (slot, name) in out.iter_mut().zip(names) {
            *slot = self.find(name).ok_or_else(|| Error::MissingColumn {
                path: self.path.clone(),
                line: self.header_line,
                column: name.to_string(),
                header: self.header_text.clone(),
            })?;
        }
        Ok(out)
    }

    /// Iterates the data rows, splitting each into at least `need` fields (the largest column
    /// index the caller reads, plus one).
    pub(crate) fn rows(&self, need: usize) -> Rows<'_> {
        Rows { table: self, pos: self.data_start, line: self.header_line, need, fields: Vec::with_capacity(need) }
    }

    /// The 1-based line of data row `row` (0-based, blank lines not counted). Used only to
    /// report errors found after parsing, so it re-scans instead of storing every line number.
    pub(crate) fn line_of_row(&self, row: usize) -> u64 {
        let mut rows = self.rows(0);
        let mut i = 0;
        while let Ok(Some(r)) = rows.next() {
            if i == row {
                return r.line();
            }
            i += 1;
        }
        0
    }

    /// A parse error at `line` in column `col`.
    pub(crate) fn error(&self, line: u64, col: usize, message: String) -> Error {
        Error::Parse {
            path: self.path.clone(),
            line,
            column: self.names.get(col).cloned().unwrap_or_else(|| format!("#{} (beyond the header)", col + 1)),
            message,
        }
    }
}

/// The index of the `\n` ending the line that starts at `pos`, or `bytes.len()`.
#[inline]
fn line_end(bytes: &[u8], pos: usize) -> usize {
    // Eight bytes at a time: a zero byte in `w ^ 0x0a0a…` marks a newline (the classic
    // "has zero byte" bit trick), then a byte loop finds its exact place.
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const NL: u64 = LO * b'\n' as u64;
    let mut i = pos;
    while i + 8 <= bytes.len() {
        let w = u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap()) ^ NL;
        let zero = w.wrapping_sub(LO) & !w & HI;
        if zero != 0 {
            return i + (zero.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < bytes.len() && bytes[i] != b'\n' {
        i += 1;
    }
    i
}

#[inline]
fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// A lending iterator over the data rows of a [`Table`].
pub(crate) struct Rows<'t> {
    table: &'t Table,
    pos: usize,
    line: u64,
    need: usize,
    fields: Vec<&'t [u8]>,
}

impl<'t> Rows<'t> {
    /// The next non-blank row, or an error if it has fewer than `need` fields or more fields
    /// than the header.
    #[inline]
    pub(crate) fn next(&mut self) -> Result<Option<Row<'_>>> {
        let bytes = &self.table.bytes[..];
        loop {
            if self.pos >= bytes.len() {
                return Ok(None);
            }
            self.line += 1;
            let end = line_end(bytes, self.pos);
            let text = trim_cr(&bytes[self.pos..end]);
            self.pos = end + 1;
            if text.is_empty() || text.trim_ascii().is_empty() {
                continue;
            }
            self.fields.clear();
            let mut rest = text;
            // True while `rest` holds fields not yet split (after a comma).
            let mut more = true;
            while self.fields.len() < self.need {
                match rest.iter().position(|&b| b == b',') {
                    Some(i) => {
                        self.fields.push(&rest[..i]);
                        rest = &rest[i + 1..];
                    }
                    None => {
                        self.fields.push(rest);
                        more = false;
                        break;
                    }
                }
            }
            if more && self.fields.len() == self.need {
                // Fields beyond those read: only count them, to catch rows longer than the
                // header (a stray comma would shift every later column).
                let total = self.need + 1 + rest.iter().filter(|&&b| b == b',').count();
                if total > self.table.names.len() {
                    return Err(self.table.error(
                        self.line,
                        self.table.names.len(),
                        format!("row has {total} fields, the header has {}", self.table.names.len()),
                    ));
                }
            }
            if self.fields.len() < self.need {
                let have = self.fields.len();
                return Err(self.table.error(
                    self.line,
                    have,
                    format!(
                        "row has {have} fields, the header has {}; this column and later ones are missing",
                        self.table.names.len()
                    ),
                ));
            }
            return Ok(Some(Row { table: self.table, line: self.line, fields: &self.fields }));
        }
    }
}

/// One data row: its line number and its fields (by header index).
pub(crate) struct Row<'r> {
    table: &'r Table,
    line: u64,
    fields: &'r [&'r [u8]],
}

/// The longest piece of an offending value quoted in an error message.
const MAX_QUOTE: usize = 40;

fn quote(s: &[u8]) -> String {
    let s = &s[..s.len().min(MAX_QUOTE)];
    String::from_utf8_lossy(s).into_owned()
}

impl Row<'_> {
    /// The 1-based line of this row.
    pub(crate) fn line(&self) -> u64 {
        self.line
    }

    /// A parse error at this row in column `col`.
    pub(crate) fn error(&self, col: usize, message: String) -> Error {
        self.table.error(self.line, col, message)
    }

    /// Column `col` as an unsigned integer of type `T`.
    #[inline]
    pub(crate) fn uint<T: TryFrom<u64>>(&self, col: usize) -> Result<T> {
        let s = self.fields[col];
        let v = parse_u64(s)
            .or_else(|| parse_u64(s.trim_ascii()))
            .ok_or_else(|| self.error(col, format!("expected a non-negative integer, got `{}`", quote(s))))?;
        T::try_from(v)
            .map_err(|_| self.error(col, format!("value {v} is out of range for {}", std::any::type_name::<T>())))
    }

    /// Column `col` as a signed integer of type `T`.
    #[inline]
    pub(crate) fn int<T: TryFrom<i64>>(&self, col: usize) -> Result<T> {
        let s = self.fields[col];
        let v = parse_i64(s)
            .or_else(|| parse_i64(s.trim_ascii()))
            .ok_or_else(|| self.error(col, format!("expected an integer, got `{}`", quote(s))))?;
        T::try_from(v)
            .map_err(|_| self.error(col, format!("value {v} is out of range for {}", std::any::type_name::<T>())))
    }

    /// Column `col` as a finite `f32` (correctly rounded from the decimal text).
    #[inline]
    pub(crate) fn f32(&self, col: usize) -> Result<f32> {
        let s = self.fields[col];
        let v = fast_float2::parse::<f32, _>(s)
            .or_else(|_| fast_float2::parse::<f32, _>(s.trim_ascii()))
            .map_err(|_| self.error(col, format!("expected a number, got `{}`", quote(s))))?;
        if v.is_finite() { Ok(v) } else { Err(self.not_finite(col, s)) }
    }

    /// Column `col` as a finite `f64`.
    #[inline]
    pub(crate) fn f64(&self, col: usize) -> Result<f64> {
        let s = self.fields[col];
        let v = fast_float2::parse::<f64, _>(s)
            .or_else(|_| fast_float2::parse::<f64, _>(s.trim_ascii()))
            .map_err(|_| self.error(col, format!("expected a number, got `{}`", quote(s))))?;
        if v.is_finite() { Ok(v) } else { Err(self.not_finite(col, s)) }
    }

    #[cold]
    fn not_finite(&self, col: usize, s: &[u8]) -> Error {
        self.error(col, format!("expected a finite number, got `{}`", quote(s)))
    }
}

/// Parses ASCII digits (with an optional `+`) into a `u64`; `None` if not a valid number.
#[inline]
fn parse_u64(s: &[u8]) -> Option<u64> {
    let s = s.strip_prefix(b"+").unwrap_or(s);
    if s.is_empty() {
        return None;
    }
    if s.len() <= 19 {
        // At most 19 digits cannot overflow a u64.
        let mut v = 0u64;
        for &b in s {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v * 10 + d as u64;
        }
        return Some(v);
    }
    let mut v = 0u64;
    for &b in s {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// Parses an optionally signed decimal integer into an `i64`.
#[inline]
fn parse_i64(s: &[u8]) -> Option<i64> {
    match s.strip_prefix(b"-") {
        Some(digits) if !digits.starts_with(b"+") => {
            let v = parse_u64(digits)?;
            if v <= i64::MAX as u64 + 1 { Some((v as i64).wrapping_neg()) } else { None }
        }
        Some(_) => None,
        None => i64::try_from(parse_u64(s)?).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<Table> {
        Table::from_bytes(Path::new("t.csv"), text.as_bytes().to_vec())
    }

    #[test]
    fn a_gzip_bomb_is_refused_by_name_without_decompressing_it_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("event000000001-hits.csv.gz");
        let gzip = |b: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut e, b).unwrap();
            e.finish().unwrap()
        };
        // 16 MiB of zeros compress to ~16 KiB.
        let bomb = gzip(&vec![0u8; 16 << 20]);
        std::fs::write(&path, &bomb).unwrap();
        let err = read_bytes_capped(&path, 1 << 20).unwrap_err().to_string();
        assert!(err.starts_with(&path.display().to_string()) && err.contains("more than 1048576 bytes"), "{err}");
        // Exactly at the cap is fine.
        std::fs::write(&path, gzip(&[b'x'; 1000])).unwrap();
        assert_eq!(read_bytes_capped(&path, 1000).unwrap().len(), 1000);
        assert!(read_bytes_capped(&path, 999).is_err());
    }

    #[test]
    fn integers() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"+17"), Some(17));
        assert_eq!(parse_u64(b"4503668346847232"), Some(4503668346847232));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"+"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"1.0"), None);
        assert_eq!(parse_i64(b"-211"), Some(-211));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_i64(b"-+3"), None);
    }

    #[test]
    fn newline_search_matches_naive() {
        let text = b"a,b\nccccccccccccccccc\n\n0123456789abcdef,\r\nlast";
        let mut pos = 0;
        while pos < text.len() {
            let naive = text[pos..].iter().position(|&b| b == b'\n').map_or(text.len(), |i| pos + i);
            assert_eq!(line_end(text, pos), naive);
            pos = naive + 1;
        }
    }

    #[test]
    fn header_rows_and_lines() {
        let t = table("\u{feff}\r\n a , \"b\" ,c\r\n\r\n1,2.5,x\r\n  \n3, 4 ,y").unwrap();
        assert_eq!(t.require(["c", "a", "b"]).unwrap(), [2, 0, 1]);
        assert_eq!(t.header_line, 2);
        let mut rows = t.rows(2);
        let r = rows.next().unwrap().unwrap();
        assert_eq!((r.line(), r.uint::<u8>(0).unwrap(), r.f32(1).unwrap()), (4, 1, 2.5));
        let r = rows.next().unwrap().unwrap();
        assert_eq!((r.line(), r.int::<i8>(0).unwrap(), r.f64(1).unwrap()), (6, 3, 4.0));
        assert!(rows.next().unwrap().is_none());
        assert_eq!(t.line_of_row(1), 6);
    }

    #[test]
    fn field_errors_name_line_and_column() {
        let t = table("a,b\n300,nan\n1\n").unwrap();
        let mut rows = t.rows(2);
        let r = rows.next().unwrap().unwrap();
        let e = r.uint::<u8>(0).unwrap_err().to_string();
        assert!(e.contains("t.csv:2: column `a`") && e.contains("out of range"), "{e}");
        let e = r.f32(1).unwrap_err().to_string();
        assert!(e.contains("t.csv:2: column `b`") && e.contains("finite"), "{e}");
        let e = rows.next().err().unwrap().to_string();
        assert!(e.contains("t.csv:3: column `b`") && e.contains("1 fields"), "{e}");
        // Longer rows than the header, whether or not the extra fields are read.
        for need in [1, 2] {
            let t = table("a,b\n1,2\n1,2,3\n").unwrap();
            let mut rows = t.rows(need);
            assert!(rows.next().unwrap().is_some());
            let e = rows.next().err().unwrap().to_string();
            assert!(e.contains("t.csv:3: column `#3 (beyond the header)`: row has 3 fields"), "{e}");
        }
        let e = table(" \r\n\n").err().unwrap();
        assert!(matches!(e, Error::EmptyFile { .. }), "{e}");
    }
}
