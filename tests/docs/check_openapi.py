#!/usr/bin/env python3
"""docs/openapi.yaml is a valid OpenAPI 3.0 document and describes exactly
the manager's routes (issue 34, item 4).

Usage:
  check_openapi.py SPEC                      validate the document
  check_openapi.py SPEC --routes PRINTER     compare it with the route table

Validation:
- The YAML is read with a loader that refuses a key given twice (plain
  PyYAML keeps the last one silently: a second `get:` under a path would
  hide the first operation).
- The document is checked against the OpenAPI Initiative's JSON Schema for
  3.0 (/usr/share/openapi-specification/schemas/v3.0/schema.json, Debian's
  openapi-specification) with python3-jsonschema. Debian's
  python3-openapi-spec-validator is not in bookworm; where it is installed
  (trixie and later) it is run as well.
- What that schema cannot say, checked here: every local $ref resolves;
  each `{param}` of a path is declared as a required path parameter of
  every operation under it, and no path parameter is declared that the
  path lacks; operationIds are unique; every security requirement names a
  scheme of components.securitySchemes; every operation answers a 2xx and
  describes its errors.

Route comparison: PRINTER (tests/docs/print_routes.c) prints the table
the manager is built with, one "METHOD PATTERN AUTH [stream-body]" a line.
Each (METHOD, PATTERN) must be an operation of the document and each
operation a route, parameters compared by place, not name. AUTH must
match the operation's `security` (SECURITY_OF_AUTH below).
"""

import json
import os
import re
import subprocess
import sys

try:
    import yaml
except ImportError:
    sys.exit("check_openapi.py needs Debian's python3-yaml (scripts/bootstrap installs it)")

SCHEMA = "/usr/share/openapi-specification/schemas/v3.0/schema.json"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")

# api.c's enum route_auth -> the security requirement the operation must
# state (the scheme names of components.securitySchemes).
SECURITY_OF_AUTH = {
    1: [{"userSignature": []}],
    2: [{"agentSignature": []}],
    4: [{"proxySignature": []}],
}


class UniqueKeyLoader(yaml.SafeLoader):
    pass


def _mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, "key %r given twice" % (key,), key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.load(f, Loader=UniqueKeyLoader)
    except (OSError, yaml.YAMLError) as e:
        sys.exit("%s: %s" % (path, e))


def normalize(path):
    """/v1/sessions/{ref}/apps/{app} -> /v1/sessions/{}/apps/{}"""
    return re.sub(r"\{[^}/]*\}", "{}", path)


def operations(doc):
    for path, item in (doc.get("paths") or {}).items():
        for method in METHODS:
            if method in item:
                yield path, method, item, item[method]


def resolve(doc, ref):
    if not ref.startswith("#/"):
        return None
    node = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def all_refs(node, where="#"):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield where, v
            else:
                yield from all_refs(v, where + "/" + str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from all_refs(v, "%s/%d" % (where, i))


def deref(doc, node):
    while isinstance(node, dict) and "$ref" in node:
        node = resolve(doc, node["$ref"]) or {}
    return node


def validate(doc):
    problems = []
    try:
        with open(SCHEMA, encoding="utf-8") as f:
            schema = json.load(f)
    except OSError as e:
        sys.exit("%s: %s (install openapi-specification: scripts/bootstrap)" % (SCHEMA, e))
    try:
        import jsonschema
    except ImportError:
        sys.exit("check_openapi.py needs Debian's python3-jsonschema (scripts/bootstrap installs it)")
    validator = jsonschema.Draft4Validator(schema)
    for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in e.absolute_path)
        problems.append("schema: at %s: %s" % (where or "(top)", e.message[:300]))
    try:
        from openapi_spec_validator import validate_spec
    except ImportError:
        validate_spec = None
    if validate_spec:
        try:
            validate_spec(doc)
        except Exception as e:  # its error classes differ between versions
            problems.append("openapi-spec-validator: %s" % (str(e)[:300],))

    for where, ref in all_refs(doc):
        if resolve(doc, ref) is None:
            problems.append("%s: $ref %s resolves to nothing" % (where, ref))

    schemes = set(((doc.get("components") or {}).get("securitySchemes") or {}).keys())
    for req in doc.get("security") or []:
        for name in req:
            if name not in schemes:
                problems.append("top-level security names %s, not a securityScheme" % name)
    op_ids = {}
    for path, method, item, op in operations(doc):
        what = "%s %s" % (method.upper(), path)
        if not isinstance(op, dict):
            problems.append("%s: not an operation object" % what)
            continue
        oid = op.get("operationId")
        if oid in op_ids:
            problems.append("%s: operationId %s also used by %s" % (what, oid, op_ids[oid]))
        op_ids[oid] = what
        declared = {}
        for p in list(item.get("parameters") or []) + list(op.get("parameters") or []):
            p = deref(doc, p)
            if p.get("in") == "path":
                declared[p.get("name")] = p
        in_path = re.findall(r"\{([^}/]*)\}", path)
        for name in in_path:
            if name not in declared:
                problems.append("%s: path parameter {%s} is not declared" % (what, name))
            elif declared[name].get("required") is not True:
                problems.append("%s: path parameter {%s} must be required: true" % (what, name))
        for name in declared:
            if name not in in_path:
                problems.append("%s: declares path parameter %s that the path lacks" % (what, name))
        for req in op.get("security") or []:
            for name in req:
                if name not in schemes:
                    problems.append("%s: security names %s, not a securityScheme" % (what, name))
        codes = [str(c) for c in (op.get("responses") or {})]
        if not any(c.startswith("2") for c in codes):
            problems.append("%s: no 2xx response" % what)
        if not any(c[0] in "45" or c == "default" for c in codes):
            problems.append("%s: no error response (4xx, 5xx or default)" % what)
    return problems


def table(printer):
    try:
        out = subprocess.run([printer], check=True, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        sys.exit("%s: %s" % (printer, e))
    routes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3:
            sys.exit("%s printed %r, not METHOD PATTERN AUTH" % (printer, line))
        routes[(parts[0], normalize(parts[1]))] = (parts[1], int(parts[2]))
    if not routes:
        sys.exit("%s printed no route" % printer)
    return routes


def compare(doc, routes):
    problems = []
    documented = {}
    for path, method, _, op in operations(doc):
        key = (method.upper(), normalize(path))
        if key in documented:
            problems.append("%s %s and %s %s are one route (parameters differ only by name)" % (
                key[0], documented[key][0], key[0], path))
        documented[key] = (path, op)
    default_security = doc.get("security")
    for key in sorted(routes):
        pattern, auth = routes[key]
        if key not in documented:
            problems.append("route %s %s (src/manager/http/api.c, manager_routes) is missing from the "
                            "document" % (key[0], pattern))
            continue
        op = documented[key][1]
        security = op.get("security", default_security)
        if auth in SECURITY_OF_AUTH:
            if security != SECURITY_OF_AUTH[auth]:
                problems.append("%s %s: the route asks for %s, the document says security %s" % (
                    key[0], pattern, SECURITY_OF_AUTH[auth], security))
        elif auth == 0:
            # Public routes check their callers themselves (login: the web
            # secret, /metrics: an optional token); never a user's keypair.
            if "security" not in op or any("userSignature" in r for r in (security or [])):
                problems.append("%s %s is not signed (a public route): state its security without "
                                "userSignature" % key)
        else:
            problems.append("%s %s: auth flags %d that this check does not know (SECURITY_OF_AUTH)" % (
                key[0], pattern, auth))
    for key in sorted(documented):
        if key not in routes:
            problems.append("the document has %s %s, which the route table (src/manager/http/api.c, "
                            "manager_routes) lacks" % (key[0], documented[key][0]))
    return problems


def main(argv):
    if len(argv) == 2:
        spec, printer = argv[1], None
    elif len(argv) == 4 and argv[2] == "--routes":
        spec, printer = argv[1], argv[3]
    else:
        sys.exit(__doc__.split("\n\n")[1])
    doc = load(spec)
    if not isinstance(doc, dict):
        sys.exit("%s: not a YAML mapping" % spec)
    if printer:
        routes = table(printer)
        problems = compare(doc, routes)
        ok = "%s: the %d routes of the table, and no other, with their security" % (spec, len(routes))
    else:
        problems = validate(doc)
        n = sum(1 for _ in operations(doc))
        ok = "%s: valid OpenAPI %s, %d operations" % (spec, doc.get("openapi"), n)
    for p in problems:
        print("%s: %s" % (os.path.basename(spec), p))
    if problems:
        print("%d problem(s)" % len(problems))
        return 1
    print(ok)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
