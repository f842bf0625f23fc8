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

  // A session page follows its running turn: it polls the session's state (the same
  // server-rendered, escaped HTML the page came with) and swaps in the turns that changed,
  // keeping any tool call or reasoning the reader had opened.
  const stateUrl = document.body.dataset.stateUrl;
  if (!stateUrl) return;
  const FAST = 500;
  const SLOW = 5000;

  function fromHtml(html) {
    const template = document.createElement("template");
    template.innerHTML = html.trim();
    return template.content.firstElementChild;
  }

  function apply(state) {
    const container = document.getElementById("turns");
    state.turns.forEach((turn, index) => {
      const id = "turn-" + (index + 1);
      let slot = document.getElementById(id);
      if (slot && slot.dataset.key === turn.key) return;
      const fresh = fromHtml(turn.html);
      if (slot) {
        const open = new Set(
          Array.from(slot.querySelectorAll("details[open]")).map((d) => d.dataset.key),
        );
        fresh.querySelectorAll("details").forEach((d) => {
          if (open.has(d.dataset.key)) d.open = true;
        });
        slot.replaceChildren(fresh);
      } else {
        if (index === 0) container.replaceChildren();
        slot = document.createElement("div");
        slot.className = "turn-slot";
        slot.id = id;
        slot.appendChild(fresh);
        container.appendChild(slot);
      }
      slot.dataset.key = turn.key;
    });
    const badge = document.getElementById("session-status");
    badge.className = "badge status-" + state.status;
    badge.textContent = state.running ? "Running" : state.status_label;
    document.body.dataset.running = state.running ? "true" : "false";
  }

  function stop(message) {
    const notice = document.getElementById("notice");
    notice.textContent = message;
    notice.hidden = false;
    document.body.dataset.running = "false";
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
        // What the controls depend on changed (the turn ended, a question came): the page
        // is rendered again, since its forms are the server's.
        if (state.phase !== document.body.dataset.phase) return window.location.reload();
        apply(state);
        delay = state.running ? FAST : SLOW;
      }
    } catch (err) {
      delay = SLOW;
    }
    setTimeout(poll, delay);
  }

  setTimeout(poll, document.body.dataset.running === "true" ? FAST : SLOW);
})();
