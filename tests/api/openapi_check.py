"""openapi.yaml as a checker of real HTTP answers (tests/api/openapi_responses_test.py uses it).

Loads the document strictly (a duplicated mapping key is an error, as in strict YAML parsers and OpenAPI linters),
finds the operation a request meets, and checks one answer against it:
  - the path is in the document (else the answer must be the `NotFound` response, 404 not-found);
  - the method is one of the path's operations (else the answer must be a 405 the path declares, whose `Allow`
    names exactly the path's methods but OPTIONS);
  - the status is one the operation declares (no `default` response is used in openapi.yaml);
  - every header the response declares `required` is there and its value fits the header's schema;
  - the Content-Type is one the response declares, the body fits that media type's schema (JSON bodies, with the
    schema's `$ref`s inlined; JSON Schema 2020-12, as OpenAPI 3.1 says), and a response that declares no content
    has no body; a problem's `status` member is the response's status.
Every answer checked is recorded (path, method, status, problem type) so a test can tell what it has covered.
Needs python3-yaml and python3-jsonschema (Debian; scripts/deps.sh test).
"""
import copy
import json

import jsonschema
import yaml

PROBLEM_JSON = "application/problem+json"
METHODS = ("get", "head", "post", "put", "delete", "options", "patch", "trace")


class _StrictLoader(yaml.SafeLoader):
    pass


def _strict_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, "duplicated mapping key %r" % (key,),
                                                    key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _strict_mapping)


def load_strict(path):
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=_StrictLoader)


class Answer:
    """One HTTP answer as read off the wire: status, header fields (lower-case names; repeated ones joined by
    ", "), body bytes."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name):
        return self.headers.get(name.lower())

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def problem_type(self):
        if (self.header("content-type") or "").split(";")[0].strip().lower() != PROBLEM_JSON:
            return None
        body = self.json()
        return body.get("type") if isinstance(body, dict) else None

    def __repr__(self):
        return "%d %s %s" % (self.status, self.headers, self.body[:300])


class Document:
    def __init__(self, doc):
        self.doc = doc

    def ref(self, node):
        """`node` with its $ref followed (local references only: openapi.yaml has no others)."""
        while isinstance(node, dict) and "$ref" in node:
            target = self.doc
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            node = target
        return node

    def inline(self, schema, depth=0):
        """`schema` with every $ref replaced by its target (openapi.yaml's schemas are not recursive)."""
        if depth > 40:
            raise ValueError("schema nesting too deep (a recursive $ref?)")
        if isinstance(schema, dict):
            if "$ref" in schema:
                return self.inline(self.ref(schema), depth + 1)
            return {k: self.inline(v, depth + 1) for k, v in schema.items()}
        if isinstance(schema, list):
            return [self.inline(v, depth + 1) for v in schema]
        return schema

    def paths(self):
        return self.doc["paths"]

    def operations(self):
        """(path, method) of every operation."""
        return [(p, m) for p, item in self.paths().items() for m in item if m in METHODS]

    def methods(self, path):
        return [m for m in self.paths()[path] if m in METHODS]

    def problem_types(self):
        return list(self.doc["components"]["schemas"]["Problem"]["properties"]["type"]["enum"])


def _validate(schema, instance):
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return ["%s at /%s" % (e.message, "/".join(str(p) for p in e.absolute_path)) for e in validator.iter_errors(instance)]


def _header_value(raw, schema):
    """A header's text as its schema's type (integers are sent as digits)."""
    types = schema.get("type")
    if types == "integer" or isinstance(schema.get("const"), int):
        try:
            return int(raw)
        except ValueError:
            return raw
    return raw


def _media_matches(declared, content_type):
    """A response's Content-Type against a media type key of its `content`: the same type and subtype, and the
    declared parameters (when the key names any) exactly."""
    got = [p.strip().lower() for p in content_type.split(";")]
    want = [p.strip().lower() for p in declared.split(";")]
    if got[0] != want[0]:
        return False
    return len(want) == 1 or sorted(got[1:]) == sorted(want[1:])


class Checker:
    def __init__(self, document):
        self.doc = document
        self.failures = []
        self.seen = set()  # (path, method, status) of every answer checked against an operation
        self.seen_types = {}  # problem type -> first label that produced it

    def fail(self, label, msg):
        self.failures.append("%s: %s" % (label, msg))
        return False

    def check(self, label, method, target, answer, expect_status=None, expect_type=None):
        """Checks `answer` to `method target` against the document; returns whether it passed. `expect_status` and
        `expect_type` are the test's own expectation of what it provoked (a provocation that missed is a failure
        too: the test would prove nothing)."""
        ok = True
        if expect_status is not None and answer.status != expect_status:
            ok = self.fail(label, "expected %d, got %r" % (expect_status, answer))
        ptype = answer.problem_type()
        if expect_type is not None and ptype != "urn:scangate:problem:" + expect_type:
            ok = self.fail(label, "expected problem %s, got %r" % (expect_type, answer))
        if ptype is not None:
            self.seen_types.setdefault(ptype, label)
        path = target.split("?")[0]
        m = method.lower()
        paths = self.doc.paths()
        if path not in paths:
            response = self.doc.doc["components"]["responses"]["NotFound"]
            if answer.status != 404:
                return self.fail(label, "%s %s: a path not in the document answered %d, not 404" % (method, path,
                                                                                                    answer.status))
            return self._check_response(label, m, answer, response, "404") and ok
        if m not in paths[path]:
            declared = {code: self.doc.ref(resp) for op in self.doc.methods(path)
                        for code, resp in paths[path][op]["responses"].items()}
            if answer.status != 405 or "405" not in declared:
                return self.fail(label, "%s %s: a method the document does not list for the path answered %d, not a "
                                        "declared 405" % (method, path, answer.status))
            allow = sorted(a.strip() for a in (answer.header("allow") or "").split(","))
            documented = sorted(x.upper() for x in self.doc.methods(path) if x != "options")
            if allow != documented:
                ok = self.fail(label, "Allow %r, the document's methods for %s: %r" % (allow, path, documented))
            for op in self.doc.methods(path):
                self.seen.add((path, op, "405"))
            return self._check_response(label, m, answer, declared["405"], "405") and ok
        op = paths[path][m]
        code = str(answer.status)
        if code not in op["responses"]:
            return self.fail(label, "%s %s answered %d, which the document does not declare (it declares %s): %r" % (
                method, path, answer.status, ", ".join(sorted(op["responses"])), answer))
        self.seen.add((path, m, code))
        return self._check_response(label, m, answer, self.doc.ref(op["responses"][code]), code) and ok

    def _check_response(self, label, method, answer, response, code):
        ok = True
        for name, header in (response.get("headers") or {}).items():
            header = self.doc.ref(header)
            raw = answer.header(name)
            if raw is None:
                if header.get("required"):
                    ok = self.fail(label, "%s: required header %s missing: %r" % (code, name, answer))
                continue
            schema = self.doc.inline(header.get("schema", {}))
            errors = _validate(schema, _header_value(raw, schema))
            if errors:
                ok = self.fail(label, "%s: header %s: %r does not fit %s: %s" % (code, name, raw, schema, errors))
        content = response.get("content")
        content_type = answer.header("content-type")
        if not content:
            if answer.body:
                ok = self.fail(label, "%s declares no body, got %r" % (code, answer))
            return ok
        if content_type is None:
            return self.fail(label, "%s: no Content-Type (declared: %s): %r" % (code, ", ".join(content), answer))
        media = [k for k in content if _media_matches(k, content_type)]
        if not media:
            return self.fail(label, "%s: Content-Type %r, the document declares %s" % (code, content_type,
                                                                                     ", ".join(content)))
        if method == "head":
            if answer.body:
                ok = self.fail(label, "HEAD answered a body: %r" % answer)
            return ok
        schema = self.doc.inline(content[media[0]].get("schema", {}))
        base = media[0].split(";")[0].strip()
        if base == "application/json" or base.endswith("+json"):
            body = answer.json()
            if body is None:
                return self.fail(label, "%s: a %s body that is not JSON: %r" % (code, base, answer))
            errors = _validate(schema, body)
            if errors:
                ok = self.fail(label, "%s: body does not fit the document's schema: %s; body %s" % (
                    code, "; ".join(errors[:5]), answer.body[:400]))
            if base == PROBLEM_JSON and isinstance(body, dict) and body.get("status") != answer.status:
                ok = self.fail(label, "problem status member %r on a %d answer" % (body.get("status"), answer.status))
        else:
            try:
                text = answer.body.decode("utf-8")
            except UnicodeDecodeError:
                return self.fail(label, "%s: a %s body that is not UTF-8" % (code, base))
            errors = _validate(schema, text)
            if errors:
                ok = self.fail(label, "%s: body does not fit %s: %s" % (code, schema, errors))
        return ok


def mutated(doc, edit):
    """A deep copy of the document's tree with `edit(tree)` applied: the test's negative controls."""
    tree = copy.deepcopy(doc.doc)
    edit(tree)
    return Document(tree)
