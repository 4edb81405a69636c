// The web chat page: one EventSource in, fetch POSTs out. The server renders every
// message to sanitised HTML; this script only places it. Files (the 📎 button, drag and
// drop onto the chat, a pasted image) are uploaded at once and wait as chips until the
// message is sent with their upload ids; names are only ever set as text.

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
  if ("files" in message || "file" in message) showFiles(node.querySelector(".files"), message);
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
    node.append(Object.assign(document.createElement("div"), { className: "files" }));
    node.append(Object.assign(document.createElement("div"), { className: "buttons" }));
    messages.append(node);
  }
  fill(node, message);
  node.scrollIntoView({ block: "end" });
}

function shownSize(size) {
  if (size < 1024) return `${size} B`;
  let value = size / 1024;
  for (const unit of ["KB", "MB", "GB"]) {
    if (value < 1024 || unit === "GB") return `${value.toFixed(1)} ${unit}`;
    value /= 1024;
  }
}

// The files of a message: the user's sent files by name, or a file the agent sent as a
// download link (and a thumbnail for an image), from the conversation's authorised route.
function showFiles(box, message) {
  box.replaceChildren();
  for (const file of message.files || []) {
    const chip = document.createElement("span");
    chip.className = "file";
    chip.dataset.testid = "sent-file";
    chip.textContent = `📎 ${file.name} (${shownSize(file.size)})`;
    box.append(chip);
  }
  const file = message.file;
  if (!file) return;
  if (file.image) {
    const image = Object.assign(document.createElement("img"), { src: file.url, alt: file.name });
    image.className = "thumb";
    box.append(image);
  }
  const link = Object.assign(document.createElement("a"), { href: file.url, download: file.name });
  link.dataset.testid = "file-link";
  link.textContent = `📎 ${file.name}`;
  const size = Object.assign(document.createElement("span"), { className: "size" });
  size.textContent = ` (${shownSize(file.size)})`;
  box.append(link, size);
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

// -- files waiting to be sent: uploaded at once, shown as removable chips ---------------
let pending = [];

function showPending() {
  const box = $("pending");
  box.replaceChildren();
  box.hidden = pending.length === 0;
  for (const item of pending) {
    const chip = document.createElement("span");
    chip.className = "chip" + (item.upload ? "" : " uploading");
    chip.dataset.testid = "pending-file";
    chip.textContent = `📎 ${item.name} (${shownSize(item.size)})`;
    const remove = Object.assign(document.createElement("button"), { type: "button" });
    remove.textContent = "×";
    remove.title = `Remove ${item.name}`;
    remove.dataset.testid = "remove-file";
    remove.addEventListener("click", () => {
      pending = pending.filter((other) => other !== item);
      showPending();
    });
    chip.append(remove);
    box.append(chip);
  }
}

async function uploadFile(file) {
  const form = new FormData();
  form.append("file", file, file.name || "pasted");
  const path = `/api/upload?conversation=${encodeURIComponent(conversation)}`;
  try {
    const response = await fetch(path, { method: "POST", body: form });
    if (response.status === 401) { location.reload(); return null; }
    const answer = await response.json();
    if (!response.ok) { toast(`${file.name}: ${answer.error || response.status}`); return null; }
    return answer;
  } catch (error) {
    toast(`${file.name}: not uploaded (the server is unreachable)`);
    return null;
  }
}

function attach(files) {
  for (const file of files) {
    const item = { name: file.name || "pasted image", size: file.size, upload: null };
    item.done = uploadFile(file).then((answer) => {
      if (answer) Object.assign(item, { upload: answer.upload, name: answer.name });
      else pending = pending.filter((other) => other !== item);
      showPending();
    });
    pending.push(item);
  }
  showPending();
}

function command(text) {
  post("/api/send", { conversation, id: newId(), text }); // the pending files stay pending
}

async function send(text) {
  const sending = pending;
  if (!text.trim() && sending.length === 0) return;
  pending = [];
  showPending();
  await Promise.all(sending.map((item) => item.done));
  const uploads = sending.filter((item) => item.upload).map((item) => item.upload);
  if (!text.trim() && uploads.length === 0) return;
  post("/api/send", { conversation, id: newId(), text, uploads });
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
$("text").addEventListener("paste", (e) => {
  const files = [...(e.clipboardData?.files || [])];
  if (files.length) { e.preventDefault(); attach(files); }
});
$("attach").addEventListener("click", () => $("file-input").click());
$("file-input").addEventListener("change", (e) => {
  attach([...e.target.files]);
  e.target.value = "";
});
document.body.addEventListener("dragover", (e) => {
  if (e.dataTransfer?.types.includes("Files")) {
    e.preventDefault();
    document.body.classList.add("dropping");
  }
});
document.body.addEventListener("dragleave", (e) => {
  if (e.target === document.body || !e.relatedTarget) document.body.classList.remove("dropping");
});
document.body.addEventListener("drop", (e) => {
  document.body.classList.remove("dropping");
  if (!e.dataTransfer?.files.length) return;
  e.preventDefault();
  attach([...e.dataTransfer.files]);
});
$("stop").addEventListener("click", () => command("/stop"));
$("steer-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("steer-text").value.trim();
  if (text) command(`/steer ${text}`);
  $("steer-text").value = "";
});
$("new-chat").addEventListener("click", () => {
  conversation = newId();
  pending = [];
  showPending();
  remember();
  setBusy(false);
  connect();
});

remember();
connect();
