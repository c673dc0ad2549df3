//! The page: one HTML file, its script and its style sheet, compiled into the binary (no CDN,
//! nothing fetched: it works with no network).

/// An embedded file: its content type and bytes.
pub(crate) struct Asset {
    pub content_type: &'static str,
    pub bytes: &'static [u8],
}

/// The file served at `path`, if any.
pub(crate) fn asset(path: &str) -> Option<Asset> {
    let (content_type, bytes): (&str, &[u8]) = match path {
        "/" | "/index.html" => (
            "text/html; charset=utf-8",
            include_bytes!("../assets/index.html"),
        ),
        "/app.js" => (
            "text/javascript; charset=utf-8",
            include_bytes!("../assets/app.js"),
        ),
        "/app.css" => (
            "text/css; charset=utf-8",
            include_bytes!("../assets/app.css"),
        ),
        "/favicon.svg" => ("image/svg+xml", include_bytes!("../assets/favicon.svg")),
        _ => return None,
    };
    Some(Asset {
        content_type,
        bytes,
    })
}

/// What the page may load and run: its own files only. Plugin text reaches the page as data
/// and is shown as text; even if some did end up in the document, no inline script would run.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";
