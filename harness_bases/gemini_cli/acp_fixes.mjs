// Written by uhp-server; started with `node --import` before Gemini CLI.
// Six fixes to Gemini CLI 0.61.0, made in the bundle's source as it is loaded (the CLI's
// files stay untouched). The pinned version's source is known: a fix whose text is not found
// changes nothing.
// 1. Its `tool_call` update names the tool but leaves out the arguments (`rawInput`).
// 2. `session/load` starts the session's new chat recording before it reads the recorded
//    conversation; the new recording overwrites it, so the load finds nothing to resume
//    (or only sometimes finds it, by a race). The fix reads the conversation first.
// 3. `session/load` answers before the replayed history it streams has been sent, so the
//    replay is mixed into the next prompt's updates. The fix sends it first.
// 4. Its own question tool, `ask_user`, is taken out of the registry in ACP mode, and a call
//    of it would only be a permission request (allow or cancel) that carries no answers.
//    With UHP_ASK_USER=1 (someone can answer) the tool stays, and its questions go to the
//    client as the extension request `_uhp/ask_user` ({sessionId, questions}); the reply's
//    `answers` ({question index: text}) are the tool's answers, as its own dialog gives them.
// 5. When its stdin ends, the ACP server runs its exit cleanup but does not exit (its
//    non-interactive mode does): the process lives on while anything holds node's event loop,
//    and a connected MCP server's open stream (Streamable HTTP's GET, SSE) always does, so
//    a turn with an MCP server never ended. The fix exits once the cleanup has run.
// 6. The session cleanup it runs as each process starts deletes conversations idle for 30
//    days, and every file sharing a short id with one that holds no conversation, which a
//    `session/load` in a later minute than the conversation's file leaves: the next start
//    deleted the conversation just resumed. The server decides when a session ends. The
//    per-turn settings switch the cleanup off, but a `.gemini/settings.json` in the
//    workspace (a repository's, or one the agent wrote) outranks them: the fix takes the
//    cleanup out.
import { register } from "node:module";

const HOOKS = `
const FIXES = [
  [
    'toolCallId: callId,\\n          status: "in_progress",\\n          title: displayTitle,',
    'toolCallId: callId,\\n          status: "in_progress",\\n          title: displayTitle, rawInput: args,',
  ],
  [
    "    const config = await this.initializeSessionConfig(\\n      sessionId,\\n      cwd,\\n" +
      "      mcpServers,\\n      authDetails\\n    );\\n" +
      "    const sessionSelector = new SessionSelector(config.storage);\\n" +
      "    const { sessionData, sessionPath } = await sessionSelector.resolveSession(sessionId);",
    "    const recorded = new Storage(cwd);\\n    await recorded.initialize();\\n" +
      "    const { sessionData, sessionPath } = await new SessionSelector(recorded).resolveSession(sessionId);\\n" +
      "    const config = await this.initializeSessionConfig(sessionId, cwd, mcpServers, authDetails);",
  ],
  [
    "    session.streamHistory(sessionData.messages);\\n    setTimeout(",
    "    await session.streamHistory(sessionData.messages);\\n    setTimeout(",
  ],
  [
    "  if (!interactive || isAcpMode) {\\n    extraExcludes.push(ASK_USER_TOOL_NAME);",
    '  if ((!interactive || isAcpMode) && process.env.UHP_ASK_USER !== "1") {\\n' +
      "    extraExcludes.push(ASK_USER_TOOL_NAME);",
  ],
  [
    "      const confirmationDetails = await invocation.shouldConfirmExecute(abortSignal);\\n" +
      "      if (confirmationDetails) {",
    "      const confirmationDetails = await invocation.shouldConfirmExecute(abortSignal);\\n" +
      '      if (confirmationDetails?.type === "ask_user" && process.env.UHP_ASK_USER === "1") {\\n' +
      '        const questions = { sessionId: this.id, questions: confirmationDetails.questions };\\n' +
      '        const reply = await this.connection.extMethod("_uhp/ask_user", questions);\\n' +
      '        await confirmationDetails.onConfirm("proceed_once", { answers: reply?.answers ?? {} });\\n' +
      "      } else if (confirmationDetails) {",
  ],
  [
    "async function cleanupExpiredSessions(config, settings) {",
    "async function cleanupExpiredSessions(config, settings) {\\n" +
      "  return { disabled: true, scanned: 0, deleted: 0, skipped: 0, failed: 0 };",
  ],
  [
    "  await connection.closed.finally(runExitCleanup);\\n}",
    "  await connection.closed.finally(runExitCleanup);\\n  process.exit(0);\\n}",
  ],
];
export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context);
  if (!url.includes("/@google/gemini-cli/bundle/") || result.source == null) return result;
  let source = String(result.source);
  for (const [before, after] of FIXES) source = source.replace(before, after);
  return { ...result, source };
}
`;

register(`data:text/javascript,${encodeURIComponent(HOOKS)}`);
