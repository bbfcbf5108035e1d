//! The test configuration a server publishes at `/.well-known/nq`,
//! draft-ietf-ippm-responsiveness-09 section 8.1 ("Well-Known Uniform Resource Identifier
//! (URI) For Test Server Discovery"):
//!
//! ```json
//! {"version": 1,
//!  "urls": {"large_download_url": "...", "small_download_url": "...", "upload_url": "..."},
//!  "test_endpoint": "optional host name to connect to instead"}
//! ```
//!
//! What the draft says and what we do:
//! * `version` must be 1, the three URLs must each be present exactly once, and a config
//!   that breaks either "MUST be ignored": we refuse it with an error naming the field
//!   (JSON objects with a repeated name are refused too).
//! * The three URLs "MUST contain the same host": we refuse a config whose URLs differ in
//!   host, and also in scheme or port, because self probes go on the load connections (one
//!   connection serves all three URLs).
//! * Unknown names are ignored. The older names `large_https_download_url`,
//!   `small_https_download_url` and `https_upload_url` (which deployed servers still
//!   publish, and some only those) are read when the draft's name is absent.
//! * `test_endpoint`, when present, is the host to connect to; requests still carry the
//!   URLs' host.

use http::Uri;
use serde::Deserialize;

/// The path of the well-known config.
pub const WELL_KNOWN_PATH: &str = "/.well-known/nq";

/// A usable test configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestConfig {
    /// The large object (GET for download load).
    pub large: Uri,
    /// The 1-byte object (GET for probes).
    pub small: Uri,
    /// The upload sink (POST for upload load).
    pub upload: Uri,
    /// `https` (true) or `http`.
    pub tls: bool,
    /// The URLs' host (for TLS server name and the requests' authority), without
    /// brackets for IPv6.
    pub host: String,
    /// The URLs' port.
    pub port: u16,
    /// Where to connect instead of `host`, when the config says so.
    pub test_endpoint: Option<String>,
}

/// Why a config is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not a JSON object of the right shape (this includes a repeated name).
    #[error("the config is not valid: {0}")]
    Invalid(String),
    /// `version` is not 1.
    #[error("the config has version {0}; this client reads version 1 only")]
    Version(u64),
    /// No `urls` object or none of the three URLs.
    #[error("the config has no test URLs (large_download_url, small_download_url, upload_url)")]
    NoUrls,
    /// One URL is missing.
    #[error("the config has no {0}")]
    Missing(&'static str),
    /// A URL that is not an absolute http or https URL.
    #[error("the config's {field} `{url}` is not an http or https URL{why}")]
    BadUrl {
        /// The field.
        field: &'static str,
        /// Its value.
        url: String,
        /// More detail, starting with ": " when any.
        why: String,
    },
    /// The URLs are not on one host (and scheme and port).
    #[error(
        "the config's URLs are on different hosts ({a} and {b}); the draft requires one host, and self probes need one connection to serve all three"
    )]
    DifferentHosts {
        /// One origin.
        a: String,
        /// Another.
        b: String,
    },
}

#[derive(Debug, Deserialize)]
struct Doc {
    version: serde_json::Value,
    #[serde(default)]
    urls: Option<Urls>,
    #[serde(default)]
    test_endpoint: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Urls {
    large_download_url: Option<String>,
    small_download_url: Option<String>,
    upload_url: Option<String>,
    large_https_download_url: Option<String>,
    small_https_download_url: Option<String>,
    https_upload_url: Option<String>,
}

/// Parses and checks a config document.
pub fn parse(body: &[u8]) -> Result<TestConfig, ConfigError> {
    let doc: Doc = serde_json::from_slice(body).map_err(|e| ConfigError::Invalid(e.to_string()))?;
    match doc.version.as_u64() {
        Some(1) => {}
        Some(v) => return Err(ConfigError::Version(v)),
        None => {
            return Err(ConfigError::Invalid(format!(
                "version is {} , not the number 1",
                doc.version
            )));
        }
    }
    let urls = doc.urls.unwrap_or_default();
    let large = urls.large_download_url.or(urls.large_https_download_url);
    let small = urls.small_download_url.or(urls.small_https_download_url);
    let upload = urls.upload_url.or(urls.https_upload_url);
    if large.is_none() && small.is_none() && upload.is_none() {
        return Err(ConfigError::NoUrls);
    }
    let large = url("large_download_url", large)?;
    let small = url("small_download_url", small)?;
    let upload = url("upload_url", upload)?;
    let origin = |u: &Uri| {
        format!(
            "{}://{}:{}",
            u.scheme_str().unwrap_or(""),
            u.host().unwrap_or(""),
            port_of(u)
        )
    };
    for other in [&small, &upload] {
        if origin(other) != origin(&large) {
            return Err(ConfigError::DifferentHosts {
                a: origin(&large),
                b: origin(other),
            });
        }
    }
    if let Some(e) = doc
        .test_endpoint
        .as_deref()
        .filter(|e| e.is_empty() || e.contains(['/', ' ', '@']))
    {
        return Err(ConfigError::Invalid(format!(
            "test_endpoint `{e}` is not a host name"
        )));
    }
    Ok(TestConfig {
        tls: large.scheme_str() == Some("https"),
        host: large
            .host()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
        port: port_of(&large),
        large,
        small,
        upload,
        test_endpoint: doc.test_endpoint,
    })
}

fn port_of(u: &Uri) -> u16 {
    u.port_u16().unwrap_or(if u.scheme_str() == Some("https") {
        443
    } else {
        80
    })
}

fn url(field: &'static str, v: Option<String>) -> Result<Uri, ConfigError> {
    let v = v.ok_or(ConfigError::Missing(field))?;
    let bad = |why: String| ConfigError::BadUrl {
        field,
        url: v.clone(),
        why,
    };
    let u: Uri = v
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(format!(": {e}")))?;
    match u.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(bad(String::new())),
    }
    if u.host().is_none_or(str::is_empty) {
        return Err(bad(": no host".into()));
    }
    if u.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(bad(": user information is not allowed".into()));
    }
    Ok(u)
}

/// The config URL for what the user typed: a URL as it is (http or https; without a
/// path, the well-known path is added), or a host (`example.net`, `example.net:8443`,
/// `[::1]:8443`) as `https://HOST[:PORT]/.well-known/nq`.
pub fn config_url(arg: &str) -> Result<Uri, String> {
    let text = match arg.split_once("://") {
        Some((scheme, rest)) if !rest.contains('/') => match rest.split_once('?') {
            Some((authority, query)) => format!("{scheme}://{authority}{WELL_KNOWN_PATH}?{query}"),
            None => format!("{scheme}://{rest}{WELL_KNOWN_PATH}"),
        },
        Some((scheme, rest)) if rest.ends_with('/') && rest.find('/') == Some(rest.len() - 1) => {
            format!("{scheme}://{}{WELL_KNOWN_PATH}", &rest[..rest.len() - 1])
        }
        Some(_) => arg.to_owned(),
        None => format!("https://{arg}{WELL_KNOWN_PATH}"),
    };
    let u: Uri = text
        .parse()
        .map_err(|e| format!("`{arg}` is not a URL or a host: {e}"))?;
    match u.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(format!("`{arg}`: only http and https URLs are supported")),
    }
    if u.host().is_none_or(str::is_empty) || u.authority().is_some_and(|a| a.as_str().contains('@'))
    {
        return Err(format!("`{arg}` has no usable host"));
    }
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: &str = r#"{"version":1,"urls":{"large_download_url":"https://nq.example:8443/api/v1/large","small_download_url":"https://nq.example:8443/api/v1/small","upload_url":"https://nq.example:8443/api/v1/upload","large_https_download_url":"https://nq.example:8443/api/v1/large","small_https_download_url":"https://nq.example:8443/api/v1/small","https_upload_url":"https://nq.example:8443/api/v1/upload"}}"#;

    #[test]
    fn reads_the_drafts_document_and_ignores_unknown_names() {
        let c = parse(OURS.as_bytes()).unwrap();
        assert_eq!(c.large, "https://nq.example:8443/api/v1/large");
        assert_eq!(c.small.path(), "/api/v1/small");
        assert_eq!((c.tls, c.host.as_str(), c.port), (true, "nq.example", 8443));
        let c = parse(
            br#"{"version":1,"future":{"x":1},"urls":{"large_download_url":"http://[::1]/l","small_download_url":"http://[::1]/s","upload_url":"http://[::1]/u?key=k"},"test_endpoint":"edge.example"}"#,
        )
        .unwrap();
        assert_eq!((c.tls, c.host.as_str(), c.port), (false, "::1", 80));
        assert_eq!(c.upload.query(), Some("key=k"));
        assert_eq!(c.test_endpoint.as_deref(), Some("edge.example"));
    }

    #[test]
    fn legacy_https_names_are_read_when_the_drafts_are_absent() {
        let c = parse(br#"{"version":1,"urls":{"large_https_download_url":"https://h/l","small_https_download_url":"https://h/s","https_upload_url":"https://h/u"}}"#).unwrap();
        assert_eq!(c.large, "https://h/l");
        assert_eq!(c.port, 443);
    }

    #[test]
    fn bad_documents_are_refused_naming_the_problem() {
        let e = |s: &str| parse(s.as_bytes()).unwrap_err();
        assert_eq!(e(r#"{"version":1}"#), ConfigError::NoUrls);
        assert_eq!(e(r#"{"version":1,"urls":{}}"#), ConfigError::NoUrls);
        assert_eq!(
            e(
                r#"{"version":1,"urls":{"large_download_url":"https://h/l","upload_url":"https://h/u"}}"#
            ),
            ConfigError::Missing("small_download_url")
        );
        assert_eq!(e(r#"{"version":2,"urls":{}}"#), ConfigError::Version(2));
        assert!(matches!(e("not json"), ConfigError::Invalid(_)));
        assert!(matches!(e(r#"{"urls":{}}"#), ConfigError::Invalid(_)));
        // A name twice: the draft says the whole object is invalid.
        let dup = e(
            r#"{"version":1,"urls":{"large_download_url":"https://h/l","large_download_url":"https://h/m","small_download_url":"https://h/s","upload_url":"https://h/u"}}"#,
        );
        assert!(dup.to_string().contains("duplicate field"), "{dup}");
        let other = e(
            r#"{"version":1,"urls":{"large_download_url":"https://a/l","small_download_url":"https://a/s","upload_url":"https://b/u"}}"#,
        );
        assert_eq!(
            other,
            ConfigError::DifferentHosts {
                a: "https://a:443".into(),
                b: "https://b:443".into()
            }
        );
        assert!(other.to_string().contains("different hosts"), "{other}");
        let port = e(
            r#"{"version":1,"urls":{"large_download_url":"https://a/l","small_download_url":"https://a:444/s","upload_url":"https://a/u"}}"#,
        );
        assert!(matches!(port, ConfigError::DifferentHosts { .. }));
        let ftp = e(
            r#"{"version":1,"urls":{"large_download_url":"ftp://a/l","small_download_url":"https://a/s","upload_url":"https://a/u"}}"#,
        );
        assert!(
            ftp.to_string()
                .contains("large_download_url `ftp://a/l` is not an http or https URL"),
            "{ftp}"
        );
        let rel = e(
            r#"{"version":1,"urls":{"large_download_url":"/l","small_download_url":"https://a/s","upload_url":"https://a/u"}}"#,
        );
        assert!(
            matches!(
                rel,
                ConfigError::BadUrl {
                    field: "large_download_url",
                    ..
                }
            ),
            "{rel}"
        );
    }

    #[test]
    fn a_host_becomes_the_https_well_known_url() {
        assert_eq!(
            config_url("nq.example").unwrap(),
            "https://nq.example/.well-known/nq"
        );
        assert_eq!(
            config_url("127.0.0.1:8443").unwrap(),
            "https://127.0.0.1:8443/.well-known/nq"
        );
        assert_eq!(config_url("[::1]:8443").unwrap().host(), Some("[::1]"));
        assert_eq!(
            config_url("http://h:8080/.well-known/nq?key=k")
                .unwrap()
                .query(),
            Some("key=k")
        );
        // A URL without a path gets the well-known one.
        assert_eq!(
            config_url("https://127.0.0.1:8443").unwrap(),
            "https://127.0.0.1:8443/.well-known/nq"
        );
        assert_eq!(config_url("http://h/").unwrap(), "http://h/.well-known/nq");
        assert_eq!(
            config_url("http://h:80?key=k").unwrap(),
            "http://h:80/.well-known/nq?key=k"
        );
        assert_eq!(
            config_url("https://h/other/nq").unwrap().path(),
            "/other/nq"
        );
        assert!(config_url("ftp://h/").is_err());
        assert!(config_url("a b").is_err());
        assert!(config_url("https://u@h/").is_err());
    }
}
