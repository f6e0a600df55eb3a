//! The messages of pprof's `profile.proto`
//! (<https://github.com/google/pprof/blob/main/proto/profile.proto>), declared by hand with
//! prost's derive (no protoc, no build script): field numbers and types as the proto says.
//! Plus reading a written profile back ([`decode`]) and a stable text dump of it
//! ([`dump`]), which the golden tests compare.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Read;

use prost::Message;

/// `message Profile`.
#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Index 0 is always "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
    #[prost(int64, tag = "15")]
    pub doc_url: i64,
}

/// `message ValueType`: string-table indices of a type and its unit.
#[derive(Clone, Copy, PartialEq, Eq, Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `message Sample`: locations leaf first, one value per sample type.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// `message Label`.
#[derive(Clone, Copy, PartialEq, Eq, Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// `message Mapping`.
#[derive(Clone, Copy, PartialEq, Eq, Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// `message Location`: its lines innermost (inlined) function first.
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// `message Line`.
#[derive(Clone, Copy, PartialEq, Eq, Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// `message Function`.
#[derive(Clone, Copy, PartialEq, Eq, Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

/// Reads a profile as written: gzipped (or not, as pprof also accepts) protobuf. At most
/// `limit` bytes are decompressed.
pub fn decode(bytes: &[u8], limit: u64) -> Result<Profile, String> {
    let raw = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .take(limit)
            .read_to_end(&mut out)
            .map_err(|e| format!("not gzip: {e}"))?;
        out
    } else {
        bytes.to_vec()
    };
    Profile::decode(raw.as_slice()).map_err(|e| format!("not a profile.proto: {e}"))
}

/// A stable text dump of `p`, ids resolved: the header fields, mappings, then each sample
/// (values, labels, and its stack leaf first as `function file:line`, a location's inlined
/// lines joined by ` <- inlined into `). Samples in the order of the file.
pub fn dump(p: &Profile) -> String {
    let s = |i: i64| -> &str {
        usize::try_from(i)
            .ok()
            .and_then(|i| p.string_table.get(i))
            .map_or("<bad string index>", String::as_str)
    };
    let vt = |v: &ValueType| format!("{}/{}", s(v.r#type), s(v.unit));
    let mut o = String::new();
    let types: Vec<String> = p.sample_type.iter().map(vt).collect();
    let _ = writeln!(o, "sample types: {}", types.join(", "));
    if p.default_sample_type != 0 {
        let _ = writeln!(o, "default sample type: {}", s(p.default_sample_type));
    }
    if let Some(pt) = &p.period_type {
        let _ = writeln!(o, "period: {} {}", p.period, vt(pt));
    }
    let _ = writeln!(
        o,
        "time_nanos: {}, duration_nanos: {}",
        p.time_nanos, p.duration_nanos
    );
    for c in &p.comment {
        let _ = writeln!(o, "comment: {}", s(*c));
    }
    let _ = writeln!(
        o,
        "{} strings, {} functions, {} locations, {} mappings, {} samples",
        p.string_table.len(),
        p.function.len(),
        p.location.len(),
        p.mapping.len(),
        p.sample.len()
    );
    for m in &p.mapping {
        let _ = writeln!(
            o,
            "mapping {}: {} {:#x}-{:#x} functions={} filenames={} lines={} inline={}",
            m.id,
            s(m.filename),
            m.memory_start,
            m.memory_limit,
            m.has_functions,
            m.has_filenames,
            m.has_line_numbers,
            m.has_inline_frames
        );
    }
    let functions: HashMap<u64, &Function> = p.function.iter().map(|f| (f.id, f)).collect();
    let locations: HashMap<u64, &Location> = p.location.iter().map(|l| (l.id, l)).collect();
    let function = |id: u64| functions.get(&id);
    let line = |l: &Line| match function(l.function_id) {
        Some(f) => {
            let mut t = s(f.name).to_string();
            if f.system_name != f.name {
                let _ = write!(t, " [{}]", s(f.system_name));
            }
            match (s(f.filename), l.line) {
                ("", _) => {}
                (file, 0) => {
                    let _ = write!(t, " {file}");
                }
                (file, n) => {
                    let _ = write!(t, " {file}:{n}");
                }
            }
            t
        }
        None => format!("<no function {}>", l.function_id),
    };
    for (i, smp) in p.sample.iter().enumerate() {
        let values: Vec<String> = smp.value.iter().map(i64::to_string).collect();
        let mut head = format!("sample {i}: {}", values.join(" "));
        for l in &smp.label {
            if l.str != 0 {
                let _ = write!(head, " {}={}", s(l.key), s(l.str));
            } else {
                let _ = write!(head, " {}={}", s(l.key), l.num);
            }
        }
        let _ = writeln!(o, "{head}");
        for id in &smp.location_id {
            let Some(loc) = locations.get(id) else {
                let _ = writeln!(o, "    <no location {id}>");
                continue;
            };
            let lines: Vec<String> = loc.line.iter().map(line).collect();
            let mapping = match loc.mapping_id {
                0 => String::new(),
                m => format!(" (mapping {m})"),
            };
            let _ = writeln!(o, "    {}{mapping}", lines.join(" <- inlined into "));
        }
    }
    o
}
