// The web chat page: one EventSource in, fetch POSTs out. The server renders every
// message to sanitised HTML; this script only places it.

const $ = (id) => document.getElementById(id);
const messages = $("messages");
const CONVERSATION_KEY = "commonos.conversation";
const ID_CHARS = /^[A-Za-z0-9_-]{6,64}$/;

function newId() {
  return crypto.randomUUID().replaceAll("-", "");
}

function conversationId() {
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("c");
  if (fromHash && ID_CHARS.test(fromHash)) return fromHash;
  let id = localStorage.getItem(CONVERSATION_KEY);
  if (!id || !ID_CHARS.test(id)) id = newId();
  return id;
}

let conversation = conversationId();
let source = null;

function remember() {
  localStorage.setItem(CONVERSATION_KEY, conversation);
  history.replaceState(null, "", `#c=${conversation}`);
}

// -- rendering ---------------------------------------------------------------------
function fill(node, message) {
  node.className = `msg ${message.role}` + (message.markup === false ? " plain" : "");
  const body = node.querySelector(".body");
  body.innerHTML = message.html; // sanitised by the server (markdown-it, html disabled)
  const row = node.querySelector(".buttons");
  row.replaceChildren();
  for (const line of message.buttons || []) {
    const group = document.createElement("div");
    for (const button of line) {
      const el = document.createElement("button");
      el.type = "button";
      el.textContent = button.label;
      el.dataset.role = button.role || "choice";
      el.addEventListener("click", () => press(message.id, button.data, row));
      group.append(el);
    }
    row.append(group);
  }
}

function show(message) {
  let node = document.getElementById(`m-${message.id}`);
  if (!node) {
    node = document.createElement("article");
    node.id = `m-${message.id}`;
    node.dataset.testid = "message";
    node.append(Object.assign(document.createElement("div"), { className: "body" }));
    node.append(Object.assign(document.createElement("div"), { className: "buttons" }));
    messages.append(node);
  }
  fill(node, message);
  node.scrollIntoView({ block: "end" });
}

function edit(change) {
  const node = document.getElementById(`m-${change.id}`);
  if (node) fill(node, { role: node.classList.contains("user") ? "user" : "bot", ...change });
}

function setBusy(busy) {
  $("running").hidden = !busy;
  if (!busy) endLive(); // a live reply that no reply replaced (suppressed by /stop)
}

// -- the live reply: a streaming reply's text as it arrives (plain text), until the
// rendered reply takes its place (its event carries endsLive) ----------------------------
function liveNode() {
  let node = $("live");
  if (!node) {
    node = document.createElement("article");
    node.id = "live";
    node.className = "msg bot live";
    node.dataset.testid = "live";
    node.append(Object.assign(document.createElement("div"), { className: "body" }));
  }
  if (node !== messages.lastElementChild) messages.append(node);
  return node;
}

function appendLive(text) {
  const node = liveNode();
  node.querySelector(".body").append(text);
  node.scrollIntoView({ block: "end" });
}

function setLive(text) {
  if (!text) { endLive(); return; }
  const node = liveNode();
  node.querySelector(".body").textContent = text;
  node.scrollIntoView({ block: "end" });
}

function endLive() {
  $("live")?.remove();
}

function replacingLive(change, apply) {
  apply(change);
  const live = change.endsLive ? $("live") : null;
  if (!live) return;
  const node = document.getElementById(`m-${change.id}`);
  if (node && node === messages.lastElementChild) live.replaceWith(node); // a new reply
  else live.remove(); // an edited message (progress becoming the reply) stays where it is
}

// -- the event stream ----------------------------------------------------------------
function connect() {
  if (source) source.close();
  messages.replaceChildren();
  source = new EventSource(`/api/events?conversation=${encodeURIComponent(conversation)}`);
  source.addEventListener("open", () => { $("status").textContent = "connected"; });
  source.addEventListener("error", () => { $("status").textContent = "reconnecting…"; });
  source.addEventListener("snapshot", (e) => {
    const data = JSON.parse(e.data);
    messages.replaceChildren();
    data.messages.forEach(show);
    setBusy(data.busy);
  });
  source.addEventListener("message", (e) => replacingLive(JSON.parse(e.data), show));
  source.addEventListener("edit", (e) => replacingLive(JSON.parse(e.data), edit));
  source.addEventListener("delta", (e) => appendLive(JSON.parse(e.data).text));
  source.addEventListener("live", (e) => setLive(JSON.parse(e.data).text));
  source.addEventListener("delete", (e) => {
    document.getElementById(`m-${JSON.parse(e.data).id}`)?.remove();
  });
  source.addEventListener("busy", (e) => setBusy(JSON.parse(e.data).busy));
  source.addEventListener("toast", (e) => toast(JSON.parse(e.data).text));
}

// -- sending -------------------------------------------------------------------------
async function post(path, body, attempts = 4) {
  for (let attempt = 1; ; attempt++) {
    try {
      const response = await fetch(path, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
      if (response.status === 401) { location.reload(); return null; }
      const answer = await response.json();
      if (!response.ok) toast(answer.error || `error ${response.status}`);
      return answer;
    } catch (error) {
      // The same id is sent again: the server runs a message once, however often it arrives.
      if (attempt >= attempts) { toast("not sent: the server is unreachable"); return null; }
      await new Promise((resolve) => setTimeout(resolve, 500 * attempt));
    }
  }
}

function send(text) {
  if (!text.trim()) return;
  post("/api/send", { conversation, id: newId(), text });
}

function press(messageId, data, row) {
  for (const button of row.querySelectorAll("button")) button.disabled = true;
  post("/api/press", { conversation, message: messageId, data });
}

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  send($("text").value);
  $("text").value = "";
});
$("text").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});
$("stop").addEventListener("click", () => send("/stop"));
$("steer-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("steer-text").value.trim();
  if (text) send(`/steer ${text}`);
  $("steer-text").value = "";
});
$("new-chat").addEventListener("click", () => {
  conversation = newId();
  remember();
  setBusy(false);
  connect();
});

remember();
connect();
