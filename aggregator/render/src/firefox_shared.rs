//! The Firefox profile with its tables shared by all threads, to keep it small.
//! `fxprof-processed-profile` writes processed format 55, where each thread has its own strings,
//! stacks, frames, functions, resources and native symbols, so a sample on a vCPU's thread and
//! on its task's stores its stack twice. This turns that into format 60 (the profiler upgrades
//! it on from there): the tables in `profile.shared` as the profiler's upgraders to 56-60 shape
//! them, each string, resource, native symbol, function, frame and stack once across threads
//! (a stack is its frame and its prefix), the threads' samples and markers indexing them. The
//! stacks most sampled come first, so that most samples' stack indices are short, and a
//! thread whose samples all weigh 1 writes no weights (`null`: each 1).

use std::io::{self, Write};

use fxprof_processed_profile::Profile;
use kern_profile_profile::ProfileError;
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::{Map, Value};

/// The processed format the crate writes.
const CRATE_VERSION: u64 = 55;
/// The processed format written: all tables in `profile.shared`.
const SHARED_VERSION: u64 = 60;

/// Marker field formats whose values index the string table.
const STRING_FORMATS: [&str; 3] = ["unique-string", "flow-id", "terminating-flow-id"];

/// Writes `profile` as JSON in processed format 60, its tables shared by its threads.
pub fn write_shared(profile: &Profile, out: impl Write) -> Result<(), ProfileError> {
    let v55 = serde_json::to_value(profile).map_err(|e| bad(format!("{e}")))?;
    let v60 = share(v55)?;
    let mut out = io::BufWriter::new(out);
    serde_json::to_writer(&mut out, &v60)
        .map_err(io::Error::other)
        .and_then(|()| out.flush())
        .map_err(|source| ProfileError::Write {
            what: "the Firefox profile".into(),
            source,
        })
}

/// A profile of processed format 55 (the crate's shape) in format 60, its tables shared.
pub fn share(mut profile: Value) -> Result<Value, ProfileError> {
    let root = profile
        .as_object_mut()
        .ok_or_else(|| bad("the profile is no JSON object"))?;
    let string_fields = upgrade_meta(root)?;
    let threads = root
        .get_mut("threads")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| bad("the profile has no threads array"))?;
    let mut shared = Shared::default();
    for (i, thread) in threads.iter_mut().enumerate() {
        let thread = thread
            .as_object_mut()
            .ok_or_else(|| bad(format!("thread {i} is no JSON object")))?;
        shared
            .thread(thread, &string_fields)
            .map_err(|e| bad(format!("thread {i}: {e}")))?;
    }
    let order = shared.hot_first();
    for thread in threads.iter_mut().filter_map(Value::as_object_mut) {
        stack_refs(thread, |stack| {
            *stack = map_index(stack, &order, "stack")?;
            Ok(())
        })
        .map_err(bad)?;
    }
    root.insert("shared".into(), shared.into_value());
    Ok(profile)
}

/// The `cannot write the Firefox profile: {what}` error.
fn bad(what: impl Into<String>) -> ProfileError {
    ProfileError::Write {
        what: "the Firefox profile".into(),
        source: io::Error::new(io::ErrorKind::InvalidData, what.into()),
    }
}

/// A shape error inside a thread, told with the thread's index by [`share`].
type Shaped<T> = Result<T, String>;

/// Checks the version and upgrades `meta` to 60 (fields lose `searchable`); returns the keys
/// of the string-index fields per marker type.
fn upgrade_meta(
    root: &mut Map<String, Value>,
) -> Result<FxHashMap<String, Vec<String>>, ProfileError> {
    let meta = root
        .get_mut("meta")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| bad("the profile has no meta object"))?;
    let version = meta
        .get("preprocessedProfileVersion")
        .and_then(Value::as_u64);
    if version != Some(CRATE_VERSION) {
        return Err(bad(format!(
            "processed profile version {version:?}, not {CRATE_VERSION}"
        )));
    }
    meta.insert("preprocessedProfileVersion".into(), SHARED_VERSION.into());
    let mut fields_by_type: FxHashMap<String, Vec<String>> = FxHashMap::default();
    fields_by_type.insert("CompositorScreenshot".into(), vec!["url".into()]);
    let schemas = match meta.get_mut("markerSchema") {
        None => return Ok(fields_by_type),
        Some(s) => s
            .as_array_mut()
            .ok_or_else(|| bad("meta.markerSchema is no array"))?,
    };
    for schema in schemas {
        let name = schema
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let fields = schema
            .get_mut("fields")
            .and_then(Value::as_array_mut)
            .ok_or_else(|| bad("a marker schema has no fields array"))?;
        let mut keys = Vec::new();
        for field in fields.iter_mut().filter_map(Value::as_object_mut) {
            field.remove("searchable");
            let format = field.get("format").and_then(Value::as_str);
            if format.is_some_and(|f| STRING_FORMATS.contains(&f)) {
                if let Some(key) = field.get("key").and_then(Value::as_str) {
                    keys.push(key.to_owned());
                }
            }
        }
        if let (Some(name), false) = (name, keys.is_empty()) {
            fields_by_type.insert(name, keys);
        }
    }
    Ok(fields_by_type)
}

/// A shared table being built: rows of `N` columns, a row stored once per distinct value of
/// its first `key` columns.
struct Rows<const N: usize> {
    names: [&'static str; N],
    key: usize,
    columns: [Vec<Value>; N],
    len: usize,
    index: FxHashMap<Vec<Value>, usize>,
}

impl<const N: usize> Rows<N> {
    fn new(names: [&'static str; N], key: usize) -> Self {
        Rows {
            names,
            key,
            columns: std::array::from_fn(|_| Vec::new()),
            len: 0,
            index: FxHashMap::default(),
        }
    }

    /// The row's index, the row added if no row had its key.
    fn add(&mut self, row: [Value; N]) -> usize {
        let key = row[..self.key].to_vec();
        let (columns, len) = (&mut self.columns, &mut self.len);
        *self.index.entry(key).or_insert_with(|| {
            for (column, v) in columns.iter_mut().zip(row) {
                column.push(v);
            }
            *len += 1;
            *len - 1
        })
    }

    fn into_value(self) -> Value {
        let mut table = Map::new();
        table.insert("length".into(), self.len.into());
        for (name, column) in self.names.into_iter().zip(self.columns) {
            table.insert(name.into(), Value::Array(column));
        }
        Value::Object(table)
    }
}

/// The tables of `profile.shared`.
struct Shared {
    strings: Vec<String>,
    string_index: FxHashMap<String, usize>,
    sources: Rows<2>,
    native_symbols: Rows<4>,
    resources: Rows<4>,
    funcs: Rows<7>,
    frames: Rows<9>,
    /// Each stack's frame and prefix, its index by them, and the samples (and marker
    /// causes) on it.
    stacks: Vec<(usize, Option<usize>)>,
    stack_index: FxHashMap<(usize, Option<usize>), usize>,
    stack_uses: Vec<u64>,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            strings: Vec::new(),
            string_index: FxHashMap::default(),
            sources: Rows::new(["id", "filename"], 2),
            // As the profiler's upgrader: a native symbol is its library and address.
            native_symbols: Rows::new(["libIndex", "address", "name", "functionSize"], 2),
            resources: Rows::new(["type", "lib", "name", "host"], 4),
            funcs: Rows::new(FUNC_COLUMNS_60, 7),
            frames: Rows::new(FRAME_COLUMNS, 9),
            stacks: Vec::new(),
            stack_index: FxHashMap::default(),
            stack_uses: Vec::new(),
        }
    }
}

/// The funcTable's columns at 55, `fileName` a string index.
const FUNC_COLUMNS_55: [&str; 7] = [
    "name",
    "isJS",
    "relevantForJS",
    "resource",
    "fileName",
    "lineNumber",
    "columnNumber",
];
/// The funcTable's columns at 60: `source` indexes `shared.sources` instead.
const FUNC_COLUMNS_60: [&str; 7] = [
    "name",
    "isJS",
    "relevantForJS",
    "resource",
    "source",
    "lineNumber",
    "columnNumber",
];
const FRAME_COLUMNS: [&str; 9] = [
    "address",
    "inlineDepth",
    "category",
    "subcategory",
    "func",
    "nativeSymbol",
    "innerWindowID",
    "line",
    "column",
];

/// A table of a thread, taken out of it to have its columns taken by name.
struct Table {
    name: &'static str,
    len: usize,
    fields: Map<String, Value>,
}

impl Table {
    fn take(thread: &mut Map<String, Value>, name: &'static str) -> Shaped<Table> {
        let Some(Value::Object(fields)) = thread.remove(name) else {
            return Err(format!("no {name} object"));
        };
        let len = length(&fields, name)?;
        Ok(Table { name, len, fields })
    }

    /// The columns `names`, each of the table's length.
    fn columns<const N: usize>(&mut self, names: [&str; N]) -> Shaped<[Vec<Value>; N]> {
        let mut out: [Vec<Value>; N] = std::array::from_fn(|_| Vec::new());
        for (column, name) in out.iter_mut().zip(names) {
            *column = take_column(&mut self.fields, self.name, name, self.len)?;
        }
        Ok(out)
    }
}

/// The `length` of a table.
fn length(table: &Map<String, Value>, name: &str) -> Shaped<usize> {
    table
        .get("length")
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| format!("{name} has no length"))
}

/// The column `column` of `table`, taken out, checked to hold `len` values.
fn take_column(
    table: &mut Map<String, Value>,
    name: &str,
    column: &str,
    len: usize,
) -> Shaped<Vec<Value>> {
    match table.remove(column) {
        Some(Value::Array(a)) if a.len() == len => Ok(a),
        Some(Value::Array(a)) => Err(format!("{name}.{column} has {} values, not {len}", a.len())),
        _ => Err(format!("{name} has no {column} array")),
    }
}

/// `v` as an index below `below`.
fn index(v: &Value, below: usize, what: &str) -> Shaped<usize> {
    v.as_u64()
        .and_then(|i| usize::try_from(i).ok())
        .filter(|&i| i < below)
        .ok_or_else(|| format!("{what} {v} is no index below {below}"))
}

/// `v` as `null` or an index below `below`, mapped through `map`.
fn map_index(v: &Value, map: &[usize], what: &str) -> Shaped<Value> {
    match v {
        Value::Null => Ok(Value::Null),
        v => Ok(map[index(v, map.len(), what)?].into()),
    }
}

/// A thread's string array, its strings moved to the shared one as they are used.
struct ThreadStrings {
    array: Vec<Value>,
    shared: Vec<Option<usize>>,
}

impl Shared {
    /// The shared index of the thread's string `v` (an index into its array).
    fn string(&mut self, local: &mut ThreadStrings, v: &Value, what: &str) -> Shaped<usize> {
        let i = index(v, local.array.len(), what)?;
        if let Some(s) = local.shared[i] {
            return Ok(s);
        }
        let Value::String(s) = &local.array[i] else {
            return Err(format!("stringArray[{i}] is no string"));
        };
        let s = match self.string_index.get(s.as_str()) {
            Some(&s) => s,
            None => {
                self.strings.push(s.clone());
                self.string_index.insert(s.clone(), self.strings.len() - 1);
                self.strings.len() - 1
            }
        };
        local.shared[i] = Some(s);
        Ok(s)
    }

    /// `v` as `null` or the shared index of the thread's string `v`.
    fn string_or_null(
        &mut self,
        local: &mut ThreadStrings,
        v: &Value,
        what: &str,
    ) -> Shaped<Value> {
        match v {
            Value::Null => Ok(Value::Null),
            v => Ok(self.string(local, v, what)?.into()),
        }
    }

    /// Moves a thread's tables into the shared ones, its samples' and markers' stacks and
    /// strings to their shared indices.
    fn thread(
        &mut self,
        thread: &mut Map<String, Value>,
        string_fields: &FxHashMap<String, Vec<String>>,
    ) -> Shaped<()> {
        if thread.contains_key("jsTracer") {
            return Err("a jsTracer table, which is not supported".into());
        }
        let array = match thread.remove("stringArray") {
            Some(Value::Array(a)) => a,
            _ => return Err("no stringArray array".into()),
        };
        let mut strings = ThreadStrings {
            shared: vec![None; array.len()],
            array,
        };
        let strings = &mut strings;

        let mut t = Table::take(thread, "nativeSymbols")?;
        let [lib, address, name, size] =
            t.columns(["libIndex", "address", "name", "functionSize"])?;
        let mut native_symbols = Vec::with_capacity(t.len);
        for (((lib, address), name), size) in lib.into_iter().zip(address).zip(name).zip(size) {
            let name = self.string(strings, &name, "nativeSymbols.name")?;
            native_symbols.push(self.native_symbols.add([lib, address, name.into(), size]));
        }

        let mut t = Table::take(thread, "resourceTable")?;
        let [kind, lib, name, host] = t.columns(["type", "lib", "name", "host"])?;
        let mut resources = Vec::with_capacity(t.len);
        for (((kind, lib), name), host) in kind.into_iter().zip(lib).zip(name).zip(host) {
            let name = self.string(strings, &name, "resourceTable.name")?;
            let host = self.string_or_null(strings, &host, "resourceTable.host")?;
            resources.push(self.resources.add([kind, lib, name.into(), host]));
        }

        let mut t = Table::take(thread, "funcTable")?;
        let columns = t.columns(FUNC_COLUMNS_55)?;
        let mut funcs = Vec::with_capacity(t.len);
        let mut rows = columns.map(Vec::into_iter);
        for _ in 0..t.len {
            let [name, js, relevant, resource, file, line, column] =
                rows.each_mut().map(|c| c.next().unwrap_or_default());
            let name = self.string(strings, &name, "funcTable.name")?;
            let resource = match resource.as_i64() {
                Some(-1) => resource,
                _ => resources[index(&resource, resources.len(), "funcTable.resource")?].into(),
            };
            let source = match file {
                Value::Null => Value::Null,
                file => {
                    let file = self.string(strings, &file, "funcTable.fileName")?;
                    self.sources.add([Value::Null, file.into()]).into()
                }
            };
            let row = [name.into(), js, relevant, resource, source, line, column];
            funcs.push(self.funcs.add(row));
        }

        let mut t = Table::take(thread, "frameTable")?;
        let columns = t.columns(FRAME_COLUMNS)?;
        let mut frames = Vec::with_capacity(t.len);
        let mut windows = Windows::default();
        let mut rows = columns.map(Vec::into_iter);
        for _ in 0..t.len {
            let mut row = rows.each_mut().map(|c| c.next().unwrap_or_default());
            row[4] = funcs[index(&row[4], funcs.len(), "frameTable.func")?].into();
            row[5] = map_index(&row[5], &native_symbols, "frameTable.nativeSymbol")?;
            window(&row[6], &mut windows);
            frames.push(self.frames.add(row));
        }

        let mut t = Table::take(thread, "stackTable")?;
        let [frame, prefix] = t.columns(["frame", "prefix"])?;
        let mut stacks = Vec::with_capacity(t.len);
        for (frame, prefix) in frame.into_iter().zip(prefix) {
            // A prefix comes before its stack: `stacks` holds it already.
            let prefix = match prefix {
                Value::Null => None,
                p => Some(stacks[index(&p, stacks.len(), "stackTable.prefix")?]),
            };
            let frame = frames[index(&frame, frames.len(), "stackTable.frame")?];
            stacks.push(self.stack(frame, prefix));
        }

        let uses = &mut self.stack_uses;
        stack_refs(thread, |stack| {
            *stack = map_index(stack, &stacks, "stack")?;
            if let Some(s) = stack.as_u64() {
                uses[s as usize] += 1;
            }
            Ok(())
        })?;
        if let Some(Value::Object(samples)) = thread.get_mut("samples") {
            drop_unit_weights(samples);
        }
        let markers = match thread.get_mut("markers") {
            Some(Value::Object(m)) => m,
            _ => return Err("no markers object".into()),
        };
        self.markers(markers, strings, string_fields, &mut windows)?;
        if !windows.ids.is_empty() {
            thread.insert("usedInnerWindowIDs".into(), windows.ids.into());
        }
        Ok(())
    }

    /// The shared stack of `frame` on `prefix`.
    fn stack(&mut self, frame: usize, prefix: Option<usize>) -> usize {
        let (stacks, uses) = (&mut self.stacks, &mut self.stack_uses);
        *self.stack_index.entry((frame, prefix)).or_insert_with(|| {
            stacks.push((frame, prefix));
            uses.push(0);
            stacks.len() - 1
        })
    }

    /// The stacks in a new order, the most used first, each after its prefix, so that most
    /// samples' stack indices are short; returns each stack's new index.
    fn hot_first(&mut self) -> Vec<usize> {
        let n = self.stacks.len();
        let mut by_use: Vec<usize> = (0..n).collect();
        by_use.sort_by_key(|&s| (std::cmp::Reverse(self.stack_uses[s]), s));
        let mut new = vec![usize::MAX; n];
        let (mut next, mut chain) = (0, Vec::new());
        for s in by_use {
            let mut at = Some(s);
            while let Some(a) = at.filter(|&a| new[a] == usize::MAX) {
                chain.push(a);
                at = self.stacks[a].1;
            }
            for a in chain.drain(..).rev() {
                new[a] = next;
                next += 1;
            }
        }
        let mut stacks = vec![(0, None); n];
        for (old, &(frame, prefix)) in self.stacks.iter().enumerate() {
            stacks[new[old]] = (frame, prefix.map(|p| new[p]));
        }
        self.stacks = stacks;
        new
    }

    /// The markers' names and string fields to shared strings; their inner window IDs
    /// added to `windows`.
    fn markers(
        &mut self,
        markers: &mut Map<String, Value>,
        strings: &mut ThreadStrings,
        string_fields: &FxHashMap<String, Vec<String>>,
        windows: &mut Windows,
    ) -> Shaped<()> {
        let len = length(markers, "markers")?;
        let mut names = take_column(markers, "markers", "name", len)?;
        for name in &mut names {
            *name = self.string(strings, name, "markers.name")?.into();
        }
        markers.insert("name".into(), names.into());
        let Some(Value::Array(data)) = markers.get_mut("data") else {
            return Err("markers has no data array".into());
        };
        for data in data.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(id) = data.get("innerWindowID") {
                window(id, windows);
            }
            let kind = data.get("type").and_then(Value::as_str);
            let Some(keys) = kind.and_then(|k| string_fields.get(k)) else {
                continue;
            };
            for key in keys {
                if let Some(v) = data.get_mut(key.as_str()) {
                    if !v.is_null() {
                        *v = self.string(strings, v, "a marker's string field")?.into();
                    }
                }
            }
        }
        Ok(())
    }

    fn into_value(self) -> Value {
        let mut shared = Map::new();
        shared.insert("stringArray".into(), self.strings.into());
        shared.insert("sources".into(), self.sources.into_value());
        shared.insert("nativeSymbols".into(), self.native_symbols.into_value());
        shared.insert("resourceTable".into(), self.resources.into_value());
        shared.insert("funcTable".into(), self.funcs.into_value());
        shared.insert("frameTable".into(), self.frames.into_value());
        let (frame, prefix): (Vec<usize>, Vec<Option<usize>>) = self.stacks.into_iter().unzip();
        let mut stacks = Map::new();
        stacks.insert("length".into(), frame.len().into());
        stacks.insert("frame".into(), frame.into());
        stacks.insert("prefix".into(), prefix.into());
        shared.insert("stackTable".into(), stacks.into());
        Value::Object(shared)
    }
}

/// The inner window IDs of a thread's frames and markers, in their order, each once.
#[derive(Default)]
struct Windows {
    ids: Vec<Value>,
    seen: FxHashSet<Value>,
}

/// Adds the inner window ID `id` to `windows` when it is a page's (a number but 0).
fn window(id: &Value, windows: &mut Windows) {
    if id.as_f64().is_some_and(|n| n != 0.0) && windows.seen.insert(id.clone()) {
        windows.ids.push(id.clone());
    }
}

/// Calls `f` on each stack index of a thread: its samples', allocations' and markers'
/// (a marker's cause without a stack gets a `null` one, as the profiler's upgrader gives).
fn stack_refs(
    thread: &mut Map<String, Value>,
    mut f: impl FnMut(&mut Value) -> Shaped<()>,
) -> Shaped<()> {
    for name in ["samples", "nativeAllocations", "jsAllocations"] {
        let table = match thread.get_mut(name) {
            None if name != "samples" => continue,
            Some(Value::Object(t)) => t,
            _ => return Err(format!("no {name} object")),
        };
        let len = length(table, name)?;
        match table.get_mut("stack") {
            Some(Value::Array(a)) if a.len() == len => a.iter_mut().try_for_each(&mut f)?,
            _ => return Err(format!("{name} has no stack array of its length")),
        }
    }
    let Some(Value::Array(data)) = thread.get_mut("markers").and_then(|m| m.get_mut("data")) else {
        return Err("no markers data array".into());
    };
    for data in data {
        if let Some(Value::Object(cause)) = data.get_mut("cause") {
            f(cause.entry("stack").or_insert(Value::Null))?;
        }
    }
    Ok(())
}

/// Drops the weights of samples that all weigh 1 (`null`: each 1).
fn drop_unit_weights(samples: &mut Map<String, Value>) {
    let ones = |w: &Value| {
        w.as_array()
            .is_some_and(|w| w.iter().all(|w| w.as_i64() == Some(1)))
    };
    if samples.get("weightType").and_then(Value::as_str) == Some("samples")
        && samples.get("weight").is_some_and(ones)
    {
        samples.insert("weight".into(), Value::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fxprof_processed_profile::{
        CategoryColor, CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, MarkerFieldFlags,
        MarkerFieldFormat, MarkerTiming, ReferenceTimestamp, SamplingInterval, StaticSchemaMarker,
        StaticSchemaMarkerField, StringHandle, Timestamp,
    };

    /// A marker with a string field (a string index in the JSON).
    struct Note {
        name: StringHandle,
        text: StringHandle,
    }

    impl StaticSchemaMarker for Note {
        const UNIQUE_MARKER_TYPE_NAME: &'static str = "Note";
        const FIELDS: &'static [StaticSchemaMarkerField] = &[StaticSchemaMarkerField {
            key: "text",
            label: "Text",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        }];

        fn name(&self, _profile: &mut Profile) -> StringHandle {
            self.name
        }

        fn category(&self, _profile: &mut Profile) -> CategoryHandle {
            CategoryHandle::OTHER
        }

        fn string_field_value(&self, _field_index: u32) -> StringHandle {
            self.text
        }

        fn number_field_value(&self, _field_index: u32) -> f64 {
            unreachable!("no number field")
        }
    }

    /// Two threads (a vCPU's and a task's) with the same samples, and a third with one of
    /// its own; a marker with a string field and a cause stack on the second.
    fn profile() -> Profile {
        let at = Timestamp::from_nanos_since_reference;
        let mut p = Profile::new(
            "k",
            ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
            SamplingInterval::from_millis(1),
        );
        let process = p.add_process("k", 1, at(0));
        let kernel = p.add_category("Kernel", CategoryColor::Orange);
        let threads = [2, 3, 4].map(|tid| p.add_thread(process, tid, at(0), false));
        let frames = |p: &mut Profile, names: &[&str]| -> Vec<FrameInfo> {
            names
                .iter()
                .map(|n| FrameInfo {
                    frame: Frame::Label(p.intern_string(n)),
                    category_pair: kernel.into(),
                    flags: FrameFlags::empty(),
                })
                .collect()
        };
        let deep = frames(&mut p, &["start", "work", "leaf"]);
        let other = frames(&mut p, &["start", "idle"]);
        for &t in &threads[..2] {
            // Interned in another order on each thread: other indices, same stacks.
            let order: [&[FrameInfo]; 2] = if t == threads[0] {
                [&deep, &other]
            } else {
                [&other, &deep]
            };
            let stacks = order.map(|f| p.intern_stack_frames(t, f.iter().cloned()));
            for (i, s) in [stacks[0], stacks[1], None, stacks[0]]
                .into_iter()
                .enumerate()
            {
                p.add_sample(t, at(i as u64 * 1000), s, CpuDelta::from_nanos(1000), 1);
            }
        }
        let own = frames(&mut p, &["start", "only_here"]);
        let s = p.intern_stack_frames(threads[2], own.into_iter());
        p.add_sample(threads[2], at(0), s, CpuDelta::ZERO, 2);
        let (name, text) = (p.intern_string("note"), p.intern_string("a text"));
        let m = p.add_marker(
            threads[1],
            MarkerTiming::Instant(at(10)),
            Note { name, text },
        );
        let s = p.intern_stack_frames(threads[1], deep.into_iter());
        p.set_marker_stack(threads[1], m, s);
        p
    }

    fn u(v: &Value) -> usize {
        v.as_u64().unwrap() as usize
    }

    /// The function names of a stack, leaf first, through `tables` (a v55 thread, or the
    /// v60 `shared`).
    fn names(tables: &Value, stack: &Value) -> Option<Vec<String>> {
        let mut stack = stack.as_u64()? as usize;
        let mut out = Vec::new();
        loop {
            let frame = u(&tables["stackTable"]["frame"][stack]);
            let func = u(&tables["frameTable"]["func"][frame]);
            let name = u(&tables["funcTable"]["name"][func]);
            out.push(tables["stringArray"][name].as_str().unwrap().to_string());
            match tables["stackTable"]["prefix"][stack].as_u64() {
                Some(p) => stack = p as usize,
                None => return Some(out),
            }
        }
    }

    /// Each thread's samples as function names, and its markers' names and texts.
    fn resolved<'a>(
        threads: &'a [Value],
        tables: impl Fn(&'a Value) -> &'a Value,
    ) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        for t in threads {
            let tables = tables(t);
            let samples = t["samples"]["stack"].as_array().unwrap();
            let mut lines: Vec<String> = samples
                .iter()
                .map(|s| format!("{:?}", names(tables, s)))
                .collect();
            for (i, name) in t["markers"]["name"].as_array().unwrap().iter().enumerate() {
                let data = &t["markers"]["data"][i];
                let s = |v: &Value| tables["stringArray"][u(v)].as_str().unwrap().to_string();
                let cause = names(tables, &data["cause"]["stack"]);
                lines.push(format!("{} {} {cause:?}", s(name), s(&data["text"])));
            }
            out.push(lines);
        }
        out
    }

    #[test]
    fn a_stack_two_threads_sample_is_stored_once() {
        let p = profile();
        let v55 = serde_json::to_value(&p).unwrap();
        let before = resolved(v55["threads"].as_array().unwrap(), |t| t);
        let v = share(v55.clone()).unwrap();
        let after = resolved(v["threads"].as_array().unwrap(), |_| &v["shared"]);
        assert_eq!(before, after);
        assert_eq!(before[0][0], r#"Some(["leaf", "work", "start"])"#);
        assert_eq!(
            before[1][4],
            r#"note a text Some(["leaf", "work", "start"])"#
        );
        assert_eq!(v["meta"]["preprocessedProfileVersion"], 60);
        assert!(v["meta"]["markerSchema"][0]["fields"][0]
            .get("searchable")
            .is_none());

        let shared = &v["shared"];
        // start, start/work, start/work/leaf, start/idle, start/only_here: once each.
        assert_eq!(shared["stackTable"]["length"], 5);
        assert_eq!(shared["frameTable"]["length"], 5);
        assert_eq!(shared["funcTable"]["length"], 5);
        let strings = shared["stringArray"].as_array().unwrap();
        let mut sorted: Vec<&str> = strings.iter().map(|s| s.as_str().unwrap()).collect();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), strings.len(), "each string once: {strings:?}");
        for (name, table) in shared.as_object().unwrap() {
            let Some(len) = table.get("length") else {
                continue;
            };
            for (column, values) in table.as_object().unwrap() {
                if column != "length" {
                    assert_eq!(values.as_array().unwrap().len(), u(len), "{name}.{column}");
                }
            }
        }
        for name in shared["funcTable"]["name"].as_array().unwrap() {
            assert!(u(name) < strings.len());
        }
        for t in v["threads"].as_array().unwrap() {
            for key in ["stringArray", "stackTable", "frameTable", "funcTable"] {
                assert!(t.get(key).is_none(), "{key}");
            }
            let samples = &t["samples"];
            assert_eq!(
                samples["stack"].as_array().unwrap().len(),
                u(&samples["length"])
            );
        }
        // Weights of 1 go; the third thread's sample weighs 2.
        assert!(v["threads"][0]["samples"]["weight"].is_null());
        assert_eq!(v["threads"][2]["samples"]["weight"], serde_json::json!([2]));
    }

    #[test]
    fn shapes_it_did_not_expect_are_errors() {
        let v55 = serde_json::to_value(profile()).unwrap();
        let mut bad_stack = v55.clone();
        bad_stack["threads"][0]["samples"]["stack"][0] = 99.into();
        let mut bad_prefix = v55.clone();
        bad_prefix["threads"][1]["stackTable"]["prefix"][0] = 0.into();
        let mut short = v55.clone();
        short["threads"][0]["frameTable"]["func"] = serde_json::json!([]);
        let mut newer = v55.clone();
        newer["meta"]["preprocessedProfileVersion"] = 56.into();
        for (v, want) in [
            (bad_stack, "thread 0: stack 99 is no index below"),
            (
                bad_prefix,
                "thread 1: stackTable.prefix 0 is no index below 0",
            ),
            (short, "thread 0: frameTable.func has 0 values"),
            (newer, "version Some(56), not 55"),
            (Value::Null, "no JSON object"),
        ] {
            let e = share(v).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
