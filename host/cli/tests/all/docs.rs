//! The book (`docs/`) and `README.md` held to the repository: every relative link resolves (mdBook
//! checks none, and the mdBook 0.5 link checker skips `#anchors`), and every TOML config in
//! them loads with the built `seam`. The rules are written down in `docs/src/contributing.md`.

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// How many ```` ```toml,unchecked ```` snippets the docs have: a new one is a decision to make
/// here, where a reviewer sees it.
/// Four: the `kind = "mcp"` entries of the MCP chapter and the `kind = "a2a"` entry of the A2A
/// chapter, which need their servers to load, and the two `oci://` configs of the registries
/// chapter, which need a registry (host/cli/tests/all/oci.rs loads such configs against a real
/// one).
const UNCHECKED: usize = 4;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The Markdown options mdBook parses chapters with (tables matter: a link in a table cell).
fn parse(text: &str) -> Parser<'_> {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES;
    Parser::new_ext(text, options)
}

/// The Markdown the checks read: every file under `docs/src/`, and `README.md`.
fn documents(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                out.push(path);
            }
        }
    }
    let mut docs = vec![root.join("README.md")];
    walk(&root.join("docs/src"), &mut docs);
    docs
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

/// `path` with `.` and `..` resolved without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Whether `link` names a scheme (`https:`, `mailto:`): such links are not followed.
fn has_scheme(link: &str) -> bool {
    let Some((scheme, _)) = link.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
}

/// Every link (and image) in `text`, with its line.
fn links(text: &str) -> Vec<(String, usize)> {
    parse(text)
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some((dest_url.to_string(), line_of(text, range.start)))
            }
            _ => None,
        })
        .collect()
}

/// Every `{{#include PATH}}` in `text` that mdBook expands, with its line.
fn includes(text: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    let mut rest = 0;
    while let Some(start) = text[rest..].find("{{#include ") {
        let start = rest + start;
        let Some(end) = text[start..].find("}}") else {
            break;
        };
        let arg = text[start + "{{#include ".len()..start + end].trim();
        // `\{{#include ...}}` is mdBook's escape: shown as written, not included.
        if !text[..start].ends_with('\\') {
            found.push((arg.to_string(), line_of(text, start)));
        }
        rest = start + end;
    }
    found
}

/// `text` with each whole-file `{{#include PATH}}` replaced by the file, as mdBook renders it.
fn expand_includes(text: &str, dir: &Path) -> String {
    let mut out = text.to_string();
    for (arg, _) in includes(text) {
        if let Ok(included) = std::fs::read_to_string(dir.join(&arg)) {
            out = out.replace(&format!("{{{{#include {arg}}}}}"), &included);
        }
    }
    out
}

/// The id mdBook gives a heading of this text: lowercased, whitespace made `-`, everything but
/// letters, digits, `-` and `_` dropped.
fn heading_id(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// The anchors a page has: its headings' ids (explicit `{#id}`, or from the text), a repeated
/// one suffixed `-1`, `-2`, ... as mdBook does.
fn anchors(text: &str) -> HashSet<String> {
    let mut ids = HashSet::new();
    let mut heading: Option<(String, Option<String>)> = None;
    for event in parse(text) {
        match event {
            Event::Start(Tag::Heading { id, .. }) => {
                heading = Some((String::new(), id.map(|id| id.to_string())));
            }
            Event::Text(piece) | Event::Code(piece) => {
                if let Some((text, _)) = heading.as_mut() {
                    text.push_str(&piece);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let (text, id) = heading.take().expect("a heading ends after it starts");
                let id = id.unwrap_or_else(|| heading_id(&text));
                let mut unique = id.clone();
                let mut n = 0;
                while !ids.insert(unique.clone()) {
                    n += 1;
                    unique = format!("{id}-{n}");
                }
            }
            _ => {}
        }
    }
    ids
}

/// The link checker over the repository at `root`: its book in `docs/src/` and its `README.md`.
struct LinkCheck {
    root: PathBuf,
    src: PathBuf,
    chapters: HashSet<PathBuf>,
    anchors: HashMap<PathBuf, HashSet<String>>,
    problems: Vec<String>,
}

impl LinkCheck {
    fn new(root: &Path) -> Self {
        let src = root.join("docs/src");
        let summary = read(&src.join("SUMMARY.md"));
        let chapters = links(&summary)
            .into_iter()
            .map(|(link, _)| normalize(&src.join(link)))
            .chain([src.join("SUMMARY.md")])
            .collect();
        LinkCheck {
            root: root.to_path_buf(),
            src,
            chapters,
            anchors: HashMap::new(),
            problems: Vec::new(),
        }
    }

    fn anchors_of(&mut self, page: &Path) -> &HashSet<String> {
        self.anchors.entry(page.to_path_buf()).or_insert_with(|| {
            let text = read(page);
            anchors(&expand_includes(&text, page.parent().unwrap()))
        })
    }

    fn problem(&mut self, doc: &Path, line: usize, message: String) {
        let doc = doc.strip_prefix(&self.root).unwrap_or(doc);
        self.problems
            .push(format!("{}:{line}: {message}", doc.display()));
    }

    /// Checks every link and include of every document.
    fn run(mut self) -> Vec<String> {
        for doc in documents(&self.root) {
            let text = read(&doc);
            for (link, line) in links(&text) {
                self.link(&doc, line, &link);
            }
            for (arg, line) in includes(&text) {
                self.include(&doc, line, &arg);
            }
        }
        self.problems
    }

    fn link(&mut self, doc: &Path, line: usize, link: &str) {
        if has_scheme(link) {
            return;
        }
        let (path, fragment) = match link.split_once('#') {
            Some((path, fragment)) => (path, Some(fragment)),
            None => (link, None),
        };
        let target = if path.is_empty() {
            doc.to_path_buf()
        } else {
            normalize(&doc.parent().unwrap().join(path))
        };
        if !target.starts_with(&self.root) {
            return self.problem(doc, line, format!("`{link}` leaves the repository"));
        }
        if !target.exists() {
            return self.problem(doc, line, format!("`{link}`: no such file or folder"));
        }
        let markdown = target.extension().is_some_and(|ext| ext == "md");
        if doc.starts_with(&self.src) && markdown && !self.chapters.contains(&target) {
            return self.problem(
                doc,
                line,
                format!(
                    "`{link}` is not a chapter in SUMMARY.md: the book links it as .html, which \
                     only chapters have"
                ),
            );
        }
        let Some(fragment) = fragment.filter(|f| !f.is_empty()) else {
            return;
        };
        if !markdown {
            return self.problem(
                doc,
                line,
                format!("`{link}`: an anchor into a file that is not Markdown cannot be checked"),
            );
        }
        if !self.anchors_of(&target).contains(fragment) {
            let page = target
                .strip_prefix(&self.root)
                .unwrap_or(&target)
                .to_owned();
            self.problem(
                doc,
                line,
                format!("`{link}`: {} has no heading `#{fragment}`", page.display()),
            );
        }
    }

    /// An included file renders from the chapter that includes it, not from where it sits: it
    /// may link only to anchors (of the chapter) and to URLs.
    fn include(&mut self, doc: &Path, line: usize, arg: &str) {
        if arg.contains(':') {
            return self.problem(
                doc,
                line,
                format!("`{{{{#include {arg}}}}}`: only whole-file includes are checked"),
            );
        }
        let included = normalize(&doc.parent().unwrap().join(arg));
        if !included.is_file() {
            return self.problem(doc, line, format!("`{{{{#include {arg}}}}}`: no such file"));
        }
        for (link, _) in links(&read(&included)) {
            if has_scheme(&link) {
                continue;
            }
            match link.strip_prefix('#') {
                Some(fragment) if !self.anchors_of(doc).contains(fragment) => self.problem(
                    doc,
                    line,
                    format!("`{link}` in the included {arg}: the chapter has no such heading"),
                ),
                Some(_) => {}
                None => self.problem(
                    doc,
                    line,
                    format!(
                        "`{link}` in the included {arg}: a relative link resolves differently \
                         from the file and from the book; link to an anchor or a URL"
                    ),
                ),
            }
        }
    }
}

/// What a fenced ```` ```toml ```` block is, by the marker after `toml` in its info string.
#[derive(Debug, Clone, PartialEq)]
enum SnippetKind {
    /// A whole config.
    Whole,
    /// The tables of one plugin entry; checked after a minimal entry.
    Fragment,
    /// Not loadable here; counted against [`UNCHECKED`].
    Unchecked,
    /// A marker the test does not know.
    Unknown(String),
}

#[derive(Debug)]
struct Snippet {
    place: String,
    kind: SnippetKind,
    text: String,
}

/// The TOML blocks of the document `name` with text `text`.
fn snippets(name: &str, text: &str) -> Vec<Snippet> {
    let mut found = Vec::new();
    let mut current: Option<Snippet> = None;
    for (event, range) in parse(text).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let mut words = info
                    .split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|w| !w.is_empty());
                if words.next() != Some("toml") {
                    continue;
                }
                let markers: Vec<&str> = words.collect();
                let kind = match markers.as_slice() {
                    [] => SnippetKind::Whole,
                    ["fragment"] => SnippetKind::Fragment,
                    ["unchecked"] => SnippetKind::Unchecked,
                    _ => SnippetKind::Unknown(markers.join(",")),
                };
                current = Some(Snippet {
                    place: format!("{name}:{}", line_of(text, range.start)),
                    kind,
                    text: String::new(),
                });
            }
            Event::Text(piece) => {
                if let Some(snippet) = current.as_mut() {
                    snippet.text.push_str(&piece);
                }
            }
            Event::End(TagEnd::CodeBlock) => found.extend(current.take()),
            _ => {}
        }
    }
    found
}

/// The entry a fragment is checked under.
const FRAGMENT_ENTRY: &str =
    "[[plugin]]\nid = \"fragment\"\ncomponent = \"mock_provider.wasm\"\n\n";

#[derive(Debug, Default)]
struct ConfigReport {
    checked: usize,
    fragments: usize,
    unchecked: usize,
    problems: Vec<String>,
}

/// Loads each snippet with `seam check`, in a folder holding every built guest component under
/// its file name, `hello.wasm` (the mock provider, for the plugin chapters' `hello`) and an
/// empty `data/` folder.
fn check_configs(snippets: &[Snippet]) -> ConfigReport {
    let guests = seam_tests::guest("mock_provider")
        .parent()
        .unwrap()
        .to_path_buf();
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&guests).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "wasm") {
            std::os::unix::fs::symlink(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    std::os::unix::fs::symlink(
        guests.join("mock_provider.wasm"),
        dir.path().join("hello.wasm"),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();

    let mut report = ConfigReport::default();
    for (n, snippet) in snippets.iter().enumerate() {
        let config = match &snippet.kind {
            SnippetKind::Whole => snippet.text.clone(),
            SnippetKind::Fragment => {
                report.fragments += 1;
                format!("{FRAGMENT_ENTRY}{}", snippet.text)
            }
            SnippetKind::Unchecked => {
                report.unchecked += 1;
                continue;
            }
            SnippetKind::Unknown(marker) => {
                report.problems.push(format!(
                    "{}: unknown marker `toml,{marker}` (whole configs are ```toml, others \
                     ```toml,fragment or ```toml,unchecked)",
                    snippet.place
                ));
                continue;
            }
        };
        let file = dir.path().join(format!("snippet-{n}.toml"));
        std::fs::write(&file, &config).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_seam"))
            .arg("check")
            .arg(&file)
            .env(
                "SEAM_CACHE_DIR",
                root().join("target").join("seam-test-cache"),
            )
            .output()
            .expect("the seam binary runs");
        report.checked += 1;
        if !out.status.success() {
            report.problems.push(format!(
                "{}: `seam check` failed on\n{config}\n{}{}",
                snippet.place,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    report
}

#[test]
fn links_resolve_in_the_book_and_the_readme() {
    let problems = LinkCheck::new(&root()).run();
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn links_check_refuses_what_would_break_in_the_book() {
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path().canonicalize().unwrap();
    let write = |path: &str, text: &str| {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("docs/src/SUMMARY.md", "- [A](a.md)\n- [B](sub/b.md)\n");
    write(
        "docs/src/a.md",
        "# A\n\n## Two `words`\n\n## Two `words`\n\n\
         [ok](sub/b.md#b) [ok](#two-words-1) [ok](../../file.txt) [ok](https://example.com/x.md)\n\n\
         | a | b |\n|---|---|\n| [bad anchor](#three-words) | [not a chapter](c.md) |\n\n\
         [missing](../../missing.txt) [outside](../../../elsewhere) [repo md](../../README.md)\n\n\
         [code anchor](../../file.txt#L1)\n",
    );
    write("docs/src/c.md", "# C\n");
    write(
        "docs/src/sub/b.md",
        "# B\n\n{{#include ../../../inc.md}}\n\n{{#include ../../../absent.md}}\n\n\
         `\\{{#include escaped.md}}` is shown, not included\n",
    );
    write(
        "inc.md",
        "## Included\n\n[ok](#included) [ok](#b) [bad](#gone) [relative](file.txt)\n",
    );
    write("file.txt", "");
    write(
        "README.md",
        "# R\n\n[ok](docs/src/a.md#a) [ok](docs/src/c.md) [bad](docs/src/a.md#nope)\n",
    );
    let problems = LinkCheck::new(&root).run();
    let expected = [
        "README.md:3: `docs/src/a.md#nope`",
        "docs/src/a.md:11: `#three-words`",
        "docs/src/a.md:11: `c.md` is not a chapter",
        "docs/src/a.md:13: `../../missing.txt`: no such file",
        "docs/src/a.md:13: `../../../elsewhere` leaves the repository",
        "docs/src/a.md:13: `../../README.md` is not a chapter",
        "docs/src/a.md:15: `../../file.txt#L1`: an anchor into a file that is not Markdown",
        "docs/src/sub/b.md:3: `#gone`",
        "docs/src/sub/b.md:3: `file.txt` in the included",
        "docs/src/sub/b.md:5: `{{#include ../../../absent.md}}`: no such file",
    ];
    for want in expected {
        assert!(
            problems.iter().any(|p| p.starts_with(want)),
            "not reported: {want}\nreported:\n{}",
            problems.join("\n")
        );
    }
    assert_eq!(problems.len(), expected.len(), "{}", problems.join("\n"));
}

#[test]
fn every_config_in_the_docs_loads() {
    let root = root();
    let mut all = Vec::new();
    for doc in documents(&root) {
        let name = doc.strip_prefix(&root).unwrap().display().to_string();
        all.extend(snippets(&name, &read(&doc)));
    }
    let report = check_configs(&all);
    assert!(
        report.problems.is_empty(),
        "configs in the docs that do not load:\n{}",
        report.problems.join("\n---\n")
    );
    assert_eq!(
        report.unchecked, UNCHECKED,
        "```toml,unchecked snippets: update UNCHECKED if skipping one is right"
    );
    // The extraction found what the book has: whole configs and entry fragments.
    assert!(report.checked >= 10 && report.fragments >= 2, "{report:?}");
}

#[test]
fn config_check_refuses_broken_snippets() {
    let doc = "\
```toml
[[plugin]]
id = \"ok\"
component = \"mock_provider.wasm\"
```

```toml
[[plugin]]
id = \"typo\"
componnt = \"mock_provider.wasm\"
```

```toml,fragment
[plugin.limits]
memory_mbb = 1
```

```toml,fragment
[plugin.grants]
dirs = [{ host = \"data\", guest = \"/data\" }]
```

```toml,fragmnt
```

```toml,unchecked
not toml at all
```
";
    let report = check_configs(&snippets("synthetic.md", doc));
    let failed: Vec<&str> = report
        .problems
        .iter()
        .map(|p| p.split(':').take(2).collect::<Vec<_>>())
        .map(|parts| parts[1])
        .collect();
    assert_eq!(
        failed,
        ["7", "13", "23"],
        "{}",
        report.problems.join("\n---\n")
    );
    assert!(
        report.problems[0].contains("componnt"),
        "{}",
        report.problems[0]
    );
    assert!(
        report.problems[1].contains("memory_mbb"),
        "{}",
        report.problems[1]
    );
    assert!(report.problems[2].contains("unknown marker"));
    assert_eq!(
        (report.checked, report.fragments, report.unchecked),
        (4, 2, 1)
    );
}

/// `seam ARGS --help`, as text.
fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_seam"))
        .args(args)
        .arg("--help")
        .output()
        .expect("the seam binary runs");
    assert!(out.status.success(), "seam {args:?} --help failed");
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The lines of the `heading:` section of a clap help text, up to the next blank line.
fn help_section<'a>(help: &'a str, heading: &str) -> Vec<&'a str> {
    help.lines()
        .skip_while(|line| *line != heading)
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .collect()
}

/// The subcommands a help text lists, without `help`.
fn subcommands(help: &str) -> Vec<String> {
    help_section(help, "Commands:")
        .into_iter()
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The long flags of the options a help text lists (not clap's `--help` and `--version`). An option's
/// line is indented at most six spaces; its description, below it in `--help`, ten.
fn help_flags(help: &str) -> HashSet<String> {
    let mut flags = HashSet::new();
    for line in help.lines() {
        let indent = line.len() - line.trim_start().len();
        if indent > 6 || !line.trim_start().starts_with('-') {
            continue;
        }
        let spec = line.split("  ").find(|s| !s.is_empty()).unwrap_or("");
        // Clap's own (`seam wit --version V` is not).
        if spec == "-h, --help" || spec == "-V, --version" {
            continue;
        }
        flags.extend(long_flags(spec));
    }
    flags
}

/// Every `--flag` in `text`.
fn long_flags(text: &str) -> HashSet<String> {
    let mut flags = HashSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("--") {
        let name: String = rest[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if !name.is_empty() {
            flags.insert(format!("--{name}"));
        }
        rest = &rest[at + 2 + name.len()..];
    }
    flags
}

/// The synopsis of each command in `cli.md`: its `seam CMD ...` lines, with what is quoted in
/// them (`--then "delegate --provider P"`, another command's words) left out.
fn synopses(cli_md: &str) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = HashMap::new();
    let mut in_code = false;
    for event in parse(cli_md) {
        match event {
            Event::Start(Tag::CodeBlock(_)) => in_code = true,
            Event::End(TagEnd::CodeBlock) => in_code = false,
            Event::Text(text) if in_code => {
                for line in text.lines() {
                    let mut words = line.split_whitespace();
                    if words.next() != Some("seam") {
                        continue;
                    }
                    let Some(command) = words.next() else {
                        continue;
                    };
                    let unquoted: String = line.split('"').step_by(2).collect();
                    let synopsis = out.entry(command.to_string()).or_default();
                    synopsis.push_str(&unquoted);
                    synopsis.push('\n');
                }
            }
            _ => {}
        }
    }
    out
}

/// What differs between the flags of `seam CMD --help` (with its subcommands') and the
/// synopsis of `CMD` in `cli.md`, as problems.
fn synopsis_problems(cli_md: &str) -> Vec<String> {
    let synopses = synopses(cli_md);
    let mut problems = Vec::new();
    for command in subcommands(&help(&[])) {
        let top = help(&[&command]);
        let mut flags = help_flags(&top);
        for sub in subcommands(&top) {
            flags.extend(help_flags(&help(&[&command, &sub])));
        }
        let Some(synopsis) = synopses.get(&command) else {
            problems.push(format!("`seam {command}` has no synopsis in cli.md"));
            continue;
        };
        let written = long_flags(synopsis);
        let mut missing: Vec<_> = flags.difference(&written).collect();
        missing.sort();
        if !missing.is_empty() {
            problems.push(format!(
                "the synopsis of `seam {command}` lacks {missing:?}, which `seam {command} --help` lists"
            ));
        }
        let mut unknown: Vec<_> = written.difference(&flags).collect();
        unknown.sort();
        if !unknown.is_empty() {
            problems.push(format!(
                "the synopsis of `seam {command}` has {unknown:?}, which `seam {command} --help` does not list"
            ));
        }
    }
    problems
}

#[test]
fn every_command_synopsis_in_cli_md_has_the_flags_of_its_help() {
    let cli_md = read(&root().join("docs/src/cli.md"));
    let problems = synopsis_problems(&cli_md);
    assert!(
        problems.is_empty(),
        "docs/src/cli.md:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_synopsis_check_finds_a_missing_and_an_unknown_flag() {
    let cli_md = read(&root().join("docs/src/cli.md"));
    let broken = cli_md
        .replace(
            "seam check CONFIG [--json] [--locked]",
            "seam check CONFIG [--json]",
        )
        .replace(
            "seam wit [--out DIR]",
            "seam wit [--out DIR] [--no-such-flag]",
        );
    let problems = synopsis_problems(&broken);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`seam check` lacks") && p.contains("--locked")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`seam wit` has") && p.contains("--no-such-flag")),
        "{problems:?}"
    );
}

/// The environment variables a text names: words of capitals, digits and `_` with a `_` in
/// them, optionally after `$`.
fn env_vars(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')) {
        let var = word.trim_matches('_');
        if var.contains('_')
            && var.starts_with(|c: char| c.is_ascii_uppercase())
            && !out.iter().any(|v| v == var)
        {
            out.push(var.to_string());
        }
    }
    out
}

/// The default a description gives: the value after `(default ` or the word before
/// `(default` / `(the default`, without backticks and trailing punctuation.
fn stated_default(text: &str) -> Option<String> {
    let text = text.replace('`', "");
    let clean = |w: &str| w.trim_end_matches([';', ',', ')', ':', '.']).to_string();
    if let Some((_, after)) = text.split_once("(default ") {
        return after.split_whitespace().next().map(clean);
    }
    let before = text
        .split_once("(default)")
        .or_else(|| text.split_once("(the default"))?
        .0;
    before.split_whitespace().last().map(clean)
}

/// The `## Environment` section of `cli.md`, as text.
fn environment_section(cli_md: &str) -> String {
    let start = cli_md
        .find("\n## Environment\n")
        .expect("cli.md has an Environment section");
    let rest = &cli_md[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |n| n + 3);
    rest[..end].to_string()
}

#[test]
fn the_environment_of_seam_help_is_the_one_cli_md_documents() {
    let help = help(&[]);
    let lines = help_section(&help, "Environment:");
    // Each variable with its description (continuation lines are indented further).
    let mut described: Vec<(String, String)> = Vec::new();
    for line in lines {
        if line.starts_with("  ") && !line.starts_with("   ") {
            let mut words = line.split_whitespace();
            let var = words.next().unwrap_or_default().to_string();
            described.push((var, words.collect::<Vec<_>>().join(" ")));
        } else if let Some((_, text)) = described.last_mut() {
            text.push(' ');
            text.push_str(line.trim());
        }
    }
    assert!(described.len() >= 5, "{help}");
    let section = environment_section(&read(&root().join("docs/src/cli.md")));
    let documented = env_vars(&section);
    let mut problems = Vec::new();
    for (var, text) in &described {
        if !documented.contains(var) {
            problems.push(format!(
                "`seam --help` lists {var}; cli.md's Environment does not"
            ));
            continue;
        }
        // The doc's words about it: from its first mention to the next variable `--help` lists
        // or the end of its list item.
        let at = section.find(var.as_str()).unwrap_or(0) + var.len();
        let end = described
            .iter()
            .filter_map(|(other, _)| section[at..].find(other.as_str()))
            .chain(section[at..].find("\n- "))
            .min()
            .map_or(section.len(), |n| at + n);
        let doc = &section[at..end];
        if let (Some(said), Some(doc_said)) = (stated_default(text), stated_default(doc)) {
            if said != doc_said {
                problems.push(format!(
                    "{var}: `seam --help` says the default is `{said}`, cli.md `{doc_said}`"
                ));
            }
        }
    }
    for var in documented.iter().filter(|v| v.starts_with("SEAM_")) {
        if !described.iter().any(|(v, _)| v == var) {
            problems.push(format!(
                "cli.md's Environment documents {var}; `seam --help` does not"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
