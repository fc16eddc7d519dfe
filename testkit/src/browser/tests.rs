//! The WebDriver client (unit tests of the crate, so that no test binary of its own is linked)
//! against a real headless Chromium and a tiny local HTTP server that
//! serves one fixed page.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::Duration;

use super::{decode_base64, processes_using_profile, response_complete, Browser};
use serde_json::json;

/// A form that copies its input into `#out` on submit, a list, a link, and a console error.
const PAGE: &str = r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Browser test page</title></head>
<body>
<h1 id="heading">Fleet   overview</h1>
<p hidden id="secret">not shown</p>
<form id="form">
  <label for="name">Name</label>
  <input id="name" name="name" value="initial">
  <button id="copy" type="submit">Copy</button>
</form>
<div id="out"></div>
<ul><li>one</li><li>two</li><li>three</li></ul>
<a id="link" href="/other">Other page</a>
<script>
  console.error("boom");
  console.log("not an error");
  document.getElementById("form").addEventListener("submit", function (event) {
    event.preventDefault();
    document.getElementById("out").textContent =
      "copied: " + document.getElementById("name").value;
  });
</script>
</body>
</html>
"#;

/// Serves `PAGE` with two cookies for `/`, an empty answer for the favicon and a 404 for
/// anything else, on a free loopback port, from a thread; returns the base URL.
fn serve_page() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let url = format!(
        "http://{}",
        listener.local_addr().expect("the listener's address")
    );
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request_line = String::new();
            let mut reader = BufReader::new(&stream);
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            // Read the headers to their end; there is no body in a GET.
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let path = request_line.split_whitespace().nth(1).unwrap_or_default();
            let response = match path {
                "/" => format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
                     Set-Cookie: session=s3cr3t; Path=/; HttpOnly; SameSite=Strict\r\n\
                     Set-Cookie: theme=dark; Path=/\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
                    PAGE.len()
                ),
                "/favicon.ico" => "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n".to_owned(),
                _ => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_owned(),
            };
            let _ = stream.write_all(response.as_bytes());
        }
    });
    url
}

#[tokio::test]
async fn drives_a_page_through_chromium() {
    let url = serve_page();
    let started = std::time::Instant::now();
    let browser = Browser::start().await;
    eprintln!("the browser started in {:?}", started.elapsed());
    let profile = browser.profile_dir().to_owned();
    assert!(
        !processes_using_profile(&profile).is_empty(),
        "the running browser's processes are found by their profile"
    );

    browser.goto(&format!("{url}/")).await;
    assert_eq!(browser.current_url().await, format!("{url}/"));
    assert_eq!(browser.title().await, "Browser test page");
    assert!(browser.page_source().await.contains("id=\"out\""));

    // Text is the rendered text: whitespace collapsed, hidden elements empty.
    assert_eq!(browser.text("#heading").await, "Fleet overview");
    assert_eq!(browser.text("#secret").await, "");
    assert_eq!(browser.texts("li").await, ["one", "two", "three"]);
    assert_eq!(browser.count("li").await, 3);
    assert_eq!(browser.count("table").await, 0);
    browser
        .execute(
            "setTimeout(() => document.body.append(document.createElement('table')), 100)",
            &[],
        )
        .await;
    browser.wait_for("table", Duration::from_secs(5)).await;
    assert_eq!(
        browser.attribute("#link", "href").await.as_deref(),
        Some("/other")
    );
    assert_eq!(browser.attribute("#link", "title").await, None);

    // Filling and clicking the submit button runs the page's script.
    browser.fill("#name", "cluster-7").await;
    assert_eq!(browser.property("#name", "value").await, json!("cluster-7"));
    assert_eq!(
        browser.attribute("#name", "value").await.as_deref(),
        Some("initial"),
        "the attribute keeps what the HTML said"
    );
    browser.click("#copy").await;
    assert_eq!(browser.text("#out").await, "copied: cluster-7");

    // Console errors: only the SEVERE entries, and each only once.
    let errors = browser.console_errors().await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("\"boom\""), "{errors:?}");
    assert_eq!(browser.console_errors().await, Vec::<String>::new());
    browser
        .execute("setTimeout(() => { throw new Error('late') }, 0)", &[])
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let errors = browser.console_errors().await;
    assert!(
        errors.len() == 1 && errors[0].contains("Uncaught Error: late"),
        "{errors:?}"
    );

    // The keyboard moves focus in document order.
    browser
        .execute("document.getElementById('name').focus()", &[])
        .await;
    assert_eq!(
        browser.active_element_attribute("id").await.as_deref(),
        Some("name")
    );
    browser.tab().await;
    assert_eq!(browser.active_element_text().await, "Copy");
    browser.tab().await;
    assert_eq!(
        browser.active_element_attribute("id").await.as_deref(),
        Some("link")
    );
    browser.shift_tab().await;
    assert_eq!(
        browser.active_element_attribute("id").await.as_deref(),
        Some("copy")
    );

    // Scripts get their arguments and return JSON.
    let sum = browser
        .execute("return arguments[0] + arguments[1]", &[json!(2), json!(3)])
        .await;
    assert_eq!(sum, json!(5));

    // Cookies, HttpOnly ones included.
    let mut cookies = browser.cookies().await;
    cookies.sort_by(|a, b| a.name.cmp(&b.name));
    let names: Vec<&str> = cookies.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["session", "theme"], "{cookies:?}");
    let session = &cookies[0];
    assert_eq!(session.value, "s3cr3t");
    assert!(session.http_only && !session.secure, "{session:?}");
    assert_eq!(session.same_site, "Strict");
    assert_eq!(session.path, "/");
    assert_eq!(session.expiry, None);
    let theme = &cookies[1];
    assert!(!theme.http_only, "{theme:?}");
    eprintln!("a cookie set without SameSite: {theme:?}");
    browser.delete_cookies().await;
    assert_eq!(browser.cookies().await, []);

    // A phone-width window.
    browser.set_window_size(390, 800).await;
    assert_eq!(
        browser.execute("return window.innerWidth", &[]).await,
        json!(390)
    );

    // A screenshot is a PNG of some size.
    let png = browser.screenshot_png().await;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{:?}", &png[..16]);
    assert!(png.len() > 2000, "a screenshot of {} bytes", png.len());
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let file = dir.path().join("page.png");
    browser.save_screenshot(&file).await;
    let saved = std::fs::read(&file).expect("read the saved screenshot");
    assert!(saved.starts_with(b"\x89PNG"));

    // Loading another page.
    browser.click("#link").await;
    assert_eq!(browser.current_url().await, format!("{url}/other"));

    let stopping = std::time::Instant::now();
    browser.quit().await;
    eprintln!("the browser quit in {:?}", stopping.elapsed());
    assert_eq!(
        processes_using_profile(&profile),
        Vec::<u32>::new(),
        "no browser process outlives quit"
    );
}

#[tokio::test]
async fn a_missing_element_fails_naming_it_and_a_panic_leaves_no_browser_running() {
    let url = serve_page();
    let browser = Browser::start().await;
    let profile = browser.profile_dir().to_owned();
    browser.goto(&url).await;
    // The browser moves into the task and is dropped while its panic unwinds.
    let failed = tokio::spawn(async move { browser.text("#missing").await })
        .await
        .expect_err("no element matches");
    let panic = failed.into_panic();
    let message = panic
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(
        message.contains("`#missing`") && message.contains(&format!("{url}/")),
        "{message}"
    );
    assert_eq!(
        processes_using_profile(&profile),
        Vec::<u32>::new(),
        "no browser process outlives a panic"
    );
}

#[test]
fn base64_decodes_with_and_without_padding() {
    assert_eq!(decode_base64("TWFu").unwrap(), b"Man");
    assert_eq!(decode_base64("TWE=").unwrap(), b"Ma");
    assert_eq!(decode_base64("TQ==").unwrap(), b"M");
    assert_eq!(decode_base64("TQ").unwrap(), b"M");
    assert_eq!(decode_base64("").unwrap(), b"");
    assert_eq!(
        decode_base64("iVBORw0K\nGgo=").unwrap(),
        b"\x89PNG\r\n\x1a\n"
    );
    assert!(decode_base64("TW-u").is_err());
}

#[test]
fn a_response_is_complete_when_its_body_has_its_length() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Length:14\r\nConnection:close\r\n\r\n";
    assert!(!response_complete(&head[..20]));
    assert!(!response_complete(head));
    let whole = [&head[..], b"{\"value\":null}"].concat();
    assert!(!response_complete(&whole[..whole.len() - 1]));
    assert!(response_complete(&whole));
    assert!(response_complete(b"HTTP/1.1 204 No Content\r\n\r\n"));
}
