//! What a terminal shows for the bytes a program wrote: the rows a person scrolls back through,
//! after carriage returns, line erasures and cursor moves (the control sequences a progress line
//! uses) took effect. Colours and modes are ignored.

#![allow(dead_code)]

/// The rows `bytes` leave on a terminal `width` columns wide (lines longer than that wrap at its
/// right edge), trailing blanks removed.
pub(crate) fn rows(bytes: &str, width: usize) -> Vec<String> {
    let mut rows: Vec<Vec<char>> = vec![Vec::new()];
    let (mut row, mut col) = (0usize, 0usize);
    let mut chars = bytes.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => col = 0,
            '\n' => {
                row += 1;
                col = 0;
            }
            '\x1b' => {
                if chars.peek() != Some(&'[') {
                    chars.next();
                    continue;
                }
                chars.next();
                let mut params = String::new();
                let mut last = ' ';
                for p in chars.by_ref() {
                    if ('@'..='~').contains(&p) {
                        last = p;
                        break;
                    }
                    params.push(p);
                }
                let n = params
                    .trim_start_matches('?')
                    .split(';')
                    .next()
                    .and_then(|n| n.parse::<usize>().ok());
                while rows.len() <= row {
                    rows.push(Vec::new());
                }
                // A cursor move ends a wrap that was pending at the right edge.
                col = col.min(width - 1);
                match last {
                    'A' => row = row.saturating_sub(n.unwrap_or(1).max(1)),
                    'B' => row += n.unwrap_or(1).max(1),
                    'C' => col += n.unwrap_or(1).max(1),
                    'D' => col = col.saturating_sub(n.unwrap_or(1).max(1)),
                    'G' => col = n.unwrap_or(1).max(1) - 1,
                    'K' => match n.unwrap_or(0) {
                        0 => rows[row].truncate(col),
                        1 => rows[row].iter_mut().take(col + 1).for_each(|c| *c = ' '),
                        _ => rows[row].clear(),
                    },
                    'J' if n.unwrap_or(0) == 0 => {
                        rows[row].truncate(col);
                        rows.truncate(row + 1);
                    }
                    _ => {}
                }
            }
            c if c.is_control() => {}
            c => {
                if col >= width {
                    row += 1;
                    col = 0;
                }
                while rows.len() <= row {
                    rows.push(Vec::new());
                }
                let line = &mut rows[row];
                while line.len() < col {
                    line.push(' ');
                }
                if col < line.len() {
                    line[col] = c;
                } else {
                    line.push(c);
                }
                col += 1;
            }
        }
    }
    let mut out: Vec<String> = rows
        .into_iter()
        .map(|r| r.into_iter().collect::<String>().trim_end().to_string())
        .collect();
    while out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    out
}
