//! `${VAR}` and `${VAR:-default}` expansion in server entries.
//!
//! Pure: the environment is a lookup function passed in, so hosts can add
//! variables of their own and tests need no process environment.
//!
//! | text               | becomes                                              |
//! |--------------------|------------------------------------------------------|
//! | `${VAR}`           | the value of `VAR`; an error when it is not set      |
//! | `${VAR:-default}`  | the value of `VAR` when set and not empty, else `default` (itself expanded, so `${A:-${B}}` works) |
//! | `$${`              | a literal `${`                                       |
//! | any other `$`      | itself                                               |
//!
//! `VAR` is `[A-Za-z_][A-Za-z0-9_]*`. Expansion applies to `command`,
//! `args`, `env` values, `cwd`, `url` and `headers` values; names, keys and
//! `type` are never expanded.

use mcpwire::config::ServerConfig;

/// Why a value could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExpandError {
    /// `${VAR}` without a default, and `VAR` is not set.
    #[error("environment variable `{var}` is not set (in {field}; use ${{{var}:-default}} for a fallback)")]
    Unset {
        /// The variable.
        var: String,
        /// Where: `command`, `args[1]`, `env.KEY`, `url`, `headers.NAME`, `cwd`.
        field: String,
    },
    /// A `${` without its `}` or with a name that is not a variable name.
    #[error("bad variable reference in {field}: {reason}")]
    Syntax {
        /// Where.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

/// Expands one value. `field` only names the place in errors.
pub fn expand_str(
    text: &str,
    field: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(literal) = after.strip_prefix("${") {
            // `$${` is an escaped `${`.
            out.push_str("${");
            rest = literal;
        } else if let Some(inner) = after.strip_prefix('{') {
            let end = closing_brace(inner).ok_or_else(|| ExpandError::Syntax {
                field: field.to_string(),
                reason: format!("`${{{}` has no closing `}}`", shorten(inner)),
            })?;
            out.push_str(&reference(&inner[..end], field, lookup)?);
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The index of the `}` that closes a reference whose body starts `s`
/// (nested `${…}` in a default are skipped over).
fn closing_brace(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'$' if bytes.get(i + 1) == Some(&b'{') => {
                depth += 1;
                i += 1;
            }
            b'}' if depth == 0 => return Some(i),
            b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}

fn reference(
    body: &str,
    field: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ExpandError> {
    let (name, default) = match body.find(":-") {
        Some(i) => (&body[..i], Some(&body[i + 2..])),
        None => (body, None),
    };
    if !is_var_name(name) {
        return Err(ExpandError::Syntax {
            field: field.to_string(),
            reason: format!(
                "`${{{}}}` is not `${{NAME}}` or `${{NAME:-default}}` (NAME is letters, digits and _)",
                shorten(body)
            ),
        });
    }
    match (lookup(name), default) {
        (Some(v), None) => Ok(v),
        (Some(v), Some(_)) if !v.is_empty() => Ok(v),
        (_, Some(d)) => expand_str(d, field, lookup),
        (None, None) => Err(ExpandError::Unset {
            var: name.to_string(),
            field: field.to_string(),
        }),
    }
}

fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn shorten(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(MAX).collect();
        t.push('…');
        t
    }
}

/// Expands `command`, `args`, `env` values, `cwd`, `url` and `headers`
/// values of an entry. The first failing field is the error.
pub fn expand_config(
    config: &ServerConfig,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, ExpandError> {
    let mut out = config.clone();
    if let Some(c) = &config.command {
        out.command = Some(expand_str(c, "command", lookup)?);
    }
    for (i, a) in config.args.iter().enumerate() {
        out.args[i] = expand_str(a, &format!("args[{i}]"), lookup)?;
    }
    for (k, v) in &config.env {
        out.env
            .insert(k.clone(), expand_str(v, &format!("env.{k}"), lookup)?);
    }
    if let Some(c) = &config.cwd {
        out.cwd = Some(expand_str(c, "cwd", lookup)?);
    }
    if let Some(u) = &config.url {
        out.url = Some(expand_str(u, "url", lookup)?);
    }
    for (k, v) in &config.headers {
        out.headers
            .insert(k.clone(), expand_str(v, &format!("headers.{k}"), lookup)?);
    }
    if let Some(p) = &config.proxy {
        out.proxy = Some(expand_str(p, "proxy", lookup)?);
    }
    if let (Some(tls), Some(out)) = (&config.tls, &mut out.tls) {
        for (field, value, slot) in [
            ("tls.ca", &tls.ca, &mut out.ca),
            ("tls.cert", &tls.cert, &mut out.cert),
            ("tls.key", &tls.key, &mut out.key),
        ] {
            if let Some(v) = value {
                *slot = Some(expand_str(v, field, lookup)?);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/ada".into()),
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn x(s: &str) -> Result<String, ExpandError> {
        expand_str(s, "args[0]", &env)
    }

    #[test]
    fn plain_and_defaults() {
        assert_eq!(x("no vars").unwrap(), "no vars");
        assert_eq!(x("${HOME}/bin").unwrap(), "/home/ada/bin");
        assert_eq!(x("a${TOKEN}b${HOME}").unwrap(), "as3cretb/home/ada");
        assert_eq!(x("${NOPE:-fallback}").unwrap(), "fallback");
        assert_eq!(x("${NOPE:-}").unwrap(), "");
        assert_eq!(x("${EMPTY:-used}").unwrap(), "used");
        assert_eq!(x("${EMPTY}").unwrap(), "");
        assert_eq!(x("${TOKEN:-unused}").unwrap(), "s3cret");
        assert_eq!(x("${NOPE:-${HOME}/x}").unwrap(), "/home/ada/x");
        assert_eq!(x("${NOPE:-a:-b}").unwrap(), "a:-b");
        assert_eq!(x("${NOPE:-${ALSO_NOPE:-deep}}!").unwrap(), "deep!");
    }

    #[test]
    fn dollars_that_are_not_references() {
        assert_eq!(x("$HOME").unwrap(), "$HOME");
        assert_eq!(x("price: 5$").unwrap(), "price: 5$");
        assert_eq!(x("$${HOME}").unwrap(), "${HOME}");
        assert_eq!(x("$$").unwrap(), "$$");
        assert_eq!(x("ünïcödé ${HOME} ✓").unwrap(), "ünïcödé /home/ada ✓");
    }

    #[test]
    fn errors_name_the_variable_and_field() {
        let e = x("--key=${API_KEY}").unwrap_err();
        assert_eq!(
            e,
            ExpandError::Unset {
                var: "API_KEY".into(),
                field: "args[0]".into()
            }
        );
        assert!(e.to_string().contains("API_KEY"), "{e}");
        assert!(e.to_string().contains("args[0]"), "{e}");
        for bad in [
            "${HOME",
            "${}",
            "${1X}",
            "${A B}",
            "${input:x}",
            "${NOPE:-${X}",
        ] {
            assert!(
                matches!(x(bad), Err(ExpandError::Syntax { .. })),
                "{bad}: {:?}",
                x(bad)
            );
        }
    }

    #[test]
    fn every_expandable_field() {
        let raw: ServerConfig = serde_json::from_value(serde_json::json!({
            "type": "${TOKEN}",
            "command": "${HOME}/bin/server",
            "args": ["--token", "${TOKEN}", "${NOPE:-d}"],
            "env": {"${KEY_NOT_EXPANDED}": "${TOKEN}"},
            "cwd": "${HOME}",
            "url": "https://h/${TOKEN}",
            "headers": {"Authorization": "Bearer ${TOKEN}"},
            "proxy": "http://ada:${TOKEN}@gw:3128",
            "tls": {"ca": "${HOME}/ca.pem", "cert": "${HOME}/me.pem", "key": "${NOPE:-k.pem}"}
        }))
        .unwrap();
        let e = expand_config(&raw, &env).unwrap();
        assert_eq!(e.kind.as_deref(), Some("${TOKEN}"), "type is not expanded");
        assert_eq!(e.command.as_deref(), Some("/home/ada/bin/server"));
        assert_eq!(e.args, ["--token", "s3cret", "d"]);
        assert_eq!(e.env["${KEY_NOT_EXPANDED}"], "s3cret");
        assert_eq!(e.cwd.as_deref(), Some("/home/ada"));
        assert_eq!(e.url.as_deref(), Some("https://h/s3cret"));
        assert_eq!(e.headers["Authorization"], "Bearer s3cret");
        assert_eq!(e.proxy.as_deref(), Some("http://ada:s3cret@gw:3128"));
        let tls = e.tls.as_ref().unwrap();
        assert_eq!(tls.ca.as_deref(), Some("/home/ada/ca.pem"));
        assert_eq!(tls.cert.as_deref(), Some("/home/ada/me.pem"));
        assert_eq!(tls.key.as_deref(), Some("k.pem"));

        let mut missing = raw.clone();
        missing
            .headers
            .insert("X-Key".into(), "${MISSING_KEY}".into());
        let err = expand_config(&missing, &env).unwrap_err();
        assert_eq!(
            err,
            ExpandError::Unset {
                var: "MISSING_KEY".into(),
                field: "headers.X-Key".into()
            }
        );
    }
}
