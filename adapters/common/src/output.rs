//! A tool's `structuredContent` checked against the `outputSchema` it
//! declared (the spec: servers MUST conform, clients SHOULD validate), as
//! the TypeScript and Python SDKs do.
//!
//! ```text
//!  list_tools ─► record(tools): each outputSchema compiled once (a schema
//!               that does not compile leaves its tool unchecked, noted once)
//!  call_tool  ─► check(name, result): isError ─► as is
//!                                     no structuredContent ─► OutputProblem::Missing
//!                                     does not match ─► OutputProblem::Invalid { path, … }
//! ```
//!
//! A result with `structuredContent` of a tool the client has not listed
//! yet makes the client list the tools (every page, once per connection)
//! to learn its schema, then check it. Validation is on by default with the
//! `validate` feature (the adapters' default) and off for a client with
//! `ConnectOptions::validate_output(false)`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mcpwire::mcp::types::{CallToolResult, Tool};

/// How a tool's result broke its `outputSchema`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutputProblem {
    /// The tool declares an `outputSchema` but its (non-error) result has
    /// no `structuredContent`.
    Missing,
    /// The `structuredContent` does not match the schema.
    Invalid {
        /// Where in the `structuredContent`, as a JSON pointer (`""` for
        /// the whole value, `/items/0/price`).
        path: String,
        /// What is wrong there.
        message: String,
    },
}

impl std::fmt::Display for OutputProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutputProblem::Missing => {
                f.write_str("no structuredContent although it declares an outputSchema")
            }
            OutputProblem::Invalid { path, message } => {
                let at = if path.is_empty() { "/" } else { path };
                write!(
                    f,
                    "structuredContent that does not match its outputSchema at {at}: {message}"
                )
            }
        }
    }
}

/// One tool's compiled schema.
enum Checker {
    #[cfg(feature = "validate")]
    Schema(Box<jsonschema::Validator>),
    /// The schema could not be compiled (why): the tool is not checked.
    #[cfg_attr(not(feature = "validate"), allow(dead_code))]
    Unusable(String),
}

/// The compiled output schemas of the tools last listed.
pub struct OutputSchemas {
    enabled: bool,
    by_tool: Mutex<HashMap<String, Arc<Checker>>>,
    /// A list was recorded, or asked for to learn a schema: never asked
    /// for again on this connection just for that.
    listed: std::sync::atomic::AtomicBool,
    /// Some tool of the last list has a schema: without one, a result
    /// is not checked (and no lock is taken a call).
    any_schema: std::sync::atomic::AtomicBool,
    /// The tool of each task started here lately (task id, tool; oldest
    /// first, at most [`MAX_TASKS`]): a task's result is checked as its
    /// tool's.
    tasks: Mutex<std::collections::VecDeque<(String, String)>>,
}

/// Tasks whose tool is remembered.
const MAX_TASKS: usize = 1024;

impl std::fmt::Debug for OutputSchemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSchemas")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

impl Default for OutputSchemas {
    fn default() -> Self {
        OutputSchemas::new(true)
    }
}

impl OutputSchemas {
    /// Checks when `enabled` (and the `validate` feature is on).
    pub fn new(enabled: bool) -> Self {
        OutputSchemas {
            enabled: enabled && cfg!(feature = "validate"),
            by_tool: Mutex::new(HashMap::new()),
            listed: std::sync::atomic::AtomicBool::new(false),
            any_schema: std::sync::atomic::AtomicBool::new(false),
            tasks: Mutex::new(std::collections::VecDeque::new()),
        }
    }

    /// Whether `result` of tool `name` should be checked against a schema
    /// the client does not know yet: it carries `structuredContent`, the
    /// tool is unknown, and the tools were never listed on this connection.
    /// True once: the caller then lists the tools (and checks).
    pub fn wants_list_for(&self, name: &str, result: &CallToolResult) -> bool {
        use std::sync::atomic::Ordering;
        if !self.enabled
            || result.is_error()
            || result.structured_content.is_none()
            || self.listed.load(Ordering::SeqCst)
        {
            return false;
        }
        let known = self
            .by_tool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(name);
        !known && !self.listed.swap(true, Ordering::SeqCst)
    }

    /// Task `task_id` runs tool `tool` (started detached).
    pub fn task_started(&self, task_id: &str, tool: &str) {
        if !self.enabled {
            return;
        }
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if tasks.len() >= MAX_TASKS {
            tasks.pop_front();
        }
        tasks.push_back((task_id.to_owned(), tool.to_owned()));
    }

    /// The tool of task `task_id`, if it was started here.
    pub fn tool_of_task(&self, task_id: &str) -> Option<String> {
        let tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        tasks
            .iter()
            .rev()
            .find(|(t, _)| t == task_id)
            .map(|(_, tool)| tool.clone())
    }

    /// Whether results are checked.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// A `tools/list` (every page): compiles each `outputSchema` and
    /// forgets the tools of the previous list. The reasons of schemas that
    /// could not be compiled are returned, for a diagnostic.
    pub fn record(&self, tools: &[Tool]) -> Vec<String> {
        if !self.enabled {
            return Vec::new();
        }
        self.listed.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut notes = Vec::new();
        let compiled: HashMap<String, Arc<Checker>> = tools
            .iter()
            .filter_map(|t| {
                let schema = t.output_schema.as_ref()?;
                let checker = compile(schema);
                // (Irrefutable without the `validate` feature.)
                #[allow(irrefutable_let_patterns)]
                if let Checker::Unusable(why) = &checker {
                    notes.push(format!(
                        "tool `{}`: its outputSchema is not usable, its results are not checked: {why}",
                        t.name
                    ));
                }
                Some((t.name.clone(), Arc::new(checker)))
            })
            .collect();
        let mut by_tool = self.by_tool.lock().unwrap_or_else(|p| p.into_inner());
        self.any_schema
            .store(!compiled.is_empty(), std::sync::atomic::Ordering::SeqCst);
        *by_tool = compiled;
        notes
    }

    /// Checks `result` of tool `name` against its recorded schema.
    pub fn check(&self, name: &str, result: &CallToolResult) -> Result<(), OutputProblem> {
        if !self.enabled
            || result.is_error()
            || !self.any_schema.load(std::sync::atomic::Ordering::SeqCst)
        {
            return Ok(());
        }
        let checker = self
            .by_tool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned();
        let Some(checker) = checker else {
            return Ok(());
        };
        match &*checker {
            Checker::Unusable(_) => Ok(()),
            #[cfg(feature = "validate")]
            Checker::Schema(v) => {
                let Some(value) = &result.structured_content else {
                    return Err(OutputProblem::Missing);
                };
                v.validate(value).map_err(|e| OutputProblem::Invalid {
                    path: e.instance_path().to_string(),
                    message: e.to_string(),
                })
            }
        }
    }
}

#[cfg(feature = "validate")]
fn compile(schema: &serde_json::Value) -> Checker {
    // Draft 2020-12 unless the schema's `$schema` names another (the MCP
    // spec's default); no retrieval of external references.
    match jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(schema)
    {
        Ok(v) => Checker::Schema(Box::new(v)),
        Err(e) => Checker::Unusable(e.to_string()),
    }
}

#[cfg(not(feature = "validate"))]
fn compile(_schema: &serde_json::Value) -> Checker {
    Checker::Unusable("built without the `validate` feature".to_owned())
}

#[cfg(all(test, feature = "validate"))]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, schema: serde_json::Value) -> Tool {
        serde_json::from_value(
            json!({"name": name, "inputSchema": {"type": "object"}, "outputSchema": schema}),
        )
        .unwrap()
    }

    fn result(v: serde_json::Value) -> CallToolResult {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn checks_named_paths_missing_content_and_errors() {
        let s = OutputSchemas::new(true);
        let notes = s.record(&[
            tool(
                "weather",
                json!({"type": "object", "properties": {"temp": {"type": "number"},
                       "days": {"type": "array", "items": {"type": "integer"}}},
                       "required": ["temp"]}),
            ),
            tool("bad", json!({"type": 12})),
        ]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("`bad`"), "{notes:?}");
        let ok = result(json!({"content": [], "structuredContent": {"temp": 3.5, "days": [1, 2]}}));
        assert_eq!(s.check("weather", &ok), Ok(()));
        let bad =
            result(json!({"content": [], "structuredContent": {"temp": 3.5, "days": [1, "x"]}}));
        match s.check("weather", &bad) {
            Err(OutputProblem::Invalid { path, message }) => {
                assert_eq!(path, "/days/1");
                assert!(message.contains("integer"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let whole = result(json!({"content": [], "structuredContent": {"days": []}}));
        let e = s.check("weather", &whole).unwrap_err();
        assert!(e.to_string().contains("at /:"), "{e}");
        assert!(e.to_string().contains("temp"), "{e}");
        let none = result(json!({"content": [{"type": "text", "text": "3.5"}]}));
        assert_eq!(s.check("weather", &none), Err(OutputProblem::Missing));
        let error = result(json!({"content": [], "isError": true}));
        assert_eq!(s.check("weather", &error), Ok(()), "errors are not checked");
        assert_eq!(s.check("bad", &none), Ok(()), "unusable schema: unchecked");
        assert_eq!(s.check("unlisted", &none), Ok(()));
        // A new list replaces the old.
        s.record(&[]);
        assert_eq!(s.check("weather", &none), Ok(()));
        // Off: nothing is checked.
        let off = OutputSchemas::new(false);
        off.record(&[tool("weather", json!({"type": "object"}))]);
        assert_eq!(off.check("weather", &none), Ok(()));
    }

    #[test]
    fn drafts_and_references() {
        let s = OutputSchemas::new(true);
        let notes = s.record(&[
            // draft-07 named by `$schema`.
            tool(
                "d7",
                json!({"$schema": "http://json-schema.org/draft-07/schema#",
                       "type": "object", "properties": {"a": {"type": "string"}}}),
            ),
            // Local $defs work; a remote $ref is never fetched.
            tool(
                "local",
                json!({"$defs": {"n": {"type": "integer"}}, "type": "object",
                       "properties": {"n": {"$ref": "#/$defs/n"}}}),
            ),
            tool(
                "remote",
                json!({"$ref": "https://example.invalid/schema.json"}),
            ),
        ]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("`remote`"));
        let r = result(json!({"content": [], "structuredContent": {"a": 1, "n": "x"}}));
        assert!(s.check("d7", &r).is_err());
        assert!(matches!(
            s.check("local", &r),
            Err(OutputProblem::Invalid { path, .. }) if path == "/n"
        ));
        assert_eq!(s.check("remote", &r), Ok(()));
    }
}
