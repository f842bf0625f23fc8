// Live updates for the shared-session page. It only reads: it polls the share's state (the
// same server-rendered, escaped HTML the page came with) and swaps in the turns that changed,
// keeping any tool call or reasoning the reader had opened.
"use strict";
(function () {
  const stateUrl = document.body.dataset.stateUrl;
  if (!stateUrl) return;
  const FAST = 700;
  const SLOW = 5000;
  function openDetails(element) {
    return new Set(
      Array.from(element.querySelectorAll("details[open]")).map((d) => d.dataset.key),
    );
  }

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
        const open = openDetails(slot);
        fresh.querySelectorAll("details").forEach((d) => {
          if (open.has(d.dataset.key)) d.open = true;
        });
        slot.replaceChildren(fresh);
      } else {
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

  function gone() {
    document.getElementById("turns").replaceChildren();
    const notice = document.getElementById("notice");
    notice.textContent = "This shared session is no longer available.";
    notice.hidden = false;
    document.body.dataset.running = "false";
  }

  async function poll() {
    let delay = SLOW;
    try {
      const answer = await fetch(stateUrl, { cache: "no-store", credentials: "omit" });
      if (answer.status === 404) return gone();
      if (answer.ok) {
        const state = await answer.json();
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
