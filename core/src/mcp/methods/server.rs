//! What a server asks a client: the kinds of its requests, with the
//! capability each needs, and the answer to `roots/list`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::mcp::types::{ClientCapabilities, Extra, ListChanged};

/// The kinds of request a server sends a client. `ping` is answered by the
/// engine itself; the others reach the application only when its
/// capabilities say it handles them (everything else gets -32601).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServerRequestKind {
    /// `ping`.
    Ping,
    /// `roots/list`: the client's roots.
    ListRoots,
    /// `sampling/createMessage`: an LLM completion.
    CreateMessage,
    /// `elicitation/create`: input from the user.
    Elicit,
}

impl ServerRequestKind {
    /// Every kind a handler may be set for (all but `ping`).
    pub const HANDLED: [ServerRequestKind; 3] = [
        ServerRequestKind::ListRoots,
        ServerRequestKind::CreateMessage,
        ServerRequestKind::Elicit,
    ];

    /// Its method name.
    pub fn method(self) -> &'static str {
        match self {
            ServerRequestKind::Ping => "ping",
            ServerRequestKind::ListRoots => "roots/list",
            ServerRequestKind::CreateMessage => "sampling/createMessage",
            ServerRequestKind::Elicit => "elicitation/create",
        }
    }

    /// The kind of a request named `method`; `None` for methods this crate
    /// does not know (they are answered -32601).
    pub fn of(method: &str) -> Option<ServerRequestKind> {
        [ServerRequestKind::Ping]
            .into_iter()
            .chain(Self::HANDLED)
            .find(|k| k.method() == method)
    }

    /// Declares in `caps` the capability that promises the server an
    /// answer to this kind: `roots` (with `listChanged`), `sampling`, or
    /// `elicitation` with the `form` mode. A no-op for `ping`.
    pub fn declare(self, caps: &mut ClientCapabilities) {
        match self {
            ServerRequestKind::Ping => {}
            ServerRequestKind::ListRoots => {
                caps.roots = Some(ListChanged {
                    list_changed: Some(true),
                    ..Default::default()
                })
            }
            ServerRequestKind::CreateMessage => {
                caps.sampling.get_or_insert_with(Map::new);
            }
            ServerRequestKind::Elicit => {
                let modes = caps.elicitation.get_or_insert_with(Map::new);
                if modes.is_empty() {
                    modes.insert("form".into(), Value::Object(Map::new()));
                }
            }
        }
    }

    /// Declares what a typed handler of this kind answers beyond
    /// [`declare`](Self::declare): elicitation in the `url` mode as well as
    /// `form`; for sampling with `tools`, `sampling.tools`. A no-op for
    /// the other kinds.
    pub fn declare_typed(self, caps: &mut ClientCapabilities, sampling_tools: bool) {
        self.declare(caps);
        match self {
            ServerRequestKind::Elicit => {
                let modes = caps.elicitation.get_or_insert_with(Map::new);
                for mode in ["form", "url"] {
                    modes
                        .entry(mode)
                        .or_insert_with(|| Value::Object(Map::new()));
                }
            }
            ServerRequestKind::CreateMessage if sampling_tools => {
                caps.sampling
                    .get_or_insert_with(Map::new)
                    .insert("tools".into(), Value::Object(Map::new()));
            }
            _ => {}
        }
    }

    /// Whether `caps` declares the capability for this kind (`ping`: always).
    pub fn declared_in(self, caps: &ClientCapabilities) -> bool {
        match self {
            ServerRequestKind::Ping => true,
            ServerRequestKind::ListRoots => caps.roots.is_some(),
            ServerRequestKind::CreateMessage => caps.sampling.is_some(),
            ServerRequestKind::Elicit => caps.elicitation.is_some(),
        }
    }
}

/// The answer to `roots/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListRootsResult {
    /// The roots.
    pub roots: Vec<crate::mcp::types::Root>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ListRootsResult {
    /// The answer listing `roots`.
    pub fn new(roots: Vec<crate::mcp::types::Root>) -> Self {
        ListRootsResult {
            roots,
            extra: Extra::new(),
        }
    }
}
