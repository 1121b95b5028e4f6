//! A request's params on their way out: [`Params`], JSON text written by
//! this crate's own serializer, byte for byte what `serde_json::to_string`
//! writes (strings escaped eight bytes at a time), and never checked again
//! (a `serde_json::value::RawValue` made from text is parsed once more).
//! It is written into a `String` from whole `str`s and ASCII, so it is
//! not checked as UTF-8 either.
//!
//! ```text
//!  value ──Writer (serde::Serializer)──► Params ──► the engine writes it into the request line
//!         └ serde_json's own types, odd map keys: Bail ──► serde_json::to_string
//!  Box<RawValue> ──From──► Params   (already checked: no copy)
//! ```
//!
//! What it does not write itself (a map key that is not a string, an
//! integer, a bool or a char; serde_json's private `RawValue` and `Number`
//! tokens) it hands back whole to `serde_json`, so the output never
//! differs.

use serde::ser::{self, Serialize};
use serde_json::value::RawValue;

use super::strings::{write_str, write_u128, write_u64};

/// A message's params as JSON text, ready to be written: made by this
/// crate's serializer ([`Params::of`]) or taken from raw JSON, which was
/// checked when it was made. Valid JSON either way; nothing parses it
/// again on the way out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    text: String,
    /// Written by a serializer (this crate's or serde_json's): without
    /// raw line breaks, so it goes into a line as it is.
    compact: bool,
}

impl Params {
    /// `value` as JSON, as `serde_json::to_string` writes it.
    pub fn of<T: Serialize + ?Sized>(value: &T) -> Result<Params, serde_json::Error> {
        Params::of_in(value, String::new())
    }

    /// [`of`](Self::of), written into `buf` (cleared first): the buffer of
    /// an earlier call's params ([`into_buffer`](Self::into_buffer)), so
    /// that a call allocates nothing for its params.
    pub fn of_in<T: Serialize + ?Sized>(
        value: &T,
        buf: String,
    ) -> Result<Params, serde_json::Error> {
        if let Some(params) = Params::pieces_in(buf, |p| p.value(value)) {
            return Ok(params);
        }
        serde_json::to_string(value).map(|text| Params {
            text,
            compact: true,
        })
    }

    /// Params written piece by piece by a method that knows their members
    /// (a hot one: no struct machinery, its keys written as literals), into
    /// `buf` (cleared first). `None` when a value in them is one the writer
    /// leaves to serde_json: the method then writes them all through
    /// [`of_in`](Self::of_in).
    pub(crate) fn pieces_in(
        mut buf: String,
        write: impl FnOnce(&mut Pieces<'_>) -> Result<(), Bail>,
    ) -> Option<Params> {
        buf.clear();
        // Most params fit: one allocation (none with a given buffer).
        buf.reserve(256);
        write(&mut Pieces { out: &mut buf }).ok()?;
        Some(Params {
            text: buf,
            compact: true,
        })
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        &self.text
    }

    /// Its buffer, for the next params ([`of_in`](Self::of_in)).
    pub fn into_buffer(self) -> String {
        self.text
    }

    /// As raw JSON (parsed once, to make the `RawValue`). An error only
    /// when a `Serialize` implementation that this crate's writer left to
    /// serde_json made serde_json write invalid JSON (a sequence longer
    /// than the length it announced).
    pub fn to_raw(&self) -> Result<Box<RawValue>, serde_json::Error> {
        RawValue::from_string(self.text.clone())
    }
}

impl From<Box<RawValue>> for Params {
    fn from(raw: Box<RawValue>) -> Params {
        Params {
            text: Box::<str>::from(raw).into_string(),
            compact: false,
        }
    }
}

impl From<&RawValue> for Params {
    fn from(raw: &RawValue) -> Params {
        Params {
            text: raw.get().to_owned(),
            compact: false,
        }
    }
}

/// Borrowed JSON text of params (raw JSON or [`Params`]), as the engine
/// and the connection pass it along.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Json<'a> {
    text: &'a str,
    /// Known to hold no raw line break (see [`Params`]).
    compact: bool,
}

impl<'a> Json<'a> {
    pub(crate) fn get(self) -> &'a str {
        self.text
    }

    /// Whether it is known to hold no raw line break (raw JSON may).
    pub(crate) fn compact(self) -> bool {
        self.compact
    }
}

impl<'a> From<&'a RawValue> for Json<'a> {
    fn from(raw: &'a RawValue) -> Json<'a> {
        Json {
            text: raw.get(),
            compact: false,
        }
    }
}

impl<'a> From<&'a Params> for Json<'a> {
    fn from(p: &'a Params) -> Json<'a> {
        Json {
            text: &p.text,
            compact: p.compact,
        }
    }
}

/// Appends `value`'s JSON to `out`, or [`Bail`]s (`out` then holds part
/// of it).
fn write<T: Serialize + ?Sized>(value: &T, out: &mut String) -> Result<(), Bail> {
    value.serialize(Writer { out })
}

/// What [`Params::pieces_in`]'s writer puts in, in order.
pub(crate) struct Pieces<'a> {
    out: &'a mut String,
}

impl Pieces<'_> {
    /// JSON text of the method's own, as it is: punctuation and keys it
    /// knows need no escape (`{"name":`). Inlined: its length is then a
    /// constant, and the copy a few moves instead of a `memcpy` call.
    #[inline(always)]
    pub(crate) fn literal(&mut self, json: &'static str) {
        self.out.push_str(json);
    }

    /// A string, quoted and escaped.
    pub(crate) fn string(&mut self, s: &str) {
        write_str(self.out, s);
    }

    /// Any value, as [`Params::of`] writes it.
    pub(crate) fn value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Bail> {
        write(value, self.out)
    }
}

/// What the writer leaves to `serde_json` (the whole value then).
#[derive(Debug)]
pub(crate) struct Bail;

impl std::fmt::Display for Bail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("left to serde_json")
    }
}

impl std::error::Error for Bail {}

impl ser::Error for Bail {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Bail
    }
}

/// serde_json's private struct names (`RawValue`, arbitrary-precision
/// `Number`): their meaning is serde_json's.
const PRIVATE: &str = "$serde_json::private::";

struct Writer<'a> {
    out: &'a mut String,
}

/// A sequence, map or struct being written: whether the next element is
/// the first, and whether a variant's `}` closes it.
struct Compound<'a> {
    out: &'a mut String,
    first: bool,
    variant: bool,
}

impl Compound<'_> {
    fn comma(&mut self) {
        if !std::mem::take(&mut self.first) {
            self.out.push(',');
        }
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Bail> {
        self.comma();
        write_str(self.out, key);
        self.out.push(':');
        value.serialize(Writer { out: self.out })
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Bail> {
        self.comma();
        value.serialize(Writer { out: self.out })
    }

    fn close(self, end: char) {
        self.out.push(end);
        if self.variant {
            self.out.push('}');
        }
    }
}

fn int(out: &mut String, v: impl itoa_like::Int) {
    v.write(out);
}

/// A float as serde_json writes it (the shortest digits; `null` when not
/// finite).
fn float<F: Serialize>(out: &mut String, v: F) -> Result<(), Bail> {
    out.push_str(&serde_json::to_string(&v).map_err(|_| Bail)?);
    Ok(())
}

/// Integers without a formatting crate: through `u64`/`u128` digits.
mod itoa_like {
    pub trait Int {
        fn write(self, out: &mut String);
    }

    macro_rules! unsigned {
        ($($t:ty)*) => {$(
            impl Int for $t {
                fn write(self, out: &mut String) {
                    if (self as u128) < 1 << 64 {
                        super::write_u64(out, self as u64);
                    } else {
                        super::write_u128(out, self as u128);
                    }
                }
            }
        )*};
    }
    macro_rules! signed {
        ($($t:ty)*) => {$(
            impl Int for $t {
                fn write(self, out: &mut String) {
                    if self < 0 {
                        out.push('-');
                    }
                    (self.unsigned_abs()).write(out);
                }
            }
        )*};
    }
    unsigned!(u8 u16 u32 u64 u128);
    signed!(i8 i16 i32 i64 i128);
}

/// A serializer's ten integer methods, each `|this, v| body`.
macro_rules! integers {
    (|$this:ident, $v:ident| $body:expr) => {
        integers!(@each $this $v $body; serialize_i8 i8, serialize_i16 i16,
            serialize_i32 i32, serialize_i64 i64, serialize_i128 i128, serialize_u8 u8,
            serialize_u16 u16, serialize_u32 u32, serialize_u64 u64, serialize_u128 u128);
    };
    (@each $this:ident $v:ident $body:expr; $($name:ident $t:ty),*) => {$(
        fn $name(self, $v: $t) -> Result<(), Bail> {
            let $this = self;
            $body
        }
    )*};
}

impl<'a> ser::Serializer for Writer<'a> {
    type Ok = ();
    type Error = Bail;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Bail> {
        self.out.push_str(if v { "true" } else { "false" });
        Ok(())
    }
    integers!(|this, v| {
        int(this.out, v);
        Ok(())
    });
    // Floats as serde_json writes them (the shortest digits; null when
    // not finite).
    fn serialize_f32(self, v: f32) -> Result<(), Bail> {
        float(self.out, v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Bail> {
        float(self.out, v)
    }
    fn serialize_char(self, v: char) -> Result<(), Bail> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Bail> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Bail> {
        self.out.push('[');
        for (i, b) in v.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            int(self.out, *b);
        }
        self.out.push(']');
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Bail> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Bail> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Bail> {
        self.out.push_str("null");
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Bail> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, v: &'static str) -> Result<(), Bail> {
        self.serialize_str(v)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Bail> {
        if name.starts_with(PRIVATE) {
            return Err(Bail);
        }
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Bail> {
        self.out.push('{');
        write_str(self.out, variant);
        self.out.push(':');
        value.serialize(Writer { out: self.out })?;
        self.out.push('}');
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'a>, Bail> {
        self.out.push('[');
        Ok(Compound {
            out: self.out,
            first: true,
            variant: false,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a>, Bail> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Compound<'a>, Bail> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Bail> {
        self.out.push('{');
        write_str(self.out, variant);
        self.out.push_str(":[");
        Ok(Compound {
            out: self.out,
            first: true,
            variant: true,
        })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'a>, Bail> {
        self.out.push('{');
        Ok(Compound {
            out: self.out,
            first: true,
            variant: false,
        })
    }
    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Compound<'a>, Bail> {
        if name.starts_with(PRIVATE) {
            return Err(Bail);
        }
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Bail> {
        self.out.push('{');
        write_str(self.out, variant);
        self.out.push_str(":{");
        Ok(Compound {
            out: self.out,
            first: true,
            variant: true,
        })
    }
}

/// The sequences (`[…]`, a tuple variant's `{"V":[…]}`): elements.
macro_rules! sequence {
    ($($trait:ident :: $element:ident),*) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Bail;
            fn $element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Bail> {
                self.element(value)
            }
            fn end(self) -> Result<(), Bail> {
                self.close(']');
                Ok(())
            }
        }
    )*};
}

sequence!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Bail;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Bail> {
        self.comma();
        key.serialize(Key { out: self.out })?;
        self.out.push(':');
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Bail> {
        value.serialize(Writer { out: self.out })
    }
    fn end(self) -> Result<(), Bail> {
        self.close('}');
        Ok(())
    }
}

/// The structs (`{…}`, a struct variant's `{"V":{…}}`): named fields.
macro_rules! structure {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Bail;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Bail> {
                self.field(key, value)
            }
            fn end(self) -> Result<(), Bail> {
                self.close('}');
                Ok(())
            }
        }
    )*};
}

structure!(SerializeStruct, SerializeStructVariant);

/// A map key: a string, or an integer, a bool or a char written as one
/// (as serde_json does); anything else is left to serde_json.
struct Key<'a> {
    out: &'a mut String,
}

impl Key<'_> {
    fn quoted(self, write: impl FnOnce(&mut String)) -> Result<(), Bail> {
        self.out.push('"');
        write(self.out);
        self.out.push('"');
        Ok(())
    }
}

/// A serializer's seven compound types and methods for one that takes
/// scalars only: every sequence, map or struct stops it with [`Bail`]
/// (the map-key writer here, `tools/call`'s null probe). `but_struct`
/// leaves out the struct's (the null probe reads serde_json's `RawValue`,
/// which is a struct to serde).
macro_rules! no_compounds {
    ($ok:ty) => {
        $crate::codec::json::no_compounds!($ok, but_struct);
        type SerializeStruct = serde::ser::Impossible<$ok, $crate::codec::json::Bail>;
        fn serialize_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStruct, $crate::codec::json::Bail> {
            Err($crate::codec::json::Bail)
        }
    };
    ($ok:ty, but_struct) => {
        type SerializeSeq = serde::ser::Impossible<$ok, $crate::codec::json::Bail>;
        type SerializeTuple = serde::ser::Impossible<$ok, $crate::codec::json::Bail>;
        type SerializeTupleStruct = serde::ser::Impossible<$ok, $crate::codec::json::Bail>;
        type SerializeTupleVariant = serde::ser::Impossible<$ok, $crate::codec::json::Bail>;
        type SerializeMap = serde::ser::Impossible<$ok, $crate::codec::json::Bail>;
        type SerializeStructVariant = serde::ser::Impossible<$ok, $crate::codec::json::Bail>;

        fn serialize_seq(
            self,
            _: Option<usize>,
        ) -> Result<Self::SerializeSeq, $crate::codec::json::Bail> {
            Err($crate::codec::json::Bail)
        }
        fn serialize_tuple(
            self,
            _: usize,
        ) -> Result<Self::SerializeTuple, $crate::codec::json::Bail> {
            Err($crate::codec::json::Bail)
        }
        fn serialize_tuple_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleStruct, $crate::codec::json::Bail> {
            Err($crate::codec::json::Bail)
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, $crate::codec::json::Bail> {
            Err($crate::codec::json::Bail)
        }
        fn serialize_map(
            self,
            _: Option<usize>,
        ) -> Result<Self::SerializeMap, $crate::codec::json::Bail> {
            Err($crate::codec::json::Bail)
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, $crate::codec::json::Bail> {
            Err($crate::codec::json::Bail)
        }
    };
}
pub(crate) use no_compounds;

impl ser::Serializer for Key<'_> {
    type Ok = ();
    type Error = Bail;
    no_compounds!(());

    fn serialize_str(self, v: &str) -> Result<(), Bail> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Bail> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_bool(self, v: bool) -> Result<(), Bail> {
        self.quoted(|o| o.push_str(if v { "true" } else { "false" }))
    }
    // Quoted, as serde_json writes integer keys.
    integers!(|this, v| this.quoted(|o| int(o, v)));
    fn serialize_unit_variant(self, _: &'static str, _: u32, v: &'static str) -> Result<(), Bail> {
        self.serialize_str(v)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Bail> {
        if name.starts_with(PRIVATE) {
            return Err(Bail);
        }
        value.serialize(self)
    }
    fn serialize_f32(self, _: f32) -> Result<(), Bail> {
        Err(Bail)
    }
    fn serialize_f64(self, _: f64) -> Result<(), Bail> {
        Err(Bail)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Bail> {
        Err(Bail)
    }
    fn serialize_none(self) -> Result<(), Bail> {
        Err(Bail)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Bail> {
        Err(Bail)
    }
    fn serialize_unit(self) -> Result<(), Bail> {
        Err(Bail)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Bail> {
        Err(Bail)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Bail> {
        Err(Bail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};
    use std::collections::BTreeMap;

    /// Params written into a given buffer are that buffer (cleared
    /// first): a call's params need no allocation of their own.
    #[test]
    fn params_are_written_into_the_buffer_given() {
        // A capacity no fresh buffer has, to know it again.
        let first = Params::of_in(&json!({"a": 1}), String::with_capacity(1000)).unwrap();
        let buf = first.into_buffer();
        let (ptr, cap) = (buf.as_ptr(), buf.capacity());
        assert_eq!(cap, 1000);
        let second = Params::of_in(&json!({"b": [true, null]}), buf).unwrap();
        assert_eq!(second.get(), r#"{"b":[true,null]}"#);
        let buf = second.into_buffer();
        assert_eq!((buf.as_ptr(), buf.capacity()), (ptr, cap));
    }

    /// Written by the writer itself, as serde_json writes it.
    fn same<T: Serialize + ?Sized>(v: &T) {
        let want = serde_json::to_string(v).unwrap();
        let mut out = String::new();
        write(v, &mut out).expect("written, not left to serde_json");
        assert_eq!(out, want);
        assert_eq!(Params::of(v).unwrap().get(), want);
    }

    /// Left to serde_json, with the same result.
    fn left<T: Serialize + ?Sized>(v: &T) {
        assert!(write(v, &mut String::new()).is_err());
        assert_eq!(
            Params::of(v).unwrap().get(),
            serde_json::to_string(v).unwrap()
        );
    }

    #[test]
    fn writes_what_serde_json_writes() {
        same(&json!(null));
        same(
            &json!({"name": "echo", "arguments": {"text": "a\"b\\c\n\u{1}\u{7f}é😀", "n": -12, "u": 18446744073709551615u64, "f": 1.5, "e": 1e300, "z": 0.0, "b": [true, false, null, [], {}]}}),
        );
        same(&json!("\u{0}\u{8}\u{c}\t\r\u{1f} end"));
        same(&crate::mcp::methods::CallTool::new(
            "t",
            json!({"x": [1, 2.0]}),
        ));
        same(&crate::mcp::methods::CallTool::new("t", Value::Null));
        let mut m = BTreeMap::new();
        m.insert(3u8, 'c');
        m.insert(200u8, '"');
        same(&m);
        let mut k = BTreeMap::new();
        k.insert(true, ());
        same(&k);
        same(&(1i128 << 100, -(1i128 << 100), u128::MAX, i64::MIN, [0u8; 3]));
        same(&Some("x"));
        same(&'\u{2028}');
        same(&(f32::NAN, f64::INFINITY, 0.1f32, -0.0f64));
        left(&serde_json::value::to_raw_value(&json!({"raw": [1]})).unwrap());
        let mut floats = BTreeMap::new();
        floats.insert(Key(1.5), 1);
        left(&floats);
        // serde_json's own error comes back.
        let mut bad = BTreeMap::new();
        bad.insert(vec![1], 1);
        assert!(Params::of(&bad).is_err());
        // Raw JSON becomes params as it is.
        let raw = serde_json::value::to_raw_value(&json!({"a": [1, "b"]})).unwrap();
        assert_eq!(Params::from(raw.clone()).get(), raw.get());
        assert_eq!(Params::from(&*raw).to_raw().unwrap().get(), raw.get());
    }

    /// A float map key (serde_json quotes finite ones).
    struct Key(f64);
    impl PartialEq for Key {
        fn eq(&self, other: &Self) -> bool {
            self.cmp(other).is_eq()
        }
    }
    impl Eq for Key {}
    impl PartialOrd for Key {
        fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for Key {
        fn cmp(&self, other: &Self) -> std::cmp::Ordering {
            self.0.total_cmp(&other.0)
        }
    }
    impl Serialize for Key {
        fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_f64(self.0)
        }
    }

    #[derive(serde::Serialize)]
    enum E {
        Unit,
        New(u8),
        Tuple(u8, &'static str),
        Struct { a: Option<u8>, b: Vec<E> },
    }

    #[test]
    fn enums_as_serde_json_writes_them() {
        same(&E::Unit);
        same(&E::New(1));
        same(&E::Tuple(1, "x"));
        same(&E::Struct {
            a: None,
            b: vec![
                E::Unit,
                E::New(2),
                E::Struct {
                    a: Some(1),
                    b: vec![],
                },
            ],
        });
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            "[\\x00-\\x7f]{0,40}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(any::<String>(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_value_is_written_as_serde_json_writes_it(v in value()) {
            let want = serde_json::to_string(&v).unwrap();
            let mut out = String::new();
            prop_assert!(write(&v, &mut out).is_ok());
            prop_assert_eq!(out, want);
        }
    }
}
