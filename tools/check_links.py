#!/usr/bin/env python3
"""Checks that the repository stands on its own: every relative link of its Markdown files
resolves inside it, and no text file refers to a file outside it.

Usage: python3 tools/check_links.py [--self-test]   (from anywhere inside the repository; Python 3
standard library only; CI runs both forms from .ci/run).

It reads the files git knows of (tracked, plus untracked files that .gitignore does not ignore,
so that a new file is checked before its first commit) and reports two kinds of fault:

1. **Links.** In every *.md file, the inline links and images `[text](path)`,
   `[text](path#anchor)` and `[text](#anchor)` outside code blocks and code spans. Links with a
   scheme (http:, https:, mailto:, ...) are not followed. A relative path must name a file or
   directory of the working tree, resolved from the linking file's directory, and must stay
   inside the repository: a path that climbs above its root, or an absolute path, is reported as
   leaving it even where the target exists. An anchor into a Markdown file must be the GitHub
   slug of one of its headings (lowercase, punctuation other than hyphens and underscores
   dropped, spaces to hyphens, `-1`, `-2`, ... for repeats) or an HTML `id`/`name` in it.
2. **References outside the repository.** In every text file of the kinds in `SCANNED`
   (Markdown, Rust, Python, shell, TOML, C and CUDA, JSON, YAML, plain text) and every script
   with a shebang, code blocks included, any mention of the developers' private notes or of
   paths on their machines (`OUTSIDE` below): the notes' file names (the mission file and the
   benchmark-spec file, uppercase), a path into a `shared` folder beside the checkout (`../`
   then `shared/`, or `shared/` followed by `bench` or `docs`), and an absolute path under the
   `work` folder at the root. The patterns need those exact forms, so the word "shared" alone,
   a `shared/…` path of the repository's own, or a URL or relative path through a folder
   named `work` does not trip them.

Prints each fault as `file:line: what` and exits with 1; otherwise prints `checked N links and M
files` and exits with 0. `--self-test` runs the checks on built-in cases (faults that must be
found and legitimate text that must pass) in a scratch directory and exits with 1 if any case
goes the wrong way.
"""

import os
import re
import subprocess
import sys
import tempfile
from urllib.parse import unquote

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"<[^>]+\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']")

# What leaves the repository. Each pattern is written with a character class so that this file
# does not match itself.
OUTSIDE = [
    (re.compile(r"\bMISSIO[N]\b"), "the developers' mission notes"),
    (re.compile(r"\bBENCH_SPE[C]\.md\b"), "the developers' benchmark notes (the specification is docs/benchmarks.md)"),
    (re.compile(r"\.\./share[d]/"), "a path into a folder beside the checkout"),
    (re.compile(r"(?<![\w.-])share[d]/(?:bench|docs)\b"), "the developers' shared notes"),
    (re.compile(r"(?<![\w.~%$-])/wor[k]/"), "an absolute path on a developer's machine"),
]
SCANNED = {".md", ".rs", ".py", ".sh", ".toml", ".c", ".h", ".cu", ".cuh", ".json", ".yml", ".yaml", ".txt", ".cfg", ".in"}
MAX_SCANNED_BYTES = 8 << 20


def blank(match):
    """The match's text with every character but newlines replaced by a space."""
    return re.sub(r"[^\n]", " ", match.group(0))


def strip_code(text):
    """The text with fenced code blocks and code spans blanked out (line numbers kept)."""
    out, fence = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * 3
            out.append("")
        elif fence is not None:
            if line.strip().startswith(fence):
                fence = None
            out.append("")
        else:
            out.append(line)
    text = "\n".join(out)
    # Code spans: a run of backticks up to the same run, not across a blank line.
    return re.sub(r"(`+)(?:(?!\1)(?!\n\s*\n)[\s\S])+?\1", blank, text)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path, cache={}):
    """The anchors of a Markdown file: its headings' slugs and its HTML ids."""
    if path not in cache:
        found, seen, fence = set(), {}, None
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for line in text.split("\n"):
            m = FENCE.match(line)
            if fence is None and m:
                fence = m.group(1)[0] * 3
                continue
            if fence is not None:
                if line.strip().startswith(fence):
                    fence = None
                continue
            h = HEADING.match(line)
            if h:
                s = slug(h.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else f"{s}-{n}")
            found.update(HTML_ID.findall(line))
        cache[path] = found
    return cache[path]


def link_faults(md, text):
    """(line, fault) for each broken or outside link of Markdown file `md` (a path relative to
    the current directory, the repository's root), and the number of links checked."""
    faults, links = [], 0
    text = strip_code(text)
    for m in LINK.finditer(text):
        target = m.group(1).strip()
        if target.startswith("<") and target.endswith(">"):
            target = target[1:-1]
        if not target or SCHEME.match(target):
            continue
        links += 1
        line = text.count("\n", 0, m.start()) + 1
        path, _, anchor = target.partition("#")
        if path:
            path = unquote(path)
            dest = os.path.normpath(os.path.join(os.path.dirname(md), path))
            if os.path.isabs(path) or dest == os.pardir or dest.startswith(os.pardir + os.sep):
                faults.append((line, f"leaves the repository: {target}"))
                continue
        else:
            dest = md
        ok = os.path.exists(dest)
        if ok and anchor and dest.endswith(".md") and os.path.isfile(dest):
            ok = unquote(anchor) in anchors(dest)
        if not ok:
            faults.append((line, target))
    return faults, links


def outside_faults(text):
    """(line, fault) for each mention in `text` of something outside the repository."""
    faults = []
    for n, line in enumerate(text.split("\n"), start=1):
        for pattern, what in OUTSIDE:
            m = pattern.search(line)
            if m:
                faults.append((n, f"refers outside the repository ({what}): {line.strip()[:160]}"))
                break
    return faults


def scanned(path):
    """The file's text if it is one of the kinds checked for outside references, else None."""
    name = os.path.basename(path)
    ext = os.path.splitext(name)[1].lower()
    try:
        if os.path.getsize(path) > MAX_SCANNED_BYTES:
            return None
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if ext not in SCANNED and not data.startswith(b"#!"):
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def check(files):
    """All faults of the given files (paths relative to the current directory): lines
    `file:line: fault`, the links checked and the files scanned."""
    out, links, scans = [], 0, 0
    for path in files:
        text = scanned(path)
        if text is None:
            continue
        scans += 1
        faults = outside_faults(text)
        if path.endswith(".md"):
            found, n = link_faults(path, text)
            faults += found
            links += n
        out += [f"{path}:{line}: {what}" for line, what in sorted(faults)]
    return out, links, scans


def self_test():
    """Runs the checks on cases that must fail and cases that must pass; 0 if all went right."""
    mission = "MISSIO" + "N"
    bench_spec = "BENCH_SPE" + "C.md"
    shared = "share" + "d"
    work = "/wor" + "k/"
    bad = {
        "a.md": f"See [the notes](../{shared}/docs/{mission}.md).\n",
        "b.md": "[up](../../outside.md) and [abs](/etc/hosts)\n",
        "c.rs": f"/// The model of `{bench_spec}`.\n",
        "d.sh": f'TORCH=${{TORCH:-$here/../../../{shared}/bench/run.sh}}\n',
        "e.py": f'VENV = "{work}venv-torch"\n',
        "f.toml": f'map_file = "{work}base/map.bin"\n',
        "g.md": f"as {mission}'s Table 1 says\n",
        "h.txt": f'Command being timed: "python {work}{shared}/bench/bench.py"\n',
        "i.md": "```sh\ncd " + work + "run\n```\n",
        "run": f"#!/usr/bin/env bash\ncat ../{shared}/x\n",
        "docs/j.md": "[escapes](../../x.md)\n",
    }
    good = {
        "k.rs": "// shared/hits compared as shared·o.hits vs o.shared·hits.\npub const SUB" + mission + "_COLUMNS: [&str; 3] = [];\n",
        "l.md": "The weights are shared by all iterations; see [docs](docs/m.md) and https://example.org/work/x.\n",
        "m.toml": "dir = \"target/work/out\"  # a work directory\n",
        "n.py": "# a mission of the project, and BENCH_SPEC, its name for the benchmark\n",
        "docs/m.md": "# M\n[back](../l.md) [self](#m)\n",
        "o.csv": f"{work}not-scanned\n",
    }
    expected_bad = {
        "a.md": 2,  # the mention and the link leaving the repository
        "b.md": 2,
        "docs/j.md": 1,
    }
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            for name, text in {**bad, **good}.items():
                os.makedirs(os.path.dirname(name) or ".", exist_ok=True)
                with open(name, "w", encoding="utf-8") as f:
                    f.write(text)
            for name in bad:
                faults, _, _ = check([name])
                want = expected_bad.get(name, 1)
                if len(faults) != want:
                    failures += 1
                    print(f"self-test: {name}: expected {want} fault(s), got {faults}", file=sys.stderr)
            for name in good:
                faults, _, _ = check([name])
                if faults:
                    failures += 1
                    print(f"self-test: {name}: expected no fault, got {faults}", file=sys.stderr)
            line = check(["c.rs"])[0]
            if line != ["c.rs:1: refers outside the repository (the developers' benchmark notes (the specification "
                        f"is docs/benchmarks.md)): /// The model of `{bench_spec}`."]:
                failures += 1
                print(f"self-test: the fault's form is `file:line: what`, got {line}", file=sys.stderr)
        finally:
            os.chdir(cwd)
    cases = len(bad) + len(good) + 1
    if failures:
        print(f"self-test: {failures} of {cases} cases went wrong", file=sys.stderr)
        return 1
    print(f"self-test: {cases} cases passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if argv[1:]:
        print(f"usage: {argv[0]} [--self-test]", file=sys.stderr)
        return 2
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True).stdout.strip()
    os.chdir(root)
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        capture_output=True, text=True, check=True,
    ).stdout.split("\0")
    files = sorted({f for f in files if f and os.path.isfile(f)})
    faults, links, scans = check(files)
    for line in faults:
        print(line)
    if faults:
        print(f"{len(faults)} fault(s): {links} links checked in {scans} files", file=sys.stderr)
        return 1
    print(f"checked {links} links and {scans} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
