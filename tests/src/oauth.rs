//! Playing the user agent in OAuth tests: GET an authorization URL without
//! following its redirect, and read where it points (the callback with the
//! code). Plain HTTP to loopback only, bounded, blocking.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// `host:port` and the target of an `http://` URL.
fn split_url(url: &str) -> Result<(&str, &str), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("not an http URL: {url}"))?;
    Ok(match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    })
}

/// GETs `url` without following a redirect; returns the status line and
/// the `Location` header.
pub fn get_head(url: &str) -> Result<(String, Option<String>), String> {
    let (authority, target) = split_url(url)?;
    let mut s = TcpStream::connect(authority).map_err(|e| format!("{url}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("{url}: {e}")),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let status = text.lines().next().unwrap_or_default().to_owned();
    let location = text.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim()
            .eq_ignore_ascii_case("location")
            .then(|| v.trim().to_owned())
    });
    Ok((status, location))
}

/// The authorization server's redirect for `url` (its `Location`).
pub fn fetch_redirect(url: &str) -> Result<String, String> {
    match get_head(url)? {
        (_, Some(location)) => Ok(location),
        (status, None) => Err(format!("{url} answered {status:?} without a Location")),
    }
}

/// POSTs an empty body to `url` (a test control endpoint such as the test
/// server's `/oauth/expire`); returns the status line.
pub fn post_empty(url: &str) -> Result<String, String> {
    let (authority, target) = split_url(url)?;
    let mut s = TcpStream::connect(authority).map_err(|e| format!("{url}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "POST {target} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)
        .map_err(|e| format!("{url}: {e}"))?;
    let text = String::from_utf8_lossy(&answer);
    Ok(text.lines().next().unwrap_or_default().to_owned())
}
