//! A small WebDriver client for tests that drive a real browser: Debian's headless Chromium
//! (`/usr/bin/chromium`) through chromedriver (`/usr/bin/chromedriver`), over the W3C WebDriver
//! protocol with an async HTTP client, so that tokio tests can use it.
//!
//! Each [`Browser`] runs its own chromedriver on a free loopback port and one session with a
//! fresh profile in a temporary directory. Every failure panics with what was asked, the page's
//! URL where it matters, and chromedriver's error; commands are not retried and nothing skips.
//! Both programs come from the Debian packages `chromium` and `chromium-driver`; a test that
//! cannot find them fails and says how to install them.
//!
//! What this chromedriver does that the W3C protocol does not say:
//!
//! - Console messages have no W3C endpoint. Chromedriver keeps its legacy
//!   `POST /session/{id}/se/log` with `{"type": "browser"}`, which answers when the session asked
//!   for `goog:loggingPrefs` `{"browser": "ALL"}`. Each call drains the buffer: it returns the
//!   entries of every level since the previous call, so [`Browser::console_errors`] keeps the
//!   `SEVERE` ones and the others are gone. A `console.error("boom")` arrives as
//!   `<url> <line>:<column> "boom"` (the argument JSON-quoted), an uncaught exception as
//!   `<url> <line>:<column> Uncaught ReferenceError: ...`, and a failed load as
//!   `<url> - Failed to load resource: the server responded with a status of 404 (...)`. That
//!   includes `/favicon.ico`, which the browser asks for on its own shortly after a page loads:
//!   a server without one gets an error entry a moment later.
//! - Special keys are Unicode private-use code points (U+E004 is Tab), sent here as key-down and
//!   key-up through the actions endpoint, which types into whatever has focus. The element
//!   "send keys" endpoint would focus the element it names first, which defeats a focus check.
//! - `GET .../attribute/{name}` returns the attribute as the HTML wrote it: an input's `value`
//!   attribute keeps what the page set, not what was typed. [`Browser::property`] reads the live
//!   DOM property.
//! - [`Browser::set_window_size`] sets the outer window. The viewport (`window.innerWidth`) gets
//!   the same width but a smaller height.
//! - Chromium runs with `--remote-debugging-pipe`, so chromedriver talks to it over a pipe rather
//!   than a TCP port. When chromedriver dies, even killed, the pipe closes and Chromium exits with
//!   it: a test that panics leaves no browser running.
//! - Chromium's crash reporter keeps a database under `$XDG_CONFIG_HOME/chromium`; chromedriver,
//!   and so Chromium, runs with `XDG_CONFIG_HOME` and `XDG_CACHE_HOME` in the temporary
//!   directory, so nothing is written to the home directory.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use fleetscope_local_process::{free_port, log_tail, ChildProcess, StartFailure};
use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Value};

/// The chromedriver program (Debian package `chromium-driver`).
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The Chromium program (Debian package `chromium`).
pub const CHROMIUM: &str = "/usr/bin/chromium";

const INSTALL_HINT: &str = "Chromium and chromedriver come from the Debian packages chromium and \
chromium-driver: run scripts/install-prereqs --tests";

/// How long chromedriver may take to listen and say it is ready.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Attempts at starting on a free port, in case another process takes the port first.
const START_ATTEMPTS: usize = 3;

/// How long one WebDriver command may take (a page load is limited to less, below).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the browser's processes may take to exit once the browser is dropped.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The key under which WebDriver names an element in its answers.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A key that [`Browser::press_key`] can press.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Tab,
    Enter,
    Escape,
    Space,
    Backspace,
    ArrowLeft,
    ArrowUp,
    ArrowRight,
    ArrowDown,
    Home,
    End,
    /// A key that types this character.
    Char(char),
}

impl Key {
    /// The character WebDriver uses for this key.
    fn code(self) -> char {
        match self {
            Key::Tab => '\u{E004}',
            Key::Enter => '\u{E007}',
            Key::Escape => '\u{E00C}',
            Key::Space => '\u{E00D}',
            Key::Backspace => '\u{E003}',
            Key::ArrowLeft => '\u{E012}',
            Key::ArrowUp => '\u{E013}',
            Key::ArrowRight => '\u{E014}',
            Key::ArrowDown => '\u{E015}',
            Key::Home => '\u{E011}',
            Key::End => '\u{E010}',
            Key::Char(c) => c,
        }
    }
}

/// The WebDriver code of the Shift key.
const SHIFT: char = '\u{E008}';

/// A cookie the browser holds, as WebDriver reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Cookie {
    pub name: String,
    pub value: String,
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub domain: String,
    #[serde(rename = "httpOnly", default)]
    pub http_only: bool,
    #[serde(default)]
    pub secure: bool,
    /// `Strict`, `Lax` or `None`; chromedriver reports `Lax` for a cookie set without the
    /// attribute, as the browser treats it.
    #[serde(rename = "sameSite", default)]
    pub same_site: String,
    /// Seconds since the epoch; absent for a session cookie.
    pub expiry: Option<u64>,
}

/// An error chromedriver answered with: its W3C error code (`no such element`, ...) and the
/// first line of its message.
#[derive(Debug)]
struct CommandError {
    error: String,
    message: String,
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error, self.message)
    }
}

/// A headless Chromium driven through its own chromedriver, with one WebDriver session. Dropping
/// it deletes the session, kills chromedriver and waits until the browser's processes are gone;
/// [`Browser::quit`] does the same without blocking.
#[derive(Debug)]
pub struct Browser {
    client: reqwest::Client,
    /// `http://127.0.0.1:<port>/session/<id>`, the prefix of every command.
    session_url: String,
    session_id: String,
    port: u16,
    chromedriver: ChildProcess,
    log_file: PathBuf,
    profile: PathBuf,
    /// Set once the session is deleted.
    closed: bool,
    _dir: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free port, waits until it is ready and opens a session on a
    /// fresh headless Chromium. Panics with what to install when either program is missing, and
    /// with chromedriver's log when it does not start.
    pub async fn start() -> Browser {
        for program in [CHROMEDRIVER, CHROMIUM] {
            assert!(
                Path::new(program).is_file(),
                "{program} not found; {INSTALL_HINT}"
            );
        }
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let client = reqwest::Client::builder()
            .timeout(COMMAND_TIMEOUT)
            .build()
            .expect("build an HTTP client");
        let mut last_log = String::new();
        for attempt in 0..START_ATTEMPTS {
            let port = free_port().expect("bind a free loopback port");
            let log_file = dir.path().join(format!("chromedriver-{attempt}.log"));
            let Some(chromedriver) = start_chromedriver(dir.path(), port, &log_file).await else {
                last_log = log_tail(&[&log_file], 20);
                continue;
            };
            wait_until_ready(&client, port, &log_file).await;
            let profile = dir.path().join("profile");
            let session_id = create_session(&client, port, &profile, &log_file).await;
            return Browser {
                client,
                session_url: format!("http://127.0.0.1:{port}/session/{session_id}"),
                session_id,
                port,
                chromedriver,
                log_file,
                profile,
                closed: false,
                _dir: dir,
            };
        }
        panic!("chromedriver found no free port in {START_ATTEMPTS} attempts: {last_log}");
    }

    /// The profile directory of this browser's Chromium (inside a temporary directory that is
    /// removed when the browser is dropped).
    pub fn profile_dir(&self) -> &Path {
        &self.profile
    }

    /// What chromedriver has logged so far.
    pub fn chromedriver_log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }

    /// Deletes the session, which closes Chromium, then stops chromedriver: what dropping does,
    /// without blocking the runtime while Chromium closes.
    pub async fn quit(mut self) {
        let _ = self.call(Method::DELETE, "", None).await;
        self.closed = true;
    }

    /// Sends a command and returns the `value` of its answer, or the WebDriver error it failed
    /// with. Panics when chromedriver does not answer at all.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, CommandError> {
        let url = format!("{}{path}", self.session_url);
        let mut request = self.client.request(method.clone(), &url);
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        let answer = match request.send().await {
            Ok(response) => response.text().await,
            Err(err) => Err(err),
        };
        let text = answer.unwrap_or_else(|err| {
            panic!(
                "{method} {url}: chromedriver did not answer ({err}); its log: {}",
                log_tail(&[&self.log_file], 20)
            )
        });
        let answer: Value = serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("{method} {url}: not JSON ({err}): {text}"));
        let value = answer.get("value").cloned().unwrap_or(Value::Null);
        match value.get("error").and_then(Value::as_str) {
            Some(error) => Err(CommandError {
                error: error.to_owned(),
                message: value["message"]
                    .as_str()
                    .unwrap_or_default()
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            }),
            None => Ok(value),
        }
    }

    /// Sends a command and returns the `value` of its answer; panics with the error and the
    /// page's URL when it fails.
    async fn command(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        match self.call(method.clone(), path, body).await {
            Ok(value) => value,
            Err(err) => {
                let page = self.page_url_for_errors().await;
                panic!("WebDriver {method} /session/<id>{path} on {page}: {err}")
            }
        }
    }

    /// The current URL for an error message, or why it is unknown.
    async fn page_url_for_errors(&self) -> String {
        match self.call(Method::GET, "/url", None).await {
            Ok(Value::String(url)) => url,
            Ok(other) => format!("(unexpected URL {other})"),
            Err(err) => format!("(URL unknown: {err})"),
        }
    }

    /// Loads `url` and waits until the page has loaded.
    pub async fn goto(&self, url: &str) {
        self.command(Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    /// The URL of the current page.
    pub async fn current_url(&self) -> String {
        string(self.command(Method::GET, "/url", None).await)
    }

    /// The title of the current page.
    pub async fn title(&self) -> String {
        string(self.command(Method::GET, "/title", None).await)
    }

    /// The current page's DOM serialized as HTML (after scripts ran, not the bytes served).
    pub async fn page_source(&self) -> String {
        string(self.command(Method::GET, "/source", None).await)
    }

    /// The ids of every element matching the CSS selector `css`, in document order.
    async fn find_all(&self, css: &str) -> Vec<String> {
        let body = json!({ "using": "css selector", "value": css });
        let value = self.command(Method::POST, "/elements", Some(body)).await;
        value
            .as_array()
            .into_iter()
            .flatten()
            .map(element_id)
            .collect()
    }

    /// The id of the first element matching `css`; panics naming the selector and the page's
    /// URL when there is none.
    async fn find(&self, css: &str) -> String {
        let body = json!({ "using": "css selector", "value": css });
        match self.call(Method::POST, "/element", Some(body)).await {
            Ok(value) => element_id(&value),
            Err(err) => {
                let page = self.page_url_for_errors().await;
                if err.error == "no such element" {
                    panic!("no element matches the selector `{css}` on {page}");
                }
                panic!("finding `{css}` on {page}: {err}")
            }
        }
    }

    /// How many elements match the CSS selector `css`.
    pub async fn count(&self, css: &str) -> usize {
        self.find_all(css).await.len()
    }

    /// Polls until an element matches `css`, for pages that render after they load. Panics
    /// naming the selector and the page's URL when none does within `limit`.
    pub async fn wait_for(&self, css: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.count(css).await == 0 {
            if Instant::now() > deadline {
                let page = self.page_url_for_errors().await;
                panic!("no element matched the selector `{css}` on {page} within {limit:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The visible text of the first element matching `css` (as rendered: hidden parts left
    /// out, whitespace collapsed). Panics naming the selector and the URL when none matches.
    pub async fn text(&self, css: &str) -> String {
        let id = self.find(css).await;
        self.element_text(&id).await
    }

    /// The visible text of every element matching `css`, in document order.
    pub async fn texts(&self, css: &str) -> Vec<String> {
        let mut texts = Vec::new();
        for id in self.find_all(css).await {
            texts.push(self.element_text(&id).await);
        }
        texts
    }

    async fn element_text(&self, id: &str) -> String {
        string(
            self.command(Method::GET, &format!("/element/{id}/text"), None)
                .await,
        )
    }

    /// The HTML attribute `name` of the first element matching `css`, `None` when the element
    /// does not have it. Panics when no element matches.
    pub async fn attribute(&self, css: &str, name: &str) -> Option<String> {
        let id = self.find(css).await;
        self.element_attribute(&id, name).await
    }

    async fn element_attribute(&self, id: &str, name: &str) -> Option<String> {
        let path = format!("/element/{id}/attribute/{name}");
        match self.command(Method::GET, &path, None).await {
            Value::Null => None,
            Value::String(value) => Some(value),
            other => Some(other.to_string()),
        }
    }

    /// The live DOM property `name` of the first element matching `css` (an input's `value` is
    /// what was typed), `null` when it is undefined. Panics when no element matches.
    pub async fn property(&self, css: &str, name: &str) -> Value {
        let id = self.find(css).await;
        self.command(Method::GET, &format!("/element/{id}/property/{name}"), None)
            .await
    }

    /// Clicks the first element matching `css` at its centre, scrolling it into view first, and
    /// waits for a page load the click starts. Panics when no element matches or the element
    /// cannot be clicked (hidden, or covered by another).
    pub async fn click(&self, css: &str) {
        let id = self.find(css).await;
        self.command(
            Method::POST,
            &format!("/element/{id}/click"),
            Some(json!({})),
        )
        .await;
    }

    /// Clears the first form field matching `css` and types `value` into it.
    pub async fn fill(&self, css: &str, value: &str) {
        let id = self.find(css).await;
        self.command(
            Method::POST,
            &format!("/element/{id}/clear"),
            Some(json!({})),
        )
        .await;
        let body = json!({ "text": value });
        self.command(Method::POST, &format!("/element/{id}/value"), Some(body))
            .await;
    }

    /// Presses and releases `key` on whatever element has focus, as a keyboard would.
    pub async fn press_key(&self, key: Key) {
        let code = key.code().to_string();
        self.key_actions(json!([
            { "type": "keyDown", "value": code },
            { "type": "keyUp", "value": code },
        ]))
        .await;
    }

    /// Presses Tab: focus moves to the next focusable element.
    pub async fn tab(&self) {
        self.press_key(Key::Tab).await;
    }

    /// Presses Shift+Tab: focus moves to the previous focusable element.
    pub async fn shift_tab(&self) {
        let (shift, tab) = (SHIFT.to_string(), Key::Tab.code().to_string());
        self.key_actions(json!([
            { "type": "keyDown", "value": shift },
            { "type": "keyDown", "value": tab },
            { "type": "keyUp", "value": tab },
            { "type": "keyUp", "value": shift },
        ]))
        .await;
    }

    /// Performs one sequence of key actions.
    async fn key_actions(&self, actions: Value) {
        let body = json!({ "actions": [{ "type": "key", "id": "keyboard", "actions": actions }] });
        self.command(Method::POST, "/actions", Some(body)).await;
    }

    /// The id of the element that has focus (the body when nothing else has).
    async fn active_element(&self) -> String {
        element_id(&self.command(Method::GET, "/element/active", None).await)
    }

    /// The visible text of the element that has focus.
    pub async fn active_element_text(&self) -> String {
        let id = self.active_element().await;
        self.element_text(&id).await
    }

    /// The HTML attribute `name` of the element that has focus (`id` tells which one it is).
    pub async fn active_element_attribute(&self, name: &str) -> Option<String> {
        let id = self.active_element().await;
        self.element_attribute(&id, name).await
    }

    /// Runs `script` as the body of a function called with `args` (read them as `arguments[0]`,
    /// ...) and returns what it returns; a returned promise is awaited. Panics when it throws.
    pub async fn execute(&self, script: &str, args: &[Value]) -> Value {
        let body = json!({ "script": script, "args": args });
        self.command(Method::POST, "/execute/sync", Some(body))
            .await
    }

    /// The messages of level SEVERE the page logged since the previous call: `console.error`
    /// calls, uncaught exceptions and failed loads (see the module documentation for their
    /// form). Messages of other levels since the previous call are discarded.
    pub async fn console_errors(&self) -> Vec<String> {
        let body = json!({ "type": "browser" });
        let entries = self.command(Method::POST, "/se/log", Some(body)).await;
        entries
            .as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| string(entry["message"].clone()))
            .collect()
    }

    /// The cookies visible to the current page, including HttpOnly ones.
    pub async fn cookies(&self) -> Vec<Cookie> {
        let value = self.command(Method::GET, "/cookie", None).await;
        serde_json::from_value(value.clone())
            .unwrap_or_else(|err| panic!("cookies in an unexpected form ({err}): {value}"))
    }

    /// Deletes the cookies visible to the current page.
    pub async fn delete_cookies(&self) {
        self.command(Method::DELETE, "/cookie", None).await;
    }

    /// Sets the outer window size in CSS pixels (390 wide for a phone-width check).
    pub async fn set_window_size(&self, width: u32, height: u32) {
        let body = json!({ "width": width, "height": height });
        self.command(Method::POST, "/window/rect", Some(body)).await;
    }

    /// A PNG image of the visible part of the page.
    pub async fn screenshot_png(&self) -> Vec<u8> {
        let encoded = string(self.command(Method::GET, "/screenshot", None).await);
        decode_base64(&encoded).unwrap_or_else(|err| {
            panic!("chromedriver sent a screenshot that is not base64: {err}")
        })
    }

    /// Writes [`Browser::screenshot_png`] to `path`.
    pub async fn save_screenshot(&self, path: &Path) {
        let png = self.screenshot_png().await;
        std::fs::write(path, png)
            .unwrap_or_else(|err| panic!("write the screenshot to {}: {err}", path.display()));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.closed {
            delete_session_blocking(self.port, &self.session_id);
        }
        self.chromedriver.kill_now();
        let deadline = Instant::now() + EXIT_TIMEOUT;
        loop {
            let left = processes_using_profile(&self.profile);
            if left.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                eprintln!(
                    "browser processes {left:?} still run {EXIT_TIMEOUT:?} after chromedriver was \
                     killed; profile {}",
                    self.profile.display()
                );
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The processes whose command line names `profile` as their `--user-data-dir`: the browser's
/// processes while it runs. Exited processes that no parent has reaped have no command line and
/// do not count.
pub fn processes_using_profile(profile: &Path) -> Vec<u32> {
    let flag = format!("--user-data-dir={}", profile.display());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| cmdline.split(|b| *b == 0).any(|arg| arg == flag.as_bytes()))
        })
        .collect()
}

/// Starts chromedriver on `port` and waits until it listens there. `None` when it exits because
/// another process has the port.
async fn start_chromedriver(dir: &Path, port: u16, log_file: &Path) -> Option<ChildProcess> {
    let mut command = Command::new(CHROMEDRIVER);
    command
        .arg(format!("--port={port}"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_CACHE_HOME", dir.join("cache"));
    let mut process = ChildProcess::spawn(command, dir, log_file, log_file)
        .unwrap_or_else(|err| panic!("could not run {CHROMEDRIVER}: {err:?}; {INSTALL_HINT}"));
    let (process, waited) = tokio::task::spawn_blocking(move || {
        let waited = process.wait_until_serving(START_TIMEOUT, port, || true);
        (process, waited)
    })
    .await
    .expect("the wait for chromedriver does not panic");
    match waited {
        Ok(()) => Some(process),
        Err(StartFailure::Exited(status)) => {
            let log = log_tail(&[log_file], 20);
            if log.contains("port not available") {
                return None;
            }
            panic!("chromedriver exited ({status}) before it listened: {log}");
        }
        Err(StartFailure::NotReady(limit)) => panic!(
            "chromedriver did not listen on port {port} within {limit:?}: {}",
            log_tail(&[log_file], 20)
        ),
    }
}

/// Polls chromedriver's `GET /status` until it says it is ready for new sessions.
async fn wait_until_ready(client: &reqwest::Client, port: u16, log_file: &Path) {
    let url = format!("http://127.0.0.1:{port}/status");
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let status = match client.get(&url).send().await {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        let ready = serde_json::from_str::<Value>(&status)
            .is_ok_and(|status| status["value"]["ready"] == true);
        if ready {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "chromedriver was not ready within {START_TIMEOUT:?} (last status {status:?}): {}",
            log_tail(&[log_file], 20)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Opens a session on a fresh headless Chromium with its profile in `profile` and returns the
/// session id.
async fn create_session(
    client: &reqwest::Client,
    port: u16,
    profile: &Path,
    log_file: &Path,
) -> String {
    let args = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        // Chromium exits when chromedriver does (see the module documentation).
        "--remote-debugging-pipe",
    ]
    .map(String::from)
    .into_iter()
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect::<Vec<_>>();
    let capabilities = json!({
        "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            // Tests serve HTTPS with certificates of a private CA made for the test.
            "acceptInsecureCerts": true,
            "goog:chromeOptions": { "binary": CHROMIUM, "args": args },
            "goog:loggingPrefs": { "browser": "ALL" },
            "timeouts": { "implicit": 0, "pageLoad": 30_000, "script": 30_000 },
        } }
    });
    let url = format!("http://127.0.0.1:{port}/session");
    let text = match client
        .post(&url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(capabilities.to_string())
        .send()
        .await
    {
        Ok(response) => response.text().await.unwrap_or_default(),
        Err(err) => format!("no answer: {err}"),
    };
    let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    match answer["value"]["sessionId"].as_str() {
        Some(id) => id.to_owned(),
        None => panic!(
            "chromedriver could not start {CHROMIUM}: {}; chromedriver's log: {}",
            answer["value"]["message"].as_str().unwrap_or(&text),
            log_tail(&[log_file], 20)
        ),
    }
}

/// Deletes a session with a plain blocking HTTP request, for [`Drop`], which cannot await.
/// Chromium closes before chromedriver answers. Errors are ignored: killing chromedriver next
/// closes Chromium anyway.
fn delete_session_blocking(port: u16, session_id: &str) {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_secs(1)) else {
        return;
    };
    let _ = stream.set_read_timeout(Some(EXIT_TIMEOUT));
    let _ = stream.set_write_timeout(Some(EXIT_TIMEOUT));
    let request = format!(
        "DELETE /session/{session_id} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return;
    }
    // Chromedriver answers `Connection: close` but keeps the connection open, so the answer
    // ends where its Content-Length says, not at the end of the stream.
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    while !response_complete(&answer) {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
        }
    }
}

/// True when `bytes` hold a whole HTTP response: its head and as many body bytes as its
/// Content-Length says (none without one).
fn response_complete(bytes: &[u8]) -> bool {
    let Some(head_end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&bytes[..head_end]);
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    bytes.len() >= head_end + 4 + length
}

/// The element id in a WebDriver element reference.
fn element_id(reference: &Value) -> String {
    match reference[ELEMENT_KEY].as_str() {
        Some(id) => id.to_owned(),
        None => panic!("chromedriver sent {reference} where an element was expected"),
    }
}

/// A string a command returned, or the JSON text of anything else.
fn string(value: Value) -> String {
    match value {
        Value::String(text) => text,
        other => other.to_string(),
    }
}

/// Decodes standard base64 (RFC 4648, with or without padding; line breaks ignored).
fn decode_base64(text: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::with_capacity(text.len() / 4 * 3);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let sextet = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            b'\r' | b'\n' => continue,
            other => return Err(format!("{:?} is not a base64 character", char::from(other))),
        };
        buffer = (buffer << 6) | u32::from(sextet);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests;
