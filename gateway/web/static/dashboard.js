// The dashboard: one EventSource carrying the whole state; actions are fetch POSTs.
const $ = (id) => document.getElementById(id);

function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text ?? "";
  if (className) td.className = className;
  return td;
}

function button(label, testid, action) {
  const el = document.createElement("button");
  el.type = "button";
  el.textContent = label;
  el.dataset.testid = testid;
  el.addEventListener("click", async () => {
    el.disabled = true;
    try { await action(); } finally { el.disabled = false; }
  });
  return el;
}

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) alert(answer.error || answer.result || `error ${response.status}`);
}

function steerForm(key) {
  const form = document.createElement("form");
  const input = Object.assign(document.createElement("input"), { placeholder: "steer…" });
  input.dataset.testid = "dash-steer-text";
  form.append(input, Object.assign(document.createElement("button"), { type: "submit", textContent: "Steer" }));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (input.value.trim()) post("/api/dashboard/steer", { session_key: key, text: input.value });
    input.value = "";
  });
  return form;
}

// "telegram: up since 12:00:01", "slack: retrying since 12:00:05 — <why>", "web: down — <why>"
function healthLine(name, health) {
  const li = document.createElement("li");
  const since = new Date(health.since).toLocaleTimeString();
  const when = health.state === "down" ? "" : ` since ${since}`;
  li.textContent = `${name}: ${health.state}${when}${health.reason ? ` — ${health.reason}` : ""}`;
  li.className = `health-${health.state}`;
  li.dataset.testid = "platform-health";
  li.dataset.platform = name;
  return li;
}

// "12 entries about people · 3 about chats · 1 for profiles": counts only, never contents.
function memoryLine(counts) {
  $("memory-section").hidden = !counts;
  if (!counts) return;
  $("memory").textContent = `${counts.person} entries about people · ${counts.chat} about chats · ${counts.profile} for profiles`;
}

// Scheduled jobs ([schedule] on): state (why paused), next run, last run and its delivery.
function jobRows(jobs) {
  $("jobs-section").hidden = !jobs;
  if (!jobs) return;
  $("jobs").replaceChildren(...jobs.map((job) => {
    const tr = document.createElement("tr");
    tr.dataset.testid = "job";
    tr.append(cell(job.id), cell(job.who), cell(job.what), cell(job.state), cell(job.next), cell(job.last));
    return tr;
  }));
}

// Model usage today and this month, and the month by profile and model: totals, never people.
function usageLines(usage) {
  $("usage-section").hidden = !usage || !usage.month;
  if (!usage || !usage.month) return;
  const figures = (t) => `${t.calls} calls · ${t.tokens} tokens (${t.cached} cached) · cost ${t.cost.toFixed(4)}`;
  const rows = [["Today", usage.today], ["This month", usage.month],
    ...Object.entries(usage.profiles).map(([name, t]) => [`Profile ${name}`, t]),
    ...Object.entries(usage.models).map(([name, t]) => [`Model ${name}`, t])];
  $("usage").replaceChildren(...rows.map(([label, t]) => {
    const li = document.createElement("li");
    li.textContent = `${label}: ${figures(t)}`;
    return li;
  }));
}

// A running turn keeps its row while it runs: each state (every TICK while a turn runs,
// its elapsed time changing) updates the row's figures in place, so a click on its Stop
// button or a steer half typed is never lost to a row built anew.
const runningRows = new Map();

function runningRow(turn) {
  let row = runningRows.get(turn.session_key);
  if (!row) {
    const tr = document.createElement("tr");
    tr.dataset.testid = "running-turn";
    tr.dataset.session = turn.session_key;
    const cells = [cell(), cell(), cell("", "who"), cell(), cell(), cell(), cell()];
    const actions = document.createElement("td");
    actions.append(button("⏹ Stop", "dash-stop", () => post("/api/dashboard/stop", { session_key: turn.session_key })),
      steerForm(turn.session_key));
    tr.append(...cells, actions);
    row = { tr, cells };
    runningRows.set(turn.session_key, row);
  }
  const figures = [turn.platform, turn.session_key, turn.who,
    turn.elapsed == null ? "" : `${turn.elapsed}s`, turn.iterations, turn.tool, turn.queued];
  row.cells.forEach((td, i) => { td.textContent = figures[i] ?? ""; });
  return row.tr;
}

function runningRowsOf(running) {
  const live = new Set(running.map((turn) => turn.session_key));
  for (const key of runningRows.keys()) if (!live.has(key)) runningRows.delete(key);
  const rows = running.map(runningRow);
  const box = $("running");
  const same = rows.length === box.children.length && rows.every((tr, i) => box.children[i] === tr);
  if (!same) box.replaceChildren(...rows);
}

function render(state) {
  memoryLine(state.memory);
  usageLines(state.usage);
  jobRows(state.jobs);
  $("platforms").replaceChildren(...Object.entries(state.platforms).map(([name, health]) =>
    healthLine(name, health)));
  runningRowsOf(state.running);
  $("approvals").replaceChildren(...state.approvals.map((request) => {
    const tr = document.createElement("tr");
    tr.dataset.testid = "pending-approval";
    const actions = document.createElement("td");
    const decide = (outcome) => () => post("/api/dashboard/decide", { approval_id: request.id, outcome });
    actions.append(button("✅ Approve", "dash-approve", decide("approved")),
      button("❌ Deny", "dash-deny", decide("denied")));
    tr.append(cell(request.platform), cell(request.session_key), cell(request.tool),
      cell(`${request.details}\n${request.prompt}`, "details"), cell(request.requested_by), actions);
    return tr;
  }));
  $("pairing").replaceChildren(...(state.pairing || []).map((request) => {
    const tr = document.createElement("tr");
    tr.dataset.testid = "pairing-request";
    tr.append(cell(request.platform), cell(request.user_id), cell(request.name),
      cell(`${Math.ceil(request.expires_in / 60)} min`));
    return tr;
  }));
  $("recent").replaceChildren(...state.recent.map((turn) => {
    const tr = document.createElement("tr");
    tr.dataset.testid = "recent-turn";
    tr.append(cell(turn.session_key), cell(turn.status), cell(turn.exit_reason), cell(turn.seconds));
    return tr;
  }));
}

// Approve a pairing code: the same answer /pair approve gives in a chat (docs/pairing.md).
$("pair-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const code = $("pair-code").value.trim();
  if (!code) return;
  const response = await fetch("/api/dashboard/pair", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ code }),
  });
  const answer = await response.json().catch(() => ({}));
  $("pair-answer").textContent = answer.message || answer.error || `error ${response.status}`;
  $("pair-code").value = "";
});

const source = new EventSource("/api/dashboard/events");
source.addEventListener("open", () => { $("status").textContent = "live"; });
source.addEventListener("error", () => { $("status").textContent = "reconnecting…"; });
source.addEventListener("state", (e) => render(JSON.parse(e.data)));
