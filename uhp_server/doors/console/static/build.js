// An environment's build page follows a running build: it polls the build's record (the
// same one `GET /v1/environments/{id}/builds/{version}` reads) and shows each stage as it
// is reached, the log growing under the stage that wrote it. Text only: nothing from the
// log is ever parsed as HTML.
"use strict";
(function () {
  const stateUrl = document.body.dataset.buildUrl;
  if (!stateUrl || document.body.dataset.running !== "true") return;
  const EVERY = 500;
  const log = document.getElementById("build-log");
  let shown = log.textContent;
  let stage = null;

  function marker(name) {
    const line = document.createElement("span");
    line.className = "log-stage";
    line.textContent = "\n── " + name + " ──\n";
    log.appendChild(line);
  }

  function grow(text, newStage) {
    // The record is written as each stage starts, holding the output so far: the new text
    // is the previous stage's, and the marker of the new one follows it.
    if (text.startsWith(shown)) {
      log.appendChild(document.createTextNode(text.slice(shown.length)));
    } else {
      log.textContent = text; // the log's head was cut: shown whole again
    }
    shown = text;
    if (newStage && newStage !== stage) {
      marker(newStage);
      stage = newStage;
    }
    log.scrollTop = log.scrollHeight;
  }

  function stages(list) {
    const holder = document.getElementById("build-stages");
    holder.hidden = list.length === 0;
    holder.replaceChildren(
      ...list.map((s) => {
        const item = document.createElement("li");
        item.className = "stage stage-" + s.state;
        item.dataset.stage = s.name;
        item.textContent = s.name;
        if (s.state === "current") item.setAttribute("aria-current", "step");
        return item;
      }),
    );
  }

  function packages(list) {
    const section = document.getElementById("build-packages");
    section.hidden = list.length === 0;
    section.querySelector("ul").replaceChildren(
      ...list.map((p) => {
        const item = document.createElement("li");
        const name = document.createElement("code");
        name.textContent = p.name;
        item.append(name, " " + p.version + " (" + p.manager + ")");
        return item;
      }),
    );
  }

  function apply(state) {
    grow(state.log, state.running ? state.stage : null);
    stages(state.stages);
    const badge = document.getElementById("build-status");
    badge.className = "badge env-" + state.status;
    badge.textContent = state.status;
    const error = document.getElementById("build-error");
    error.textContent = state.error;
    error.hidden = !state.error;
    if (!state.running) {
      document.getElementById("build-finished").textContent = "finished " + state.finished;
      packages(state.packages);
      document.body.dataset.running = "false";
    }
  }

  async function poll() {
    try {
      const answer = await fetch(stateUrl, {
        cache: "no-store",
        credentials: "same-origin",
        redirect: "manual",
        headers: { Accept: "application/json" },
      });
      if (answer.type === "opaqueredirect" || answer.status === 404) {
        window.location.reload();
        return;
      }
      if (answer.ok) {
        const state = await answer.json();
        apply(state);
        if (!state.running) return;
      }
    } catch (err) {
      // a dropped connection: the next poll tries again
    }
    setTimeout(poll, EVERY);
  }

  const current = document.querySelector("#build-stages [aria-current]");
  if (current) {
    stage = current.dataset.stage;
    marker(stage);
  }
  setTimeout(poll, EVERY);
})();
