// The Seam console's page: reads the JSON API, follows its event stream, and draws what it
// reads. Every text that a plugin or a model wrote is put in the document as text (DOM text
// nodes), never parsed as markup; the server's content security policy backs that up.
"use strict";

const $ = (id) => document.getElementById(id);

// An element with attributes and children; strings become text nodes.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(typeof child === "string" || typeof child === "number" ? String(child) : child);
  }
  return node;
}

const state = {
  session: null, // the session shown
  run: null, // the key of the run shown
  detail: null, // GET /api/sessions/ID
  runDetail: null, // GET /api/sessions/CHILD of the run shown
  query: "",
};

// --- the API ---

async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch (_) {
    json = null;
  }
  if (!response.ok) {
    const message = json && json.error ? json.error.message : text || response.statusText;
    throw new Error(message);
  }
  return json;
}

function showError(error) {
  const box = $("error");
  if (!error) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  box.textContent = String(error.message || error);
  box.hidden = false;
}

// Runs an action, showing its failure, then reads everything again.
async function act(what) {
  try {
    showError(null);
    const out = await what();
    refresh();
    return out;
  } catch (error) {
    showError(error);
    return null;
  }
}

// --- words ---

function text(blocks) {
  if (!Array.isArray(blocks)) return "";
  return blocks.map((b) => (typeof b.value === "string" ? b.value : JSON.stringify(b))).join("\n");
}

function time(ms) {
  if (!ms) return "";
  return new Date(ms).toLocaleTimeString();
}

function took(start, end) {
  if (!start) return "";
  const ms = (end || Date.now()) - start;
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

function spentWords(spent, budget) {
  if (!spent) return "";
  const tokens = (spent.input_tokens || 0) + (spent.output_tokens || 0);
  const parts = [`${tokens} tokens (${spent.input_tokens || 0} in, ${spent.output_tokens || 0} out)`];
  if (spent.cost_usd) parts.push(`$${Number(spent.cost_usd).toFixed(4)}`);
  if (spent.model_calls) parts.push(`${spent.model_calls} model calls`);
  if (spent.tool_calls) parts.push(`${spent.tool_calls} tool calls`);
  let out = parts.join(", ");
  if (budget && Object.keys(budget).length) {
    const limits = Object.entries(budget).map(([k, v]) => `${k} ${v}`);
    out += ` of a budget of ${limits.join(", ")}`;
  }
  return out;
}

// The tokens and cost a run's tree reported at its end (a run without a kept session), and
// the budget it was started with.
function usageWords(run) {
  const parts = [];
  if (run.usage) parts.push(tokenWords(run.usage));
  if (run["cost-usd"]) parts.push(`$${Number(run["cost-usd"]).toFixed(4)}`);
  if (run.budget && Object.keys(run.budget).length) {
    parts.push(`budget ${Object.entries(run.budget).map(([k, v]) => `${k} ${v}`).join(", ")}`);
  }
  return parts.join(", ");
}

// A model usage (`prompt-tokens`, `completion-tokens`) in words.
function tokenWords(usage) {
  const input = usage["prompt-tokens"] || 0;
  const output = usage["completion-tokens"] || 0;
  return `${input + output} tokens (${input} in, ${output} out)`;
}

// How a run stands: running, or its stop reason, or interrupted.
function runState(run) {
  if (run.status === "running") return "running";
  if (run.status === "interrupted") return "interrupted";
  return run.stop_reason || run["stop-reason"] || "ended";
}

// --- routing: #/s/SESSION and #/s/SESSION/r/KEY ---

function route() {
  const match = location.hash.match(/^#\/s\/([^/]+)(?:\/r\/(-?\d+))?$/);
  state.session = match ? decodeURIComponent(match[1]) : null;
  state.run = match && match[2] !== undefined ? Number(match[2]) : null;
  state.detail = null;
  state.runDetail = null;
  $("replay-report").hidden = true;
  refresh();
}

function go(session, run) {
  let hash = session ? `#/s/${encodeURIComponent(session)}` : "#/";
  if (session && run !== null && run !== undefined) hash += `/r/${run}`;
  if (location.hash === hash) refresh();
  else location.hash = hash;
}

// --- reading, coalesced: one read at a time, one more if something happened meanwhile ---

let reading = false;
let again = false;
let againList = false;

// Reads what the page shows again: the session shown, and the list too unless `list` is false
// (most events change a tree, few change how a session stands).
function refresh(list = true) {
  if (reading) {
    again = true;
    againList = againList || list;
    return;
  }
  reading = true;
  again = false;
  againList = false;
  readAll(list)
    .catch(showError)
    .finally(() => {
      // A storm of events (a run streaming progress) is read a few times a second, not once
      // an event.
      setTimeout(() => {
        reading = false;
        if (again) refresh(againList);
      }, READ_GAP_MS);
    });
}

// The least time between two reads.
const READ_GAP_MS = 100;

// The bus events after which the list of sessions may read otherwise.
const LISTED = new Set(["agent/created", "agent/turn-start", "agent/turn-end", "approval/requested", "approval/resolved"]);

// What was last drawn, to draw again only what changed (a redraw under a person's pointer
// would swallow a click).
const drawn = { list: null, detail: null };

async function readAll(withList) {
  if (withList || drawn.list === null) {
    const q = state.query ? `?q=${encodeURIComponent(state.query)}` : "";
    const list = await api("GET", `/api/sessions${q}`);
    const listed = JSON.stringify([list, state.session]);
    if (listed !== drawn.list) {
      drawn.list = listed;
      drawSessions(list.sessions);
    }
  }
  if (!state.session) {
    $("detail").hidden = true;
    $("empty").hidden = false;
    drawn.detail = null;
    return;
  }
  const detail = await api("GET", `/api/sessions/${encodeURIComponent(state.session)}`);
  state.detail = detail;
  let run = null;
  if (state.run !== null) {
    run = findRun(detail.runs, state.run);
    state.runDetail =
      run && run.session ? await api("GET", `/api/sessions/${encodeURIComponent(run.session)}`) : null;
  }
  const shown = JSON.stringify([detail, run, state.runDetail && state.runDetail.conversation]);
  if (shown !== drawn.detail) {
    drawn.detail = shown;
    drawDetail(detail, run);
  }
}

function findRun(runs, key) {
  for (const run of runs || []) {
    if (run.key === key) return run;
    const below = findRun(run.runs, key);
    if (below) return below;
  }
  return null;
}

// --- drawing ---

function badge(value) {
  return el("span", { class: "badge", "data-state": value }, value);
}

function drawSessions(sessions) {
  const items = sessions.map((s) =>
    el(
      "li",
      {
        "data-session": s.id,
        "data-state": s.state,
        class: s.id === state.session ? "current" : "",
      },
      el(
        "a",
        { href: `#/s/${encodeURIComponent(s.id)}` },
        el("span", { class: "mono" }, s.id),
        " ",
        badge(s.state),
        s["pending-approvals"] ? el("span", { class: "badge", "data-state": "waiting" }, `${s["pending-approvals"]} to approve`) : null,
        el("span", { class: "prompt" }, s.prompt || "(no prompt yet)"),
        el("span", { class: "muted small" }, `${s.turns} turn${s.turns === 1 ? "" : "s"}, ${time(s["updated-ms"])}${s.here ? ", open here" : ""}`),
      ),
    ),
  );
  $("sessions").replaceChildren(...items);
  $("no-sessions").textContent = state.query ? "No session matches." : "No session yet: start one above.";
  $("no-sessions").hidden = items.length > 0;
}

function drawDetail(detail, run) {
  $("empty").hidden = true;
  $("detail").hidden = false;
  const s = detail.session;
  $("session-id").textContent = s.id;
  $("session-state").textContent = s.state;
  $("session-state").dataset.state = s.state;
  $("detail").dataset.session = s.id;
  $("detail").dataset.state = s.state;
  $("session-facts").textContent =
    `${s.parent ? `child of ${s.parent}, ` : ""}agent ${s.agent}, in ${s["working-directory"]}, ` +
    `${s.turns} turn${s.turns === 1 ? "" : "s"}, ${s.events} events` +
    (s.here ? ", open in this console" : "");
  $("session-spent").textContent = spentWords(detail.spent, detail.budget);
  const running = s.state === "running" || s.state === "waiting";
  $("interrupt-turn").hidden = !(running && s.here);
  $("steer").hidden = !(running && s.here);
  $("continue").hidden = running || !!s.parent;
  $("replay").hidden = running || !!s.parent;
  drawApprovals($("approvals"), detail.approvals.filter((a) => a.status === "pending"));
  $("approvals-box").hidden = !detail.approvals.some((a) => a.status === "pending");
  $("tree").replaceChildren(...(detail.runs.length ? detail.runs.map(drawRun) : [el("p", { class: "muted" }, "No run yet.")]));
  drawTimeline(detail);
  drawConversation($("conversation"), detail.conversation);
  drawRunBox(run, detail);
}

function drawApprovals(list, approvals) {
  list.replaceChildren(
    ...approvals.map((a) =>
      el(
        "li",
        { "data-approval": a.id, "data-status": a.status },
        el("span", { class: "mono" }, a.id),
        " ",
        badge(a.status),
        " ",
        el("span", { class: "subject" }, a.what || ""),
        el("span", { class: "muted small" }, a.path && a.path.length ? ` asked by ${a.path.join(" > ")}` : ""),
        a.status === "pending"
          ? el(
              "span",
              { class: "actions" },
              el("button", { type: "button", "data-answer": "allow", onclick: () => answer(a.id, "allow") }, "Allow"),
              el("button", { type: "button", "data-answer": "allow-always", onclick: () => answer(a.id, "allow-always") }, "Allow always"),
              el("button", { type: "button", "data-answer": "deny", onclick: () => answer(a.id, "deny") }, "Deny"),
            )
          : el("span", { class: "muted small" }, a.by ? ` by ${a.by}` : ""),
      ),
    ),
  );
}

function drawRun(run) {
  const st = runState(run);
  const spent = run.spent ? spentWords(run.spent, run.budget) : usageWords(run);
  const node = el(
    "div",
    {
      class: `run-node${run.key === state.run ? " current" : ""}`,
      "data-run": run.run,
      "data-key": run.key,
      "data-provider": run.provider,
      "data-label": run.label || null,
      "data-state": st,
      "data-live": run.live ? "true" : "false",
    },
    el(
      "a",
      { class: "line", href: `#/s/${encodeURIComponent(state.session)}/r/${run.key}` },
      el("span", { class: "provider" }, run.provider),
      " ",
      el("span", { class: "mono muted" }, run.run),
      " ",
      badge(st),
      run.background ? el("span", { class: "muted small" }, " background") : null,
      el("span", { class: "muted small", "data-since": run.status === "running" ? run["started-ms"] : null }, ` ${took(run["started-ms"], run["ended-ms"])}`),
      spent ? el("span", { class: "muted small" }, ` · ${spent}`) : null,
    ),
    run.prompt ? el("div", { class: "prompt small" }, run.prompt) : null,
    run.progress ? el("div", { class: "progress small" }, `progress: ${run.progress}`) : null,
    run.answer ? el("div", { class: "answer small" }, run.answer) : null,
    run.diagnostic ? el("div", { class: "diagnostic small" }, run.diagnostic) : null,
    run.live
      ? el(
          "span",
          { class: "actions" },
          el("button", { type: "button", "data-action": "interrupt", onclick: () => interruptRun(run.key) }, "Interrupt"),
        )
      : null,
    run.runs && run.runs.length ? el("div", { class: "children" }, run.runs.map(drawRun)) : null,
  );
  return node;
}

// The tree's turns and runs as bars on one time axis.
function drawTimeline(detail) {
  const rows = [];
  for (const t of detail.turns) rows.push({ label: `turn ${t.turn}`, start: t["started-ms"], end: t["ended-ms"], state: t["stop-reason"] || "running", depth: 0 });
  const walk = (runs, depth) => {
    for (const r of runs || []) {
      rows.push({ label: `${r.provider} ${r.run}`, start: r["started-ms"], end: r["ended-ms"], state: runState(r), depth, key: r.key });
      walk(r.runs, depth + 1);
    }
  };
  walk(detail.runs, 1);
  if (!rows.length) {
    $("timeline").replaceChildren(el("p", { class: "muted" }, "Nothing ran yet."));
    return;
  }
  const now = Date.now();
  const t0 = Math.min(...rows.map((r) => r.start));
  const t1 = Math.max(...rows.map((r) => r.end || now), t0 + 1);
  const span = t1 - t0;
  $("timeline").replaceChildren(
    el("div", { class: "axis muted small" }, el("span", {}, time(t0)), el("span", {}, `${took(t0, t1)}`)),
    ...rows.map((r) => {
      const left = ((r.start - t0) / span) * 100;
      const width = Math.max((((r.end || now) - r.start) / span) * 100, 0.5);
      const bar = el("div", { class: "bar", "data-state": r.state, title: `${r.label}: ${r.state}, ${took(r.start, r.end)}` });
      bar.style.left = `${left}%`;
      bar.style.width = `${width}%`;
      return el(
        "div",
        { class: "row", "data-key": r.key },
        el("span", { class: "label small" }, `${"· ".repeat(r.depth)}${r.label}`),
        el("span", { class: "lane" }, bar),
      );
    }),
  );
}

function drawConversation(list, events) {
  const items = [];
  for (const entry of events || []) {
    const e = entry.event || {};
    switch (e.type) {
      case "turn/start":
        items.push(el("li", { class: "turn" }, `turn ${e.turn} started ${time(entry["at-ms"])}`));
        break;
      case "turn/end":
        items.push(el("li", { class: "turn" }, `turn ${e.turn} ended: ${e.reason}${e.usage ? `, ${tokenWords(e.usage)}` : ""}`));
        break;
      case "user-message":
        items.push(el("li", { class: "message user" }, el("span", { class: "who" }, "user"), el("pre", { class: "prompt" }, text(e.content))));
        break;
      case "assistant-message":
        items.push(
          el(
            "li",
            { class: "message assistant" },
            el("span", { class: "who" }, "assistant"),
            e.text ? el("pre", {}, e.text) : null,
            ...(e.tool_calls || []).map((c) => el("div", { class: "call" }, el("span", { class: "mono" }, `${c.name}`), el("pre", { class: "small" }, c.arguments))),
          ),
        );
        break;
      case "tool-result":
        items.push(
          el(
            "li",
            { class: `message result${e.is_error ? " failed" : ""}` },
            el("span", { class: "who" }, `${e.name}${e.is_error ? " (failed)" : ""}`),
            el("pre", {}, text(e.content)),
          ),
        );
        break;
      default:
        break;
    }
  }
  list.replaceChildren(...items);
}

function drawRunBox(run, detail) {
  const box = $("run-box");
  if (!run) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  box.dataset.key = run.key;
  box.dataset.state = runState(run);
  $("run-title").textContent = `${run.provider} ${run.run}`;
  $("run-state").textContent = runState(run);
  $("run-state").dataset.state = runState(run);
  const facts = [
    ["provider", run.provider],
    ["run", `${run.run} (key ${run.key})`],
    ["state", runState(run)],
    ["started", time(run["started-ms"])],
    ["duration", took(run["started-ms"], run["ended-ms"])],
    ["prompt", run.prompt],
    ["label", run.label],
    ["progress", run.progress],
    ["answer", run.answer],
    ["report", run.report],
    ["diagnostic", run.diagnostic],
    ["session", run.session],
    ["spent", run.spent ? spentWords(run.spent, run.budget) : usageWords(run) || null],
    ["scope", run.scope ? JSON.stringify(run.scope) : null],
    ["approver", run.approver ? JSON.stringify(run.approver) : null],
  ];
  $("run-facts").replaceChildren(
    ...facts.filter(([, v]) => v).flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-fact": k }, String(v))]),
  );
  $("run-interrupt").hidden = !run.live;
  $("run-message").hidden = !(run.live || detail.session.here);
  const asked = detail.approvals.filter((a) => (a.path || []).includes(run.run) || (run.session && a.session === run.session));
  drawApprovals($("run-approvals"), asked);
  $("run-approvals-box").hidden = asked.length === 0;
  const conversation = state.runDetail ? state.runDetail.conversation : [];
  drawConversation($("run-conversation"), conversation);
  $("run-conversation-box").hidden = conversation.length === 0;
}

// --- actions ---

function answer(id, kind) {
  return act(() => api("POST", `/api/approvals/${encodeURIComponent(id)}`, { answer: kind }));
}

function interruptRun(key) {
  return act(() => api("POST", `/api/runs/${key}/interrupt`, {}));
}

function wire() {
  $("new-session").addEventListener("submit", async (event) => {
    event.preventDefault();
    const prompt = $("new-prompt").value;
    const out = await act(() => api("POST", "/api/sessions", { prompt }));
    if (out) {
      $("new-prompt").value = "";
      go(out.session, null);
    }
  });
  $("continue").addEventListener("submit", async (event) => {
    event.preventDefault();
    const prompt = $("continue-prompt").value;
    const out = await act(() => api("POST", `/api/sessions/${encodeURIComponent(state.session)}/turns`, { prompt }));
    if (out) $("continue-prompt").value = "";
  });
  $("steer").addEventListener("submit", async (event) => {
    event.preventDefault();
    const textValue = $("steer-text").value;
    const out = await act(() => api("POST", `/api/sessions/${encodeURIComponent(state.session)}/messages`, { text: textValue }));
    if (out) $("steer-text").value = "";
  });
  // Ctrl+Enter (or Cmd+Enter) sends a prompt box's form.
  for (const id of ["new-prompt", "continue-prompt"]) {
    $(id).addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        $(id).form.requestSubmit();
      }
    });
  }
  $("interrupt-turn").addEventListener("click", () =>
    act(() => api("POST", `/api/sessions/${encodeURIComponent(state.session)}/interrupt`, {})),
  );
  $("run-interrupt").addEventListener("click", () => interruptRun(state.run));
  $("run-message").addEventListener("submit", async (event) => {
    event.preventDefault();
    const textValue = $("run-text").value;
    const out = await act(() =>
      api("POST", `/api/runs/${state.run}/messages`, { text: textValue, session: state.detail ? state.detail.root : undefined }),
    );
    if (out) $("run-text").value = "";
  });
  $("replay").addEventListener("click", async () => {
    const report = $("replay-report");
    report.hidden = false;
    report.dataset.state = "running";
    report.replaceChildren(el("p", { class: "muted" }, "Replaying..."));
    const out = await act(() => api("POST", `/api/sessions/${encodeURIComponent(state.session)}/replay`, {}));
    drawReplay(out);
  });
  let typing = null;
  $("search").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => {
      state.query = $("search").value.trim();
      refresh();
    }, 150);
  });
  window.addEventListener("hashchange", route);
}

function drawReplay(out) {
  const report = $("replay-report");
  if (!out) {
    report.hidden = true;
    return;
  }
  report.dataset.state = out.identical ? "identical" : "diverged";
  const lines = [];
  if (out.divergence) {
    const d = out.divergence;
    lines.push(el("p", {}, badge("diverged"), ` at \`${d.key}\`, step ${d.step}: ${d.what}`));
    lines.push(el("div", { class: "diff" }, el("div", {}, el("h5", {}, "recorded"), el("pre", {}, JSON.stringify(d.recorded, null, 2))), el("div", {}, el("h5", {}, "now"), el("pre", {}, JSON.stringify(d.now, null, 2)))));
  } else if (out.cut) {
    lines.push(el("p", {}, badge("identical"), ` up to the cut: turn ${out.cut.turn} at \`${out.cut.key}\`, step ${out.cut.step}`));
  } else {
    lines.push(el("p", {}, badge("identical"), ` ${out.steps} model steps over ${out.turns} of ${out.recorded_turns} turns`));
  }
  for (const gap of out.gaps || []) lines.push(el("p", { class: "muted small" }, `not replayed: ${gap}`));
  report.replaceChildren(...lines);
}

// --- the live stream ---

function follow() {
  const live = $("live");
  const stream = new EventSource("/api/events");
  const mark = (value) => {
    live.dataset.state = value;
    live.textContent = value;
  };
  stream.addEventListener("ready", () => {
    mark("live");
    refresh();
  });
  stream.addEventListener("bus", (message) => {
    let name = "";
    try {
      name = JSON.parse(message.data).event || "";
    } catch (_) {
      name = "";
    }
    refresh(LISTED.has(name));
  });
  for (const kind of ["console", "store", "lagged"]) stream.addEventListener(kind, () => refresh());
  stream.onerror = () => mark("reconnecting");
}

// The durations of what runs go on counting between redraws (text only: nothing is replaced
// under a person's pointer).
function tick() {
  for (const node of document.querySelectorAll("[data-since]")) {
    node.textContent = ` ${took(Number(node.dataset.since))}`;
  }
}

wire();
follow();
route();
setInterval(tick, 1000);
