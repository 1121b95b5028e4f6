//! `resultType` and multi round-trip requests (MRTR): a server that needs
//! input answers `resultType: "input_required"` with `inputRequests` (keyed
//! server->client requests) and/or an opaque `requestState`; the client
//! answers each and retries the *original* request with a new id, adding
//! `inputResponses` and the exact `requestState`.
//!
//! ```text
//!   tools/call id 1 ──► {resultType:"input_required", inputRequests:{k: elicitation/create…}, requestState:S}
//!   app answers k ──► tools/call id 2 {…original params, inputResponses:{k: ElicitResult}, requestState:S}
//!   ──► {resultType:"complete", …}  (or input_required again: bound the rounds)
//! ```

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::mcp::methods::{MethodId, ServerRequestKind};

/// Whether `method` may answer `input_required` (servers MUST NOT on
/// others): the method table's `input_rounds` (`tools/call`,
/// `prompts/get`, `resources/read`).
pub fn input_rounds(method: &str) -> bool {
    MethodId::of(method).is_some_and(|m| m.spec().input_rounds)
}

/// Default bound on input requests read from one result.
pub const MAX_INPUT_REQUESTS: usize = 64;

/// A result's `resultType`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultType {
    /// `"complete"`, or absent (older servers).
    Complete,
    /// `"input_required"`.
    InputRequired,
    /// Anything else: the client MUST treat it as invalid unless an
    /// extension it negotiated defines it.
    Other(String),
}

impl ResultType {
    /// Reads `resultType` from a result object (absent or non-object =
    /// complete; a non-string value is `Other`).
    pub fn of(result: &Value) -> ResultType {
        match result.get("resultType") {
            None | Some(Value::Null) => ResultType::Complete,
            Some(Value::String(s)) => match s.as_str() {
                "complete" => ResultType::Complete,
                "input_required" => ResultType::InputRequired,
                other => ResultType::Other(other.to_string()),
            },
            Some(other) => ResultType::Other(other.to_string()),
        }
    }

    /// [`ResultType::of`] on a raw result (unparseable = `Other("")`).
    pub fn of_raw(raw: &RawValue) -> ResultType {
        #[derive(serde::Deserialize)]
        struct Probe {
            #[serde(default, rename = "resultType")]
            result_type: Option<Value>,
        }
        match serde_json::from_str::<Probe>(raw.get()) {
            Ok(Probe { result_type: None })
            | Ok(Probe {
                result_type: Some(Value::Null),
            }) => ResultType::Complete,
            Ok(Probe {
                result_type: Some(v),
            }) => ResultType::of(&serde_json::json!({ "resultType": v })),
            Err(_) => ResultType::Other(String::new()),
        }
    }
}

/// One server->client request inside `inputRequests`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum InputRequest {
    /// `elicitation/create` (form when `params.mode` is absent or `form`,
    /// else `url`).
    Elicitation {
        /// The params (`message`, `requestedSchema` or `url`, `mode`).
        params: Map<String, Value>,
    },
    /// `sampling/createMessage` (deprecated feature, still allowed).
    Sampling {
        /// The params (`messages`, `maxTokens`, …).
        params: Map<String, Value>,
    },
    /// `roots/list` (deprecated feature, still allowed).
    ListRoots,
    /// A method the spec does not allow here; answer it with nothing and
    /// let the application decide (a conforming server never sends it).
    Other {
        /// The method.
        method: String,
        /// The params, if an object.
        params: Option<Map<String, Value>>,
    },
}

impl InputRequest {
    /// The method name.
    pub fn method(&self) -> &str {
        match self {
            InputRequest::Elicitation { .. } => ServerRequestKind::Elicit.method(),
            InputRequest::Sampling { .. } => ServerRequestKind::CreateMessage.method(),
            InputRequest::ListRoots => ServerRequestKind::ListRoots.method(),
            InputRequest::Other { method, .. } => method,
        }
    }

    /// The client capability that must have been declared for this request
    /// (`"elicitation"`, `"sampling"`, `"roots"`), if any.
    pub fn required_capability(&self) -> Option<&'static str> {
        match self {
            InputRequest::Elicitation { .. } => Some("elicitation"),
            InputRequest::Sampling { .. } => Some("sampling"),
            InputRequest::ListRoots => Some("roots"),
            InputRequest::Other { .. } => None,
        }
    }
}

/// A parsed `InputRequiredResult`.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequired {
    /// The requests, by server-assigned key (sorted by key).
    pub input_requests: BTreeMap<String, InputRequest>,
    /// The opaque state to echo unchanged (absent = send none).
    pub request_state: Option<String>,
}

/// Why an `input_required` result was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MrtrError {
    /// The result is not a JSON object.
    #[error("input_required result is not a JSON object")]
    NotObject,
    /// Neither `inputRequests` nor `requestState` is present (the spec
    /// requires at least one).
    #[error("input_required result has neither inputRequests nor requestState")]
    Empty,
    /// `inputRequests` is not an object, or an entry lacks a string `method`.
    #[error("malformed inputRequests: {0}")]
    Malformed(String),
    /// `requestState` is present but not a string.
    #[error("requestState is not a string")]
    StateNotString,
    /// More input requests than the bound.
    #[error("more than {0} input requests")]
    TooMany(usize),
    /// The method may not answer `input_required`.
    #[error("{0} may not return input_required")]
    MethodNotAllowed(String),
    /// The params of the original request are not an object.
    #[error("the original request's params are not a JSON object")]
    ParamsNotObject,
    /// A response is missing for a requested key.
    #[error("no input response for key {0:?}")]
    MissingResponse(String),
}

impl InputRequired {
    /// Parses an `input_required` result, with at most `max_requests`
    /// entries.
    pub fn parse(result: &Value, max_requests: usize) -> Result<Self, MrtrError> {
        let obj = result.as_object().ok_or(MrtrError::NotObject)?;
        let request_state = match obj.get("requestState") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(MrtrError::StateNotString),
        };
        let mut input_requests = BTreeMap::new();
        match obj.get("inputRequests") {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                if map.len() > max_requests {
                    return Err(MrtrError::TooMany(max_requests));
                }
                for (key, req) in map {
                    input_requests.insert(key.clone(), parse_request(key, req)?);
                }
            }
            Some(_) => {
                return Err(MrtrError::Malformed(
                    "inputRequests is not an object".into(),
                ))
            }
        }
        if input_requests.is_empty() && request_state.is_none() {
            return Err(MrtrError::Empty);
        }
        Ok(InputRequired {
            input_requests,
            request_state,
        })
    }

    /// [`InputRequired::parse`] on a raw result.
    pub fn parse_raw(raw: &RawValue, max_requests: usize) -> Result<Self, MrtrError> {
        let v: Value = serde_json::from_str(raw.get()).map_err(|_| MrtrError::NotObject)?;
        Self::parse(&v, max_requests)
    }

    /// Checks the method of the original request may carry this flow.
    pub fn check_method(method: &str) -> Result<(), MrtrError> {
        if input_rounds(method) {
            Ok(())
        } else {
            Err(MrtrError::MethodNotAllowed(method.to_string()))
        }
    }
}

fn parse_request(key: &str, req: &Value) -> Result<InputRequest, MrtrError> {
    let method = req
        .get("method")
        .and_then(Value::as_str)
        .ok_or_else(|| MrtrError::Malformed(format!("entry {key:?} has no string method")))?;
    let params = match req.get("params") {
        None | Some(Value::Null) => None,
        Some(Value::Object(p)) => Some(p.clone()),
        Some(_) => {
            return Err(MrtrError::Malformed(format!(
                "entry {key:?} params is not an object"
            )))
        }
    };
    Ok(match ServerRequestKind::of(method) {
        Some(ServerRequestKind::Elicit) => InputRequest::Elicitation {
            params: params.unwrap_or_default(),
        },
        Some(ServerRequestKind::CreateMessage) => InputRequest::Sampling {
            params: params.unwrap_or_default(),
        },
        Some(ServerRequestKind::ListRoots) => InputRequest::ListRoots,
        _ => InputRequest::Other {
            method: method.to_string(),
            params,
        },
    })
}

/// Builds the retry's params: the original params (with their `_meta`,
/// which the caller should re-stamp), minus any earlier `inputResponses` /
/// `requestState`, plus `inputResponses` (one per requested key; extra keys
/// are allowed) and `requestState` exactly as received (omitted when the
/// server sent none).
pub fn retry_params(
    original: &Value,
    asked: &InputRequired,
    responses: Map<String, Value>,
) -> Result<Value, MrtrError> {
    let mut obj = match original {
        Value::Null => Map::new(),
        Value::Object(o) => o.clone(),
        _ => return Err(MrtrError::ParamsNotObject),
    };
    for key in asked.input_requests.keys() {
        if !responses.contains_key(key) {
            return Err(MrtrError::MissingResponse(key.clone()));
        }
    }
    obj.remove("inputResponses");
    obj.remove("requestState");
    if !responses.is_empty() {
        obj.insert("inputResponses".into(), Value::Object(responses));
    }
    if let Some(state) = &asked.request_state {
        obj.insert("requestState".into(), Value::String(state.clone()));
    }
    Ok(Value::Object(obj))
}

/// How to treat a result.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultKind {
    /// Final: hand to the application.
    Complete,
    /// Input needed: answer and retry.
    InputRequired(InputRequired),
    /// Unknown `resultType` (invalid unless an extension defines it).
    Unknown(String),
}

/// Classifies a result of `method`. `input_required` on a method that may
/// not carry it, or malformed, is an error.
pub fn classify(method: &str, result: &Value) -> Result<ResultKind, MrtrError> {
    match ResultType::of(result) {
        ResultType::Complete => Ok(ResultKind::Complete),
        ResultType::Other(s) => Ok(ResultKind::Unknown(s)),
        ResultType::InputRequired => {
            InputRequired::check_method(method)?;
            InputRequired::parse(result, MAX_INPUT_REQUESTS).map(ResultKind::InputRequired)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Recorded from the Python `mcp` 2.3.0 server (state shortened).
    fn python_result() -> Value {
        json!({"inputRequests":{"who":{"method":"elicitation/create","params":{"message":"What is your name?","mode":"form","requestedSchema":{"properties":{"name":{"type":"string"}},"required":["name"],"type":"object"}}}},"requestState":"v1.abc","resultType":"input_required","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"tiny","version":""}}})
    }

    #[test]
    fn result_types() {
        assert_eq!(ResultType::of(&json!({"content":[]})), ResultType::Complete);
        assert_eq!(
            ResultType::of(&json!({"resultType":"complete"})),
            ResultType::Complete
        );
        assert_eq!(
            ResultType::of(&json!({"resultType":null})),
            ResultType::Complete
        );
        assert_eq!(ResultType::of(&json!([])), ResultType::Complete);
        assert_eq!(ResultType::of(&python_result()), ResultType::InputRequired);
        assert_eq!(
            ResultType::of(&json!({"resultType":"task"})),
            ResultType::Other("task".into())
        );
        assert_eq!(
            ResultType::of(&json!({"resultType":5})),
            ResultType::Other("5".into())
        );
        let raw =
            RawValue::from_string(r#"{"resultType":"input_required","requestState":"s"}"#.into())
                .unwrap();
        assert_eq!(ResultType::of_raw(&raw), ResultType::InputRequired);
        let raw = RawValue::from_string(r#"{"content":[]}"#.into()).unwrap();
        assert_eq!(ResultType::of_raw(&raw), ResultType::Complete);
    }

    #[test]
    fn parses_python_input_required() {
        match classify("tools/call", &python_result()).unwrap() {
            ResultKind::InputRequired(ir) => {
                assert_eq!(ir.request_state.as_deref(), Some("v1.abc"));
                let req = &ir.input_requests["who"];
                assert_eq!(req.method(), "elicitation/create");
                assert_eq!(req.required_capability(), Some("elicitation"));
                match req {
                    InputRequest::Elicitation { params } => assert_eq!(params["mode"], "form"),
                    other => panic!("{other:?}"),
                }
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            classify("tools/call", &json!({"content": []})),
            Ok(ResultKind::Complete)
        ));
        assert_eq!(
            classify("tools/list", &python_result()),
            Err(MrtrError::MethodNotAllowed("tools/list".into()))
        );
    }

    #[test]
    fn every_input_kind_and_bounds() {
        let r = json!({"resultType":"input_required","inputRequests":{
            "a":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}},
            "b":{"method":"roots/list"},
            "c":{"method":"x/y","params":{"k":1}}}});
        let ir = InputRequired::parse(&r, 8).unwrap();
        assert_eq!(ir.request_state, None);
        assert!(matches!(
            ir.input_requests["a"],
            InputRequest::Sampling { .. }
        ));
        assert_eq!(ir.input_requests["b"], InputRequest::ListRoots);
        assert_eq!(ir.input_requests["c"].method(), "x/y");
        assert_eq!(InputRequired::parse(&r, 2), Err(MrtrError::TooMany(2)));
        // State only (load shedding): valid, retry at once.
        let s = InputRequired::parse(
            &json!({"resultType":"input_required","requestState":"s"}),
            8,
        )
        .unwrap();
        assert!(s.input_requests.is_empty());
    }

    #[test]
    fn malformed_peer_input_is_refused() {
        let bad = [
            (json!("x"), MrtrError::NotObject),
            (json!({"resultType":"input_required"}), MrtrError::Empty),
            (
                json!({"inputRequests":{},"requestState":null}),
                MrtrError::Empty,
            ),
            (json!({"requestState":5}), MrtrError::StateNotString),
        ];
        for (v, e) in bad {
            assert_eq!(InputRequired::parse(&v, 8), Err(e));
        }
        assert!(matches!(
            InputRequired::parse(&json!({"inputRequests":[1]}), 8),
            Err(MrtrError::Malformed(_))
        ));
        assert!(matches!(
            InputRequired::parse(&json!({"inputRequests":{"k":{}}}), 8),
            Err(MrtrError::Malformed(_))
        ));
        assert!(matches!(
            InputRequired::parse(
                &json!({"inputRequests":{"k":{"method":"roots/list","params":3}}}),
                8
            ),
            Err(MrtrError::Malformed(_))
        ));
        let raw = RawValue::from_string("[]".into()).unwrap();
        assert_eq!(InputRequired::parse_raw(&raw, 8), Err(MrtrError::NotObject));
    }

    #[test]
    fn retry_echoes_state_and_keeps_params() {
        let ir = InputRequired::parse(&python_result(), 8).unwrap();
        let original = json!({"name":"ask_name","arguments":{},"_meta":{"progressToken":"p"},
            "inputResponses":{"old":{}},"requestState":"stale"});
        let mut answers = Map::new();
        answers.insert(
            "who".into(),
            json!({"action":"accept","content":{"name":"Ada"}}),
        );
        let p = retry_params(&original, &ir, answers).unwrap();
        assert_eq!(p["name"], "ask_name");
        assert_eq!(p["_meta"]["progressToken"], "p");
        assert_eq!(p["requestState"], "v1.abc");
        assert_eq!(
            p["inputResponses"],
            json!({"who":{"action":"accept","content":{"name":"Ada"}}})
        );
        assert_eq!(
            retry_params(&original, &ir, Map::new()),
            Err(MrtrError::MissingResponse("who".into()))
        );
        assert_eq!(
            retry_params(&json!([1]), &ir, Map::new()),
            Err(MrtrError::ParamsNotObject)
        );
    }

    #[test]
    fn retry_without_state_sends_none() {
        let ir = InputRequired::parse(
            &json!({"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"ok?"}}}}),
            8,
        )
        .unwrap();
        let mut a = Map::new();
        a.insert(
            "confirm".into(),
            json!({"action":"accept","content":{"confirmed":true}}),
        );
        let p = retry_params(&json!({"name":"t","requestState":"leftover"}), &ir, a).unwrap();
        assert!(p.get("requestState").is_none());
        assert_eq!(p["inputResponses"]["confirm"]["action"], "accept");
        // State-only round: no inputResponses at all.
        let s = InputRequired::parse(&json!({"requestState":"s"}), 8).unwrap();
        let p = retry_params(&Value::Null, &s, Map::new()).unwrap();
        assert_eq!(p, json!({"requestState":"s"}));
    }
}
