"""The end of the test command's output (scripts/test.sh): each leg's time and test counts, the slowest tests of the
whole run, and the time budget, from the JUnit reports its pytest and ctest runs wrote. Python's standard library
alone: it runs with whatever python3 the machine has.

    python3 scripts/test_summary.py DIR --seconds S [--budget-minutes M] [--slowest N]

DIR holds legs.tsv (leg key, label, seconds, exit status per line, as test.sh writes it) and <leg>-<pytest|ctest>-*.xml.
Exits 1 when the run took longer than the budget (0 turns the check off), printing the slowest tests first, so that
a slow machine shows before CI's own limit does. The last line counts every leg's tests, in the plain form
"customops: N passed, N failed, N skipped".
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    times: list[tuple[float, str]] = field(default_factory=list)

    def add(self, other: "Counts") -> None:
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped
        self.times += other.times


def read_report(path: Path) -> Counts:
    """A JUnit file's test cases (pytest's and ctest's share the format): failures and errors count as failed."""
    counts = Counts()
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        print(f"customops: unreadable test report {path}: {e}", file=sys.stderr)
        counts.failed += 1
        return counts
    for case in root.iter("testcase"):
        outcome = {child.tag for child in case}
        if outcome & {"failure", "error"}:
            counts.failed += 1
        elif "skipped" in outcome:
            counts.skipped += 1
        else:
            counts.passed += 1
        name = f"{case.get('classname', '')}::{case.get('name', '')}".lstrip(":")
        counts.times.append((float(case.get("time") or 0.0), name))
    return counts


def read_legs(folder: Path) -> list[tuple[str, str, int, int]]:
    """legs.tsv's (key, label, seconds, exit status) per leg; the key prefixes the leg's report files."""
    legs = []
    tsv = folder / "legs.tsv"
    if tsv.is_file():
        for line in tsv.read_text().splitlines():
            key, label, seconds, status = line.split("\t")
            legs.append((key, label, int(seconds), int(status)))
    return legs


def minutes(seconds: float) -> str:
    return f"{int(seconds) // 60} min {int(seconds) % 60:02d} s"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--seconds", type=int, required=True, help="the whole run's wall time")
    parser.add_argument("--budget-minutes", type=float, default=60.0, help="0: no budget")
    parser.add_argument("--slowest", type=int, default=30)
    args = parser.parse_args(argv)

    total = Counts()
    lines = []
    for key, name, seconds, status in read_legs(args.folder):
        leg = Counts()
        for kind in ("ctest", "pytest"):
            for report in sorted(args.folder.glob(f"{key}-{kind}-*.xml")):
                leg.add(read_report(report))
        total.add(leg)
        lines.append(f"  {name:<14} {minutes(seconds):>13}  {leg.passed:5d} passed, {leg.failed} failed, "
                     f"{leg.skipped} skipped{'' if status == 0 else '  (exit status ' + str(status) + ')'}")
    slowest = sorted(total.times, reverse=True)[:args.slowest]
    print(f"\ncustomops: the slowest {len(slowest)} tests of the run (seconds):")
    for seconds, name in slowest:
        print(f"  {seconds:8.1f}  {name}")
    print("customops: the legs (time, tests):")
    print("\n".join(lines))
    over = args.budget_minutes > 0 and args.seconds > args.budget_minutes * 60
    print(f"customops: the test command took {minutes(args.seconds)}"
          + (f", within its budget of {args.budget_minutes:g} minutes" if args.budget_minutes > 0 and not over else ""))
    if over:
        print(f"customops: OVER BUDGET: the test command took {minutes(args.seconds)}, more than its "
              f"{args.budget_minutes:g} minutes (CUSTOMOPS_TEST_BUDGET_MINUTES). CI stops at 90 minutes on a machine "
              "whose speed varies twofold: make the slowest tests above cheaper, or sample them "
              "(docs/design/testing.md).")
    print(f"customops: {total.passed} passed, {total.failed} failed, {total.skipped} skipped")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
