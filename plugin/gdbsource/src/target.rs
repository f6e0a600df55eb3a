//! The guest's target description (`qXfer:features:read:target.xml`): its architecture,
//! and the numbers of registers outside the `g` packet (riscv `priv`, `satp`; aarch64
//! `TTBR0_EL1`), which depend on the CPU model and QEMU's version.

use kern_profile_format::Arch;

use crate::client::Client;
use crate::GdbError;

/// At most this many included files, and bytes per file.
const MAX_FILES: usize = 16;
const MAX_FILE: usize = 512 << 10;

/// What the description says.
#[derive(Debug, Clone, Default)]
pub struct Description {
    /// `<architecture>` as written (`i386`, `i386:x86-64`, `riscv:rv64`, `aarch64`).
    pub architecture: String,
    /// (name, number) of every register, in the description's order.
    pub registers: Vec<(String, u32)>,
}

impl Description {
    /// The number of the register called `name` (case as QEMU writes it).
    pub fn regnum(&self, name: &str) -> Option<u32> {
        self.registers
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, r)| r)
    }
}

/// The guest architecture an `<architecture>` names.
pub fn arch_of(architecture: &str) -> Option<Arch> {
    kern_profile_arch::from_gdb_architecture(architecture)
}

/// Reads `target.xml`; with `registers`, also its included files, for register numbers.
pub fn read(c: &mut Client, registers: bool) -> Result<Description, GdbError> {
    let top = read_file(c, "target.xml")?;
    let mut d = Description {
        architecture: element(&top, "architecture").unwrap_or_default(),
        registers: Vec::new(),
    };
    if !registers {
        return Ok(d);
    }
    let mut next = 0u32;
    let mut files = vec![top.clone()];
    for href in attributes(&top, "xi:include", "href")
        .into_iter()
        .take(MAX_FILES)
    {
        files.push(read_file(c, &href)?);
    }
    for f in &files {
        for reg in tags(&without_comments(f), "reg") {
            let Some(name) = attribute(reg, "name") else {
                continue;
            };
            if let Some(n) = attribute(reg, "regnum").and_then(|n| n.parse().ok()) {
                next = n;
            }
            d.registers.push((name, next));
            next = next.saturating_add(1);
        }
    }
    Ok(d)
}

/// One file of the description, in as many `qXfer` requests as it takes.
fn read_file(c: &mut Client, name: &str) -> Result<String, GdbError> {
    let mut out = Vec::new();
    let chunk = c.max_read() * 2;
    loop {
        let req = format!("qXfer:features:read:{name}:{:x},{chunk:x}", out.len());
        let reply = c.request(&req)?;
        let (more, data) = match reply.split_first() {
            Some((b'm', d)) => (true, d),
            Some((b'l', d)) => (false, d),
            _ => {
                return Err(GdbError::Refused {
                    addr: c.addr().to_string(),
                    request: req,
                    reply: String::from_utf8_lossy(&reply[..reply.len().min(16)]).into_owned(),
                })
            }
        };
        out.extend_from_slice(data);
        if !more || data.is_empty() {
            break;
        }
        if out.len() > MAX_FILE {
            return Err(GdbError::TooLarge {
                addr: c.addr().to_string(),
                request: req,
                limit: MAX_FILE,
            });
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// `xml` without its `<!-- -->` comments: QEMU's x86_64 description comments out
/// `<reg>` lines (`ss_base`, `ds_base`, `es_base`), which are no registers.
fn without_comments(xml: &str) -> String {
    let mut out = String::with_capacity(xml.len());
    let mut rest = xml;
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        rest = rest[start + 4..]
            .find("-->")
            .map_or("", |end| &rest[start + 4 + end + 3..]);
    }
    out.push_str(rest);
    out
}

/// The text of the first `<name>...</name>`.
fn element(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find('<')? + start;
    Some(xml[start..end].trim().to_string())
}

/// Each `<name ...>` tag's attribute text.
fn tags<'a>(xml: &'a str, name: &str) -> Vec<&'a str> {
    let open = format!("<{name} ");
    xml.match_indices(open.as_str())
        .filter_map(|(i, _)| {
            let rest = &xml[i + open.len()..];
            rest.find('>').map(|end| &rest[..end])
        })
        .collect()
}

/// `attr`'s value in the attribute text of a tag.
fn attribute(tag: &str, attr: &str) -> Option<String> {
    let key = format!("{attr}=\"");
    // A whole attribute name: at the start or after a space.
    let at = tag
        .match_indices(&key)
        .find(|&(i, _)| i == 0 || tag.as_bytes()[i - 1].is_ascii_whitespace())?
        .0;
    let start = at + key.len();
    let end = tag[start..].find('"')? + start;
    Some(tag[start..end].to_string())
}

fn attributes(xml: &str, name: &str, attr: &str) -> Vec<String> {
    tags(xml, name)
        .into_iter()
        .filter_map(|t| attribute(t, attr))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_architecture_and_attributes() {
        let xml = r#"<target><architecture>riscv:rv64</architecture><xi:include href="a.xml"/><xi:include href="b.xml"/></target>"#;
        assert_eq!(element(xml, "architecture").unwrap(), "riscv:rv64");
        let hrefs = attributes(xml, "xi:include", "href");
        assert_eq!(hrefs, ["a.xml", "b.xml"]);
        let reg = r#"<reg name="satp" bitsize="64" regnum="450" type="int"/>"#;
        let t = tags(reg, "reg");
        assert_eq!(attribute(t[0], "regnum").unwrap(), "450");
        assert_eq!(attribute(t[0], "name").unwrap(), "satp");
        assert_eq!(arch_of("i386:x86-64"), Some(Arch::X86_64));
        assert_eq!(arch_of("arm"), None);
    }

    #[test]
    fn commented_out_registers_are_none() {
        // QEMU 10.0.2's i386-64bit.xml, shortened.
        let xml = r#"<reg name="gs" bitsize="32" type="int32"/>
  <!-- Segment descriptor caches and TLS base MSRs -->
  <!--reg name="cs_base" bitsize="64" type="int64"/>
  <reg name="ss_base" bitsize="64" type="int64"/>
  <reg name="es_base" bitsize="64" type="int64"/-->
  <reg name="fs_base" bitsize="64" type="int64"/>"#;
        let clean = without_comments(xml);
        let names: Vec<String> = tags(&clean, "reg")
            .into_iter()
            .filter_map(|t| attribute(t, "name"))
            .collect();
        assert_eq!(names, ["gs", "fs_base"]);
        assert_eq!(without_comments("a<!-- b"), "a");
    }
}
