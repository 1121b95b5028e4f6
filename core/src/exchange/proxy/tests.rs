//! Tests of the proxy settings: proxy URLs, `NO_PROXY`, the environment
//! and the route each URL takes.

use super::*;
use std::collections::HashMap;

fn url(u: &str) -> HttpUrl {
    HttpUrl::parse(u).unwrap()
}

fn env(pairs: &[(&str, &str)]) -> ProxyEnv {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ProxyEnv::from_lookup(|k| map.get(k).cloned())
}

fn via(p: &Proxies, u: &str) -> Option<String> {
    match p.route(&url(u)).unwrap() {
        Route::Direct => None,
        Route::Via(proxy) => Some(proxy.to_string()),
    }
}

#[test]
fn proxy_urls() {
    let p = ProxyUrl::parse("http://Proxy.Corp:3128/", "x").unwrap();
    assert_eq!((p.host(), p.port(), p.user()), ("proxy.corp", 3128, None));
    assert_eq!(p.authorization(), None);
    assert_eq!(p.to_string(), "http://proxy.corp:3128");

    let p = ProxyUrl::parse("proxy.corp", "x").unwrap();
    assert_eq!((p.host(), p.port()), ("proxy.corp", 80));

    let p = ProxyUrl::parse("http://al%40ice:p%3Ass:w@[::1]:8080", "x").unwrap();
    assert_eq!(
        (p.host(), p.host_unbracketed(), p.port()),
        ("[::1]", "::1", 8080)
    );
    assert_eq!(p.user(), Some("al@ice"));
    // base64("al@ice:p:ss:w")
    assert_eq!(
        p.authorization().unwrap(),
        format!("Basic {}", STANDARD.encode("al@ice:p:ss:w"))
    );
    assert_eq!(p.to_string(), "http://al@ice@[::1]:8080");
    assert!(!format!("{p:?}").contains("p:ss"));

    let p = ProxyUrl::parse("http://user@h:1", "x").unwrap();
    assert_eq!(
        p.authorization().unwrap(),
        format!("Basic {}", STANDARD.encode("user:"))
    );
}

#[test]
fn refused_proxy_urls_never_show_the_password() {
    for (bad, why) in [
        ("http://u:secret@h:99999", "invalid host or port"),
        ("http://u:secret@h:x", "invalid host or port"),
        ("http://u:secret@", "empty host"),
        ("http://u:secret@h h", "contains whitespace"),
        ("http://u:sec%zzret@h", "bad percent-encoding"),
        ("http://[::1", "invalid host or port"),
    ] {
        let e = ProxyUrl::parse(bad, "HTTPS_PROXY").unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("HTTPS_PROXY: invalid proxy URL"), "{text}");
        assert!(text.contains(why), "{bad}: {text}");
        assert!(
            !text.contains("secret") && !text.contains("sec%zz"),
            "{text}"
        );
    }
    for (scheme, url) in [
        ("socks5", "socks5://h:1080"),
        ("socks5h", "SOCKS5H://h"),
        ("https", "https://h:443"),
    ] {
        assert_eq!(
            ProxyUrl::parse(url, "--proxy").unwrap_err(),
            ProxyError::UnsupportedScheme {
                source_name: "--proxy".into(),
                scheme: scheme.into()
            }
        );
    }
    let e = ProxyUrl::parse("socks5://h", "ALL_PROXY").unwrap_err();
    assert!(e.to_string().contains("not supported"), "{e}");
}

#[test]
fn no_proxy_names_suffixes_and_star() {
    let n = NoProxy::parse("example.com, .corp.internal *.dev.test,Intranet.");
    for (host, yes) in [
        ("example.com", true),
        ("api.example.com", true),
        ("EXAMPLE.COM.", true),
        ("badexample.com", false),
        ("example.com.evil", false),
        ("corp.internal", true),
        ("a.b.corp.internal", true),
        ("dev.test", true),
        ("x.dev.test", true),
        ("intranet", true),
        ("other.org", false),
    ] {
        assert_eq!(n.matches(host, 443), yes, "{host}");
    }
    assert!(NoProxy::parse("*").matches("anything", 1));
    assert!(NoProxy::parse("a, *").matches("anything", 1));
    assert!(NoProxy::parse("").is_empty());
    assert!(NoProxy::parse(" , ,").is_empty());
    assert!(!NoProxy::parse("").matches("x", 1));
}

#[test]
fn no_proxy_addresses_ranges_and_ports() {
    let n = NoProxy::parse(
        "127.0.0.1 10.0.0.0/8,192.168.1.0/24 ::1 fd00::/8 host:8080 10.9.9.9:22 [fe80::1]:443 0.0.0.0/0x bogus/33",
    );
    for (host, port, yes) in [
        ("127.0.0.1", 80, true),
        ("127.0.0.2", 80, false),
        ("10.1.2.3", 80, true),
        ("11.0.0.1", 80, false),
        ("192.168.1.200", 1, true),
        ("192.168.2.1", 1, false),
        ("[::1]", 443, true),
        ("::1", 443, true),
        ("[fd12::5]", 443, true),
        ("[fe00::5]", 443, false),
        ("host", 8080, true),
        ("host", 8081, false),
        ("sub.host", 8080, true),
        ("[fe80::1]", 443, true),
        ("[fe80::1]", 80, false),
    ] {
        assert_eq!(n.matches(host, port,), yes, "{host}:{port}");
    }
    // 10.9.9.9 is in 10.0.0.0/8 whatever the port.
    assert!(n.matches("10.9.9.9", 1));
    assert!(NoProxy::parse("0.0.0.0/0").matches("8.8.8.8", 1));
    assert!(!NoProxy::parse("0.0.0.0/0").matches("::1", 1));
    assert!(NoProxy::parse("::/0").matches("[2001:db8::1]", 1));
    assert!(NoProxy::parse("10.9.9.9:22").matches("10.9.9.9", 22));
    assert!(!NoProxy::parse("10.9.9.9:22").matches("10.9.9.9", 23));
    assert!(!NoProxy::parse("10.0.0.0/8").matches("name.example", 1));
}

#[test]
fn environment_lower_case_first_empty_skipped_and_httpoxy() {
    let e = env(&[
        ("HTTPS_PROXY", "http://upper:1"),
        ("https_proxy", "http://lower:1"),
        ("HTTP_PROXY", "http://plain:2"),
        ("all_proxy", ""),
        ("NO_PROXY", "internal"),
    ]);
    assert_eq!(e.https.as_ref().unwrap().0, "https_proxy");
    assert_eq!(e.http.as_ref().unwrap().1, "http://plain:2");
    assert_eq!(e.all, None);
    assert_eq!(e.no_proxy.as_ref().unwrap().0, "NO_PROXY");
    assert!(!e.is_empty());

    let cgi = env(&[("REQUEST_METHOD", "GET"), ("HTTP_PROXY", "http://evil:1")]);
    assert_eq!(cgi.http, None);
    assert!(cgi.is_empty());
    let cgi = env(&[("REQUEST_METHOD", "GET"), ("http_proxy", "http://ok:1")]);
    assert!(cgi.http.is_some());
}

#[test]
fn routes_by_scheme_with_all_proxy_as_fallback() {
    let p = Proxies::from_env(&env(&[
        ("HTTPS_PROXY", "http://secure:3128"),
        ("ALL_PROXY", "http://every:3128"),
        ("NO_PROXY", "localhost,127.0.0.0/8,.corp"),
    ]));
    assert_eq!(
        via(&p, "https://api.example.com/mcp").as_deref(),
        Some("http://secure:3128")
    );
    assert_eq!(
        via(&p, "http://api.example.com/mcp").as_deref(),
        Some("http://every:3128")
    );
    assert_eq!(via(&p, "https://mcp.corp/mcp"), None);
    assert_eq!(via(&p, "http://127.0.0.1:3001/mcp"), None);
    assert_eq!(via(&p, "http://localhost:3001/mcp"), None);
    assert_eq!(
        via(&p, "http://[::1]:3001/mcp").as_deref(),
        Some("http://every:3128")
    );
    assert!(!p.is_direct());

    let only_http = Proxies::from_env(&env(&[("http_proxy", "p:8080")]));
    assert_eq!(via(&only_http, "https://x/"), None);
    assert_eq!(
        via(&only_http, "http://x/").as_deref(),
        Some("http://p:8080")
    );

    let none = Proxies::from_env(&env(&[("NO_PROXY", "*")]));
    assert!(none.is_direct());
    assert_eq!(via(&none, "https://x/"), None);
    assert!(Proxies::direct().is_direct());
}

#[test]
fn a_broken_setting_fails_only_the_urls_that_use_it() {
    let p = Proxies::from_env(&env(&[
        ("HTTP_PROXY", "socks5://s:1080"),
        ("HTTPS_PROXY", "http://fine:3128"),
    ]));
    assert_eq!(via(&p, "https://x/").as_deref(), Some("http://fine:3128"));
    let e = p.route(&url("http://x/")).unwrap_err();
    assert!(e.to_string().starts_with("HTTP_PROXY: socks5://"), "{e}");
}

#[test]
fn an_explicit_proxy_serves_both_schemes_and_honours_no_proxy() {
    let p = Proxies::explicit(
        "http://u:pw@gw:3128",
        "--proxy",
        NoProxy::parse("10.0.0.0/8"),
    )
    .unwrap();
    assert_eq!(via(&p, "https://a/").as_deref(), Some("http://u@gw:3128"));
    assert_eq!(via(&p, "http://a/").as_deref(), Some("http://u@gw:3128"));
    assert_eq!(via(&p, "http://10.1.1.1/"), None);
    let e = Proxies::explicit("ftp://x", "proxy", NoProxy::default()).unwrap_err();
    assert!(e.to_string().starts_with("proxy: ftp://"), "{e}");
}

#[test]
fn auth_errors_say_what_to_do() {
    let sent = ProxyError::AuthenticationRequired {
        proxy: "http://u@gw:3128".into(),
        sent_credentials: true,
        challenge: Some("Basic realm=\"corp\"".into()),
    };
    let text = sent.to_string();
    assert!(text.contains("refused the credentials"), "{text}");
    assert!(text.contains("http://u@gw:3128"), "{text}");
    let none = ProxyError::AuthenticationRequired {
        proxy: "http://gw:3128".into(),
        sent_credentials: false,
        challenge: None,
    };
    assert!(none.to_string().contains("USER:PASSWORD@"), "{none}");
}
