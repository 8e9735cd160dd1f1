#!/usr/bin/env python3
"""A strict parser of the Prometheus text exposition format 0.0.4.

Reads the text on stdin (or the file named as the first argument), checks
every rule below and exits 1 with the line and the reason at the first
break; on success prints a JSON object {"name{labels}": value} of every
sample, for the tests to look values up in.

Rules (from the format's specification):
  - lines end with \\n; no empty text; a blank line is allowed;
  - "# HELP name text" and "# TYPE name type" at most once per name, TYPE
    before any sample of its family; type one of counter, gauge,
    histogram, summary, untyped; other "#" lines are comments;
  - a sample is name[{label="value",...}] value [timestamp]: names match
    [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]* and do not
    start with __, no label twice, values escape only \\\\, \\" and \\n, the
    value is a float (or NaN, +Inf, -Inf), the timestamp an integer;
  - all samples of a family are together (no family continues after
    another started), no series appears twice;
  - a histogram's series are name_bucket (with le), name_sum and
    name_count; per label set the buckets are cumulative (never
    decreasing as le grows), include le="+Inf", and its count equals
    name_count; a counter's value is not negative.
"""
import json
import math
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


class Bad(Exception):
    pass


def parse_float(s):
    if s in ("NaN", "+Inf", "-Inf", "Inf"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", s):
        raise Bad(f"value {s!r} is not a number")
    return float(s)


def parse_labels(s, i):
    """Labels from s[i] == '{'; returns (list of (k, v), index after '}')."""
    assert s[i] == "{"
    i += 1
    labels = []
    seen = set()
    while True:
        if i < len(s) and s[i] == "}":
            return labels, i + 1
        m = LABEL.match(s, i)
        if not m:
            raise Bad(f"bad label name at column {i + 1}")
        k = m.group(0)
        if k.startswith("__"):
            raise Bad(f"label name {k} is reserved")
        if k in seen:
            raise Bad(f"label {k} twice")
        seen.add(k)
        i = m.end()
        if s[i:i + 2] != '="':
            raise Bad(f"label {k} needs =\"value\"")
        i += 2
        v = []
        while True:
            if i >= len(s):
                raise Bad("unterminated label value")
            c = s[i]
            if c == "\\":
                nxt = s[i + 1:i + 2]
                if nxt not in ("\\", '"', "n"):
                    raise Bad(f"bad escape \\{nxt} in label {k}")
                v.append("\n" if nxt == "n" else nxt)
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "\n":
                raise Bad("newline in a label value")
            else:
                v.append(c)
                i += 1
        labels.append((k, "".join(v)))
        if i < len(s) and s[i] == ",":
            i += 1
            if i < len(s) and s[i] == "}":
                return labels, i + 1
        elif i < len(s) and s[i] == "}":
            return labels, i + 1
        else:
            raise Bad(f"expected , or }} after label {k}")


def family_of(name, types):
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and types.get(name[: -len(suffix)]) in ("histogram", "summary"):
            return name[: -len(suffix)]
    return name


def parse(text):
    if not text:
        raise Bad("empty text")
    if not text.endswith("\n"):
        raise Bad("the last line does not end with a newline")
    helps, types = set(), {}
    seen_series = set()
    finished, current = set(), None
    samples = {}
    hist = {}  # (family, labels without le) -> {"buckets": [(le, v)], "count": v}
    for no, line in enumerate(text.split("\n")[:-1], 1):
        try:
            if line == "":
                continue
            if line.startswith("#"):
                parts = line.split(" ", 3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    name = parts[2]
                    if not NAME.fullmatch(name):
                        raise Bad(f"bad metric name {name!r}")
                    if parts[1] == "HELP":
                        if name in helps:
                            raise Bad(f"second HELP for {name}")
                        helps.add(name)
                        text_ = parts[3] if len(parts) > 3 else ""
                        if re.search(r"\\[^\\n]", text_.replace("\\\\", "")):
                            raise Bad("bad escape in HELP")
                    else:
                        if name in types:
                            raise Bad(f"second TYPE for {name}")
                        if len(parts) != 4 or parts[3] not in TYPES:
                            raise Bad(f"bad TYPE line for {name}")
                        if name in finished or name == current or any(
                                family_of(s.split("{")[0], {}) == name for s in samples):
                            raise Bad(f"TYPE of {name} after its samples")
                        types[name] = parts[3]
                continue
            m = NAME.match(line)
            if not m:
                raise Bad("a sample must start with a metric name")
            name = m.group(0)
            i = m.end()
            labels = []
            if i < len(line) and line[i] == "{":
                labels, i = parse_labels(line, i)
            rest = line[i:]
            if not rest.startswith(" "):
                raise Bad("a space must separate the sample's name and value")
            fields = rest.strip(" ").split(" ")
            if not 1 <= len(fields) <= 2:
                raise Bad("a sample is NAME[{LABELS}] VALUE [TIMESTAMP]")
            value = parse_float(fields[0])
            if len(fields) == 2 and not re.fullmatch(r"-?\d+", fields[1]):
                raise Bad("the timestamp must be an integer")
            fam = family_of(name, types)
            if fam != current:
                if fam in finished:
                    raise Bad(f"samples of {fam} are not together")
                if current is not None:
                    finished.add(current)
                current = fam
            key = name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels)) + "}"
            if key in seen_series:
                raise Bad(f"series {key} twice")
            seen_series.add(key)
            samples[key] = value
            t = types.get(fam, "untyped")
            if t == "counter" and value < 0:
                raise Bad(f"counter {name} is negative")
            if t == "histogram":
                rest_labels = tuple(sorted((k, v) for k, v in labels if k != "le"))
                h = hist.setdefault((fam, rest_labels), {"buckets": [], "count": None, "sum": None})
                if name == fam + "_bucket":
                    le = dict(labels).get("le")
                    if le is None:
                        raise Bad(f"{name} without le")
                    h["buckets"].append((parse_float(le), value))
                elif name == fam + "_count":
                    h["count"] = value
                elif name == fam + "_sum":
                    h["sum"] = value
                else:
                    raise Bad(f"{name} is not a series of histogram {fam}")
        except Bad as e:
            raise Bad(f"line {no}: {e}: {line!r}")
    for (fam, labels), h in hist.items():
        b = sorted(h["buckets"])
        if not b or not math.isinf(b[-1][0]):
            raise Bad(f"histogram {fam}{dict(labels)} has no le=\"+Inf\" bucket")
        for (_, x), (_, y) in zip(b, b[1:]):
            if y < x:
                raise Bad(f"histogram {fam}{dict(labels)} buckets are not cumulative")
        if h["count"] is None or h["sum"] is None:
            raise Bad(f"histogram {fam}{dict(labels)} lacks _count or _sum")
        if h["count"] != b[-1][1]:
            raise Bad(f"histogram {fam}{dict(labels)}: _count is not the +Inf bucket")
    return samples


def main():
    text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    try:
        samples = parse(text)
    except Bad as e:
        print(f"promparse: {e}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(samples))


if __name__ == "__main__":
    main()
