// Written by uhp-server; started with `node --import` before Gemini CLI.
// Gemini CLI 0.61.0's ACP `tool_call` update names the tool but leaves out its arguments
// (`rawInput`), so a client cannot show what a call does. This load hook adds them to that
// one update, in the bundle's source as it is loaded; the CLI's files stay untouched. The
// pinned version's source is known: if the line is not found, nothing is changed and the
// calls simply arrive without arguments.
import { register } from "node:module";

const HOOKS = `
const NEEDLE = 'toolCallId: callId,\\n          status: "in_progress",\\n          title: displayTitle,';
export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context);
  if (!url.includes("/@google/gemini-cli/bundle/") || result.source == null) return result;
  const source = String(result.source);
  if (!source.includes(NEEDLE)) return result;
  return { ...result, source: source.replace(NEEDLE, NEEDLE + " rawInput: args,") };
}
`;

register(`data:text/javascript,${encodeURIComponent(HOOKS)}`);
