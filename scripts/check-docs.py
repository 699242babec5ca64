#!/usr/bin/env python3
"""Checks that README.md and docs/*.md keep their promises.

Usage: python3 scripts/check-docs.py BUILD_DIR      (e.g. build/release, with tools/vkattn built)

  1. README.md is at most 12 KB (12288 bytes): a newcomer reads it in five minutes.
  2. A fenced code block right after a marker line `<!-- PATH -->` is the file PATH, byte for byte
     (README.md's example is examples/readme_example.cpp, which CI compiles and runs); README.md must
     have at least one such block.
  3. Every `vkattn SUBCOMMAND` shown in a shell code block or an inline code span exists:
     `BUILD_DIR/tools/vkattn SUBCOMMAND --help` prints its usage; and every `--option` shown after it
     (in a code block, up to the next command or blank line) is one its --help lists.
  4. Every relative link (and image) resolves to an existing file, and a `#anchor` to a heading of
     the page it points to (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens).
  5. Every docs/*.md page is linked from README.md.

Prints what it checked; exits 1 naming each failure.
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
README_LIMIT = 12288
# Code blocks in these languages hold no shell commands (a C++ comment may say "vkattn binds ...").
NOT_SHELL = {"cpp", "c++", "c", "cmake", "python", "py", "json", "glsl"}

failures = []


def fail(message):
    failures.append(message)
    print(f"FAIL: {message}")


def parse(text):
    """Splits markdown into prose lines (code spans kept), fenced blocks and indented blocks.

    Returns (prose, blocks): prose is a list of (line_number, line) outside code blocks; blocks is a
    list of (line_number, language, lines, marker), marker being the `<!-- PATH -->` line just before
    a fenced block (or None)."""
    prose, blocks = [], []
    lines = text.split("\n")
    i = 0
    previous = ""  # the line before this one
    in_list = False  # inside a list item, where an indented line continues the item
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^(\s*)(```+|~~~+)\s*([\w+-]*)", line)
        if fence:
            indent, mark, language = fence.groups()
            marker = re.match(r"^<!--\s*(\S+)\s*-->$", previous.strip())
            body = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(mark):
                # a fence inside a list item is indented like the item: drop that indent
                body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
                i += 1
            blocks.append((i - len(body), language.lower(), body, marker.group(1) if marker else None))
            i += 1
            previous = ""
            continue
        if line.startswith("    ") and previous.strip() == "" and not in_list:  # an indented block
            start, body = i + 1, []
            while i < len(lines) and (lines[i].startswith("    ") or lines[i].strip() == ""):
                body.append(lines[i][4:])
                i += 1
            while body and body[-1].strip() == "":
                body.pop()
            blocks.append((start, "", body, None))
            previous = ""
            continue
        if re.match(r"^\s*([-*+]|\d+\.)\s", line):
            in_list = True
        elif line.strip() and not line.startswith(" "):
            in_list = False
        prose.append((i + 1, line))
        previous = line
        i += 1
    return prose, blocks


def slug(heading):
    text = heading.strip().lower()
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text stays
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        prose, _ = parse(path.read_text())
        seen, result = {}, set()
        for _, line in prose:
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            result.add(base if n == 0 else f"{base}-{n}")
        cache[path] = result
    return cache[path]


def strip_code_spans(line):
    return re.sub(r"(`+)(.+?)\1", "", line)


def check_links(path, prose):
    count = 0
    for number, line in prose:
        for m in re.finditer(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", strip_code_spans(line)):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            count += 1
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(ROOT)}:{number}"
            if not resolved.exists():
                fail(f"{where}: link to {target}: {file_part} does not exist")
                continue
            if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                fail(f"{where}: link to {target}: {resolved.relative_to(ROOT)} has no heading #{anchor}")
    return count


class Cli:
    def __init__(self, binary):
        self.binary = binary
        self.help = {}

    def usage(self, sub):
        if sub not in self.help:
            result = subprocess.run([str(self.binary), sub, "--help"], capture_output=True, text=True, timeout=60)
            text = result.stdout + result.stderr
            # CLI11 prints the main help for an unknown word, with exit 0: look for the subcommand's usage.
            self.help[sub] = text if result.returncode == 0 and f"Usage: vkattn {sub} " in text else None
        return self.help[sub]


COMMAND = re.compile(r"(?:^|[\s/(])vkattn ([a-z][a-z0-9-]*)\b(.*)")


def check_command(cli, where, sub, rest, shown):
    help_text = cli.usage(sub)
    if help_text is None:
        fail(f"{where}: `vkattn {sub}` is shown, but `vkattn {sub} --help` prints no usage of it")
        return
    shown.add(sub)
    for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
        if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", help_text):
            fail(f"{where}: `vkattn {sub} ... {option}` is shown, but `vkattn {sub} --help` lists no {option}")


def check_commands(cli, path, prose, blocks, shown):
    rel = path.relative_to(ROOT)
    count = 0
    for start, language, body, _ in blocks:
        if language in NOT_SHELL:
            continue
        command = None  # (where, sub, text so far)
        for offset, line in enumerate(body + [""]):
            m = COMMAND.search(line)
            if m or line.strip() == "":
                if command:
                    check_command(cli, *command, shown)
                    count += 1
                command = (f"{rel}:{start + offset}", m.group(1), m.group(2)) if m else None
            elif command:
                command = (command[0], command[1], command[2] + " " + line)
    for number, line in prose:
        for span in re.findall(r"(`+)(.+?)\1", line):
            m = COMMAND.search(span[1])
            if m:
                check_command(cli, f"{rel}:{number}", m.group(1), m.group(2), shown)
                count += 1
    return count


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = pathlib.Path(sys.argv[1]).resolve() / "tools" / "vkattn"
    if not binary.is_file():
        sys.exit(f"check-docs: {binary} does not exist (build the vkattn target first)")
    cli = Cli(binary)
    readme = ROOT / "README.md"
    pages = sorted((ROOT / "docs").glob("*.md"))

    size = readme.stat().st_size
    if size > README_LIMIT:
        fail(f"README.md is {size} bytes, over {README_LIMIT}")
    print(f"README.md: {size} bytes (at most {README_LIMIT})")

    links = commands = included = 0
    shown = set()
    readme_links = set()
    for path in [readme] + pages:
        text = path.read_text()
        prose, blocks = parse(text)
        for start, _, body, marker in blocks:
            if marker is None:
                continue
            source = ROOT / marker
            if not source.is_file():
                fail(f"{path.relative_to(ROOT)}:{start}: the block is marked as {marker}, which does not exist")
            elif "\n".join(body).rstrip("\n") != source.read_text().rstrip("\n"):
                fail(f"{path.relative_to(ROOT)}:{start}: the code block differs from {marker}")
            else:
                included += 1
                print(f"{path.relative_to(ROOT)}:{start}: the code block is {marker}, verbatim")
        if path == readme and not any(marker for *_, marker in blocks):
            fail("README.md has no code block marked <!-- examples/... --> (its example, checked against the file)")
        links += check_links(path, prose)
        commands += check_commands(cli, path, prose, blocks, shown)
        if path == readme:
            for _, line in prose:
                for m in re.finditer(r"\]\((docs/[^)#\s]+)", strip_code_spans(line)):
                    readme_links.add((ROOT / m.group(1)).resolve())

    for page in pages:
        if page.resolve() not in readme_links:
            fail(f"{page.relative_to(ROOT)} is not linked from README.md")
    print(f"{links} relative links resolve; {commands} commands shown exist "
          f"(vkattn {', '.join(sorted(shown))}, each option in its --help); "
          f"{included} code block(s) match their files; "
          f"{sum(page.resolve() in readme_links for page in pages)} of {len(pages)} docs pages linked from README.md")
    if failures:
        print(f"check-docs: {len(failures)} failure(s)")
        return 1
    print("check-docs: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
