//! `subscriptions/listen` for a 2026-07-28 host, answered by the bridge
//! itself whatever the target's era: the client already hears the
//! target's list changes and resource updates (a handshake target sends
//! them as notifications, a 2026-07-28 target on the client's own
//! listen), and subscribes to resources either way. A host's listen is
//! acknowledged at once, then gets what its filter asks for, stamped with
//! its request id (`_meta["io.modelcontextprotocol/subscriptionId"]`),
//! until the host cancels it. It is never answered (the host ends it).

use mcpwire::mcp::methods::notifications;
use mcpwire::modern::meta::SUBSCRIPTION_ID_KEY;
use mcpwire::rpc::RequestId;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// What one listen asks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Filter {
    tools: bool,
    prompts: bool,
    resources: bool,
    /// `notifications/resources/updated` of these URIs.
    pub(super) uris: Vec<String>,
}

impl Filter {
    /// The filter of `subscriptions/listen` params (`notifications`:
    /// `toolsListChanged`, `promptsListChanged`, `resourcesListChanged`,
    /// `resourceSubscriptions`); unreadable params ask for nothing.
    pub(super) fn of(params: Option<&RawValue>) -> Filter {
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase", default)]
        struct Wanted {
            tools_list_changed: bool,
            prompts_list_changed: bool,
            resources_list_changed: bool,
            resource_subscriptions: Vec<String>,
        }
        #[derive(Deserialize)]
        struct Params {
            #[serde(default)]
            notifications: Wanted,
        }
        let w = params
            .and_then(|p| serde_json::from_str::<Params>(p.get()).ok())
            .map(|p| p.notifications)
            .unwrap_or_default();
        Filter {
            tools: w.tools_list_changed,
            prompts: w.prompts_list_changed,
            resources: w.resources_list_changed,
            uris: w.resource_subscriptions,
        }
    }

    fn wants(&self, method: &str, params: Option<&RawValue>) -> bool {
        match method {
            notifications::TOOLS_LIST_CHANGED => self.tools,
            notifications::PROMPTS_LIST_CHANGED => self.prompts,
            notifications::RESOURCES_LIST_CHANGED => self.resources,
            notifications::RESOURCES_UPDATED => {
                #[derive(Deserialize)]
                struct Updated {
                    uri: String,
                }
                params
                    .and_then(|p| serde_json::from_str::<Updated>(p.get()).ok())
                    .is_some_and(|u| self.uris.contains(&u.uri))
            }
            _ => false,
        }
    }
}

/// Whether a notification of the target reaches a 2026-07-28 host only
/// through a listen (that era sends list changes and resource updates
/// nowhere else).
pub(super) fn through_listens(method: &str) -> bool {
    matches!(
        method,
        notifications::TOOLS_LIST_CHANGED
            | notifications::PROMPTS_LIST_CHANGED
            | notifications::RESOURCES_LIST_CHANGED
            | notifications::RESOURCES_UPDATED
    )
}

/// The acknowledgement of listen `id`: its method and params.
pub(super) fn ack(id: &RequestId) -> (&'static str, Box<RawValue>) {
    let params = json!({"_meta": {SUBSCRIPTION_ID_KEY: id}});
    let raw = serde_json::value::to_raw_value(&params).expect("JSON serializes");
    (notifications::SUBSCRIPTIONS_ACKNOWLEDGED, raw)
}

/// `params` with listen `id`'s stamp in `_meta`.
pub(super) fn stamped(id: &RequestId, params: Option<&RawValue>) -> Box<RawValue> {
    let mut v = params
        .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    if !v["_meta"].is_object() {
        v["_meta"] = json!({});
    }
    v["_meta"][SUBSCRIPTION_ID_KEY] = json!(id);
    serde_json::value::to_raw_value(&v).expect("JSON serializes")
}

/// The open listens of one host, by a key of the caller's (the listen's
/// request id, or its stream).
pub(super) struct Listens<K> {
    open: Vec<(K, RequestId, Filter)>,
}

impl<K> Default for Listens<K> {
    fn default() -> Self {
        Listens { open: Vec::new() }
    }
}

impl<K: PartialEq + Clone> Listens<K> {
    /// Opens listen `id` under `key`.
    pub(super) fn open(&mut self, key: K, id: RequestId, filter: Filter) {
        self.open.push((key, id, filter));
    }

    /// Closes the listen under `key`, if it was open: the URIs it
    /// subscribed to that no open listen wants any more (to unsubscribe
    /// from the target).
    pub(super) fn close(&mut self, key: &K) -> Option<Vec<String>> {
        let i = self.open.iter().position(|(k, ..)| k == key)?;
        let mut uris = self.open.remove(i).2.uris;
        uris.sort();
        uris.dedup();
        uris.retain(|u| !self.subscribed(u));
        Some(uris)
    }

    /// Where a notification of the target goes: each listen that wants
    /// it, with its params stamped for it.
    pub(super) fn route(&self, method: &str, params: Option<&RawValue>) -> Vec<(K, Box<RawValue>)> {
        self.open
            .iter()
            .filter(|(_, _, f)| f.wants(method, params))
            .map(|(k, id, _)| (k.clone(), stamped(id, params)))
            .collect()
    }

    /// Every URI some open listen subscribes to.
    pub(super) fn subscribed(&self, uri: &str) -> bool {
        self.open
            .iter()
            .any(|(_, _, f)| f.uris.iter().any(|u| u == uri))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(v: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&v).unwrap()
    }

    #[test]
    fn a_listen_gets_what_its_filter_asks_for_stamped_with_its_id() {
        let mut l = Listens::default();
        let params = raw(json!({"notifications": {"toolsListChanged": true,
            "resourceSubscriptions": ["test://a"]}}));
        l.open(1, RequestId::Number(7), Filter::of(Some(&params)));
        l.open(2, RequestId::Number(8), Filter::default());
        let routed = l.route(notifications::TOOLS_LIST_CHANGED, None);
        assert_eq!(routed.len(), 1);
        assert_eq!(routed[0].0, 1);
        let v: Value = serde_json::from_str(routed[0].1.get()).unwrap();
        assert_eq!(v["_meta"][SUBSCRIPTION_ID_KEY], 7);
        assert!(l
            .route(notifications::PROMPTS_LIST_CHANGED, None)
            .is_empty());
        let a = raw(json!({"uri": "test://a"}));
        let b = raw(json!({"uri": "test://b"}));
        assert_eq!(l.route(notifications::RESOURCES_UPDATED, Some(&a)).len(), 1);
        assert!(l
            .route(notifications::RESOURCES_UPDATED, Some(&b))
            .is_empty());
        assert!(l.subscribed("test://a"));
        assert_eq!(l.close(&1), Some(vec!["test://a".to_owned()]));
        assert!(!l.subscribed("test://a"));
        assert_eq!(l.close(&1), None);
        assert!(l.route(notifications::TOOLS_LIST_CHANGED, None).is_empty());
        assert!(through_listens(notifications::RESOURCES_UPDATED));
        assert!(!through_listens(notifications::PROGRESS));
    }

    #[test]
    fn a_closed_listen_gives_up_only_the_uris_no_other_wants() {
        let mut l = Listens::default();
        let uris = |u: &[&str]| raw(json!({"notifications": {"resourceSubscriptions": u}}));
        l.open(
            1,
            RequestId::Number(1),
            Filter::of(Some(&uris(&["a", "b", "a"]))),
        );
        l.open(2, RequestId::Number(2), Filter::of(Some(&uris(&["b"]))));
        assert_eq!(l.close(&1), Some(vec!["a".to_owned()]));
        assert_eq!(l.close(&2), Some(vec!["b".to_owned()]));
        assert!(!l.subscribed("a") && !l.subscribed("b"));
    }
}
