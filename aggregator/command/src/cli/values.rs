//! Command-line values drawn from the libraries' tables, so that those crates need no clap:
//! `-f` from the render crate's table of formats, `--view` from the alloc crate's views.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use kern_profile::alloc_cmd::AllocView;
use kern_profile::output::formats;
use kern_profile::{OutputFormat, ReportBy};

/// `-f`: every format's value and help, in the table's `-f` order.
pub fn output_format() -> impl TypedValueParser<Value = OutputFormat> {
    let values = formats::values()
        .into_iter()
        .map(|f| PossibleValue::new(f.name).help(f.help));
    PossibleValuesParser::new(values).map(|name| {
        formats::named(&name)
            .expect("clap checked the value against the table")
            .format
    })
}

/// The `-f` value of the default format.
pub fn default_format() -> &'static str {
    formats::of(OutputFormat::default()).name
}

/// `--by`: what the text report's table is by.
pub fn report_by() -> impl TypedValueParser<Value = ReportBy> {
    named(ReportBy::ALL, ReportBy::name, by_help)
}

fn by_help(b: ReportBy) -> &'static str {
    match b {
        ReportBy::Function => "The top functions by self and total share (the usual report)",
        ReportBy::Task => "Samples per guest thread: command, tid, pid",
        ReportBy::Process => "Samples per guest process: command, pid",
    }
}

/// `--view`: every allocation view by its name.
pub fn alloc_view() -> impl TypedValueParser<Value = AllocView> {
    named(AllocView::ALL, AllocView::name, view_help)
}

/// A value of `all`, by its `name`, each with its `help`.
fn named<T: Copy + Send + Sync + 'static, const N: usize>(
    all: [T; N],
    name: fn(T) -> &'static str,
    help: fn(T) -> &'static str,
) -> impl TypedValueParser<Value = T> {
    let values = all
        .into_iter()
        .map(move |v| PossibleValue::new(name(v)).help(help(v)));
    PossibleValuesParser::new(values).map(move |given| {
        all.into_iter()
            .find(|&v| name(v) == given)
            .expect("clap checked the value against the list")
    })
}

fn view_help(v: AllocView) -> &'static str {
    match v {
        AllocView::Live => {
            "Units still live at the end of the trace, by the stack that allocated (or last \
             reallocated) them: the leak view, and the original tool's only one"
        }
        AllocView::Allocated => {
            "Units ever asked for: the sizes of allocations plus the new sizes of reallocations"
        }
        AllocView::Count => "Number of allocations plus reallocations",
        AllocView::Peak => {
            "Units live at the operation where the allocator's live total first reached its peak"
        }
    }
}
