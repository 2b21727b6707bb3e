//! Configuration files as text: reading them (encoding problems named precisely) and finding where
//! each JSON key is, so that problems name a line and a key given twice is caught.

use std::collections::HashMap;
use std::path::Path;

use super::issue::ConfigIssue;

/// The text of a configuration file: UTF-8, with a leading byte order mark dropped.
pub fn read_text(path: &Path) -> Result<String, ConfigIssue> {
    let bytes = std::fs::read(path).map_err(|e| {
        let fix = match e.kind() {
            std::io::ErrorKind::PermissionDenied => "check the file's permissions",
            std::io::ErrorKind::IsADirectory => "replace the directory with a file",
            _ => "check that the file exists and can be read",
        };
        ConfigIssue::new(
            path,
            "(file)",
            format!("cannot be read: {}", io_reason(&e)),
            fix,
        )
    })?;
    decode(path, bytes)
}

/// Why a file operation failed, in words for a sentence about the path ("cannot read X: it does not
/// exist"), without the system's error number.
pub fn io_reason(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::NotFound => "it does not exist".into(),
        K::PermissionDenied => "permission denied".into(),
        K::AlreadyExists => "it already exists".into(),
        K::IsADirectory => "it is a directory".into(),
        K::NotADirectory => "a part of its path is not a directory".into(),
        K::DirectoryNotEmpty => "the directory is not empty".into(),
        K::StorageFull => "the disk is full".into(),
        K::ReadOnlyFilesystem => "the file system is read-only".into(),
        _ => {
            let text = e.to_string();
            let text = match text.rfind(" (os error ") {
                Some(i) if text.ends_with(')') => text[..i].to_string(),
                _ => text,
            };
            let mut chars = text.chars();
            chars.next().map_or_else(String::new, |c| {
                c.to_lowercase().chain(chars).collect::<String>()
            })
        }
    }
}

/// What keeps `dir` from being used as a directory: "does not exist", "is not a directory".
pub fn directory_problem(dir: &Path) -> Option<&'static str> {
    if dir.is_dir() {
        None
    } else if dir.exists() {
        Some("is not a directory")
    } else {
        Some("does not exist")
    }
}

/// `bytes` as text, or what is wrong with their encoding.
pub(crate) fn decode(path: &Path, bytes: Vec<u8>) -> Result<String, ConfigIssue> {
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return Err(ConfigIssue::new(
            path,
            "(file)",
            "is UTF-16 text (it starts with a UTF-16 byte order mark)",
            "save the file as UTF-8",
        ));
    }
    let bytes = match bytes.strip_prefix(UTF8_BOM) {
        Some(rest) => rest.to_vec(),
        None => bytes,
    };
    String::from_utf8(bytes).map_err(|e| {
        let good = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        // The prefix is valid UTF-8 by definition of `valid_up_to`.
        let before = std::str::from_utf8(&bytes[..good]).unwrap_or_default();
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        ConfigIssue::new(
            path,
            "(file)",
            format!(
                "is not UTF-8: the first invalid byte, 0x{:02X}, is at line {line}, column {column}",
                bytes[good]
            ),
            "save the file as UTF-8 (it is probably in a legacy encoding such as Latin-1)",
        )
        .at_line(Some(line))
    })
}

const UTF8_BOM: &[u8] = &[0xEF, 0xBB, 0xBF];

/// A key that one JSON object holds twice (JSON parsers keep only the last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// Dotted path of the key (`supervisor.gates.exclude`).
    pub(crate) path: String,
    pub(crate) first_line: usize,
    pub(crate) line: usize,
}

impl DuplicateKey {
    pub(crate) fn issue(&self, file: &Path) -> ConfigIssue {
        ConfigIssue::new(
            file,
            &self.path,
            format!(
                "is given twice, on lines {} and {}; only the last would count",
                self.first_line, self.line
            ),
            "remove one of them",
        )
        .at_line(Some(self.line))
    }
}

/// Where each key and list item of a JSON document is, by dotted path (`supervisor.gates.exclude`,
/// `supervisor.codeowners[1]`), and which keys an object holds twice.
#[derive(Debug, Clone, Default)]
pub struct JsonIndex {
    /// Path → (line, column), both 1-based; the column counts characters.
    positions: HashMap<String, (usize, usize)>,
    pub(crate) duplicates: Vec<DuplicateKey>,
}

/// Where the scanner is: the line, and the column of the last position asked for on it (so that
/// columns are counted once over a long line, not from its start each time).
struct Cursor<'t> {
    text: &'t str,
    line: usize,
    /// Byte offset of the current line's start.
    line_start: usize,
    /// The last (byte offset, column) computed on the current line.
    last: (usize, usize),
}

impl Cursor<'_> {
    /// A newline at byte `i`.
    fn newline(&mut self, i: usize) {
        self.line += 1;
        self.line_start = i + 1;
        self.last = (i + 1, 1);
    }

    /// The position of byte `i` on the current line.
    fn at(&mut self, i: usize) -> (usize, usize) {
        let (from, column) = if self.last.0 <= i && self.last.0 >= self.line_start {
            self.last
        } else {
            (self.line_start, 1)
        };
        let column = column
            + self
                .text
                .get(from..i)
                .map_or(i - from, |s| s.chars().count());
        self.last = (i, column);
        (self.line, column)
    }
}

enum Frame {
    Object {
        path: String,
        seen: HashMap<String, usize>,
        /// The key whose value comes next.
        key: Option<String>,
    },
    Array {
        path: String,
        next: usize,
        /// Whether the current item's line is recorded.
        started: bool,
    },
}

impl JsonIndex {
    /// Index `text`, which is meant to be valid JSON; on anything else it records what it can.
    pub fn new(text: &str) -> JsonIndex {
        let mut index = JsonIndex::default();
        let mut stack: Vec<Frame> = Vec::new();
        let bytes = text.as_bytes();
        let mut at = Cursor {
            text,
            line: 1,
            line_start: 0,
            last: (0, 1),
        };
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\n' => at.newline(i),
                b' ' | b'\t' | b'\r' | b':' => {}
                b'"' => {
                    let start = i;
                    let start_at = at.at(i);
                    i += 1;
                    while i < bytes.len() && bytes[i] != b'"' {
                        match bytes[i] {
                            b'\\' => i += 1,
                            b'\n' => at.newline(i),
                            _ => {}
                        }
                        i += 1;
                    }
                    let end = (i + 1).min(bytes.len());
                    let raw = text.get(start..end).unwrap_or_default();
                    if let Some(Frame::Object {
                        key: key @ None, ..
                    }) = stack.last_mut()
                    {
                        let name = serde_json::from_str::<String>(raw)
                            .unwrap_or_else(|_| raw.trim_matches('"').to_string());
                        *key = Some(name);
                        index.key(&mut stack, start_at);
                    } else {
                        index.value(&mut stack, start_at);
                    }
                }
                b'{' | b'[' => {
                    let path = index.value(&mut stack, at.at(i));
                    stack.push(if bytes[i] == b'{' {
                        Frame::Object {
                            path,
                            seen: HashMap::new(),
                            key: None,
                        }
                    } else {
                        Frame::Array {
                            path,
                            next: 0,
                            started: false,
                        }
                    });
                }
                b'}' | b']' => {
                    stack.pop();
                }
                b',' => match stack.last_mut() {
                    Some(Frame::Object { key, .. }) => *key = None,
                    Some(Frame::Array { next, started, .. }) => {
                        *next += 1;
                        *started = false;
                    }
                    None => {}
                },
                _ => {
                    // A number, true, false or null.
                    index.value(&mut stack, at.at(i));
                    while i + 1 < bytes.len()
                        && !matches!(
                            bytes[i + 1],
                            b',' | b'}' | b']' | b'\n' | b' ' | b'\t' | b'\r' | b'"'
                        )
                    {
                        i += 1;
                    }
                }
            }
            i += 1;
        }
        index
    }

    /// The line of the key or list item at `path`.
    pub(crate) fn line(&self, path: &str) -> Option<usize> {
        self.position(path).map(|(line, _)| line)
    }

    /// The line and column of the key or list item at `path`.
    pub(crate) fn position(&self, path: &str) -> Option<(usize, usize)> {
        self.positions.get(path).copied()
    }

    /// A key was read into the innermost object.
    fn key(&mut self, stack: &mut [Frame], position: (usize, usize)) {
        let Some(Frame::Object { path, seen, key }) = stack.last_mut() else {
            return;
        };
        let name = key.clone().unwrap_or_default();
        let full = join(path, &name);
        if let Some(first_line) = seen.insert(name, position.0) {
            self.duplicates.push(DuplicateKey {
                path: full.clone(),
                first_line,
                line: position.0,
            });
        }
        self.positions.insert(full, position);
    }

    /// A value starts: records a list item's position; returns the value's path.
    fn value(&mut self, stack: &mut [Frame], position: (usize, usize)) -> String {
        match stack.last_mut() {
            Some(Frame::Object { path, key, .. }) => join(path, key.as_deref().unwrap_or_default()),
            Some(Frame::Array {
                path,
                next,
                started,
            }) => {
                let item = format!("{path}[{next}]");
                if !*started {
                    *started = true;
                    self.positions.entry(item.clone()).or_insert(position);
                }
                item
            }
            None => String::new(),
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"{
  "supervisor": {
    "repo": "o/r",
    "note": "a \"quoted\" repo",
    "codeowners": [
      "a",
      "b"
    ],
    "gates": { "exclude": ["dist/"], "allowNpx": true },
    "n": -1.5e3, "t": true
  },
  "other": { "repo": 1 }
}"#;

    #[test]
    fn lines_by_path() {
        let index = JsonIndex::new(TEXT);
        assert_eq!(index.line("supervisor"), Some(2));
        assert_eq!(index.line("supervisor.repo"), Some(3));
        assert_eq!(index.line("supervisor.note"), Some(4));
        assert_eq!(index.line("supervisor.codeowners"), Some(5));
        assert_eq!(index.line("supervisor.codeowners[0]"), Some(6));
        assert_eq!(index.line("supervisor.codeowners[1]"), Some(7));
        assert_eq!(index.line("supervisor.gates.allowNpx"), Some(9));
        assert_eq!(index.line("supervisor.gates.exclude[0]"), Some(9));
        assert_eq!(index.line("supervisor.t"), Some(10));
        assert_eq!(index.line("other.repo"), Some(12));
        assert_eq!(index.line("supervisor.missing"), None);
        assert!(index.duplicates.is_empty());
    }

    #[test]
    fn columns_count_characters() {
        let index = JsonIndex::new(TEXT);
        assert_eq!(index.position("supervisor.repo"), Some((3, 5)));
        assert_eq!(index.position("supervisor.gates.exclude[0]"), Some((9, 28)));
        assert_eq!(index.position("supervisor.gates.allowNpx"), Some((9, 38)));
        assert_eq!(index.position("supervisor.t"), Some((10, 18)));
        // Characters, not bytes: `é` is two bytes and one column.
        let index = JsonIndex::new("{\"é\": {\"k\": [1, \"ü\", 3]}}");
        assert_eq!(index.position("é.k"), Some((1, 8)));
        assert_eq!(index.position("é.k[1]"), Some((1, 17)));
        assert_eq!(index.position("é.k[2]"), Some((1, 22)));
    }

    #[test]
    fn duplicates_in_one_object_only() {
        let text =
            "{\"a\": {\"k\": 1,\n\"k\": 2}, \"b\": {\"k\": 3},\n\"a\": [{\"k\": 1}, {\"k\": 2}]}";
        let index = JsonIndex::new(text);
        assert_eq!(
            index.duplicates,
            vec![
                DuplicateKey {
                    path: "a.k".into(),
                    first_line: 1,
                    line: 2
                },
                DuplicateKey {
                    path: "a".into(),
                    first_line: 1,
                    line: 3
                },
            ]
        );
    }

    #[test]
    fn escaped_keys_are_compared_unescaped() {
        let index = JsonIndex::new(r#"{"repo": 1, "re\u0070o": 2}"#);
        assert_eq!(index.duplicates.len(), 1);
        assert_eq!(index.duplicates[0].path, "repo");
    }

    #[test]
    fn io_failures_are_said_in_words() {
        use std::io::{Error, ErrorKind};
        assert_eq!(
            io_reason(&Error::from(ErrorKind::NotFound)),
            "it does not exist"
        );
        assert_eq!(
            io_reason(&Error::from_raw_os_error(libc::EACCES)),
            "permission denied"
        );
        let odd = io_reason(&Error::from_raw_os_error(libc::EMFILE));
        assert!(!odd.contains("os error"), "{odd}");
        assert!(odd.starts_with("too many open files"), "{odd}");
        assert_eq!(directory_problem(Path::new("/")), None);
        assert_eq!(
            directory_problem(Path::new("/nonexistent/x")),
            Some("does not exist")
        );
        assert_eq!(
            directory_problem(Path::new("/proc/self/status")),
            Some("is not a directory")
        );
    }

    #[test]
    fn encodings() {
        let p = Path::new("s.json");
        assert_eq!(decode(p, b"\xEF\xBB\xBF{}".to_vec()).unwrap(), "{}");
        assert_eq!(decode(p, "{\"é\": 1}".into()).unwrap(), "{\"é\": 1}");
        let e = decode(p, b"{\n \"\xC3\xA9\xFF\": 1}".to_vec()).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.problem.contains("0xFF, is at line 2, column 4"), "{e}");
        let e = decode(p, vec![0xFE, 0xFF, 0, b'{']).unwrap_err();
        assert!(e.problem.contains("UTF-16"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn indexing_never_panics(text in "\\PC{0,200}") {
            let _ = JsonIndex::new(&text);
        }

        #[test]
        fn indexing_json_like_text_never_panics(text in "[\\[\\]{}\",:\\\\a-c0-9 \n]{0,200}") {
            let _ = JsonIndex::new(&text);
        }

        #[test]
        fn decoding_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let _ = decode(Path::new("s.json"), bytes);
        }
    }
}
