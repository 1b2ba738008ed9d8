"""Words describe the code as it is: the shipped code, the benchmarks (shipped in the wheel
as xlapy._benchmarks), the docs, the README and the tools name no issue numbers, and the
README's map of the repository lists every test folder, fixture folder and tool."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_ISSUE = re.compile(r"\bissue\s*#?\d", re.IGNORECASE)


def _texts():
    for folder in ("xlapy", "benchmarks", "docs", "tools"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".md") and path.is_file():
                yield path
    yield ROOT / "README.md"


def test_no_issue_numbers():
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in _texts()
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if _ISSUE.search(line)]
    assert not found, "words naming an issue (say what the code does):\n" + "\n".join(found)


def test_readme_maps_every_test_folder_fixture_folder_and_tool():
    readme = (ROOT / "README.md").read_text()
    layout = readme.split("## Layout of the repository", 1)[1].split("\n## ", 1)[0]
    tests = ROOT / "tests"
    missing = [f"{p.name}/" for p in tests.iterdir()
               if p.is_dir() and not p.name.startswith((".", "_")) and p.name != "fixtures"
               and f"{p.name}/" not in layout]
    missing += [f"fixtures/{p.name}/" for p in (tests / "fixtures").iterdir()
                if p.is_dir() and f"fixtures/{p.name}/" not in layout]
    missing += [p.name for p in (ROOT / "tools").iterdir()
                if p.suffix in (".py", ".json") and p.name not in layout]
    missing += [p.name for p in (ROOT / "docs").glob("*.md") if p.name not in layout]
    assert not missing, f"README's layout of the repository does not mention {missing}"
