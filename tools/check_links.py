#!/usr/bin/env python3
"""Checks that every relative link of the repository's Markdown files resolves.

Usage: python3 tools/check_links.py   (from anywhere inside the repository; Python 3 standard
library only; CI runs it from .ci/run).

It reads every *.md file git knows of (tracked, plus untracked files that .gitignore does not
ignore, so that a new page is checked before its first commit), and in each the inline links
and images `[text](path)`, `[text](path#anchor)` and `[text](#anchor)` outside code blocks and
code spans. Links with a scheme (http:, https:, mailto:, ...) are not followed. A relative path
must name a file or directory of the working tree, resolved from the linking file's directory;
an anchor into a Markdown file must be the GitHub slug of one of its headings (lowercase,
punctuation other than hyphens and underscores dropped, spaces to hyphens, `-1`, `-2`, ... for
repeats) or an HTML `id`/`name` in it. Prints each broken link as `file:line: link` and exits
with 1; otherwise prints `checked N links in M files` and exits with 0.
"""

import os
import re
import subprocess
import sys
from urllib.parse import unquote

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"<[^>]+\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']")


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


def main():
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True).stdout.strip()
    os.chdir(root)
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "*.md"],
        capture_output=True, text=True, check=True,
    ).stdout.split("\0")
    files = sorted({f for f in files if f and os.path.isfile(f)})
    broken, links = [], 0
    for md in files:
        with open(md, encoding="utf-8") as f:
            text = strip_code(f.read())
        for m in LINK.finditer(text):
            target = m.group(1).strip()
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1]
            if not target or SCHEME.match(target):
                continue
            links += 1
            line = text.count("\n", 0, m.start()) + 1
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(md), unquote(path))) if path else md
            ok = os.path.exists(dest)
            if ok and anchor and dest.endswith(".md") and os.path.isfile(dest):
                ok = unquote(anchor) in anchors(dest)
            if not ok:
                broken.append(f"{md}:{line}: {target}")
    for b in broken:
        print(b)
    if broken:
        print(f"{len(broken)} broken link(s) of {links} in {len(files)} files", file=sys.stderr)
        return 1
    print(f"checked {links} links in {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
