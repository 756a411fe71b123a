#!/usr/bin/env python3
"""List the functions longer than a limit (default 80 lines) in the workspace's product code.

    scripts/long-fns.py [--max N] [PATH…]     # default PATHs: collector/src shared/src twin/src viewer/src
    scripts/long-fns.py --self-test

A function's length runs from the line of its `fn` keyword to the line of its closing brace.
A function is let through when the comments right above it (the block of comment and
attribute lines between it and the previous code) contain `long:` followed by why one body
is right, e.g.

    // long: one match arm per flag; split, the table of flags would be spread over files.
    fn apply_flags(…) {

Prints one line per long function (`path:line: name is N lines`) and exits 1 when there is
any, 0 when there is none, 2 on bad arguments.

The scanner knows enough Rust to find function bodies: line and nested block comments,
strings, raw strings (`r#"…"#`), byte strings, char literals versus lifetimes, and
function-pointer types (`fn(u32) -> u32`, not a function). It needs no build.
"""

import os
import re
import sys

DEFAULT_PATHS = ["collector/src", "shared/src", "twin/src", "viewer/src"]
FN_NAME = re.compile(r"\s+([A-Za-z_][A-Za-z0-9_]*)")
RAW_STRING = re.compile(r'b?r(#*)"')
CHAR = re.compile(r"'(\\(u\{[0-9A-Fa-f]+\}|x[0-9A-Fa-f]{2}|.)|[^\\'\n])'")


def blank_out(src):
    """The source with comments, strings and char literals replaced by spaces (newlines kept),
    so braces, `fn` and `;` in them are not seen. Same length as `src`."""
    out = list(src)
    i, n = 0, len(src)

    def ident_before(k):
        return k > 0 and (src[k - 1].isalnum() or src[k - 1] == "_")

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif (m := RAW_STRING.match(src, i)) and not ident_before(i):
            close = '"' + m.group(1)
            j = src.find(close, m.end())
            j = n if j < 0 else j + len(close)
            blank(i, j)
            i = j
        elif c == '"' or (src.startswith('b"', i) and not ident_before(i)):
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{1F600}', '{') or a lifetime ('a, 'static).
            m = CHAR.match(src, i)
            if m:
                blank(i, m.end())
                i = m.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


def functions(src):
    """(name, first line, last line) of every function with a body in `src` (1-based)."""
    code = blank_out(src)
    line_at = []
    line = 1
    for ch in code:
        line_at.append(line)
        if ch == "\n":
            line += 1
    found = []
    for m in re.finditer(r"\bfn\b", code):
        name = FN_NAME.match(code, m.end())
        if not name:
            continue  # a function-pointer type: `fn(u32) -> u32`
        # The body starts at the first `{` outside parentheses and brackets; a `;` there first
        # means a declaration without a body (a trait's required method, an extern fn).
        depth, j = 0, name.end()
        while j < len(code):
            ch = code[j]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif depth == 0 and ch in "{;":
                break
            j += 1
        if j >= len(code) or code[j] == ";":
            continue
        braces, k = 0, j
        while k < len(code):
            if code[k] == "{":
                braces += 1
            elif code[k] == "}":
                braces -= 1
                if braces == 0:
                    break
            k += 1
        found.append((name.group(1), line_at[m.start()], line_at[min(k, len(code) - 1)]))
    return found


def excused(lines, fn_line):
    """Whether the comment and attribute lines right above line `fn_line` say `long:`."""
    k = fn_line - 2
    while k >= 0:
        s = lines[k].strip()
        if s.startswith("//"):
            if "long:" in s:
                return True
        elif not s.startswith("#["):
            return False
        k -= 1
    return False


def long_functions(path, src, limit):
    lines = src.split("\n")
    for name, first, last in functions(src):
        length = last - first + 1
        if length > limit and not excused(lines, first):
            yield f"{path}:{first}: {name} is {length} lines"


def rust_files(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for root, dirs, files in os.walk(p):
            dirs.sort()
            for f in sorted(files):
                if f.endswith(".rs"):
                    yield os.path.join(root, f)


SELF_TEST = r'''
fn short() { let s = "}}}}"; let c = '{'; let r = r#"fn nope() { "#; }
// long: a test of the excuse.
#[allow(dead_code)]
fn excused() {
BODY
}
/// Doc comment without the word.
fn too_long<'a>(x: &'a str, f: fn(u32) -> u32, a: [u8; 4]) -> impl Fn() + 'a {
    /* a { nested /* comment */ } */
    let b = b"{";
    let e = '\u{7B}';
BODY
}
trait T { fn declared(&self); fn provided(&self) { } }
'''


def self_test():
    body = "\n".join("    let _ = 1;" for _ in range(90))
    src = SELF_TEST.replace("BODY", body)
    got = {name: (first, last) for name, first, last in functions(src)}
    assert set(got) == {"short", "excused", "too_long", "provided"}, got
    assert got["short"][0] == got["short"][1], got
    assert got["too_long"][1] - got["too_long"][0] + 1 == 95, got
    listed = list(long_functions("t.rs", src, 80))
    assert len(listed) == 1 and "too_long is 95 lines" in listed[0], listed
    assert not list(long_functions("t.rs", src, 95)), "a function of exactly the limit passes"
    print("long-fns self-test: ok")


def main(argv):
    limit, paths = 80, []
    args = iter(argv)
    for a in args:
        if a == "--self-test":
            self_test()
            return 0
        if a == "--max":
            v = next(args, "")
            if not v.isdigit():
                print("long-fns: --max needs a number of lines", file=sys.stderr)
                return 2
            limit = int(v)
        elif a.startswith("-"):
            print(f"long-fns: unknown option {a} (see the top of {sys.argv[0]})", file=sys.stderr)
            return 2
        else:
            paths.append(a)
    if not paths:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        os.chdir(root)
        paths = DEFAULT_PATHS
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        print(f"long-fns: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    hits = []
    for f in rust_files(paths):
        with open(f, encoding="utf-8") as fh:
            hits.extend(long_functions(f, fh.read(), limit))
    for h in hits:
        print(h)
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
