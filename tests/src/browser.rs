//! Headless Chromium for the console's tests (`host/cli/tests/all/ui.rs`), driven over the
//! DevTools protocol by `tests/fixtures/browser.mjs` (puppeteer-core, pinned and installed by
//! `make setup-kit` with Debian's `chromium-headless-shell`). Each call is one command to the
//! driver and waits for its answer; the waits are the browser's own (DOM changes), bounded by a
//! timeout that only a broken page reaches.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

/// A browser with one page.
pub struct Browser {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

impl Browser {
    /// Starts Chromium (headless) behind the driver.
    pub fn start() -> Self {
        let toolchain = root().join("target/toolchains/browser");
        assert!(
            toolchain.join("node_modules/puppeteer-core").is_dir(),
            "{} has no puppeteer-core: run `make setup-kit`",
            toolchain.display()
        );
        let chromium = std::env::var("SEAM_CHROMIUM")
            .unwrap_or_else(|_| "/usr/bin/chromium-headless-shell".into());
        assert!(
            Path::new(&chromium).is_file(),
            "{chromium} is missing: run `make setup-kit` (it installs Debian's \
             chromium-headless-shell)"
        );
        let mut child = Command::new("node")
            .arg(root().join("tests/fixtures/browser.mjs"))
            .env("SEAM_BROWSER_TOOLCHAIN", &toolchain)
            .env("SEAM_CHROMIUM", &chromium)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node runs the browser driver");
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Self {
            child,
            stdin: Some(stdin),
            stdout,
        }
    }

    /// Sends `command`; its value, or the driver's error.
    pub fn try_call(&mut self, command: Value) -> Result<Value, String> {
        let stdin = self.stdin.as_mut().expect("the driver is open");
        writeln!(stdin, "{command}").expect("the driver reads");
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("the driver answers");
        let answer: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the driver answered `{line}` to {command}: {e}"));
        if answer["ok"] == true {
            Ok(answer["value"].clone())
        } else {
            Err(answer["error"].as_str().unwrap_or("?").to_string())
        }
    }

    /// Sends `command`; its value. Fails the test (with a screenshot under `target/`) if the
    /// driver failed.
    pub fn call(&mut self, command: Value) -> Value {
        match self.try_call(command.clone()) {
            Ok(value) => value,
            Err(e) => {
                let test = std::thread::current()
                    .name()
                    .unwrap_or("test")
                    .replace("::", "-");
                let shot = root().join(format!("target/ui-screenshots/failed-{test}.png"));
                let _ = std::fs::create_dir_all(shot.parent().expect("a folder"));
                let _ = self.try_call(json!({"op": "screenshot", "path": shot}));
                let body = self
                    .try_call(json!({"op": "eval", "expression": "document.body.innerText"}))
                    .unwrap_or_default();
                panic!(
                    "{command} failed: {e}\n(the page is in {}; its text:)\n{}",
                    shot.display(),
                    body.as_str().unwrap_or_default()
                )
            }
        }
    }

    /// Loads `url`.
    pub fn open(&mut self, url: &str) {
        self.call(json!({"op": "open", "url": url}));
    }

    /// Until `selector` is in the page.
    pub fn wait(&mut self, selector: &str) {
        self.call(json!({"op": "wait", "selector": selector}));
    }

    /// Until `selector` is not in the page.
    pub fn wait_gone(&mut self, selector: &str) {
        self.call(json!({"op": "wait_gone", "selector": selector}));
    }

    /// Until an element matching `selector` has `text` in its text.
    pub fn wait_text(&mut self, selector: &str, text: &str) {
        self.call(json!({"op": "wait_text", "selector": selector, "text": text}));
    }

    /// Until `expression` is true in the page.
    pub fn wait_js(&mut self, expression: &str) {
        self.call(json!({"op": "wait_js", "expression": expression}));
    }

    /// Clicks `selector`.
    pub fn click(&mut self, selector: &str) {
        self.call(json!({"op": "click", "selector": selector}));
    }

    /// Types `text` into `selector`.
    pub fn type_into(&mut self, selector: &str, text: &str) {
        self.call(json!({"op": "type", "selector": selector, "text": text}));
    }

    /// The text of `selector`.
    pub fn text(&mut self, selector: &str) -> String {
        self.call(json!({"op": "text", "selector": selector}))
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// How many elements match `selector`.
    pub fn count(&mut self, selector: &str) -> u64 {
        self.call(json!({"op": "count", "selector": selector}))
            .as_u64()
            .unwrap_or(0)
    }

    /// The value of `expression` in the page.
    pub fn eval(&mut self, expression: &str) -> Value {
        self.call(json!({"op": "eval", "expression": expression}))
    }

    /// The whole page as a PNG, at `target/ui-screenshots/NAME.png` (for a person to look at);
    /// returns its path.
    pub fn screenshot(&mut self, name: &str) -> PathBuf {
        let path = root().join(format!("target/ui-screenshots/{name}.png"));
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("target/ is writable");
        self.call(json!({"op": "screenshot", "path": path}));
        path
    }

    /// The page's uncaught errors and failed requests so far.
    pub fn errors(&mut self) -> Vec<String> {
        serde_json::from_value(self.call(json!({"op": "errors"}))).unwrap_or_default()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The driver closes Chromium when its input ends, then exits.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
