// /supervisor <issue> [run options] inside pi: runs the installed `supervisor run` with
// `--progress jsonl` and shows its journal's events as they come (footer status, a widget with the
// stages so far), then puts the outcome into the session. Written by `supervisor init --slash-commands`.
// SUPERVISOR_BIN names the binary when `supervisor` is not on PATH.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

const USAGE = "usage: /supervisor <issue> [--dry-run] [--add-to-board] [--debug]";

type Entry = { kind: string; payload?: Record<string, any> };

/** One journal event as a line, or nothing for events not worth a line. */
function describe(e: Entry): string | undefined {
  const p = e.payload ?? {};
  switch (e.kind) {
    case "run-started":
      return p.resumed ? `resumed run of #${p.issue}` : `started #${p.issue} (${p.repo})`;
    case "stage-started":
      return `→ ${p.stage} · ${p.agent} (attempt ${p.attempt})`;
    case "agent-finished":
      const exit = typeof p.stats.exit === "string" ? p.stats.exit : Object.keys(p.stats.exit ?? {})[0];
      return `  ${p.stats.agent}: ${exit}, ${p.stats.usage?.total ?? 0} tokens`;
    case "gate-finished": {
      const r = p.report ?? {};
      const marks: Record<string, string> = { pass: "✔", fail: "✖", warn: "!", "not-applicable": "–", "not-run": "⊘" };
      const why = r.status === "not-run" && r.reason ? `: ${r.reason}` : "";
      return `    ${marks[r.status] ?? "?"} ${r.name} ${r.status}${why}`;
    }
    case "gates-finished": {
      const gates = (p.reports ?? []).map((r: any) => `${r.name} ${r.status}`);
      return `  gates: ${gates.join(", ")}`;
    }
    case "decision":
      return `  ${p.transition.from} → ${p.transition.to}: ${p.transition.reason}`;
    case "pull-request":
      return `pull request ${p.url}`;
    case "stopped":
      return `stopped: ${p.reason}`;
    case "paused":
      return `paused: ${p.reason}`;
    case "finished":
      return `finished: ${p.outcome}`;
    default:
      return undefined;
  }
}

export default function (pi: ExtensionAPI) {
  pi.registerCommand("supervisor", {
    description: "Walk a GitHub issue through the supervisor pipeline to a reviewed pull request",
    handler: async (args, ctx) => {
      const argv = args.trim().split(/\s+/).filter(Boolean);
      if (!/^#?\d+$/.test(argv[0] ?? "")) {
        ctx.ui.notify(USAGE, "error");
        return;
      }
      argv[0] = argv[0].replace(/^#/, "");
      const bin = process.env.SUPERVISOR_BIN || "supervisor";
      const child = spawn(bin, ["run", ...argv, "--progress", "jsonl"], {
        cwd: ctx.cwd,
        stdio: ["ignore", "pipe", "pipe"],
      });
      const lines: string[] = [];
      const errors: string[] = [];
      let pr: string | undefined;
      const done = new Promise<number | null>((resolve) => {
        child.on("error", (err) => {
          errors.push(`cannot start ${bin}: ${err.message} (install supervisor or set SUPERVISOR_BIN)`);
          resolve(null);
        });
        child.on("close", (code) => resolve(code));
      });
      createInterface({ input: child.stderr }).on("line", (l) => {
        errors.push(l);
        if (errors.length > 40) errors.shift();
      });
      for await (const raw of createInterface({ input: child.stdout })) {
        let entry: Entry;
        try {
          entry = JSON.parse(raw);
        } catch {
          continue;
        }
        if (entry.kind === "pull-request") pr = entry.payload?.url;
        const line = describe(entry);
        if (!line) continue;
        lines.push(line);
        ctx.ui.setStatus("supervisor", `supervisor #${argv[0]}: ${line.trim()}`);
        ctx.ui.setWidget("supervisor", lines.slice(-12));
      }
      const code = await done;
      ctx.ui.setStatus("supervisor", undefined);
      const ok = code === 0;
      const outcome = pr
        ? `supervisor #${argv[0]}: pull request ${pr}`
        : `supervisor #${argv[0]} ended with exit ${code ?? "(not started)"}`;
      const tail = ok ? "" : `\n\n${errors.slice(-15).join("\n")}\n\nsupervisor runs why ${argv[0]} explains a stopped run.`;
      pi.sendMessage({
        customType: "supervisor",
        content: `${outcome}\n\n${lines.join("\n")}${tail}`,
        display: true,
        details: { issue: Number(argv[0]), exitCode: code, pr },
      });
      ctx.ui.notify(outcome, ok ? "info" : "error");
    },
  });
}
