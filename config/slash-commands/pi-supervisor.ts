// /supervisor <issue> [run options] inside pi: runs the installed `supervisor run` with
// `--progress jsonl` and shows its journal's events as they come (footer status, a widget with the
// stages so far), then puts the outcome into the session. Written by `supervisor init --slash-commands`.
// SUPERVISOR_BIN names the binary when `supervisor` is not on PATH. Escape (or pi's abort, or pi
// ending, even by a crash) stops the run: supervisor gets SIGTERM, stops its agent and cleans up.
//
// It type-checks without pi's or Node's type packages: the few shapes it uses are declared here,
// and Node's modules are loaded by name.

/** What this extension uses of pi's extension API. */
type Context = {
  cwd: string;
  signal?: { addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void };
  ui: {
    notify(message: string, level: "info" | "warning" | "error"): void;
    setStatus(key: string, text: string | undefined): void;
    setWidget(key: string, lines: string[] | undefined): void;
    onTerminalInput?(handler: (data: string) => unknown): () => void;
  };
};
type ExtensionAPI = {
  registerCommand(
    name: string,
    options: { description: string; handler: (args: string, ctx: Context) => Promise<void> },
  ): void;
  sendMessage(message: {
    customType: string;
    content: string;
    display: boolean;
    details: Record<string, unknown>;
  }): void;
  on(event: "session_shutdown", handler: () => void): void;
};
/** The running supervisor process, as Node's child_process gives it. */
type Child = {
  stdout: unknown;
  stderr: unknown;
  kill(signal: string): boolean;
  on(event: "error", handler: (err: Error) => void): void;
  on(event: "close", handler: (code: number | null) => void): void;
};
type Lines = AsyncIterable<string> & { on(event: "line", handler: (line: string) => void): void };
type NodeApi = {
  spawn(bin: string, args: string[], options: Record<string, unknown>): Child;
  lines(input: unknown): Lines;
  env: Record<string, string | undefined>;
  /** Calls `handler` when pi's process exits, however it does (an uncaught error too). */
  onExit(handler: () => void): void;
};

/** Node's modules, loaded by name (a name that is not a literal needs no type declarations). */
async function node(): Promise<NodeApi> {
  const load = (name: string): Promise<any> => import(name);
  const [childProcess, readline, proc] = await Promise.all([
    load("node:child_process"),
    load("node:readline"),
    load("node:process"),
  ]);
  return {
    spawn: childProcess.spawn,
    lines: (input: unknown) => readline.createInterface({ input }),
    env: (proc.default ?? proc).env,
    onExit: (handler: () => void) => (proc.default ?? proc).once("exit", handler),
  };
}

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
    case "agent-finished": {
      const exit = typeof p.stats.exit === "string" ? p.stats.exit : Object.keys(p.stats.exit ?? {})[0];
      return `  ${p.stats.agent}: ${exit}, ${p.stats.usage?.total ?? 0} tokens`;
    }
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
  // The runs under way not yet asked to stop, stopped when pi ends. Each is signalled once: a
  // second SIGTERM makes supervisor exit at once, without its clean-up.
  const running = new Set<Child>();
  const stop = (child: Child) => {
    if (running.delete(child)) child.kill("SIGTERM");
  };
  const stopAll = () => {
    for (const child of [...running]) stop(child);
  };
  pi.on("session_shutdown", stopAll);
  // pi dying without its shutdown (an uncaught error) must not leave a run going on alone.
  let exitHooked = false;
  pi.registerCommand("supervisor", {
    description: "Walk a GitHub issue through the supervisor pipeline to a reviewed pull request",
    handler: async (args: string, ctx: Context) => {
      const argv = args.trim().split(/\s+/).filter(Boolean);
      if (!/^#?\d+$/.test(argv[0] ?? "")) {
        ctx.ui.notify(USAGE, "error");
        return;
      }
      argv[0] = argv[0].replace(/^#/, "");
      const { spawn, lines: linesOf, env, onExit } = await node();
      if (!exitHooked) {
        exitHooked = true;
        onExit(stopAll);
      }
      const bin = env.SUPERVISOR_BIN || "supervisor";
      const child = spawn(bin, ["run", ...argv, "--progress", "jsonl"], {
        cwd: ctx.cwd,
        stdio: ["ignore", "pipe", "pipe"],
      });
      running.add(child);
      let cancelled = false;
      const cancel = () => {
        if (cancelled) return;
        cancelled = true;
        ctx.ui.setStatus("supervisor", `supervisor #${argv[0]}: stopping…`);
        stop(child);
      };
      // pi's abort, when the command has one, and Escape on pi's terminal.
      ctx.signal?.addEventListener("abort", cancel, { once: true });
      const unlisten = ctx.ui.onTerminalInput?.((data: string) => {
        if (data !== "\u001b") return undefined;
        cancel();
        return { consume: true };
      });
      const lines: string[] = [];
      const errors: string[] = [];
      let pr: string | undefined;
      const done = new Promise<number | null>((resolve) => {
        child.on("error", (err: Error) => {
          errors.push(`cannot start ${bin}: ${err.message} (install supervisor or set SUPERVISOR_BIN)`);
          resolve(null);
        });
        child.on("close", (code: number | null) => resolve(code));
      });
      linesOf(child.stderr).on("line", (l: string) => {
        errors.push(l);
        if (errors.length > 60) errors.shift();
      });
      for await (const raw of linesOf(child.stdout)) {
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
      running.delete(child);
      unlisten?.();
      ctx.ui.setStatus("supervisor", undefined);
      const ok = code === 0 && !cancelled;
      const outcome = cancelled
        ? `supervisor #${argv[0]}: stopped from pi; /supervisor ${argv[0]} again goes on from the card's column`
        : pr
          ? `supervisor #${argv[0]}: pull request ${pr}`
          : `supervisor #${argv[0]} ended with exit ${code ?? "(not started)"}`;
      // A dry run (or a run that recorded nothing) says what it found on stderr: its plan, or why.
      const said = argv.includes("--dry-run") || lines.length === 0 ? `\n\n${errors.join("\n")}` : "";
      const tail = ok || said ? "" : `\n\n${errors.slice(-15).join("\n")}\n\nsupervisor runs why ${argv[0]} explains a stopped run.`;
      pi.sendMessage({
        customType: "supervisor",
        content: `${outcome}\n\n${lines.join("\n")}${said}${tail}`,
        display: true,
        details: { issue: Number(argv[0]), exitCode: code, pr, cancelled },
      });
      ctx.ui.notify(outcome, ok ? "info" : "error");
    },
  });
}
