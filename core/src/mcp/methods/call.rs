//! `tools/call`'s params: [`CallTool`], owning a `Value` of arguments, and
//! [`CallToolRef`], borrowing arguments of any serializable type (what the
//! clients send: the caller keeps its arguments, and typed arguments are
//! written as they are, without a `Value` made of them first).

use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::{Capability, Method};
use crate::codec::json::{no_compounds, Bail, Params};
use crate::mcp::types::CallToolResult;

/// `tools/call`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallTool {
    /// The tool's name.
    pub name: String,
    /// Its arguments (a JSON object), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
}

impl CallTool {
    /// Calls `name` with `arguments` (`null` means none).
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        CallTool {
            name: name.into(),
            arguments: (!arguments.is_null()).then_some(arguments),
        }
    }
}

/// `tools/call` with borrowed arguments of any serializable type: written
/// as [`CallTool`] writes them (arguments that serialize as `null` mean
/// none).
#[derive(Debug)]
pub struct CallToolRef<'a, A: ?Sized> {
    /// The tool's name.
    pub name: &'a str,
    /// Its arguments (a JSON object).
    pub arguments: &'a A,
}

impl<'a, A: Serialize + ?Sized> CallToolRef<'a, A> {
    /// Calls `name` with `arguments`.
    pub fn new(name: &'a str, arguments: &'a A) -> Self {
        CallToolRef { name, arguments }
    }
}

impl<A: Serialize + ?Sized> Serialize for CallToolRef<'_, A> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let arguments = !is_null(self.arguments);
        let mut st = s.serialize_struct("CallTool", 1 + usize::from(arguments))?;
        st.serialize_field("name", self.name)?;
        if arguments {
            st.serialize_field("arguments", self.arguments)?;
        }
        st.end()
    }
}

impl<A: Serialize + ?Sized> Method for CallToolRef<'_, A> {
    const NAME: &'static str = CallTool::NAME;
    const CAPABILITY: Option<Capability> = CallTool::CAPABILITY;
    const PAGED: bool = CallTool::PAGED;
    type Result = CallToolResult;

    fn params_json(&self) -> Result<Option<Params>, serde_json::Error> {
        self.params_json_in(String::new())
    }

    /// What [`Serialize`] writes, written member by member: the
    /// commonest request's params without the struct machinery (about 250
    /// instructions less a call).
    fn params_json_in(&self, buf: String) -> Result<Option<Params>, serde_json::Error> {
        let arguments = !is_null(self.arguments);
        let written = Params::pieces_in(buf, |p| {
            p.literal(r#"{"name":"#);
            p.string(self.name);
            if arguments {
                p.literal(r#","arguments":"#);
                p.value(self.arguments)?;
            }
            p.literal("}");
            Ok(())
        });
        match written {
            Some(params) => Ok(Some(params)),
            None => super::params_in(self, String::new()),
        }
    }

    fn read_result(raw: Box<RawValue>) -> Result<CallToolResult, serde_json::Error> {
        CallTool::read_result(raw)
    }
}

/// Whether `value` serializes as `null` (as serde_json writes it: unit,
/// `None`, a unit struct, a non-finite float). The probe stops at the
/// first thing `value` writes (a compound value stops it with [`Bail`]).
fn is_null<T: Serialize + ?Sized>(value: &T) -> bool {
    value.serialize(NullProbe).unwrap_or(false)
}

struct NullProbe;

/// A `RawValue` being probed: whether its text is `null`.
struct RawProbe(bool);

impl SerializeStruct for RawProbe {
    type Ok = bool;
    type Error = Bail;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        text: &T,
    ) -> Result<(), Bail> {
        // The text, as a string (a `RawValue` is rarely an argument).
        let text = serde_json::to_value(text).map_err(|_| Bail)?;
        self.0 = text
            .as_str()
            .is_some_and(|t| t.trim_matches([' ', '\t', '\n', '\r']) == "null");
        Ok(())
    }

    fn end(self) -> Result<bool, Bail> {
        Ok(self.0)
    }
}

/// Scalars that are never `null`.
macro_rules! not_null {
    ($($f:ident: $t:ty),*) => {
        $(fn $f(self, _: $t) -> Result<bool, Bail> {
            Ok(false)
        })*
    };
}

impl Serializer for NullProbe {
    type Ok = bool;
    type Error = Bail;
    no_compounds!(bool, but_struct);
    type SerializeStruct = RawProbe;

    /// Only serde_json's `RawValue` (a struct of one member, its text, to
    /// serde) is read: `null` when its text is.
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<RawProbe, Bail> {
        if name == crate::codec::scan::TOKEN {
            Ok(RawProbe(false))
        } else {
            Err(Bail)
        }
    }

    not_null!(
        serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_i128: i128, serialize_u8: u8, serialize_u16: u16,
        serialize_u32: u32, serialize_u64: u64, serialize_u128: u128, serialize_char: char,
        serialize_str: &str, serialize_bytes: &[u8]
    );
    fn serialize_f32(self, v: f32) -> Result<bool, Bail> {
        Ok(!v.is_finite())
    }
    fn serialize_f64(self, v: f64) -> Result<bool, Bail> {
        Ok(!v.is_finite())
    }
    fn serialize_none(self) -> Result<bool, Bail> {
        Ok(true)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<bool, Bail> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<bool, Bail> {
        Ok(true)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<bool, Bail> {
        Ok(true)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<bool, Bail> {
        Ok(false)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<bool, Bail> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<bool, Bail> {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::json::Params;
    use serde_json::json;
    use std::collections::BTreeMap;

    /// Written as `CallTool` writes the same arguments made a `Value` (the
    /// same JSON; a struct's members in its own order, not sorted).
    fn same<A: Serialize + ?Sized>(arguments: &A) {
        let value = serde_json::to_value(arguments).unwrap();
        let owned = CallTool::new("t", value.clone());
        let borrowed = CallToolRef::new("t", arguments);
        let json = |text: &str| serde_json::from_str::<Value>(text).unwrap();
        assert_eq!(
            json(&serde_json::to_string(&borrowed).unwrap()),
            json(&serde_json::to_string(&owned).unwrap()),
            "{value}"
        );
        let params = |p: Option<Params>| p.map(|p| json(p.get()));
        assert_eq!(
            params(borrowed.params_json().unwrap()),
            params(owned.params_json().unwrap()),
            "{value}"
        );
        // Member by member, byte for byte what serde_json writes of it.
        let text = borrowed.params_json().unwrap().map(|p| p.get().to_owned());
        let want = serde_json::to_string(&borrowed).unwrap();
        assert_eq!(text.as_deref(), Some(want.as_str()));
        if arguments_are_a_value::<A>() {
            assert_eq!(
                serde_json::to_string(&borrowed).unwrap(),
                serde_json::to_string(&owned).unwrap()
            );
        }
    }

    fn arguments_are_a_value<A: ?Sized>() -> bool {
        std::any::type_name::<A>() == std::any::type_name::<Value>()
    }

    #[derive(Serialize)]
    struct Typed<'a> {
        text: &'a str,
        count: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        extra: Option<bool>,
    }

    #[derive(Serialize)]
    struct Unit;

    #[derive(Serialize)]
    struct Wrapper(Option<u8>);

    #[test]
    fn borrowed_arguments_are_written_as_the_owned_ones() {
        same(&json!({"text": "a\"b", "n": [1, 2.5, null]}));
        same(&json!({}));
        same(&Value::Null);
        same(&json!(7));
        same(&Typed {
            text: "hi",
            count: 3,
            extra: None,
        });
        same(&BTreeMap::from([("k", 1)]));
        same(&());
        same(&None::<u8>);
        same(&Some(json!({"a": 1})));
        same(&Unit);
        same(&Wrapper(None));
        same(&Wrapper(Some(1)));
        same(&f64::NAN);
        same(&1.5f32);
        same("a string");
        same(&[1, 2]);
    }

    #[test]
    fn null_arguments_are_left_out() {
        let p = CallToolRef::new("t", &Value::Null).params_json().unwrap();
        assert_eq!(
            p.map(|p: Params| p.get().to_owned()).as_deref(),
            Some(r#"{"name":"t"}"#)
        );
        assert!(!is_null(&json!({})));
        assert!(is_null(&Value::Null));
    }

    /// Raw JSON arguments: `null` (spaced or not) is left out as a
    /// `Value::Null` is; anything else is sent as it is.
    #[test]
    fn raw_arguments_are_read_for_null() {
        for (raw, args) in [
            ("null", None),
            (" null\n", None),
            ("{}", Some("{}")),
            (r#"{"a":null}"#, Some(r#"{"a":null}"#)),
            (r#""null""#, Some(r#""null""#)),
            ("[null]", Some("[null]")),
        ] {
            let raw = RawValue::from_string(raw.to_owned()).unwrap();
            let p = CallToolRef::new("t", &*raw).params_json().unwrap().unwrap();
            let want = match args {
                None => r#"{"name":"t"}"#.to_owned(),
                Some(a) => format!(r#"{{"name":"t","arguments":{a}}}"#),
            };
            assert_eq!(p.get(), want, "{raw}");
            let boxed = CallToolRef::new("t", &raw).params_json().unwrap().unwrap();
            assert_eq!(boxed.get(), want, "{raw}");
        }
    }
}
