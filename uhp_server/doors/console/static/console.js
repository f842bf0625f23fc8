// The owner's console: small behaviours on top of pages that work without them. Served as a
// file of its own (the CSP allows no inline script).
"use strict";
(function () {
  // A form that asks first (deleting a session): the browser's own confirmation.
  document.querySelectorAll("form[data-confirm]").forEach((form) => {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  });

  // Copying a share link.
  document.querySelectorAll("button[data-copy]").forEach((button) => {
    button.addEventListener("click", async () => {
      const field = document.getElementById(button.dataset.copy);
      const said = document.getElementById("copied");
      try {
        await navigator.clipboard.writeText(field.value);
        if (said) said.textContent = "Link copied.";
      } catch (err) {
        field.select();
        if (said) said.textContent = "Select the link and copy it.";
      }
    });
  });

  // A session page follows its running turn over the session's live stream (Server-Sent
  // Events: each message the running turn as the server renders it, escaped, and the
  // questions it waits on with their forms), swapping in the turn without a reload and
  // keeping any tool call or reasoning the reader had opened. The browser reconnects by
  // itself, sending the last message's id, and is sent only what came after. When the turn
  // ends the page is rendered again (its controls are the server's). A page with no turn
  // running polls the session's state slowly, to notice one starting elsewhere.
  const stateUrl = document.body.dataset.stateUrl;
  const liveUrl = document.body.dataset.liveUrl;
  if (!stateUrl) return;
  const FAST = 500;
  const SLOW = 5000;

  function fromHtml(html) {
    const template = document.createElement("template");
    template.innerHTML = html.trim();
    return template.content;
  }

  function place(number, key, html) {
    const container = document.getElementById("turns");
    const id = "turn-" + number;
    let slot = document.getElementById(id);
    if (slot && slot.dataset.key === key) return;
    const fresh = fromHtml(html);
    if (slot) {
      const open = new Set(
        Array.from(slot.querySelectorAll("details[open]")).map((d) => d.dataset.key),
      );
      fresh.querySelectorAll("details").forEach((d) => {
        if (open.has(d.dataset.key)) d.open = true;
      });
      slot.replaceChildren(fresh);
    } else {
      container.querySelectorAll(":scope > .muted").forEach((none) => none.remove());
      slot = document.createElement("div");
      slot.className = "turn-slot";
      slot.id = id;
      slot.appendChild(fresh);
      container.appendChild(slot);
    }
    slot.dataset.key = key;
  }

  function showStatus(status, label, running) {
    const badge = document.getElementById("session-status");
    badge.className = "badge status-" + status;
    badge.textContent = running ? "Running" : label;
    document.body.dataset.running = running ? "true" : "false";
  }

  function stop(message) {
    const notice = document.getElementById("notice");
    notice.textContent = message;
    notice.hidden = false;
    document.body.dataset.running = "false";
  }

  let questionsHtml = null; // the questions as last swapped in: a form being filled stays
  function showQuestions(html) {
    if (html === questionsHtml) return;
    questionsHtml = html;
    document.getElementById("questions").replaceChildren(fromHtml(html));
  }

  function follow() {
    const source = new EventSource(liveUrl);
    source.addEventListener("turn", (event) => {
      const turn = JSON.parse(event.data);
      place(turn.number, turn.key, turn.html);
      showStatus(turn.status, turn.status_label, turn.running);
      showQuestions(turn.questions);
      document.body.dataset.lastEvent = event.lastEventId;
    });
    source.addEventListener("end", () => {
      source.close();
      window.location.reload();
    });
    source.addEventListener("error", () => {
      // A dropped connection is retried by the browser; one it gave up on (signed out, the
      // session gone, too many streams) is explained by the state the poll reads.
      if (source.readyState === EventSource.CLOSED) setTimeout(poll, FAST);
    });
  }

  async function poll() {
    let delay = SLOW;
    try {
      const answer = await fetch(stateUrl, {
        cache: "no-store",
        credentials: "same-origin",
        redirect: "manual",
        headers: { Accept: "application/json" },
      });
      if (answer.type === "opaqueredirect") return stop("You are signed out. Sign in again.");
      if (answer.status === 404) return stop("This session no longer exists.");
      if (answer.ok) {
        const state = await answer.json();
        // What the controls depend on changed (a turn started or ended, a question came):
        // the page is rendered again, since its forms are the server's.
        if (state.phase !== document.body.dataset.phase) return window.location.reload();
        state.turns.forEach((turn) => place(turn.number, turn.key, turn.html));
        showStatus(state.status, state.status_label, state.running);
        delay = state.running ? FAST : SLOW;
      }
    } catch (err) {
      delay = SLOW;
    }
    setTimeout(poll, delay);
  }

  if (document.body.dataset.running === "true" && liveUrl && window.EventSource) follow();
  else setTimeout(poll, document.body.dataset.running === "true" ? FAST : SLOW);
})();
