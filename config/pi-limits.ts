// The tool-call cap and the token budget of one dispatch, enforced inside pi before a tool runs.
// supervisor writes this file into a private temporary directory and starts pi with
// `--extension <file>` when a dispatch has a limit, given in SUPERVISOR_LIMIT_TOOL_CALLS and
// SUPERVISOR_LIMIT_TOKENS (0 or unset: none). It counts what supervisor counts in pi's event stream:
// tool calls at `tool_execution_start`, tokens summed over the usage of every assistant message. The
// call that would go over the cap, and any call once the tokens are over the budget, is refused
// before it runs (its result starts with REFUSAL, which supervisor reads) and the agent is stopped.
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

const REFUSAL = "supervisor refused this tool call:";

function limit(name: string): number {
  const n = Number(process.env[name] ?? "0");
  return Number.isFinite(n) && n > 0 ? n : 0;
}

export default function (pi: ExtensionAPI) {
  const cap = limit("SUPERVISOR_LIMIT_TOOL_CALLS");
  const budget = limit("SUPERVISOR_LIMIT_TOKENS");
  let calls = 0;
  let tokens = 0;

  pi.on("message_end", (event) => {
    const message: any = event.message;
    const u = message?.role === "assistant" ? message.usage : undefined;
    if (!u) return;
    const total = u.totalTokens || (u.input ?? 0) + (u.output ?? 0) + (u.cacheRead ?? 0) + (u.cacheWrite ?? 0);
    tokens += Number.isFinite(total) ? total : 0;
  });

  pi.on("tool_execution_start", () => {
    calls += 1;
  });

  // pi emits this call's `tool_execution_start`, and the `message_end` of the message asking for it,
  // to every handler before it asks `tool_call`.
  pi.on("tool_call", (_event, ctx) => {
    let reason: string | undefined;
    if (budget > 0 && tokens > budget) {
      reason = `the token budget is spent (${tokens} of ${budget} tokens)`;
    } else if (cap > 0 && calls > cap) {
      reason = `the tool-call cap is reached (${cap} calls ran, cap ${cap})`;
    }
    if (reason === undefined) return undefined;
    ctx.abort();
    return { block: true, reason: `${REFUSAL} ${reason}; stop now.` };
  });
}
