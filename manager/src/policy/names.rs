//! Tool names for agents: `mcp__<server>__<tool>`, unique across servers.
//!
//! Model APIs accept tool names matching `^[A-Za-z0-9_-]{1,64}$`. The rule,
//! applied to the whole set of (server, tool) pairs at once:
//!
//! 1. **Sanitise**: every character of the server and tool names outside
//!    `[A-Za-z0-9_-]` becomes `_` (letters, digits, `_` and `-` are kept as
//!    they are, case included). The plain name is
//!    `mcp__<server>__<tool>`.
//! 2. A plain name is used when it is at most 64 characters and no other
//!    pair has the same plain name.
//! 3. Otherwise (too long, or shared by two or more pairs: *every* pair of
//!    such a group, so the result does not depend on order) the name is the
//!    plain name cut to 55 characters, `_`, and 8 hex digits of the
//!    FNV-1a-32 hash of the **original** `server` + NUL + `tool`:
//!    `mcp__my_server__a_very_long_tool_name_that_goes_on_and_o_1a2b3c4d`.
//! 4. If a hashed name is still taken (by a plain name or another hashed
//!    one), the hash is taken again over `server` NUL `tool` NUL `n` for
//!    n = 1, 2, … until it is free; pairs are handled in (server, tool)
//!    order, so the outcome is deterministic.
//!
//! A tool keeps its plain name as long as nothing collides with it; a
//! collision renames only the colliding pairs.

use std::collections::{HashMap, HashSet};

/// The prefix of every agent tool name.
pub const PREFIX: &str = "mcp__";
/// The longest agent tool name.
pub const MAX_LEN: usize = 64;
const HASH_LEN: usize = 8;

/// Replaces every character outside `[A-Za-z0-9_-]` with `_`.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `mcp__<server>__<tool>` after sanitising, before the length and
/// collision rules.
pub fn plain_name(server: &str, tool: &str) -> String {
    format!("{PREFIX}{}__{}", sanitize(server), sanitize(tool))
}

fn hashed_name(plain: &str, server: &str, tool: &str, salt: u32) -> String {
    let mut h = Fnv1a32::new();
    h.write(server.as_bytes());
    h.write(&[0]);
    h.write(tool.as_bytes());
    if salt > 0 {
        h.write(&[0]);
        h.write(salt.to_string().as_bytes());
    }
    // Plain names are ASCII after sanitising, so byte slicing is safe.
    let keep = MAX_LEN - HASH_LEN - 1;
    let head = &plain[..plain.len().min(keep)];
    format!("{head}_{:08x}", h.finish())
}

/// Agent names for `pairs` of (server, tool), in the same order, following
/// the module's rule. Duplicate pairs get the same name.
pub fn assign<S: AsRef<str>, T: AsRef<str>>(pairs: &[(S, T)]) -> Vec<String> {
    let plain: Vec<String> = pairs
        .iter()
        .map(|(s, t)| plain_name(s.as_ref(), t.as_ref()))
        .collect();
    // Which distinct pairs share each plain name.
    let mut owners: HashMap<&str, HashSet<(&str, &str)>> = HashMap::new();
    for (i, (s, t)) in pairs.iter().enumerate() {
        owners
            .entry(plain[i].as_str())
            .or_default()
            .insert((s.as_ref(), t.as_ref()));
    }
    let mut names: Vec<Option<String>> = vec![None; pairs.len()];
    let mut taken: HashSet<String> = HashSet::new();
    for (i, p) in plain.iter().enumerate() {
        if p.len() <= MAX_LEN && owners[p.as_str()].len() == 1 {
            taken.insert(p.clone());
            names[i] = Some(p.clone());
        }
    }
    // The rest, in (server, tool) order; equal pairs share one name.
    let mut rest: Vec<usize> = (0..pairs.len()).filter(|&i| names[i].is_none()).collect();
    rest.sort_by(|&a, &b| {
        (pairs[a].0.as_ref(), pairs[a].1.as_ref()).cmp(&(pairs[b].0.as_ref(), pairs[b].1.as_ref()))
    });
    let mut given: HashMap<(&str, &str), String> = HashMap::new();
    for i in rest {
        let key = (pairs[i].0.as_ref(), pairs[i].1.as_ref());
        if let Some(n) = given.get(&key) {
            names[i] = Some(n.clone());
            continue;
        }
        let mut salt = 0;
        let name = loop {
            let n = hashed_name(&plain[i], key.0, key.1, salt);
            if !taken.contains(&n) {
                break n;
            }
            salt += 1;
        };
        taken.insert(name.clone());
        given.insert(key, name.clone());
        names[i] = Some(name);
    }
    names.into_iter().map(|n| n.unwrap_or_default()).collect()
}

/// FNV-1a, 32 bits: tiny, stable across platforms and releases.
struct Fnv1a32(u32);

impl Fnv1a32 {
    fn new() -> Self {
        Fnv1a32(0x811c_9dc5)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u32::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0193);
        }
    }
    fn finish(&self) -> u32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(n: &str) -> bool {
        !n.is_empty()
            && n.len() <= MAX_LEN
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn plain_names_keep_letters_digits_dash_underscore() {
        let n = assign(&[("github", "create_issue"), ("fs-2", "read_File9")]);
        assert_eq!(n, ["mcp__github__create_issue", "mcp__fs-2__read_File9"]);
        let n = assign(&[("my server", "tool.v2/ü")]);
        assert_eq!(n, ["mcp__my_server__tool_v2__"]);
    }

    #[test]
    fn long_names_are_cut_with_a_hash() {
        let tool = "t".repeat(100);
        let n = assign(&[("srv", tool.as_str())]);
        assert_eq!(n[0].len(), MAX_LEN);
        assert!(valid(&n[0]));
        assert!(n[0].starts_with("mcp__srv__ttt"), "{}", n[0]);
        // Exactly 64 is still plain.
        let tool = "t".repeat(64 - "mcp__srv__".len());
        assert_eq!(
            assign(&[("srv", tool.as_str())])[0],
            format!("mcp__srv__{tool}")
        );
        // Two long tools with a common prefix differ.
        let a = format!("{}a", "x".repeat(80));
        let b = format!("{}b", "x".repeat(80));
        let n = assign(&[("s", a.as_str()), ("s", b.as_str())]);
        assert_ne!(n[0], n[1]);
    }

    #[test]
    fn collisions_hash_every_member_independent_of_order() {
        let pairs = [("a.b", "t"), ("a_b", "t"), ("other", "t")];
        let n = assign(&pairs);
        assert_eq!(n[2], "mcp__other__t");
        assert_ne!(n[0], n[1]);
        assert!(n[0].starts_with("mcp__a_b__t_") && n[1].starts_with("mcp__a_b__t_"));
        assert!(n.iter().all(|x| valid(x)));
        let reversed = assign(&[pairs[2], pairs[1], pairs[0]]);
        assert_eq!(reversed, [n[2].clone(), n[1].clone(), n[0].clone()]);
        // The separator ambiguity: server "a__b" tool "c" vs server "a" tool "b__c".
        let n = assign(&[("a__b", "c"), ("a", "b__c")]);
        assert_ne!(n[0], n[1]);
    }

    #[test]
    fn hashed_names_never_steal_a_plain_name() {
        // A tool literally named like the hash form of a colliding pair.
        let first = assign(&[("x.y", "t"), ("x_y", "t")]);
        let squatter = first[0].trim_start_matches("mcp__x_y__").to_string();
        let n = assign(&[("x.y", "t"), ("x_y", "t"), ("x_y", squatter.as_str())]);
        let set: HashSet<&String> = n.iter().collect();
        assert_eq!(set.len(), 3, "{n:?}");
        assert_eq!(n[2], first[0], "the plain name wins");
    }

    #[test]
    fn duplicates_share_a_name_and_many_pairs_stay_unique() {
        let n = assign(&[("s", "t"), ("s", "t")]);
        assert_eq!(n[0], n[1]);
        assert_eq!(n[0], "mcp__s__t");
        let pairs: Vec<(String, String)> = (0..500)
            .map(|i| (format!("srv{}", i % 7), format!("tool.{i}")))
            .chain((0..500).map(|i| (format!("srv{}", i % 7), format!("tool_{i}"))))
            .collect();
        let n = assign(&pairs);
        let set: HashSet<&String> = n.iter().collect();
        assert_eq!(set.len(), pairs.len());
        assert!(n.iter().all(|x| valid(x)));
    }
}
