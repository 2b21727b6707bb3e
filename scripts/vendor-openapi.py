#!/usr/bin/env python3
"""Vendor the part of GitHub's REST description (OpenAPI) that supervisor uses.

Downloads a pinned `@octokit/openapi` package from the npm registry (GitHub's official description,
republished with each change), keeps the operations below with every component they reference,
turns OpenAPI 3.0 schemas into plain JSON Schema (draft 2020-12: `nullable` becomes a `null` type,
annotations are dropped) and writes two files beside the client:

- crates/github/src/github/openapi/rest.json      operations (method, path, parameters, body and answer schemas)
                                     and the schemas they reference; the sandbox validates against it
- crates/github/src/github/openapi/examples.json  GitHub's request and response examples of those operations; the
                                     contract tests serve them to the real client

Usage: scripts/vendor-openapi.py [VERSION]   (then update crates/github/src/github/openapi/README.md)
"""

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile

PACKAGE = "@octokit/openapi"
VERSION = sys.argv[1] if len(sys.argv) > 1 else "23.0.2"
SOURCE_FILE = "package/generated/api.github.com.json"

# Every REST operation the client sends, and the ones the sandbox serves besides.
OPERATIONS = [
    "users/get-authenticated",
    "apps/get-authenticated",
    "apps/get-repo-installation",
    "apps/create-installation-access-token",
    "repos/get",
    "issues/get",
    "issues/update",
    "issues/list-comments",
    "issues/create-comment",
    "issues/get-comment",
    "issues/update-comment",
    "issues/list-dependencies-blocked-by",
    "issues/add-blocked-by-dependency",
    "issues/remove-dependency-blocked-by",
    "issues/create",
    "issues/list-for-repo",
    "issues/list-sub-issues",
    "issues/add-sub-issue",
    "repos/get-commit",
    "checks/list-for-ref",
    "pulls/list",
    "pulls/create",
    "pulls/get",
    "pulls/update",
    "pulls/merge",
    "pulls/list-files",
    "git/get-ref",
    "git/create-ref",
    "pulls/list-reviews",
    "pulls/get-review",
    "pulls/create-review",
    "pulls/list-review-comments",
    "pulls/get-review-comment",
    "pulls/create-review-comment",
    "pulls/create-reply-for-review-comment",
    "issues/add-labels",
    "issues/remove-label",
    "actions/create-workflow-dispatch",
]

# Schema keywords kept; everything else (descriptions, examples, formats, x-* extensions) is dropped.
KEEP = {
    "type", "properties", "required", "items", "additionalProperties", "enum", "allOf", "anyOf",
    "oneOf", "not", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems",
    "pattern", "$ref", "const", "uniqueItems", "exclusiveMinimum", "exclusiveMaximum",
}

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "crates", "github", "src", "github", "openapi")


def download():
    tmp = tempfile.mkdtemp()
    subprocess.run(["npm", "pack", f"{PACKAGE}@{VERSION}", "--silent"], cwd=tmp, check=True,
                   stdout=subprocess.DEVNULL)
    (tgz,) = [f for f in os.listdir(tmp) if f.endswith(".tgz")]
    path = os.path.join(tmp, tgz)
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    with tarfile.open(path) as tar:
        doc = json.load(tar.extractfile(SOURCE_FILE))
    return doc, sha


class Trimmer:
    def __init__(self, doc):
        self.doc = doc
        self.schemas = {}

    def resolve(self, node):
        """A `$ref` to anything but a schema, followed."""
        while isinstance(node, dict) and "$ref" in node:
            parts = node["$ref"].lstrip("#/").split("/")
            node = self.doc
            for p in parts:
                node = node[p]
        return node

    def schema(self, node):
        """OpenAPI 3.0 schema object → JSON Schema, collecting referenced component schemas."""
        if isinstance(node, list):
            return [self.schema(n) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            name = node["$ref"].split("/")[-1]
            if name not in self.schemas:
                self.schemas[name] = None  # cycles
                self.schemas[name] = self.schema(self.doc["components"]["schemas"][name])
            return {"$ref": f"#/schemas/{name}"}
        out = {}
        for key, value in node.items():
            if key not in KEEP:
                continue
            if key == "properties":
                out[key] = {k: self.schema(v) for k, v in value.items()}
            elif key in ("items", "additionalProperties", "not"):
                out[key] = self.schema(value) if isinstance(value, dict) else value
            elif key in ("allOf", "anyOf", "oneOf"):
                out[key] = [self.schema(v) for v in value]
            else:
                out[key] = value
        if node.get("nullable"):
            if "type" in out and isinstance(out["type"], str):
                out["type"] = [out["type"], "null"]
                if "enum" in out and None not in out["enum"]:
                    out["enum"] = out["enum"] + [None]
            else:
                out = {"anyOf": [out, {"type": "null"}]}
        return out

    def example(self, node):
        """An example object's value; GitHub's often point at a shared example object."""
        node = self.resolve(node)
        value = node.get("value") if isinstance(node, dict) else None
        while isinstance(value, dict) and set(value) == {"$ref"}:
            target = self.resolve(value)
            value = target.get("value", target)
        return value

    def operation(self, method, path, op):
        params = []
        for p in op.get("parameters", []):
            p = self.resolve(p)
            params.append({
                "name": p["name"],
                "in": p["in"],
                "required": bool(p.get("required", p["in"] == "path")),
                "schema": self.schema(p.get("schema", {})),
            })
        entry = {"method": method.upper(), "path": path, "parameters": params}
        examples = {"responses": {}}
        body = op.get("requestBody")
        if body:
            body = self.resolve(body)
            media = body.get("content", {}).get("application/json", {})
            entry["requestBody"] = {
                "required": bool(body.get("required")),
                "schema": self.schema(media.get("schema", {})),
            }
            examples["request"] = {k: self.example(v) for k, v in media.get("examples", {}).items()}
        responses = {}
        for status, resp in op.get("responses", {}).items():
            resp = self.resolve(resp)
            media = resp.get("content", {}).get("application/json")
            responses[status] = {"schema": self.schema(media["schema"]) if media and "schema" in media else None}
            if media and media.get("examples"):
                examples["responses"][status] = {
                    k: self.example(v) for k, v in media["examples"].items()
                }
        entry["responses"] = responses
        return entry, examples


def main():
    doc, sha = download()
    index = {}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and "operationId" in op:
                index[op["operationId"]] = (method, path, op)
    trimmer = Trimmer(doc)
    operations, examples = {}, {}
    for op_id in OPERATIONS:
        method, path, op = index[op_id]
        operations[op_id], examples[op_id] = trimmer.operation(method, path, op)
    source = {"package": PACKAGE, "version": VERSION, "file": SOURCE_FILE.removeprefix("package/"),
              "tarball_sha256": sha, "openapi": doc["openapi"]}
    rest = {"source": source, "operations": operations,
            "schemas": dict(sorted(trimmer.schemas.items()))}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "rest.json"), "w") as f:
        json.dump(rest, f, indent=1, sort_keys=False)
        f.write("\n")
    with open(os.path.join(OUT, "examples.json"), "w") as f:
        json.dump({"source": source, "operations": examples}, f, indent=1)
        f.write("\n")
    print(f"{PACKAGE}@{VERSION} (tarball sha256 {sha}): {len(operations)} operations, "
          f"{len(trimmer.schemas)} schemas")


if __name__ == "__main__":
    main()
