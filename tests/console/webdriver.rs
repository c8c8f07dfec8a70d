//! A small W3C WebDriver client over reqwest, driving Debian's `chromium` through its
//! `chromedriver`, both started here on free loopback ports. The handful of commands the
//! console tests use do not justify a WebDriver crate's build; chromedriver's browser log
//! (`/se/log`), which the tests read for console errors, is not in the W3C set anyway.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A chromedriver child and one browser session.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

/// One entry of the browser's console log.
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// `SEVERE`, `WARNING`, `INFO`, …
    pub level: String,
    /// The message as Chromium wrote it.
    pub message: String,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Browser {
    /// Starts chromedriver and a headless Chromium window of `width` × `height`. Fails, naming
    /// the packages, when Chromium is not installed (`.ci/run` installs it).
    pub async fn start(width: u32, height: u32) -> Browser {
        for bin in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(bin).exists(),
                "{bin} is missing: the console's browser tests need Debian's `chromium` and \
                 `chromium-driver` (`apt-get install -y --no-install-recommends chromium \
                 chromium-driver`, as .ci/run does)"
            );
        }
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = match http.get(format!("{base}/status")).send().await {
                Ok(r) => r
                    .json::<Value>()
                    .await
                    .ok()
                    .map(|v| v["value"]["ready"] == true),
                Err(_) => None,
            };
            if ready == Some(true) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not get ready in 60 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--no-first-run", "--disable-extensions", "--hide-scrollbars",
                         format!("--user-data-dir={}", profile.path().display()),
                         format!("--window-size={width},{height}")],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
            "timeouts": {"script": 30000, "pageLoad": 60000},
        }}});
        let resp: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await
            .expect("chromedriver answers")
            .json()
            .await
            .unwrap();
        let session = resp["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no browser session: {resp}"))
            .to_owned();
        Browser {
            driver,
            base,
            session,
            http,
            _profile: profile,
        }
    }

    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut req = self.http.request(method, url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp: Value = req
            .send()
            .await
            .expect("chromedriver answers")
            .json()
            .await
            .unwrap();
        if let Some(err) = resp["value"]["error"].as_str() {
            panic!("WebDriver {path}: {err}: {}", resp["value"]["message"]);
        }
        resp["value"].clone()
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// Runs `script` (a function body; `arguments[i]` are `args`) in the page; its result.
    pub async fn eval(&self, script: &str, args: Value) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    /// The first element matching `css`, if any.
    pub async fn find(&self, css: &str) -> Option<String> {
        let url = format!("{}/session/{}/element", self.base, self.session);
        let resp: Value = self
            .http
            .post(url)
            .json(&json!({"using": "css selector", "value": css}))
            .send()
            .await
            .expect("chromedriver answers")
            .json()
            .await
            .unwrap();
        match resp["value"]["error"].as_str() {
            None => {}
            Some("no such element") => return None,
            Some(e) => panic!("WebDriver find {css}: {e}: {}", resp["value"]["message"]),
        }
        // An element reference is an object with one member, named by the W3C's constant.
        let id = resp["value"]["element-6066-11e4-a52e-4f735466cecf"].as_str();
        Some(
            id.unwrap_or_else(|| panic!("not an element: {resp}"))
                .to_owned(),
        )
    }

    /// Clicks the element matching `css` as a user would (WebDriver's element click: scrolled
    /// into view, hit-tested, real pointer events); panics when there is none.
    pub async fn click(&self, css: &str) {
        let el = self
            .find(css)
            .await
            .unwrap_or_else(|| panic!("nothing matches {css}"));
        self.command(
            reqwest::Method::POST,
            &format!("/element/{el}/click"),
            Some(json!({})),
        )
        .await;
    }

    /// Types `text` into the element matching `css` (key events, as a user types).
    pub async fn type_into(&self, css: &str, text: &str) {
        let el = self
            .find(css)
            .await
            .unwrap_or_else(|| panic!("nothing matches {css}"));
        self.command(
            reqwest::Method::POST,
            &format!("/element/{el}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// `textContent` of the element matching `css` (`None` when there is none).
    pub async fn text(&self, css: &str) -> Option<String> {
        self.eval(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
            json!([css]),
        )
        .await
        .as_str()
        .map(str::to_owned)
    }

    /// An attribute of the element matching `css`.
    pub async fn attr(&self, css: &str, name: &str) -> Option<String> {
        self.eval(
            "const e = document.querySelector(arguments[0]); return e ? e.getAttribute(arguments[1]) : null;",
            json!([css, name]),
        )
        .await
        .as_str()
        .map(str::to_owned)
    }

    /// Runs a Chrome DevTools Protocol command through chromedriver.
    pub async fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.command(
            reqwest::Method::POST,
            "/goog/cdp/execute",
            Some(json!({"cmd": cmd, "params": params})),
        )
        .await
    }

    /// Resizes the window.
    pub async fn resize(&self, width: u32, height: u32) {
        self.command(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .await;
    }

    /// The browser's console entries since the last call (chromedriver drains them).
    pub async fn logs(&self) -> Vec<LogEntry> {
        let v = self
            .command(
                reqwest::Method::POST,
                "/se/log",
                Some(json!({"type": "browser"})),
            )
            .await;
        v.as_array()
            .into_iter()
            .flatten()
            .map(|e| LogEntry {
                level: e["level"].as_str().unwrap_or_default().to_owned(),
                message: e["message"].as_str().unwrap_or_default().to_owned(),
            })
            .collect()
    }

    /// A PNG of the viewport, written to `path`.
    pub async fn screenshot(&self, path: &std::path::Path) {
        use base64::Engine;
        let v = self
            .command(reqwest::Method::GET, "/screenshot", None)
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().expect("base64 PNG"))
            .unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    /// Ends the session with a blocking request (a failed test too leaves no browser behind),
    /// then chromedriver.
    fn drop(&mut self) {
        use std::io::{Read, Write};
        let addr = self.base.trim_start_matches("http://").to_owned();
        if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
            let _ = write!(
                s,
                "DELETE /session/{} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                self.session
            );
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Polls `check` until it yields a value or `timeout` passes; panics naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
