#!/usr/bin/env python3
"""Lists C++ functions longer than a limit, and files longer than another.

Counts a function's lines the way clang-tidy's readability-function-size does (the line of the
body's closing brace minus the line of its opening brace), so the two agree; this script needs
no compile database and reads all of src/ in about a second, which lets the test suite run it.

What is a function: a brace block at namespace or class scope whose head ends in a parameter
list (with the usual qualifiers, a trailing return type or a constructor's member initialisers),
including GoogleTest's TEST bodies and lambdas outside functions. Lambdas and local classes
inside a function count as part of it. Comments, string and character literals (raw strings
too) and preprocessor lines are blanked before the braces are read.

Usage: function_size.py [--max-lines N] [--max-file-lines N] [--top K] [--check] [--allow FILE] PATH...
  PATHs are files or folders (searched for *.cc and *.h). Prints one line per function over the
  limit and per file over its limit; --top K also lists the K longest functions. --check exits
  1 when anything is over a limit. --allow FILE names functions still waiting to be split, one
  "path name lines" a line (# comments): each may keep up to its recorded size but not grow.
"""
import argparse
import os
import re
import sys

SPECIFIERS = {"const", "noexcept", "override", "final", "mutable", "volatile", "&", "&&", "try"}
SCOPE_KEYWORDS = {"class", "struct", "union", "enum", "namespace", "extern"}
ACCESS = {"public", "private", "protected"}
NOT_A_NAME = {"decltype", "alignas", "__attribute__", "noexcept", "alignof", "sizeof"}

RAW_STRING = re.compile(r'(?:u8|u|U|L)?R"([^()\\ ]{0,16})\(')
TOKEN = re.compile(r"::|->|&&|[A-Za-z_][A-Za-z_0-9]*|\d[\w.']*|\S")


def blank(text):
    """Returns text with comments, literals and preprocessor lines replaced by spaces
    (newlines kept, so line numbers stay)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True

    def spaces(s):
        return re.sub(r"[^\n]", " ", s)

    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            j = i
            while j < n:  # a directive runs to an unescaped newline; comments inside end it too
                k = text.find("\n", j)
                if k < 0:
                    k = n
                if text[j:k].rstrip().endswith("\\"):
                    j = k + 1
                    continue
                break
            out.append(spaces(text[i:k]))
            i = k
            continue
        if c == "\n":
            at_line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("//", i):
            k = text.find("\n", i)
            k = n if k < 0 else k
            out.append(spaces(text[i:k]))
            i = k
            continue
        if text.startswith("/*", i):
            k = text.find("*/", i + 2)
            k = n if k < 0 else k + 2
            out.append(spaces(text[i:k]))
            i = k
            continue
        m = RAW_STRING.match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + m.group(1) + '"'
            k = text.find(close, m.end())
            k = n if k < 0 else k + len(close)
            out.append(spaces(text[i:k]))
            i = k
            continue
        if c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(spaces(text[i : j + 1]))
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def tokens(text):
    """(token, line) pairs of blanked text."""
    line = 1
    pos = 0
    for m in TOKEN.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        yield m.group(0), line


def function_name(head):
    """The name in a function head: the identifiers before its parameter list, with the
    arguments for TEST-like macros."""
    depth = 0
    for i, tok in enumerate(head):
        if tok in ("(", "[") and depth == 0 and i > 0:
            prev = head[i - 1]
            if re.match(r"[A-Za-z_~]", prev) and prev not in NOT_A_NAME or prev in (">", "]"):
                if prev == "]":
                    return "lambda"
                j = i - 1
                while j >= 2 and head[j - 1] == "::":
                    j -= 2
                name = "".join(head[j:i])
                if "TEST" in prev and prev.isupper():
                    close = head.index(")", i) if ")" in head[i:] else len(head)
                    name += "(" + " ".join(head[i + 1 : close]).replace(" ,", ",") + ")"
                return name
        if tok in ("(", "["):
            depth += 1
        elif tok in (")", "]"):
            depth -= 1
    return " ".join(head[:6])


def classify(head):
    """What a `{` at namespace/class scope opens, from the tokens of its head:
    'function', 'member-init' (a brace initialiser inside a constructor's initialiser list),
    'scope' (namespace, class, enum, extern block) or 'data' (a brace initialiser)."""
    if not head:
        return "data"
    depth = 0
    closed_params = False
    init_list = False
    arrow = False
    for i, tok in enumerate(head):
        if tok in ("(", "["):
            depth += 1
        elif tok in (")", "]"):
            depth -= 1
            if depth == 0 and tok == ")":
                closed_params = True
        elif depth == 0 and tok == ":" and i > 0 and head[i - 1] == ")":
            init_list = True
        elif depth == 0 and tok == "->" and closed_params:
            arrow = True
    last = head[-1]
    if init_list:
        return "function" if last in (")", "}") or last in SPECIFIERS else "member-init"
    first = head[0]
    if first == "template":  # skip the template header
        depth = 0
        for i, tok in enumerate(head):
            depth += tok == "<"
            depth -= tok == ">"
            if tok == ">" and depth == 0:
                first = head[i + 1] if i + 1 < len(head) else ""
                break
    if first in ("typedef", "using"):
        return "data"
    if first in SCOPE_KEYWORDS or head[0] in SCOPE_KEYWORDS:
        return "scope"
    if "=" in head and "(" not in head[: head.index("=")] and "[" not in head:
        return "data"
    if closed_params and (last == ")" or last in SPECIFIERS or arrow):
        if "requires" in head:
            return "data"
        return "function"
    return "data"


def functions(path):
    """(name, first line, lines) for each function in a file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = blank(f.read())
    found = []
    # Each open brace: (kind, line, head) where kind is one of classify()'s answers.
    stack = []
    head = []
    for tok, line in tokens(text):
        in_function = any(kind == "function" for kind, _, _ in stack)
        if tok == "{":
            if in_function:
                stack.append(("inner", line, None))
                continue
            if stack and stack[-1][0] == "data":
                # Inside a brace initialiser only lambdas are functions.
                kind = "function" if head and classify(head) == "function" and "]" in head else "data"
            else:
                kind = classify(head)
            stack.append((kind, line, list(head)))
            if kind != "member-init":
                head = []
            continue
        if tok == "}":
            if not stack:
                continue
            kind, first_line, opened_head = stack.pop()
            if kind == "function":
                found.append((function_name(opened_head), first_line, line - first_line))
            if kind == "member-init":
                head.append("}")
            elif kind != "inner":
                head = []
            continue
        if in_function:
            continue
        if tok == ";" or (tok == "," and stack and stack[-1][0] == "data"):
            head = []
        elif tok == ":" and len(head) == 1 and head[0] in ACCESS:
            head = []
        else:
            head.append(tok)
    return found


def sources(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                for name in sorted(names):
                    if name.endswith((".cc", ".h")):
                        yield os.path.join(root, name)
        else:
            yield p


def read_allowed(path):
    """{(path, name): lines} from an --allow file."""
    allowed = {}
    if not path:
        return allowed
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            where, rest = line.split(None, 1)
            name, lines = rest.rsplit(None, 1)
            allowed[(where, name)] = int(lines)
    return allowed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-lines", type=int, default=120)
    parser.add_argument("--max-file-lines", type=int, default=600)
    parser.add_argument("--top", type=int, default=0)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--allow")
    parser.add_argument("--root", default=".", help="paths in the --allow file are relative to this")
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    allowed = read_allowed(args.allow)
    seen_allowed = set()

    over = 0
    everything = []
    for path in sorted(sources(args.paths)):
        with open(path, encoding="utf-8", errors="replace") as f:
            file_lines = f.read().count("\n")
        if file_lines > args.max_file_lines:
            print(f"{os.path.relpath(path, args.root)}: file has {file_lines} lines (limit {args.max_file_lines})")
            over += 1
        shown = os.path.relpath(path, args.root)
        for name, line, lines in functions(path):
            everything.append((lines, shown, line, name))
            if lines <= args.max_lines:
                continue
            ceiling = allowed.get((shown, name))
            if ceiling is not None:
                seen_allowed.add((shown, name))
                if lines <= ceiling:
                    print(f"{shown}:{line}: {name} has {lines} lines (waiting to be split, at most {ceiling})")
                    continue
            print(f"{shown}:{line}: {name} has {lines} lines (limit {args.max_lines})")
            over += 1
    for where, name in sorted(set(allowed) - seen_allowed):
        print(f"note: {where} {name} is no longer over the limit: take it off {args.allow}")
    if args.top:
        print(f"longest {args.top}:")
        for lines, path, line, name in sorted(everything, reverse=True)[: args.top]:
            print(f"  {lines:4d}  {path}:{line}: {name}")
    if args.check and over:
        print(f"{over} over the limits; split them into named steps")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
