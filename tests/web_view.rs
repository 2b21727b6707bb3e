//! The sandbox's web view as a person sees it: `supervisor demo --serve` runs the pipeline (stage
//! comments with `<sub>` footers, gate comments with `<details>` tables, a pull request, a review
//! and its revision), a hostile comment is added, and the pages are opened in headless Chromium at
//! 1280 × 900. What is checked is what the browser made of them: elements and their geometry,
//! computed styles, whether any script ran, and screenshots (kept under the target's temporary
//! directory, `web_view/`).

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "support/browse.rs"]
mod browse;
#[path = "support/chromium.rs"]
mod chromium;
use browse::{browse, post};
use chromium::{Browser, Image};

/// `supervisor demo --serve`, run once for the tests of this file and shared by them, with a
/// hostile comment added to its issue and its pull request.
struct Demo {
    issue: String,
    pull: String,
    board: String,
    /// `http://127.0.0.1:PORT`.
    base: String,
    /// The pull request's number.
    pr: u64,
    /// Its bare repository, GitHub's copy.
    remote: PathBuf,
    /// What it printed on stderr so far.
    log: Arc<Mutex<String>>,
}

static DEMO: OnceLock<Demo> = OnceLock::new();

/// The shared demo, started by the first test that asks.
fn demo() -> &'static Demo {
    DEMO.get_or_init(Demo::serve)
}

impl Demo {
    /// Run the demo in a new directory and wait (bounded) until it serves its sandbox.
    fn serve() -> Demo {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        // Reused from run to run, so that no run leaves one behind.
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web_view-demo");
        let _ = std::fs::remove_dir_all(&dir);
        // Without the pinned gate tools (neither on PATH nor in a `.tools/` of the directory it
        // runs in): the gates that need them show as not run, which is all these tests need of
        // them, and it keeps the run short.
        let path = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(
            std::env::split_paths(&path).filter(|d| !d.starts_with(root.join(".tools"))),
        )
        .unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_supervisor"));
        cmd.args(["demo", "--serve", "--dir"])
            .arg(&dir)
            .current_dir(env!("CARGO_TARGET_TMPDIR"))
            .env_remove("GH_TOKEN")
            .env_remove("GITHUB_TOKEN")
            .env_remove("GITHUB_API_URL")
            .env_remove("SUPERVISOR_TOOLS_DIR")
            .env_remove("RUST_LOG")
            .env("PATH", path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: prctl is async-signal-safe. The demo ends with the thread that started it,
        // which waits for it as long as this test process lives.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut child = cmd.spawn().expect("the demo starts");
            let _ = tx.send(child.stderr.take());
            // Until the test process ends (or the demo does).
            let _ = child.wait();
        });
        let lines = rx.recv().unwrap().expect("its stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(lines).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let deadline = Instant::now() + Duration::from_secs(180);
        let text = || log.lock().unwrap().clone();
        while !text().contains("serving the sandbox GitHub until Ctrl-C") {
            assert!(
                Instant::now() < deadline,
                "the demo did not start serving: {}",
                text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // The URL after `label` on a line of the demo's "where to look".
        let url = |label: &str| {
            let log = text();
            let line = log
                .lines()
                .map(str::trim_start)
                .find_map(|l| l.strip_prefix(label))
                .unwrap_or_else(|| panic!("no `{label}` line: {log}"))
                .to_string();
            let url = line.split_whitespace().next().unwrap_or_default();
            url.trim_end_matches(':').to_string()
        };
        let pull = url("pull request");
        let base = pull[..pull.find("/demo-org/").expect("a web URL")].to_string();
        let pr = pull.rsplit('/').next().unwrap().parse().expect("a number");
        for n in [1, pr] {
            let act = json!({"comment": {"issue": n, "body": HOSTILE, "by": "mallory"}});
            assert_eq!(post(&format!("{base}/_sandbox/act"), &act), 200);
        }
        Demo {
            issue: url("issue #1"),
            board: url("board"),
            pull,
            base,
            pr,
            remote: dir.join("remote.git"),
            log,
        }
    }

    /// What it printed since it began serving.
    fn log_since_serving(&self) -> String {
        let log = self.log.lock().unwrap().clone();
        let at = log
            .find("serving the sandbox GitHub until Ctrl-C")
            .unwrap_or(0);
        log[at..].to_string()
    }
}

fn git(remote: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(remote)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Where the screenshots go.
fn shots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web_view");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Take a screenshot, keep it, and check what any page's must be: the window's size, not blank.
fn screenshot(b: &mut Browser, name: &str) -> Image {
    let png = b.screenshot();
    let path = shots().join(format!("{name}.png"));
    std::fs::write(&path, &png).unwrap();
    let image = Image::decode(&png);
    assert_eq!(
        (image.width, image.height),
        (1280, 900),
        "{}",
        path.display()
    );
    let white = image
        .pixels
        .iter()
        .filter(|p| **p == [255, 255, 255])
        .count();
    let drawn = image.pixels.len() - white;
    assert!(
        drawn > image.pixels.len() / 50 && white > image.pixels.len() / 4,
        "{name}: {drawn} of {} pixels drawn: {}",
        image.pixels.len(),
        path.display()
    );
    image
}

/// A comment written to run script and to break out of its box.
const HOSTILE: &str = "<details open onclick=\"window.pwned='details'\"><summary onmouseover=\"window.pwned='summary'\">Opened by its attribute</summary>\n\ninside\n\n</details>\n\n<img src=x onerror=\"window.pwned='img'\"><ScRipt>window.pwned='script'</sCrIpT>\n\n<a href=\"javascript:window.pwned='a'\">a link</a> [md link](javascript:window.pwned='md') <b style=\"position:fixed;inset:0\" onclick=\"window.pwned='b'\">bold</b></article></div></main><footer>fake footer</footer>\n\n<details><summary>never closed";

/// What a page must not have, whatever its comments say: no script ran, none is there to run.
fn assert_inert(b: &mut Browser, page: &str) {
    let found = b.eval(
        "JSON.stringify({
            pwned: typeof window.pwned === 'undefined' ? null : String(window.pwned),
            scripts: document.scripts.length,
            handlers: [...document.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name)).filter(n => n.startsWith('on')),
            styled: [...document.querySelectorAll('.comment-body [style]')].filter(e => !/^(th|td)$/i.test(e.tagName)).length,
            scriptLinks: [...document.querySelectorAll('a[href]')].filter(a => /^\\s*javascript:/i.test(a.getAttribute('href'))).length,
            images: document.querySelectorAll('.comment-body img').length,
            footers: [...document.querySelectorAll('footer')].map(f => f.parentElement.tagName),
        })",
    );
    let found: Value = serde_json::from_str(found.as_str().unwrap()).unwrap();
    assert_eq!(
        found,
        json!({"pwned": null, "scripts": 0, "handlers": [], "styled": 0, "scriptLinks": 0,
               "images": 0, "footers": ["BODY"]}),
        "{page}"
    );
}

/// Chromium at 1280 × 900 on a page of the demo (`page` picks its URL), or `None` (skipped)
/// without Chromium: asked for before the demo starts.
fn browser(what: &str, page: fn(&'static Demo) -> &'static str) -> Option<Browser> {
    let chromium = chromium::require(what)?;
    let url = page(demo());
    let mut b = Browser::launch(&chromium, 1280, 900);
    b.open(url);
    Some(b)
}

/// A JSON document a page's script made, read back.
fn json_of(v: Value) -> Value {
    serde_json::from_str(v.as_str().expect("a JSON string")).expect("JSON")
}

#[test]
fn supervisors_details_and_sub_render_as_elements() {
    let Some(mut b) = browser("the web view's <details> and <sub>", |d| &d.issue) else {
        return;
    };
    let facts = json_of(b.eval(
        "(() => {
            const text = document.body.innerText;
            const details = [...document.querySelectorAll('.comment-body details')]
                .find(d => d.querySelector('summary')?.textContent === 'All gates');
            if (!details) return JSON.stringify({ literal: ['<details', '<summary', '<sub>'].filter(t => text.includes(t)) });
            const summary = details.querySelector('summary');
            const table = details.querySelector('table');
            const before = [details.open, summary.checkVisibility(), summary.getBoundingClientRect().height > 0, table.checkVisibility()];
            details.open = true;
            const after = table.checkVisibility();
            details.open = false;
            const sub = [...document.querySelectorAll('.comment-body sub')]
                .find(s => s.textContent.startsWith('supervisor ·'));
            const size = e => parseFloat(getComputedStyle(e).fontSize);
            return JSON.stringify({
                literal: ['<details', '<summary', '<sub>', '</sub>'].filter(t => text.includes(t)),
                before, after,
                sub: [size(sub), size(sub.closest('p'))],
            });
        })()",
    ));
    assert_eq!(facts["literal"], json!([]), "HTML shown as text: {facts}");
    assert_eq!(
        facts["before"],
        json!([false, true, true, false]),
        "collapsed, its summary shown and its table hidden: {facts}"
    );
    assert_eq!(
        facts["after"],
        json!(true),
        "opened, the table shows: {facts}"
    );
    let (sub, text) = (
        facts["sub"][0].as_f64().unwrap(),
        facts["sub"][1].as_f64().unwrap(),
    );
    assert!(sub < text, "the footer is smaller than its text: {facts}");
    screenshot(&mut b, "issue");
}

#[test]
fn hostile_comments_run_nothing_and_stay_in_their_box() {
    let pages: [fn(&'static Demo) -> &'static str; 2] = [|d| &d.issue, |d| &d.pull];
    for page in pages {
        let Some(mut b) = browser("the web view's hostile comment check", page) else {
            return;
        };
        let url = page(demo());
        assert_inert(&mut b, url);
        // Attributes gone but `open`, tags shown as text, and what it opened closed inside it.
        let hostile = json_of(b.eval(
            "(() => {
                const c = [...document.querySelectorAll('.comment')].find(c => c.innerText.includes('Opened by its attribute'));
                const details = [...c.querySelectorAll('details')];
                return JSON.stringify({
                    open: details.map(d => d.open),
                    text: c.innerText.includes('</article></div></main>') && c.innerText.includes('<footer>fake footer</footer>'),
                    bold: c.querySelector('b')?.textContent,
                    items: [...document.querySelectorAll('.TimelineItem')].every(i => i.parentElement.classList.contains('timeline')),
                    inside: !c.querySelector('article, .comment, footer') && !!(c.compareDocumentPosition(document.querySelector('body > footer')) & Node.DOCUMENT_POSITION_FOLLOWING),
                });
            })()",
        ));
        assert_eq!(
            hostile,
            json!({"open": [true, false], "text": true, "bold": "bold", "items": true, "inside": true}),
            "{url}"
        );
    }
}

#[test]
fn a_pull_requests_conversation_is_one_timeline_in_time_order() {
    let Some(mut b) = browser("the web view's timeline order", |d| &d.pull) else {
        return;
    };
    let order = json_of(b.eval(
        "(() => {
            const times = [...document.querySelectorAll('.timeline > .event time, .timeline > .TimelineItem > .comment > .comment-header time')]
                .map(t => t.getAttribute('datetime'));
            const top = e => e ? e.getBoundingClientRect().top : null;
            const review = [...document.querySelectorAll('body *')].find(e => e.children.length < 4 && /requested changes/.test(e.textContent));
            const revision = [...document.querySelectorAll('body h2')].find(h => h.textContent.startsWith('Revision'));
            return JSON.stringify({ times, review: top(review), revision: top(revision) });
        })()",
    ));
    let (review, revision) = (order["review"].as_f64(), order["revision"].as_f64());
    assert!(
        review.is_some() && revision.is_some() && review < revision,
        "the review comes before the revision it asked for: {order}"
    );
    let times: Vec<&str> = order["times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(times.len() >= 4, "{order}");
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "the timeline is in time order: {order}"
    );
    screenshot(&mut b, "pull");
}

#[test]
fn a_pull_request_shows_its_commits_and_its_diff() {
    let Some(mut b) = browser("the web view's commits and diff", |d| &d.pull) else {
        return;
    };
    let demo = demo();
    let shown = json_of(b.eval(
        "JSON.stringify({
            commits: [...document.querySelectorAll('.commits .commit')].map(c => [
                c.querySelector('.sha').textContent, c.querySelector('.commit-title').textContent,
                c.querySelector('.commit-meta strong').textContent]),
            files: [...document.querySelectorAll('.file')].map(f => [
                f.querySelector('.file-header code').textContent,
                f.querySelector('.file-header .add').textContent,
                f.querySelector('.file-header .del').textContent]),
            added: [...document.querySelectorAll('.file tr.add td.code')].map(td => td.textContent),
            removed: [...document.querySelectorAll('.file tr.del td.code')].map(td => td.textContent),
            visible: document.querySelector('.file tr.add')?.checkVisibility() ?? false,
        })",
    ));
    // What git says of the branch: its commits beyond main, oldest first, and its changes.
    let (_, _, state) = browse(&format!("{}/_sandbox/state", demo.base));
    let state: Value = serde_json::from_str(&state).unwrap();
    let head = state["pulls"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["number"] == demo.pr))
        .and_then(|p| p["head"].as_str())
        .expect("the pull request's head")
        .to_string();
    let log = git(
        &demo.remote,
        &[
            "log",
            "--reverse",
            "--format=%H%x09%s%x09%an",
            &format!("main..{head}"),
        ],
    );
    let commits: Vec<Value> = log
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            json!([&f[0][..7], f[1], f[2]])
        })
        .collect();
    assert!(commits.len() >= 2, "{log}");
    assert_eq!(shown["commits"], json!(commits), "{shown}");
    let numstat = git(
        &demo.remote,
        &["diff", "--numstat", &format!("main...{head}")],
    );
    let files: Vec<Value> = numstat
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            json!([f[2], format!("+{}", f[0]), format!("−{}", f[1])])
        })
        .collect();
    assert!(!files.is_empty(), "{numstat}");
    assert_eq!(shown["files"], json!(files), "{shown}");
    let added = shown["added"].as_array().unwrap();
    assert!(
        added.contains(&json!(
            "+const SECONDS_PER_UNIT: Record<string, number> = { s: 1, m: 60, h: 3600, w: 604800 };"
        )),
        "{shown}"
    );
    assert!(!shown["removed"].as_array().unwrap().is_empty(), "{shown}");
    assert_eq!(shown["visible"], json!(true), "{shown}");
    b.eval("document.getElementById('commits').scrollIntoView()");
    screenshot(&mut b, "pull-commits");
}

#[test]
fn the_board_fits_a_1280_pixel_window() {
    let Some(mut b) = browser("the web view's board width", |d| &d.board) else {
        return;
    };
    let geometry = json_of(b.eval(
        "JSON.stringify({
            window: innerWidth,
            page: document.documentElement.scrollWidth,
            viewport: document.documentElement.clientWidth,
            board: [document.querySelector('.board').scrollWidth, document.querySelector('.board').clientWidth,
                    document.querySelector('.board').getBoundingClientRect().top, document.querySelector('.board').getBoundingClientRect().bottom],
            columns: [...document.querySelectorAll('.column')].map(c => {
                const r = c.getBoundingClientRect();
                return [r.left, r.right, r.top, r.bottom, getComputedStyle(c).borderRightColor];
            }),
        })",
    ));
    assert_eq!(geometry["window"], json!(1280), "{geometry}");
    let viewport = geometry["viewport"].as_f64().unwrap();
    assert!(
        geometry["page"].as_f64().unwrap() <= viewport,
        "the page scrolls sideways: {geometry}"
    );
    assert!(
        geometry["board"][0].as_f64() <= geometry["board"][1].as_f64(),
        "the board scrolls sideways: {geometry}"
    );
    let columns = geometry["columns"].as_array().unwrap();
    assert!(columns.len() >= 6, "{geometry}");
    let image = screenshot(&mut b, "board");
    let rgb = |css: &str| -> [u8; 3] {
        let n: Vec<u8> = css
            .trim_start_matches("rgb(")
            .trim_end_matches(')')
            .split(',')
            .map(|v| v.trim().parse().unwrap())
            .collect();
        [n[0], n[1], n[2]]
    };
    for c in columns {
        let (left, right, top, bottom) = (
            c[0].as_f64().unwrap(),
            c[1].as_f64().unwrap(),
            c[2].as_f64().unwrap(),
            c[3].as_f64().unwrap(),
        );
        assert!(left >= 0.0 && right <= viewport, "{c} in {geometry}");
        // Its right border is drawn where the layout puts it: the column is whole on screen (an
        // edge between pixels is blended into its neighbours).
        let border = rgb(c[4].as_str().unwrap());
        let y = ((top + bottom) / 2.0).min(899.0) as usize;
        let near = |p: [u8; 3]| (0..3).all(|i| p[i].abs_diff(border[i]) <= 16);
        let xs = (right - 2.5).floor() as usize..=(right - 0.5).floor() as usize;
        assert!(
            xs.clone().any(|x| near(image.at(x, y))),
            "the right border of {c}: {:?} at x {xs:?}, y {y}",
            xs.clone().map(|x| image.at(x, y)).collect::<Vec<_>>()
        );
    }
    // Where the board is, the last column of pixels in the window is the page's background.
    let edge = viewport as usize - 1;
    let (top, bottom) = (
        geometry["board"][2].as_f64().unwrap(),
        geometry["board"][3].as_f64().unwrap(),
    );
    let rows = top as usize..(bottom as usize).min(image.height);
    assert!(
        rows.clone().all(|y| image.at(edge, y) == [255, 255, 255]),
        "something reaches the window's right edge at x {edge}, y {rows:?}"
    );
}

#[test]
fn browsing_the_pages_warns_of_nothing() {
    let Some(mut b) = browser("the web view's favicon", |d| &d.issue) else {
        return;
    };
    let demo = demo();
    b.open(&format!("{}/favicon.ico", demo.base));
    drop(b);
    // Anyone may ask for the icon: it is answered, and nothing warns of it.
    let (status, kind, _) = browse(&format!("{}/favicon.ico", demo.base));
    assert_eq!((status, kind.as_str()), (200, "image/svg+xml"));
    let log = demo.log_since_serving();
    assert!(
        !log.contains("WARN"),
        "nothing warns while the pages are browsed: {log}"
    );
}
