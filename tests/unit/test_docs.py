"""The manual stays true to the code: the field reference is the schema's, and every link between the
pages points at a file (and a heading) that exists."""

import re

from loadstage.api.reference import render_reference
from support.waiting import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path):
    """GitHub's anchors of a page's headings."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", text, re.M)}


def test_the_field_reference_is_generated_from_the_current_schema():
    assert (ROOT / "docs" / "reference.md").read_text() == render_reference(), \
        "docs/reference.md is stale: loadstage reference > docs/reference.md"


def test_every_link_between_the_pages_resolves():
    broken = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)   # a code span is no link
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            linked = (page.parent / file).resolve() if file else page
            if not linked.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken


def test_a_module_over_300_lines_says_why_in_its_docstring():
    import ast
    long = []
    for path in sorted((ROOT / "operator" / "loadstage").rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > 300 and "over 300 lines" not in (ast.get_docstring(ast.parse(text)) or ""):
            long.append(str(path.relative_to(ROOT)))
    assert long == [], "split these, or say in the docstring why each is over 300 lines"
