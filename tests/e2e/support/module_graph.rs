//! The `use` graph of `src/`, for the architecture checks in `tidy.rs`.
//!
//! Every `.rs` file is a module (`app/tools/mod.rs` is `app::tools`, `main.rs` is `main`).
//! Its edges are the modules its paths lead to: `use` trees and paths written inline
//! (`crate::…`, `super::…`, `self::…`, a child module's name, or a name a `use` bound to a
//! module). A path ends at the module that *defines* its item: a `pub use` re-export is
//! followed to its source, so a facade `mod.rs` does not make every child look circular,
//! while the re-export itself is an edge of the facade. Comments, string literals and
//! `#[cfg(test)] mod … { … }` blocks are not read; `*_tests.rs` files are test code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::rust_source::strip;

/// A module path without `crate`, e.g. `["app", "tools", "call"]`.
pub type ModPath = Vec<String>;

pub struct Graph {
    /// The modules and the modules each one's paths lead to.
    pub edges: BTreeMap<ModPath, BTreeSet<ModPath>>,
    /// Where each module's file is, for messages.
    pub files: BTreeMap<ModPath, PathBuf>,
}

struct Module {
    /// `pub use` re-exports: name → absolute path of the item.
    reexports: BTreeMap<String, ModPath>,
    /// Every absolute path the module mentions.
    paths: Vec<ModPath>,
}

impl Graph {
    /// Reads every module under `src`.
    pub fn of(src: &Path) -> Graph {
        let mut files = BTreeMap::new();
        collect(src, src, &mut files);
        let known: BTreeSet<ModPath> = files.keys().cloned().collect();
        let mut modules = BTreeMap::new();
        for (path, file) in &files {
            let code = strip(&std::fs::read_to_string(file).unwrap());
            modules.insert(path.clone(), read_module(path, &code, &known));
        }
        let mut edges = BTreeMap::new();
        for (path, module) in &modules {
            let mut to = BTreeSet::new();
            for p in &module.paths {
                if let Some(target) = resolve(p, &modules, &known, 0)
                    && &target != path
                {
                    to.insert(target);
                }
            }
            edges.insert(path.clone(), to);
        }
        Graph { edges, files }
    }

    /// Every cycle found, one line each (`a → b → a`): after each find, the edge that
    /// closed it is set aside and the search goes on (bounded).
    pub fn cycles(&self) -> Vec<String> {
        let mut graph = Graph {
            edges: self.edges.clone(),
            files: self.files.clone(),
        };
        let mut found = Vec::new();
        while let Some(cycle) = graph.cycle() {
            let names: Vec<String> = cycle.iter().map(|m| show(m)).collect();
            found.push(names.join(" → "));
            let (from, to) = (&cycle[cycle.len() - 2], &cycle[cycle.len() - 1]);
            graph.edges.get_mut(from).unwrap().remove(to);
            if found.len() == 50 {
                break;
            }
        }
        found
    }

    /// A cycle, if there is one, as the modules along it (first = last).
    pub fn cycle(&self) -> Option<Vec<ModPath>> {
        // Depth-first search with colours: a grey node met again closes a cycle.
        #[derive(Clone, Copy, PartialEq)]
        enum Colour {
            White,
            Grey,
            Black,
        }
        fn visit(
            g: &Graph,
            node: &ModPath,
            colour: &mut BTreeMap<ModPath, Colour>,
            stack: &mut Vec<ModPath>,
        ) -> Option<Vec<ModPath>> {
            colour.insert(node.clone(), Colour::Grey);
            stack.push(node.clone());
            for next in g.edges.get(node).into_iter().flatten() {
                match colour.get(next).copied().unwrap_or(Colour::White) {
                    Colour::Grey => {
                        let start = stack.iter().position(|n| n == next).unwrap();
                        let mut cycle = stack[start..].to_vec();
                        cycle.push(next.clone());
                        return Some(cycle);
                    }
                    Colour::White => {
                        if let Some(c) = visit(g, next, colour, stack) {
                            return Some(c);
                        }
                    }
                    Colour::Black => {}
                }
            }
            stack.pop();
            colour.insert(node.clone(), Colour::Black);
            None
        }
        let mut colour = BTreeMap::new();
        for node in self.edges.keys() {
            if colour.get(node).copied().unwrap_or(Colour::White) == Colour::White {
                let mut stack = Vec::new();
                if let Some(c) = visit(self, node, &mut colour, &mut stack) {
                    return Some(c);
                }
            }
        }
        None
    }
}

/// `a::b::c`.
pub fn show(path: &[String]) -> String {
    if path.is_empty() {
        "crate".into()
    } else {
        path.join("::")
    }
}

fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<ModPath, PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(root, &path, out);
            continue;
        }
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if !name.ends_with(".rs") || name.ends_with("_tests.rs") {
            continue;
        }
        let rel = path.strip_prefix(root).unwrap();
        let mut segments: ModPath = rel
            .iter()
            .map(|s| s.to_str().unwrap().trim_end_matches(".rs").to_owned())
            .collect();
        if matches!(segments.last().map(String::as_str), Some("mod" | "lib")) {
            segments.pop();
        }
        out.insert(segments, path);
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn read_module(me: &ModPath, code: &str, known: &BTreeSet<ModPath>) -> Module {
    let mut reexports = BTreeMap::new();
    let mut paths = Vec::new();
    // Names bound to modules by `use`, for inline paths such as `tasks::methods::get`.
    let mut aliases: BTreeMap<String, ModPath> = BTreeMap::new();
    let mut rest = code;
    let mut offset = 0;
    // The code outside `use` statements, for the inline paths.
    let mut inline = String::with_capacity(code.len());
    while let Some(at) = rest.find("use ") {
        let abs = offset + at;
        let before = code[..abs].chars().last();
        let start_ok = before.is_none_or(|c| !is_ident(c));
        let Some(end) = code[abs..].find(';') else {
            break;
        };
        inline.push_str(&code[offset..abs]);
        if !start_ok {
            inline.push_str(&code[abs..abs + end]);
        } else {
            let line_start = code[..abs].rfind('\n').map_or(0, |n| n + 1);
            let public = code[line_start..abs].trim().starts_with("pub");
            let tree = normalise(&code[abs + 4..abs + end]);
            for (path, bound) in expand(&tree) {
                let Some(full) = absolute(me, &path, known) else {
                    continue;
                };
                if known.contains(&full) {
                    aliases.insert(bound.clone(), full.clone());
                }
                if public {
                    reexports.insert(bound, full.clone());
                }
                paths.push(full);
            }
        }
        offset = abs + end;
        rest = &code[offset..];
    }
    inline.push_str(&code[offset..]);
    // Inline paths: `a::b::c` where `a` is crate/super/self, a child module, or an alias.
    let chars: Vec<char> = inline.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if !is_ident(chars[i]) || (i > 0 && (is_ident(chars[i - 1]) || chars[i - 1] == ':')) {
            i += 1;
            continue;
        }
        let mut j = i;
        let mut segments = vec![String::new()];
        while j < chars.len() {
            if is_ident(chars[j]) {
                segments.last_mut().unwrap().push(chars[j]);
                j += 1;
            } else if chars[j] == ':'
                && chars.get(j + 1) == Some(&':')
                && chars.get(j + 2).is_some_and(|c| is_ident(*c))
            {
                segments.push(String::new());
                j += 2;
            } else {
                break;
            }
        }
        if segments.len() > 1 {
            let first = &segments[0];
            if let Some(module) = aliases.get(first) {
                let mut full = module.clone();
                full.extend(segments[1..].iter().cloned());
                paths.push(full);
            } else if let Some(full) = absolute(me, &segments, known) {
                paths.push(full);
            }
        }
        i = j.max(i + 1);
    }
    Module { reexports, paths }
}

/// The paths of a `use` tree (`a::{b, c::{self, d as e}}`) with the name each binds.
fn expand(tree: &str) -> Vec<(Vec<String>, String)> {
    fn go(prefix: &[String], tree: &str, out: &mut Vec<(Vec<String>, String)>) {
        if let Some(open) = tree.find('{') {
            let head: Vec<String> = tree[..open]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            let mut base = prefix.to_vec();
            base.extend(head);
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let mut depth = 0;
            let mut part = String::new();
            for ch in inner.chars() {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        go(&base, &part, out);
                        part.clear();
                        continue;
                    }
                    _ => {}
                }
                part.push(ch);
            }
            if !part.is_empty() {
                go(&base, &part, out);
            }
            return;
        }
        let (path, alias) = match tree.split_once(" as ") {
            Some((p, a)) => (p, Some(a)),
            None => (tree, None),
        };
        let mut full = prefix.to_vec();
        for s in path.split("::").filter(|s| !s.is_empty()) {
            if s != "self" || full.is_empty() {
                full.push(s.to_owned());
            }
        }
        if full.last().is_some_and(|s| s == "*") {
            full.pop();
        }
        let bound = alias
            .map(str::to_owned)
            .unwrap_or_else(|| full.last().cloned().unwrap_or_default());
        out.push((full, bound));
    }
    let mut out = Vec::new();
    go(&[], tree, &mut out);
    out
}

/// A `use` tree with whitespace only where it separates words (`a as b`).
fn normalise(tree: &str) -> String {
    let words = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::with_capacity(words.len());
    let chars: Vec<char> = words.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        let punct = |c: Option<&char>| c.is_some_and(|c| ":{},".contains(*c));
        if *c == ' '
            && (punct(chars.get(i + 1)) || punct(i.checked_sub(1).and_then(|p| chars.get(p))))
        {
            continue;
        }
        out.push(*c);
    }
    out
}

/// An absolute module path for `segments` as written in module `me`, if it names the
/// crate (not std or a dependency).
fn absolute(me: &ModPath, segments: &[String], known: &BTreeSet<ModPath>) -> Option<ModPath> {
    let first = segments.first()?;
    let mut full: ModPath = match first.as_str() {
        "crate" | "cyberos_mcp_bridge" => Vec::new(),
        "self" => me.clone(),
        "super" => {
            let mut base = me.clone();
            let mut rest = segments;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            return Some(base);
        }
        child => {
            let mut c = me.clone();
            c.push(child.to_owned());
            if !known.contains(&c) {
                return None;
            }
            c
        }
    };
    full.extend(segments[1..].iter().cloned());
    Some(full)
}

/// The module that defines what `path` names: its longest known module prefix, following
/// a re-export of the next segment to its source.
fn resolve(
    path: &ModPath,
    modules: &BTreeMap<ModPath, Module>,
    known: &BTreeSet<ModPath>,
    depth: usize,
) -> Option<ModPath> {
    let n = (0..=path.len())
        .rev()
        .find(|n| known.contains(&path[..*n]))?;
    let module = path[..n].to_vec();
    if depth < 8
        && let Some(next) = path.get(n)
        && let Some(source) = modules.get(&module).and_then(|m| m.reexports.get(next))
        && source != path
    {
        let mut followed = source.clone();
        followed.extend(path[n + 1..].iter().cloned());
        return resolve(&followed, modules, known, depth + 1);
    }
    Some(module)
}
