"""Rewrites the results table of INTEROP.md from interop/run's runs.jsonl.

Usage: python3 table.py RUNS_JSONL INTEROP_MD
The table sits between the two marker lines below; everything else in the
file is kept.
"""
import json
import sys

BEGIN = "<!-- results:begin (written by interop/run) -->"
END = "<!-- results:end -->"


def cell(row):
    if "total" not in row:
        return "ran, no summary" if row["rc"] == 0 else "FAILED"
    text = f"{row['passed']}/{row['total']}"
    if row.get("expected"):
        text += f" ({row['expected']} expected failure)"
    return text + ("" if row["rc"] == 0 else " FAILED")


def main(runs_path, doc_path):
    rows = [json.loads(line) for line in open(runs_path) if line.strip()]
    lines = [
        BEGIN,
        "",
        "| peer | scenario | transport | checks passed | verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        if row["rc"] != 0:
            verdict = "**fail**"
        elif row.get("total") is not None and row["passed"] < row["total"] - row.get("expected", 0):
            verdict = "pass, with the expected failures of interop/expected-failures.yml"
        else:
            verdict = "pass"
        lines.append(
            f"| {row['peer']} | {row['scenario']} | {row['transport']} | {cell(row)} | {verdict} |"
        )
    lines += ["", END]
    table = "\n".join(lines)
    text = open(doc_path).read()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + table + tail
    else:
        text = text.rstrip("\n") + "\n\n" + table + "\n"
    open(doc_path, "w").write(text)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
