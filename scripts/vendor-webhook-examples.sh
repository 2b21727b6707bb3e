#!/usr/bin/env bash
# Vendors GitHub's published webhook example payloads and the parts of GitHub's webhook OpenAPI
# description that the events room reads, into tests/fixtures/webhooks/. Run it again to refresh
# (after changing the pinned versions below); the test suite reads only the vendored files.
#
# Sources (both MIT, from the octokit/webhooks and octokit/openapi-webhooks projects, which publish
# GitHub's own examples and description):
#   @octokit/webhooks-examples  api.github.com/index.json  — example payloads per event and action
#   @octokit/openapi-webhooks   generated/api.github.com.json — the webhooks' OpenAPI schemas
#
# Each example is written byte for byte as one file, `<event>.<action>.<n>.json` (n counts the
# examples of that action), pretty-printed with two spaces: the tests sign and send these bytes.
set -euo pipefail
cd "$(dirname "$0")/.."

EXAMPLES="@octokit/webhooks-examples@7.6.1"
OPENAPI="@octokit/openapi-webhooks@12.1.0"
OUT="tests/fixtures/webhooks"

# event → the actions kept ("*" keeps every action).
KEEP='{
  "projects_v2_item": "*",
  "issue_comment": "*",
  "issues": ["labeled", "unlabeled", "opened"],
  "pull_request_review": "*",
  "pull_request_review_comment": "*",
  "ping": "*"
}'

# Schemas (components/schemas keys) whose shapes the parser relies on beyond the examples.
SCHEMAS='[
  "webhook-projects-v2-item-edited",
  "projects-v2-item",
  "projects-v2-item-content-type",
  "projects-v2-single-select-option",
  "projects-v2-iteration-setting",
  "author-association"
]'

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$EXAMPLES" "$OPENAPI" >/dev/null)
mkdir -p "$work/examples" "$work/openapi"
tar xzf "$work"/octokit-webhooks-examples-*.tgz -C "$work/examples"
tar xzf "$work"/octokit-openapi-webhooks-*.tgz -C "$work/openapi"

rm -rf "$OUT"
mkdir -p "$OUT"
KEEP="$KEEP" SCHEMAS="$SCHEMAS" OUT="$OUT" EXAMPLES="$EXAMPLES" OPENAPI="$OPENAPI" node - "$work" <<'NODE'
const fs = require("fs");
const path = require("path");
const work = process.argv[2];
const keep = JSON.parse(process.env.KEEP);
const wanted = JSON.parse(process.env.SCHEMAS);
const out = process.env.OUT;

const events = JSON.parse(
  fs.readFileSync(path.join(work, "examples/package/api.github.com/index.json"), "utf8"));
const written = [];
for (const [name, actions] of Object.entries(keep)) {
  const event = events.find((e) => e.name === name);
  if (!event) throw new Error(`no examples of ${name}`);
  const counts = {};
  for (const example of event.examples) {
    const action = example.action ?? "none";
    if (actions !== "*" && !actions.includes(action)) continue;
    const n = counts[action] = (counts[action] ?? -1) + 1;
    const file = `${name}.${action}.${n}.json`;
    fs.writeFileSync(path.join(out, file), JSON.stringify(example, null, 2) + "\n");
    written.push(file);
  }
}

const openapi = JSON.parse(
  fs.readFileSync(path.join(work, "openapi/package/generated/api.github.com.json"), "utf8"));
const schemas = {};
for (const key of wanted) {
  const schema = openapi.components.schemas[key];
  if (!schema) throw new Error(`no schema ${key}`);
  schemas[key] = schema;
}
// The `pull_request` member of the issue an issue comment belongs to: present when the comment is
// on a pull request's conversation.
const issue = openapi.components.schemas["webhook-issue-comment-created"].properties.issue;
schemas["webhook-issue-comment-created.issue.pull_request"] = issue.allOf[0].properties.pull_request;
fs.writeFileSync(path.join(out, "schemas.json"), JSON.stringify({
  source: process.env.OPENAPI,
  note: "components/schemas of GitHub's webhook OpenAPI description, as published",
  schemas,
}, null, 2) + "\n");

fs.writeFileSync(path.join(out, "SOURCE.md"), [
  "# Webhook fixtures",
  "",
  "Written by `scripts/vendor-webhook-examples.sh`; do not edit by hand.",
  "",
  `- \`<event>.<action>.<n>.json\`: GitHub's example payloads from \`${process.env.EXAMPLES}\``,
  "  (api.github.com), one example a file, pretty-printed with two spaces.",
  `- \`schemas.json\`: the schemas the parser relies on, from \`${process.env.OPENAPI}\`.`,
  "",
  "Both packages are MIT licensed (octokit).",
  "",
  "Files:",
  "",
  ...written.map((f) => `- ${f}`),
  "",
].join("\n"));
console.error(`vendored ${written.length} examples and ${wanted.length + 1} schemas into ${out}`);
NODE
