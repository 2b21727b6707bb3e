//! Whether the developer weakened the designated tests: one designated test file at the test
//! designer's commit against the same file at the head.
//!
//! The developer may add tests and assertions, never take any away: a designated test deleted or
//! renamed, a skip marker added on it (or around it), fewer assertions in it. The comparison reads
//! text, not syntax trees: comments are left out and string contents blanked, tests are found by
//! their declarations (`it(`/`test(`/`describe(`, `def`/`class`, `fn`/`mod`, `func`/`t.Run(`), and a
//! test's body runs to its matching bracket (in Python, to the end of its indentation). What cannot
//! be placed in a test is compared across the whole file.
//!
//! The head's text is the developer's, so reading it takes time and memory in proportion to its
//! size, whatever it holds.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// How a designated test was weakened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Weakening {
    /// The file is gone at the head (deleted or renamed).
    FileRemoved,
    /// The test's name is no longer in the file (deleted or renamed, itself or a group around it).
    TestRemoved { test: String },
    /// A skip marker was added (`it.skip`, `xit`, `@pytest.mark.skip`, `#[ignore]`, `t.Skip(`…)
    /// on the test, in it, or on a group around it. `test: None` where no test can be named: outside
    /// every test (where it may skip the whole file), or on a test of a wholly designated file
    /// whose name is not read here (`it.each(…)(…)`).
    SkipAdded {
        test: Option<String>,
        line: u32,
        marker: String,
    },
    /// Fewer assertions than at the test designer's commit (in the test when it can be located,
    /// else in the file).
    AssertionsRemoved {
        test: Option<String>,
        before: usize,
        after: usize,
    },
}

/// A weakening of a designated test in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    pub(crate) file: String,
    pub(crate) weakening: Weakening,
}

impl Violation {
    /// One sentence naming the file, the test and the change.
    pub(crate) fn message(&self) -> String {
        let file = &self.file;
        match &self.weakening {
            Weakening::FileRemoved => {
                format!("{file}: the designated test file is gone at the head (deleted or renamed)")
            }
            Weakening::TestRemoved { test } => format!(
                "{file}: the designated test `{test}` is no longer in the file (deleted or renamed)"
            ),
            Weakening::SkipAdded {
                test: Some(test),
                line,
                marker,
            } => format!(
                "{file}: the designated test `{test}` is skipped at line {line} (`{marker}`)"
            ),
            Weakening::SkipAdded {
                test: None,
                line,
                marker,
            } => format!(
                "{file}: a skip was added at line {line} (`{marker}`), where it may skip designated tests"
            ),
            Weakening::AssertionsRemoved {
                test: Some(test),
                before,
                after,
            } => format!(
                "{file}: the designated test `{test}` has {} where it had {} at the test designer's commit",
                assertions(*after),
                assertions(*before)
            ),
            Weakening::AssertionsRemoved {
                test: None,
                before,
                after,
            } => format!(
                "{file}: the file has {} where it had {} at the test designer's commit",
                assertions(*after),
                assertions(*before)
            ),
        }
    }
}

fn assertions(n: usize) -> String {
    if n == 1 {
        "1 assertion".to_string()
    } else {
        format!("{n} assertions")
    }
}

/// Compare one designated file. `before` is its text at the test designer's commit; `after` its
/// text at the head (`None`: the file is gone). `tests` are the designated test names in this file
/// as the runner gives them (empty: the whole file is designated, so every test in `before` is).
/// The language comes from the file name's extension (`.ts .tsx .js .jsx .mjs .cjs .mts .cts`: the
/// JS family; `.py`: Python; `.rs`: Rust; `.go`: Go); in any other file only its removal and a
/// count of assertion-like words are checked.
pub fn weakenings(
    file: &str,
    before: &str,
    after: Option<&str>,
    tests: &[String],
) -> Vec<Violation> {
    let Some(after) = after else {
        return vec![Violation {
            file: file.to_string(),
            weakening: Weakening::FileRemoved,
        }];
    };
    if before == after {
        return Vec::new();
    }
    let lang = Lang::of(file);
    let old = Source::parse(lang, before);
    let new = Source::parse(lang, after);
    let whole_file = tests.is_empty();
    let mut labels = Labels::default();
    if whole_file {
        for name in old.test_names() {
            labels.id(name);
        }
    } else {
        for name in tests {
            labels.id(name.clone());
        }
    }
    let designated = labels.names.len();

    let mut found: Vec<Weakening> = Vec::new();
    let mut old_owners = vec![None; old.blocks.len()];
    let mut new_owners = vec![None; new.blocks.len()];
    // (designated test, its blocks before, its blocks at the head)
    let mut located: Vec<(usize, Vec<usize>, Vec<usize>)> = Vec::new();
    let mut unplaced = whole_file;
    let mut removed = false;
    for d in 0..designated {
        let segments = lang.segments(&labels.names[d]);
        let was = old.locate(&segments);
        for &b in &was.blocks {
            old_owners[b].get_or_insert(d);
        }
        if was.blocks.is_empty() {
            // Declared in no form read here: its assertions count with the whole file's.
            unplaced = true;
            continue;
        }
        let is = new.locate(&segments);
        for &b in &is.blocks {
            new_owners[b].get_or_insert(d);
        }
        if is.blocks.is_empty() || (was.exact && !is.exact) {
            removed = true;
            found.push(Weakening::TestRemoved {
                test: labels.names[d].clone(),
            });
        } else {
            located.push((d, was.blocks, is.blocks));
        }
    }

    let old_at = Attachments::new(&old, &old_owners);
    let new_at = Attachments::new(&new, &new_owners);
    let mut skips = added_skips((&old, &old_at), (&new, &new_at), &mut labels, whole_file);
    skips.sort_by_key(|w| match w {
        Weakening::SkipAdded { line, .. } => *line,
        _ => 0,
    });
    found.extend(skips);

    let mut fewer_in_a_test = false;
    for (d, was, is) in located {
        let (before, after) = (old.assertions_in(&was), new.assertions_in(&is));
        if after < before {
            fewer_in_a_test = true;
            found.push(Weakening::AssertionsRemoved {
                test: Some(labels.names[d].clone()),
                before,
                after,
            });
        }
    }
    if unplaced && !removed && !fewer_in_a_test {
        let (before, after) = (old.assertions_in_file(), new.assertions_in_file());
        if after < before {
            found.push(Weakening::AssertionsRemoved {
                test: None,
                before,
                after,
            });
        }
    }

    found
        .into_iter()
        .map(|weakening| Violation {
            file: file.to_string(),
            weakening,
        })
        .collect()
}

/// Test names by number: the designated tests first (their number is their owner number), then
/// any test a skip attaches to in a wholly designated file.
#[derive(Default)]
struct Labels {
    names: Vec<String>,
    ids: HashMap<String, usize>,
}

impl Labels {
    fn id(&mut self, name: String) -> usize {
        if let Some(&id) = self.ids.get(&name) {
            return id;
        }
        self.names.push(name.clone());
        self.ids.insert(name, self.names.len() - 1);
        self.names.len() - 1
    }
}

/// The skip markers at the head that were not at the test designer's commit, counted per test
/// they attach to and per marker; a marker on a test that is not designated is the developer's
/// own.
fn added_skips(
    (old, old_at): (&Source, &Attachments),
    (new, new_at): (&Source, &Attachments),
    labels: &mut Labels,
    whole_file: bool,
) -> Vec<Weakening> {
    type Key = (Option<usize>, String);
    // Per test and marker: how many, and the lines (as text) that hold them.
    let mut had: HashMap<Key, (usize, HashMap<&str, usize>)> = HashMap::new();
    for (s, test) in old.attached_skips(old_at, labels, whole_file) {
        let (count, lines) = had.entry((test, s.marker)).or_default();
        *count += 1;
        *lines.entry(old.text[s.line].trim()).or_default() += 1;
    }
    let mut has: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    for (s, test) in new.attached_skips(new_at, labels, whole_file) {
        has.entry((test, s.marker)).or_default().push(s.line);
    }
    let mut out = Vec::new();
    for ((test, marker), lines) in has {
        let (count, mut then) = had.remove(&(test, marker.clone())).unwrap_or_default();
        let added = lines.len().saturating_sub(count);
        if added == 0 {
            continue;
        }
        // The markers on lines that were not already there with one are the added ones.
        let fresh = lines
            .into_iter()
            .filter(|&l| match then.get_mut(new.text[l].trim()) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    false
                }
                _ => true,
            });
        for l in fresh.take(added) {
            out.push(Weakening::SkipAdded {
                test: test.map(|t| labels.names[t].clone()),
                line: u32::try_from(l + 1).unwrap_or(u32::MAX),
                marker: marker.clone(),
            });
        }
    }
    out
}

/// The language a file's tests are read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    Js,
    Python,
    Rust,
    Go,
    /// Unknown: no tests are located, only assertion-like words counted.
    Other,
}

impl Lang {
    fn of(file: &str) -> Lang {
        let name = file.rsplit(['/', '\\']).next().unwrap_or(file);
        let ext = match name.rsplit_once('.') {
            Some((_, ext)) => ext.to_ascii_lowercase(),
            None => return Lang::Other,
        };
        match ext.as_str() {
            "ts" | "tsx" | "js" | "jsx" | "mjs" | "cjs" | "mts" | "cts" => Lang::Js,
            "py" => Lang::Python,
            "rs" => Lang::Rust,
            "go" => Lang::Go,
            _ => Lang::Other,
        }
    }

    /// How the runner joins a test's enclosing names into its full name.
    fn separator(self) -> &'static str {
        match self {
            Lang::Js => " > ",
            Lang::Go => "/",
            Lang::Python | Lang::Rust | Lang::Other => "::",
        }
    }

    /// A runner's full name split into the names of what encloses the test and the test's own
    /// (`add > adds two`, `TestGroup::test_inner[1-2]`, `tests::adds`, `TestAdd/negative`).
    fn segments(self, name: &str) -> Vec<String> {
        let parts: Vec<&str> = match self {
            Lang::Js => name.split(" > ").collect(),
            Lang::Python => {
                // Parameters (`test_add[1-2]`) are not part of the declared name.
                let last = name.rfind("::").map_or(0, |i| i + 2);
                let bare = match name[last..].find('[') {
                    Some(i) => &name[..last + i],
                    None => name,
                };
                bare.split("::").flat_map(|p| p.split('.')).collect()
            }
            Lang::Rust => name.split("::").collect(),
            Lang::Go => name.split('/').collect(),
            Lang::Other => name
                .split(" > ")
                .flat_map(|p| p.split("::"))
                .flat_map(|p| p.split(['/', '.']))
                .collect(),
        };
        parts
            .into_iter()
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| self.normalized(p))
            .collect()
    }

    /// A declared name as the runner writes it: `go test` writes a subtest's spaces as `_`.
    fn normalized(self, name: &str) -> String {
        match self {
            Lang::Go => name.replace(' ', "_"),
            _ => name.to_string(),
        }
    }
}

/// Enclosing names deeper than this are not followed: no test file nests so deep, and following
/// them in a crafted one would cost time and memory out of proportion.
const MAX_NESTING: usize = 16;

/// A full name longer than this is not built: the test goes by its own name.
const MAX_FULL_NAME: usize = 512;

/// What a declaration declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Test,
    /// `describe(`, a Python class, a Rust `mod`.
    Group,
    /// A function that is not a test (a Python def not named `test*`, a Rust fn without a test
    /// attribute, a Go func not named `Test*`).
    Helper,
}

/// A declaration and the lines it spans.
#[derive(Debug, Clone)]
struct Block {
    /// As the runner writes it ([`Lang::normalized`]).
    name: Option<String>,
    kind: Kind,
    /// First line (0-based), its decorators or attributes included.
    start: usize,
    /// The line of the declaration itself, and the column where it begins.
    decl: usize,
    col: usize,
    /// Last line of its body.
    end: usize,
    parent: Option<usize>,
}

impl Block {
    fn new(name: Option<String>, kind: Kind, start: usize, decl: usize, col: usize) -> Block {
        Block {
            name,
            kind,
            start,
            decl,
            col,
            end: decl,
            parent: None,
        }
    }

    /// Where it begins: its first decorator line, else its declaration.
    fn begins(&self) -> (usize, usize) {
        if self.start < self.decl {
            (self.start, 0)
        } else {
            (self.decl, self.col)
        }
    }
}

/// Where a designated test is in one version of the file.
struct Located {
    blocks: Vec<usize>,
    /// Found with every enclosing name the runner gives (not only by its own name).
    exact: bool,
}

/// One skip marker: where, and which (`it.skip`, `@pytest.mark.skip`, `#[ignore]`, `t.Skip`).
struct SkipMarker {
    line: usize,
    col: usize,
    marker: String,
}

/// One version of the file, read.
struct Source<'a> {
    lang: Lang,
    text: Vec<&'a str>,
    /// Each line without its comments and with string contents blanked, byte for byte at the same
    /// offsets as in `text`.
    code: Vec<String>,
    /// In order of declaration; a parent before its children.
    blocks: Vec<Block>,
    /// Block names by number, for the indexes below.
    name_ids: HashMap<String, u32>,
    /// Blocks by their own name, and by their names from the outermost enclosing block to their
    /// own (where all have one and there are at most [`MAX_NESTING`]).
    by_name: HashMap<u32, Vec<usize>>,
    by_chain: HashMap<Vec<u32>, Vec<usize>>,
    /// `assertions_before[l]`: the assertions on the lines before line `l`.
    assertions_before: Vec<usize>,
}

impl<'a> Source<'a> {
    fn parse(lang: Lang, text: &'a str) -> Source<'a> {
        let lines: Vec<&str> = text.lines().collect();
        let (code, continued) = code_lines(lang, &lines);
        let mut blocks = match lang {
            Lang::Js => js_blocks(lang, &lines, &code),
            Lang::Python => python_blocks(&code, &continued),
            Lang::Rust => rust_blocks(&code),
            Lang::Go => go_blocks(lang, &lines, &code),
            Lang::Other => Vec::new(),
        };
        set_parents(&mut blocks);

        let mut name_ids: HashMap<String, u32> = HashMap::new();
        // Each block's names from the outermost enclosing block to its own.
        let mut chains: Vec<Option<Vec<u32>>> = Vec::with_capacity(blocks.len());
        let mut by_name: HashMap<u32, Vec<usize>> = HashMap::new();
        let mut by_chain: HashMap<Vec<u32>, Vec<usize>> = HashMap::new();
        for (i, b) in blocks.iter().enumerate() {
            let Some(name) = &b.name else {
                chains.push(None);
                continue;
            };
            let next = u32::try_from(name_ids.len()).unwrap_or(u32::MAX);
            let id = *name_ids.entry(name.clone()).or_insert(next);
            by_name.entry(id).or_default().push(i);
            let chain = match b.parent {
                None => Some(vec![id]),
                Some(p) => chains[p]
                    .as_ref()
                    .filter(|c| c.len() < MAX_NESTING)
                    .map(|c| {
                        let mut c = c.clone();
                        c.push(id);
                        c
                    }),
            };
            if let Some(c) = &chain {
                by_chain.entry(c.clone()).or_default().push(i);
            }
            chains.push(chain);
        }

        let mut assertions_before = Vec::with_capacity(code.len() + 1);
        let mut sum = 0;
        assertions_before.push(0);
        for c in &code {
            sum += assertions_on(lang, c);
            assertions_before.push(sum);
        }

        Source {
            lang,
            text: lines,
            code,
            blocks,
            name_ids,
            by_name,
            by_chain,
            assertions_before,
        }
    }

    /// A block's name as the runner would give it: its enclosing names and its own, or only its
    /// own where an enclosing block has none (or the whole would be too long).
    fn full_name(&self, b: usize) -> Option<String> {
        let own = self.blocks[b].name.as_deref()?;
        let mut chain: Vec<&str> = Vec::new();
        let mut cur = Some(b);
        let mut len = 0;
        while let Some(i) = cur {
            let name = self.blocks[i].name.as_deref();
            match name {
                Some(n) if chain.len() < MAX_NESTING && len + n.len() <= MAX_FULL_NAME => {
                    len += n.len() + 3;
                    chain.push(n);
                }
                _ => return Some(own.to_string()),
            }
            cur = self.blocks[i].parent;
        }
        chain.reverse();
        Some(chain.join(self.lang.separator()))
    }

    /// The full names of the file's tests, each once: what a wholly designated file designates.
    fn test_names(&self) -> Vec<String> {
        let mut seen: HashSet<String> = HashSet::new();
        let mut names = Vec::new();
        for (i, b) in self.blocks.iter().enumerate() {
            if b.kind != Kind::Test {
                continue;
            }
            if let Some(name) = self.full_name(i) {
                if seen.insert(name.clone()) {
                    names.push(name);
                }
            }
        }
        names
    }

    /// The blocks declaring the test named `segments`: those whose enclosing names are the
    /// runner's too, else every block declaring its last name. Cargo's names start with the module
    /// path of the file itself, so for Rust the block's names need only end the runner's.
    fn locate(&self, segments: &[String]) -> Located {
        let ids: Vec<Option<u32>> = segments
            .iter()
            .map(|s| self.name_ids.get(s).copied())
            .collect();
        let Some(last) = ids.last().copied().flatten() else {
            return Located {
                blocks: Vec::new(),
                exact: false,
            };
        };
        let shortest = match self.lang {
            Lang::Rust => 1,
            _ => ids.len(),
        };
        let mut exact: Vec<usize> = Vec::new();
        for k in shortest..=ids.len().min(MAX_NESTING) {
            let tail: Option<Vec<u32>> = ids[ids.len() - k..].iter().copied().collect();
            if let Some(found) = tail.and_then(|t| self.by_chain.get(&t)) {
                exact.extend(found);
            }
        }
        if exact.is_empty() {
            Located {
                blocks: self.by_name.get(&last).cloned().unwrap_or_default(),
                exact: false,
            }
        } else {
            exact.sort_unstable();
            Located {
                blocks: exact,
                exact: true,
            }
        }
    }

    /// The skip markers in order, each with the test it attaches to (see [`Attachments::test`]);
    /// those on tests that are not designated left out.
    fn attached_skips(
        &self,
        at: &Attachments,
        labels: &mut Labels,
        whole_file: bool,
    ) -> Vec<(SkipMarker, Option<usize>)> {
        let markers = self.skip_markers();
        let places: Vec<(usize, usize)> = markers.iter().map(|s| (s.line, s.col)).collect();
        let blocks = self.innermost(&places);
        markers
            .into_iter()
            .zip(blocks)
            .filter_map(|(s, b)| at.test(self, b, labels, whole_file).map(|test| (s, test)))
            .collect()
    }

    fn skip_markers(&self) -> Vec<SkipMarker> {
        let Some(re) = skip_pattern(self.lang) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (line, code) in self.code.iter().enumerate() {
            for m in re.find_iter(code) {
                out.push(SkipMarker {
                    line,
                    col: m.start(),
                    marker: marker_name(m.as_str()),
                });
            }
        }
        out
    }

    /// For each of `places` (in order), the innermost block it falls in, decorators and attributes
    /// included: one sweep with the blocks open at each place.
    fn innermost(&self, places: &[(usize, usize)]) -> Vec<Option<usize>> {
        let mut order: Vec<usize> = (0..self.blocks.len()).collect();
        order.sort_by_key(|&i| self.blocks[i].begins());
        let mut next = 0;
        let mut open: Vec<usize> = Vec::new();
        places
            .iter()
            .map(|&(line, col)| {
                while let Some(&i) = order.get(next) {
                    if self.blocks[i].begins() > (line, col) {
                        break;
                    }
                    open.push(i);
                    next += 1;
                }
                while let Some(&top) = open.last() {
                    if self.blocks[top].end >= line {
                        break;
                    }
                    open.pop();
                }
                open.last().copied()
            })
            .collect()
    }

    /// Assertions in the lines of `blocks`, each line once.
    fn assertions_in(&self, blocks: &[usize]) -> usize {
        let mut spans: Vec<(usize, usize)> = blocks
            .iter()
            .map(|&b| (self.blocks[b].start, self.blocks[b].end))
            .collect();
        spans.sort_unstable();
        let mut total = 0;
        let mut counted_to = 0; // lines before this are counted
        for (start, end) in spans {
            let from = start.max(counted_to);
            let to = (end + 1).min(self.code.len());
            if from < to {
                total += self.assertions_before[to] - self.assertions_before[from];
                counted_to = to;
            }
        }
        total
    }

    fn assertions_in_file(&self) -> usize {
        self.assertions_before.last().copied().unwrap_or(0)
    }
}

/// Per block of one version, the designated test a skip marker in it attaches to.
struct Attachments {
    /// The designated test the block is, or is in.
    designated_here: Vec<Option<usize>>,
    /// The first designated test inside the block (it is a group around it, or its parent test).
    designated_within: Vec<Option<usize>>,
    /// The test the block is or is in, and the first test inside it: where a wholly designated
    /// file's skip is, when it is on none of the designer's tests.
    test_here: Vec<Option<usize>>,
    test_within: Vec<Option<usize>>,
}

impl Attachments {
    /// `owners`: per block, the designated test it declares.
    fn new(src: &Source, owners: &[Option<usize>]) -> Attachments {
        let n = src.blocks.len();
        let parent = |i: usize| src.blocks[i].parent;
        let tests: Vec<Option<usize>> = (0..n)
            .map(|i| (src.blocks[i].kind == Kind::Test).then_some(i))
            .collect();
        Attachments {
            designated_here: here(parent, owners),
            designated_within: within(parent, owners),
            test_here: here(parent, &tests),
            test_within: within(parent, &tests),
        }
    }

    /// Which test a skip marker in `block` attaches to: `Some(Some(label))` for a designated test
    /// it is on, in, or around; `Some(None)` outside every block; `None` for a test that is not
    /// designated — in a wholly designated file every test is, by its name where it has one.
    fn test(
        &self,
        src: &Source,
        block: Option<usize>,
        labels: &mut Labels,
        whole_file: bool,
    ) -> Option<Option<usize>> {
        let Some(b) = block else {
            return Some(None);
        };
        if let Some(d) = self.designated_here[b].or(self.designated_within[b]) {
            return Some(Some(d));
        }
        if !whole_file {
            return None;
        }
        let test = self.test_here[b].or(self.test_within[b]);
        Some(
            test.and_then(|t| src.full_name(t))
                .map(|name| labels.id(name)),
        )
    }
}

/// Per block, `marks` of the block itself or else of its nearest enclosing block that has one.
/// Parents come before their children.
fn here(parent: impl Fn(usize) -> Option<usize>, marks: &[Option<usize>]) -> Vec<Option<usize>> {
    let mut out: Vec<Option<usize>> = Vec::with_capacity(marks.len());
    for (i, mark) in marks.iter().enumerate() {
        let inherited = parent(i).and_then(|p| out.get(p).copied().flatten());
        out.push(mark.or(inherited));
    }
    out
}

/// Per block, `marks` of the first block (in order) that is it or inside it. Each block is set
/// once: a walk up stops at a block already set, whose enclosing blocks are set too.
fn within(parent: impl Fn(usize) -> Option<usize>, marks: &[Option<usize>]) -> Vec<Option<usize>> {
    let mut out: Vec<Option<usize>> = vec![None; marks.len()];
    for (i, mark) in marks.iter().enumerate() {
        let Some(mark) = mark else { continue };
        let mut cur = Some(i);
        while let Some(b) = cur {
            if out[b].is_some() {
                break;
            }
            out[b] = Some(*mark);
            cur = parent(b);
        }
    }
    out
}

/// Parents by line span: blocks come in order of declaration, so an open block that ends no
/// earlier than the next one encloses it.
fn set_parents(blocks: &mut [Block]) {
    let mut open: Vec<usize> = Vec::new();
    for i in 0..blocks.len() {
        while let Some(&top) = open.last() {
            if blocks[top].end >= blocks[i].end {
                break;
            }
            open.pop();
        }
        blocks[i].parent = open.last().copied();
        open.push(i);
    }
}
// ---- Reading lines: comments out, string contents blanked ----

/// What a line break leaves open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Code,
    BlockComment,
    /// A string: its quote, whether tripled (Python), whether backslashes escape.
    Str {
        quote: u8,
        triple: bool,
        escapes: bool,
    },
    /// A Rust raw string and the number of its `#`s.
    RawStr {
        hashes: usize,
    },
}

/// Each line as code ([`code_of`]), and whether it starts inside a string or comment that an
/// earlier line opened.
fn code_lines(lang: Lang, lines: &[&str]) -> (Vec<String>, Vec<bool>) {
    if lang == Lang::Other {
        return (
            lines.iter().map(|l| l.to_string()).collect(),
            vec![false; lines.len()],
        );
    }
    let mut open = Open::Code;
    lines
        .iter()
        .map(|l| {
            let continued = open != Open::Code;
            (code_of(lang, l, &mut open), continued)
        })
        .unzip()
}

/// `line` with its comments cut and the insides of its strings and block comments replaced by
/// spaces (quotes kept), so that every byte left stays at its offset.
fn code_of(lang: Lang, line: &str, open: &mut Open) -> String {
    let b = line.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match *open {
            Open::BlockComment => {
                if b[i..].starts_with(b"*/") {
                    out.extend_from_slice(b"  ");
                    i += 2;
                    *open = Open::Code;
                } else {
                    out.push(b' ');
                    i += 1;
                }
            }
            Open::Str {
                quote,
                triple,
                escapes,
            } => {
                if escapes && b[i] == b'\\' {
                    let n = 2.min(b.len() - i);
                    out.extend(std::iter::repeat_n(b' ', n));
                    i += n;
                } else if triple && b[i..].starts_with(&[quote; 3]) {
                    out.extend_from_slice(&[quote; 3]);
                    i += 3;
                    *open = Open::Code;
                } else if !triple && b[i] == quote {
                    out.push(quote);
                    i += 1;
                    *open = Open::Code;
                } else {
                    out.push(b' ');
                    i += 1;
                }
            }
            Open::RawStr { hashes } => {
                let closes = b[i] == b'"'
                    && b.len() - i > hashes
                    && b[i + 1..=i + hashes].iter().all(|&c| c == b'#');
                if closes {
                    out.push(b'"');
                    out.extend(std::iter::repeat_n(b'#', hashes));
                    i += 1 + hashes;
                    *open = Open::Code;
                } else {
                    out.push(b' ');
                    i += 1;
                }
            }
            Open::Code => {
                let c = b[i];
                let line_comment = match lang {
                    Lang::Python => c == b'#',
                    _ => b[i..].starts_with(b"//"),
                };
                if line_comment {
                    break;
                }
                if lang != Lang::Python && b[i..].starts_with(b"/*") {
                    out.extend_from_slice(b"  ");
                    i += 2;
                    *open = Open::BlockComment;
                    continue;
                }
                if lang == Lang::Rust {
                    if let Some(hashes) = raw_string_at(b, i) {
                        // `r`, the hashes and the quote stay.
                        out.extend_from_slice(&b[i..i + 2 + hashes]);
                        i += 2 + hashes;
                        *open = Open::RawStr { hashes };
                        continue;
                    }
                    if c == b'\'' {
                        let n = rust_char_literal(line, i);
                        if n > 0 {
                            out.push(b'\'');
                            out.extend(std::iter::repeat_n(b' ', n - 2));
                            out.push(b'\'');
                            i += n;
                            continue;
                        }
                    }
                }
                let quote = matches!(
                    (lang, c),
                    (Lang::Js | Lang::Go, b'"' | b'\'' | b'`')
                        | (Lang::Python, b'"' | b'\'')
                        | (Lang::Rust, b'"')
                );
                if quote {
                    let triple = lang == Lang::Python && b[i..].starts_with(&[c; 3]);
                    let width = if triple { 3 } else { 1 };
                    out.extend_from_slice(&b[i..i + width]);
                    i += width;
                    *open = Open::Str {
                        quote: c,
                        triple,
                        escapes: !(lang == Lang::Go && c == b'`'),
                    };
                    continue;
                }
                out.push(c);
                i += 1;
            }
        }
    }
    // Only some strings go on past the end of a line.
    if let Open::Str { quote, triple, .. } = *open {
        let multi_line = triple
            || matches!(
                (lang, quote),
                (Lang::Js, b'`') | (Lang::Go, b'`') | (Lang::Rust, b'"')
            );
        if !multi_line {
            *open = Open::Code;
        }
    }
    // Non-ASCII bytes were either copied whole with their character or all blanked.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The number of `#`s of a Rust raw string (`r"`, `r#"`, `br"`) opening at `i`.
fn raw_string_at(b: &[u8], i: usize) -> Option<usize> {
    if b[i] != b'r' {
        return None;
    }
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let starts_token = match i {
        0 => true,
        1 => !ident(b[0]) || b[0] == b'b',
        _ => !ident(b[i - 1]) || (b[i - 1] == b'b' && !ident(b[i - 2])),
    };
    if !starts_token {
        return None;
    }
    let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
    (b.get(i + 1 + hashes) == Some(&b'"')).then_some(hashes)
}

/// The length in bytes of a Rust character literal opening at `i` (`'a'`, `'\n'`, `'"'`), 0 for
/// a lifetime.
fn rust_char_literal(line: &str, i: usize) -> usize {
    let Some(rest) = line.get(i + 1..) else {
        return 0;
    };
    let mut chars = rest.char_indices();
    match chars.next() {
        Some((_, '\\')) => rest
            .char_indices()
            .skip(2)
            .take(10)
            .find(|&(_, c)| c == '\'')
            .map_or(0, |(j, _)| j + 2),
        Some((_, c)) if c != '\'' => match chars.next() {
            Some((j, '\'')) => j + 2,
            _ => 0,
        },
        _ => 0,
    }
}

/// Net `(`, `[`, `{` opened on a line of code.
fn bracket_delta(code: &str) -> i64 {
    code.bytes()
        .map(|c| match c {
            b'(' | b'[' | b'{' => 1,
            b')' | b']' | b'}' => -1,
            _ => 0,
        })
        .sum()
}

fn indent(code: &str) -> usize {
    code.bytes()
        .take_while(|&c| c == b' ' || c == b'\t')
        .count()
}

/// Where a body begins: its line, its column, and whether it is a function's (`fn x() {…}`,
/// `func X() {…}`) rather than a call's (`it("x", () => {…})`).
#[derive(Debug, Clone, Copy)]
struct Opening {
    line: usize,
    col: usize,
    function: bool,
}

/// The last line of each body in `openings` (given in order), where its brackets balance back: a
/// call's when its brackets close, unless another call is chained on (`it.each([…])("x", …)`); a
/// function's when its braces do, or at a `;` before any brace (a declaration without a body).
/// Unbalanced to the end of the file: the last line. One pass over the file for all of them.
fn bracket_ends(code: &[String], openings: &[Opening]) -> Vec<usize> {
    struct Pending {
        opening: usize,
        /// The depth of brackets around where it begins.
        base: i64,
        opened: bool,
        braced: bool,
        function: bool,
    }
    let mut ends = vec![code.len().saturating_sub(1); openings.len()];
    let mut next = 0;
    // Bases never decrease from the bottom up: a body whose surroundings close ends with them.
    let mut pending: Vec<Pending> = Vec::new();
    let mut depth: i64 = 0;
    for (l, text) in code.iter().enumerate() {
        let b = text.as_bytes();
        for i in 0..=b.len() {
            while let Some(o) = openings.get(next) {
                if o.line > l || (o.line == l && o.col > i && i < b.len()) {
                    break;
                }
                pending.push(Pending {
                    opening: next,
                    base: depth,
                    opened: false,
                    braced: false,
                    function: o.function,
                });
                next += 1;
            }
            let Some(&c) = b.get(i) else { break };
            match c {
                b'(' | b'[' | b'{' => {
                    for p in pending.iter_mut().rev() {
                        if p.base != depth {
                            break;
                        }
                        p.opened = true;
                        p.braced |= c == b'{';
                    }
                    depth += 1;
                }
                b')' | b']' | b'}' => {
                    depth -= 1;
                    let chained = matches!(
                        b[i + 1..].iter().find(|c| !c.is_ascii_whitespace()),
                        Some(b'(' | b'.' | b'`')
                    );
                    while let Some(p) = pending.last() {
                        let ends_here = depth < p.base
                            || (depth == p.base
                                && (!p.opened
                                    || (p.function && p.braced)
                                    || (!p.function && !chained)));
                        if !ends_here {
                            break;
                        }
                        ends[p.opening] = l;
                        pending.pop();
                    }
                }
                b';' => {
                    while let Some(p) = pending.last() {
                        if !(p.function && !p.braced && depth <= p.base) {
                            break;
                        }
                        ends[p.opening] = l;
                        pending.pop();
                    }
                }
                _ => {}
            }
        }
    }
    ends
}

/// The string literal opening at `at` on `line` (after spaces), or at the start of the next line
/// when nothing else follows on this one: a test's name.
fn literal_after(text: &[&str], code: &[String], line: usize, at: usize) -> Option<String> {
    let rest = code.get(line)?.get(at..)?;
    let (l, pos) = if rest.trim().is_empty() {
        let l = (line + 1..code.len().min(line + 4)).find(|&l| !code[l].trim().is_empty())?;
        (l, indent(&code[l]))
    } else {
        (line, at + (rest.len() - rest.trim_start().len()))
    };
    let quote = *code[l].as_bytes().get(pos)?;
    if !matches!(quote, b'"' | b'\'' | b'`') {
        return None;
    }
    let quote = char::from(quote);
    let mut name = String::new();
    let mut chars = text.get(l)?.get(pos + 1..)?.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => name.extend(chars.next()),
            c if c == quote => break,
            c => name.push(c),
        }
    }
    Some(name)
}

// ---- Declarations per language ----

static JS_DECL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:^|[^\w$.])((?:[xf]?(?:it|test|describe|suite|context|specify))|bench)((?:\.\w+)*)\s*\(",
    )
    .expect("valid")
});
static PY_DECL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*(?:async\s+)?(def|class)\s+(\w+)").expect("valid"));
static RUST_DECL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(?:fn\s+(\w+)|mod\s+(\w+)\s*\{)").expect("valid"));
/// An attribute that makes a Rust function a test (`#[test]`, `#[tokio::test]`, `#[rstest]`).
static RUST_TEST_ATTRIBUTE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"#\[\s*(?:[\w:]+::)?(?:test|rstest|test_case|proptest)\b").expect("valid")
});
static GO_FUNC: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^func\s+(?:\([^)]*\)\s*)?(\w+)").expect("valid"));
static GO_RUN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b\w+\.Run\s*\(").expect("valid"));

/// Set each block's end from its opening ([`bracket_ends`]); both in order of declaration.
fn set_bracket_ends(code: &[String], blocks: &mut [Block], openings: &[Opening]) {
    for (b, end) in blocks.iter_mut().zip(bracket_ends(code, openings)) {
        b.end = end;
    }
}

fn js_blocks(lang: Lang, text: &[&str], code: &[String]) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut openings = Vec::new();
    for (l, c) in code.iter().enumerate() {
        for caps in JS_DECL.captures_iter(c) {
            let (Some(all), Some(word)) = (caps.get(0), caps.get(1)) else {
                continue;
            };
            // `describe(`, `xdescribe(`, `test.describe(` (Playwright), `suite(`, `context(`.
            let called = caps.get(2).map_or("", |m| m.as_str());
            let groups = |w: &str| word.as_str().ends_with(w) || called.contains(w);
            let kind = if groups("describe") || groups("suite") || groups("context") {
                Kind::Group
            } else {
                Kind::Test
            };
            let name = literal_after(text, code, l, all.end()).map(|n| lang.normalized(&n));
            blocks.push(Block::new(name, kind, l, l, word.start()));
            openings.push(Opening {
                line: l,
                col: word.start(),
                function: false,
            });
        }
    }
    set_bracket_ends(code, &mut blocks, &openings);
    blocks
}

/// Python blocks end where the indentation comes back to their declaration's. Lines inside
/// brackets, or inside a string an earlier line opened, are continuations and do not count.
fn python_blocks(code: &[String], continued: &[bool]) -> Vec<Block> {
    let mut blocks: Vec<Block> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    // The first line of the decorators above the next declaration, and their indentation.
    let mut decorated: Option<(usize, usize)> = None;
    let mut depth: i64 = 0;
    let mut last_code = 0;
    for (l, c) in code.iter().enumerate() {
        let continuation = depth > 0 || continued.get(l).copied().unwrap_or(false);
        depth = (depth + bracket_delta(c)).max(0);
        let t = c.trim_start();
        if t.is_empty() {
            continue;
        }
        if continuation {
            last_code = l;
            continue;
        }
        let indentation = indent(c);
        while let Some(&b) = open.last() {
            if blocks[b].col < indentation {
                break;
            }
            blocks[b].end = last_code;
            open.pop();
        }
        last_code = l;
        if t.starts_with('@') {
            if decorated.is_none_or(|(_, d)| d != indentation) {
                decorated = Some((l, indentation));
            }
            continue;
        }
        if let Some(caps) = PY_DECL.captures(c) {
            let name = caps.get(2).map(|m| m.as_str().to_string());
            let kind = match caps.get(1).map(|m| m.as_str()) {
                Some("class") => Kind::Group,
                _ if name.as_deref().is_some_and(|n| n.starts_with("test")) => Kind::Test,
                _ => Kind::Helper,
            };
            let start = decorated
                .filter(|&(_, d)| d == indentation)
                .map_or(l, |(s, _)| s);
            open.push(blocks.len());
            blocks.push(Block::new(name, kind, start, l, indentation));
        }
        decorated = None;
    }
    for b in open {
        blocks[b].end = last_code;
    }
    blocks
}

fn rust_blocks(code: &[String]) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut openings = Vec::new();
    // The first line of the attributes above the next declaration.
    let mut attributed: Option<usize> = None;
    let mut open_attribute: i64 = 0;
    for (l, c) in code.iter().enumerate() {
        if open_attribute > 0 {
            open_attribute = (open_attribute + bracket_delta(c)).max(0);
            continue;
        }
        if c.trim().is_empty() {
            continue;
        }
        let (open, rest_at) = leading_attributes(c);
        if rest_at > indent(c) {
            attributed.get_or_insert(l);
        }
        if open > 0 {
            open_attribute = open;
            continue;
        }
        let rest = c.get(rest_at..).unwrap_or("");
        let mut declared = false;
        for caps in RUST_DECL.captures_iter(rest) {
            let Some(all) = caps.get(0) else { continue };
            let start = if declared { l } else { attributed.unwrap_or(l) };
            let (name, kind) = match (caps.get(1), caps.get(2)) {
                (Some(f), _) => {
                    let test = code[start..=l]
                        .iter()
                        .any(|a| RUST_TEST_ATTRIBUTE.is_match(a));
                    (f.as_str(), if test { Kind::Test } else { Kind::Helper })
                }
                (None, Some(m)) => (m.as_str(), Kind::Group),
                (None, None) => continue,
            };
            declared = true;
            let col = rest_at + all.start();
            blocks.push(Block::new(Some(name.to_string()), kind, start, l, col));
            openings.push(Opening {
                line: l,
                col,
                function: true,
            });
        }
        if declared || !rest.trim().is_empty() {
            attributed = None;
        }
    }
    set_bracket_ends(code, &mut blocks, &openings);
    blocks
}

/// The attributes (`#[…]`) a line of Rust starts with: the brackets they leave open at the end of
/// the line, and the offset of what follows them.
fn leading_attributes(code: &str) -> (i64, usize) {
    let b = code.as_bytes();
    let mut i = indent(code);
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if !b[i..].starts_with(b"#[") {
            return (0, i);
        }
        let mut depth: i64 = 0;
        i += 1;
        loop {
            let Some(&c) = b.get(i) else {
                return (depth, b.len());
            };
            i += 1;
            match c {
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => {
                    depth -= 1;
                    if depth <= 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
    }
}

fn go_blocks(lang: Lang, text: &[&str], code: &[String]) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut openings = Vec::new();
    for (l, c) in code.iter().enumerate() {
        if let Some(name) = GO_FUNC.captures(c).and_then(|caps| caps.get(1)) {
            let name = name.as_str();
            let test = ["Test", "Benchmark", "Fuzz", "Example"]
                .iter()
                .any(|p| name.starts_with(p));
            let kind = if test { Kind::Test } else { Kind::Helper };
            blocks.push(Block::new(Some(name.to_string()), kind, l, l, 0));
            openings.push(Opening {
                line: l,
                col: 0,
                function: true,
            });
        }
        for m in GO_RUN.find_iter(c) {
            let name = literal_after(text, code, l, m.end()).map(|n| lang.normalized(&n));
            blocks.push(Block::new(name, Kind::Test, l, l, m.start()));
            openings.push(Opening {
                line: l,
                col: m.start(),
                function: false,
            });
        }
    }
    set_bracket_ends(code, &mut blocks, &openings);
    blocks
}

// ---- Skip markers and assertions ----

static JS_SKIP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:it|test|describe|suite|context|specify|bench|this|t)(?:\.\w+)*?\.(?:skip|todo|skipIf|runIf|fails|fixme)\b|\bx(?:it|test|describe|context|specify)\b",
    )
    .expect("valid")
});
static PY_SKIP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"@?\b(?:pytest\.)?mark\.(?:skipif|skip|xfail)\b|\bpytest\.(?:skip|xfail|importorskip)\s*\(|@?\bunittest\.(?:skip\w*|expectedFailure)\b|@(?:skip\w*|expectedFailure)\b|\bself\.skipTest\s*\(",
    )
    .expect("valid")
});
static RUST_SKIP: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"#\[\s*ignore\b").expect("valid"));
static GO_SKIP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b\w+\.Skip(?:Now|f)?\s*\(").expect("valid"));

fn skip_pattern(lang: Lang) -> Option<&'static Regex> {
    match lang {
        Lang::Js => Some(&JS_SKIP),
        Lang::Python => Some(&PY_SKIP),
        Lang::Rust => Some(&RUST_SKIP),
        Lang::Go => Some(&GO_SKIP),
        Lang::Other => None,
    }
}

/// A marker as written, without spaces or its call's `(` (`it.skip`, `t.Skip`, `#[ignore]`).
fn marker_name(found: &str) -> String {
    let mut name: String = found.chars().filter(|c| !c.is_whitespace()).collect();
    if name.ends_with('(') {
        name.pop();
    }
    if name.starts_with("#[") {
        name.push(']');
    }
    name
}

static JS_ASSERT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\bt\.assert\b(?:\.\w+)*|\bexpect\s*\(|\bassert\s*\(|\bassert\.|\.should\b")
        .expect("valid")
});
/// Python counts lines: an assertion is a statement.
static PY_ASSERT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\s*(?:(?:async\s+)?with\s+)?(?:assert\b|self\.assert\w*\s*\(|self\.fail\s*\(|pytest\.(?:raises|warns)\s*\()",
    )
    .expect("valid")
});
static RUST_ASSERT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:debug_|prop_)?assert\w*!|\.unwrap_err\s*\(\s*\)|#\[\s*should_panic\b")
        .expect("valid")
});
static GO_ASSERT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\bt\.(?:Errorf?|Fatalf?|FailNow|Fail)\s*\(|\b(?:require|assert)\.\w+")
        .expect("valid")
});
static ANY_ASSERT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bassert|\bexpect\s*\(|\.should\b").expect("valid"));

fn assertions_on(lang: Lang, code: &str) -> usize {
    match lang {
        Lang::Python => usize::from(PY_ASSERT.is_match(code)),
        Lang::Js => JS_ASSERT.find_iter(code).count(),
        Lang::Rust => RUST_ASSERT.find_iter(code).count(),
        Lang::Go => GO_ASSERT.find_iter(code).count(),
        Lang::Other => ANY_ASSERT.find_iter(code).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` with `from`, which it holds exactly once, replaced by `to`.
    fn edit(text: &str, from: &str, to: &str) -> String {
        assert_eq!(
            text.matches(from).count(),
            1,
            "{from:?} once in the fixture"
        );
        text.replacen(from, to, 1)
    }

    /// The 1-based line of `text` holding `needle`.
    fn line_of(text: &str, needle: &str) -> u32 {
        let at = text.find(needle).expect("in the text");
        u32::try_from(text[..at].matches('\n').count() + 1).expect("small")
    }

    fn removed(test: &str) -> Weakening {
        Weakening::TestRemoved {
            test: test.to_string(),
        }
    }

    fn skipped(test: Option<&str>, line: u32, marker: &str) -> Weakening {
        Weakening::SkipAdded {
            test: test.map(str::to_string),
            line,
            marker: marker.to_string(),
        }
    }

    fn fewer(test: Option<&str>, before: usize, after: usize) -> Weakening {
        Weakening::AssertionsRemoved {
            test: test.map(str::to_string),
            before,
            after,
        }
    }

    type Case = (&'static str, Option<String>, Vec<Weakening>);

    /// Each `(what, after, want)`: the weakenings of `file` from `before` to `after`.
    fn check(file: &str, before: &str, tests: &[&str], cases: Vec<Case>) {
        let tests: Vec<String> = tests.iter().map(|t| t.to_string()).collect();
        for (what, after, want) in cases {
            let found = weakenings(file, before, after.as_deref(), &tests);
            assert!(found.iter().all(|v| v.file == file), "{what}: {found:?}");
            let found: Vec<Weakening> = found.into_iter().map(|v| v.weakening).collect();
            assert_eq!(found, want, "{file} {tests:?}: {what}");
        }
    }

    const JS: &str = r#"import { describe, it, test, expect } from "vitest";
import { add, sub } from "../src/math";

describe("add", () => {
  it("adds two", () => {
    expect(add(1, 1)).toBe(2);
    expect(add(2, 2)).toBe(4);
  });

  it("adds negatives", () => {
    expect(add(-1, -1)).toBe(-2);
  });
});

test("subtracts", () => {
  expect(sub(3, 1)).toBe(2);
  expect(sub(1, 1)).toBe(0);
});
"#;

    #[test]
    fn js_designated_test() {
        let js = |from: &str, to: &str| Some(edit(JS, from, to));
        let designated = Some("add > adds two");
        let deleted = "  it(\"adds two\", () => {\n    expect(add(1, 1)).toBe(2);\n    expect(add(2, 2)).toBe(4);\n  });\n\n";
        let added_test = format!(
            "{JS}\ntest(\"subtracts negatives\", () => {{\n  expect(sub(-1, -1)).toBe(0);\n}});\n"
        );
        check(
            "tests/math.test.ts",
            JS,
            &["add > adds two"],
            vec![
                ("unchanged", Some(JS.to_string()), vec![]),
                (
                    "another test renamed",
                    js("\"adds negatives\"", "\"adds minus\""),
                    vec![],
                ),
                ("deleted", js(deleted, ""), vec![removed("add > adds two")]),
                (
                    "renamed",
                    js("\"adds two\"", "\"adds 2\""),
                    vec![removed("add > adds two")],
                ),
                (
                    "its describe renamed",
                    js("describe(\"add\"", "describe(\"addition\""),
                    vec![removed("add > adds two")],
                ),
                (
                    "it.skip",
                    js("it(\"adds two\"", "it.skip(\"adds two\""),
                    vec![skipped(designated, 5, "it.skip")],
                ),
                (
                    "xit",
                    js("it(\"adds two\"", "xit(\"adds two\""),
                    vec![skipped(designated, 5, "xit")],
                ),
                (
                    "it.todo",
                    js("it(\"adds two\"", "it.todo(\"adds two\""),
                    vec![skipped(designated, 5, "it.todo")],
                ),
                (
                    "describe.skip around it",
                    js("describe(\"add\"", "describe.skip(\"add\""),
                    vec![skipped(designated, 4, "describe.skip")],
                ),
                (
                    "a skip at the top of the file",
                    js(
                        "\"../src/math\";\n",
                        "\"../src/math\";\nconst later = it.skip;\n",
                    ),
                    vec![skipped(None, 3, "it.skip")],
                ),
                (
                    "a skip on a test that is not designated",
                    js("it(\"adds negatives\"", "it.skip(\"adds negatives\""),
                    vec![],
                ),
                (
                    "a skip in a comment",
                    js(
                        "  it(\"adds two\"",
                        "  // it.skip(\"adds two\") hides it\n  it(\"adds two\"",
                    ),
                    vec![],
                ),
                (
                    "a skip in a string",
                    js(
                        "toBe(2);\n    expect(add(2",
                        "toBe(2, \"it.skip(\");\n    expect(add(2",
                    ),
                    vec![],
                ),
                (
                    "an expect removed",
                    js("    expect(add(2, 2)).toBe(4);\n", ""),
                    vec![fewer(designated, 2, 1)],
                ),
                (
                    "an expect commented out",
                    js("    expect(add(2, 2))", "    // expect(add(2, 2))"),
                    vec![fewer(designated, 2, 1)],
                ),
                (
                    "an expect removed from a test that is not designated",
                    js("  expect(sub(1, 1)).toBe(0);\n", ""),
                    vec![],
                ),
                ("a test added", Some(added_test), vec![]),
                (
                    "a skipped test added",
                    Some(format!("{JS}test.skip(\"later\", () => {{}});\n")),
                    vec![],
                ),
                ("the file gone", None, vec![Weakening::FileRemoved]),
            ],
        );
    }

    #[test]
    fn js_whole_file_and_unread_names() {
        let js = |from: &str, to: &str| Some(edit(JS, from, to));
        let appended = format!("{JS}test.skip(\"later\", () => {{}});\n");
        check(
            "tests/math.test.js",
            JS,
            &[],
            vec![
                ("unchanged", Some(JS.to_string()), vec![]),
                (
                    "a skip on any test",
                    js("it(\"adds negatives\"", "it.skip(\"adds negatives\""),
                    vec![skipped(Some("add > adds negatives"), 10, "it.skip")],
                ),
                (
                    "a test deleted",
                    js(
                        "  it(\"adds negatives\", () => {\n    expect(add(-1, -1)).toBe(-2);\n  });\n",
                        "",
                    ),
                    vec![removed("add > adds negatives")],
                ),
                (
                    "an expect removed",
                    js("  expect(sub(1, 1)).toBe(0);\n", ""),
                    vec![fewer(Some("subtracts"), 2, 1)],
                ),
                (
                    "a skipped test added",
                    Some(appended.clone()),
                    vec![skipped(
                        Some("later"),
                        line_of(&appended, "test.skip"),
                        "test.skip",
                    )],
                ),
            ],
        );
        // A name read from no declaration (`it.each` and the like): nothing about it, and the
        // assertions are counted across the file.
        check(
            "tests/math.test.js",
            JS,
            &["add > adds 3 (generated)"],
            vec![
                ("unchanged", Some(JS.to_string()), vec![]),
                (
                    "an expect removed anywhere",
                    js("  expect(sub(1, 1)).toBe(0);\n", ""),
                    vec![fewer(None, 5, 4)],
                ),
                (
                    "an expect added",
                    js("toBe(0);\n", "toBe(0);\n  expect(1).toBe(1);\n"),
                    vec![],
                ),
            ],
        );
    }

    #[test]
    fn js_names_on_their_own_line_and_chained_calls() {
        let before = "describe(\"add\", () => {\n  it(\n    \"adds a name too long for one line\",\n    () => {\n      expect(add(1, 1)).toBe(2);\n      expect(add(2, 2)).toBe(4);\n    },\n  );\n  it.each([1, 2])(\"adds %i to 0\", (n) => {\n    expect(add(n, 0)).toBe(n);\n  });\n});\n";
        let test = "add > adds a name too long for one line";
        check(
            "tests/add.test.mts",
            before,
            &[test],
            vec![
                (
                    "an expect removed from it",
                    Some(edit(before, "      expect(add(2, 2)).toBe(4);\n", "")),
                    vec![fewer(Some(test), 2, 1)],
                ),
                (
                    "an expect removed from the table test after it",
                    Some(edit(before, "    expect(add(n, 0)).toBe(n);\n", "")),
                    vec![],
                ),
                (
                    "renamed",
                    Some(edit(before, "too long", "much too long")),
                    vec![removed(test)],
                ),
            ],
        );
    }

    const PY: &str = r#"import pytest

from calc import add, sub


def test_adds():
    assert add(1, 1) == 2
    assert add(2, 2) == 4


class TestSub:
    def test_subtracts(self):
        assert sub(3, 1) == 2
        with pytest.raises(TypeError):
            sub("a", 1)

    def test_zero(self):
        assert sub(1, 1) == 0
"#;

    #[test]
    fn python_designated_tests() {
        let py = |from: &str, to: &str| Some(edit(PY, from, to));
        let subtracts = Some("TestSub::test_subtracts");
        let added_test = format!("{PY}\n\ndef test_more():\n    assert add(0, 0) == 0\n");
        check(
            "tests/test_calc.py",
            PY,
            &["test_adds", "TestSub::test_subtracts"],
            vec![
                ("unchanged", Some(PY.to_string()), vec![]),
                (
                    "deleted",
                    py(
                        "    def test_subtracts(self):\n        assert sub(3, 1) == 2\n        with pytest.raises(TypeError):\n            sub(\"a\", 1)\n\n",
                        "",
                    ),
                    vec![removed("TestSub::test_subtracts")],
                ),
                (
                    "renamed",
                    py("def test_adds(", "def test_add("),
                    vec![removed("test_adds")],
                ),
                (
                    "its class renamed",
                    py("class TestSub:", "class TestSubtraction:"),
                    vec![removed("TestSub::test_subtracts")],
                ),
                (
                    "a skip decorator",
                    py(
                        "    def test_subtracts",
                        "    @pytest.mark.skip(reason=\"flaky\")\n    def test_subtracts",
                    ),
                    vec![skipped(subtracts, 12, "@pytest.mark.skip")],
                ),
                (
                    "a skipif decorator over lines",
                    py(
                        "def test_adds",
                        "@pytest.mark.skipif(\n    True,\n    reason=\"later\",\n)\ndef test_adds",
                    ),
                    vec![skipped(Some("test_adds"), 6, "@pytest.mark.skipif")],
                ),
                (
                    "xfail on the class",
                    py("class TestSub:", "@pytest.mark.xfail\nclass TestSub:"),
                    vec![skipped(subtracts, 11, "@pytest.mark.xfail")],
                ),
                (
                    "a unittest skip decorator",
                    py("def test_adds", "@unittest.skip(\"later\")\ndef test_adds"),
                    vec![skipped(Some("test_adds"), 6, "@unittest.skip")],
                ),
                (
                    "pytest.skip( in the body",
                    py(
                        "    assert add(1, 1) == 2\n",
                        "    pytest.skip(\"later\")\n    assert add(1, 1) == 2\n",
                    ),
                    vec![skipped(Some("test_adds"), 7, "pytest.skip")],
                ),
                (
                    "a skip on a test that is not designated",
                    py(
                        "    def test_zero",
                        "    @pytest.mark.skip\n    def test_zero",
                    ),
                    vec![],
                ),
                (
                    "a skip in a comment",
                    py(
                        "    def test_subtracts",
                        "    # @pytest.mark.skip\n    def test_subtracts",
                    ),
                    vec![],
                ),
                (
                    "a skip and an assert in a docstring",
                    py(
                        "    assert add(1, 1) == 2\n",
                        "    \"\"\"Not\n    @pytest.mark.skip\n    assert 1\n    \"\"\"\n    assert add(1, 1) == 2\n",
                    ),
                    vec![],
                ),
                (
                    "pytest.raises removed",
                    py(
                        "        with pytest.raises(TypeError):\n            sub(\"a\", 1)\n",
                        "        sub(\"a\", 1)\n",
                    ),
                    vec![fewer(subtracts, 2, 1)],
                ),
                (
                    "an assert removed",
                    py("    assert add(2, 2) == 4\n", ""),
                    vec![fewer(Some("test_adds"), 2, 1)],
                ),
                (
                    "an assert removed from a test that is not designated",
                    py("        assert sub(1, 1) == 0", "        sub(1, 1)"),
                    vec![],
                ),
                ("a test added", Some(added_test), vec![]),
                ("the file gone", None, vec![Weakening::FileRemoved]),
            ],
        );
    }

    const RS: &str = r#"pub fn add(a: u32, b: u32) -> u32 {
    a.checked_add(b).expect("overflow")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(1, 1), 2);
        assert!(add(2, 2) == 4, "{}}}", '}');
    }

    #[test]
    #[should_panic(expected = "overflow")]
    fn overflows() {
        add(u32::MAX, 1);
    }
}
"#;

    #[test]
    fn rust_designated_test() {
        let rs = |from: &str, to: &str| Some(edit(RS, from, to));
        let adds = Some("calc::tests::adds");
        let added_test = edit(
            RS,
            "    #[test]\n    #[should_panic",
            "    #[test]\n    fn adds_zero() {\n        assert_eq!(add(0, 0), 0);\n    }\n\n    #[test]\n    #[should_panic",
        );
        check(
            "src/calc.rs",
            RS,
            &["calc::tests::adds"],
            vec![
                ("unchanged", Some(RS.to_string()), vec![]),
                (
                    "deleted",
                    rs(
                        "    #[test]\n    fn adds() {\n        assert_eq!(add(1, 1), 2);\n        assert!(add(2, 2) == 4, \"{}}}\", '}');\n    }\n\n",
                        "",
                    ),
                    vec![removed("calc::tests::adds")],
                ),
                (
                    "renamed",
                    rs("fn adds()", "fn adds_numbers()"),
                    vec![removed("calc::tests::adds")],
                ),
                (
                    "#[ignore]",
                    rs(
                        "    #[test]\n    fn adds",
                        "    #[test]\n    #[ignore = \"slow\"]\n    fn adds",
                    ),
                    vec![skipped(adds, 10, "#[ignore]")],
                ),
                (
                    "#[ignore] on a test that is not designated",
                    rs("    #[should_panic", "    #[ignore]\n    #[should_panic"),
                    vec![],
                ),
                (
                    "#[ignore] in a comment",
                    rs(
                        "    #[test]\n    fn adds",
                        "    #[test]\n    // #[ignore]\n    fn adds",
                    ),
                    vec![],
                ),
                (
                    "an assert removed",
                    rs("        assert!(add(2, 2) == 4, \"{}}}\", '}');\n", ""),
                    vec![fewer(adds, 2, 1)],
                ),
                (
                    "should_panic removed from a test that is not designated",
                    rs("    #[should_panic(expected = \"overflow\")]\n", ""),
                    vec![],
                ),
                ("a test added", Some(added_test), vec![]),
                ("the file gone", None, vec![Weakening::FileRemoved]),
            ],
        );
        check(
            "src/calc.rs",
            RS,
            &[],
            vec![
                (
                    "should_panic removed",
                    rs("    #[should_panic(expected = \"overflow\")]\n", ""),
                    vec![fewer(Some("tests::overflows"), 1, 0)],
                ),
                (
                    "a test deleted",
                    rs(
                        "    #[test]\n    #[should_panic(expected = \"overflow\")]\n    fn overflows() {\n        add(u32::MAX, 1);\n    }\n",
                        "",
                    ),
                    vec![removed("tests::overflows")],
                ),
            ],
        );
    }

    const GO: &str = r#"package calc

import "testing"

func TestAdd(t *testing.T) {
    if add(1, 1) != 2 {
        t.Errorf("add(1, 1) = %d", add(1, 1))
    }
    t.Run("negative numbers", func(t *testing.T) {
        if add(-1, -1) != -2 {
            t.Fatal("negative")
        }
    })
}

func TestSub(t *testing.T) {
    if sub(3, 1) != 2 {
        t.Error("sub")
    }
}
"#;

    #[test]
    fn go_designated_subtest() {
        let go = |from: &str, to: &str| Some(edit(GO, from, to));
        let negative = Some("TestAdd/negative_numbers");
        let added_test = format!(
            "{GO}\nfunc TestMul(t *testing.T) {{\n    if mul(2, 2) != 4 {{\n        t.Fatal(\"mul\")\n    }}\n}}\n"
        );
        check(
            "calc_test.go",
            GO,
            &["TestAdd/negative_numbers"],
            vec![
                ("unchanged", Some(GO.to_string()), vec![]),
                (
                    "deleted",
                    go(
                        "    t.Run(\"negative numbers\", func(t *testing.T) {\n        if add(-1, -1) != -2 {\n            t.Fatal(\"negative\")\n        }\n    })\n",
                        "",
                    ),
                    vec![removed("TestAdd/negative_numbers")],
                ),
                (
                    "renamed",
                    go("\"negative numbers\"", "\"negatives\""),
                    vec![removed("TestAdd/negative_numbers")],
                ),
                (
                    "its parent renamed",
                    go("func TestAdd(", "func TestAddition("),
                    vec![removed("TestAdd/negative_numbers")],
                ),
                (
                    "t.Skip( in it",
                    go(
                        "        if add(-1, -1)",
                        "        t.Skip(\"later\")\n        if add(-1, -1)",
                    ),
                    vec![skipped(negative, 10, "t.Skip")],
                ),
                (
                    "t.SkipNow( in its parent",
                    go(
                        "func TestAdd(t *testing.T) {\n",
                        "func TestAdd(t *testing.T) {\n    t.SkipNow()\n",
                    ),
                    vec![skipped(negative, 6, "t.SkipNow")],
                ),
                (
                    "a skip in a test that is not designated",
                    go("    if sub(3, 1)", "    t.Skip()\n    if sub(3, 1)"),
                    vec![],
                ),
                (
                    "a skip in a comment",
                    go(
                        "        if add(-1, -1)",
                        "        // t.Skip(\"later\")\n        if add(-1, -1)",
                    ),
                    vec![],
                ),
                (
                    "t.Fatal removed",
                    go("            t.Fatal(\"negative\")\n", ""),
                    vec![fewer(negative, 1, 0)],
                ),
                (
                    "t.Error removed from a test that is not designated",
                    go("        t.Error(\"sub\")\n", ""),
                    vec![],
                ),
                ("a test added", Some(added_test), vec![]),
                ("the file gone", None, vec![Weakening::FileRemoved]),
            ],
        );
    }

    #[test]
    fn other_files_count_assertions_across_the_file() {
        let rb = "describe 'add' do\n  it 'adds' do\n    expect(add(1, 1)).to eq(2)\n    expect(add(2, 2)).to eq(4)\n  end\nend\n";
        check(
            "spec/add_spec.rb",
            rb,
            &["add adds"],
            vec![
                ("unchanged", Some(rb.to_string()), vec![]),
                (
                    "an expect removed",
                    Some(edit(rb, "    expect(add(2, 2)).to eq(4)\n", "")),
                    vec![fewer(None, 2, 1)],
                ),
                (
                    "an expect added",
                    Some(edit(
                        rb,
                        "  end\n",
                        "    expect(add(0, 0)).to eq(0)\n  end\n",
                    )),
                    vec![],
                ),
                ("the file gone", None, vec![Weakening::FileRemoved]),
            ],
        );
    }

    #[test]
    fn messages_name_the_file_the_test_and_the_change() {
        let v = |weakening| Violation {
            file: "tests/math.test.ts".to_string(),
            weakening,
        };
        let cases = [
            (
                v(skipped(Some("add > adds two"), 12, "it.skip")),
                "tests/math.test.ts: the designated test `add > adds two` is skipped at line 12 (`it.skip`)",
            ),
            (
                v(removed("add > adds two")),
                "tests/math.test.ts: the designated test `add > adds two` is no longer in the file (deleted or renamed)",
            ),
            (
                v(fewer(Some("add > adds two"), 2, 1)),
                "tests/math.test.ts: the designated test `add > adds two` has 1 assertion where it had 2 assertions at the test designer's commit",
            ),
            (
                v(fewer(None, 5, 3)),
                "tests/math.test.ts: the file has 3 assertions where it had 5 assertions at the test designer's commit",
            ),
            (
                v(Weakening::FileRemoved),
                "tests/math.test.ts: the designated test file is gone at the head (deleted or renamed)",
            ),
        ];
        for (violation, want) in cases {
            assert_eq!(violation.message(), want);
        }
        assert!(
            v(skipped(None, 3, "it.skip"))
                .message()
                .contains("a skip was added at line 3 (`it.skip`)")
        );
        let json = serde_json::to_value(v(skipped(Some("t"), 3, "xit"))).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({
                "file": "tests/math.test.ts",
                "weakening": { "kind": "skip-added", "test": "t", "line": 3, "marker": "xit" }
            })
        );
    }

    /// Text made of pieces of test syntax, unbalanced brackets and quotes, any characters, and
    /// now and then a very long line.
    fn arbitrary_text(rng: &mut fastrand::Rng) -> String {
        const PIECES: &[&str] = &[
            "it(",
            "test(\"",
            "describe.skip(",
            "xit(",
            "it.each([",
            "def test_",
            "class Test",
            "@pytest.mark.skip",
            "@",
            "fn ",
            "mod m {",
            "#[test]",
            "#[ignore",
            "#[",
            "func Test",
            "t.Run(\"",
            "t.Skip(",
            "expect(",
            "assert ",
            "assert_eq!(",
            "t.Fatal(",
            "{",
            "}",
            "(",
            ")",
            "[",
            "]",
            "\"",
            "'",
            "`",
            "\"\"\"",
            "'''",
            "r#\"",
            "\"#",
            "/*",
            "*/",
            "//",
            "#",
            "\\",
            "\n",
            "\n    ",
            "\t",
            " > ",
            "::",
            "/",
            ".",
            "é",
            "\u{1F600}",
            "\r\n",
            ";",
        ];
        let mut text = String::new();
        let long_line_at = rng.usize(0..1500);
        for i in 0..rng.usize(0..150) {
            let piece = PIECES[rng.usize(0..PIECES.len())];
            let line = piece.replace('\n', " ");
            if i == long_line_at {
                text.push_str(&line.repeat(20_000 / line.len().max(1)));
            }
            match rng.u8(0..20) {
                0 | 1 => text.push_str(&line.repeat(rng.usize(0..200))),
                2..=5 => text.push(rng.char(..)),
                _ => text.push_str(piece),
            }
        }
        text
    }

    #[test]
    fn arbitrary_text_does_not_panic() {
        let mut rng = fastrand::Rng::with_seed(0x5eed);
        let files = [
            "a.test.ts",
            "test_a.py",
            "a.rs",
            "a_test.go",
            "a.rb",
            "dir.d/noext",
        ];
        for _ in 0..300 {
            let before = arbitrary_text(&mut rng);
            // The head: the same text with a piece cut out and another spliced in, or new text.
            let after = if rng.bool() {
                let chars: Vec<char> = before.chars().collect();
                let a = rng.usize(0..=chars.len());
                let b = rng.usize(a..=chars.len());
                let mut after: String = chars[..a].iter().collect();
                after.push_str(&arbitrary_text(&mut rng));
                after.extend(&chars[b..]);
                after
            } else {
                arbitrary_text(&mut rng)
            };
            let names: Vec<String> = (0..rng.usize(0..4))
                .map(|_| arbitrary_text(&mut rng).chars().take(40).collect())
                .chain([
                    "a > b".to_string(),
                    "T::test_x[1-2]".to_string(),
                    "TestA/b c".to_string(),
                ])
                .collect();
            for file in files {
                for tests in [&names[..], &[]] {
                    let found = weakenings(file, &before, Some(&after), tests);
                    for v in &found {
                        let _ = v.message();
                    }
                    assert!(weakenings(file, &before, Some(&before), tests).is_empty());
                    assert_eq!(weakenings(file, &before, None, tests).len(), 1);
                }
            }
        }
    }
}
