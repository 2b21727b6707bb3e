//! Bodies and comments as GitHub renders them: Markdown (tables, task lists, strikethrough) with
//! the part of HTML GitHub keeps that supervisor writes — `<details>`, `<summary>`, `<sub>`, … —
//! made elements, and any other raw HTML shown as text. Comments are untrusted: a kept tag is
//! written anew (bare, `open` the one attribute kept, on `<details>`), an element opens only where
//! the browser would not close something around it, and whatever a comment opens closes inside the
//! comment, so nothing it writes reaches past it. Links and images go only to web, mail or
//! relative addresses.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd, html};

use super::escape;

/// What may open where: the content an element holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Content {
    /// Blocks and text (a comment's top, `<details>`, `<blockquote>`, a list item).
    Flow,
    /// Text only (a paragraph, `<summary>`, `<b>`, a table cell, a heading).
    Phrasing,
    /// List items (`<ul>`, `<ol>`).
    List,
    /// Nothing of raw HTML (an image's text, a table's rows, code).
    Opaque,
}

/// An element comments may write: where it may open, and what it holds (`None`: void).
struct Element {
    name: &'static str,
    fits: &'static [Content],
    holds: Option<Content>,
}

const BLOCK: &[Content] = &[Content::Flow];
const INLINE: &[Content] = &[Content::Flow, Content::Phrasing];

const fn inline(name: &'static str) -> Element {
    Element {
        name,
        fits: INLINE,
        holds: Some(Content::Phrasing),
    }
}

const fn block(name: &'static str, holds: Option<Content>) -> Element {
    Element {
        name,
        fits: BLOCK,
        holds,
    }
}

/// The elements kept (GitHub keeps more; these are what supervisor and people write in comments).
const ELEMENTS: &[Element] = &[
    block("details", Some(Content::Flow)),
    block("summary", Some(Content::Phrasing)),
    block("p", Some(Content::Phrasing)),
    block("blockquote", Some(Content::Flow)),
    block("ul", Some(Content::List)),
    block("ol", Some(Content::List)),
    block("hr", None),
    Element {
        name: "li",
        fits: &[Content::List],
        holds: Some(Content::Flow),
    },
    Element {
        name: "br",
        fits: INLINE,
        holds: None,
    },
    inline("sub"),
    inline("sup"),
    inline("b"),
    inline("i"),
    inline("em"),
    inline("strong"),
    inline("code"),
    inline("kbd"),
    inline("s"),
    inline("del"),
    inline("ins"),
];

/// An element open in the output: one of the Markdown's, or one a raw tag opened.
#[derive(Debug)]
enum Open {
    Markdown(Content),
    Raw(&'static str, Content),
}

impl Open {
    fn holds(&self) -> Content {
        match self {
            Open::Markdown(c) | Open::Raw(_, c) => *c,
        }
    }
}

/// A tag read from raw HTML.
struct RawTag {
    name: String,
    closing: bool,
    /// It has an `open` attribute.
    open: bool,
    len: usize,
}

/// The elements open while a comment is written, and the raw HTML made safe in their place.
#[derive(Default)]
struct Writer {
    open: Vec<Open>,
}

impl Writer {
    fn here(&self) -> Content {
        self.open.last().map_or(Content::Flow, Open::holds)
    }

    /// Close the open elements from `at` up, writing the end tags of the raw ones.
    fn close_to(&mut self, at: usize, out: &mut String) {
        while self.open.len() > at {
            if let Some(Open::Raw(name, _)) = self.open.pop() {
                out.push_str("</");
                out.push_str(name);
                out.push('>');
            }
        }
    }

    /// Where the elements raw tags opened inside the innermost Markdown element start.
    fn raw_start(&self) -> usize {
        self.open
            .iter()
            .rposition(|o| matches!(o, Open::Markdown(_)))
            .map_or(0, |i| i + 1)
    }

    /// A Markdown block starts: the raw text-level elements open around it close first, as a
    /// browser would close them (a paragraph's, a `<summary>`'s, a `<b>`'s).
    fn block_starts(&mut self, out: &mut String) {
        let from = self.raw_start();
        let keep = self.open[from..]
            .iter()
            .position(|o| !matches!(o.holds(), Content::Flow | Content::List))
            .map_or(self.open.len(), |i| from + i);
        self.close_to(keep, out);
    }

    /// A Markdown element ends: what raw tags opened inside it closes with it.
    fn markdown_ends(&mut self, out: &mut String) {
        let from = self.raw_start();
        self.close_to(from, out);
        self.open.pop();
    }

    /// Raw HTML as safe HTML: kept tags written anew, comments hidden, character references kept,
    /// everything else as text.
    fn raw(&mut self, raw: &str) -> String {
        let mut out = String::new();
        let mut rest = raw;
        while let Some(at) = rest.find(['<', '&']) {
            out.push_str(&escape(&rest[..at]));
            rest = &rest[at..];
            let taken = if rest.starts_with('&') {
                char_ref(rest).inspect(|&n| out.push_str(&rest[..n]))
            } else if let Some(n) = comment(rest) {
                Some(n)
            } else if let Some(tag) = parse_tag(rest) {
                self.tag(&tag, &rest[..tag.len], &mut out);
                Some(tag.len)
            } else {
                None
            };
            let n = taken.unwrap_or_else(|| {
                out.push_str(&escape(&rest[..1]));
                1
            });
            rest = &rest[n..];
        }
        out.push_str(&escape(rest));
        out
    }

    fn tag(&mut self, tag: &RawTag, text: &str, out: &mut String) {
        let Some(element) = ELEMENTS.iter().find(|e| e.name == tag.name) else {
            return out.push_str(&escape(text));
        };
        if tag.closing {
            // It closes the innermost such element a raw tag opened within the Markdown around.
            let from = self.raw_start();
            let open = self.open[from..]
                .iter()
                .rposition(|o| matches!(o, Open::Raw(name, _) if *name == element.name));
            match open {
                Some(at) => self.close_to(from + at, out),
                None => out.push_str(&escape(text)),
            }
            return;
        }
        if !element.fits.contains(&self.here()) {
            return out.push_str(&escape(text));
        }
        out.push('<');
        out.push_str(element.name);
        if tag.open && element.name == "details" {
            out.push_str(" open");
        }
        out.push('>');
        if let Some(holds) = element.holds {
            self.open.push(Open::Raw(element.name, holds));
        }
    }
}

/// The length of the comment `s` starts with, when it is one (`<!-- … -->`).
fn comment(s: &str) -> Option<usize> {
    let body = s.strip_prefix("<!--")?;
    body.find("-->").map(|end| 4 + end + 3)
}

/// The length of the character reference `s` starts with (`&amp;`, `&#60;`, `&#x3c;`).
fn char_ref(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let (start, ok): (usize, fn(&u8) -> bool) = match (b.get(1), b.get(2)) {
        (Some(b'#'), Some(b'x' | b'X')) => (3, u8::is_ascii_hexdigit),
        (Some(b'#'), _) => (2, u8::is_ascii_digit),
        _ => (1, u8::is_ascii_alphanumeric),
    };
    let n = b[start..].iter().take_while(|c| ok(c)).count();
    (n > 0 && n <= 32 && b.get(start + n) == Some(&b';')).then_some(start + n + 1)
}

/// The tag `s` starts with (`<name attr="v" …>` or `</name>`), when it is a whole one.
fn parse_tag(s: &str) -> Option<RawTag> {
    let b = s.as_bytes();
    let is_space = |i: usize| b.get(i).is_some_and(u8::is_ascii_whitespace);
    let closing = b.get(1) == Some(&b'/');
    let start = if closing { 2 } else { 1 };
    if !b.get(start).is_some_and(u8::is_ascii_alphabetic) {
        return None;
    }
    let mut i = start;
    while b
        .get(i)
        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'-')
    {
        i += 1;
    }
    let name = s[start..i].to_ascii_lowercase();
    let mut open = false;
    loop {
        let spaced = i;
        while is_space(i) {
            i += 1;
        }
        match b.get(i)? {
            b'>' => i += 1,
            b'/' if b.get(i + 1) == Some(&b'>') => i += 2,
            // Attributes are set apart by white space.
            _ if i == spaced => return None,
            _ => {
                let at = i;
                while b
                    .get(i)
                    .is_some_and(|c| !c.is_ascii_whitespace() && !b"/>=\"'<`".contains(c))
                {
                    i += 1;
                }
                if i == at {
                    return None;
                }
                open |= s[at..i].eq_ignore_ascii_case("open");
                let mut j = i;
                while is_space(j) {
                    j += 1;
                }
                if b.get(j) == Some(&b'=') {
                    j += 1;
                    while is_space(j) {
                        j += 1;
                    }
                    match *b.get(j)? {
                        q @ (b'"' | b'\'') => j += 1 + s[j + 1..].find(char::from(q))? + 1,
                        _ => {
                            let v = j;
                            while b.get(j).is_some_and(|c| {
                                !c.is_ascii_whitespace() && !b"\"'=<>`".contains(c)
                            }) {
                                j += 1;
                            }
                            if j == v {
                                return None;
                            }
                        }
                    }
                    i = j;
                }
                continue;
            }
        }
        return Some(RawTag {
            name,
            closing,
            open,
            len: i,
        });
    }
}

/// What raw HTML may open inside a Markdown element.
fn holds(tag: &Tag<'_>) -> Content {
    match tag {
        Tag::Paragraph
        | Tag::Heading { .. }
        | Tag::TableCell
        | Tag::Emphasis
        | Tag::Strong
        | Tag::Strikethrough
        | Tag::Link { .. } => Content::Phrasing,
        Tag::BlockQuote(_) | Tag::Item | Tag::FootnoteDefinition(_) => Content::Flow,
        Tag::List(_) => Content::List,
        _ => Content::Opaque,
    }
}

/// A Markdown element a browser closes an open paragraph for.
fn is_block(tag: &Tag<'_>) -> bool {
    matches!(
        tag,
        Tag::Paragraph
            | Tag::Heading { .. }
            | Tag::BlockQuote(_)
            | Tag::CodeBlock(_)
            | Tag::List(_)
            | Tag::Item
            | Tag::Table(_)
            | Tag::FootnoteDefinition(_)
    )
}

/// Markdown as HTML, as GitHub renders a comment (see the module's description).
pub(crate) fn markdown(text: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS | Options::ENABLE_STRIKETHROUGH;
    let mut writer = Writer::default();
    let mut events: Vec<Event<'_>> = Vec::new();
    let html = |events: &mut Vec<Event<'_>>, text: String| {
        if !text.is_empty() {
            events.push(Event::Html(text.into()));
        }
    };
    // The lines of the HTML block being read: a block is made safe whole (a comment may span lines).
    let mut block: Option<String> = None;
    // Inside an image, whose text becomes its `alt`: raw HTML there is text.
    let mut in_image = 0usize;
    for event in Parser::new_ext(text, options) {
        match event {
            Event::Start(Tag::HtmlBlock) => block = Some(String::new()),
            Event::End(TagEnd::HtmlBlock) => {
                let raw = block.take().unwrap_or_default();
                html(&mut events, writer.raw(&raw));
            }
            Event::Html(raw) | Event::InlineHtml(raw) => match block.as_mut() {
                Some(lines) => lines.push_str(&raw),
                None if in_image > 0 => events.push(Event::Text(raw)),
                None => html(&mut events, writer.raw(&raw)),
            },
            Event::Start(tag) => {
                if is_block(&tag) {
                    let mut closed = String::new();
                    writer.block_starts(&mut closed);
                    html(&mut events, closed);
                }
                writer.open.push(Open::Markdown(holds(&tag)));
                in_image += usize::from(matches!(tag, Tag::Image { .. }));
                events.push(Event::Start(safe_links(tag)));
            }
            Event::End(end) => {
                let mut closed = String::new();
                writer.markdown_ends(&mut closed);
                html(&mut events, closed);
                in_image -= usize::from(end == TagEnd::Image);
                events.push(Event::End(end));
            }
            Event::Rule => {
                let mut closed = String::new();
                writer.block_starts(&mut closed);
                html(&mut events, closed);
                events.push(Event::Rule);
            }
            other => events.push(other),
        }
    }
    let mut closed = String::new();
    writer.close_to(0, &mut closed);
    html(&mut events, closed);
    let mut out = String::new();
    html::push_html(&mut out, events.into_iter());
    out
}

/// A link or image whose target is not http(s), mail or relative goes nowhere.
fn safe_links(tag: Tag<'_>) -> Tag<'_> {
    match tag {
        Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        } => Tag::Link {
            link_type,
            dest_url: safe_url(dest_url),
            title,
            id,
        },
        Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        } => Tag::Image {
            link_type,
            dest_url: safe_url(dest_url),
            title,
            id,
        },
        other => other,
    }
}

fn safe_url(url: CowStr<'_>) -> CowStr<'_> {
    let lower = url.trim().to_ascii_lowercase();
    let scheme = lower.split_once(':').map(|(s, _)| s);
    match scheme {
        // No scheme (relative), or one of the web's: kept. A colon after a slash is a path.
        None | Some("http" | "https" | "mailto") => url,
        Some(s) if s.contains(['/', '?', '#']) => url,
        Some(_) => CowStr::Borrowed("#"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn raw_html_and_script_links_are_shown_as_text() {
        let out = markdown(
            "Hi <script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n[x](javascript:alert(1)) [ok](https://example.com/a) [rel](/a/b)",
        );
        assert!(!out.contains("<script"), "{out}");
        assert!(!out.contains("<img"), "{out}");
        assert!(out.contains("&lt;script&gt;"), "{out}");
        assert!(out.contains("href=\"#\""), "{out}");
        assert!(!out.contains("javascript:"), "{out}");
        assert!(out.contains("href=\"https://example.com/a\""), "{out}");
        assert!(out.contains("href=\"/a/b\""), "{out}");
        // Hidden markers stay hidden; a comment that closes early does not hide what follows.
        let out = markdown("Done.\n\n<!-- supervisor:run=r1 stage=Research -->\n");
        assert!(!out.contains("supervisor:run"), "{out}");
        assert!(!markdown("<!--->\n").contains("<!--"));
        let out = markdown("<!-- a --><script>x</script> -->\n");
        assert!(
            out.contains("&lt;script&gt;") && !out.contains("<script"),
            "{out}"
        );
    }

    #[test]
    fn markdown_renders_tables_task_lists_and_headings() {
        let out = markdown("## Plan\n\n- [x] done\n\n| a | b |\n|---|---|\n| 1 | 2 |\n");
        assert!(out.contains("<h2>Plan</h2>"), "{out}");
        assert!(out.contains("type=\"checkbox\""), "{out}");
        assert!(out.contains("<td>1</td>"), "{out}");
    }

    #[test]
    fn the_html_supervisor_writes_is_rendered() {
        // A stage comment's footer.
        let out = markdown(
            "## Research Findings\n\nAll good.\n\n<sub>supervisor · researcher · 2m 13s · 45.2k tokens</sub>\n<!-- supervisor:run=1 stage=Research -->",
        );
        assert!(
            out.contains("<p><sub>supervisor · researcher · 2m 13s · 45.2k tokens</sub>"),
            "{out}"
        );
        assert!(!out.contains("supervisor:run"), "{out}");
        // A gate comment's collapsed table, with Markdown inside.
        let out = markdown(
            "### Gates\n\n<details><summary>All gates</summary>\n\n| gate | status |\n|---|---|\n| `lint` | **passed** |\n\n</details>\n\nAfter.",
        );
        let details = out
            .find("<details><summary>All gates</summary>")
            .expect(&out);
        let table = out.find("<td><code>lint</code></td>").expect(&out);
        let closed = out.find("</details>").expect(&out);
        let after = out.find("<p>After.</p>").expect(&out);
        assert!(details < table && table < closed && closed < after, "{out}");
        // The rest of the list, in any case, and character references.
        let out = markdown(
            "<DETAILS open><Summary>s</Summary>\n<p>a<br>b<br/><kbd>Ctrl</kbd> <code>x</code> <b>b</b> <i>i</i> <em>e</em> <strong>s</strong> <sup>2</sup> &amp; &#60;</p>\n<hr>\n<blockquote>q</blockquote>\n<ul><li>one</li></ul><ol><li>two</li></ol>\n</details>",
        );
        assert_eq!(
            out,
            "<details open><summary>s</summary>\n<p>a<br>b<br><kbd>Ctrl</kbd> <code>x</code> <b>b</b> <i>i</i> <em>e</em> <strong>s</strong> <sup>2</sup> &amp; &#60;</p>\n<hr>\n<blockquote>q</blockquote>\n<ul><li>one</li></ul><ol><li>two</li></ol>\n</details>"
        );
    }

    #[test]
    fn hostile_html_stays_inert_and_inside_the_comment() {
        let cases = [
            // Attributes are dropped, `open` on <details> kept.
            (
                "<details open onclick=\"alert(1)\" style=\"position:fixed\"><summary onmouseover=alert(1)>s</summary>x</details>",
                "<details open><summary>s</summary>x</details>",
            ),
            ("<b title=\"a>b\" onclick='x'>x</b>", "<p><b>x</b></p>\n"),
            // Tags not kept are text, whatever their case.
            (
                "<ScRipt>alert(1)</sCrIpT>",
                "&lt;ScRipt&gt;alert(1)&lt;/sCrIpT&gt;",
            ),
            (
                "<a href=\"javascript:alert(1)\">x</a>",
                "<p>&lt;a href=&quot;javascript:alert(1)&quot;&gt;x&lt;/a&gt;</p>\n",
            ),
            (
                "<img src=x onerror=alert(1)>",
                "&lt;img src=x onerror=alert(1)&gt;",
            ),
            // A tag written to close the page's layout is text.
            (
                "</article></div><footer>",
                "&lt;/article&gt;&lt;/div&gt;&lt;footer&gt;",
            ),
            // What a comment opens closes inside it.
            (
                "<details><summary>s",
                "<details><summary>s</summary></details>",
            ),
            ("<b>bold\n\nnext", "<p><b>bold</b></p>\n<p>next</p>\n"),
            // A close without its open, a block inside text, an item outside a list: text.
            ("</details>", "&lt;/details&gt;"),
            (
                "a <details>b</details>",
                "<p>a &lt;details&gt;b&lt;/details&gt;</p>\n",
            ),
            ("<p>a<p>b</p></p>", "<p>a&lt;p&gt;b</p>&lt;/p&gt;"),
            ("<li>x</li>", "&lt;li&gt;x&lt;/li&gt;"),
            // Half a tag, or one with no space between its attributes, is text.
            ("<b/onclick=x>y", "<p>&lt;b/onclick=x&gt;y</p>\n"),
            ("<details open", "&lt;details open"),
            // Raw HTML in an image's text is text.
            (
                "![<b>x</b>](https://e.org/i.png)",
                "<p><img src=\"https://e.org/i.png\" alt=\"&lt;b&gt;x&lt;/b&gt;\" /></p>\n",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(markdown(input), expected, "{input}");
        }
    }

    /// The attributes of a tag Markdown wrote (`name="value"`, or a bare name).
    fn attributes(inner: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut rest = inner.split_once(' ').map_or("", |(_, r)| r).trim();
        while !rest.is_empty() {
            let end = rest.find([' ', '=']).unwrap_or(rest.len());
            let name = rest[..end].to_string();
            rest = &rest[end..];
            let mut value = String::new();
            if let Some(v) = rest.strip_prefix("=\"") {
                let close = v.find('"').expect("a closed value");
                value = v[..close].to_string();
                rest = &v[close + 1..];
            }
            out.push((name, value));
            rest = rest.trim_start();
        }
        out
    }

    /// The tags of `html` (whose `<` always starts one) are well nested, of the elements Markdown
    /// writes and the kept ones, with no attribute a comment could use to run anything.
    fn assert_safe(html: &str) {
        const VOID: &[&str] = &["br", "hr", "img", "input"];
        const KNOWN: &[&str] = &[
            "p",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "ul",
            "ol",
            "li",
            "blockquote",
            "pre",
            "code",
            "em",
            "strong",
            "del",
            "a",
            "img",
            "table",
            "thead",
            "tbody",
            "tr",
            "th",
            "td",
            "input",
            "hr",
            "br",
            "details",
            "summary",
            "sub",
            "sup",
            "b",
            "i",
            "kbd",
            "s",
            "ins",
        ];
        let mut stack: Vec<String> = Vec::new();
        let mut rest = html;
        while let Some(at) = rest.find('<') {
            rest = &rest[at..];
            let tag = parse_tag(rest).unwrap_or_else(|| panic!("not a tag at {rest}: {html}"));
            assert!(KNOWN.contains(&tag.name.as_str()), "{}: {html}", tag.name);
            let inner = rest[1..tag.len - 1].trim_end_matches('/').trim_end();
            for (name, value) in attributes(inner) {
                let fine = match name.as_str() {
                    "href" | "src" => {
                        let v = value.to_ascii_lowercase();
                        !v.starts_with("javascript:") && !v.starts_with("data:")
                    }
                    "style" => value.starts_with("text-align: "),
                    "alt" | "title" | "type" | "checked" | "disabled" | "start" | "open" => true,
                    "class" => value.starts_with("language-"),
                    _ => false,
                };
                assert!(fine, "{name}={value:?} in <{inner}>: {html}");
            }
            if tag.closing {
                assert_eq!(stack.pop().as_deref(), Some(tag.name.as_str()), "{html}");
            } else if !VOID.contains(&tag.name.as_str()) {
                stack.push(tag.name);
            }
            rest = &rest[tag.len..];
        }
        assert!(stack.is_empty(), "left open: {stack:?}: {html}");
    }

    proptest! {
        #[test]
        fn any_mix_of_markdown_and_tags_renders_well_nested_and_inert(
            parts in prop::collection::vec(prop::sample::select(vec![
                "<details>", "</details>", "<details open onclick=alert(1)>", "<summary>",
                "</summary>", "<sub>", "</sub>", "<b>", "</b>", "<p>", "</p>", "<ul>", "</ul>",
                "<li>", "</li>", "<br>", "<hr>", "<blockquote>", "</blockquote>", "<code>",
                "</code>", "<ScRipt>", "</article>", "<img src=x onerror=alert(1)>",
                "<a href=javascript:alert(1)>", "<!--", "-->", "text", " ", "\n", "\n\n", "- ",
                "1. ", "> ", "*", "**", "`", "```\n", "# ", "| a | b |\n|:--|--:|\n| c | d |\n",
                "[x](javascript:alert(1))", "![i](data:x)", "&amp;", "&", "<", ">", "\"",
            ]), 0..40)
        ) {
            assert_safe(&markdown(&parts.concat()));
        }
    }
}
